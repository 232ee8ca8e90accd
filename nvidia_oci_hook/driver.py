"""Where the NVIDIA driver really is on a node, decided by evidence rather than by marker files.

A candidate driver root holds the driver when its user-space part is there (nvidia-smi, libnvidia-ml, libcuda).
Device nodes are weaker evidence for `/`: NVML creates `/dev/nvidia*` on the host's /dev even when the driver
lives in a container, so stray nodes there must not make `/` look like the driver root.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Optional

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.model.devices import NVIDIA_MAJOR

LIBRARY_DIRS = (
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib64",
    "usr/lib",
    "lib64",
    "lib/x86_64-linux-gnu",
)
LIBRARIES = ("libnvidia-ml.so.1", "libcuda.so.1")
BINARIES = ("usr/bin/nvidia-smi", "usr/sbin/nvidia-smi")

FOUND = "found"
AMBIGUOUS = "ambiguous"
NONE = "none"


@dataclass
class RootEvidence:
    root: str
    userspace: list[str] = field(default_factory=list)
    device_nodes: list[str] = field(default_factory=list)

    @property
    def has_driver(self) -> bool:
        return bool(self.userspace)


@dataclass
class DriverRootAnswer:
    status: str  # found, ambiguous, none
    root: Optional[str]
    reason: str
    evidence: dict[str, RootEvidence]
    module_loaded: bool

    def dev_root(self) -> Optional[str]:
        """The root whose /dev holds the driver's nodes: the driver root if it has its own /dev nodes, else /."""
        if self.root is None:
            return None
        return self.root if self.evidence[self.root].device_nodes else "/"


def _join(root: str, relative: str) -> str:
    return posixpath.join(root, relative)


def gather(host: HostView, root: str) -> RootEvidence:
    evidence = RootEvidence(root)
    for binary in BINARIES:
        info = host.stat(_join(root, binary))
        if info is not None and info.st_size > 0:
            evidence.userspace.append(_join(root, binary))
    for directory in LIBRARY_DIRS:
        for library in LIBRARIES:
            path = _join(root, posixpath.join(directory, library))
            if host.exists(path) and path not in evidence.userspace:
                evidence.userspace.append(path)
    for name in ("nvidiactl", "nvidia0"):
        path = _join(root, f"dev/{name}")
        identity = host.identity(path)
        if identity is not None and identity.type == "c" and identity.major == NVIDIA_MAJOR:
            evidence.device_nodes.append(path)
    return evidence


def resolve_driver_root(host: HostView, candidates: tuple[str, ...]) -> DriverRootAnswer:
    evidence = {root: gather(host, root) for root in candidates}
    module_loaded = host.exists("/proc/driver/nvidia/version")
    with_driver = [root for root, found in evidence.items() if found.has_driver]
    if len(with_driver) == 1:
        root = with_driver[0]
        shown = ", ".join(evidence[root].userspace[:2])
        return DriverRootAnswer(FOUND, root, f"driver files under {root}: {shown}", evidence, module_loaded)
    if with_driver:
        return DriverRootAnswer(
            AMBIGUOUS, None, f"driver files under each of {', '.join(with_driver)}", evidence, module_loaded
        )
    return DriverRootAnswer(
        NONE, None, f"no nvidia-smi, libnvidia-ml.so.1 or libcuda.so.1 under {', '.join(candidates)}", evidence,
        module_loaded,
    )  # fmt: skip


def stray_device_nodes(host: HostView, answer: DriverRootAnswer) -> list[str]:
    """NVIDIA nodes on the host's /dev while the driver (and its /dev) lives under another root."""
    if answer.root in (None, "/") or answer.dev_root() == "/":
        return []
    strays = []
    for name in host.list_dir("/dev"):
        if not name.startswith("nvidia"):
            continue
        identity = host.identity(f"/dev/{name}")
        if identity is not None and identity.type == "c":
            strays.append(f"/dev/{name}")
    return strays
