from __future__ import annotations

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.driver import (
    AMBIGUOUS,
    FOUND,
    NONE,
    resolve_driver_root,
    stray_device_nodes,
    strays_beside,
)
from tests.helpers import FakeHost
from tests.node.fakenodes import container_driver, driver_container_restarting, host_driver, seed_000, seed_003

ROOTS = ("/", "/run/nvidia/driver")


def resolve(host: FakeHost):  # type: ignore[no-untyped-def]
    view = HostView(str(host.root))
    return view, resolve_driver_root(view, ROOTS)


def test_host_driver(fake_host: FakeHost, as_root: None) -> None:
    view, answer = resolve(host_driver(fake_host))
    assert (answer.status, answer.root, answer.dev_root()) == (FOUND, "/", "/")
    assert "/usr/bin/nvidia-smi" in answer.reason and answer.module_loaded
    assert stray_device_nodes(view, answer) == []


def test_container_driver(fake_host: FakeHost, as_root: None) -> None:
    view, answer = resolve(container_driver(fake_host))
    assert (answer.status, answer.root, answer.dev_root()) == (FOUND, "/run/nvidia/driver", "/run/nvidia/driver")
    assert stray_device_nodes(view, answer) == []


def test_both_is_ambiguous(fake_host: FakeHost, as_root: None) -> None:
    _, answer = resolve(container_driver(host_driver(fake_host)))
    assert (answer.status, answer.root) == (AMBIGUOUS, None)
    assert "/, /run/nvidia/driver" in answer.reason


def test_neither(fake_host: FakeHost, as_root: None) -> None:
    fake_host.device("/dev/nvidia0", "c", 195, 0)  # a node alone is no driver
    _, answer = resolve(fake_host)
    assert (answer.status, answer.root) == (NONE, None)


def test_stray_nodes_of_seed_003(fake_host: FakeHost, as_root: None) -> None:
    view, answer = resolve(seed_003(fake_host))
    assert answer.root == "/run/nvidia/driver"
    assert stray_device_nodes(view, answer) == ["/dev/nvidia0", "/dev/nvidiactl"]


def test_seed_000_markers_do_not_fool_the_resolver(fake_host: FakeHost, as_root: None) -> None:
    _, answer = resolve(seed_000(fake_host))
    assert (answer.status, answer.root) == (FOUND, "/")


def test_a_driver_root_with_only_its_nodes(fake_host: FakeHost, as_root: None) -> None:
    """No user space anywhere: the driver is not found, but the one root whose dev/ holds the nodes still says where
    the driver's nodes are, and the host's are judged against it."""
    driver_container_restarting(fake_host).device("/dev/nvidia0", "c", 195, 0)
    view, answer = resolve(fake_host)
    assert (answer.status, answer.root, answer.dev_only_root()) == (NONE, None, "/run/nvidia/driver")
    assert stray_device_nodes(view, answer) == [], "the driver root is not found"
    assert strays_beside(view, answer.dev_only_root()) == ["/dev/nvidia0"]


def test_no_dev_only_root_where_the_nodes_do_not_decide(fake_host: FakeHost, as_root: None) -> None:
    fake_host.device("/dev/nvidia0", "c", 195, 0)
    _, answer = resolve(fake_host)
    assert answer.dev_only_root() is None, "nodes on the host's /dev alone say nothing"
    driver_container_restarting(fake_host).device("/opt/driver/dev/nvidia0", "c", 195, 0)
    answer = resolve_driver_root(HostView(str(fake_host.root)), (*ROOTS, "/opt/driver"))
    assert answer.dev_only_root() is None, "two roots with nodes: which is the driver's is not known"
    _, answer = resolve(fake_host.executable("/run/nvidia/driver/usr/bin/nvidia-smi"))
    assert (answer.status, answer.dev_only_root()) == (FOUND, None), "a found driver root decides instead"


def test_the_host_dev_itself_under_the_driver_root_holds_no_strays(fake_host: FakeHost, as_root: None) -> None:
    """The driver root's dev/ is the host's /dev (mounted or linked there): its nodes are the very files."""
    container_driver(fake_host)
    (fake_host.root / "run/nvidia/driver/dev/nvidia0").unlink()
    (fake_host.root / "run/nvidia/driver/dev/nvidiactl").unlink()
    (fake_host.root / "run/nvidia/driver/dev").rmdir()
    fake_host.symlink("/run/nvidia/driver/dev", "/dev")
    fake_host.device("/dev/nvidiactl", "c", 195, 255).device("/dev/nvidia0", "c", 195, 0)
    view, answer = resolve(fake_host)
    assert (answer.status, answer.dev_root()) == (FOUND, "/run/nvidia/driver")
    assert stray_device_nodes(view, answer) == []
