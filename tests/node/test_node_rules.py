"""NODE rules on fake node roots: each seed's broken state triggers, the healthy twin does not."""

from __future__ import annotations

from typing import Callable

import pytest

from nvidia_oci_hook.findings import Finding
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.collection import NODE, Collection
from nvidia_oci_hook.lint import LintOptions, ResultSet, active_rules, lint_collection
from nvidia_oci_hook.rules.base import Context, all_rules
from tests.helpers import FakeHost
from tests.node.fakenodes import container_driver, driver_container_restarting, host_driver, seed_000, seed_003


def node_findings(host: FakeHost) -> list[Finding]:
    view = HostView(str(host.root))
    results = ResultSet()
    lint_collection(
        Collection(NODE, [str(host.root)]),
        active_rules(LintOptions()),
        lambda: Context(host=view),
        results,
    )
    return [finding for result in results.sorted() for finding in result.findings]


def contradicting_driver_ready(host: FakeHost) -> FakeHost:
    host_driver(host)
    host.file("/run/nvidia/validations/driver-ready")
    (host.root / "run/nvidia/validations/driver-ready").write_text("IS_HOST_DRIVER=false\n")
    return host


def host_driver_ready_without_host_driver(host: FakeHost) -> FakeHost:
    container_driver(host)
    host.file("/run/nvidia/validations/host-driver-ready")
    return host


def healthy_host(host: FakeHost) -> FakeHost:
    host_driver(host)
    host.file("/run/nvidia/validations/host-driver-ready").file("/run/nvidia/validations/toolkit-ready")
    (host.root / "run/nvidia/validations/driver-ready").write_text("IS_HOST_DRIVER=true\nNVIDIA_DRIVER_ROOT=/\n")
    return host


def healthy_container(host: FakeHost) -> FakeHost:
    container_driver(host)
    host.file("/run/nvidia/validations/toolkit-ready")
    return host


def strays_beside_a_restarting_driver_container(host: FakeHost) -> FakeHost:
    driver_container_restarting(host)
    host.device("/dev/nvidia0", "c", 195, 0)
    return host


CASES: list[tuple[str, Callable[[FakeHost], FakeHost], Callable[[FakeHost], FakeHost]]] = [
    ("NODE001", seed_000, healthy_host),
    ("NODE001", contradicting_driver_ready, healthy_host),
    ("NODE001", host_driver_ready_without_host_driver, healthy_container),
    ("NODE002", seed_003, healthy_container),
    ("NODE002", strays_beside_a_restarting_driver_container, driver_container_restarting),
]


def test_every_node_rule_has_a_case() -> None:
    # NODE003 judges the files the node's discovery chose: its cases are in test_distributions.py.
    cased = {code for code, _, _ in CASES} | {"NODE003"}
    assert cased == {rule.code for rule in all_rules() if NODE in rule.kinds}


@pytest.mark.root
@pytest.mark.parametrize(("code", "broken", "healthy"), CASES, ids=[f"{c}-{b.__name__}" for c, b, _ in CASES])
def test_trigger_and_clean_twin(
    code: str, broken: Callable[[FakeHost], FakeHost], healthy: Callable[[FakeHost], FakeHost],
    fake_host: FakeHost, tmp_path_factory: pytest.TempPathFactory, as_root: None,
) -> None:  # fmt: skip
    assert code in [f.code for f in node_findings(broken(fake_host))]
    twin = FakeHost(tmp_path_factory.mktemp("healthy"))
    assert [f.code for f in node_findings(healthy(twin))] == []


@pytest.mark.root
def test_seed_000_names_the_cause_and_the_fix(fake_host: FakeHost, as_root: None) -> None:
    (finding,) = node_findings(seed_000(fake_host))
    assert finding.path == "/run/nvidia/validations/toolkit-ready"
    assert "NVIDIA_DRIVER_ROOT=/run/nvidia/driver" in finding.message
    assert "lstat /run/nvidia/driver/dev/nvidiactl: no such file or directory" in finding.message
    assert finding.hint is not None and finding.hint.startswith("rm -f /run/nvidia/validations/*-ready")


@pytest.mark.root
def test_seed_003_names_every_stray_node(fake_host: FakeHost, as_root: None) -> None:
    findings = node_findings(seed_003(fake_host))
    assert [(f.code, f.path) for f in findings] == [
        ("NODE002", "/dev/nvidia0"),
        ("NODE002", "/dev/nvidiactl"),
    ]
    assert "already exists on the host" in findings[0].message
