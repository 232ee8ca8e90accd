"""CRI: container configs as the kubelet (or crictl) hands them to cri-o and containerd."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.host import rewrite_for_existing_root
from nvidia_oci_hook.kinds.cdinames import cdi_name_error
from nvidia_oci_hook.kinds.cri import CRI_CONTAINER, CRIContainerConfig
from nvidia_oci_hook.rules.base import Context, rule

CRIO_COLLISION_ERROR = (
    "privileged container was configured with a device container path that already exists on the host"
)


def _config(value: Any, context: Context) -> CRIContainerConfig:
    return context.cached("cri-config", lambda: CRIContainerConfig(value))  # type: ignore[no-any-return]


@rule("CRI001", "privileged-device-path-exists", Severity.ERROR, [CRI_CONTAINER], needs_host=True)
def privileged_device_path_exists(value: Any, context: Context) -> Iterator[Problem]:
    """cri-o refuses this privileged container: a device's container path already exists on the host.

    ## What it checks
    cri-o's own check, in the order it makes it: the container is privileged
    (`linux.security_context.privileged`), a `devices` entry's `container_path` differs from its `host_path`
    as a raw string, and `container_path` exists on the host (`stat` follows links).

    ## Why it matters
    cri-o gives a privileged container every host device, so a device-plugin node whose container path
    already exists on the host would be shadowed; cri-o fails the container instead with "privileged container
    was configured with a device container path that already exists on the host". This is what happens once
    NVML (in a pod that mounts the host's `/dev`) has created `/dev/nvidia*` on a node whose driver root is
    `/run/nvidia/driver`: the device plugin sends `host_path=/run/nvidia/driver/dev/nvidia0`,
    `container_path=/dev/nvidia0`. CDI devices do not go through this check; containerd has no such check.

    ## Example
    `{"devices": [{"container_path": "/dev/nvidia0", "host_path": "/run/nvidia/driver/dev/nvidia0"}],
    "linux": {"security_context": {"privileged": true}}}` with `/dev/nvidia0` present on the host.

    ## Fix
    Remove the stray nodes from the host's `/dev` (`nvidia-oci-hook doctor` lists them) and stop what creates
    them (mount the host's `/dev` elsewhere, or set `ModifyDeviceFiles=0`); or request the GPU through CDI
    (`cdi_devices` or a `cdi.k8s.io/` annotation), which cri-o does not check this way.
    """
    spec = _config(value, context)
    if context.host is None or spec.privileged is None:
        return
    for device in spec.devices:
        if device.container_path == device.host_path or not device.container_path.startswith("/"):
            continue
        info = context.host.identity(device.container_path)
        if info is None:
            continue
        yield Problem(
            f"{device.pointer}/container_path",
            f"cri-o refuses the container: {CRIO_COLLISION_ERROR} ({device.container_path} exists on the host as "
            f"{info.describe()}, while host_path is {device.host_path})",
            f"remove the stray host node {device.container_path}, or request the device through CDI",
        )


@rule("CRI002", "device-host-path-missing", Severity.ERROR, [CRI_CONTAINER], needs_host=True)
def device_host_path_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A device's host_path does not exist on the host.

    ## What it checks
    Every `devices` entry's `host_path` against the host (links followed). When the same path relative to
    another driver-root candidate exists, the hint is the rewritten path.

    ## Why it matters
    containerd resolves the path while generating the spec and fails the container with
    `lstat /run/nvidia/driver/dev/nvidiactl: no such file or directory`; cri-o fails likewise. This is the GPU
    Operator failure where a stale validation marker made the device plugin choose
    `NVIDIA_DRIVER_ROOT=/run/nvidia/driver` on a node whose driver is installed on the host.

    ## Example
    `{"devices": [{"container_path": "/dev/nvidiactl", "host_path": "/run/nvidia/driver/dev/nvidiactl"}]}` on a
    node whose driver is on `/`.

    ## Fix
    Point the device plugin at the driver root that exists (for the GPU Operator, delete the stale files in
    `/run/nvidia/validations` and restart the device plugin pod); the hint shows the path that exists.
    """
    if context.host is None:
        return
    for device in _config(value, context).devices:
        path = device.host_path
        if not path.startswith("/") or context.host.exists(path):
            continue
        rewrite = rewrite_for_existing_root(context.host, context.driver_roots, path)
        hint = (
            f"use {rewrite.rewritten}: the driver is under {rewrite.existing_root}, not {rewrite.missing_root}"
            if rewrite
            else "fix the device plugin's driver root, or create the node"
        )
        yield Problem(
            f"{device.pointer}/host_path",
            f"lstat {path}: {os.strerror(errno.ENOENT).lower()} (containerd and cri-o refuse the container)",
            hint,
        )


@rule("CRI003", "device-host-path-not-device", Severity.ERROR, [CRI_CONTAINER], needs_host=True)
def device_host_path_not_device(value: Any, context: Context) -> Iterator[Problem]:
    """A device's host_path exists but is not a device node.

    ## What it checks
    That every `devices` entry's `host_path` is a character or block device on the host (a directory is
    allowed: both engines then add every device below it).

    ## Why it matters
    containerd and cri-o read the node's type and numbers from the host path; a regular file (an empty
    placeholder left by a failed driver install, say) makes them refuse the container with "not a device node".

    ## Example
    `{"container_path": "/dev/nvidia0", "host_path": "/run/nvidia/driver/dev/nvidia0"}` where that path is an
    empty regular file.

    ## Fix
    Remove the file and let the driver create the node (`nvidia-modprobe -c 0`), or fix the device plugin's
    driver root.
    """
    if context.host is None:
        return
    for device in _config(value, context).devices:
        if not device.host_path.startswith("/"):
            continue
        info = context.host.identity(device.host_path)
        if info is not None and not info.is_device and info.type != "directory":
            yield Problem(
                f"{device.pointer}/host_path",
                f"{device.host_path} is {info.describe()} on the host, not a device node",
                "remove it and let the driver create the node",
            )


@rule("CRI004", "invalid-cdi-device-request", Severity.ERROR, [CRI_CONTAINER])
def invalid_cdi_device_request(value: Any, context: Context) -> Iterator[Problem]:
    """A cdi_devices entry is not a qualified CDI device name.

    ## What it checks
    Every `cdi_devices[].name` against the CDI library's syntax for `vendor/class=name`.

    ## Why it matters
    The engine resolves each name against its CDI spec directories and refuses the container with
    `unresolvable CDI devices` when one does not parse or is not defined.

    ## Example
    `{"cdi_devices": [{"name": "nvidia.com/gpu0"}]}` (no `=`).

    ## Fix
    Use the qualified name, e.g. `nvidia.com/gpu=0`; `nvidia-ctk cdi list` shows the names defined on the node.
    """
    for request in _config(value, context).cdi_devices:
        reason = cdi_name_error(request.name)
        if reason is not None:
            yield Problem(f"{request.pointer}/name", reason, "write it as vendor/class=name, e.g. nvidia.com/gpu=0")


@rule("CRI005", "invalid-device-permissions", Severity.ERROR, [CRI_CONTAINER])
def invalid_device_permissions(value: Any, context: Context) -> Iterator[Problem]:
    """A device's permissions hold letters other than r, w and m.

    ## What it checks
    That every `devices[].permissions` is made of `r`, `w` and `m` only.

    ## Why it matters
    The permissions become the device-cgroup rule's access string; runc refuses any other letter
    (`invalid device permissions`), and the container does not start.

    ## Example
    `{"container_path": "/dev/nvidia0", "host_path": "/dev/nvidia0", "permissions": "rw-"}`

    ## Fix
    Use `rw` (or `rwm` to let the container create the node itself).
    """
    for device in _config(value, context).devices:
        extra = sorted(set(device.permissions) - set("rwm"))
        if extra:
            yield Problem(
                f"{device.pointer}/permissions",
                f"permissions {device.permissions!r} for {device.container_path} contain {''.join(extra)!r}",
                "use a combination of r, w and m, such as 'rw'",
            )
