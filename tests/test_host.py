from __future__ import annotations

import os
from pathlib import Path

import pytest

from nvidia_oci_hook.host import HostView, owning_root, rewrite_for_existing_root
from nvidia_oci_hook.io import ReadError
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


def test_a_node_s_var_run_link_is_the_node_s_run(fake_host: FakeHost) -> None:
    fake_host.directory("/var").symlink("/var/run", "/run").file("/run/cdi/nvidia.yaml")
    view = HostView(str(fake_host.root))
    assert view.list_dir("/var/run/cdi") == ["nvidia.yaml"]
    assert view.canonical("/var/run/cdi/nvidia.yaml") == "/run/cdi/nvidia.yaml"
    assert view.glob("/var/run/cdi/*.yaml") == ["/var/run/cdi/nvidia.yaml"]


def test_links_that_climb_out_land_inside(fake_host: FakeHost, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("outside")
    fake_host.symlink("/etc", "../../outside").directory("/usr")
    fake_host.symlink("/usr/passwd", "/etc/passwd")  # this machine's file, by an absolute target
    relative_depth = "../" * len(fake_host.root.parts)
    fake_host.symlink("/usr/deep", f"{relative_depth}{outside.relative_to('/')}/secret")
    view = HostView(str(fake_host.root))
    assert view.read_text("/etc/secret") is None
    assert view.read_text("/usr/passwd") is None
    assert view.read_text("/usr/deep") is None
    assert view.canonical("/etc") is None  # /outside does not exist inside the root


def test_writes_stay_inside_through_links(fake_host: FakeHost, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    fake_host.symlink("/dev/char", str(outside)).symlink("/etc", "/../../..").symlink("/sys", "../" * 12)
    view = HostView(str(fake_host.root))
    # An absolute target restarts at the root, where that directory does not exist: nothing is made anywhere.
    with pytest.raises(FileNotFoundError):
        view.makedirs("/dev/char/x")
    with pytest.raises(FileNotFoundError):
        view.symlink("../nvidia0", "/dev/char/195:0")
    # ".." stops at the root: /etc and /sys are the root itself.
    view.makedirs("/etc/crio/crio.conf.d")
    view.write_atomic("/etc/crio/crio.conf.d/99.conf", b"written")
    view.symlink("nvidia0", "/sys/195:0")
    assert list(outside.iterdir()) == []
    assert (fake_host.root / "crio/crio.conf.d/99.conf").read_text() == "written"
    assert os.readlink(fake_host.root / "195:0") == "nvidia0"
    view.unlink("/sys/195:0")
    assert not os.path.lexists(fake_host.root / "195:0")


def test_a_last_component_link_is_replaced_not_followed(fake_host: FakeHost, tmp_path: Path) -> None:
    outside = tmp_path / "outside.conf"
    outside.write_text("theirs")
    fake_host.directory("/etc/crio/crio.conf.d")
    (fake_host.root / "etc/crio/crio.conf.d/99.conf").symlink_to(outside)
    HostView(str(fake_host.root)).write_atomic("/etc/crio/crio.conf.d/99.conf", b"ours")
    assert outside.read_text() == "theirs"
    assert (fake_host.root / "etc/crio/crio.conf.d/99.conf").read_text() == "ours"


def test_only_regular_files_are_read(fake_host: FakeHost) -> None:
    fake_host.directory("/run")
    os.mkfifo(fake_host.root / "run/fifo")
    view = HostView(str(fake_host.root))
    assert view.read_text("/run/fifo") is None  # a FIFO would block the read
    with pytest.raises(ReadError, match="not a file"):
        view.read_bytes("/run/fifo")
    with pytest.raises(ReadError, match="is a directory"):
        view.read_bytes("/run")


def test_many_directories_in_one_run(fake_host: FakeHost) -> None:
    for pid in range(400):  # a node's /proc: more directories than the view keeps open
        (fake_host.root / f"proc/{pid}").mkdir(parents=True)
        (fake_host.root / f"proc/{pid}/cmdline").write_bytes(b"x\0")
    view = HostView(str(fake_host.root))
    assert all(view.read_prefix(f"/proc/{pid}/cmdline", 16) == b"x\0" for pid in range(400))
    assert all(view.read_prefix(f"/proc/{pid}/../{pid}/cmdline", 16) == b"x\0" for pid in range(0, 400, 7))


def test_read_only_root(fake_host: FakeHost) -> None:
    assert HostView(str(fake_host.root)).read_only() is False
