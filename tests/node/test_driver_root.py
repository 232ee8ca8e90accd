from __future__ import annotations

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.driver import AMBIGUOUS, FOUND, NONE, resolve_driver_root, stray_device_nodes
from tests.helpers import FakeHost
from tests.node.fakenodes import container_driver, host_driver, seed_000, seed_003

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
