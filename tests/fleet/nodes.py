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
from tests.node.fakenodes import container_driver, host_driver, seed_000, seed_003
from tests.node.test_lint_node import containerd_node, crio_node

SNAPSHOTS = Path(__file__).parent / "nodes"
# Values that change with every run: the snapshots keep them as written once, and the comparison skips them.
PER_RUN = ("nvidia_oci_hook_last_run_timestamp_seconds", "nvidia_oci_hook_doctor_duration_seconds")


def seed_003_node(host: FakeHost) -> FakeHost:
    """Seed 003 on a cri-o node: the driver in a container, NVML's nodes left in the host's /dev, each the same
    device as the driver root's own, so doctor --fix can remove them."""
    return crio_node(seed_003(host))


def seed_000_node(host: FakeHost) -> FakeHost:
    """Seed 000 on a containerd node: the driver on the host, toolkit-ready left without host-driver-ready, and a
    CDI spec generated for /run/nvidia/driver."""
    return containerd_node(seed_000(host), "/run/nvidia/driver")


def healthy_node(host: FakeHost) -> FakeHost:
    """Seed 003's node as it should be: the driver and its nodes in the container's root only."""
    return crio_node(container_driver(host))


def ambiguous_node(host: FakeHost) -> FakeHost:
    """A host driver and a driver container both: doctor cannot tell which root is the driver's."""
    return crio_node(container_driver(host_driver(host)))


NODES: dict[str, Callable[[FakeHost], FakeHost]] = {
    "seed-003": seed_003_node,
    "seed-000": seed_000_node,
    "healthy": healthy_node,
    "ambiguous": ambiguous_node,
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
