"""The transforms after CDI injection, each on the pipeline's working copy of the config.

Each takes (config, host, settings, ...) and returns (edits, findings); none reads the filesystem except
through the HostView.
"""

from __future__ import annotations

from nvidia_oci_hook.engine.records import Edit, EngineFinding
from nvidia_oci_hook.host import owning_root, rewrite_for_existing_root
from nvidia_oci_hook.kinds.devices import NVIDIACTL, DeviceAccess, cgroup_type, first_by_path, gpu_index, nvidia_node
from nvidia_oci_hook.kinds.oci import OCIConfig, normalize_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from nvidia_oci_hook.config import Settings
    from nvidia_oci_hook.host import HostView
    from nvidia_oci_hook.kinds.oci import Device


# lint's GPU001 (rules/gpu.py) is this check on the config as given.
GPU_WITHOUT_CONTROL = "GPU001"


def gpus_without_control_node(devices: Iterable[Device]) -> list[EngineFinding]:
    """The GPU nodes a container cannot use: listed without /dev/nvidiactl, which every CUDA and NVML call opens
    first. The one definition of it: lint's GPU001 judges the config as given, the plan the config runc gets."""
    by_path = first_by_path(devices)
    if NVIDIACTL in by_path:
        return []
    return [
        EngineFinding(
            GPU_WITHOUT_CONTROL,
            "error",
            device.pointer,
            f"{device.path} is listed but {NVIDIACTL} is not: CUDA and NVML cannot use the GPU",
            f'add {{"path": "{NVIDIACTL}", "type": "c", "major": 195, "minor": 255}} to linux.devices',
            gpu_unusable=True,
        )
        for device in by_path.values()
        if gpu_index(device.path) is not None
    ]


def _number(device: Device) -> str:
    return device.number if device.type != "p" else "a FIFO"


def rewrite_driver_roots(
    config: dict[str, Any], host: HostView, settings: Settings
) -> tuple[list[Edit], list[EngineFinding]]:
    """Bind-mount sources and hook programs under a driver root that lacks them, moved to the root that has them.

    Only whole paths are moved: the same path relative to its root must exist under the new root. A missing
    path under a driver root other than `/` that no root holds is a finding: runc would fail the mount.
    """
    edits: list[Edit] = []
    findings: list[EngineFinding] = []
    view = OCIConfig(config)
    roots = settings.driver_roots
    targets: list[tuple[str, str, str]] = []
    for mount in view.mounts:
        if mount.is_bind and mount.source and mount.source.startswith("/"):
            targets.append(
                (f"{mount.pointer}/source", mount.source, f"mount source {mount.source} (for {mount.destination})")
            )
    for hook in view.hooks:
        if hook.path and hook.path.startswith("/"):
            targets.append((f"{hook.pointer}/path", hook.path, f"{hook.stage} hook {hook.path}"))
    for pointer, path, what in targets:
        if host.exists(path):
            continue
        rewrite = rewrite_for_existing_root(host, roots, path)
        if rewrite is not None:
            _set(config, pointer, rewrite.rewritten)
            edits.append(
                Edit(
                    "HOST001",
                    "error",
                    pointer,
                    f"{path} -> {rewrite.rewritten}",
                    f"{what} does not exist under driver root {rewrite.missing_root}, but exists under "
                    f"{rewrite.existing_root}",
                    gpu_unusable=True,
                )
            )
            continue
        root, _ = owning_root(roots, path)
        if root.rstrip("/"):
            findings.append(
                EngineFinding(
                    "REC005",
                    "error",
                    pointer,
                    f"{what} does not exist, under driver root {root} or any other candidate ({', '.join(roots)})",
                    "check where the driver is installed on this node (nvidia-oci-hook lint --node) and "
                    "regenerate the spec for that root",
                    gpu_unusable=True,
                )
            )
    return edits, findings


def _set(config: dict[str, Any], pointer: str, value: Any) -> None:
    """Set the value at a pointer the views produced (plain keys and list indexes, no escaping needed)."""
    *parents, last = pointer.strip("/").split("/")
    node: Any = config
    for token in parents:
        node = node[int(token)] if isinstance(node, list) else node[token]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def deduplicate_devices(
    config: dict[str, Any], settings: Settings, cdi_paths: set[str]
) -> tuple[list[Edit], list[EngineFinding]]:
    """One linux.devices entry per path.

    The same node twice: the later entries go. Two different nodes for one path: settings.policy_device_conflict
    decides. Under "cdi" the entry a CDI request defines wins (when the engine already applied it, it is the
    last one at the path, as the library's AddDevice leaves it), otherwise the first one, as runc would take it.
    """
    linux = config.get("linux")
    if not isinstance(linux, dict) or not isinstance(linux.get("devices"), list):
        return [], []
    view = OCIConfig(config)
    by_path: dict[str, list[Device]] = {}
    for device in view.devices:
        by_path.setdefault(device.path, []).append(device)
    edits: list[Edit] = []
    findings: list[EngineFinding] = []
    drop: set[int] = set()
    for path, entries in by_path.items():
        if len(entries) < 2:
            continue
        conflicting = any(not entry.same_node(entries[0]) for entry in entries[1:])
        if conflicting and settings.policy_device_conflict == "refuse":
            listed = ", ".join(f"{_number(entry)} at {entry.pointer}" for entry in entries)
            findings.append(
                EngineFinding(
                    "REC004",
                    "error",
                    entries[1].pointer,
                    f"{path} is listed as different devices: {listed}",
                    "remove the entries with the wrong numbers (ls -l on the node shows the right ones), or set "
                    "policy.device_conflict to cdi or first",
                    gpu_unusable=nvidia_node(path) is not None,
                )
            )
            continue
        keep = entries[0]
        if conflicting and settings.policy_device_conflict == "cdi" and path in cdi_paths:
            keep = entries[-1]
        for entry in entries:
            if entry is keep:
                continue
            drop.add(int(entry.pointer.rsplit("/", 1)[1]))
            if entry.same_node(keep):
                edits.append(
                    Edit(
                        "DEV001",
                        "warning",
                        entry.pointer,
                        f"remove duplicate {path} ({_number(entry)}), kept {keep.pointer}",
                        f"{path} ({_number(entry)}) is also listed at {keep.pointer}",
                    )
                )
            else:
                source = "the CDI request's" if keep is entries[-1] and keep is not entries[0] else "the first"
                edits.append(
                    Edit(
                        "DEV002",
                        "error",
                        entry.pointer,
                        f"remove {path} ({_number(entry)}), kept {source} entry {keep.pointer} ({_number(keep)})",
                        f"{path} is {_number(entry)} here but {_number(keep)} at {keep.pointer}",
                        gpu_unusable=nvidia_node(path) is not None,
                    )
                )
    if drop:
        devices = linux["devices"]
        linux["devices"] = [entry for index, entry in enumerate(devices) if index not in drop]
    return edits, findings


def allow_devices(config: dict[str, Any]) -> list[Edit]:
    """An allow rule for every device node the device cgroup would refuse to open for reading or writing."""
    view = OCIConfig(config)
    access = DeviceAccess(view.device_rules)
    edits: list[Edit] = []
    seen: set[tuple[str, int, int]] = set()
    for device in view.devices:
        kind = cgroup_type(device.type)
        if kind not in ("c", "b") or device.major is None or device.minor is None:
            continue
        key = (kind, device.major, device.minor)
        if key in seen:
            continue
        seen.add(key)
        granted = access.granted(kind, device.major, device.minor)
        if "r" in granted and "w" in granted:
            continue
        linux = config.setdefault("linux", {})
        resources = linux.get("resources")
        if not isinstance(resources, dict):
            resources = linux["resources"] = {}
        rules = resources.get("devices")
        if not isinstance(rules, list):
            rules = resources["devices"] = []
        rules.append({"allow": True, "type": kind, "major": device.major, "minor": device.minor, "access": "rwm"})
        edits.append(
            Edit(
                "DEV003",
                "error",
                f"/linux/resources/devices/{len(rules) - 1}",
                f"allow {normalize_path(device.path)} ({kind} {device.major}:{device.minor}, rwm)",
                f"no rule in linux.resources.devices allows {device.path} ({device.number}, granted "
                f"{granted or 'nothing'}): open fails with EPERM",
                gpu_unusable=nvidia_node(device.path) is not None,
                about=device.pointer,
            )
        )
    return edits
