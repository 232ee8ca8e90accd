"""Devices: additional_devices, allowed_devices, and the host's stray GPU nodes that privileged containers get.

additional_devices as cri-o parses them (CRO003) and finds them on the node (CRO105); allowed_devices entries no
request can match (CRO106); /dev/nvidia* nodes outside the driver root, given to privileged containers (CRO107).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.crio.go_values import go_key
from nvidia_oci_hook.node.driver import resolve_driver_root, stray_device_nodes
from nvidia_oci_hook.rules.base import Context
from nvidia_oci_hook.rules.crio.config_view import crio_rule, strings_at, view
from nvidia_oci_hook.rules.crio.runtimes import Handler, handlers

COLLISION_ERROR = "privileged container was configured with a device container path that already exists on the host"


def _valid_mode(mode: str) -> bool:
    return bool(mode) and all(letter in "rwm" for letter in mode) and len(set(mode)) == len(mode)


def parse_device(entry: str) -> tuple[Optional[tuple[str, str, str]], Optional[str]]:
    """cri-o's parseDevice plus its /dev/ check: ((host, container, permissions), None) or (None, its error)."""
    parts = entry.split(":")
    permissions = "rwm"
    destination = ""
    if len(parts) > 3:
        return None, f"invalid device specification: {entry}"
    if len(parts) == 3:
        if not _valid_mode(parts[2]):
            return None, f"invalid device mode: {parts[2]}"
        permissions = parts[2]
    if len(parts) >= 2:
        if _valid_mode(parts[1]):
            permissions = parts[1]
        else:
            if parts[1] and not parts[1].startswith("/"):
                return None, f"invalid device mode: {parts[1]}"
            destination = parts[1]
    source = parts[0]
    destination = destination or source
    if not destination.startswith("/dev/"):
        return None, f"invalid device mode: {destination}"
    return (source, destination, permissions), None


@crio_rule("CRO003", "invalid-additional-device", Severity.ERROR, schema_level=True)
def invalid_additional_device(value: Any, context: Context) -> Iterator[Problem]:
    """An additional_devices entry is not HOST[:CONTAINER[:PERMISSIONS]] with a container path under /dev/.

    ## What it checks
    Each entry of the effective `additional_devices`, parsed as cri-o parses it: at most three `:`-separated
    fields; permissions made of `r`, `w` and `m`, each at most once; a second field that is either permissions or
    an absolute container path; and the container path (the host path when none is given) starting with `/dev/`.
    Empty entries are skipped, as cri-o skips them.

    ## Why it matters
    cri-o parses these devices while loading its configuration and refuses to start on the first bad one, with
    an error that is easy to misread: a container path outside `/dev/` is reported as `invalid device mode:
    /mnt/gpu`, and four fields as `invalid device specification: ...`. These devices go into every container on
    the node, so the entry is usually a GPU or a FUSE node someone meant to give to all pods.

    ## Example
    `additional_devices = ["/dev/nvidiactl:/nvidiactl:rw"]`: the container path is not under `/dev/`.
    `additional_devices = ["/dev/fuse:rwx"]`: `x` is not a device permission.

    ## Fix
    Write `"/dev/HOST:/dev/CONTAINER:rwm"`, or just `"/dev/HOST"` (same path, `rwm`). Do not hand GPUs to
    every container this way; use the device plugin or CDI.
    """
    current = view(value, context)
    config = current.effective() if current else None
    if current is None or config is None:
        return
    pointer = "/crio/runtime/additional_devices"
    for index, entry in enumerate(strings_at(config, pointer)):
        if not entry:
            continue
        _, error = parse_device(entry)
        if error is not None:
            yield current.problem(
                config.origin(pointer_join(pointer, index)),
                f'cri-o refuses this configuration: additional_devices entry "{entry}": {error}',
                'write "HOST_PATH[:CONTAINER_PATH[:PERMISSIONS]]", the container path under /dev/ and the '
                "permissions from r, w and m",
            )


@crio_rule("CRO105", "additional-device-not-on-host", Severity.ERROR, needs_host=True)
def additional_device_not_on_host(value: Any, context: Context) -> Iterator[Problem]:
    """An additional_devices entry's host path is not a device node on this node.

    ## What it checks
    The host path of each well-formed `additional_devices` entry: cri-o reads the device's type and numbers
    from it while loading the configuration (runc's `DeviceFromPath`), so it must exist and be a character
    device, a block device or a FIFO.

    ## Why it matters
    On a node where the path is missing, cri-o refuses its configuration and does not start (`/dev/nvidia0 is
    not a valid device: lstat /dev/nvidia0: no such file or directory`; a regular file or a directory gives
    `not a device node`). Configurations shared by a whole cluster hit this on the nodes that lack the device:
    GPU device nodes, for instance, appear only once the driver is loaded, so cri-o fails on a fresh GPU node
    and on every CPU node.

    ## Example
    `additional_devices = ["/dev/nvidia-uvm"]` on a node where the NVIDIA driver has not created the UVM node yet.

    ## Fix
    Remove GPU nodes from `additional_devices` (give GPUs through the device plugin or CDI), or set the entry
    only on nodes that have the device. cri-o does not follow a symbolic link here: name the device node itself.
    """
    current = view(value, context)
    config = current.effective() if current else None
    host = context.host
    if current is None or config is None or host is None:
        return
    pointer = "/crio/runtime/additional_devices"
    for index, entry in enumerate(strings_at(config, pointer)):
        parsed, error = parse_device(entry) if entry else (None, None)
        if parsed is None or error is not None:
            continue
        source = parsed[0]
        identity = host.link_identity(source) if source.startswith("/") else None
        if identity is not None and identity.type in ("c", "b", "p"):
            continue
        reason = f"lstat {source}: no such file or directory" if identity is None else "not a device node"
        yield current.problem(
            config.origin(pointer_join(pointer, index)),
            f"cri-o refuses this configuration on this node: {source} is not a valid device: {reason}",
            f'remove "{entry}" from additional_devices, or set it only on nodes where {source} exists',
        )


@crio_rule("CRO106", "invalid-allowed-device", Severity.WARNING)
def invalid_allowed_device(value: Any, context: Context) -> Iterator[Problem]:
    """An allowed_devices entry can never match a device a pod asks for.

    ## What it checks
    Each entry of the effective `allowed_devices`: it must be an absolute host path, written the way pods write
    it in the devices annotation (no `//`, `.` or trailing `/`, since cri-o compares the strings exactly), and
    must not use the `host:container:permissions` form of `additional_devices`.

    ## Why it matters
    `allowed_devices` lists the host devices a pod may request with the `io.kubernetes.cri-o.Devices` (or
    `devices.crio.io`) annotation; cri-o refuses any other with `device /dev/fuse is specified but is not in
    allowed_devices`. An entry that is not written exactly as the path a pod names allows nothing, and the
    pods that need it fail to be created.

    ## Example
    `allowed_devices = ["/dev/fuse:/dev/fuse:rwm", "/dev/net/tun/"]`.

    ## Fix
    Write plain absolute host paths: `allowed_devices = ["/dev/fuse", "/dev/net/tun"]`.
    """
    current = view(value, context)
    config = current.effective() if current else None
    pointer = "/crio/runtime/allowed_devices"
    if current is None or config is None or not config.is_set(pointer):
        return
    for index, entry in enumerate(strings_at(config, pointer)):
        problem = None
        if ":" in entry:
            problem = (
                f'"{entry}" uses the host:container:permissions form; allowed_devices holds host paths only, '
                "compared exactly with what a pod asks for",
                f'write "{entry.split(":", 1)[0]}"',
            )
        elif not entry.startswith("/"):
            problem = (f'"{entry}" is not an absolute path, so no device request can match it', "write the full path")
        elif posixpath.normpath(entry) != entry:
            problem = (
                f'"{entry}" is not written as a pod names the device (cri-o compares the strings exactly)',
                f'write "{posixpath.normpath(entry)}"',
            )
        if problem is not None:
            yield current.problem(config.origin(pointer_join(pointer, index)), problem[0], problem[1])


def _gpu_handlers(found: list[Handler], default: str) -> list[Handler]:
    def is_gpu(handler: Handler) -> bool:
        program = handler.table.get("runtime_path") or ""
        base = posixpath.basename(program) if isinstance(program, str) else ""
        return "nvidia" in handler.name.casefold() or base.startswith("nvidia")

    gpu = [h for h in found if is_gpu(h)]
    return gpu or [h for h in found if h.name == default]


@crio_rule("CRO107", "privileged-gets-stray-gpu-nodes", Severity.WARNING, needs_host=True)
def privileged_gets_stray_gpu_nodes(value: Any, context: Context) -> Iterator[Problem]:
    """Privileged GPU containers get the host's stray /dev/nvidia* nodes while the driver lives under another root.

    ## What it checks
    On a node whose NVIDIA driver is under a driver root other than `/` (a `--driver-root` candidate such as
    `/run/nvidia/driver` holding `dev/nvidiactl`) and whose own `/dev` also holds `/dev/nvidia*` nodes (created
    by NVML in a pod that mounted the host's `/dev`, seed 003), each GPU runtime handler (named `nvidia...` or
    running an `nvidia...` program; the default runtime when there is none) whose
    `privileged_without_host_devices` is not `true`.

    ## Why it matters
    For a privileged container cri-o adds every device node of the host's `/dev`, so these stray nodes reach
    every privileged GPU pod, all GPUs included, next to the devices it was allocated. The same stray nodes
    also trip cri-o's check on CRI devices: a privileged container given `/run/nvidia/driver/dev/nvidia0` as
    `/dev/nvidia0` is refused with `privileged container was configured with a device container path that
    already exists on the host`. `privileged_without_host_devices = true` on the GPU runtime stops the first
    (privileged pods get only what they were given); it does not lift the second, which applies to every
    privileged container: that needs the stray nodes gone, or GPUs given through CDI, which the check skips.

    ## Example
    `/run/nvidia/driver/dev/nvidiactl` and `/dev/nvidiactl` both exist, and `[crio.runtime.runtimes.nvidia]`
    does not set `privileged_without_host_devices`.

    ## Fix
    Set `privileged_without_host_devices = true` in the GPU runtime's table (not on the default runtime if
    other privileged pods need host devices); remove the stray `/dev/nvidia*` nodes once nothing uses them and
    stop what creates them (mount the host's `/dev` elsewhere than `/dev` in the pod that calls NVML); prefer CDI
    for GPU allocation (device plugin `DEVICE_LIST_STRATEGY=cdi-cri`).
    """
    current = view(value, context)
    config = current.effective() if current else None
    host = context.host
    if current is None or config is None or host is None:
        return
    answer = resolve_driver_root(host, context.driver_roots)
    stray = stray_device_nodes(host, answer)
    roots = [answer.dev_root() or "/"]
    if not stray:
        return
    found, default = handlers(config)
    for handler in _gpu_handlers(found, default):
        if handler.table.get("privileged_without_host_devices") is True:
            continue
        origin = config.origin(handler.key("privileged_without_host_devices")) or config.origin(handler.pointer)
        caution = (
            "; it is the default runtime, so every privileged pod (network and storage agents included) would lose "
            "host devices: give GPU pods their own runtime instead"
            if handler.name == default
            else ""
        )
        yield current.problem(
            origin,
            f'privileged containers on runtime "{handler.name}" get every device node of the host\'s /dev, including '
            f"{', '.join(stray)}, although the driver's nodes are under {roots[0]}/dev; with these on the host, cri-o "
            f'also refuses privileged containers given {roots[0]}/dev/nvidia* as CRI devices ("{COLLISION_ERROR}")',
            f"set privileged_without_host_devices = true in [crio.runtime.runtimes.{go_key([handler.name])}]{caution}; "
            "remove the stray host nodes and stop what creates them",
        )
