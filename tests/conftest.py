from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import FakeHost


@pytest.fixture
def fake_host(tmp_path: Path) -> FakeHost:
    root = tmp_path / "host"
    root.mkdir()
    return FakeHost(root)


@pytest.fixture
def as_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("this test needs root (mknod); run the suite as root, as CI does")
