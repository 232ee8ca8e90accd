"""Keys containerd ignores: CDI keys outside the table it reads them from, unknown keys, and keys that only some
releases read (CTD101, CTD102, CTD103)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.containerd.config import ContainerdConfig
from nvidia_oci_hook.kinds.containerd.reading import DropIn
from nvidia_oci_hook.kinds.containerd.structs import (
    RUNC_OPTIONS,
    AnyValue,
    MapOf,
    Table,
    Type,
    plugin_tables,
    server_table,
)
from nvidia_oci_hook.kinds.containerd.versions import (
    ALL,
    CDI_KEYS,
    CRI_IMAGES,
    CRI_RUNTIME,
    CRI_V1,
    CRI_V2,
    V1X,
    V2X,
    describe_series,
)
from nvidia_oci_hook.kinds.containerd.walk import KeyIssue, iter_tree, lookup, toml_key
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.containerd.config_view import KINDS, _config, _runc, _walk, _who
from nvidia_oci_hook.rules.containerd.versions import _uri_hint


def _cdi_locations(config: ContainerdConfig) -> dict[str, str]:
    """pointer of each place a CDI key is read -> which releases read it there."""
    if config.version <= 1:
        return {pointer_join("/plugins", CRI_V1): "containerd 1.7"}
    if config.version == 2:
        return {pointer_join("/plugins", CRI_V2): "containerd 1.7 and later"}
    return {pointer_join("/plugins", CRI_RUNTIME): "containerd 2.0 and later"}


def _find_keys(value: Any, names: tuple[str, ...]) -> Iterator[tuple[str, tuple[str, ...], str]]:
    """(pointer, path, key) of every table key whose name, in any case, is one of `names`."""
    for pointer, path, _node in iter_tree(value):
        if path and path[-1].casefold() in names:  # array indices are digits, never one of the names
            yield pointer, path, path[-1]


def _right_place(config: ContainerdConfig) -> str:
    return f"[{toml_key(('plugins', config.cri_plugin))}]"


@rule("CTD101", "cdi-setting-ignored", Severity.ERROR, KINDS)
def cdi_setting_ignored(value: Any, context: Context) -> Iterator[Problem]:
    """enable_cdi or cdi_spec_dirs sits where containerd does not read it.

    ## What it checks
    Every `enable_cdi` and `cdi_spec_dirs` key, anywhere in the file, against the one table that the file's
    config version reads them from: `plugins.cri` (version 1), `plugins."io.containerd.grpc.v1.cri"`
    (version 2), `plugins."io.containerd.cri.v1.runtime"` (version 3 and 4). In a version 2 file,
    `plugins."io.containerd.cri.v1.runtime"` is reported too: only containerd 2.x reads it there.

    ## Why it matters
    containerd ignores the key in any other table without a word (2.x logs `Ignoring unknown key in TOML for
    plugin` at warning level), so CDI stays off (containerd 1.7's default), or reads the default directories
    (`/etc/cdi`, `/var/run/cdi`). Pods whose GPUs are requested as CDI devices (the device plugin's
    `cdi.k8s.io/...` annotations, DRA) start without them, or fail with `unresolvable CDI devices`. The usual
    causes: a version 3 file that kept the version 2 plugin name, a version 2 snippet pasted into a version 3
    file, or the key put under `containerd` or a runtime.

    ## Example
    ```toml
    version = 3
    [plugins."io.containerd.grpc.v1.cri"]
      enable_cdi = true
    ```

    ## Fix
    Move the key into the table the message names: for version 3,
    `[plugins."io.containerd.cri.v1.runtime"]` with `enable_cdi = true`; for version 2,
    `[plugins."io.containerd.grpc.v1.cri"]`. `containerd config dump` shows the value containerd uses.
    """
    if isinstance(value, DropIn):
        return  # a drop-in: CTD119 judges it against the version containerd reads it at
    config = _config(value, context)
    right = _cdi_locations(config)
    for pointer, path, key in _find_keys(config.value, CDI_KEYS):
        parent = pointer[: pointer.rfind("/")]
        if parent in right:
            continue  # the right table (another spelling is CTD103's)
        canonical = key.casefold()
        if config.version == 2 and parent == pointer_join("/plugins", CRI_RUNTIME):
            why = (
                f"in a version 2 file only containerd 2.x reads {toml_key(path[:-1])}; containerd 1.6 and 1.7 "
                "do not have that plugin and ignore it"
            )
        else:
            why = (
                f"containerd reads {canonical} only from {_right_place(config)} in a config of version "
                f"{config.version}{' (no version line means 1)' if config.declared_version is None else ''}, "
                "so this one is ignored"
            )
        yield Problem(pointer, f"{toml_key(path)} is ignored: {why}", f"move {canonical} to {_right_place(config)}")


_DID_YOU_MEAN_CUTOFF = 0.75


_MISSING: Any = object()


def _other_tables(config: ContainerdConfig) -> list[tuple[tuple[str, ...], Table]]:
    """The CRI tables of this version, then the top level and its tables, by TOML path, for 'belongs in ...'
    hints."""
    out: list[tuple[tuple[str, ...], Table]] = []
    for name, (table, _readers) in plugin_tables(config.version).items():
        base = ("plugins", name)
        out.append((base, table))
        for key, entry in table.fields.items():
            if isinstance(entry.type, Table):
                out.append(((*base, key), entry.type))
    server, _readers = server_table(config.version)
    out.append(((), server))
    out.extend(((key,), entry.type) for key, entry in server.fields.items() if isinstance(entry.type, Table))
    return out


def _descend(kind: Type, path: tuple[str, ...], readers: frozenset[str]) -> Optional[Type]:
    for part in path:
        if isinstance(kind, MapOf):
            kind = kind.value  # the part names an entry
        elif isinstance(kind, AnyValue):
            return kind
        elif isinstance(kind, Table):
            match = lookup(kind, part, readers)
            if match is None:
                return None
            kind = match.field.type
        else:
            return None
    return kind


def _resolve(config: ContainerdConfig, path: tuple[str, ...]) -> Optional[Type]:
    """What a key path from the top sets in a file of this version; None where no release reads it."""
    readers = config.readers or ALL
    if len(path) >= 2 and path[0] == "plugins":
        section = plugin_tables(config.version).get(path[1])
        return None if section is None else _descend(section[0], path[2:], readers)
    return _descend(server_table(config.version)[0], path, readers)


def _fits(config: ContainerdConfig, datum: Any, kind: Optional[Type]) -> bool:
    """Whether a value would be read, every key of it known, where `kind` is read. Only known keys are
    followed, so this goes no deeper than containerd's structs, however deep the value."""
    if kind is None:
        return False
    if datum is _MISSING or isinstance(kind, AnyValue):
        return True
    if isinstance(kind, Table):
        if not isinstance(datum, dict):
            return False
        for key, item in datum.items():
            match = lookup(kind, key, config.readers or ALL)
            if match is None or not _fits(config, item, match.field.type):
                return False
        return True
    if isinstance(kind, MapOf):
        return isinstance(datum, dict) and all(_fits(config, item, kind.value) for item in datum.values())
    return not isinstance(datum, dict)


def _datum(config: ContainerdConfig, path: tuple[str, ...]) -> Any:
    node: Any = config.value
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _place(path: tuple[str, ...]) -> str:
    return f"[{toml_key(path)}]" if path else "the top level"


def _unknown_hint(issue: KeyIssue, config: ContainerdConfig) -> str:
    key = issue.key
    parent = issue.path[:-1]
    datum = _datum(config, issue.path)
    if (
        len(parent) >= 2
        and parent[-2] == "runtimes"
        and any(k.casefold() == key.casefold() for k in RUNC_OPTIONS.fields)
    ):
        return f"runc options go in [{toml_key((*parent, 'options'))}]"
    if "." in key and parent != ("plugins",):
        # "a.b" = 1 is one key named a.b: neither go-toml splits a quoted key.
        unquoted = tuple(key.split("."))
        if issue.table is RUNC_OPTIONS:
            meant = _descend(RUNC_OPTIONS, unquoted, config.readers or ALL)
        else:
            meant = _resolve(config, (*parent, *unquoted))
        if _fits(config, datum, meant):
            return f"the quotes make {toml_key((key,))} one key; write {toml_key(unquoted)} without them"
    # The usual cause of a table in the wrong place: a dotted key spelt from the top, as if the table it sits in
    # did not count.
    relative = f"; names inside [{toml_key(parent)}] are relative to it, so this is {toml_key(issue.path)}"
    if key in plugin_tables(config.version) and parent != ("plugins",):
        section = toml_key(("plugins", key))
        return f"containerd reads {toml_key((key,))} only as [{section}]" + (relative if parent else "")
    homes = [
        path
        for path, table in _other_tables(config)
        if path != parent and any(k.casefold() == key.casefold() for k in table.fields)
    ]
    homes.sort(key=lambda path: not _fits(config, datum, _resolve(config, (*path, key))))
    if homes:
        hint = f"containerd reads {key} from {_place(homes[0])} in a version {config.version} file"
        if isinstance(datum, dict) and len(homes[0]) < len(parent) and parent[: len(homes[0])] == homes[0]:
            hint += relative
        return hint
    if key == "sandbox_image" and config.version >= 3:
        pinned = toml_key(("plugins", CRI_IMAGES, "pinned_images"))
        return f"in a version 3 file the sandbox image is sandbox in [{pinned}]"
    close = difflib.get_close_matches(key, list(issue.table.fields), n=1, cutoff=_DID_YOU_MEAN_CUTOFF)
    if close:
        return f"did you mean {close[0]}?"
    if parent == ("plugins",):
        return _uri_hint(key, config)
    return "delete it, or check the key against `containerd config default`"


def _key_issues(value: Any, context: Context) -> Iterator[KeyIssue]:
    yield from _walk(value, context).keys
    yield from _runc(value, context).keys


@rule("CTD102", "unknown-key", Severity.WARNING, KINDS)
def unknown_key(value: Any, context: Context) -> Iterator[Problem]:
    """A key that no containerd release reads there.

    ## What it checks
    Keys of the tables whose key set is containerd's own Go structs: the top level and its `grpc`, `ttrpc`,
    `debug`, `metrics`, `cgroup`, `proxy_plugins.*` and `stream_processors.*` tables; the CRI plugin sections
    of the file's config version, with `containerd`, `containerd.runtimes.*`, `cni`, `registry` and their
    sub-tables; and the `options` of a runc runtime (`runtime_type = "io.containerd.runc.v2"`), which are the
    runc shim's `BinaryName`, `SystemdCgroup`, `Root`, `NoPivotRoot` and the rest. A key is unknown when no
    release from 1.6 to 2.3 that reads this config version knows it, in any spelling containerd accepts. In a
    version 3 file, a `plugins` section that is not a plugin URI is reported too. Other plugins' tables, and the
    options of non-runc runtimes (passed whole to the runtime), are not checked. `enable_cdi` and
    `cdi_spec_dirs` in the wrong place are CTD101. A dotted key is read relative to the table it is written in:
    `grpc.address` inside `[plugins."io.containerd.grpc.v1.cri"]` is a `grpc` key of the CRI plugin, not the
    top-level `[grpc]`; a quoted key holding dots (`"containerd.snapshotter"`) is one key of that name.

    ## Why it matters
    containerd 1.x ignores unknown keys silently and 2.x logs `Ignoring unknown key in TOML` at warning level,
    so a misspelt key (`SystemdCgroups`), a key in the wrong table (`BinaryName` next to `runtime_type`
    instead of under `options`) or a version 2 table in a version 3 file has no effect and nothing fails.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      BinaryName = "/usr/bin/nvidia-container-runtime"
    ```
    runs plain runc: `BinaryName` belongs in `[...runtimes.nvidia.options]`.

    ## Fix
    Follow the hint (the key it probably means, or the table containerd reads it from); `containerd config
    dump` shows the configuration containerd really uses.
    """
    config = _config(value, context)
    for issue in _key_issues(value, context):
        if issue.ignored_by != issue.readers or issue.key.casefold() in CDI_KEYS:
            continue
        where = toml_key(issue.path[:-1]) or "the top level"
        if issue.path[:-1] == ("plugins",):
            message = (
                f'plugin section "{issue.key}" is not a plugin URI: containerd {", ".join(sorted(V2X))} find no '
                "plugin by that name and ignore the section"
            )
        else:
            message = f"{toml_key((issue.key,))} is not a key of {where}: {_who(issue.readers, 'ignore')} it"
        yield Problem(issue.pointer, message, _unknown_hint(issue, config), series=frozenset(issue.readers))


_REPLACEMENTS = {
    "systemd_cgroup": "set SystemdCgroup = true in the options of each runc runtime instead",
    "no_pivot": "set NoPivotRoot = true in the runc runtime's options instead",
    "runtime_engine": "set BinaryName in the runc runtime's options instead",
    "runtime_root": "set Root in the runc runtime's options instead",
    "default_runtime": "define the runtime under containerd.runtimes and name it in default_runtime_name",
    "untrusted_workload_runtime": "define it as containerd.runtimes.untrusted",
    "disable_cgroup": "nothing replaces it in containerd 2.x",
    "tls": "configure registry TLS in hosts.toml files under registry.config_path",
    "CriuPath": "put criu on containerd's PATH instead",
    "plugin_dir": "containerd 2.1 and later load no dynamic plugins",
}


@rule("CTD103", "ignored-by-some-versions", Severity.INFO, KINDS)
def ignored_by_some_versions(value: Any, context: Context) -> Iterator[Problem]:
    """A key that only some containerd releases read.

    ## What it checks
    Keys known to some, but not all, of the containerd releases (1.6 to 2.3) that read the file's config
    version, in the tables CTD102 checks: keys added later (`enable_cdi`, `cdi_spec_dirs`,
    `privileged_without_host_devices_all_devices_allowed` are unknown to containerd 1.6), keys that containerd
    2.0 removed (`systemd_cgroup`, `no_pivot`, `runtime_engine`, `runtime_root`, `default_runtime`,
    `untrusted_workload_runtime`, `disable_cgroup`, `registry.configs.*.tls`), and keys spelt in a case that
    only containerd 2.x matches. This tool does not know which containerd the node runs, so this is
    information: `containerd --version` says whether it applies.

    ## Why it matters
    The key silently does nothing on the releases that do not know it. The one that costs GPU nodes most:
    Debian 12 ships containerd 1.6, which has no CDI support and ignores `enable_cdi = true`, so CDI device
    requests are never resolved by containerd (CDI needs containerd 1.7 or later). Keys removed in 2.0 stop
    working on the upgrade from 1.7, with only a warning in containerd's log.

    ## Example
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri"]
      enable_cdi = true
    ```
    on Debian 12's containerd 1.6.20.

    ## Fix
    Check `containerd --version`. For CDI, use containerd 1.7 or later (Debian 13 ships 1.7.24), or let a
    CDI-aware runtime such as nvidia-container-runtime in `cdi` mode inject the devices. For keys removed in
    2.0, use the replacement the message names.
    """
    config = _config(value, context)
    for issue in _key_issues(value, context):
        if issue.ignored_by == issue.readers:
            continue
        key = issue.canonical or issue.key
        reading = describe_series(issue.readers - issue.ignored_by)
        if issue.canonical:
            message = (
                f"{issue.key} is read as {issue.canonical} by {reading} only; {_who(issue.ignored_by, 'ignore')} "
                "this spelling"
            )
            hint = f"spell it {issue.canonical}"
        elif key in CDI_KEYS and issue.ignored_by == {"1.6"}:
            message = (
                f"{key} is ignored by containerd 1.6 (Debian 12's containerd), which has no CDI support; "
                f"{_who(issue.readers - issue.ignored_by, 'read')} it"
            )
            hint = "run containerd 1.7 or later for CDI (`containerd --version` shows the node's release)"
        else:
            message = f"{key} is read by {reading} only; {_who(issue.ignored_by, 'ignore')} it"
            hint = _REPLACEMENTS.get(key) or "check `containerd --version` on the node"
            if not issue.ignored_by & V1X and config.version == 2:
                log = "Ignoring unknown key in TOML" + (" for plugin" if issue.path[0] == "plugins" else "")
                message += f" (containerd 2.x logs `{log}`)"
        yield Problem(issue.pointer, message, hint, series=frozenset(issue.ignored_by))
