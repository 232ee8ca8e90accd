"""CRI: container configs as the kubelet (or crictl) hands them to cri-o and containerd."""

from __future__ import annotations

import errno
import os
import posixpath
from collections.abc import Iterator
from functools import partial
from typing import Any, Optional

from nvidia_oci_hook.findings import OUTCOME_REFUSED, OUTCOME_WITHOUT_DEVICE, Problem, Severity
from nvidia_oci_hook.host import DeviceIdentity, rewrite_for_existing_root
from nvidia_oci_hook.kinds.cdinames import cdi_name_error
from nvidia_oci_hook.kinds.cri import CRI_CONTAINER, CRIContainerConfig, CRIDevice
from nvidia_oci_hook.kinds.devices import DEFAULT_DEVICES as KERNEL_DEVICES
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
    as a raw string, and `container_path` exists on the host (`stat` follows links). cri-o stats a relative
    container path as it is, so in its own working directory: the running daemon's, else `/` (systemd's).

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
        if device.container_path == device.host_path or not device.container_path:
            continue
        where, looked = device.container_path, ""
        if not where.startswith("/"):
            from nvidia_oci_hook.node.locations import crio_working_directory

            cwd, how = context.cached("crio-cwd", partial(crio_working_directory, context.host))
            where = posixpath.join(cwd, device.container_path)
            looked = f"the relative {device.container_path} is {where} in {how}, and "
        info = context.host.identity(where)
        if info is None:
            continue
        yield Problem(
            f"{device.pointer}/container_path",
            f"cri-o refuses the container: {CRIO_COLLISION_ERROR} ({looked}{where} exists on the host as "
            f"{info.describe()}, while host_path is {device.host_path})",
            f"give the device a container path of its own, such as {_own_path(device)}"
            if device.container_path in DEFAULT_DEVICES
            else f"remove the stray host node {device.container_path}, or request the device through CDI",
            engines=CRIO,
            outcome=OUTCOME_REFUSED,
        )


CRIO, CONTAINERD = frozenset({"crio"}), frozenset({"containerd"})
# What cri-o 1.37 does with a device whose host path it cannot use, measured (tests/e2e/cri_cases.py): it skips
# the device without a word, and the container starts without it.
CRIO_SKIPS = "cri-o skips the device without a word and starts the container without it"


@rule("CRI002", "device-host-path-missing", Severity.ERROR, [CRI_CONTAINER], needs_host=True)
def device_host_path_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A device's host_path does not exist on the host.

    ## What it checks
    Every `devices` entry's non-empty `host_path` against the host (links followed). A relative path is looked up
    where the engine runs, which this check cannot know: it is reported as missing. When the same path relative
    to another driver-root candidate exists, the hint is the rewritten path.

    ## Why it matters
    The engines differ, and cri-o's way is the worse one. containerd (1.7.24, 2.1.9) resolves the path while
    generating the spec and refuses the container: `failed to generate spec: lstat
    /run/nvidia/driver/dev/nvidiactl: no such file or directory`. cri-o (1.37) skips the device without a word
    and starts the container without it: the GPU is gone and nothing says so until the workload fails. This is
    the GPU Operator failure where a stale validation marker made the device plugin choose
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
        if not path or (path.startswith("/") and context.host.exists(path)):
            continue
        rewrite = rewrite_for_existing_root(context.host, context.driver_roots, path) if path.startswith("/") else None
        hint = (
            f"use {rewrite.rewritten}: the driver is under {rewrite.existing_root}, not {rewrite.missing_root}"
            if rewrite
            else "fix the device plugin's driver root, or create the node"
        )
        missing = f"host_path {path} does not exist on the host" + (
            "" if path.startswith("/") else " (a relative path)"
        )
        pointer = f"{device.pointer}/host_path"
        yield Problem(
            pointer,
            f"{missing}: containerd refuses the container (`lstat {path}: {os.strerror(errno.ENOENT).lower()}`)",
            hint,
            engines=CONTAINERD,
            outcome=OUTCOME_REFUSED,
        )
        yield Problem(
            pointer,
            f"{missing}: {CRIO_SKIPS} at {device.container_path}",
            hint,
            engines=CRIO,
            outcome=OUTCOME_WITHOUT_DEVICE,
        )


@rule("CRI003", "device-host-path-not-device", Severity.ERROR, [CRI_CONTAINER], needs_host=True)
def device_host_path_not_device(value: Any, context: Context) -> Iterator[Problem]:
    """A device's host_path exists but is not a device node.

    ## What it checks
    That every `devices` entry's `host_path` is a character or block device on the host. A directory is
    allowed: both engines then add every device below it.

    ## Why it matters
    containerd (1.7.24, 2.1.9) reads the node's type and numbers from the host path and refuses a regular file:
    `failed to generate spec: not a device node` (2.1: `get device path: ... error: not a device node`). cri-o
    (1.37) skips it without a word and starts the container without the device. An empty placeholder left by a
    failed driver install is the usual cause.

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
            what = f"{device.host_path} is {info.describe()} on the host, not a device node"
            hint = "remove it and let the driver create the node"
            pointer = f"{device.pointer}/host_path"
            yield Problem(pointer, f"{what}: containerd refuses the container (`not a device node`)", hint,
                          engines=CONTAINERD, outcome=OUTCOME_REFUSED)  # fmt: skip
            yield Problem(pointer, f"{what}: {CRIO_SKIPS} at {device.container_path}", hint, engines=CRIO,
                          outcome=OUTCOME_WITHOUT_DEVICE)  # fmt: skip


@rule("CRI006", "device-permissions-empty", Severity.ERROR, [CRI_CONTAINER])
def device_permissions_empty(value: Any, context: Context) -> Iterator[Problem]:
    """A device's permissions are empty or not given.

    ## What it checks
    Every `devices` entry with a `permissions` that is empty or absent.

    ## Why it matters
    Neither engine fills in a default: the device-cgroup rule they write has an empty access string, and runc
    refuses the container (`runc create failed: device access at N field cannot be empty`): cri-o (1.37) when
    the container is created, containerd (1.7.24, 2.1.9) when it is started. containerd writes no such rule for
    a privileged container, which is allowed every device, and runs it.

    ## Example
    `{"container_path": "/dev/nvidia0", "host_path": "/dev/nvidia0"}`

    ## Fix
    Give the permissions: `"permissions": "rw"` (`rwm` to let the container create the node itself).
    """
    config = _config(value, context)
    for device in config.devices:
        if not device.permissions:
            pointer = f"{device.pointer}/permissions" if device.has_permissions else device.pointer
            what = f"no permissions for {device.container_path or device.host_path}"
            refusal = "runc refuses the container (`device access at N field cannot be empty`)"
            hint = 'set "permissions": "rw"'
            if not _crio_skips(device.host_path, context):
                yield Problem(
                    pointer, f"{what}: {refusal} when cri-o creates it", hint, engines=CRIO, outcome=OUTCOME_REFUSED
                )
            if not config.privileged:
                # containerd allows a privileged container every device and writes no rule of its own for this one.
                yield Problem(
                    pointer,
                    f"{what}: {refusal} when containerd starts it",
                    hint,
                    engines=CONTAINERD,
                    outcome=OUTCOME_REFUSED,
                )


def _crio_skips(host_path: str, context: Context) -> bool:
    """Whether cri-o leaves the device out before anything reads its permissions: a host path that is neither a
    device node nor a directory (whose nodes it walks) on the host, or relative (CRI002, CRI003; measured on
    cri-o 1.37). Offline: not known."""
    if context.host is None or not host_path:
        return False
    if not host_path.startswith("/"):
        return True
    found = context.host.identity(host_path)
    return found is None or not (found.is_device or found.type == "directory")


@rule("CRI007", "device-host-path-empty", Severity.ERROR, [CRI_CONTAINER])
def device_host_path_empty(value: Any, context: Context) -> Iterator[Problem]:
    """A device's host_path is empty.

    ## What it checks
    Every `devices` entry whose `host_path` is empty or absent.

    ## Why it matters
    containerd (1.7.24, 2.1.9) refuses the container while generating the spec (`lstat : no such file or
    directory`). cri-o (1.37) joins the empty path to `/` and walks the node's whole filesystem for device
    nodes (seconds on each create, measured: `/proc`, `/sys`, `/usr` and every container's storage), so what
    the container gets depends on everything on the node: measured, it started the container without the
    device, or refused it through runc (`invalid cgroup device type "p"`: a named pipe somewhere on the node).
    Either way the container does not get the device asked for.

    ## Example
    `{"container_path": "/dev/nvidia0", "host_path": "", "permissions": "rw"}`

    ## Fix
    Give the device node's path on the host.
    """
    for device in _config(value, context).devices:
        if not device.host_path:
            pointer = f"{device.pointer}/host_path"
            hint = "give the device node's path on the host"
            yield Problem(pointer, "host_path is empty: containerd refuses the container (`lstat : no such file or "
                          "directory`)", hint, engines=CONTAINERD, outcome=OUTCOME_REFUSED)  # fmt: skip
            walks = (
                "host_path is empty: cri-o reads it as / and walks the node's whole filesystem for device nodes "
                "instead, and the container starts without the device asked for (or is refused, `invalid cgroup "
                'device type "p"`, where a named pipe is on the node)'
            )
            yield Problem(pointer, walks, hint, engines=CRIO, outcome=OUTCOME_WITHOUT_DEVICE)


# The devices every container has (runc's defaults): a path of theirs is a device node in the container already.
DEFAULT_DEVICES = frozenset(KERNEL_DEVICES)


@rule("CRI008", "device-directory-on-default-device", Severity.ERROR, [CRI_CONTAINER], needs_host=True)
def device_directory_on_default_device(value: Any, context: Context) -> Iterator[Problem]:
    """A directory host_path is given the container path of a device every container has.

    ## What it checks
    A `devices` entry whose `host_path` is a directory on the host and whose `container_path` is one of the
    devices runc gives every container (`/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`,
    `/dev/tty`).

    ## Why it matters
    Both engines walk a directory and put its nodes below the container path, so that path must become a
    directory, and it is already a device node: runc refuses the container (`error creating device nodes: mkdir
    .../dev/null: ...`; containerd's privileged containers: `error reopening /dev/null inside container: open
    /dev/null: is a directory`). Measured on cri-o 1.37 (unprivileged; a privileged one is CRI001's) and
    containerd 1.7.24 and 2.1.9.

    ## Example
    `{"container_path": "/dev/null", "host_path": "/run/nvidia/driver/dev", "permissions": "rw"}`

    ## Fix
    Give the directory a container path of its own (`/dev/nvidia-caps` for `/dev/nvidia-caps`), or list its
    device nodes one by one.
    """
    if context.host is None:
        return
    config = _config(value, context)
    for device in config.devices:
        if device.container_path not in DEFAULT_DEVICES or not device.host_path.startswith("/"):
            continue
        info = context.host.identity(device.host_path)
        if info is None or info.type != "directory":
            continue
        message = (
            f"{device.host_path} is a directory, and {device.container_path} is a device every container has: runc "
            f"refuses the container (`error creating device nodes: mkdir ...{device.container_path}`)"
        )
        hint = "give the directory a container path of its own, or list its device nodes one by one"
        pointer = f"{device.pointer}/container_path"
        yield Problem(pointer, message, hint, engines=CONTAINERD, outcome=OUTCOME_REFUSED)
        if not config.privileged:
            yield Problem(pointer, message, hint, engines=CRIO, outcome=OUTCOME_REFUSED)


# What runc (1.1.5) says where it cannot open the container's /dev/null while it sets the container up (libcontainer
# reOpenDevNull), measured with a GPU's node (c 195:0) and no driver for it (tests/e2e/cri_cases.py); each engine's
# words around it.
REOPEN_ERROR = (
    "runc create failed: unable to start container process: error during container init: error reopening /dev/null "
    "inside container: open /dev/null: no such device or address"
)
_REFUSED_BY = {
    "crio": f"cri-o refuses the container when it creates it (`container create failed: ... {REOPEN_ERROR}`)",
    "containerd": "containerd refuses the container when it starts it (`failed to create containerd task: failed to "
    f"create shim task: OCI runtime create failed: {REOPEN_ERROR}`)",
}


def _driven_majors(context: Context) -> Optional[dict[str, frozenset[int]]]:
    """The majors a driver serves on the host, by node type ("c", "b"), from /proc/devices; None where it cannot be
    read."""

    def read() -> Optional[dict[str, frozenset[int]]]:
        assert context.host is not None
        text = context.host.read_text("/proc/devices")
        if text is None:
            return None
        found: dict[str, set[int]] = {"c": set(), "b": set()}
        section = found["c"]
        for line in text.splitlines():
            if line.startswith("Block devices"):
                section = found["b"]
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit():
                section.add(int(parts[0]))
        return {kind: frozenset(majors) for kind, majors in found.items()}

    return context.cached("driven-majors", read)  # type: ignore[no-any-return]


def _foreign_default_nodes(value: Any, context: Context) -> Iterator[tuple[CRIDevice, DeviceIdentity, Optional[bool]]]:
    """Each device given a default device's container path whose host node is another device, with whether a driver
    serves that node on the host (None: /proc/devices cannot be read)."""
    if context.host is None:
        return
    for device in _config(value, context).devices:
        default = KERNEL_DEVICES.get(device.container_path)
        if default is None or not device.host_path.startswith("/"):
            continue
        info = context.host.identity(device.host_path)
        if info is None or not info.is_device or (info.type, info.major, info.minor) == default:
            continue
        majors = _driven_majors(context)
        yield device, info, None if majors is None else info.major in majors[info.type]


def _own_path(device: CRIDevice) -> str:
    name = posixpath.basename(device.host_path)
    return f"/dev/{name}" if name and f"/dev/{name}" not in DEFAULT_DEVICES else "/dev/<name of its own>"


@rule("CRI009", "undriven-device-on-dev-null", Severity.ERROR, [CRI_CONTAINER], needs_host=True)
def undriven_device_on_dev_null(value: Any, context: Context) -> Iterator[Problem]:
    """A device node that no driver serves on the host is given the container path /dev/null.

    ## What it checks
    A `devices` entry whose `container_path` is `/dev/null` and whose `host_path` is a device node (other than
    `/dev/null`'s own `c 1:3`) of a major that no driver serves on the host: `/proc/devices` does not list it. A
    GPU's node (`c 195:0`) on a node whose NVIDIA driver is not loaded is the case in point.

    ## Why it matters
    The engines put the node at `/dev/null` in place of the default one, and runc opens the container's `/dev/null`
    while it sets the container up. With no driver behind the node the open fails, and so does the container:
    `error reopening /dev/null inside container: open /dev/null: no such device or address`; cri-o (1.37) when it
    creates the container (a privileged one: CRI001 refuses it first), containerd (1.7.24, 2.1.9) when it starts
    it, privileged or not (measured, runc 1.1.5). Where a driver serves the node the container starts with it as
    `/dev/null` (CRI010).

    ## Example
    `{"container_path": "/dev/null", "host_path": "/dev/nvidia0", "permissions": "rw"}` on a node where
    `grep -w 195 /proc/devices` prints nothing.

    ## Fix
    Give the device a container path of its own (`/dev/nvidia0` for `/dev/nvidia0`).
    """
    privileged = _config(value, context).privileged
    for device, info, driven in _foreign_default_nodes(value, context):
        if device.container_path != "/dev/null" or driven is not False:
            continue
        what = (
            f"{device.host_path} ({info.describe()}) is given the container path /dev/null, and no driver serves "
            f"major {info.major} on the host (/proc/devices): runc cannot open the container's /dev/null"
        )
        hint = f"give the device a container path of its own, such as {_own_path(device)}"
        pointer = f"{device.pointer}/container_path"
        yield Problem(
            pointer, f"{what}: {_REFUSED_BY['containerd']}", hint, engines=CONTAINERD, outcome=OUTCOME_REFUSED
        )
        if not privileged:
            yield Problem(pointer, f"{what}: {_REFUSED_BY['crio']}", hint, engines=CRIO, outcome=OUTCOME_REFUSED)


@rule("CRI010", "device-replaces-default-device", Severity.ERROR, [CRI_CONTAINER], needs_host=True)
def device_replaces_default_device(value: Any, context: Context) -> Iterator[Problem]:
    """A device node is given the container path of a device every container has, and the container gets it there.

    ## What it checks
    A `devices` entry whose `container_path` is one of the devices runc gives every container (`/dev/null`,
    `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`, `/dev/tty`) and whose `host_path` is a device node with
    other numbers than the kernel's device there (`c 1:3` for `/dev/null`), except where runc refuses the container
    for it (CRI009).

    ## Why it matters
    The engines put the node at that path in place of the default device, and the container starts (measured: a
    GPU's `c 195:0` at `/dev/zero` and `/dev/tty`, and `/dev/urandom`'s `c 1:9` at `/dev/null`, on cri-o 1.37 and
    containerd 1.7.24 and 2.1.9). Whatever in the container uses that path now reaches the device: a GPU as
    `/dev/null` takes every `> /dev/null` of every script, and `/dev/urandom` as `/dev/null` never reaches an end of
    file. A privileged container on cri-o is refused first (CRI001).

    ## Example
    `{"container_path": "/dev/zero", "host_path": "/dev/nvidia0", "permissions": "rw"}`

    ## Fix
    Give the device a container path of its own (`/dev/nvidia0` for `/dev/nvidia0`).
    """
    privileged = _config(value, context).privileged
    for device, info, driven in _foreign_default_nodes(value, context):
        path = device.container_path
        opened = path == "/dev/null"
        if opened and driven is False:
            continue
        kind, major, minor = KERNEL_DEVICES[path]
        message = (
            f"{device.host_path} ({info.describe()}) is given the container path {path}, the kernel's {kind} "
            f"{major}:{minor} in every other container: the container starts, and what uses {path} in it reaches "
            "that device"
        )
        if opened:
            served = (
                f"it refuses the container where no driver serves major {info.major}, CRI009"
                if driven is None
                else f"a driver serves major {info.major} on the host"
            )
            message += f" (runc opens it while it sets the container up: {served})"
        hint = f"give the device a container path of its own, such as {_own_path(device)}"
        pointer = f"{device.pointer}/container_path"
        yield Problem(pointer, message, hint, engines=CONTAINERD if privileged else None)


@rule("CRI004", "invalid-cdi-device-request", Severity.ERROR, [CRI_CONTAINER])
def invalid_cdi_device_request(value: Any, context: Context) -> Iterator[Problem]:
    """A cdi_devices entry is not a qualified CDI device name.

    ## What it checks
    Every `cdi_devices[].name` against the CDI library's syntax for `vendor/class=name`.

    ## Why it matters
    The engine resolves each name against its CDI spec directories and refuses the container when one does not
    parse or is not defined: `CDI device injection failed: unresolvable CDI devices gpu=0` (cri-o 1.37,
    containerd 1.7.24 and 2.1.9, measured; containerd's inside `failed to create containerd container`).

    ## Example
    `{"cdi_devices": [{"name": "nvidia.com/gpu0"}]}` (no `=`).

    ## Fix
    Use the qualified name, e.g. `nvidia.com/gpu=0`; `nvidia-ctk cdi list` shows the names defined on the node.
    """
    for request in _config(value, context).cdi_devices:
        reason = cdi_name_error(request.name)
        if reason is not None:
            yield Problem(
                f"{request.pointer}/name",
                f"{reason}: cri-o and containerd refuse the container (`CDI device injection failed: unresolvable CDI "
                f"devices {request.name}`)",
                "write it as vendor/class=name, e.g. nvidia.com/gpu=0",
                outcome=OUTCOME_REFUSED,
            )


@rule("CRI005", "invalid-device-permissions", Severity.WARNING, [CRI_CONTAINER])
def invalid_device_permissions(value: Any, context: Context) -> Iterator[Problem]:
    """A device's permissions hold letters other than r, w and m.

    ## What it checks
    That every non-empty `devices[].permissions` is made of `r`, `w` and `m` only (an empty one is CRI006's).

    ## Why it matters
    A device-cgroup rule knows read, write and mknod only. The engines do not check the string: cri-o 1.37 and
    containerd 1.7.24 and 2.1.9 pass `rwx`, `rw-` and `RW` on and the container starts (measured, runc 1.1.5), so
    the permissions the pod gets are not the ones written. A copy of a file mode is the usual cause.

    ## Example
    `{"container_path": "/dev/nvidia0", "host_path": "/dev/nvidia0", "permissions": "rw-"}`

    ## Fix
    Use `rw` (or `rwm` to let the container create the node itself).
    """
    for device in _config(value, context).devices:
        extra = sorted(set(device.permissions) - set("rwm"))
        if device.permissions and extra:
            yield Problem(
                f"{device.pointer}/permissions",
                f"permissions {device.permissions!r} for {device.container_path} contain {''.join(extra)!r}, which "
                "no device rule knows: the engines start the container anyway",
                "use a combination of r, w and m, such as 'rw'",
            )
