"""Build tests/node/fake_nvml.c into a libnvidia-ml.so.1 that the real pynvml can load."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Optional

import pytest

SOURCE = Path(__file__).with_name("fake_nvml.c")
LIBRARY_NAME = "libnvidia-ml.so.1"

_built: dict[tuple[str, ...], Path] = {}


def build_fake_nvml(directory: Path, without: Iterable[str] = ()) -> Path:
    """Compile the fake into directory/libnvidia-ml.so.1; returns its path.

    without: NVML entry points to leave out, as a library older than them lacks them.
    """
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("tests/node/test_nvml.py needs gcc to build the fake NVML library (apt-get install gcc)")
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / LIBRARY_NAME
    command = [gcc, "-std=c99", "-D_DEFAULT_SOURCE", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC"]
    command += [f"-DFAKE_NVML_WITHOUT_{name}" for name in sorted(without)]
    result = subprocess.run([*command, "-o", str(target), str(SOURCE)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.fail(f"gcc could not build {SOURCE.name}:\n{result.stderr}")
    return target


def fake_nvml_library(factory: pytest.TempPathFactory, without: Iterable[str] = ()) -> Path:
    """The fake library (lacking the entry points in without), built once per test session and variant.

    Once loaded, the dynamic loader keeps the file mapped and hands the same copy to every later load of the
    path, so a rebuild would not be seen anyway; the fake reads its configuration at each init instead, and each
    variant lives at a path of its own.
    """
    key = tuple(sorted(set(without)))
    built = _built.get(key)
    if built is None or not built.exists():
        built = _built[key] = build_fake_nvml(factory.mktemp("fake-nvml"), key)
    return built


def fake_nvml_calls(library: str, name: Optional[str] = None) -> int:
    """How often the fake at library had its entry point name (None: any) called since its last init began."""
    # The same path gives the copy pynvml loaded, whose counters these are.
    counter = ctypes.CDLL(library).fakeNvmlCalls
    counter.restype = ctypes.c_uint
    counter.argtypes = [ctypes.c_char_p]
    return int(counter(None if name is None else name.encode()))
