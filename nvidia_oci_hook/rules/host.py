"""HOST: what the spec expects of the node against what the node has (skipped with --offline)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.host import rewrite_for_existing_root
from nvidia_oci_hook.kinds.devices import cgroup_type, first_by_path
from nvidia_oci_hook.kinds.document import OCI_CONFIG
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.devices import config, devices
from nvidia_oci_hook.rules.hooks import hooks


def stale_root_problem(
    context: Context, pointer: str, subject: str, path: str, consequence: str = ""
) -> Optional[Problem]:
    """The finding for a host path under a driver root that lacks it while another root has it, if it is one."""
    if context.host is None:
        return None
    rewrite = rewrite_for_existing_root(context.host, context.driver_roots, path)
    if rewrite is None:
        return None
    return Problem(
        pointer,
        f"{subject} does not exist under driver root {rewrite.missing_root}, but exists under "
        f"{rewrite.existing_root}" + (f": {consequence}" if consequence else ""),
        f"use {rewrite.rewritten}",
    )


def _host_paths(value: Any, context: Context) -> Iterator[tuple[str, str, str]]:
    """(pointer, what, host path) for every bind-mount source and every hook program."""
    for mount in config(value, context).mounts:
        if mount.is_bind and mount.source and mount.source.startswith("/"):
            yield (
                f"{mount.pointer}/source",
                f"mount source {mount.source} (for {mount.destination})",
                mount.source,
            )
    for hook in hooks(value, context):
        if hook.path and hook.path.startswith("/"):
            yield f"{hook.pointer}/path", f"{hook.stage} hook {hook.path}", hook.path


@rule("HOST001", "stale-driver-root", Severity.ERROR, [OCI_CONFIG], needs_host=True)
def stale_driver_root(value: Any, context: Context) -> Iterator[Problem]:
    """A path sits under a driver root that does not hold it, while another driver root does.

    ## What it checks
    Every bind-mount source and hook path that does not exist on the host, against the driver-root
    candidates (`--driver-root`, default `/` and `/run/nvidia/driver`): if the same path relative to its root
    exists under another candidate, the spec was generated for the wrong driver root. The hint is the
    rewritten path; nothing is reported on a guess.

    ## Why it matters
    This is the GPU Operator failure where a stale `/run/nvidia/validations/toolkit-ready` marker made the
    device plugin choose `NVIDIA_DRIVER_ROOT=/run/nvidia/driver` on a node whose driver is installed on the
    host: every GPU pod then fails with `lstat /run/nvidia/driver/dev/nvidiactl: no such file or directory`
    (containerd) or a runc mount error.

    ## Example
    A mount source `/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.1` on a node where only
    `/usr/lib/x86_64-linux-gnu/libcuda.so.1` exists.

    ## Fix
    Regenerate the spec for the driver root that exists (for the GPU Operator: delete the stale files in
    `/run/nvidia/validations` and restart the device plugin); `nvidia-oci-hook reconcile` rewrites the paths.
    """
    for pointer, what, path in _host_paths(value, context):
        problem = stale_root_problem(context, pointer, what, path)
        if problem is not None:
            yield problem


@rule("HOST002", "privileged-device-collision", Severity.ERROR, [OCI_CONFIG], needs_host=True)
def privileged_device_collision(value: Any, context: Context) -> Iterator[Problem]:
    """A privileged container lists a device whose path is a different device on the host.

    ## What it checks
    In a privileged container (CAP_SYS_ADMIN in the bounding set, or an allow-all device rule), each
    `linux.devices` entry whose path exists on the host as another device (type, major or minor differ) or
    as something that is not a device at all.

    ## Why it matters
    Privileged containers get every host device, so the host's node and the spec's node fight over one path:
    runc keeps the first entry (DEV002), and cri-o refuses a privileged container whose device-plugin
    `container_path` already exists on the host ("privileged container was configured with a device container
    path that already exists on the host"). Stray `/dev/nvidia*` nodes created on the host by NVML are the
    usual cause.

    ## Example
    The spec lists `/dev/nvidia0` as c 195:1 (from a driver root under `/run/nvidia/driver`) while the host's
    `/dev/nvidia0` is c 195:0.

    ## Fix
    Make the numbers agree: regenerate the spec from the driver root that is really in use, or remove stray
    nodes from the host's `/dev` (`nvidia-oci-hook doctor` lists them).
    """
    if context.host is None:
        return
    evidence = config(value, context).privileged_evidence()
    if evidence is None:
        return
    for device in first_by_path(devices(value, context)).values():
        identity = context.host.identity(device.path)
        if identity is None:
            continue
        spec_type = cgroup_type(device.type)
        if identity.is_device and (identity.type, identity.major, identity.minor) == (
            spec_type,
            device.major,
            device.minor,
        ):
            continue
        if device.type == "p" and identity.type == "p":
            continue
        yield Problem(
            device.pointer,
            f"{device.path} is {device.number} in the spec but {identity.describe()} on the host, and the "
            f"container is privileged ({evidence})",
            f"make the spec's {device.path} match the host's ({identity.describe()}), or remove the host node",
        )


@rule("HOST003", "mount-source-missing", Severity.ERROR, [OCI_CONFIG], needs_host=True)
def mount_source_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A bind mount's source does not exist on the host.

    ## What it checks
    Every bind mount whose absolute `source` is missing under `--host-root` and is not explained by a stale
    driver root (HOST001).

    ## Why it matters
    runc fails the container with `mount ... no such file or directory`; for a GPU library or binary that
    is the whole container.

    ## Example
    A mount of `/usr/bin/nvidia-smi` on a node without the driver's utilities.

    ## Fix
    Install what provides the file, or remove the mount from whatever generates it (CDI spec, hooks).
    """
    if context.host is None:
        return
    for mount in config(value, context).mounts:
        source = mount.source
        if not (mount.is_bind and source and source.startswith("/")) or context.host.exists(source):
            continue
        if rewrite_for_existing_root(context.host, context.driver_roots, source) is not None:
            continue
        yield Problem(
            f"{mount.pointer}/source",
            f"bind mount source {source} (for {mount.destination}) does not exist on the host",
            "install what provides it, or remove the mount",
        )
