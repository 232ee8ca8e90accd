"""Where the NVIDIA driver really is on a node, decided by evidence rather than by marker files.

For each candidate driver root the evidence is its user-space part (a non-empty nvidia-smi, libnvidia-ml.so.1,
libcuda.so.1), its own dev root (a `<root>/dev` directory with the control node and GPU nodes, character devices
with NVIDIA's major), and, for the node as a whole, the kernel module (`/proc/driver/nvidia/version`). Only the
user-space part decides the driver root: NVML creates `/dev/nvidia*` on the host's /dev even when the driver
lives in a container, so nodes there must not make `/` look like the driver root. The dev root is found on its
own: the driver root's `/dev` when it holds the driver's nodes, else the host's; with no user space anywhere, the
one candidate besides `/` whose `/dev` holds NVIDIA nodes (a driver container between restarts).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Optional

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.devices import NVIDIA_MAJOR, gpu_index

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
MODULE_VERSION = "/proc/driver/nvidia/version"

FOUND = "found"
AMBIGUOUS = "ambiguous"
NONE = "none"


@dataclass
class RootEvidence:
    root: str
    userspace: list[str] = field(default_factory=list)
    # The root's own dev directory (<root>/dev), and the NVIDIA nodes in it: the control node, GPU nodes.
    dev_directory: bool = False
    device_nodes: list[str] = field(default_factory=list)

    @property
    def has_driver(self) -> bool:
        return bool(self.userspace)

    @property
    def has_control_node(self) -> bool:
        return any(path.endswith("/nvidiactl") for path in self.device_nodes)

    def describe(self) -> str:
        parts = [", ".join(self.userspace) if self.userspace else "no nvidia-smi, libnvidia-ml.so.1 or libcuda.so.1"]
        if self.device_nodes:
            parts.append("nodes " + ", ".join(self.device_nodes))
        elif self.dev_directory:
            parts.append(f"{_join(self.root, 'dev')} without NVIDIA nodes")
        return f"{self.root}: " + "; ".join(parts)


@dataclass
class DriverRootAnswer:
    status: str  # found, ambiguous, none
    root: Optional[str]
    reason: str
    evidence: dict[str, RootEvidence]
    module_loaded: bool
    module_version: Optional[str] = None  # the first line of /proc/driver/nvidia/version

    def dev_root(self) -> Optional[str]:
        """The root whose /dev holds the driver's nodes: the driver root if its own /dev has them, else /."""
        if self.root is None:
            return None
        return self.root if self.evidence[self.root].device_nodes else "/"

    def dev_only_root(self) -> Optional[str]:
        """With no driver user space under any candidate, the one candidate other than / whose own /dev holds
        NVIDIA nodes: only a driver container (or its leftover rootfs) puts them there, so they still say where the
        driver's nodes are, though not that a driver is installed."""
        if self.status != NONE:
            return None
        with_nodes = [root for root, found in self.evidence.items() if root != "/" and found.device_nodes]
        return with_nodes[0] if len(with_nodes) == 1 else None

    def evidence_lines(self) -> list[str]:
        lines = [evidence.describe() for evidence in self.evidence.values()]
        if self.module_loaded:
            lines.append(f"kernel module loaded: {self.module_version or MODULE_VERSION}")
        else:
            lines.append(f"kernel module not loaded ({MODULE_VERSION} is missing)")
        return lines


def _join(root: str, relative: str) -> str:
    return posixpath.join(root, relative)


def _nvidia_nodes(host: HostView, directory: str) -> list[str]:
    """The control node and GPU nodes in directory: character devices with NVIDIA's major."""
    found = []
    for name in host.list_dir(directory):
        path = _join(directory, name)
        if name != "nvidiactl" and gpu_index(f"/dev/{name}") is None:
            continue
        identity = host.identity(path)
        if identity is not None and identity.type == "c" and identity.major == NVIDIA_MAJOR:
            found.append(path)
    return found


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
    dev = _join(root, "dev")
    identity = host.identity(dev)
    evidence.dev_directory = identity is not None and identity.type == "directory"
    if evidence.dev_directory:
        evidence.device_nodes = _nvidia_nodes(host, dev)
    return evidence


def resolve_driver_root(host: HostView, candidates: tuple[str, ...]) -> DriverRootAnswer:
    evidence = {root: gather(host, root) for root in candidates}
    version_text = host.read_text(MODULE_VERSION, limit=4096)
    module_loaded = version_text is not None
    module_version = version_text.splitlines()[0].strip() if version_text and version_text.strip() else None
    with_driver = [root for root, found in evidence.items() if found.has_driver]
    if len(with_driver) == 1:
        root = with_driver[0]
        shown = ", ".join(evidence[root].userspace[:2])
        return DriverRootAnswer(
            FOUND, root, f"driver files under {root}: {shown}", evidence, module_loaded, module_version
        )
    if with_driver:
        return DriverRootAnswer(
            AMBIGUOUS,
            None,
            f"driver files under each of {', '.join(with_driver)}",
            evidence,
            module_loaded,
            module_version,
        )
    return DriverRootAnswer(
        NONE,
        None,
        f"no nvidia-smi, libnvidia-ml.so.1 or libcuda.so.1 under {', '.join(candidates)}",
        evidence,
        module_loaded,
        module_version,
    )


def stray_device_nodes(host: HostView, answer: DriverRootAnswer) -> list[str]:
    """NVIDIA nodes on the host's /dev while the driver (and its /dev) lives under another root."""
    if answer.root in (None, "/"):
        return []
    return strays_beside(host, answer.dev_root())


def strays_beside(host: HostView, dev_root: Optional[str]) -> list[str]:
    """The character devices /dev/nvidia* on the host's /dev while the driver's nodes are under dev_root/dev.

    A host node that is the very file of the same name under dev_root/dev (that /dev mounted or linked onto the
    host's) is the driver's own node, not a stray.
    """
    if dev_root in (None, "/"):
        return []
    strays = []
    for name in host.list_dir("/dev"):
        if not name.startswith("nvidia"):
            continue
        path = f"/dev/{name}"
        identity = host.identity(path)
        if identity is None or identity.type != "c":
            continue
        found, own = host.stat(path), host.stat(_join(dev_root, path.lstrip("/")))
        if found is not None and own is not None and posixpath.samestat(found, own):
            continue
        strays.append(path)
    return strays


def duplicates_driver_node(host: HostView, dev_root: Optional[str], stray: str) -> bool:
    """Whether a stray host node is the same device (type, major, minor) as the node of that name under
    dev_root/dev: removing it then takes nothing from the node."""
    if dev_root in (None, "/"):
        return False
    own = host.identity(_join(dev_root, stray.lstrip("/")))
    found = host.link_identity(stray)
    return own is not None and found is not None and own.is_device and own == found
