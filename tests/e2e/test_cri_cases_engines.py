"""The verdicts tests/e2e/test_cri_cases.py holds lint to are what the engines do: every case of
tests/e2e/cri_cases.py run again on cri-o (../shared/peers) and on containerd 1.7 and 2.1 through CRI. A case
counts as the same where the engine again runs the container with its devices, or again does not (refused, or
started without a device): cri-o joins an empty host_path to / and walks the machine's whole filesystem, whose
contents move a case between those two (cri-o runs with the build trees of this machine out of its view:
tests/e2e/crio.py `build_trees`). A minute of daemons, so scripts/test runs it once, on Debian's python3."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.e2e.cri_cases import ENGINES, VERDICTS, WITH_DEVICE, measure
from tests.e2e.crio import skip_reason
from tests.podman_env import unmount_below

pytestmark = [pytest.mark.runtime, pytest.mark.root]

RECORDED: dict[str, dict[str, str]] = json.loads(VERDICTS.read_text())


@pytest.mark.parametrize("engine", ENGINES)
def test_the_recorded_verdicts_are_what_the_engine_does(engine: str) -> None:
    if engine == "crio" and skip_reason() is not None:
        pytest.skip(skip_reason())
    # Not under pytest's temporary directories, which cri-o does not see (tests/e2e/crio.py build_trees).
    workdir = Path(tempfile.mkdtemp(prefix="cri-cases-", dir="/tmp"))
    try:
        measured = measure(workdir, engine)
    finally:
        unmount_below(workdir)
        shutil.rmtree(workdir, ignore_errors=True)
    assert sorted(measured) == sorted(RECORDED)
    changed = [
        f"{case}: recorded {RECORDED[case][engine]}, now {verdict.verdict} ({verdict.step}: {verdict.error})"
        for case, verdict in measured.items()
        if (RECORDED[case][engine] == WITH_DEVICE) != (verdict.verdict == WITH_DEVICE)
    ]
    assert not changed, "\n".join(changed)
