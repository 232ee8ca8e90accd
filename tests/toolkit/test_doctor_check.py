"""doctor's nvidia-toolkit check on the seeds' nodes: the GPU Operator's toolkit configured for a driver root the
node does not use (seed 000), and for the one it does (seed 003's driver container)."""

from __future__ import annotations

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.base import ERROR, OK
from nvidia_oci_hook.node.checks.toolkit import toolkit_check
from nvidia_oci_hook.node.doctor import CHECK_NAMES
from tests.fleet.nodes import healthy_node, seed_000_node, seed_003_node
from tests.helpers import FakeHost
from tests.node.fakenodes import OPERATOR_TOOLKIT_CONFIG, seed_000


def test_seed_000_the_operators_toolkit_reads_the_driver_container_root(fake_host: FakeHost, as_root: None) -> None:
    check = toolkit_check(HostView(str(seed_000_node(fake_host).root)), Settings())
    assert check.status == ERROR and check.counts["errors"] >= 1
    root_lines = [line for line in check.evidence if " NCT101 " in line]
    assert len(root_lines) == 1 and line_names_both_roots(root_lines[0])
    assert root_lines[0].startswith(f"{OPERATOR_TOOLKIT_CONFIG}:2:")


def line_names_both_roots(line: str) -> bool:
    return "driver root is /run/nvidia/driver" in line and "the node's driver is under /" in line


def test_seed_003_the_operators_toolkit_reads_the_container_that_holds_the_driver(
    fake_host: FakeHost, as_root: None
) -> None:
    check = toolkit_check(HostView(str(seed_003_node(fake_host).root)), Settings())
    assert check.status == OK and check.counts == {"errors": 0, "warnings": 0}, check.evidence


def test_healthy_node_passes_and_a_node_without_the_toolkit_has_nothing_to_judge(
    fake_host: FakeHost, as_root: None
) -> None:
    assert toolkit_check(HostView(str(healthy_node(fake_host).root)), Settings()).status == OK
    bare = toolkit_check(HostView(str(seed_000(FakeHost(fake_host.root.parent / "bare")).root)), Settings())
    assert bare.status == OK and "no NVIDIA Container Toolkit" in bare.summary and not bare.counts


def test_the_check_runs_with_doctor_before_the_engines_configs() -> None:
    assert CHECK_NAMES.index("nvidia-toolkit") < CHECK_NAMES.index("engine-configs")
