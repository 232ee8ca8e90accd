"""lint's verdict on NVIDIA Container Toolkit's config.toml agrees with the real nvidia-container-runtime 1.20.0's:
every case of tests/toolkit/agreement.py (a config.toml, or none, on a fake node) is run against the runtime again
and must decide as agreement.json recorded (`python -m tests.toolkit.agreement` records it again), and
`lint --node` on the same node, as toolkit 1.20.0, must give the runtime's verdict: refused where it says NCT001 at
error, fails where it says another error of the toolkit's config, fine otherwise.

Where lint is known to say otherwise than the runtime, KNOWN_DISAGREEMENTS holds the case and why; the test fails
once lint agrees there, so that the entry goes.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.toolkit.agreement import (
    FAILS,
    FINE,
    REFUSED,
    TOOLKIT_RELEASE,
    VERDICTS,
    Base,
    Case,
    Unavailable,
    build_root,
    cases,
    measure,
    recorded,
    session,
    skip_reason,
    tally,
)

RECORDING = recorded()
CASES = cases()
TOOLKIT_KIND = "nvidia-container-toolkit"

# case id -> why lint is known to say otherwise than the runtime.
KNOWN_DISAGREEMENTS: dict[str, str] = {}


def _skip_unless_runnable() -> None:
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)


def test_the_recording_covers_every_case() -> None:
    assert sorted(RECORDING) == [case.id for case in CASES]
    assert 120 <= len(CASES) <= 200
    for case in CASES:
        entry = RECORDING[case.id]
        assert entry["config"] == case.config, case.id
        assert entry["verdict"] in VERDICTS, case.id
    assert set(KNOWN_DISAGREEMENTS) <= set(RECORDING)
    counted = tally(entry["verdict"] for entry in RECORDING.values())
    assert all(counted.values()), counted
    # Most cases name a mode of their own, so that not everything is jit-cdi failing for want of a driver.
    jit = sum(entry["mode"] == "jit-cdi" for entry in RECORDING.values())
    assert jit < len(RECORDING) / 4, jit


@pytest.mark.root
def test_the_runtime_decides_as_recorded(record_property: Any) -> None:
    _skip_unless_runnable()
    try:
        outcomes, seconds = measure(CASES)
    except Unavailable as error:
        pytest.fail(str(error))
    drifted = [
        f"{case.id}: recorded {json.dumps(_signature(RECORDING[case.id]))}, now {json.dumps(outcome.signature())}"
        for case in CASES
        for outcome in [outcomes[case.id]]
        if outcome.signature() != _signature(RECORDING[case.id])
    ]
    counted = tally(outcome.verdict for outcome in outcomes.values())
    record_property("runtime_verdicts", json.dumps(counted))
    print(f"nvidia-container-runtime {TOOLKIT_RELEASE}: {len(outcomes)} cases in {seconds:.1f} s: {counted}")
    assert not drifted, "\n".join(drifted)


def _signature(entry: dict[str, Any]) -> dict[str, Any]:
    return {key: entry[key] for key in ("verdict", "exit", "text", "gained")}


@pytest.fixture(scope="module")
def base() -> Iterator[Base]:
    _skip_unless_runnable()
    with session() as made:
        yield made


def _lint_verdict(root: Path) -> tuple[str, list[str]]:
    """lint's verdict on the node at root, and its findings on the toolkit's config, as `CODE severity: message`."""
    from nvidia_oci_hook.findings import Severity
    from nvidia_oci_hook.lint import LintOptions, lint_paths

    run = lint_paths((), LintOptions(node=True, host_root=str(root), toolkit_release=TOOLKIT_RELEASE))
    findings = [finding for result in run.files if result.kind == TOOLKIT_KIND for finding in result.findings]
    said = [f"{finding.code} {finding.severity.name.lower()}: {finding.message}" for finding in findings]
    errors = [finding for finding in findings if finding.severity == Severity.ERROR]
    if any(finding.code == "NCT001" for finding in errors):
        return REFUSED, said
    return (FAILS if errors else FINE), said


@pytest.mark.root
def test_lint_agrees_with_the_runtime(base: Base, record_property: Any) -> None:
    wrong: list[str] = []
    agreed = 0
    for number, case in enumerate(CASES):
        root = base.dir / f"lint-{number}"
        build_root(case, base, root)
        try:
            verdict, said = _lint_verdict(root)
        except Exception as error:  # one case's crash is reported among the disagreements, not in their place
            verdict, said = "raised", [f"{type(error).__name__}: {error}"]
        finally:
            shutil.rmtree(root, ignore_errors=True)
        entry = RECORDING[case.id]
        known = KNOWN_DISAGREEMENTS.get(case.id)
        if verdict == entry["verdict"]:
            agreed += 1
            if known is not None:
                wrong.append(f"{case.id}: lint agrees now ({verdict}): remove its KNOWN_DISAGREEMENTS entry")
        elif known is None:
            wrong.append(_disagreement(case, entry, verdict, said))
    record_property("lint_agreed", f"{agreed} of {len(CASES)}")
    print(f"lint agrees with nvidia-container-runtime {TOOLKIT_RELEASE} on {agreed} of {len(CASES)} cases")
    if wrong:
        pytest.fail(f"{len(wrong)} of {len(CASES)} cases:\n" + "\n".join(wrong), pytrace=False)


def _disagreement(case: Case, entry: dict[str, Any], verdict: str, said: list[str]) -> str:
    return "\n".join(
        [
            f"{case.id}: runtime {entry['verdict']} (exit {entry['exit']}: {_one_line(entry['text'])}), lint {verdict}",
            f"  config: {json.dumps(case.config)}",
            *(f"  lint: {_one_line(line)}" for line in said or ["no finding on the toolkit's config"]),
        ]
    )


def _one_line(text: str) -> str:
    return text.replace("\n", "\\n")
