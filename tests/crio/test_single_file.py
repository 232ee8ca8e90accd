"""A cri-o file linted on its own is read as cri-o reads it, even when Python's TOML parser refuses it."""

from __future__ import annotations

from pathlib import Path

from nvidia_oci_hook.lint import LintOptions, lint_paths
from tests.helpers import codes


def test_byte_order_mark_in_crio_conf_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "crio.conf"
    path.write_bytes(b'\xef\xbb\xbf[crio.runtime]\ndefault_runtime = "crun"\n')
    run = lint_paths([str(path)], LintOptions(offline=True, schema_only=True))
    (result,) = run.files
    assert result.kind == "crio"
    assert codes(result.findings) == []
