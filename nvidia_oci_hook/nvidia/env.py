"""NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES and the MIG variables as NVIDIA's toolkit reads them
(nvidia-container-toolkit v1.20.0: internal/config/image/cuda_image.go, devices.go, capabilities.go;
cmd/nvidia-container-runtime-hook/container_config.go), and the device forms nvidia-container-cli resolves
(libnvidia-container src/cli/common.c, select_devices).

- A "legacy image" sets CUDA_VERSION and no NVIDIA_REQUIRE_CUDA: an unset NVIDIA_VISIBLE_DEVICES then means
  `all`, and an unset NVIDIA_DRIVER_CAPABILITIES every supported capability.
- NVIDIA_VISIBLE_DEVICES is split at commas, each entry trimmed, empty ones dropped; any `all` makes it all, any
  `none` no device (the driver's libraries are still injected), an empty value or `void` nothing at all (not a GPU
  container), unset likewise unless the image is a legacy one.
- nvidia-container-cli resolves each entry as `all`, a full `GPU-` UUID (any case), a PCI bus id, a decimal index
  below the GPU count, a full `MIG-` UUID, or `GPU:MIG` indices; anything else is `device error: ENTRY: unknown
  device`. The toolkit's jit-cdi mode (its runtime's default since v1.18) takes indices, `GPU:MIG` and UUIDs only,
  and refuses anything else with `identifier is not a valid UUID or index: "ENTRY"`.
- NVIDIA_DRIVER_CAPABILITIES: unset or empty is `compute,utility`; the hook intersects it with the supported
  capabilities and, unless it is `all`, refuses any it does not know with `unsupported capabilities found in
  'REQUESTED' (allowed 'KNOWN')`, each a sorted comma-joined list.
- NVIDIA_MIG_CONFIG_DEVICES / NVIDIA_MIG_MONITOR_DEVICES set (non-empty) in an unprivileged container (no
  CAP_SYS_ADMIN in the bounding set): `cannot set MIG_CONFIG_DEVICES in non privileged container`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
DRIVER_CAPABILITIES = "NVIDIA_DRIVER_CAPABILITIES"
MIG_CONFIG_DEVICES = "NVIDIA_MIG_CONFIG_DEVICES"
MIG_MONITOR_DEVICES = "NVIDIA_MIG_MONITOR_DEVICES"
CUDA_VERSION = "CUDA_VERSION"
REQUIRE_CUDA = "NVIDIA_REQUIRE_CUDA"
# Where NVIDIA's components (device plugin, DRA driver, toolkit) look for the driver, as a host path.
DRIVER_ROOT = "NVIDIA_DRIVER_ROOT"

SUPPORTED_CAPABILITIES = ("compute", "compat32", "graphics", "utility", "video", "display", "ngx")
CAPABILITY_WORDS = frozenset({*SUPPORTED_CAPABILITIES, "all", "none"})
DEFAULT_CAPABILITIES = ("compute", "utility")

ALL = "all"
NONE = "none"
VOID = "void"


def is_legacy_image(env: Mapping[str, str]) -> bool:
    return bool(env.get(CUDA_VERSION)) and not env.get(REQUIRE_CUDA)


@dataclass(frozen=True)
class VisibleDevices:
    kind: str  # all, none, void (no GPU container), list
    entries: tuple[str, ...] = ()
    why: str = ""  # how an unset or empty variable was read


def visible_devices(env: Mapping[str, str]) -> VisibleDevices:
    value = env.get(VISIBLE_DEVICES)
    if value is None:
        if is_legacy_image(env):
            return VisibleDevices(ALL, why="unset in a legacy image (CUDA_VERSION without NVIDIA_REQUIRE_CUDA): all")
        return VisibleDevices(VOID, why="unset: not a GPU container")
    entries = tuple(entry.strip() for entry in value.split(",") if entry.strip())
    if not entries:
        return VisibleDevices(VOID, why="empty: not a GPU container")
    # A void anywhere wins (devicesFromEnvvars); then the first all or none, in order (NewVisibleDevices).
    if VOID in entries:
        return VisibleDevices(VOID, entries, "void: not a GPU container")
    for entry in entries:
        if entry in (ALL, NONE):
            return VisibleDevices(entry, entries)
    return VisibleDevices("list", entries)


_PCI = re.compile(r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]$")
_MIG_INDEX = re.compile(r"^(\d+):(\d+)$")


@dataclass(frozen=True)
class DeviceEntry:
    """One NVIDIA_VISIBLE_DEVICES entry as nvidia-container-cli reads it."""

    text: str
    form: str  # index, gpu-uuid, mig-uuid, mig-index, pci, cdi, unknown
    index: Optional[int] = None
    mig: Optional[int] = None


def device_entry(text: str) -> DeviceEntry:
    lowered = text.lower()
    if lowered.startswith("gpu-"):
        return DeviceEntry(text, "gpu-uuid")
    if lowered.startswith("mig-"):
        return DeviceEntry(text, "mig-uuid")
    if text.isdigit():
        return DeviceEntry(text, "index", int(text))
    match = _MIG_INDEX.match(text)
    if match:
        return DeviceEntry(text, "mig-index", int(match[1]), int(match[2]))
    if _PCI.match(text):
        return DeviceEntry(text, "pci")
    if "/" in text and "=" in text:
        return DeviceEntry(text, "cdi")
    return DeviceEntry(text, "unknown")


def normal_bus_id(text: str) -> str:
    """A PCI bus id with a four-digit domain, in lower case, as the driver names /proc/driver/nvidia/gpus/*."""
    lowered = text.lower()
    if lowered.count(":") == 1:
        return f"0000:{lowered}"
    domain, bus_device = lowered.split(":", 1)
    return f"{int(domain, 16):04x}:{bus_device}"


@dataclass(frozen=True)
class Capabilities:
    requested: tuple[str, ...]  # as written, trimmed, empty entries dropped
    unknown: tuple[str, ...]
    why: str = ""


def driver_capabilities(env: Mapping[str, str]) -> Capabilities:
    value = env.get(DRIVER_CAPABILITIES)
    if value is None:
        if is_legacy_image(env):
            return Capabilities(SUPPORTED_CAPABILITIES, (), "unset in a legacy image: every supported capability")
        return Capabilities(DEFAULT_CAPABILITIES, (), "unset: compute,utility")
    requested = tuple(entry.strip() for entry in value.split(",") if entry.strip())
    if not requested:
        return Capabilities(DEFAULT_CAPABILITIES, (), "empty: compute,utility")
    if ALL in requested:
        return Capabilities(requested, ())
    return Capabilities(requested, tuple(name for name in requested if name not in CAPABILITY_WORDS))


def unsupported_capabilities_text(requested: tuple[str, ...]) -> str:
    """The legacy hook's refusal, as its DriverCapabilities.String() writes both lists (sorted, comma-joined)."""
    allowed = sorted({name for name in requested if name in SUPPORTED_CAPABILITIES})
    return f"unsupported capabilities found in '{','.join(sorted(set(requested)))}' (allowed '{','.join(allowed)}')"


def mig_refusal(variable: str) -> str:
    """The legacy hook's refusal of a MIG variable in an unprivileged container (it names it without NVIDIA_)."""
    return f"cannot set {variable[len('NVIDIA_') :]} in non privileged container"
