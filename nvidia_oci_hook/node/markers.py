"""The GPU Operator's validation markers in /run/nvidia/validations, judged against the evidence.

Legacy markers are empty `*-ready` files; newer operators write one `driver-ready` env file (IS_HOST_DRIVER,
NVIDIA_DRIVER_ROOT, ...) atomically. The device plugin picks its driver root from them, so a marker that
contradicts where the driver really is breaks every GPU pod (seed 000).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Optional

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.driver import DriverRootAnswer
from nvidia_oci_hook.nvidia.env import DRIVER_ROOT

VALIDATIONS = "/run/nvidia/validations"
PARTIAL = "partial"
CONTRADICTING = "contradicting"
STALE = "stale"


@dataclass(frozen=True)
class MarkerProblem:
    kind: str  # partial, contradicting, stale
    marker: str  # host path of the marker file
    message: str


def env_file(text: str) -> dict[str, str]:
    values = {}
    for line in text.splitlines():
        name, equals, value = line.strip().partition("=")
        if equals and name and not name.startswith("#"):
            values[name.strip()] = value.strip().strip('"')
    return values


def markers(host: HostView) -> list[str]:
    """The marker files present, as host paths."""
    return [posixpath.join(VALIDATIONS, name) for name in host.list_dir(VALIDATIONS) if name.endswith("-ready")]


def boot_time(host: HostView) -> Optional[float]:
    """When the node booted (btime in /proc/stat), or None when the host root does not show it."""
    text = host.read_text("/proc/stat", limit=1 << 16)
    for line in (text or "").splitlines():
        if line.startswith("btime "):
            try:
                return float(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def marker_problems(host: HostView, answer: DriverRootAnswer, booted: Optional[float] = None) -> list[MarkerProblem]:
    """What the markers say that the evidence contradicts; with the boot time, markers older than it too."""
    if answer.root is None:
        return []
    present = {posixpath.basename(path) for path in markers(host)}
    on_host = answer.root == "/"
    problems = []
    if on_host and "toolkit-ready" in present and "host-driver-ready" not in present:
        problems.append(
            MarkerProblem(
                PARTIAL,
                f"{VALIDATIONS}/toolkit-ready",
                f"toolkit-ready exists without host-driver-ready while the driver is on the host ({answer.reason}): "
                "the device plugin will choose NVIDIA_DRIVER_ROOT=/run/nvidia/driver and GPU pods fail with "
                "'lstat /run/nvidia/driver/dev/nvidiactl: no such file or directory'",
            )
        )
    if not on_host and "host-driver-ready" in present:
        problems.append(
            MarkerProblem(
                CONTRADICTING,
                f"{VALIDATIONS}/host-driver-ready",
                f"host-driver-ready says the driver is on the host, but it is under {answer.root} ({answer.reason})",
            )
        )
    text = host.read_text(f"{VALIDATIONS}/driver-ready") if "driver-ready" in present else None
    if text is not None:
        env = env_file(text)
        says_host = env.get("IS_HOST_DRIVER", "").lower() == "true"
        root = env.get(DRIVER_ROOT)
        if ("IS_HOST_DRIVER" in env and says_host != on_host) or (root and root.rstrip("/") != answer.root.rstrip("/")):
            problems.append(
                MarkerProblem(
                    CONTRADICTING,
                    f"{VALIDATIONS}/driver-ready",
                    f"driver-ready says IS_HOST_DRIVER={env.get('IS_HOST_DRIVER', '?')} "
                    f"NVIDIA_DRIVER_ROOT={root or '?'}, but the driver is under {answer.root} ({answer.reason})",
                )
            )
    if booted is not None:
        for path in markers(host):
            info = host.stat(path)
            if info is not None and info.st_mtime < booted:
                problems.append(
                    MarkerProblem(
                        STALE,
                        path,
                        f"{posixpath.basename(path)} is older than the last boot: a validator "
                        "that ran before the reboot wrote it, and nothing since has checked it",
                    )
                )
    return problems
