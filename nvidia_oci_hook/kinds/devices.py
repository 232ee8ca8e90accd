"""Facts about Linux device nodes that rules and transforms share: defaults, NVIDIA names, cgroup rules.

Used on every container start by the runtime-facing modes: standard library only, and none of its costly parts.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Optional

    from nvidia_oci_hook.kinds.oci import Device, DeviceRule

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


def _number_after(path: str, prefix: str, max_digits: int) -> Optional[int]:
    digits = path[len(prefix) :] if path.startswith(prefix) else ""
    if 0 < len(digits) <= max_digits and digits.isdigit() and digits.isascii():
        return int(digits)
    return None


def gpu_index(path: str) -> Optional[int]:
    """N for a GPU node /dev/nvidiaN, else None."""
    return _number_after(path, "/dev/nvidia", 5)


class NvidiaNode:
    """What the driver gives a node: the fixed major (None: assigned at module load) and minor."""

    __slots__ = ("major", "minor", "role")

    def __init__(self, role: str, major: Optional[int], minor: int) -> None:
        self.role = role
        self.major = major
        self.minor = minor


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
    index = gpu_index(path)
    if index is not None:
        return NvidiaNode(f"GPU {index}", NVIDIA_MAJOR, index)
    capability = _number_after(path, "/dev/nvidia-caps/nvidia-cap", 6)
    if capability is not None:
        return NvidiaNode("MIG capability node", None, capability)
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
