"""The runtime tables, and the runtime handlers cri-o builds from them.

The default runtime (CRO002), each runtime's program on the node (CRO103), tables a later file replaces whole
(CRO108), and the checks the daemon makes on them when it starts (CRO109, CRO110).
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.crio.go_values import go_key
from nvidia_oci_hook.kinds.crio.key_table import DEFAULT_RUNTIME_NAME
from nvidia_oci_hook.kinds.crio.merge import CrioConfig, split_pointer
from nvidia_oci_hook.rules.base import Context
from nvidia_oci_hook.rules.crio.config_view import crio_rule, view
from nvidia_oci_hook.rules.crio.known_names import ALLOWED_ANNOTATIONS

# The PATH systemd gives services, where cri-o looks up a runtime without runtime_path.
SERVICE_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


@crio_rule("CRO002", "default-runtime-undefined", Severity.ERROR, schema_level=True)
def default_runtime_undefined(value: Any, context: Context) -> Iterator[Problem]:
    """default_runtime names a runtime that has no [crio.runtime.runtimes.NAME] table.

    ## What it checks
    That the effective `default_runtime` (after every drop-in) is empty, or names a runtime table defined in one
    of the files, or is `crun`, the one runtime cri-o defines itself. A file linted on its own stands for the
    whole configuration; one that defines no runtime table is taken to rely on another file for them, and is not
    reported.

    ## Why it matters
    cri-o validates this while loading the configuration and refuses to start: `default_runtime set to
    "nvidia", but no runtime entry table [crio.runtime.runtimes.nvidia] was found`. It happens when the drop-in
    that defined the runtime is removed while another file still makes it the default, or when the runtime
    table is misplaced and so ignored (CRO101): then the hint names the table as cri-o would read it, and a file
    linted on its own is reported too.

    ## Example
    `/etc/crio/crio.conf.d/99-nvidia.toml` sets `default_runtime = "nvidia"`, and the `[crio.runtime.runtimes.nvidia]`
    table was deleted from it.

    ## Fix
    Add the runtime table (`runtime_path`, `runtime_type = "oci"`, `runtime_root`), or point `default_runtime`
    at a runtime that is defined (`crun`, or one the message lists).
    """
    current = view(value, context)
    config = current.effective() if current else None
    if current is None or config is None:
        return
    pointer = "/crio/runtime/default_runtime"
    name = config.get(pointer)
    if not config.is_set(pointer) or not isinstance(name, str) or not name:
        return
    runtimes = config.runtimes()
    if name in runtimes:
        return
    table = f"[crio.runtime.runtimes.{go_key([name])}]"
    # The table written under a name cri-o does not read ([crio.runtime.runtime.nvidia], [crio.runtimes.nvidia]).
    misplaced = [unknown for unknown in config.unknown if unknown.is_table and split_pointer(unknown.at)[-1:] == [name]]
    if misplaced:
        hint = f"[{go_key(split_pointer(misplaced[0].at))}] is not read: write it as {table}"
    elif current.collection is None and not isinstance(config.get("/crio/runtime/runtimes"), dict):
        # A file linted on its own that defines no runtime relies on another file for them.
        return
    else:
        close = difflib.get_close_matches(name, list(runtimes), n=1, cutoff=0.6)
        hint = f"add {table} with its runtime_path, or set default_runtime to "
        hint += f'"{close[0]}"' if close else "one of " + ", ".join(f'"{n}"' for n in sorted(runtimes))
    yield current.problem(
        config.origin(pointer),
        f'cri-o refuses this configuration: default_runtime set to "{name}", but no runtime entry table '
        f"[crio.runtime.runtimes.{name}] was found (runtimes defined: {', '.join(sorted(runtimes))})",
        hint,
    )


@dataclass(frozen=True)
class Handler:
    name: str
    table: dict[str, Any]
    builtin: bool

    @property
    def pointer(self) -> str:
        return pointer_join("/crio/runtime/runtimes", self.name)

    def key(self, name: str) -> str:
        return pointer_join(self.pointer, name)


def handlers(config: CrioConfig) -> tuple[list[Handler], str]:
    """The runtime handlers with inheritance applied, and the default runtime's name."""
    configured = config.get("/crio/runtime/runtimes", {})
    configured = configured if isinstance(configured, dict) else {}
    default = config.get("/crio/runtime/default_runtime") or DEFAULT_RUNTIME_NAME
    runtimes = config.runtimes()
    result = []
    for name, table in runtimes.items():
        effective = dict(table)
        if effective.get("inherit_default_runtime") is True and default in runtimes:
            for key in ("runtime_path", "runtime_type", "runtime_config_path", "runtime_root"):
                effective[key] = runtimes[default].get(key, "")
        result.append(Handler(name, effective, name not in configured))
    return result, default


def _lookup(host: Any, name: str) -> Optional[str]:
    for directory in SERVICE_PATH:
        candidate = posixpath.join(directory, name)
        if host.is_executable(candidate):
            return candidate
    return None


@crio_rule("CRO103", "runtime-path-missing", Severity.ERROR, needs_host=True)
def runtime_path_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A runtime's program is missing on the node, or is not an executable file.

    ## What it checks
    For every runtime table in the files (and, when a whole configuration directory is linted, the built-in
    `crun` if it is the default runtime): `runtime_path`, or,
    when it is empty, the runtime's name looked up on the service PATH (`/usr/local/sbin` to `/bin`), as cri-o
    does at start-up; `inherit_default_runtime` takes the default runtime's path. The program must exist, be a
    regular file and be executable.

    ## Why it matters
    cri-o checks this when the daemon starts, not when the configuration loads. For the default runtime it
    refuses to start (`runtime validation: invalid runtime_path for runtime 'nvidia': stat ...: no such file or
    directory`). Any other runtime is dropped with only a warning in the log (`Runtime handler "nvidia" is being
    ignored`), and every pod whose RuntimeClass names it fails with `failed to find runtime handler nvidia from
    runtime list`. A path that exists but is not executable passes that check and fails every container start.

    ## Example
    `runtime_path = "/usr/local/nvidia/toolkit/nvidia-container-runtime"` after the GPU Operator's toolkit was
    uninstalled from the node.

    ## Fix
    Install the runtime, or correct `runtime_path` (`command -v nvidia-container-runtime`); remove the runtime
    table if the runtime is gone for good (and `default_runtime` if it names it).
    """
    current = view(value, context)
    config = current.effective() if current else None
    host = context.host
    if current is None or config is None or host is None:
        return
    found, default = handlers(config)
    for handler in found:
        if handler.builtin and (handler.name != default or current.collection is None):
            continue
        role = (
            "the default runtime: cri-o does not start"
            if handler.name == default
            else (
                f'cri-o drops the runtime at start (its log: Runtime handler "{handler.name}" is being ignored) and '
                f"pods asking for it fail with: failed to find runtime handler {handler.name} from runtime list"
            )
        )
        path = handler.table.get("runtime_path") or ""
        origin = config.origin(handler.key("runtime_path")) or config.origin(handler.pointer)
        if not isinstance(path, str):
            continue
        if not path:
            lookup = default if handler.table.get("inherit_default_runtime") is True else handler.name
            if _lookup(host, lookup) is None:
                yield current.problem(
                    origin,
                    f'runtime "{handler.name}" has no runtime_path and no executable named {lookup} is on the service '
                    f"PATH ({':'.join(SERVICE_PATH)}): {role}",
                    f"set runtime_path in [crio.runtime.runtimes.{go_key([handler.name])}] to the runtime's program",
                )
            continue
        identity = host.identity(path)
        if identity is None:
            yield current.problem(
                origin,
                f'runtime_path {path} of runtime "{handler.name}" does not exist on the node (cri-o: invalid '
                f"runtime_path for runtime '{handler.name}': stat {path}: no such file or directory): {role}",
                "install the runtime, or correct runtime_path",
            )
        elif not host.is_executable(path):
            yield current.problem(
                origin,
                f'runtime_path {path} of runtime "{handler.name}" is {identity.describe()}, not an executable file: '
                "cri-o accepts it at start-up, then every container on this runtime fails to start",
                f"chmod 755 {path}, or point runtime_path at the runtime's program",
            )


@crio_rule("CRO108", "runtime-table-replaced", Severity.WARNING)
def runtime_table_replaced(value: Any, context: Context) -> Iterator[Problem]:
    """A later file redefines a runtime (or workload) table and drops the keys only the earlier one set.

    ## What it checks
    Each `[crio.runtime.runtimes.NAME]` and `[crio.runtime.workloads.NAME]` table that a later file (in cri-o's
    merge order) defines again: the keys the earlier table set and the later one does not.

    ## Why it matters
    Tables are merged key by key everywhere else, so this looks safe; but cri-o's decoder builds each entry of
    these maps from scratch, so the later table replaces the earlier one whole. A drop-in that only adds
    `privileged_without_host_devices = true` to `[crio.runtime.runtimes.crun]` leaves crun with an empty
    `runtime_path`, `runtime_root` and `monitor_path`, and `allowed_annotations` gone.

    ## Example
    `crio.conf` defines `[crio.runtime.runtimes.nvidia]` with `runtime_path` and `runtime_root`;
    `crio.conf.d/50-gpu.conf` has `[crio.runtime.runtimes.nvidia]` with only `privileged_without_host_devices`.

    ## Fix
    Repeat every key of the earlier table in the later one, or keep each runtime's table in a single file.
    """
    current = view(value, context)
    if current is None:
        return
    for replaced in current.config.replacements:
        kind = "runtime" if replaced.map_name == "runtimes" else "workload"
        yield current.problem(
            replaced.origin,
            f"[crio.runtime.{replaced.map_name}.{go_key([replaced.name])}] here replaces the whole {kind} table set at "
            f"{current.at(replaced.earlier)}: {', '.join(replaced.lost)} "
            f"{'is' if len(replaced.lost) == 1 else 'are'} no longer set (cri-o rebuilds each {kind} from the last "
            "table that names it)",
            f"repeat {', '.join(replaced.lost)} in this table, or define the {kind} in one file only",
        )


def handler_errors(handler: Handler) -> Iterator[tuple[str, str, str]]:
    """RuntimeHandler.Validate's checks that need nothing from the node: (key, cri-o's error, how to fix it)."""
    table = handler.table
    name = handler.name
    kind = table.get("runtime_type", "")
    kind = kind if isinstance(kind, str) else ""
    if kind not in ("", "oci", "vm", "pod"):
        yield (
            "runtime_type",
            f'invalid `runtime_type` "{kind}" for runtime "{name}"',
            'use "oci" (runc, crun, wrappers)',
        )
        return
    if kind == "vm":
        program = table.get("runtime_path") or name
        if not re.match(r"^containerd-shim-[a-zA-Z0-9\-+]+$", posixpath.basename(program)):
            yield (
                "runtime_path",
                f"invalid runtime_path for runtime '{name}': containerd binary naming pattern is not followed",
                'a "vm" runtime runs a containerd shim (containerd-shim-NAME-v2); use runtime_type = "oci" otherwise',
            )
    if table.get("runtime_config_path") and kind != "vm":
        yield (
            "runtime_config_path",
            "runtime_config_path can only be used with the 'vm' runtime type",
            "remove runtime_config_path",
        )
    for index, annotation in enumerate(table.get("allowed_annotations", [])):
        if annotation not in ALLOWED_ANNOTATIONS:
            folded = {known.casefold(): known for known in ALLOWED_ANNOTATIONS}
            close = folded.get(annotation.casefold()) or next(
                iter(difflib.get_close_matches(annotation, sorted(ALLOWED_ANNOTATIONS), n=1, cutoff=0.8)), None
            )
            hint = f'write "{close}" (cri-o compares the names exactly)' if close else "remove it"
            yield f"allowed_annotations/{index}", f"invalid allowed_annotation: {annotation}", hint
            break
    if table.get("no_sync_log") is True and kind not in ("", "oci"):
        yield (
            "no_sync_log",
            f"no sync log: no_sync_log is only allowed with runtime type 'oci', runtime type is '{kind}'",
            "remove no_sync_log",
        )
    if table.get("stream_websockets") is True and kind != "pod":
        yield (
            "stream_websockets",
            f'websocket streaming: only the \'runtime_type = "pod"\' supports websocket streaming, not "{kind}" '
            f'(runtime "{name}")',
            "remove stream_websockets",
        )
    affinity = table.get("exec_cpu_affinity", "")
    if affinity not in ("", "first"):
        yield "exec_cpu_affinity", f'invalid exec_cpu_affinity "{affinity}"', 'use "first", or remove the key'


@crio_rule("CRO109", "runtime-handler-rejected", Severity.ERROR)
def runtime_handler_rejected(value: Any, context: Context) -> Iterator[Problem]:
    """A runtime table fails the validation cri-o runs on it when the daemon starts.

    ## What it checks
    Each runtime table as cri-o's `RuntimeHandler.Validate` checks it at start-up, for what needs nothing from
    the node: `runtime_type` (oci, vm, pod or empty), a `vm` runtime's program named `containerd-shim-...`,
    `runtime_config_path` only with `vm`, each `allowed_annotations` entry one cri-o knows, `no_sync_log` only
    with `oci`, `stream_websockets` only with `pod`, and `exec_cpu_affinity` (empty or `first`).

    ## Why it matters
    `crio config` does not run these checks, so the configuration looks valid. When the daemon starts, an
    invalid default runtime stops it (`runtime validation: invalid allowed_annotation: ...`); any other invalid
    runtime is dropped with a warning (`Runtime handler "nvidia" is being ignored due to: ...`), and every pod
    whose RuntimeClass names it fails with `failed to find runtime handler nvidia from runtime list`.

    ## Example
    `allowed_annotations = ["io.kubernetes.cri-o.devices"]`: the annotation is `io.kubernetes.cri-o.Devices`
    (or `devices.crio.io`), and cri-o compares the names exactly.

    ## Fix
    Correct the key the message names, restart cri-o, and check that its log has no `is being ignored` line.
    """
    current = view(value, context)
    config = current.effective() if current else None
    if current is None or config is None:
        return
    found, default = handlers(config)
    for handler in found:
        if handler.builtin:
            continue
        for key, error, hint in handler_errors(handler):
            pointer = handler.pointer + "/" + key
            if handler.name == default:
                effect = f"cri-o does not start (runtime validation: {error})"
            else:
                effect = (
                    f'cri-o drops the runtime at start (its log: Runtime handler "{handler.name}" is being ignored '
                    f"due to: {error}), and pods asking for it fail with: failed to find runtime handler "
                    f"{handler.name} from runtime list"
                )
            yield current.problem(
                config.origin(pointer) or config.origin(handler.pointer),
                f'runtime "{handler.name}": {effect}',
                hint,
            )


@crio_rule("CRO110", "refused-at-start", Severity.ERROR)
def refused_at_start(value: Any, context: Context) -> Iterator[Problem]:
    """A value `crio config` accepts but the cri-o daemon refuses when it starts.

    ## What it checks
    The start-up checks of cri-o's configuration that need nothing from the node: `cgroup_manager` must be
    `systemd` or `cgroupfs`; the conmon cgroup of each `oci` runtime (`conmon_cgroup` under `[crio.runtime]`,
    else the runtime's `monitor_cgroup`) must be `pod` or a systemd slice (`*.slice`) under systemd, and `pod` or
    empty under cgroupfs.

    ## Why it matters
    `crio config` validates only what can be checked without starting, so such a file passes every dry run and
    then the daemon exits at start-up (`unable to update cgroup manager: invalid cgroup manager: bogus`), taking
    every pod on the node with it. This is why this rule is not part of `--schema-only`, which reports only what
    the loader itself refuses.

    ## Example
    `cgroup_manager = "cgroupsfs"`, or `conmon_cgroup = "system.slice"` with `cgroup_manager = "cgroupfs"`.

    ## Fix
    `cgroup_manager = "systemd"` (with `conmon_cgroup = "pod"` or a slice) on systemd nodes, matching the
    kubelet's cgroup driver; `cgroup_manager = "cgroupfs"` with `conmon_cgroup = "pod"` otherwise.
    """
    current = view(value, context)
    config = current.effective() if current else None
    if current is None or config is None:
        return
    manager_pointer = "/crio/runtime/cgroup_manager"
    manager = config.get(manager_pointer)
    if manager not in ("systemd", "cgroupfs"):
        yield current.problem(
            config.origin(manager_pointer),
            f"the cri-o daemon refuses to start: unable to update cgroup manager: invalid cgroup manager: {manager}",
            'set cgroup_manager = "systemd" or "cgroupfs", the same driver as the kubelet',
        )
        return
    conmon_pointer = "/crio/runtime/conmon_cgroup"
    override = config.get(conmon_pointer) or ""
    found, default = handlers(config)
    # conmon_cgroup applies to every oci runtime: name the default one.
    found.sort(key=lambda h: h.name != default)
    for handler in found:
        if handler.table.get("runtime_type", "oci") not in ("", "oci"):
            continue
        if override:
            monitor, pointer = override, conmon_pointer
        else:
            default = "system.slice" if handler.builtin and manager == "systemd" else ""
            monitor, pointer = handler.table.get("monitor_cgroup", default) or "", handler.key("monitor_cgroup")
        if manager == "systemd":
            monitor = monitor or "system.slice"
            if monitor == "pod" or monitor.endswith(".slice"):
                continue
            error = "conmon cgroup should be 'pod' or a systemd slice"
        else:
            if monitor in ("pod", "", "system.slice"):
                continue
            error = f"cgroupfs manager conmon cgroup should be 'pod' or empty, but got: '{monitor}'"
        yield current.problem(
            config.origin(pointer) or config.origin(handler.pointer),
            f"the cri-o daemon refuses to start: monitor fields translation: failed to translate monitor fields for "
            f"runtime {handler.name}: {error}",
            'use "pod", or a systemd slice with cgroup_manager = "systemd"',
        )
        if override:
            return
