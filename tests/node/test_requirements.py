"""nvidia_oci_hook.nvidia.requirements against NVIDIA's own code (the verdicts tests/node/requirement_corpus.py
recorded from requirements_oracle.go), plus what the recording cannot show: unknown properties, refusal texts."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.nvidia.requirements import (
    CLI,
    TOOLKIT,
    NodeProperties,
    Requirement,
    Verdict,
    cli_refusal_for,
    evaluate,
    legacy_hook_refusal,
    requirements_from_env,
)
from tests.node.requirement_corpus import NODES, recorded

CASES = recorded()
CHECKERS = {"cli": CLI, "toolkit": TOOLKIT}
REPOSITORY = Path(__file__).resolve().parents[2]

H100 = NodeProperties(cuda="12.4", driver="550.54.15", arch="9.0", brand="Tesla")
CUDA_IMAGE = "cuda>=12.8 brand=tesla,driver>=470,driver<471 brand=tesla,driver>=535,driver<536"


def _env(case: dict[str, Any]) -> dict[str, str]:
    # As image.WithEnv reads the list: split at the first "=", the last of a name wins.
    return dict(entry.split("=", 1) for entry in case["env"])


def _unsatisfied_text(message: str) -> bool:
    return message.startswith("unsatisfied condition: ") or message.endswith(" not met")


def _ours(case: dict[str, Any], checker: str) -> Verdict:
    return evaluate(requirements_from_env(_env(case)), NodeProperties(**case["node"]), checker)


def test_the_recording_covers_the_corpus() -> None:
    assert len(CASES) >= 300
    for name in CHECKERS:
        verdicts = [case["nvidia"][name] for case in CASES]
        assert sum(v["satisfied"] for v in verdicts) > 150
        assert sum(v["malformed"] for v in verdicts) > 150
        assert sum(any(map(_unsatisfied_text, v["errors"])) for v in verdicts) > 150
        assert sum(len(v["errors"]) > 1 for v in verdicts) > 10  # several failing: NVIDIA's order decides
    assert {tuple(sorted(case["node"].items())) for case in CASES} == {tuple(sorted(n.items())) for n in NODES.values()}
    # The two checkers disagree often enough that both models are exercised on their differences.
    assert sum(case["nvidia"]["cli"]["satisfied"] != case["nvidia"]["toolkit"]["satisfied"] for case in CASES) > 50


def test_the_requirements_are_those_nvidia_finds() -> None:
    wrong = []
    for case in CASES:
        found = requirements_from_env(_env(case))
        errors = [r.error for r in found if r.error is not None]
        if case["nvidia"]["env_error"] is not None:
            if errors != [case["nvidia"]["env_error"]]:
                wrong.append((case["env"], errors, case["nvidia"]["env_error"]))
        elif errors or sorted(r.text for r in found) != case["nvidia"]["requirements"]:
            wrong.append((case["env"], [r.text for r in found], case["nvidia"]["requirements"]))
    assert not wrong, wrong[:10]


@pytest.mark.parametrize("name", list(CHECKERS))
def test_same_verdict_and_texts_as_nvidia(name: str) -> None:
    """Satisfied or not, every error text NVIDIA's code can give, and which kinds of failure (malformed,
    unsatisfied) there are, on every recorded case."""
    wrong = []
    for case in CASES:
        nvidia = case["nvidia"][name]
        ours = _ours(case, CHECKERS[name])
        unsatisfied = any(map(_unsatisfied_text, nvidia["errors"]))
        malformed_kind = any(not _unsatisfied_text(message) for message in nvidia["errors"])
        if (
            ours.satisfied != nvidia["satisfied"]
            or set(ours.messages) != set(nvidia["errors"])
            or (ours.message is not None) != (not nvidia["satisfied"])
            or (ours.message is not None and ours.message not in nvidia["errors"])
            or (ours.unsatisfied is not None) != unsatisfied
            or bool(ours.errors) != malformed_kind
        ):
            wrong.append((case["env"], case["node"], nvidia, ours))
    assert not wrong, wrong[:10]


PARSE_ERRORS = ("invalid constraint: ", "invalid version string: ")


def test_toolkit_malformed_means_refused_before_any_assertion() -> None:
    for case in CASES:
        ours = _ours(case, TOOLKIT)
        parse_error = any(
            e.message.startswith(("invalid constraint: ", "invalid version string: ")) for e in ours.errors
        )
        assert parse_error == case["nvidia"]["toolkit"]["malformed"], case


def test_the_legacy_hook_prints_what_the_cli_printed() -> None:
    for case in CASES:
        nvidia = case["nvidia"]["cli"]
        refusal = legacy_hook_refusal(_ours(case, CLI))
        if nvidia["satisfied"]:
            assert refusal is None, case
        elif case["nvidia"]["env_error"] is not None:
            assert refusal == f"failed to get requirements {case['nvidia']['env_error']}"
        else:
            assert refusal in {f"nvidia-container-cli: requirement error: {m}" for m in nvidia["errors"]}, case


@pytest.mark.parametrize(
    ("text", "node", "satisfied"),
    [
        # brand decides the only term that could hold
        ("cuda>=12.8 brand=tesla,driver>=550,driver<551", NodeProperties("12.4", "550.54.15", "9.0"), None),
        # the driver fails every branded term, so the brand does not matter
        ("cuda>=12.8 brand=tesla,driver>=470,driver<471", NodeProperties("12.4", "550.54.15", "9.0"), False),
        # the cuda term holds on its own
        ("cuda>=12.4 brand=tesla,driver>=470,driver<471", NodeProperties("12.4", "550.54.15", "9.0"), True),
        ("arch>=8.0", NodeProperties(cuda="12.4", driver="550.54.15"), None),
        ("arch>=8.0 cuda>=12", NodeProperties(cuda="12.4", driver="550.54.15"), True),
        ("cuda>=99,arch>=8.0", NodeProperties(cuda="12.4", driver="550.54.15"), False),
        ("brand=tesla,arch>=9.0", NodeProperties(cuda="12.4"), None),
        ("brand!=tesla,driver>=999", NodeProperties(cuda="12.4", driver="550.54.15"), False),
    ],
)
@pytest.mark.parametrize("checker", [CLI, TOOLKIT])
def test_unknown_properties(text: str, node: NodeProperties, satisfied: bool | None, checker: str) -> None:
    verdict = evaluate([Requirement("NVIDIA_REQUIRE_CUDA", text)], node, checker)
    assert verdict.satisfied is satisfied
    if satisfied is None:
        missing = {name for name in ("cuda", "driver", "arch", "brand") if node.get(name) is None}
        assert verdict.unknown and verdict.unknown <= missing
        assert verdict.message is None and not verdict.errors and verdict.unsatisfied is None
    else:
        assert not verdict.unknown
    if satisfied is False:
        assert verdict.unsatisfied == Requirement("NVIDIA_REQUIRE_CUDA", text)


def test_unknown_requirements_combine_with_known_ones() -> None:
    node = NodeProperties(cuda="12.4", driver="550.54.15")  # no NVML: no brand, no arch
    undecided = Requirement("NVIDIA_REQUIRE_A", "brand=tesla")
    holds = Requirement("NVIDIA_REQUIRE_B", "cuda>=12")
    fails = Requirement("NVIDIA_REQUIRE_C", "driver>=560")
    assert evaluate([undecided, holds], node).satisfied is None
    verdict = evaluate([undecided, fails, holds], node)
    assert verdict.satisfied is False and verdict.unsatisfied == fails
    assert verdict.failed_factors == ("driver>=560",)
    assert verdict.message == "unsatisfied condition: driver>=560"


def test_an_error_reached_whatever_the_unknown_is() -> None:
    node = NodeProperties(cuda="12.4", driver="550.54.15")
    # The cli takes = and != only for brand, whatever the brand is; the toolkit compares it as a string.
    cli = evaluate([Requirement("NVIDIA_REQUIRE_CUDA", "brand<tesla")], node, CLI)
    assert cli.satisfied is False and [e.message for e in cli.errors] == ["invalid expression"]
    assert evaluate([Requirement("NVIDIA_REQUIRE_CUDA", "brand<tesla")], node, TOOLKIT).satisfied is None
    # The cli stops at the first term that holds: a bad term after an unknown one may or may not be reached.
    lazy = evaluate([Requirement("NVIDIA_REQUIRE_CUDA", "brand=tesla cuda>=x")], node, CLI)
    assert lazy.satisfied is None and lazy.unknown == {"brand"}
    assert lazy.messages == {"invalid expression"}
    # The toolkit reads every value first: the bad one fails it however the brand turns out.
    eager = evaluate([Requirement("NVIDIA_REQUIRE_CUDA", "brand=tesla cuda>=x")], node, TOOLKIT)
    assert eager.satisfied is False and eager.message == "invalid version string: invalid semantic version"


def test_csv_mode_sees_an_empty_driver_and_brand() -> None:
    jetson = NodeProperties(cuda="12.6", driver="", arch="8.7", brand="")
    driver = evaluate(requirements_from_env({"NVIDIA_REQUIRE_CUDA": "cuda>=12.2 driver>=540"}), jetson, TOOLKIT)
    assert driver.satisfied is True  # the cuda term holds
    verdict = evaluate(requirements_from_env({"NVIDIA_REQUIRE_CUDA": "driver>=540"}), jetson, TOOLKIT)
    assert verdict.satisfied is False
    assert verdict.message == "invalid value for driver: invalid semantic version"
    brand = evaluate(requirements_from_env({"NVIDIA_REQUIRE_CUDA": "brand=tesla"}), jetson, TOOLKIT)
    assert brand.message == "unsatisfied condition: brand=tesla (brand=)"


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ("cuda>=12.8", "unsatisfied condition: cuda>=12.8, please update your driver to a newer version, or use an earlier cuda container"),  # noqa: E501
        # several terms: the first one is named, whichever failed
        (CUDA_IMAGE, "unsatisfied condition: cuda>=12.8, please update your driver to a newer version, or use an earlier cuda container"),  # noqa: E501
        ("brand=tesla,driver>=560 cuda>=12.8", "unsatisfied condition: brand=tesla,driver>=560"),
        ("driver>=560", "unsatisfied condition: driver>=560"),
        ("cuda>12.4", "unsatisfied condition: cuda>12.4"),  # the hint needs "cuda>=" exactly
        ("CUDA>=12.8", "unsatisfied condition: CUDA>=12.8"),
        (" cuda>=12.8", "unsatisfied condition: "),  # the text up to its first space
        ("cuda>=12.8\tbrand=tesla", "invalid expression"),
        ("cuda >= 12.8", "invalid expression"),
        ("cuda>=12.8,foo=1", "unsatisfied condition: cuda>=12.8,foo=1, please update your driver to a newer version, or use an earlier cuda container"),  # noqa: E501
        ("foo=1,cuda>=12.8", "invalid expression"),
    ],
)  # fmt: skip
def test_legacy_hook_refusal(text: str, refusal: str) -> None:
    verdict = evaluate([Requirement("NVIDIA_REQUIRE_CUDA", text)], H100)
    assert verdict.satisfied is False
    assert legacy_hook_refusal(verdict) == f"nvidia-container-cli: requirement error: {refusal}"
    if refusal.startswith("unsatisfied"):
        assert cli_refusal_for(text) == legacy_hook_refusal(verdict)


def test_legacy_hook_refusal_elsewhere() -> None:
    assert legacy_hook_refusal(evaluate([Requirement("NVIDIA_REQUIRE_CUDA", "cuda>=12")], H100)) is None
    assert legacy_hook_refusal(evaluate([Requirement("NVIDIA_REQUIRE_CUDA", "brand=tesla")], NodeProperties())) is None
    assert legacy_hook_refusal(evaluate(requirements_from_env({"CUDA_VERSION": "twelve"}), H100)) == (
        "failed to get requirements failed to get version: invalid CUDA version twelve: "
        "invalid version string: invalid semantic version"
    )
    many = [Requirement(f"NVIDIA_REQUIRE_{i}", "cuda>=1") for i in range(33)]
    assert legacy_hook_refusal(evaluate(many, H100)) == "nvidia-container-cli: input error: too many requirements"
    assert evaluate(many[:32], H100).satisfied is True
    with pytest.raises(ValueError, match="checker=CLI"):
        legacy_hook_refusal(evaluate(many, H100, TOOLKIT))


def test_the_checkers_differ_on_brand_case_and_unknown_properties() -> None:
    text = [Requirement("NVIDIA_REQUIRE_CUDA", "cuda>=12.8 brand=tesla,driver>=550,driver<551")]
    assert evaluate(text, H100, CLI).satisfied is True  # libnvidia-container's "Tesla" meets "tesla"
    toolkit = evaluate(text, H100, TOOLKIT)
    assert toolkit.satisfied is False
    assert toolkit.message == "cuda>=12.8||brand=tesla&&driver>=550&&driver<551 not met"
    unknown_property = [Requirement("NVIDIA_REQUIRE_L4T", "l4t>=35")]
    assert evaluate(unknown_property, H100, TOOLKIT).satisfied is True  # skipped
    assert evaluate(unknown_property, H100, CLI).message == "invalid expression"


@pytest.mark.parametrize(
    ("value", "disabled"),
    [("true", True), ("1", True), ("T", True), ("True", True), ("TRUE", True), ("t", True), ("false", False),
     ("0", False), ("yes", False), ("on", False), (" true", False), ("", False), ("garbage", False)],
)  # fmt: skip
def test_disable_require(value: str, disabled: bool) -> None:
    env = {"NVIDIA_DISABLE_REQUIRE": value, "NVIDIA_REQUIRE_CUDA": "cuda>=99", "CUDA_VERSION": "99.1"}
    assert (requirements_from_env(env) == []) is disabled
    assert requirements_from_env(env, disable_require=True) == []


def test_requirements_from_env() -> None:
    env = {
        "NVIDIA_REQUIRE_B": "driver>=1",
        "NVIDIA_REQUIRE_A": "cuda>=1",
        "NVIDIA_REQUIRE_JETPACK": "csv-mounts=all",
        "NVIDIA_REQUIRE_JETPACK_X": "x",
        "CUDA_VERSION": "12.4.1",
        "NVIDIA_VISIBLE_DEVICES": "all",
    }
    assert requirements_from_env(env) == [
        Requirement("NVIDIA_REQUIRE_A", "cuda>=1"),
        Requirement("NVIDIA_REQUIRE_B", "driver>=1"),
        Requirement("CUDA_VERSION", "cuda>=12.4"),  # legacy: no NVIDIA_REQUIRE_CUDA
    ]
    assert requirements_from_env({"CUDA_VERSION": "12", "NVIDIA_REQUIRE_CUDA": ""}) == [
        Requirement("NVIDIA_REQUIRE_CUDA", ""),
        Requirement("CUDA_VERSION", "cuda>=12.0"),
    ]
    assert requirements_from_env({"CUDA_VERSION": "12.4", "NVIDIA_REQUIRE_CUDA": "cuda>=12.0"}) == [
        Requirement("NVIDIA_REQUIRE_CUDA", "cuda>=12.0")
    ]
    assert requirements_from_env({"CUDA_VERSION": ""}) == []


def test_records_are_values() -> None:
    assert NodeProperties(cuda="12.4") == NodeProperties("12.4") != NodeProperties("12.4", brand="Tesla")
    assert len({NodeProperties("12.4"), NodeProperties("12.4")}) == 1
    assert repr(Requirement("CUDA_VERSION", "cuda>=12.4")) == (
        "Requirement(variable='CUDA_VERSION', text='cuda>=12.4', error=None)"
    )
    with pytest.raises(AttributeError):
        H100.cuda = "13.0"
    with pytest.raises(ValueError, match="unknown checker"):
        evaluate([], H100, "docker")


def test_imports_fast_and_alone() -> None:
    """Under 2 ms once compiled, beyond the modules the rest of the package already loads, and nothing new."""
    program = (
        "import dataclasses, typing, collections.abc, __future__, sys, time, nvidia_oci_hook.nvidia\n"
        "before = set(sys.modules)\n"
        "start = time.perf_counter()\n"
        "import nvidia_oci_hook.nvidia.requirements\n"
        "seconds = time.perf_counter() - start\n"
        "new = sorted(set(sys.modules) - before - {'nvidia_oci_hook.nvidia.requirements'})\n"
        "print(seconds, *new)\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    times = []
    with tempfile.TemporaryDirectory() as prefix:
        env["PYTHONPYCACHEPREFIX"] = prefix  # the first run compiles, the others load the bytecode
        for _ in range(7):
            result = subprocess.run(
                [sys.executable, "-c", program], cwd=REPOSITORY, env=env, capture_output=True, text=True, check=True
            )
            seconds, *new = result.stdout.split()
            assert new == [], new
            times.append(float(seconds))
    assert min(times[1:]) < 0.002, times
