"""doctor's `nvml`: what NVML says of the node (driver, CUDA version, GPUs, MIG devices) against the CDI specs.

NVML is the driver's own view, so a CDI device naming a GPU it does not see (a UUID no GPU has, a minor no GPU
has: a spec generated before a GPU was replaced or a MIG layout changed) is an error: a container asking for it
gets a device that is not there. NVML is read only where it answers for the node (--host-root /, or a library
named by --nvml-library); reading it may create /dev/nvidia* nodes (ModifyDeviceFiles: 1), which are removed
again where the driver root is not `/`, and a warning where they stay. The fix regenerates the CDI spec; doctor
repairs nothing here.
"""

from __future__ import annotations

from typing import Optional

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.devices import NVIDIA_MAJOR, gpu_index
from nvidia_oci_hook.node.checks.base import ERROR, OK, UNKNOWN, WARNING, Check
from nvidia_oci_hook.node.driver import DriverRootAnswer
from nvidia_oci_hook.node.nvml import read_nvml

NAME = "nvml"


def nvml_check(
    host: HostView, answer: DriverRootAnswer, settings: Settings, library: Optional[str], read: bool = True
) -> Check:
    """read: False where NVML would answer for this machine instead of the node (another --host-root)."""
    if not read:
        return Check(NAME, UNKNOWN, "not read: --host-root is not / (NVML would report this machine)")
    # NVML may create /dev/nvidia* here; they are removed again where they do not belong (driver root not /).
    view = read_nvml(host, remove_created=answer.root not in (None, "/"), library=library)
    created = [f"NVML created {path}" for path in view.created_nodes]
    created += [f"removed {path} again" for path in view.removed_nodes]
    if not view.available:
        return Check(NAME, UNKNOWN, f"NVML not read: {view.reason}", created)
    evidence = [
        f"driver {view.driver_version}"
        + (f", CUDA {view.cuda_driver_version} (the cuda requirement's value)" if view.cuda_driver_version else "")
    ]
    for gpu in view.gpus:
        evidence.append(
            f"GPU {gpu.index}: minor {gpu.minor}, {gpu.uuid}, {gpu.name}"
            + (f", brand {gpu.brand}" if gpu.brand else "")
            + (f", compute capability {gpu.arch}" if gpu.arch else "")
            + (f", MIG {'on' if gpu.mig_mode else 'off'}" if gpu.mig_mode is not None else "")
        )
        evidence.extend(f"GPU {gpu.index} MIG device {gpu.index}:{mig.index}: {mig.uuid}" for mig in gpu.mig_devices)
    stale = _stale_cdi_devices(host, settings, {gpu.minor for gpu in view.gpus}, {gpu.uuid for gpu in view.gpus})
    if stale:
        return Check(
            NAME,
            ERROR,
            f"{len(stale)} CDI {'device names' if len(stale) == 1 else 'devices name'} GPUs NVML does not see: "
            f"{stale[0]}",
            evidence + stale + created,
            "regenerate the CDI spec (nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml)",
        )
    status = WARNING if view.created_nodes and not view.removed_nodes else OK
    summary = f"driver {view.driver_version}, {len(view.gpus)} GPU{'s' if len(view.gpus) != 1 else ''}"
    if view.created_nodes:
        summary += f"; NVML created {len(view.created_nodes)} node(s) in /dev"
    return Check(NAME, status, summary, evidence + created)


def _stale_cdi_devices(host: HostView, settings: Settings, minors: set[int], uuids: set[str]) -> list[str]:
    from nvidia_oci_hook.engine.cdi import read_cache

    stale = []
    cache = read_cache(host, settings.cdi_spec_dirs)
    for qualified, (spec, name) in sorted(cache.devices.items()):
        if name.startswith("GPU-") and name not in uuids:
            stale.append(f"{qualified} ({spec.path}): no GPU has UUID {name}")
            continue
        for node in spec.devices[name].get("deviceNodes", []):
            index = gpu_index(node["path"])
            minor = node.get("minor") if node.get("major") == NVIDIA_MAJOR else index
            if index is not None and minor not in minors:
                stale.append(f"{qualified} ({spec.path}): {node['path']} is minor {minor}, which no GPU has")
    return stale
