"""Every config of the schema-agreement corpus (real specs from runc, crun, containerd and podman, enriched and
mutated) through the engine: nothing raises, and a spec the runtime-spec schema accepts stays acceptable."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.engine.pipeline import plan
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.schema import fast_check
from tests.documents.corpus import corpus

pytestmark = [pytest.mark.runtime, pytest.mark.root]  # the corpus is generated with the real runtimes


def test_specs_runc_accepts_pass_through_unharmed(tmp_path: Path) -> None:
    valid = fast_check("oci")
    host = HostView(str(tmp_path))  # an empty node: nothing to move, no CDI spec
    settings = Settings(cdi_spec_dirs=("/etc/cdi",))
    checked = changed = 0
    for name, kind, document in corpus():
        if kind != "oci":
            continue
        before = valid(document)
        result = plan(document, host, settings)  # must not raise, whatever the shape
        if not before:
            continue
        checked += 1
        assert valid(result.config), f"{name}: the reconciled spec no longer passes the schema"
        if result.changed:
            changed += 1
            assert {edit.code for edit in result.edits} <= {"DEV001", "DEV002", "DEV003"}, name
        else:
            assert result.config is document, name
    assert checked > 500 and changed > 0, (checked, changed)
