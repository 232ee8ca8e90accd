"""Build tests/node/fake_nvml.c into a libnvidia-ml.so.1 that the real pynvml can load."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest

SOURCE = Path(__file__).with_name("fake_nvml.c")
LIBRARY_NAME = "libnvidia-ml.so.1"

_built: Optional[Path] = None


def build_fake_nvml(directory: Path) -> Path:
    """Compile the fake into directory/libnvidia-ml.so.1; returns its path."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("tests/node/test_nvml.py needs gcc to build the fake NVML library (apt-get install gcc)")
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / LIBRARY_NAME
    command = [gcc, "-std=c99", "-D_DEFAULT_SOURCE", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC"]
    result = subprocess.run([*command, "-o", str(target), str(SOURCE)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.fail(f"gcc could not build {SOURCE.name}:\n{result.stderr}")
    return target


def fake_nvml_library(factory: pytest.TempPathFactory) -> Path:
    """The fake library, built once per test session.

    Once loaded, the dynamic loader keeps the file mapped and hands the same copy to every later load of the
    path, so a rebuild would not be seen anyway; the fake reads its configuration at each init instead.
    """
    global _built
    if _built is None or not _built.exists():
        _built = build_fake_nvml(factory.mktemp("fake-nvml"))
    return _built
