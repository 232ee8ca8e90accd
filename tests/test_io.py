"""Atomic writes: a writer killed at any moment leaves the old file or the new one, with mode and owner kept."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nvidia_oci_hook.io import write_atomic

WRITER = """
import sys
from nvidia_oci_hook.io import write_atomic
path, size = sys.argv[1], int(sys.argv[2])
sys.stdout.write("ready\\n"); sys.stdout.flush()
while True:
    write_atomic(path, b"N" * size)
    write_atomic(path, b"O" * size)
"""


def test_mode_and_owner_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("old")
    os.chmod(path, 0o600)
    if os.geteuid() == 0:
        os.chown(path, 1234, 5678)
    write_atomic(str(path), b"new")
    info = os.stat(path)
    assert path.read_bytes() == b"new"
    assert info.st_mode & 0o777 == 0o600
    if os.geteuid() == 0:
        assert (info.st_uid, info.st_gid) == (1234, 5678)
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_a_new_file_gets_ordinary_permissions(tmp_path: Path) -> None:
    write_atomic(str(tmp_path / "out.json"), b"{}")
    assert os.stat(tmp_path / "out.json").st_mode & 0o777 == 0o644


def test_a_stale_temporary_file_does_not_block_the_write(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    (tmp_path / f".config.json.{os.getpid()}.tmp").write_text("half")
    write_atomic(str(path), b"whole")
    assert path.read_bytes() == b"whole"


def test_unwritable_directory_raises_and_leaves_the_file(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "config.json"
    with pytest.raises(OSError):
        write_atomic(str(path), b"x")


def test_killed_writer_leaves_old_or_new_never_a_mix(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    size = 2 * 1024 * 1024  # several write() calls per file
    path.write_bytes(b"O" * size)
    randomness = random.Random(4)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    kills = 0  # during a write
    for _ in range(40):
        command = [sys.executable, "-c", WRITER, str(path), str(size)]
        with subprocess.Popen(command, stdout=subprocess.PIPE, env=env) as writer:
            assert writer.stdout is not None
            writer.stdout.readline()
            time.sleep(randomness.uniform(0.0, 0.05))
            writer.send_signal(signal.SIGKILL)
            writer.wait()
        content = path.read_bytes()
        assert content in (b"N" * size, b"O" * size)
        # A temporary file left behind means the kill landed in the middle of a write.
        for leftover in tmp_path.glob(".config.json.*.tmp"):
            kills += 1
            leftover.unlink()
    assert kills > 0, "no kill landed during a write: the test proved nothing"


# Creates its own temporary as write_atomic would, then waits to be killed: what a wrapper killed between its
# write and its rename leaves.
HALF_WRITER = """
import os, sys, time
fd = os.open(os.path.join(sys.argv[1], f".config.json.{os.getpid()}.tmp"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, b'{"half": ')
sys.stdout.write("ready\\n"); sys.stdout.flush()
time.sleep(60)
"""


def _half_writer(directory: Path) -> subprocess.Popen[bytes]:
    writer = subprocess.Popen([sys.executable, "-c", HALF_WRITER, str(directory)], stdout=subprocess.PIPE)
    assert writer.stdout is not None
    assert writer.stdout.readline() == b"ready\n"
    return writer


def _dead_pid(directory: Path) -> int:
    """The pid of a writer that left its temporary in directory and was killed (and reaped)."""
    writer = _half_writer(directory)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    writer.stdout.close()  # type: ignore[union-attr]
    return writer.pid


def test_the_temporary_of_a_killed_writer_is_removed_by_the_next_write(tmp_path: Path) -> None:
    pid = _dead_pid(tmp_path)
    stale = tmp_path / f".config.json.{pid}.tmp"
    assert stale.exists()
    write_atomic(str(tmp_path / "config.json"), b"{}")
    assert not stale.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_the_temporary_of_a_live_writer_is_kept(tmp_path: Path) -> None:
    writer = _half_writer(tmp_path)
    try:
        live = tmp_path / f".config.json.{writer.pid}.tmp"
        write_atomic(str(tmp_path / "config.json"), b"{}")
        assert live.read_bytes() == b'{"half": '
    finally:
        writer.kill()
        writer.wait()
        writer.stdout.close()  # type: ignore[union-attr]


def test_only_regular_temporaries_of_that_file_are_removed(tmp_path: Path) -> None:
    pid = _dead_pid(tmp_path)
    (tmp_path / f".config.json.{pid}.tmp").unlink()
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "precious"
    target.write_text("kept")
    link = tmp_path / f".config.json.{pid}.tmp"
    link.symlink_to(target)
    other_file = tmp_path / f".state.json.{pid}.tmp"  # another file's: its own next write judges it
    other_file.write_text("x")
    not_a_pid = tmp_path / ".config.json.12x.tmp"
    not_a_pid.write_text("x")
    write_atomic(str(tmp_path / "config.json"), b"{}")
    assert link.is_symlink() and target.read_text() == "kept"
    assert other_file.exists() and not_a_pid.exists()
