"""CRI container configs judged for the engine that runs them (`lint --kind cri --engine crio|containerd`),
against what cri-o 1.37 and containerd 1.7.24 and 2.1.9 did with each of 158 GPU-style configs
(tests/e2e/cri_cases.py, verdicts in cri_cases.json): an error where the engine refuses the container or starts
it without a device it asked for, and no refusal where it runs the container with its devices.
tests/e2e/test_cri_cases_engines.py runs them on the engines again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.findings import Severity
from nvidia_oci_hook.kinds.cri import CRI_CONTAINER
from nvidia_oci_hook.lint import LintOptions, lint_paths
from tests.e2e.cri_cases import REFUSED, VERDICTS, WITH_DEVICE, WITHOUT_DEVICE, Case, _prepare, cases

pytestmark = pytest.mark.root  # the node state holds device nodes (mknod)

RECORDED: dict[str, dict[str, str]] = json.loads(VERDICTS.read_text())
# What says the engine refuses the container, or that it starts without a device (not CRI010: a default device's
# path given to another device, which the container starts with).
REFUSALS = {
    "CRI001",
    "CRI002",
    "CRI003",
    "CRI004",
    "CRI006",
    "CRI007",
    "CRI008",
    "CRI009",
    "GPU005",
    "REC001",
    "REC003",
    "HOST002",
}
ENGINE_OF = {"crio": "crio", "containerd-1.7": "containerd", "containerd-2.1": "containerd"}


def container_config(case: Case) -> dict[str, Any]:
    """The case as crictl's JSON ContainerConfig: what the kubelet sends."""
    return {
        "metadata": {"name": "main"},
        "image": {"image": "busybox"},
        "command": ["true"],
        "devices": [{"container_path": c, "host_path": h, "permissions": p} for h, c, p in case.devices],
        "CDI_devices": [{"name": name} for name in case.cdi_devices],
        "annotations": dict(case.annotations),
        "linux": {"security_context": {"privileged": case.privileged}},
    }


def errors(path: Path, engine: str, spec_dir: Path) -> list[str]:
    options = LintOptions(kind=CRI_CONTAINER, settings=Settings(cdi_spec_dirs=(str(spec_dir),)), cri_engine=engine)
    (result,) = lint_paths([str(path)], options).files
    return [f"{f.code} {f.message}" for f in result.findings if f.severity == Severity.ERROR and f.code in REFUSALS]


def test_lint_judged_for_each_engine_agrees_with_it(tmp_path: Path) -> None:
    node, spec_dir = _prepare(tmp_path)
    generated = {case.id: case for case in cases(node)}
    assert sorted(generated) == sorted(RECORDED) and len(generated) >= 150
    wrong = []
    checked = 0
    for case_id, by_engine in RECORDED.items():
        path = tmp_path / "configs" / (case_id.replace("/", "_") + ".json")
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(container_config(generated[case_id])))
        for engine, verdict in by_engine.items():
            found = errors(path, ENGINE_OF[engine], spec_dir)
            if verdict in (REFUSED, WITHOUT_DEVICE) and not found:
                wrong.append(f"{case_id}: {engine} {verdict}, lint says nothing")
            elif verdict == WITH_DEVICE and found:
                wrong.append(f"{case_id}: {engine} runs it with its devices, lint says {found}")
            checked += 1
    assert not wrong, f"{len(wrong)} of {checked}:\n" + "\n".join(wrong)
    assert checked == 3 * len(RECORDED)


def test_the_outcome_lint_gives_is_the_engines_own(tmp_path: Path) -> None:
    """Beyond error or not: the outcome the rules give for the engine (refused, or started without a device) is the
    one it had, case by case, for every engine."""
    from nvidia_oci_hook.findings import OUTCOME_REFUSED, OUTCOME_WITHOUT_DEVICE
    from nvidia_oci_hook.host import HostView
    from nvidia_oci_hook.rules.base import Context, all_rules, judged

    node, spec_dir = _prepare(tmp_path)
    generated = {case.id: case for case in cases(node)}
    rules = [rule for rule in all_rules() if rule.applies_to(CRI_CONTAINER) and rule.check is not None]
    settings = Settings(cdi_spec_dirs=(str(spec_dir),))
    wrong = []
    counts = {REFUSED: 0, WITHOUT_DEVICE: 0, WITH_DEVICE: 0}
    for case_id, by_engine in RECORDED.items():
        config = container_config(generated[case_id])
        for engine, verdict in by_engine.items():
            context = Context(host=HostView("/"), settings=settings, cri_engine=ENGINE_OF[engine])
            outcomes = set()
            for rule in rules:
                assert rule.check is not None
                for problem in rule.check(config, context):
                    kept = judged(problem, context)
                    if kept is not None and kept.outcome is not None:
                        outcomes.add(kept.outcome)
            said = (
                REFUSED
                if OUTCOME_REFUSED in outcomes
                else WITHOUT_DEVICE
                if OUTCOME_WITHOUT_DEVICE in outcomes
                else WITH_DEVICE
            )
            counts[verdict] += 1
            if said != verdict:
                wrong.append(f"{case_id}: {engine} {verdict}, lint's outcome {said}")
    assert not wrong, "\n".join(wrong)
    assert all(counts.values()), counts
