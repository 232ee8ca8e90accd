"""Settings with which the CRI plugin fails to load, so that containerd serves no CRI (CTD110, CTD115, CTD120,
and CTD121 where the node decides)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.containerd.config import ContainerdConfig
from nvidia_oci_hook.kinds.containerd.versions import CRI_IMAGES, CRI_V2, DEFAULT_RUNTIME, V1X, V2X, describe_series
from nvidia_oci_hook.kinds.containerd.walk import toml_key
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.containerd.config_view import KINDS, _config, _first_child, _who
from nvidia_oci_hook.rules.containerd.keys import _REPLACEMENTS

LINUX_V1 = "io.containerd.runtime.v1.linux"
UNKNOWN_SERVICE = "the kubelet then fails with `unknown service runtime.v1.RuntimeService`"


def _effective_runtimes(config: ContainerdConfig, series: frozenset[str]) -> set[str]:
    """The runtime names containerd has: 1.x replaces its built-in list with the file's, 2.x merges them."""
    names = {runtime.name for runtime in config.runtimes()}
    if config.runtimes_table() is not None and series <= V1X:
        return names
    return names | {DEFAULT_RUNTIME}


def _legacy_default(config: ContainerdConfig) -> bool:
    """containerd 1.x's deprecated default_runtime table with a type: it becomes the runtime named 'default'."""
    legacy = (config.cri_containerd() or {}).get("default_runtime")
    return isinstance(legacy, dict) and bool(legacy.get("runtime_type"))


@rule("CTD110", "default-runtime-undefined", Severity.ERROR, KINDS)
def default_runtime_undefined(value: Any, context: Context) -> Iterator[Problem]:
    """default_runtime_name names a runtime that containerd does not have.

    ## What it checks
    That the CRI plugin's `containerd.default_runtime_name` (default `"runc"`) is not empty and names an entry
    of `containerd.runtimes`, as containerd will have them: containerd 1.6 and 1.7 replace their built-in
    `runc` entry with the file's `runtimes` table when the file has one, containerd 2.x adds the file's
    entries to it.

    ## Why it matters
    The CRI plugin fails to load; containerd logs, at warning level, `failed to load plugin
    io.containerd.grpc.v1.cri` with the error "invalid plugin config: no corresponding runtime configured in
    `containerd.runtimes` for `containerd` `default_runtime_name = "runc"`" (or "`default_runtime_name` is
    empty"). containerd itself keeps running, so the service looks healthy, but `ctr plugins ls` shows the CRI
    plugin in state `error`, the kubelet gets `unknown service runtime.v1.RuntimeService` and the node goes
    NotReady. A common trigger on 1.x: a file that defines only `runtimes.nvidia` and leaves
    `default_runtime_name` unset.

    ## Example
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
    ```
    (containerd 1.6 and 1.7: no `runc` runtime any more, and `default_runtime_name` is still `"runc"`.)

    ## Fix
    Set `default_runtime_name` to one of the runtimes the file defines, or define the runtime it names
    (`[...containerd.runtimes.runc]` with `runtime_type = "io.containerd.runc.v2"`).
    """
    for failure in _default_runtime_failures(_config(value, context)):
        yield Problem(failure.pointer, failure.message, failure.hint, series=failure.series)


@dataclass(frozen=True)
class CriFailure:
    """A setting that makes the CRI plugin fail to load, and the containerd series it fails on."""

    pointer: str
    message: str
    hint: str
    series: frozenset[str]


def _default_runtime_failures(config: ContainerdConfig) -> Iterator[CriFailure]:
    readers = config.readers
    cri = config.cri
    if not readers or cri is None:
        return
    containerd = config.cri_containerd() or {}
    explicit = "default_runtime_name" in containerd
    name = containerd.get("default_runtime_name", DEFAULT_RUNTIME)
    if not isinstance(name, str):
        return
    base = f"{config.cri_pointer}/containerd"
    runtimes = config.runtimes()
    if explicit:
        pointer = f"{base}/default_runtime_name"
    else:
        pointer = runtimes[0].pointer if runtimes else _first_child(config.cri_pointer, cri)
    if name == "":
        yield CriFailure(
            pointer,
            f"default_runtime_name is empty: the CRI plugin of {describe_series(readers)} fails to load "
            f'("`default_runtime_name` is empty") and {UNKNOWN_SERVICE}',
            "name one of the runtimes under containerd.runtimes",
            readers,
        )
        return
    failing: set[str] = set()
    for group in (readers & V1X, readers & V2X):
        if not group or (group <= V1X and _legacy_default(config)):
            continue
        if name not in _effective_runtimes(config, group):
            failing |= group
    if not failing:
        return
    defined = sorted(runtime.name for runtime in runtimes)
    have = ", ".join(defined) if defined else "none"
    if explicit:
        subject = f'default_runtime_name is "{name}", but containerd.runtimes has no entry {name} (it has: {have})'
    else:
        subject = (
            f'default_runtime_name is not set, so containerd uses "{name}", but this file\'s containerd.runtimes '
            f"(which replaces the built-in list in containerd 1.6 and 1.7) has no {name} entry (it has: {have})"
        )
    yield CriFailure(
        pointer,
        f'{subject}: the CRI plugin of {describe_series(failing)} fails to load ("no corresponding runtime '
        f'configured in `containerd.runtimes` for `containerd` `default_runtime_name = "{name}"") and '
        f"{UNKNOWN_SERVICE}",
        f"set default_runtime_name to one of: {have}"
        if defined
        else f"define [{toml_key((*config.runtimes_path, name))}]",
        frozenset(failing),
    )


_GO_DURATION = re.compile(r"[-+]?(?:0|(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)")


def _duration_problems(config: ContainerdConfig) -> Iterator[tuple[str, str, frozenset[str]]]:
    cri = config.cri or {}
    checks: list[tuple[str, Mapping[str, Any], str, str, frozenset[str]]] = []
    if config.version <= 2:
        checks.append((config.cri_pointer, cri, "stream_idle_timeout", "invalid stream idle timeout", config.readers))
    else:
        server = config.plugins.get(CRI_V2)
        if isinstance(server, dict):
            checks.append(
                (
                    pointer_join("/plugins", CRI_V2),
                    server,
                    "stream_idle_timeout",
                    "invalid stream idle timeout",
                    config.readers,
                )
            )
    readers = config.readers - ({"1.6"} if config.version <= 2 else set())
    checks.append(
        (
            config.cri_pointer,
            cri,
            "drain_exec_sync_io_timeout",
            "invalid `drain_exec_sync_io_timeout`",
            frozenset(readers),
        )
    )
    for base, table, key, text, series in checks:
        setting = table.get(key)
        if isinstance(setting, str) and setting and not _GO_DURATION.fullmatch(setting):
            yield (
                f"{base}/{key}",
                f'{key} = "{setting}" is not a Go duration (such as "4h0m0s" or "30s"): the CRI plugin of '
                f'{describe_series(series)} fails to load ("{text}: time: invalid duration ...")',
                series,
            )


def _cri_validation(config: ContainerdConfig) -> Iterator[CriFailure]:
    """Settings other than default_runtime_name that make the CRI plugin's validation fail."""
    readers = config.readers
    cri = config.cri
    if not readers or cri is None:
        return
    containerd = config.cri_containerd() or {}
    runtimes = {runtime.name: runtime for runtime in config.runtimes()}
    default_name = containerd.get("default_runtime_name", DEFAULT_RUNTIME)
    if not isinstance(default_name, str):
        default_name = DEFAULT_RUNTIME  # a wrong type is CTD001's
    default_type = runtimes[default_name].type if default_name in runtimes else "io.containerd.runc.v2"
    old = readers & V1X
    if old:
        for key in ("systemd_cgroup", "no_pivot"):
            table, base = (
                (cri, config.cri_pointer)
                if key == "systemd_cgroup"
                else (containerd, f"{config.cri_pointer}/containerd")
            )
            if table.get(key) is True and default_type != LINUX_V1:
                yield CriFailure(
                    f"{base}/{key}",
                    f"{key} = true only works with the legacy runtime {LINUX_V1}, and the default runtime "
                    f'"{default_name}" is {default_type}: the CRI plugin of {describe_series(old)} fails to load '
                    f'("`{key}` only works for runtime {LINUX_V1}")',
                    _REPLACEMENTS[key],
                    old,
                )
        for runtime in runtimes.values():
            for key in ("runtime_engine", "runtime_root"):
                setting = runtime.table.get(key)
                if isinstance(setting, str) and setting and runtime.type != LINUX_V1:
                    yield CriFailure(
                        f"{runtime.pointer}/{key}",
                        f'runtime "{runtime.name}" sets {key}, which only works with {LINUX_V1}: the CRI plugin of '
                        f'{describe_series(old)} fails to load ("`{key}` only works for runtime {LINUX_V1}")',
                        _REPLACEMENTS[key],
                        old,
                    )
        untrusted = containerd.get("untrusted_workload_runtime")
        if isinstance(untrusted, dict) and untrusted.get("runtime_type") and "untrusted" in runtimes:
            yield CriFailure(
                f"{config.cri_pointer}/containerd/untrusted_workload_runtime",
                "both untrusted_workload_runtime and runtimes.untrusted are defined: the CRI plugin of "
                f'{describe_series(old)} fails to load ("conflicting definitions: configuration includes both '
                '`untrusted_workload_runtime` and `runtimes["untrusted"]`")',
                "delete untrusted_workload_runtime",
                old,
            )
    for runtime in runtimes.values():
        all_allowed = runtime.table.get("privileged_without_host_devices_all_devices_allowed") is True
        if all_allowed and runtime.table.get("privileged_without_host_devices") is not True:
            series = readers - {"1.6"}
            yield CriFailure(
                f"{runtime.pointer}/privileged_without_host_devices_all_devices_allowed",
                f'runtime "{runtime.name}" sets privileged_without_host_devices_all_devices_allowed without '
                f"privileged_without_host_devices = true: the CRI plugin of {describe_series(series)} fails to load "
                '("`privileged_without_host_devices_all_devices_allowed` requires `privileged_without_host_devices` '
                'to be enabled")',
                "set privileged_without_host_devices = true as well, or delete the key",
                frozenset(series),
            )
        io_type = runtime.table.get("io_type")
        if isinstance(io_type, str) and io_type not in ("", "fifo", "streaming") and readers & V2X:
            yield CriFailure(
                f"{runtime.pointer}/io_type",
                f'runtime "{runtime.name}" has io_type = "{io_type}": the CRI plugin of '
                f'{describe_series(readers & V2X)} fails to load ("`io_type` can only be `streaming` or '
                '`named_pipe`")',
                'use io_type = "fifo" (the default) or "streaming"',
                readers & V2X,
            )
    images = config.plugins.get(CRI_IMAGES) if isinstance(config.plugins.get(CRI_IMAGES), dict) else None
    registry = cri.get("registry") if config.version <= 2 else (images or {}).get("registry")
    if isinstance(registry, dict) and registry.get("config_path") and registry.get("mirrors"):
        base = (
            f"{config.cri_pointer}/registry"
            if config.version <= 2
            else pointer_join("/plugins", CRI_IMAGES) + "/registry"
        )
        yield CriFailure(
            f"{base}/mirrors",
            "registry.mirrors is set together with registry.config_path: the CRI plugin of "
            f'{describe_series(readers)} fails to load ("`mirrors` cannot be set when `config_path` is provided")',
            "move the mirrors to hosts.toml files under config_path, and delete registry.mirrors",
            readers,
        )
    for pointer, message, series in _duration_problems(config):
        yield CriFailure(pointer, message, 'use a Go duration such as "4h" or "30s"', series)


def cri_plugin_failures(value: Any) -> frozenset[str]:
    """The containerd series whose CRI plugin fails to load with this config, by CTD110, CTD115 and CTD120."""
    config = ContainerdConfig(value)
    failing: set[str] = set()
    for failure in (*_default_runtime_failures(config), *_cri_validation(config), *_snapshotter_failures(config)):
        failing |= failure.series
    return frozenset(failing)


@rule("CTD115", "cri-plugin-config-invalid", Severity.ERROR, KINDS)
def cri_plugin_config_invalid(value: Any, context: Context) -> Iterator[Problem]:
    """A CRI setting fails the CRI plugin's own validation, so containerd runs without CRI.

    ## What it checks
    The checks the CRI plugin makes when it starts, other than `default_runtime_name` (CTD110):
    `systemd_cgroup = true` or `no_pivot = true` while the default runtime is not the legacy
    `io.containerd.runtime.v1.linux`, and `runtime_engine` or `runtime_root` on any other runtime (containerd
    1.6, 1.7); `privileged_without_host_devices_all_devices_allowed` without `privileged_without_host_devices`
    (1.7 and later); an `io_type` other than `fifo` or `streaming` (2.x); `untrusted_workload_runtime` together
    with `runtimes.untrusted`; `registry.mirrors` together with `registry.config_path`; and
    `stream_idle_timeout` or `drain_exec_sync_io_timeout` values that are not Go durations.

    ## Why it matters
    containerd loads the file (`containerd config dump` succeeds) and starts, but logs `failed to load plugin
    io.containerd.grpc.v1.cri ... invalid plugin config: ...` and serves no CRI: the kubelet gets `unknown
    service runtime.v1.RuntimeService` and the node goes NotReady. `systemd_cgroup = true` is a frequent
    leftover from containerd 1.2-era guides that looks like the cgroup driver setting.

    ## Example
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri"]
      systemd_cgroup = true
    ```

    ## Fix
    Follow the hint: for the cgroup driver, delete `systemd_cgroup` and set `SystemdCgroup = true` in the
    runc runtime's `options`.
    """
    for failure in _cri_validation(_config(value, context)):
        yield Problem(failure.pointer, failure.message, failure.hint, series=failure.series)


# The snapshot plugins each series builds in, as `ctr plugins ls` lists them on Debian's 1.6.20, 1.7.24 and 2.1.9
# (2.0 as 2.1 without erofs, which 2.1 added; 2.2 and 2.3 as 2.1). A name none of them has, and no proxy plugin
# of type snapshot gives, leaves the CRI plugin without its snapshotter.
BUILTIN_SNAPSHOTTERS = {
    "1.6": frozenset({"aufs", "btrfs", "devmapper", "native", "overlayfs", "zfs"}),
    "1.7": frozenset({"aufs", "blockfile", "btrfs", "devmapper", "native", "overlayfs", "zfs"}),
    "2.0": frozenset({"blockfile", "btrfs", "devmapper", "native", "overlayfs"}),
    "2.1": frozenset({"blockfile", "btrfs", "devmapper", "erofs", "native", "overlayfs"}),
    "2.2": frozenset({"blockfile", "btrfs", "devmapper", "erofs", "native", "overlayfs"}),
    "2.3": frozenset({"blockfile", "btrfs", "devmapper", "erofs", "native", "overlayfs"}),
}
# Built in, but loaded only where the node has what they need; elsewhere the plugin is skipped.
CONDITIONAL_SNAPSHOTTERS = {
    "aufs": "the aufs kernel module",
    "btrfs": "containerd's root on a btrfs file system",
    "zfs": "containerd's root on a ZFS dataset",
    "devmapper": 'a thin pool configured in [plugins."io.containerd.snapshotter.v1.devmapper"]',
    "blockfile": 'a scratch file configured in [plugins."io.containerd.snapshotter.v1.blockfile"]',
    "erofs": "a kernel with EROFS support",
}


def _snapshotter_setting(config: ContainerdConfig) -> Optional[tuple[str, str, frozenset[str]]]:
    """(pointer, name, the series that use it) of the CRI plugin's default snapshotter as set in the file. In a
    version 1 or 2 file it is `containerd.snapshotter`, which 2.x moves to the images plugin only where the file's
    `containerd` table has `runtimes` (measured on 2.1.9; without them its images plugin keeps overlayfs); in a
    version 3 file it is the images plugin's."""
    if config.version <= 2:
        table, base, series = config.cri_containerd(), f"{config.cri_pointer}/containerd", config.readers & V1X
        if isinstance(table, dict) and isinstance(table.get("runtimes"), dict):
            series = config.readers
    else:
        images = config.plugins.get(CRI_IMAGES)
        table, base, series = images, pointer_join("/plugins", CRI_IMAGES), config.readers & V2X
    if not isinstance(table, dict) or not series:
        return None
    name = table.get("snapshotter")
    if not isinstance(name, str):
        return None  # a wrong type is CTD001's
    if not name:
        # 1.x takes an empty name for the default, overlayfs; 2.x looks "" up as it is (measured on 2.1.9).
        series = series & V2X
        if not series:
            return None
    return f"{base}/snapshotter", name, frozenset(series)


def _proxy_snapshotters(config: ContainerdConfig) -> set[str]:
    proxies = config.value.get("proxy_plugins")
    if not isinstance(proxies, dict):
        return set()
    return {name for name, table in proxies.items() if isinstance(table, dict) and table.get("type") == "snapshot"}


def _snapshotter_failures(config: ContainerdConfig) -> Iterator[CriFailure]:
    setting = _snapshotter_setting(config)
    if setting is None:
        return
    pointer, name, series = setting
    if name in _proxy_snapshotters(config):
        return
    missing = frozenset(s for s in series if name not in BUILTIN_SNAPSHOTTERS[s])
    if not missing:
        return
    known = sorted(BUILTIN_SNAPSHOTTERS[min(missing)])
    ignored = config.readers - series
    also = (
        f"; {_who(ignored, 'leave')} it behind in a file whose containerd table has no runtimes, and use overlayfs"
        if ignored & V2X
        else ""
    )
    yield CriFailure(
        pointer,
        f'snapshotter "{name}" is no snapshot plugin of {describe_series(missing)} and no proxy plugin of this file: '
        f'the CRI plugin fails to load (`failed to find snapshotter "{name}"`) and {UNKNOWN_SERVICE}{also}',
        f'use one of {", ".join(known)}, or define [proxy_plugins.{name}] with type = "snapshot"',
        missing,
    )


@rule("CTD120", "snapshotter-not-found", Severity.ERROR, KINDS)
def snapshotter_not_found(value: Any, context: Context) -> Iterator[Problem]:
    """The CRI plugin's snapshotter is none that containerd has, so containerd runs without CRI.

    ## What it checks
    The default snapshotter of the CRI plugin (`containerd.snapshotter` of `plugins."io.containerd.grpc.v1.cri"`
    in a version 2 file, read by containerd 1.6 and 1.7; `snapshotter` of `plugins."io.containerd.cri.v1.images"`
    in a version 3 file) against the snapshot plugins each release builds in (1.6: aufs, btrfs, devmapper,
    native, overlayfs, zfs; 1.7 adds blockfile; 2.x: blockfile, btrfs, devmapper, native, overlayfs, and erofs
    from 2.1) and the file's `proxy_plugins` of type `snapshot`.

    ## Why it matters
    containerd starts and logs `failed to load plugin io.containerd.grpc.v1.cri` (2.x:
    `io.containerd.cri.v1.images`) with `failed to find snapshotter "stargz"`; it serves no CRI, the kubelet gets
    `unknown service runtime.v1.RuntimeService` and the node goes NotReady. The usual cause is a snapshotter
    named before its proxy plugin was configured (stargz, nydus, soci), or a name misspelt (`overlay`).
    Measured with Debian's containerd 1.6.20, 1.7.24 and 2.1.9.

    ## Example
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlay"
    ```

    ## Fix
    Name a snapshotter containerd has (`ctr plugins ls` lists them, `overlayfs` is the default), or configure
    the proxy plugin: `[proxy_plugins.stargz]` with `type = "snapshot"` and its `address`.
    """
    for failure in _snapshotter_failures(_config(value, context)):
        yield Problem(failure.pointer, failure.message, failure.hint, series=failure.series)


@rule("CTD121", "snapshotter-needs-node-support", Severity.WARNING, KINDS)
def snapshotter_needs_node_support(value: Any, context: Context) -> Iterator[Problem]:
    """The CRI plugin's snapshotter is built in but loads only on nodes that have what it needs.

    ## What it checks
    A default snapshotter (as CTD120 reads it) that is one of the snapshot plugins containerd skips at start
    where the node lacks what they need: aufs (the kernel module), btrfs (containerd's root on btrfs), zfs (on a
    ZFS dataset), devmapper (a configured thin pool), blockfile (a configured scratch file), erofs (kernel
    support).

    ## Why it matters
    Where the plugin is skipped (`ctr plugins ls` shows it in state `skip`), the CRI plugin fails to load with
    `failed to find snapshotter "btrfs"` exactly as for an unknown name (CTD120), and the node goes NotReady.
    On Debian's containerd 1.6.20, 1.7.24 and 2.1.9 on ext4, every one of them but erofs is skipped.

    ## Example
    `snapshotter = "btrfs"` in an image built on btrfs, run on a node whose `/var/lib/containerd` is ext4.

    ## Fix
    Check `ctr plugins ls | grep snapshotter` on the node: the snapshotter must be `ok`; otherwise use
    `overlayfs`.
    """
    config = _config(value, context)
    setting = _snapshotter_setting(config)
    if setting is None:
        return
    pointer, name, series = setting
    needs = CONDITIONAL_SNAPSHOTTERS.get(name)
    having = frozenset(s for s in series if name in BUILTIN_SNAPSHOTTERS[s])
    if needs is None or not having or name in _proxy_snapshotters(config):
        return
    yield Problem(
        pointer,
        f'snapshotter "{name}" loads only with {needs}: where it does not, the CRI plugin of '
        f'{describe_series(having)} fails to load (`failed to find snapshotter "{name}"`) and {UNKNOWN_SERVICE}',
        f"check that `ctr plugins ls` shows io.containerd.snapshotter.v1 {name} as ok, or use overlayfs",
        series=having,
    )
