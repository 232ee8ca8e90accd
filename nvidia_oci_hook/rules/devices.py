"""DEV: linux.devices entries that runc and crun will not apply the way the spec reads."""

from __future__ import annotations

import posixpath
import stat
from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.devices import DEFAULT_DEVICES, DeviceAccess, cgroup_type, first_by_path
from nvidia_oci_hook.kinds.document import OCI_CONFIG
from nvidia_oci_hook.kinds.oci import Device, OCIConfig
from nvidia_oci_hook.rules.base import Context, rule


def config(value: Any, context: Context) -> OCIConfig:
    return context.cached("oci-config", lambda: OCIConfig(value))  # type: ignore[no-any-return]


def devices(value: Any, context: Context) -> list[Device]:
    return config(value, context).devices


def _repeats(value: Any, context: Context) -> Iterator[tuple[Device, Device]]:
    first: dict[str, Device] = {}
    for device in devices(value, context):
        earlier = first.setdefault(device.path, device)
        if earlier is not device:
            yield earlier, device


@rule("DEV001", "duplicate-device", Severity.WARNING, [OCI_CONFIG])
def duplicate_device(value: Any, context: Context) -> Iterator[Problem]:
    """The same device node is listed twice in linux.devices.

    ## What it checks
    Two `linux.devices` entries with the same path (after normalising `//` and `/./`) and the same type,
    major and minor.

    ## Why it matters
    Harmless today, since runc and crun create the node once, but it is the mark of two sources (a device
    plugin and a CDI spec, or a privileged container's host devices plus CDI edits) adding the same node
    without knowing of each other. The day their numbers differ, the entry becomes DEV002.

    ## Example
    `/dev/nvidia0` (c 195:0) listed by the engine for a privileged container and again by a CDI spec.

    ## Fix
    Remove the second entry, or make only one source add the device: for a privileged container under
    cri-o set `privileged_without_host_devices = true` on the runtime, or inject GPUs only through CDI.
    """
    for earlier, device in _repeats(value, context):
        if device.same_node(earlier):
            yield Problem(
                device.pointer,
                f"{device.path} ({device.number}) is already listed at {earlier.pointer}",
                f"delete {device.pointer}",
            )


@rule("DEV002", "conflicting-device", Severity.ERROR, [OCI_CONFIG])
def conflicting_device(value: Any, context: Context) -> Iterator[Problem]:
    """Two linux.devices entries give one path different device numbers.

    ## What it checks
    Two `linux.devices` entries with the same path whose type, major or minor differ.

    ## Why it matters
    runc and crun create the first entry and silently skip the second, so the container gets a node other
    than the one the later source (often a CDI spec) meant. For `/dev/nvidiaN` that is the wrong GPU, or a
    node whose open fails with ENXIO.

    ## Example
    `{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}` followed by
    `{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 1}`: the container gets GPU 0.

    ## Fix
    Keep only the entry with the right numbers (`ls -l /dev/nvidia*` on the node shows them); find which
    source adds the other and stop it.
    """
    for earlier, device in _repeats(value, context):
        if not device.same_node(earlier):
            yield Problem(
                device.pointer,
                f"{device.path} is {device.number} here but {earlier.number} at {earlier.pointer}; "
                "runc and crun create the first entry and ignore this one",
                f"remove one of {earlier.pointer} and {device.pointer}",
            )


@rule("DEV003", "device-not-allowed", Severity.ERROR, [OCI_CONFIG])
def device_not_allowed(value: Any, context: Context) -> Iterator[Problem]:
    """A device node has no allow rule in linux.resources.devices.

    ## What it checks
    For every node in `linux.devices`, the device-cgroup rules in `linux.resources.devices` (the last rule
    matching a node decides each of r, w and m, as runc applies them, runc's built-in rules for /dev/null and
    friends included) must grant read and write.

    ## Why it matters
    A `linux.devices` entry only creates the node; it does not allow it. Without an allow rule the node is
    visible in the container but `open` fails with EPERM, and CUDA reports "no CUDA-capable device".

    ## Example
    `linux.devices` lists `/dev/nvidia0` (c 195:0) while `linux.resources.devices` is
    `[{"allow": false, "access": "rwm"}]`.

    ## Fix
    Add `{"allow": true, "type": "c", "major": 195, "minor": 0, "access": "rwm"}` to
    `linux.resources.devices`, after any deny-all rule.
    """
    spec = config(value, context)
    access = DeviceAccess(spec.device_rules)
    for device in first_by_path(devices(value, context)).values():
        kind = cgroup_type(device.type)
        if kind not in ("c", "b") or device.major is None or device.minor is None:
            continue
        granted = access.granted(kind, device.major, device.minor)
        missing = "".join(letter for letter in "rw" if letter not in granted)
        if not missing:
            continue
        what = (
            "open fails with EPERM"
            if missing == "rw"
            else f"opening it for {'reading' if missing == 'r' else 'writing'} fails with EPERM"
        )
        yield Problem(
            device.pointer,
            f"no rule in linux.resources.devices allows {device.path} ({device.number}, "
            f"granted {granted or 'nothing'}): {what}",
            f'add {{"allow": true, "type": "{kind}", "major": {device.major}, "minor": {device.minor}, '
            '"access": "rwm"} to linux.resources.devices',
        )


@rule("DEV004", "mount-shadows-device", Severity.ERROR, [OCI_CONFIG])
def mount_shadows_device(value: Any, context: Context) -> Iterator[Problem]:
    """A mount lands on a device's path or on a directory that contains it.

    ## What it checks
    Every mount whose destination equals the path of a `linux.devices` entry, and every bind or devtmpfs
    mount onto a directory above one (a fresh tmpfs such as the standard `/dev` mount is fine: runc creates
    the nodes inside it).

    ## Why it matters
    runc and crun set up mounts before devices, and treat an existing file at the device path as done. So the
    mount silently wins: the container sees whatever the mount brought, not the node the spec describes.
    Bind-mounting the host's `/dev` this way is how NVML calls in one pod create `/dev/nvidia*` nodes on the
    host (the DRA driver bug behind cri-o's "device container path that already exists on the host").

    ## Example
    A bind mount of `/run/nvidia/driver/dev` at `/dev` together with a `linux.devices` entry for
    `/dev/nvidia0`.

    ## Fix
    Remove the mount, or mount it somewhere else (`/host/dev`) and keep the device entry.
    """
    by_path = first_by_path(devices(value, context))
    if not by_path:
        return
    below: dict[str, list[Device]] = {}
    for device in by_path.values():
        parent = posixpath.dirname(device.path)
        while parent not in ("/", ""):
            below.setdefault(parent, []).append(device)
            parent = posixpath.dirname(parent)
    for mount in config(value, context).mounts:
        exact = by_path.get(mount.destination)
        if exact is not None:
            yield Problem(
                mount.pointer,
                f"mount at {mount.destination} replaces the device node {exact.path} ({exact.number}) "
                f"listed at {exact.pointer}",
                f"remove {mount.pointer} or {exact.pointer}",
            )
            continue
        if not (mount.is_bind or mount.type == "devtmpfs"):
            continue
        hidden = below.get(mount.destination, [])
        if hidden:
            names = ", ".join(device.path for device in hidden[:3]) + (
                f" and {len(hidden) - 3} more" if len(hidden) > 3 else ""
            )
            yield Problem(
                mount.pointer,
                f"mount of {mount.source or mount.type} at {mount.destination} covers {names}: runc creates "
                "the nodes inside the mounted directory, where an existing file of the same name wins",
                f"mount {mount.source or 'it'} elsewhere (for example /host{mount.destination})",
            )


@rule("DEV005", "default-device-replaced", Severity.ERROR, [OCI_CONFIG])
def default_device_replaced(value: Any, context: Context) -> Iterator[Problem]:
    """A linux.devices entry gives a default device other numbers.

    ## What it checks
    Entries for `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom` and `/dev/tty` whose
    type, major or minor differ from the kernel's (c 1:3, 1:5, 1:7, 1:8, 1:9 and 5:0).

    ## Why it matters
    runc and crun let a `linux.devices` entry override the default node. A wrong `/dev/null` breaks nearly
    every program in the container, in ways that point nowhere near the spec. Both open the container's
    `/dev/null` while they set the container up, so a node that no driver serves there (a GPU's on a node whose
    driver is not loaded) refuses the container: `error reopening /dev/null inside container: open /dev/null: no
    such device or address` (runc 1.1.5), `failed open()ing /dev/null: No such device or address` (crun 1.8.1).

    ## Example
    `{"path": "/dev/null", "type": "c", "major": 195, "minor": 0}`: writes to /dev/null go to a GPU node.

    ## Fix
    Delete the entry; the runtime creates the default devices by itself.
    """
    for device in first_by_path(devices(value, context)).values():
        expected = DEFAULT_DEVICES.get(device.path)
        if expected and (device.type, device.major, device.minor) != expected:
            kind, major, minor = expected
            opened = (
                "; runc and crun open it while they set the container up, and refuse the container where no driver "
                "serves that node (runc: `error reopening /dev/null inside container: open /dev/null: no such device "
                "or address`; crun: `failed open()ing /dev/null: No such device or address`)"
                if device.path == "/dev/null"
                else ""
            )
            yield Problem(
                device.pointer,
                f"{device.path} is {device.number} here; the kernel's is {kind} {major}:{minor}{opened}",
                f"delete {device.pointer}: the runtime creates {device.path} by itself",
            )


_FILE_TYPE_BITS = {"c": stat.S_IFCHR, "u": stat.S_IFCHR, "b": stat.S_IFBLK, "p": stat.S_IFIFO}


@rule("DEV006", "device-file-mode-bits", Severity.WARNING, [OCI_CONFIG], supersedes_schema=True)
def device_file_mode_bits(value: Any, context: Context) -> Iterator[Problem]:
    """A device's fileMode carries more than permission bits.

    ## What it checks
    `linux.devices[].fileMode` values above 0o777 (511): file-type bits (`S_IFCHR`, `S_IFBLK`) or setuid,
    setgid and sticky bits.

    ## Why it matters
    podman writes a host device's whole `st_mode` (`/dev/nvidia0` becomes 8630, that is 0o20666). runc and crun
    accept it, since they add the type bits anyway, but the runtime-spec schema allows at most 511 and strict
    validators (`oci-runtime-tool validate`, this tool's `--schema-only`) reject the spec; setuid or sticky bits
    on a device node are never intended.

    ## Example
    `{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0, "fileMode": 8630}`

    ## Fix
    Keep the permission bits only: `fileMode & 0o777` (438 for 0o666).
    """
    for device in devices(value, context):
        mode = device.file_mode
        if mode is None or 0 <= mode <= 0o777:
            continue
        if mode < 0:
            continue  # a schema error: negative modes are refused by the runtime-spec schema
        extra = mode & ~0o777
        type_bits = _FILE_TYPE_BITS.get(device.type or "")
        if type_bits is not None and extra == type_bits:
            why = "includes the file-type bits (as podman writes it); runc and crun accept it"
        else:
            why = f"sets bits 0o{extra:o} beyond the permission bits"
        yield Problem(
            f"{device.pointer}/fileMode",
            f"fileMode {mode} (0o{mode:o}) of {device.path} {why}, but the runtime-spec schema allows at most 511",
            f"use {mode & 0o777} (0o{mode & 0o777:o})",
        )
