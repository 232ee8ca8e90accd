"""containerd's config.toml: detection, and what containerd 1.6 to 2.3 read from it.

The key sets and types below are containerd's own Go structs, taken as the union over every release of each
minor series (1.6.0-1.6.39, 1.7.0-1.7.34, 2.0 to 2.3): `services/server/config` and `cmd/containerd/server/config`
for the top level, `pkg/cri/config` (1.x) and `internal/cri/config` (2.x) for the CRI plugins, and the runc
shim's `Options` message for a runc runtime's `options`. Each key records the minor series that know it, so a
finding can say which containerd refuses a value and which ignores a key.

How a file is read depends on its `version` (cmd/containerd/server/config, plugins/cri/*/plugin.go):

- missing, 0 or 1: plugins are named by their short id (`plugins.cri`). containerd 2.0 to 2.2 rename the
  plugins and then take the file for a version 3 one, so the CRI runtime settings of a version 1 file are lost
  (measured on 2.1.9); 2.3 migrates them.
- 2: plugins are named by URI; the CRI plugin is `plugins."io.containerd.grpc.v1.cri"`. containerd 2.x
  migrates it into `io.containerd.cri.v1.runtime` and `io.containerd.cri.v1.images` on every start.
- 3: containerd 2.0 and later; the CRI runtime settings live in `plugins."io.containerd.cri.v1.runtime"`.
  containerd 1.7.20 and later refuse the file; 1.6 and older 1.7 read it as a version 2 file whose CRI plugin
  sections have names they do not know.
- 4: containerd 2.3 and later (server sections moved into plugins); the CRI plugins are those of version 3.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time
from typing import Any, Optional, Union

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.document import Document, Kind, register_kind

CONTAINERD = "containerd"

# ---------------------------------------------------------------------------------------------------------------
# Versions

SERIES = ("1.6", "1.7", "2.0", "2.1", "2.2", "2.3")
ALL = frozenset(SERIES)
V1X = frozenset({"1.6", "1.7"})
V2X = frozenset({"2.0", "2.1", "2.2", "2.3"})
FROM_17 = ALL - {"1.6"}

# The highest config version each series reads (1.6 checks no upper bound: it reads any version >= 2 as 2).
MAX_CONFIG_VERSION = {"1.6": None, "1.7": 2, "2.0": 3, "2.1": 3, "2.2": 3, "2.3": 4}

# Which containerd series read the CRI settings of a file of each config version as intended.
READERS: dict[int, frozenset[str]] = {1: V1X, 2: ALL, 3: V2X, 4: frozenset({"2.3"})}

# The plugin that holds enable_cdi, cdi_spec_dirs, containerd.runtimes and friends.
CRI_V1 = "cri"
CRI_V2 = "io.containerd.grpc.v1.cri"
CRI_RUNTIME = "io.containerd.cri.v1.runtime"
CRI_IMAGES = "io.containerd.cri.v1.images"

RUNC_TYPES = ("io.containerd.runc.v2", "io.containerd.runc.v1")
DEFAULT_RUNTIME = "runc"
CDI_KEYS = ("enable_cdi", "cdi_spec_dirs")


def describe_series(series: Iterable[str]) -> str:
    """'containerd 1.7 and later', 'containerd 1.6 and 1.7', 'containerd 2.0 to 2.2'."""
    chosen = [s for s in SERIES if s in set(series)]
    if not chosen:
        return "no containerd release"
    first, last = SERIES.index(chosen[0]), SERIES.index(chosen[-1])
    contiguous = len(chosen) == last - first + 1
    if len(chosen) == 1:
        return f"containerd {chosen[0]}"
    if contiguous and last == len(SERIES) - 1:
        return f"containerd {chosen[0]} and later"
    if contiguous and len(chosen) > 2:
        return f"containerd {chosen[0]} to {chosen[-1]}"
    return "containerd " + ", ".join(chosen[:-1]) + f" and {chosen[-1]}"


# ---------------------------------------------------------------------------------------------------------------
# Types, as containerd's TOML decoders (go-toml v1 in 1.x, go-toml v2 in 2.x) accept them


@dataclass(frozen=True)
class Scalar:
    name: str  # how a TOML user says it: "a string", "a boolean", "an integer"
    go: str
    minimum: Optional[int] = None
    maximum: Optional[int] = None

    def accepts(self, value: Any) -> bool:
        if self.go == "bool":
            return isinstance(value, bool)
        if self.go == "string":
            return isinstance(value, str)
        if isinstance(value, bool) or not isinstance(value, int):
            return False
        return (self.minimum is None or value >= self.minimum) and (self.maximum is None or value <= self.maximum)


@dataclass(frozen=True)
class ListOf:
    item: Scalar

    @property
    def name(self) -> str:
        return f"an array of {self.item.go}s" if self.item.go != "string" else "an array of strings"

    @property
    def go(self) -> str:
        return f"[]{self.item.go}"


@dataclass(frozen=True)
class AnyValue:
    name: str = "any value"
    go: str = "interface {}"


@dataclass(frozen=True)
class Field:
    type: Type
    series: frozenset[str] = ALL


@dataclass(frozen=True)
class Table:
    """A Go struct: its keys are fixed."""

    go: str
    fields: Mapping[str, Field]
    name: str = "a table"


@dataclass(frozen=True)
class MapOf:
    """A Go map: any key, each value of one type."""

    value: Type
    go: str = ""
    name: str = "a table"


Type = Union[Scalar, ListOf, AnyValue, Table, MapOf]

STRING = Scalar("a string", "string")
BOOL = Scalar("a boolean", "bool")
INT = Scalar("an integer", "int", -(2**63), 2**63 - 1)  # Go's int on 64-bit Linux
UINT32 = Scalar("an integer from 0 to 4294967295", "uint32", 0, 2**32 - 1)
STRINGS = ListOf(STRING)
ANY = AnyValue()
PLUGIN_TREE = Table("toml.Tree", {})  # what containerd 1.x decodes each plugins entry into
PLUGINS = Table("map[string]interface {}", {})  # the plugins table: its keys are plugin URIs


def _f(kind: Type, series: frozenset[str] = ALL) -> Field:
    return Field(kind, series)


def _table(go: str, fields: Mapping[str, Field]) -> Table:
    return Table(go, dict(fields))


def _restrict(table: Table, series: frozenset[str]) -> Table:
    """The same struct as read by fewer series (a 2.x table inside a file only 2.x reads)."""
    fields = {}
    for key, entry in table.fields.items():
        kind = entry.type
        if isinstance(kind, Table):
            kind = _restrict(kind, series)
        elif isinstance(kind, MapOf) and isinstance(kind.value, Table):
            kind = MapOf(_restrict(kind.value, series), kind.go)
        if entry.series & series:
            fields[key] = Field(kind, entry.series & series)
    return Table(table.go, fields)


# --- the top level (server config) ---

_SERVER = _table(
    "config.Config",
    {
        "version": _f(INT),
        "root": _f(STRING),
        "state": _f(STRING),
        "temp": _f(STRING),
        "plugin_dir": _f(STRING, V1X | {"2.0"}),
        "grpc": _f(
            _table(
                "config.GRPCConfig",
                {
                    "address": _f(STRING),
                    "tcp_address": _f(STRING),
                    "tcp_tls_ca": _f(STRING),
                    "tcp_tls_cert": _f(STRING),
                    "tcp_tls_key": _f(STRING),
                    "tcp_tls_common_name": _f(STRING, frozenset({"2.2", "2.3"})),
                    "uid": _f(INT),
                    "gid": _f(INT),
                    "max_recv_message_size": _f(INT),
                    "max_send_message_size": _f(INT),
                },
            )
        ),
        "ttrpc": _f(_table("config.TTRPCConfig", {"address": _f(STRING), "uid": _f(INT), "gid": _f(INT)})),
        "debug": _f(
            _table(
                "config.Debug",
                {
                    "address": _f(STRING),
                    "uid": _f(INT),
                    "gid": _f(INT),
                    "level": _f(STRING),
                    "format": _f(STRING),
                    "log_trace_id": _f(BOOL, frozenset({"2.3"})),
                },
            )
        ),
        "metrics": _f(_table("config.MetricsConfig", {"address": _f(STRING), "grpc_histogram": _f(BOOL)})),
        "disabled_plugins": _f(STRINGS),
        "required_plugins": _f(STRINGS),
        "plugins": _f(MapOf(ANY, "map[string]interface {}")),  # each plugin's table is checked on its own
        "oom_score": _f(INT),
        "cgroup": _f(_table("config.CgroupConfig", {"path": _f(STRING)})),
        "proxy_plugins": _f(
            MapOf(
                _table(
                    "config.ProxyPlugin",
                    {
                        "type": _f(STRING),
                        "address": _f(STRING),
                        "platform": _f(STRING),
                        "exports": _f(MapOf(STRING, "map[string]string")),
                        "capabilities": _f(STRINGS, FROM_17),
                    },
                ),
                "map[string]config.ProxyPlugin",
            )
        ),
        "timeouts": _f(MapOf(STRING, "map[string]string")),
        "imports": _f(STRINGS),
        "stream_processors": _f(
            MapOf(
                _table(
                    "config.StreamProcessor",
                    {
                        "accepts": _f(STRINGS),
                        "returns": _f(STRING),
                        "path": _f(STRING),
                        "args": _f(STRINGS),
                        "env": _f(STRINGS),
                    },
                ),
                "map[string]config.StreamProcessor",
            )
        ),
    },
)

# --- the CRI runtime table: one containerd.runtimes entry ---

_RUNTIME_FIELDS = {
    "runtime_type": _f(STRING),
    "runtime_path": _f(STRING),
    "runtime_engine": _f(STRING, V1X),
    "runtime_root": _f(STRING, V1X),
    "pod_annotations": _f(STRINGS),
    "container_annotations": _f(STRINGS),
    "options": _f(MapOf(ANY, "map[string]interface {}")),  # decoded only when a pod starts: see RUNC_OPTIONS
    "privileged_without_host_devices": _f(BOOL),
    "privileged_without_host_devices_all_devices_allowed": _f(BOOL, FROM_17),
    "base_runtime_spec": _f(STRING),
    "cni_conf_dir": _f(STRING),
    "cni_max_conf_num": _f(INT),
    "snapshotter": _f(STRING, FROM_17),
    "sandbox_mode": _f(STRING, FROM_17),  # 1.7; 2.x migrates it to sandboxer
    "sandboxer": _f(STRING, V2X),
    "io_type": _f(STRING, V2X),
    "cgroup_writable": _f(BOOL, frozenset({"2.1", "2.2", "2.3"})),
}
_RUNTIME = _table("config.Runtime", _RUNTIME_FIELDS)
# default_runtime and untrusted_workload_runtime (1.x only) are single Runtime tables, read by 1.x only.
_LEGACY_RUNTIME = _restrict(_RUNTIME, V1X)

_CNI = _table(
    "config.CniConfig",
    {
        "bin_dir": _f(STRING),
        "bin_dirs": _f(STRINGS, frozenset({"2.1", "2.2", "2.3"})),
        "conf_dir": _f(STRING),
        "max_conf_num": _f(INT),
        "setup_serially": _f(BOOL, FROM_17),
        "conf_template": _f(STRING),
        "ip_pref": _f(STRING),
        "use_internal_loopback": _f(BOOL, V2X),
    },
)

_AUTH = _table(
    "config.AuthConfig",
    {"username": _f(STRING), "password": _f(STRING), "auth": _f(STRING), "identitytoken": _f(STRING)},
)
_REGISTRY = _table(
    "config.Registry",
    {
        "config_path": _f(STRING),
        "mirrors": _f(MapOf(_table("config.Mirror", {"endpoint": _f(STRINGS)}), "map[string]config.Mirror")),
        "configs": _f(
            MapOf(
                _table(
                    "config.RegistryConfig",
                    {
                        "auth": _f(_AUTH),
                        "tls": _f(
                            _table(
                                "config.TLSConfig",
                                {
                                    "insecure_skip_verify": _f(BOOL),
                                    "ca_file": _f(STRING),
                                    "cert_file": _f(STRING),
                                    "key_file": _f(STRING),
                                },
                            ),
                            V1X,
                        ),
                    },
                ),
                "map[string]config.RegistryConfig",
            )
        ),
        "auths": _f(MapOf(_AUTH, "map[string]config.AuthConfig")),
        "headers": _f(MapOf(STRINGS, "map[string][]string")),
    },
)
_IMAGE_DECRYPTION = _table("config.ImageDecryption", {"key_model": _f(STRING)})
_X509 = _table("config.X509KeyPairStreaming", {"tls_cert_file": _f(STRING), "tls_key_file": _f(STRING)})

# Keys of the CRI runtime service that version 2 and version 3 files share.
_RUNTIME_SERVICE_FIELDS = {
    "enable_selinux": _f(BOOL),
    "selinux_category_range": _f(INT),
    "max_container_log_line_size": _f(INT),
    "disable_apparmor": _f(BOOL),
    "restrict_oom_score_adj": _f(BOOL),
    "disable_proc_mount": _f(BOOL),
    "unset_seccomp_profile": _f(STRING),
    "tolerate_missing_hugetlb_controller": _f(BOOL),
    "disable_hugetlb_controller": _f(BOOL),
    "device_ownership_from_security_context": _f(BOOL),
    "ignore_image_defined_volumes": _f(BOOL),
    "netns_mounts_under_state_dir": _f(BOOL),
    "enable_unprivileged_ports": _f(BOOL),
    "enable_unprivileged_icmp": _f(BOOL),
    "enable_cdi": _f(BOOL, FROM_17),
    "cdi_spec_dirs": _f(STRINGS, FROM_17),
    "drain_exec_sync_io_timeout": _f(STRING),
    "ignore_deprecation_warnings": _f(STRINGS),
    "enable_criu": _f(BOOL, frozenset({"2.2", "2.3"})),
    "enable_experimental_restore_via_create": _f(BOOL, frozenset({"2.2", "2.3"})),
}

# Version 2: plugins."io.containerd.grpc.v1.cri" as 1.6 and 1.7 decode it, and as 2.x migrates it (keys that
# 2.x moves to the images or server plugin are read there; the 1.x-only keys are ignored by 2.x).
_CRI_V2 = _table(
    "config.PluginConfig",
    {
        **_RUNTIME_SERVICE_FIELDS,
        "containerd": _f(
            _table(
                "config.ContainerdConfig",
                {
                    "snapshotter": _f(STRING),  # 2.x: images plugin
                    "default_runtime_name": _f(STRING),
                    "default_runtime": _f(_LEGACY_RUNTIME, V1X),
                    "untrusted_workload_runtime": _f(_LEGACY_RUNTIME, V1X),
                    "runtimes": _f(MapOf(_RUNTIME, "map[string]config.Runtime")),
                    "no_pivot": _f(BOOL, V1X),
                    "disable_snapshot_annotations": _f(BOOL),  # 2.x: images plugin
                    "discard_unpacked_layers": _f(BOOL),  # 2.x: images plugin
                    "ignore_blockio_not_enabled_errors": _f(BOOL, FROM_17),
                    "ignore_rdt_not_enabled_errors": _f(BOOL),
                },
            )
        ),
        "cni": _f(_CNI),
        "registry": _f(_REGISTRY),  # 2.x: images plugin
        "image_decryption": _f(_IMAGE_DECRYPTION),  # 2.x: images plugin
        "disable_tcp_service": _f(BOOL),  # 2.x: stays in io.containerd.grpc.v1.cri (server)
        "stream_server_address": _f(STRING),
        "stream_server_port": _f(STRING),
        "stream_idle_timeout": _f(STRING),
        "enable_tls_streaming": _f(BOOL),
        "x509_key_pair_streaming": _f(_X509),
        "sandbox_image": _f(STRING),  # 2.x: images plugin, pinned_images.sandbox
        "stats_collect_period": _f(INT),  # 2.x: images plugin
        "systemd_cgroup": _f(BOOL, V1X),
        "disable_cgroup": _f(BOOL, V1X),
        "max_concurrent_downloads": _f(INT),  # 2.x: images plugin
        "image_pull_progress_timeout": _f(STRING, FROM_17),  # 2.x: images plugin
        "image_pull_with_sync_fs": _f(BOOL, FROM_17),  # 2.x: images plugin
    },
)

# Version 3: the three CRI plugins of containerd 2.x.
_CRI_RUNTIME_V3 = _restrict(
    _table(
        "config.RuntimeConfig",
        {
            **_RUNTIME_SERVICE_FIELDS,
            "containerd": _f(
                _table(
                    "config.ContainerdConfig",
                    {
                        "default_runtime_name": _f(STRING),
                        "runtimes": _f(MapOf(_RUNTIME, "map[string]config.Runtime")),
                        "ignore_blockio_not_enabled_errors": _f(BOOL),
                        "ignore_rdt_not_enabled_errors": _f(BOOL),
                    },
                )
            ),
            "cni": _f(_CNI),
            "stats_collect_period": _f(STRING, frozenset({"2.3"})),
            "stats_retention_period": _f(STRING, frozenset({"2.3"})),
        },
    ),
    V2X,
)
_CRI_IMAGES_V3 = _restrict(
    _table(
        "config.ImageConfig",
        {
            "snapshotter": _f(STRING),
            "disable_snapshot_annotations": _f(BOOL),
            "discard_unpacked_layers": _f(BOOL),
            "pinned_images": _f(MapOf(STRING, "map[string]string")),
            "runtime_platforms": _f(
                MapOf(
                    _table("config.ImagePlatform", {"platform": _f(STRING), "snapshotter": _f(STRING)}),
                    "map[string]config.ImagePlatform",
                )
            ),
            "registry": _f(_REGISTRY),
            "image_decryption": _f(_IMAGE_DECRYPTION),
            "max_concurrent_downloads": _f(INT),
            "concurrent_layer_fetch_buffer": _f(INT, frozenset({"2.1", "2.2", "2.3"})),
            "image_pull_progress_timeout": _f(STRING),
            "image_pull_with_sync_fs": _f(BOOL),
            "stats_collect_period": _f(INT),
            "use_local_image_pull": _f(BOOL, frozenset({"2.1", "2.2", "2.3"})),
        },
    ),
    V2X,
)
_CRI_SERVER_V3 = _table(
    "config.ServerConfig",
    {
        "disable_tcp_service": _f(BOOL, V2X),
        "stream_server_address": _f(STRING, V2X),
        "stream_server_port": _f(STRING, V2X),
        "stream_idle_timeout": _f(STRING, V2X),
        "enable_tls_streaming": _f(BOOL, V2X),
        "x509_key_pair_streaming": _f(_restrict(_X509, V2X), V2X),
    },
)

# The runc shim's options (runtime/v2/runc/options in 1.x, api/types/runc/options in 2.x), decoded from a runc
# runtime's `options` table each time a pod starts. The Go field names are the keys: go-toml v1 also takes the
# all-lower-case, all-upper-case and lower-camel spellings, go-toml v2 any spelling that differs only in case.
RUNC_OPTIONS = _table(
    "options.Options",
    {
        "NoPivotRoot": _f(BOOL),
        "NoNewKeyring": _f(BOOL),
        "ShimCgroup": _f(STRING),
        "IoUid": _f(UINT32),
        "IoGid": _f(UINT32),
        "BinaryName": _f(STRING),
        "Root": _f(STRING),
        "CriuPath": _f(STRING, V1X),
        "SystemdCgroup": _f(BOOL),
        "CriuImagePath": _f(STRING),
        "CriuWorkPath": _f(STRING),
        "TaskApiAddress": _f(STRING, FROM_17),
        "TaskApiVersion": _f(UINT32, FROM_17),
    },
)


def plugin_tables(version: int) -> dict[str, tuple[Table, frozenset[str]]]:
    """The plugin sections this tool knows for a config version: name -> (struct, series that decode it)."""
    if version <= 1:
        return {CRI_V1: (_restrict(_CRI_V2, V1X), V1X)}
    if version == 2:
        return {
            CRI_V2: (_CRI_V2, ALL),
            # containerd 2.x decodes plugins by URI whatever the version, so these are read there too.
            CRI_RUNTIME: (_CRI_RUNTIME_V3, V2X),
            CRI_IMAGES: (_CRI_IMAGES_V3, V2X),
        }
    readers = READERS.get(version, V2X)
    return {
        CRI_RUNTIME: (_restrict(_CRI_RUNTIME_V3, readers), readers),
        CRI_IMAGES: (_restrict(_CRI_IMAGES_V3, readers), readers),
        CRI_V2: (_restrict(_CRI_SERVER_V3, readers), readers),
    }


def server_table(version: int) -> tuple[Table, frozenset[str]]:
    readers = READERS.get(version, ALL) if version >= 3 else ALL
    return _restrict(_SERVER, readers), readers


# ---------------------------------------------------------------------------------------------------------------
# Key lookup and the walk that finds wrong types and unknown keys


def go_toml_v1_spellings(name: str) -> set[str]:
    """The TOML keys go-toml v1 (containerd 1.x) matches to a struct field named or tagged `name`."""
    return {name, name.lower(), name.upper(), name[:1].lower() + name[1:]}


@dataclass(frozen=True)
class Match:
    key: str  # the spelling containerd documents
    field: Field
    series: frozenset[str]  # the series (of those reading the table) that take this spelling


def lookup(table: Table, key: str, readers: frozenset[str]) -> Optional[Match]:
    """Which field a TOML key sets, for the series that read the table; None when no series knows it."""
    if key in table.fields:
        entry = table.fields[key]
        series = entry.series & readers
        return Match(key, entry, series) if series else None
    for name, entry in table.fields.items():
        if name.casefold() != key.casefold():
            continue
        series = entry.series & readers & V2X
        if key in go_toml_v1_spellings(name):
            series |= entry.series & readers & V1X
        if series:
            return Match(name, entry, series)
    return None


def describe_value(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (datetime, date, time)):
        return "a date or time"
    if isinstance(value, list):
        return "an array of tables" if value and all(isinstance(v, dict) for v in value) else "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def go_toml_type(value: Any) -> str:
    """The Go type go-toml v1 reports for a TOML value in its errors ("Can't convert 5(int64) to string")."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "*toml.Tree"
    if isinstance(value, list):
        return "[]interface {}"
    return "toml.LocalDate"


def toml_key(parts: Iterable[str]) -> str:
    """A dotted TOML key, quoting the parts that are not bare keys: plugins."io.containerd.grpc.v1.cri".cni."""
    return ".".join(part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else f'"{part}"' for part in parts)


@dataclass(frozen=True)
class TypeIssue:
    pointer: str
    path: tuple[str, ...]
    value: Any
    expected: Type
    go_type: str  # the struct field's Go type
    series: frozenset[str]  # the series that refuse the file
    index: Optional[int] = None  # for an array element: its index

    @property
    def display(self) -> str:
        return toml_key(self.path) + (f"[{self.index}]" if self.index is not None else "")


@dataclass(frozen=True)
class KeyIssue:
    """A key that some, or all, of the series reading its table ignore."""

    pointer: str
    path: tuple[str, ...]
    key: str
    table: Table
    ignored_by: frozenset[str]
    readers: frozenset[str]
    canonical: Optional[str] = None  # the documented spelling, when the key is known under another spelling


@dataclass
class Walk:
    types: list[TypeIssue] = field(default_factory=list)
    keys: list[KeyIssue] = field(default_factory=list)


def walk_table(
    value: Mapping[str, Any], table: Table, pointer: str, path: tuple[str, ...], readers: frozenset[str], out: Walk
) -> None:
    for key, item in value.items():
        here, where = pointer_join(pointer, key), (*path, key)
        match = lookup(table, key, readers)
        if match is None:
            out.keys.append(KeyIssue(here, where, key, table, readers, readers))
            continue
        canonical = match.key if match.key != key else None
        if match.series != readers:
            out.keys.append(KeyIssue(here, where, key, table, readers - match.series, readers, canonical))
        walk_value(item, match.field.type, here, where, match.series, out)


def walk_value(value: Any, kind: Type, pointer: str, path: tuple[str, ...], series: frozenset[str], out: Walk) -> None:
    if isinstance(kind, AnyValue):
        return
    if isinstance(kind, Scalar):
        if not kind.accepts(value):
            out.types.append(TypeIssue(pointer, path, value, kind, kind.go, series))
        return
    if isinstance(kind, ListOf):
        if not isinstance(value, list):
            out.types.append(TypeIssue(pointer, path, value, kind, kind.go, series))
            return
        for index, item in enumerate(value):
            if not kind.item.accepts(item):
                out.types.append(
                    TypeIssue(pointer_join(pointer, index), path, item, kind.item, kind.item.go, series, index)
                )
        return
    if not isinstance(value, dict):
        out.types.append(TypeIssue(pointer, path, value, kind, kind.go, series))
        return
    if isinstance(kind, Table):
        walk_table(value, kind, pointer, path, series, out)
        return
    for key, item in value.items():
        walk_value(item, kind.value, pointer_join(pointer, key), (*path, key), series, out)


# No containerd setting is nested more than eight tables deep; deeper values (dotted keys can nest thousands of
# levels without any recursion in the TOML parser) are not looked at.
MAX_DEPTH = 64


def iter_tree(value: Any, max_depth: int = MAX_DEPTH) -> Iterator[tuple[str, tuple[str, ...], Any]]:
    """(pointer, path, node) for the value and everything in it, in document order, without recursion."""
    stack: list[tuple[str, tuple[str, ...], Any]] = [("", (), value)]
    while stack:
        pointer, path, node = stack.pop()
        yield pointer, path, node
        if len(path) >= max_depth:
            continue
        if isinstance(node, dict):
            items = [(pointer_join(pointer, key), (*path, key), item) for key, item in node.items()]
        elif isinstance(node, list):
            items = [(pointer_join(pointer, index), (*path, str(index)), item) for index, item in enumerate(node)]
        else:
            continue
        stack.extend(reversed(items))


# ---------------------------------------------------------------------------------------------------------------
# The config as containerd reads it


@dataclass(frozen=True)
class Runtime:
    """One containerd.runtimes entry of the CRI plugin this config's version reads."""

    name: str
    pointer: str
    path: tuple[str, ...]
    table: Mapping[str, Any]

    @property
    def type(self) -> Optional[str]:
        value = self.table.get("runtime_type")
        return value if isinstance(value, str) else None

    @property
    def is_runc(self) -> bool:
        """Whether containerd decodes its options as the runc shim's (a missing type counts for `runc`)."""
        return self.type in RUNC_TYPES or (self.type is None and self.name == DEFAULT_RUNTIME)

    @property
    def options(self) -> Optional[Mapping[str, Any]]:
        value = self.table.get("options")
        return value if isinstance(value, dict) else None

    def option(self, name: str) -> tuple[Optional[str], Any]:
        """(the key as spelled in the file, its value) for a runc option, matched as containerd matches it."""
        options = self.options or {}
        if name in options:
            return name, options[name]
        for key, value in options.items():
            if key.casefold() == name.casefold():
                return key, value
        return None, None


class ContainerdConfig:
    def __init__(self, value: Any) -> None:
        self.value: Mapping[str, Any] = value if isinstance(value, dict) else {}
        raw = self.value.get("version")
        self.declared_version: Any = raw
        # containerd treats a missing version, and 0, as version 1.
        self.version: int = raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 1
        self.version_valid = raw is None or (isinstance(raw, int) and not isinstance(raw, bool))
        plugins = self.value.get("plugins")
        self.plugins: Mapping[str, Any] = plugins if isinstance(plugins, dict) else {}

    @property
    def readers(self) -> frozenset[str]:
        return READERS.get(self.version, frozenset())

    @property
    def cri_plugin(self) -> str:
        """The plugin whose table holds enable_cdi, cdi_spec_dirs and containerd.runtimes for this version."""
        if self.version <= 1:
            return CRI_V1
        if self.version == 2:
            return CRI_V2
        return CRI_RUNTIME

    @property
    def cri_pointer(self) -> str:
        return pointer_join("/plugins", self.cri_plugin)

    @property
    def cri(self) -> Optional[Mapping[str, Any]]:
        table = self.plugins.get(self.cri_plugin)
        return table if isinstance(table, dict) else None

    def cri_containerd(self) -> Optional[Mapping[str, Any]]:
        cri = self.cri or {}
        table = cri.get("containerd")
        return table if isinstance(table, dict) else None

    def runtimes_table(self) -> Optional[Mapping[str, Any]]:
        table = (self.cri_containerd() or {}).get("runtimes")
        return table if isinstance(table, dict) else None

    @property
    def runtimes_path(self) -> tuple[str, ...]:
        return ("plugins", self.cri_plugin, "containerd", "runtimes")

    def runtimes(self) -> list[Runtime]:
        base = f"{self.cri_pointer}/containerd/runtimes"
        path = self.runtimes_path
        return [
            Runtime(name, pointer_join(base, name), (*path, name), table)
            for name, table in (self.runtimes_table() or {}).items()
            if isinstance(table, dict)
        ]

    def walk(self) -> Walk:
        """Wrong types and unknown keys in the top level and in the CRI plugin sections."""
        out = Walk()
        table, readers = server_table(self.version)
        walk_table(self.value, table, "", (), readers, out)
        for name, (schema, plugin_readers) in plugin_tables(self.version).items():
            section = self.plugins.get(name)
            if section is None:
                continue
            pointer, path = pointer_join("/plugins", name), ("plugins", name)
            if not isinstance(section, dict):
                out.types.append(TypeIssue(pointer, path, section, schema, schema.go, plugin_readers))
                continue
            walk_table(section, schema, pointer, path, plugin_readers, out)
        if self.version >= 3:
            # containerd 2.x looks plugins up by URI; a name without a dot matches none.
            for name in self.plugins:
                if "." not in name:
                    pointer, path = pointer_join("/plugins", name), ("plugins", name)
                    out.keys.append(KeyIssue(pointer, path, name, PLUGINS, readers, readers))
        if self.version <= 2:
            # containerd 1.x decodes every plugins entry into a TOML tree before it knows which plugins exist.
            known = plugin_tables(self.version)
            for name, section in self.plugins.items():
                if name not in known and not isinstance(section, dict):
                    pointer, path = pointer_join("/plugins", name), ("plugins", name)
                    out.types.append(TypeIssue(pointer, path, section, PLUGIN_TREE, "toml.Tree", V1X))
        return out


def cdi_spec_dirs(value: Any) -> Optional[tuple[str, ...]]:
    """The cdi_spec_dirs containerd reads from this config (in the plugin its version uses), or None if unset."""
    table = ContainerdConfig(value).cri or {}
    dirs = table.get("cdi_spec_dirs")
    if isinstance(dirs, list) and all(isinstance(item, str) for item in dirs):
        return tuple(dirs)
    return None


def cached_config(value: Any, memo: dict[str, Any]) -> ContainerdConfig:
    if "containerd-config" not in memo:
        memo["containerd-config"] = ContainerdConfig(value)
    config: ContainerdConfig = memo["containerd-config"]
    return config


# ---------------------------------------------------------------------------------------------------------------
# Go's path.Match, which containerd uses for pod_annotations and container_annotations


def go_path_match(pattern: str, name: str) -> bool:
    """path.Match(pattern, name): `*` and `?` never match `/`; a malformed pattern matches nothing."""
    regex = _go_pattern(pattern)
    return regex is not None and regex.fullmatch(name) is not None


def _go_pattern(pattern: str) -> Optional[re.Pattern[str]]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "\\":
            if i + 1 >= len(pattern):
                return None
            i += 1
            out.append(re.escape(pattern[i]))
        elif char == "[":
            klass, i = _go_class(pattern, i + 1)
            if klass is None:
                return None
            out.append(klass)
            continue
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _go_class(pattern: str, i: int) -> tuple[Optional[str], int]:
    """A [...] class whose body starts at i: (regex, index after the `]`), or (None, _) when malformed.

    As in Go, a class can match `/`, its first character cannot be `]` or `-`, and a range whose ends are
    reversed matches nothing.
    """
    negate = pattern[i : i + 1] == "^"
    if negate:
        i += 1
    ranges: list[str] = []
    count = 0
    while True:
        if pattern[i : i + 1] == "]" and count > 0:
            body = "".join(ranges)
            if negate:
                return (f"[^{body}]" if body else "."), i + 1
            return (f"[{body}]" if body else "(?!)"), i + 1
        low, i = _class_char(pattern, i)
        if low is None:
            return None, i
        high: Optional[str] = low
        if pattern[i : i + 1] == "-":
            high, i = _class_char(pattern, i + 1)
            if high is None:
                return None, i
        if high is not None and low <= high:
            ranges.append(f"{re.escape(low)}-{re.escape(high)}")
        count += 1


def _class_char(pattern: str, i: int) -> tuple[Optional[str], int]:
    """One (possibly escaped) class character; None when missing, `-`, `]`, or the class never closes."""
    if i >= len(pattern) or pattern[i] in "-]":
        return None, i
    if pattern[i] == "\\":
        i += 1
        if i >= len(pattern):
            return None, i
    char, i = pattern[i], i + 1
    if i >= len(pattern):
        return None, i
    return char, i


# ---------------------------------------------------------------------------------------------------------------
# Where a program named by the config is looked up

# containerd's PATH under systemd (and Debian's containerd.service), which the runc shim inherits.
SERVICE_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def program_candidates(name: str) -> list[str]:
    if "/" in name:
        return [posixpath.normpath(name)] if name.startswith("/") else []
    return [posixpath.join(directory, name) for directory in SERVICE_PATH]


# ---------------------------------------------------------------------------------------------------------------
# The kind

_PLUGIN_SHORT_IDS = frozenset({"cri", "cgroups", "linux", "scheduler", "bolt", "task", "opt", "restart", "overlayfs"})


def is_containerd_config(path: str, value: Any) -> bool:
    if not isinstance(value, dict) or "crio" in value:
        return False
    version = value.get("version")
    if isinstance(version, int) and not isinstance(version, bool):
        return True
    plugins = value.get("plugins")
    if isinstance(plugins, dict) and any(k.startswith("io.containerd.") or k in _PLUGIN_SHORT_IDS for k in plugins):
        return True
    # /etc/containerd/config.toml with neither a version nor plugins (certs.d/*/hosts.toml is another format).
    parts = path.replace("\\", "/").split("/")
    return parts[-1] == "config.toml" and "containerd" in parts[:-1]


# The load problem for bytes that are not UTF-8 outside any key or value (a comment): containerd 2.x refuses
# the file there too, and no check of the parsed value can see it.
NOT_UTF8 = "CTD006"


def _holds_replacement(value: Any) -> bool:
    """Whether a key or string anywhere in value holds U+FFFD, the loader's stand-in for a bad byte."""
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, str):
            if "\ufffd" in node:
                return True
        elif isinstance(node, dict):
            pending.extend(node.keys())
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False


def refine_containerd(document: Document) -> Document:
    if document.parsed and not _holds_replacement(document.value):
        document.load_problems = [
            replace(
                problem,
                code=NOT_UTF8,
                message=f"{problem.message}, in a comment: containerd 2.x refuses to load the file "
                "(`toml: invalid UTF-8 character in comment`); 1.6 and 1.7 read it",
            )
            if problem.code == "DOC002"
            else problem
            for problem in document.load_problems
        ]
    return document


register_kind(
    Kind(CONTAINERD, "containerd config.toml", ("toml",), is_containerd_config, order=30, refine=refine_containerd)
)
