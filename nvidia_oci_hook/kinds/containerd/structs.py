"""containerd's Go structs that the file decodes into, and the TOML types their fields accept.

The key sets and types below are containerd's own Go structs, taken as the union over every release of each
minor series (1.6.0-1.6.39, 1.7.0-1.7.34, 2.0 to 2.3): `services/server/config` and `cmd/containerd/server/config`
for the top level, `pkg/cri/config` (1.x) and `internal/cri/config` (2.x) for the CRI plugins, and the runc
shim's `Options` message for a runc runtime's `options`. Each key records the minor series that know it, so a
finding can say which containerd refuses a value and which ignores a key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

from nvidia_oci_hook.kinds.containerd.versions import (
    ALL,
    CRI_IMAGES,
    CRI_RUNTIME,
    CRI_V1,
    CRI_V2,
    FROM_17,
    READERS,
    V1X,
    V2X,
)

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
