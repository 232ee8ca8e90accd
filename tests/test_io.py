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
