"""The verdicts tests/containerd/test_release_agreement.py holds lint to are what the real containerd releases do:
every variant (tests/containerd/variants.py) run again on each release Debian carries, in a mount namespace of
its own. It takes a minute and more, so scripts/test runs it once, on Debian's python3."""

from __future__ import annotations

import json

import pytest

from tests.containerd.real import binaries
from tests.containerd.variants import VERDICTS, measure_all

RECORDED: dict[str, dict[str, str]] = json.loads(VERDICTS.read_text())


@pytest.mark.runtime
@pytest.mark.root
def test_the_recorded_verdicts_are_what_the_releases_do() -> None:
    found = binaries()
    assert {binary.version for binary in found} == {release for by in RECORDED.values() for release in by}, found
    measured = measure_all(found)
    changed = [
        f"{variant}: containerd {release} recorded {RECORDED[variant][release]}, now {verdict.verdict} "
        f"({verdict.evidence})"
        for variant, by_release in measured.items()
        for release, verdict in by_release.items()
        if RECORDED[variant][release] != verdict.verdict
    ]
    assert not changed, "\n".join(changed)
