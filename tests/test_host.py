from __future__ import annotations

from nvidia_oci_hook.host import HostView, owning_root, rewrite_for_existing_root
from tests.helpers import FakeHost

ROOTS = ("/", "/run/nvidia/driver")


def test_absolute_links_resolve_inside_the_root(fake_host: FakeHost) -> None:
    fake_host.file("/usr/lib/libcuda.so.550.1").symlink("/usr/lib/libcuda.so.1", "/usr/lib/libcuda.so.550.1")
    fake_host.symlink("/lib", "/usr/lib")
    view = HostView(str(fake_host.root))
    assert view.exists("/lib/libcuda.so.1")
    assert view.identity("/lib/libcuda.so.1").type == "file"  # type: ignore[union-attr]
    assert not view.exists("/lib/libnvidia-ml.so.1")
    assert not view.exists("relative/path")


def test_link_loops_end(fake_host: FakeHost) -> None:
    fake_host.symlink("/a", "/b").symlink("/b", "/a")
    assert not HostView(str(fake_host.root)).exists("/a/x")


def test_dotdot_cannot_escape_the_root(fake_host: FakeHost) -> None:
    fake_host.file("/etc/hostname")
    view = HostView(str(fake_host.root))
    assert view.exists("/../../etc/hostname")
    assert not view.exists("/../../../../../bin/sh")


def test_owning_root_matches_whole_components() -> None:
    assert owning_root(ROOTS, "/run/nvidia/driver/usr/bin/x") == ("/run/nvidia/driver", "usr/bin/x")
    assert owning_root(ROOTS, "/run/nvidia/driver2/usr/bin/x") == ("/", "run/nvidia/driver2/usr/bin/x")


def test_rewrite_needs_the_whole_relative_path(fake_host: FakeHost) -> None:
    fake_host.file("/usr/lib/libcuda.so.1").directory("/run/nvidia/driver/usr/lib")
    view = HostView(str(fake_host.root))
    rewrite = rewrite_for_existing_root(view, ROOTS, "/run/nvidia/driver/usr/lib/libcuda.so.1")
    assert rewrite is not None and rewrite.rewritten == "/usr/lib/libcuda.so.1"
    assert rewrite_for_existing_root(view, ROOTS, "/run/nvidia/driver/usr/lib/libnvidia-ml.so.1") is None
    assert rewrite_for_existing_root(view, ROOTS, "/usr/lib/libcuda.so.1") is None  # exists: nothing to do


def test_rewrite_towards_the_driver_container(fake_host: FakeHost) -> None:
    fake_host.file("/run/nvidia/driver/usr/bin/nvidia-smi")
    rewrite = rewrite_for_existing_root(HostView(str(fake_host.root)), ROOTS, "/usr/bin/nvidia-smi")
    assert rewrite is not None and rewrite.rewritten == "/run/nvidia/driver/usr/bin/nvidia-smi"


def test_link_identity_does_not_follow_the_last_link(fake_host: FakeHost, as_root: None) -> None:
    fake_host.device("/run/nvidia/driver/dev/nvidia0", "c", 195, 0).directory("/dev")
    fake_host.symlink("/dev/nvidia0", "/run/nvidia/driver/dev/nvidia0").symlink("/dev/gone", "/nowhere")
    fake_host.symlink("/devices", "/run/nvidia/driver/dev")
    view = HostView(str(fake_host.root))
    assert view.identity("/dev/nvidia0") == view.link_identity("/run/nvidia/driver/dev/nvidia0")
    assert view.link_identity("/dev/nvidia0").type == "symbolic link"  # type: ignore[union-attr]
    assert view.link_identity("/dev/gone").type == "symbolic link"  # type: ignore[union-attr]
    assert view.identity("/dev/gone") is None
    # Links above the last component are followed, as lstat does.
    assert view.link_identity("/devices/nvidia0").type == "c"  # type: ignore[union-attr]
    assert view.link_identity("/missing/nvidia0") is None
