from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


# Suites that hold a daemon (containerd, cri-o, the kubelet, podman's conmon, prometheus), a port, or mounts of the
# machine run one after another, on one worker, when the suite runs on several cores (pytest -n, tests/conftest.py
# is pytest-xdist's only configuration); every other module is one unit of work, so that its module fixtures are
# built once. The packages' suites (which share dist/ and the Debian roots they build) are a second such lane.
SERIAL_LANES = {
    "serial-daemons": (
        "tests/e2e/",
        "tests/kubelet/",
        "tests/containerd/test_claims.py",
        "tests/containerd/test_daemon.py",
        "tests/containerd/test_real_containerd.py",
        "tests/containerd/test_release_daemons.py",
        "tests/fleet/test_prometheus_e2e.py",
        "tests/hooksd/test_corpus.py",
        "tests/hooksd/test_directories.py",
    ),
    "serial-packages": (
        "tests/kubernetes/test_image.py",
        "tests/packaging/",
    ),
}
SERIAL = tuple(path for paths in SERIAL_LANES.values() for path in paths)
# scripts/test runs three interpreters side by side, and some of these suites judge what runs on the whole machine
# (doctor's gpu-access reads every runc container's state; the kubelet's node, cdi resolve and lint --node find
# the running daemons in /proc): while one of those runs, nothing else may hold a daemon or a container. A
# machine-wide lock keeps that: each serial module shares it while it runs, each of these holds it alone. A
# turnstile taken first lets a module that waits to hold it alone stop newcomers from sharing it meanwhile.
WHOLE_MACHINE = (
    "tests/e2e/test_cdi_resolve.py",
    "tests/e2e/test_gpu_access.py",
    "tests/kubelet/",
)
LOCKS = Path(tempfile.gettempdir())
SERIAL_LOCK = LOCKS / "nvidia-oci-hook-tests.serial.lock"
TURNSTILE = LOCKS / "nvidia-oci-hook-tests.turnstile.lock"


def _is_serial(path: str) -> bool:
    return path.startswith(SERIAL)


@pytest.fixture(scope="module", autouse=True)
def serial_suite(request: pytest.FixtureRequest) -> Iterator[None]:
    """Autouse fixtures of a scope come first: the lock is held before the module's own daemons start, and from
    its first test's setup to its last test's teardown."""
    path = Path(str(request.path)).resolve().relative_to(Path(__file__).resolve().parents[1]).as_posix()
    if not _is_serial(path):
        yield
        return
    mode = fcntl.LOCK_EX if path.startswith(WHOLE_MACHINE) else fcntl.LOCK_SH
    with open(TURNSTILE, "a") as turnstile, open(SERIAL_LOCK, "a") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, mode)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which turns the groups into units of work
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # not a worker of a distributed run
        return
    serial = []
    others = []
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        lane = next((name for name, paths in SERIAL_LANES.items() if path.startswith(paths)), None)
        item.add_marker(pytest.mark.xdist_group(lane or path))
        (serial if lane else others).append(item)
    # Within a lane, the modules that hold the machine alone run first or last, as scripts/test asks: first in the
    # runs of the other interpreters, whose lanes are short, last in Debian's, whose lane is the longest unit of the
    # whole run. Debian's then waits for the others' only at its start, and the others' are over before its own.
    first = os.environ.get("NVIDIA_OCI_HOOK_TESTS_EXCLUSIVE") == "first"
    serial.sort(key=lambda item: item.nodeid.startswith(WHOLE_MACHINE) != first)
    # The lanes are the longest units: they start first, so that the other units fill the time around them.
    items[:] = serial + others


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, absent where it is not loaded (-p no:xdist)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """On the controller, as each worker reports its tests: the groups must be in their ids, or xdist scatters
    every module over both workers (each then builds the module's fixtures) and breaks the serial lanes up."""
    if node.config.getvalue("dist") != "loadgroup":
        return
    scattered = [nodeid for nodeid in ids if "@" not in nodeid.rpartition("]")[2]]
    if scattered:
        raise pytest.UsageError(
            f"pytest {pytest.__version__} with this pytest-xdist does not group tests ({scattered[0]} has no group "
            "in its id): use the pytest that pyproject.toml allows"
        )
