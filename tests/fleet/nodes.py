"""The fleet's fake nodes, doctor run on them, and the text exposition format read back.

The nodes are the seeds' broken ones and their healthy twins, built as tests/node builds them (real device
nodes: mknod needs root). `nodes/*.prom` holds what doctor --format prometheus writes for each, so that the alert
tests need neither root nor a doctor run; test_alerts.py checks those files against doctor's output.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

from tests.helpers import FakeHost
from tests.node.fakenodes import (
    CONTAINER,
    container_driver,
    driver_libraries,
    host_driver,
    loaded_module,
    operator_toolkit,
    seed_000,
    seed_003,
    upgraded_without_reboot,
)
from tests.node.test_lint_node import containerd_node, crio_node

SNAPSHOTS = Path(__file__).parent / "nodes"
# Values that change with every run: the snapshots keep them as written once, and the comparison skips them.
PER_RUN = ("nvidia_oci_hook_last_run_timestamp_seconds", "nvidia_oci_hook_doctor_duration_seconds")


VERSION = "550.54.15"


def one_version(host: FakeHost, *roots: str) -> FakeHost:
    """The module loaded and each driver root's libraries of its version: the state the seeds' nodes are in."""
    loaded_module(host, VERSION)
    for root in roots:
        driver_libraries(host, VERSION, root)
    return host


def seed_003_node(host: FakeHost) -> FakeHost:
    """Seed 003 on a cri-o node: the driver in a container, NVML's nodes left in the host's /dev, each the same
    device as the driver root's own, so doctor --fix can remove them."""
    return operator_toolkit(crio_node(one_version(seed_003(host), CONTAINER)))


def seed_000_node(host: FakeHost) -> FakeHost:
    """Seed 000 on a containerd node: the driver on the host, toolkit-ready left without host-driver-ready, a CDI
    spec generated for /run/nvidia/driver, and the GPU Operator's toolkit configured for that root too."""
    return operator_toolkit(containerd_node(one_version(seed_000(host), "/"), "/run/nvidia/driver"))


def healthy_node(host: FakeHost) -> FakeHost:
    """Seed 003's node as it should be: the driver and its nodes in the container's root only."""
    return operator_toolkit(crio_node(one_version(container_driver(host), CONTAINER)))


def ambiguous_node(host: FakeHost) -> FakeHost:
    """A host driver and a driver container both: doctor cannot tell which root is the driver's."""
    return crio_node(one_version(container_driver(host_driver(host)), "/", CONTAINER))


def driver_upgraded_node(host: FakeHost) -> FakeHost:
    """A host driver upgraded without a reboot: the module 550.54.15, the libraries 545.23.08."""
    return crio_node(upgraded_without_reboot(host, VERSION, "545.23.08"))


NODES: dict[str, Callable[[FakeHost], FakeHost]] = {
    "seed-003": seed_003_node,
    "seed-000": seed_000_node,
    "healthy": healthy_node,
    "ambiguous": ambiguous_node,
    "driver-upgraded": driver_upgraded_node,
}


def doctor(host_root: Path, *extra: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The real command, in a child process, as the systemd timer runs it."""
    return subprocess.run(
        [sys.executable, "-m", "nvidia_oci_hook", "doctor", "--host-root", str(host_root), *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$")


def samples(text: str) -> dict[str, float]:
    """series (name and labels, as written) -> value, for every sample line of an exposition."""
    found = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        found[match[1] + (match[2] or "")] = float(match[3])
    return found


def with_labels(series: str, **labels: str) -> str:
    """A series with more labels, as promtool's input_series and PromQL write them."""
    name, _, rest = series.partition("{")
    added = ",".join(f'{key}="{value}"' for key, value in labels.items())
    return f"{name}{{{added}{',' + rest if rest else '}'}"
