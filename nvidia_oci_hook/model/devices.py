"""Facts about Linux device nodes that rules and transforms share: defaults, NVIDIA names, cgroup rules."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from nvidia_oci_hook.model.oci import Device, DeviceRule

# The nodes every runtime creates in a container's /dev (runtime-spec config-linux.md "Default Devices").
DEFAULT_DEVICES: dict[str, tuple[str, int, int]] = {
    "/dev/null": ("c", 1, 3),
    "/dev/zero": ("c", 1, 5),
    "/dev/full": ("c", 1, 7),
    "/dev/random": ("c", 1, 8),
    "/dev/urandom": ("c", 1, 9),
    "/dev/tty": ("c", 5, 0),
}

# runc appends these allow rules after the spec's own (libcontainer/specconv AllowedDevices), so they win.
_RUNC_ALWAYS_ALLOWED: tuple[tuple[Optional[str], Optional[int], Optional[int], str], ...] = (
    ("c", None, None, "m"),
    ("b", None, None, "m"),
    ("c", 1, 3, "rwm"),
    ("c", 1, 8, "rwm"),
    ("c", 1, 7, "rwm"),
    ("c", 5, 0, "rwm"),
    ("c", 1, 5, "rwm"),
    ("c", 1, 9, "rwm"),
    ("c", 136, None, "rwm"),
    ("c", 5, 2, "rwm"),
    ("c", 10, 200, "rwm"),
)

NVIDIA_MAJOR = 195
NVIDIACTL = "/dev/nvidiactl"
NVIDIA_UVM = "/dev/nvidia-uvm"
NVIDIA_UVM_TOOLS = "/dev/nvidia-uvm-tools"
NVIDIA_GPU_NODE = re.compile(r"^/dev/nvidia(\d+)$")


@dataclass(frozen=True)
class NvidiaNode:
    """What the driver gives a node: the fixed major (None: assigned at module load) and minor."""

    role: str
    major: Optional[int]
    minor: int


def nvidia_node(path: str) -> Optional[NvidiaNode]:
    """The numbers the NVIDIA kernel modules give the node at path, or None if it is not an NVIDIA node."""
    if path == NVIDIACTL:
        return NvidiaNode("control node", NVIDIA_MAJOR, 255)
    if path == "/dev/nvidia-modeset":
        return NvidiaNode("modeset node", NVIDIA_MAJOR, 254)
    if path == NVIDIA_UVM:
        return NvidiaNode("UVM node", None, 0)
    if path == NVIDIA_UVM_TOOLS:
        return NvidiaNode("UVM tools node", None, 1)
    match = NVIDIA_GPU_NODE.match(path)
    if match and len(match.group(1)) < 6:
        return NvidiaNode(f"GPU {int(match.group(1))}", NVIDIA_MAJOR, int(match.group(1)))
    match = re.match(r"^/dev/nvidia-caps/nvidia-cap(\d{1,6})$", path)
    if match:
        return NvidiaNode("MIG capability node", None, int(match.group(1)))
    return None


def cgroup_type(device_type: Optional[str]) -> Optional[str]:
    # The device cgroup knows only c and b; "u" (unbuffered) is a character device.
    return "c" if device_type == "u" else device_type


class DeviceAccess:
    """Which of r, w, m the device cgroup grants a node: the last matching rule for each letter decides.

    Rules are indexed by their (type, major, minor) with wildcards kept as None, so asking about a node
    looks at eight keys instead of every rule.
    """

    def __init__(self, rules: Iterable[DeviceRule], with_runc_defaults: bool = True) -> None:
        self._last: dict[tuple[Optional[str], Optional[int], Optional[int]], dict[str, tuple[int, bool]]] = {}
        position = 0
        for position, rule in enumerate(rules):
            self._add(position, rule.allow, rule.type, rule.major, rule.minor, rule.access)
        if with_runc_defaults:
            for offset, (kind, major, minor, access) in enumerate(_RUNC_ALWAYS_ALLOWED, start=position + 1):
                self._add(offset, True, kind, major, minor, access)

    def _add(
        self,
        position: int,
        allow: bool,
        kind: Optional[str],
        major: Optional[int],
        minor: Optional[int],
        access: str,
    ) -> None:
        slot = self._last.setdefault((None if kind in (None, "a") else kind, major, minor), {})
        for letter in "rwm":
            if letter in access:
                slot[letter] = (position, allow)

    def granted(self, kind: Optional[str], major: Optional[int], minor: Optional[int]) -> str:
        kind = cgroup_type(kind)
        decided: dict[str, tuple[int, bool]] = {}
        for key_kind in (kind, None):
            for key_major in (major, None):
                for key_minor in (minor, None):
                    slot = self._last.get((key_kind, key_major, key_minor))
                    if not slot:
                        continue
                    for letter, verdict in slot.items():
                        if letter not in decided or verdict[0] > decided[letter][0]:
                            decided[letter] = verdict
        return "".join(letter for letter in "rwm" if decided.get(letter, (0, False))[1])


def first_by_path(devices: Iterable[Device]) -> dict[str, Device]:
    """The entry runc and crun act on for each path: the first one."""
    result: dict[str, Device] = {}
    for device in devices:
        result.setdefault(device.path, device)
    return result
