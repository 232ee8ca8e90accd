"""leanos computes paths as os.path does on POSIX, and hands out the same system calls, without importing os."""

from __future__ import annotations

import itertools
import os
import posixpath
import random
import subprocess
from pathlib import Path

import pytest

from nvidia_oci_hook import leanos
from tests.runtime.support import INTERPRETER

REPOSITORY = Path(__file__).resolve().parents[2]

PARTS = ["", "/", "//", "///", ".", "..", "a", "b.c", "...", ".hidden", "dev", "nvidia0", " ", "é", "a\\b"]


def generated_paths(count: int, seed: int) -> list[str]:
    chooser = random.Random(seed)
    paths = ["".join(parts) for parts in itertools.product(PARTS, repeat=2)]
    for _ in range(count):
        paths.append("".join(chooser.choice(PARTS + ["/"] * 6) for _ in range(chooser.randrange(1, 9))))
    return paths


PATHS = generated_paths(3000, seed=22)


@pytest.mark.parametrize("name", ["normpath", "dirname", "basename", "split", "abspath"])
def test_path_functions_agree_with_posixpath(name: str) -> None:
    ours, theirs = getattr(leanos, name), getattr(posixpath, name)
    disagreements = [path for path in PATHS if ours(path) != theirs(path)]
    assert disagreements == []


def test_join_agrees_with_posixpath() -> None:
    pairs = list(itertools.product(PARTS, repeat=2)) + [tuple(PATHS[i : i + 3]) for i in range(0, 600, 3)]
    assert [parts for parts in pairs if leanos.join(*parts) != posixpath.join(*parts)] == []


def test_file_predicates_agree_with_os_path(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to("file")
    (tmp_path / "dangling").symlink_to("missing")
    names = ["file", "dir", "link", "dangling", "missing", "file/below", "bad\0name"]
    for name in names:
        path = str(tmp_path / name)
        assert leanos.exists(path) == os.path.exists(path), name
        assert leanos.isfile(path) == os.path.isfile(path), name
    assert leanos.samefile(str(tmp_path / "link"), str(tmp_path / "file"))
    assert not leanos.samefile(str(tmp_path / "dir"), str(tmp_path / "file"))
    assert leanos.realpath(str(tmp_path / "link")) == os.path.realpath(tmp_path / "link")


def test_environment_is_the_current_one_decoded_as_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NVIDIA_OCI_HOOK_TEST_VALUE", "caf\udce9")  # an undecodable byte, as os.environ holds it
    assert leanos.environ() == dict(os.environ)
    monkeypatch.delenv("NVIDIA_OCI_HOOK_TEST_VALUE")
    assert "NVIDIA_OCI_HOOK_TEST_VALUE" not in leanos.environ()
    assert leanos.fsencode("caf\udce9") == os.fsencode("caf\udce9")


def test_system_calls_are_the_ones_os_exports() -> None:
    # What leanos defines itself, of the names os has too: the rest must be os's own objects.
    defined_here = {"environ", "fsencode", "makedirs"}
    shared = [name for name in leanos.__all__ if name in vars(os)]
    assert len(shared) > 40
    assert [name for name in shared if (getattr(leanos, name) is getattr(os, name)) == (name in defined_here)] == []


def test_importing_it_imports_no_os() -> None:
    program = f"import sys; sys.path.insert(0, {str(REPOSITORY)!r}); import nvidia_oci_hook.leanos; print(sys.modules)"
    result = subprocess.run([INTERPRETER, "-I", "-S", "-c", program], capture_output=True, text=True, check=True)
    assert "'nvidia_oci_hook.leanos'" in result.stdout and "'os'" not in result.stdout
