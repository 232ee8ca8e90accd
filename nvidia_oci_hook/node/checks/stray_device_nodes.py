"""doctor's `stray-device-nodes`: NVIDIA device nodes in the host's /dev while the driver's are under another
root (`/run/nvidia/driver/dev`).

cri-o compares a privileged container's device paths with the host's /dev alone: where `/dev/nvidia0` exists
there as well, it refuses every privileged GPU container ("privileged container was configured with a device
container path that already exists on the host"). Such nodes appear when NVML runs with ModifyDeviceFiles=1 in a
pod that mounts the host's /dev (seed 003). The evidence names each node, whether it is the same device as the
driver root's own, and the CDI devices that map it from another host path (those trip cri-o's check when given as
a CRI device). The fix removes the nodes (`--fix` does, for a node that is the same device as the driver root's
and only once the driver's user space proves that root) and stops NVML from creating them again.
"""

from __future__ import annotations

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.base import ERROR, OK, UNKNOWN, Check, Repair, dev_of, unlink
from nvidia_oci_hook.node.driver import FOUND, DriverRootAnswer, duplicates_driver_node, strays_beside

NAME = "stray-device-nodes"
CRIO_COLLISION_ERROR = (
    "privileged container was configured with a device container path that already exists on the host"
)


def stray_nodes_check(host: HostView, answer: DriverRootAnswer, settings: Settings) -> Check:
    dev_root = answer.dev_root() if answer.status == FOUND else answer.dev_only_root()
    if dev_root is None:
        return Check(NAME, UNKNOWN, "not judged: the driver root is not known")
    strays = strays_beside(host, dev_root)
    if not strays:
        return Check(
            NAME, OK, f"no NVIDIA nodes in the host's /dev besides {dev_of(dev_root)}", counts={"stray_nodes": 0}
        )
    # The driver's nodes alone decide the verdict; only a driver root proven by its user space makes removing a
    # host node safe, since a host driver whose libraries lie elsewhere would own the host's nodes.
    proven = answer.status == FOUND
    mappings = _cdi_mappings(host, settings)
    evidence = []
    if not proven:
        evidence.append(
            f"the driver's user space was not found ({answer.reason}), but {dev_of(dev_root)} holds the driver's "
            f"nodes ({', '.join(answer.evidence[dev_root].device_nodes)}): whether or not its driver is running, "
            "nothing should create NVIDIA nodes in the host's /dev, and cri-o compares device paths with the host's "
            "/dev alone; --fix leaves them until the driver root is found"
        )
    repairs = []
    for path in strays:
        identity = host.link_identity(path)
        line = f"{path} ({identity.describe() if identity else '?'})"
        if duplicates_driver_node(host, dev_root, path):
            line += f": the same device as {dev_root}{path}"
            if proven:
                repairs.append(Repair(f"remove {path}", unlink(host, path)))
        else:
            line += f": not the same device as {dev_root}{path}, left alone"
        for mapping in mappings.get(path, []):
            line += f"; CDI device {mapping} trips cri-o's check when given as a CRI device to a privileged container"
        evidence.append(line)
    return Check(
        NAME,
        ERROR,
        f"{len(strays)} NVIDIA node{'s' if len(strays) != 1 else ''} in the host's /dev while the driver's are under "
        f"{dev_of(dev_root)}{'' if proven else ' (driver user space not found)'}: cri-o refuses privileged GPU "
        f"containers ('{CRIO_COLLISION_ERROR}')",
        evidence,
        f"rm {' '.join(strays)} with no GPU pod running; stop NVML from creating them "
        "(ModifyDeviceFiles=0, or do not mount the host's /dev into GPU pods)",
        repairs,
        counts={"stray_nodes": len(strays)},
    )


def _cdi_mappings(host: HostView, settings: Settings) -> dict[str, list[str]]:
    """Container path -> the CDI specs that map it from another host path (what a device plugin passes as a CRI
    device with host_path != container_path)."""
    from nvidia_oci_hook.engine.cdi import read_cache

    found: dict[str, list[str]] = {}
    cache = read_cache(host, settings.cdi_spec_dirs)
    for qualified, (spec, name) in cache.devices.items():
        for block in (spec.edits, spec.devices[name]):
            for node in block.get("deviceNodes", []):
                host_path = node.get("hostPath") or node["path"]
                if host_path != node["path"]:
                    found.setdefault(node["path"], []).append(f"{qualified} in {spec.path} (from {host_path})")
    return found
