"""cri-o configuration: `crio.conf` plus the `crio.conf.d` drop-ins, merged into the config cri-o really runs with.

Followed: cri-o 1.37 (the main branch at v1.36.0-191-gf954a17, `Version = "1.37.0"`) and the TOML decoder it
vendors, BurntSushi/toml v1.6.0.

- The key table is `tomlConfig` in `pkg/config/config.go`: `[crio]` (RootConfig) and its tables `api`, `runtime`,
  `checkpoint_restore`, `image`, `network`, `metrics`, `tracing`, `stats`, `nri`; `[crio.runtime.runtimes.NAME]`
  (RuntimeHandler) and `[crio.runtime.workloads.NAME]` (WorkloadConfig). Nothing else is decoded: every other
  table or key is silently ignored (cri-o drops the decoder's list of undecoded keys).
- Keys are matched to fields as BurntSushi's `unifyStruct` does: the exact name first, then case-insensitively.
- Merging (`UpdateFromFile`, `UpdateFromPath`, `UpdateFromDropInFile`): the main file, then every entry under the
  drop-in directory in `filepath.Walk` order (lexical, recursive, hidden files and any name included), each
  decoded on top of the result so far. A table is merged key by key; an array replaces the earlier array; an
  entry of `runtimes` or `workloads` replaces the whole earlier entry of that name (`unifyMap` decodes each
  element into a fresh struct); `storage_option` accumulates; an empty `root`, `runroot` or `storage_driver` keeps
  the earlier value. A file that cannot be read or decoded stops cri-o.
"""

from __future__ import annotations

import copy
import datetime
import os
import posixpath
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Union

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.formats.tomltext import LineLocator, parse_toml
from nvidia_oci_hook.kinds.collection import (
    Collection,
    DirectoryKind,
    Loader,
    Skipped,
    register_directory_kind,
)
from nvidia_oci_hook.kinds.document import Document, Kind, register_kind

CRIO = "crio"
# The directory kind, and the kind of the collection its rules check: the merged configuration.
CRIO_CONFIG = "crio-config"
# The kind of each file inside a merged configuration: its per-file problems are found while merging, so no rule
# runs on the file alone.
CRIO_PART = "crio-part"
# The load problem for a cri-o file that is not UTF-8 (its TOML decoder refuses it; JSON decoders do not).
NOT_UTF8 = "CRO006"

CRIO_VERSION = "1.37"
MAIN_FILE = "/etc/crio/crio.conf"
DROPIN_DIR = "/etc/crio/crio.conf.d"

# ---------------------------------------------------------------------------------------------------------------
# The key table


@dataclass(frozen=True)
class Scalar:
    """A TOML value decoded into a Go string, bool, int64, uint64 or time.Duration field."""

    go: str  # "string", "bool", "integer", "uinteger", "duration"


@dataclass(frozen=True)
class Strings:
    """A []string field: a TOML array of strings; a later file's array replaces the earlier one."""


@dataclass(frozen=True)
class StringMap:
    """A map[string]string field: a TOML table of strings."""


@dataclass(frozen=True)
class Table:
    """A struct: a TOML table merged key by key."""

    go: str  # the Go type, as the decoder names it in its errors
    fields: Mapping[str, Spec]

    def lookup(self, key: str) -> Optional[tuple[str, Spec]]:
        """The field a key decodes into: the exact name first, then the first case-insensitive match."""
        if key in self.fields:
            return key, self.fields[key]
        folded = key.casefold()
        for name, spec in self.fields.items():
            if name.casefold() == folded:
                return name, spec
        return None


@dataclass(frozen=True)
class TableMap:
    """A map[string]*struct field (runtimes, workloads): one table per name, each replaced whole by a later file."""

    element: Table


Spec = Union[Scalar, Strings, StringMap, Table, TableMap]

STRING = Scalar("string")
BOOL = Scalar("bool")
INTEGER = Scalar("integer")
UINTEGER = Scalar("uinteger")
DURATION = Scalar("duration")
STRINGS = Strings()
STRING_MAP = StringMap()


def _fields(spec: Spec, *names: str) -> dict[str, Spec]:
    return dict.fromkeys(names, spec)


RUNTIME_HANDLER = Table(
    "config.RuntimeHandler",
    {
        **_fields(STRING, "runtime_config_path", "runtime_path", "runtime_type", "runtime_root"),
        "privileged_without_host_devices": BOOL,
        "allowed_annotations": STRINGS,
        **_fields(STRING, "monitor_path", "monitor_cgroup"),
        "monitor_env": STRINGS,
        "monitor_exec_cgroup": STRING,
        "platform_runtime_paths": STRING_MAP,
        "runtime_pull_image": BOOL,
        "container_min_memory": STRING,
        "no_sync_log": BOOL,
        "inherit_default_runtime": BOOL,
        "default_annotations": STRING_MAP,
        "stream_websockets": BOOL,
        **_fields(STRING, "exec_cpu_affinity", "seccomp_profile"),
        "container_create_timeout": INTEGER,
    },
)

# Resources has no toml tags: its keys are the Go field names (CPUShares, ...), matched case-insensitively; the
# lower-case spelling is the one cri-o's documentation uses.
WORKLOAD_RESOURCES = Table(
    "config.Resources",
    {"cpushares": UINTEGER, "cpuquota": INTEGER, "cpuperiod": UINTEGER, "cpuset": STRING, "cpulimit": INTEGER},
)

WORKLOAD = Table(
    "config.WorkloadConfig",
    {
        **_fields(STRING, "activation_annotation", "annotation_prefix"),
        "allowed_annotations": STRINGS,
        "DisallowedAnnotations": STRINGS,  # no toml tag; cri-o overwrites it when it validates the workload
        "resources": WORKLOAD_RESOURCES,
    },
)

RUNTIME = Table(
    "struct { config.RuntimeConfig }",
    {
        **_fields(BOOL, "no_pivot", "selinux", "log_to_journald", "drop_infra_ctr", "read_only"),
        **_fields(STRINGS, "conmon_env", "hooks_dir", "default_capabilities"),
        "add_inheritable_capabilities": BOOL,
        "default_env": STRINGS,
        "min_injected_gomaxprocs": INTEGER,
        **_fields(STRINGS, "default_sysctls", "default_ulimits", "allowed_devices", "additional_devices"),
        "cdi_spec_dirs": STRINGS,
        "device_ownership_from_security_context": BOOL,
        **_fields(STRING, "default_runtime", "decryption_keys_path"),
        "additional_artifact_stores": STRINGS,
        **_fields(
            STRING,
            "conmon",
            "conmon_cgroup",
            "seccomp_profile",
            "privileged_seccomp_profile",
            "apparmor_profile",
            "blockio_config_file",
        ),
        "blockio_reload": BOOL,
        **_fields(
            STRING,
            "irqbalance_config_file",
            "rdt_config_file",
            "cgroup_manager",
            "default_mounts_file",
            "container_exits_dir",
            "container_attach_socket_dir",
            "bind_mount_prefix",
            "uid_mappings",
        ),
        "minimum_mappable_uid": INTEGER,
        "gid_mappings": STRING,
        "minimum_mappable_gid": INTEGER,
        **_fields(STRING, "log_level", "log_filter", "namespaces_dir", "pinns_path"),
        "enable_criu_support": BOOL,
        "runtimes": TableMap(RUNTIME_HANDLER),
        "workloads": TableMap(WORKLOAD),
        **_fields(INTEGER, "pids_limit", "log_size_max", "ctr_stop_timeout"),
        **_fields(STRING, "separate_pull_cgroup", "infra_ctr_cpuset", "shared_cpuset"),
        "absent_mount_sources_to_reject": STRINGS,
        "enable_pod_events": BOOL,
        "irqbalance_config_restore_file": STRING,
        **_fields(BOOL, "hostnetwork_disable_selinux", "disable_hostport_mapping"),
        "timezone": STRING,
    },
)

API = Table(
    "struct { config.APIConfig }",
    {
        **_fields(INTEGER, "grpc_max_send_msg_size", "grpc_max_recv_msg_size"),
        **_fields(STRING, "listen", "stream_address", "stream_port"),
        "stream_enable_tls": BOOL,
        **_fields(STRING, "stream_tls_cert", "stream_tls_key", "stream_tls_ca", "stream_idle_timeout"),
        "tls_min_version": STRING,
        "tls_cipher_suites": STRINGS,
    },
)

IMAGE = Table(
    "struct { config.ImageConfig }",
    {
        **_fields(
            STRING,
            "default_transport",
            "global_auth_file",
            "namespaced_auth_dir",
            "pause_image",
            "pause_image_auth_file",
            "pause_command",
        ),
        "pinned_images": STRINGS,
        **_fields(STRING, "signature_policy", "signature_policy_dir"),
        "insecure_registries": STRINGS,
        **_fields(STRING, "image_volumes", "big_files_temporary_dir"),
        "auto_reload_registries": BOOL,
        "pull_progress_timeout": DURATION,
        "oci_artifact_mount_support": BOOL,
        "short_name_mode": STRING,
    },
)

NRI_DEFAULT_VALIDATOR = Table(
    "nri.DefaultValidatorConfig",
    {
        **_fields(
            BOOL,
            "nri_enable_default_validator",
            "nri_validator_reject_oci_hook_adjustment",
            "nri_validator_reject_runtime_default_seccomp_adjustment",
            "nri_validator_reject_unconfined_seccomp_adjustment",
            "nri_validator_reject_custom_seccomp_adjustment",
            "nri_validator_reject_namespace_adjustment",
        ),
        "nri_validator_required_plugins": STRINGS,
        "nri_validator_tolerate_missing_plugins_annotation": STRING,
    },
)

CRIO_TABLE = Table(
    "struct { config.RootConfig; ... }",
    {
        **_fields(STRING, "root", "runroot", "imagestore", "storage_driver"),
        "storage_option": STRINGS,
        **_fields(STRING, "log_dir", "version_file", "version_file_persist", "clean_shutdown_file"),
        **_fields(BOOL, "internal_wipe", "internal_repair"),
        "api": API,
        "runtime": RUNTIME,
        "checkpoint_restore": Table("struct { config.CheckpointRestoreConfig }", {"container_level_enabled": STRING}),
        "image": IMAGE,
        "network": Table(
            "struct { config.NetworkConfig }",
            {
                **_fields(STRING, "cni_default_network", "network_dir", "plugin_dir"),
                "plugin_dirs": STRINGS,
                "cni_status_grace_period": DURATION,
            },
        ),
        "metrics": Table(
            "struct { config.MetricsConfig }",
            {
                "enable_metrics": BOOL,
                "metrics_collectors": STRINGS,
                "metrics_host": STRING,
                "metrics_port": INTEGER,
                **_fields(STRING, "metrics_socket", "metrics_cert", "metrics_key"),
            },
        ),
        "tracing": Table(
            "struct { config.TracingConfig }",
            {"enable_tracing": BOOL, "tracing_endpoint": STRING, "tracing_sampling_rate_per_million": INTEGER},
        ),
        "stats": Table(
            "struct { config.StatsConfig }",
            {"stats_collection_period": INTEGER, "collection_period": INTEGER, "included_pod_metrics": STRINGS},
        ),
        "nri": Table(
            "struct { *nri.Config }",
            {
                "enable_nri": BOOL,
                **_fields(STRING, "nri_listen", "nri_plugin_dir", "nri_plugin_config_dir"),
                **_fields(DURATION, "nri_plugin_registration_timeout", "nri_plugin_request_timeout"),
                "nri_disable_connections": BOOL,
                "default_validator": NRI_DEFAULT_VALIDATOR,
            },
        ),
    },
)

TOP = Table("config.tomlConfig", {"crio": CRIO_TABLE})

# Keys older cri-o releases read and 1.37 silently ignores (removed from pkg/config/config.go).
REMOVED_KEYS = {
    ("crio", "image", "registries"): "removed in 2024: list registries in /etc/containers/registries.conf",
    ("crio", "runtime", "seccomp_use_default_when_empty"): "removed in 2024",
    ("crio", "runtime", "manage_ns_lifecycle"): "removed in 2020: namespaces are always managed",
    ("crio", "runtime", "default_mounts"): "removed in 2020: use default_mounts_file",
    ("crio", "runtime", "allow_userns_annotation"): "removed in 2020: use allowed_annotations on the runtime",
}

# What cri-o runs with where no file says otherwise (DefaultConfig, DefaultRuntimeConfig; Linux, systemd).
HOOKS_DIR_DEFAULT = ["/usr/share/containers/oci/hooks.d"]
CDI_SPEC_DIRS_DEFAULT = ["/etc/cdi", "/var/run/cdi"]
DEFAULTS: dict[str, Any] = {
    "/crio/runtime/default_runtime": "crun",
    "/crio/runtime/hooks_dir": HOOKS_DIR_DEFAULT,
    "/crio/runtime/cdi_spec_dirs": CDI_SPEC_DIRS_DEFAULT,
    "/crio/runtime/allowed_devices": ["/dev/fuse", "/dev/net/tun"],
    "/crio/runtime/additional_devices": [],
    "/crio/runtime/cgroup_manager": "systemd",
    "/crio/runtime/conmon_cgroup": "",
    "/crio/runtime/log_size_max": -1,
    "/crio/image/image_volumes": "mkdir",
    "/crio/image/short_name_mode": "enforcing",
    "/crio/image/signature_policy_dir": "/etc/crio/policies",
    "/crio/image/namespaced_auth_dir": "/etc/crio/auth",
    "/crio/image/pause_image": "registry.k8s.io/pause:3.10.1",
    "/crio/api/tls_min_version": "VersionTLS12",
    "/crio/checkpoint_restore/container_level_enabled": "checkpoint_restore",
}
DEFAULT_RUNTIME_NAME = "crun"
# The handler DefaultRuntimeConfig puts in the runtimes map before any file is read.
BUILTIN_RUNTIME: dict[str, Any] = {
    "runtime_path": "",
    "runtime_type": "oci",
    "runtime_root": "/run/crun",
    "allowed_annotations": ["io.containers.trace-syscall", "devices.crio.io"],
    "container_create_timeout": 240,
}


def all_tables() -> Iterator[tuple[tuple[str, ...], Table]]:
    """Every table of the key table with its path; runtime and workload entries as NAME."""

    def walk(path: tuple[str, ...], table: Table) -> Iterator[tuple[tuple[str, ...], Table]]:
        yield path, table
        for name, spec in table.fields.items():
            if isinstance(spec, Table):
                yield from walk((*path, name), spec)
            elif isinstance(spec, TableMap):
                yield from walk((*path, name, "NAME"), spec.element)

    yield from walk((), TOP)


def table_header(path: Sequence[str]) -> str:
    return "[" + ".".join(go_key_part(part) if part != "NAME" else part for part in path) + "]" if path else "the top"


# ---------------------------------------------------------------------------------------------------------------
# Go's view of values: type names and messages as BurntSushi/toml prints them


def go_type(value: Any) -> str:
    """The Go type BurntSushi/toml gives a parsed TOML value, as `%T` prints it."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return "time.Time"
    if isinstance(value, list):
        return "[]map[string]any" if value and all(isinstance(item, dict) for item in value) else "[]any"
    return "map[string]any"


_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def go_key_part(part: str) -> str:
    if part == "":
        return '""'
    if _BARE.match(part):
        return part
    return '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'


def go_key(parts: Sequence[str]) -> str:
    """A key path as the decoder prints it in `(last key "...")`."""
    return ".".join(go_key_part(part) for part in parts)


_DURATION = re.compile(r"^[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+$")


def valid_go_duration(text: str) -> bool:
    """Whether Go's time.ParseDuration accepts text (magnitude limits aside)."""
    return text in ("0", "+0", "-0") or bool(_DURATION.match(text))


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def scalar_error(spec: Union[Scalar, Strings, StringMap], value: Any) -> Optional[str]:
    """The decoder's complaint about value in a field of this type; None when it decodes."""

    def badtype(destination: str, found: Any) -> str:
        return f"incompatible types: TOML value has type {go_type(found)}; destination has type {destination}"

    if isinstance(spec, Strings):
        if not isinstance(value, list):
            return badtype("slice", value)
        for item in value:
            if not isinstance(item, str):
                return badtype("string", item)
        return None
    if isinstance(spec, StringMap):
        if not isinstance(value, dict):
            return badtype("map", value)
        for item in value.values():
            if not isinstance(item, str):
                return badtype("string", item)
        return None
    kind = spec.go
    if kind == "string":
        return None if isinstance(value, str) else badtype("string", value)
    if kind == "bool":
        return None if isinstance(value, bool) else badtype("boolean", value)
    if kind == "duration" and isinstance(value, str):
        return None if valid_go_duration(value) else f'invalid duration: "{value}"'
    if isinstance(value, bool) or not isinstance(value, int):
        return badtype("integer", value)
    if kind == "uinteger" and value < 0:
        return f"{value} is out of range for uint64"
    return None


def describe(spec: Spec) -> str:
    """What a field takes, for a message."""
    if isinstance(spec, Scalar):
        return {
            "string": "a string",
            "bool": "true or false",
            "integer": "an integer",
            "uinteger": "an integer of 0 or more",
            "duration": 'a duration such as "30s", or an integer of nanoseconds',
        }[spec.go]
    if isinstance(spec, Strings):
        return 'an array of strings, ["..."]'
    if isinstance(spec, StringMap):
        return "a table of strings"
    if isinstance(spec, TableMap):
        return "a table holding one table per name"
    return "a table"


# ---------------------------------------------------------------------------------------------------------------
# The merged configuration


@dataclass(frozen=True)
class Origin:
    """Where a value was set: a file (None: the one document being linted on its own) and a pointer in it."""

    path: Optional[str]
    pointer: str


@dataclass(frozen=True)
class Unknown:
    """A key or table cri-o does not decode, hence ignores."""

    origin: Origin
    table: tuple[str, ...]  # the table it sits in, as in the key table (runtime names as NAME)
    key: str
    is_table: bool
    # Where to point: for a table, the innermost table along its first keys, which is where a header like
    # [plugins."io.containerd.grpc.v1.cri".containerd] opens it.
    at: str


@dataclass(frozen=True)
class DecodeError:
    """A value cri-o's decoder refuses: the whole file, and cri-o with it, is refused."""

    origin: Origin
    key: tuple[str, ...]  # the key path the decoder names in "(last key ...)"
    message: str  # the decoder's own words
    expected: str  # what the field takes, in words


@dataclass(frozen=True)
class CaseClash:
    """Two keys of one table that decode into the same field."""

    origin: Origin
    other: Origin
    field: str
    keys: tuple[str, str]


@dataclass(frozen=True)
class Replacement:
    """A runtimes or workloads entry redefined by a later file: the earlier table's other keys are lost."""

    origin: Origin  # the later table
    earlier: Origin
    map_name: str  # "runtimes" or "workloads"
    name: str
    lost: tuple[str, ...]


@dataclass
class ConfigFile:
    """One file in merge order, parsed or not."""

    path: Optional[str]
    value: Any
    parsed: bool


@dataclass
class CrioConfig:
    """The effective configuration and where each value came from."""

    files: list[ConfigFile] = field(default_factory=list)
    # The merged values, TOML-shaped with the canonical key names; only what the files set (defaults apart).
    value: dict[str, Any] = field(default_factory=dict)
    # Effective pointer -> where it was set; arrays have an origin for each element too.
    origins: dict[str, Origin] = field(default_factory=dict)
    unknown: list[Unknown] = field(default_factory=list)
    decode_errors: list[DecodeError] = field(default_factory=list)
    case_clashes: list[CaseClash] = field(default_factory=list)
    replacements: list[Replacement] = field(default_factory=list)
    # An entry could not be read at all (CRO005): what it would have set is unknown.
    unread_entries: bool = False

    @property
    def complete(self) -> bool:
        """Whether every file was read and parsed: otherwise cri-o refuses the whole configuration anyway."""
        return not self.unread_entries and all(f.parsed for f in self.files)

    def get(self, pointer: str, default: Any = None) -> Any:
        node: Any = self.value
        for part in split_pointer(pointer):
            if not isinstance(node, dict) or part not in node:
                return DEFAULTS.get(pointer, default)
            node = node[part]
        return node

    def is_set(self, pointer: str) -> bool:
        return pointer in self.origins

    def origin(self, pointer: str) -> Optional[Origin]:
        """Where the value at pointer (or, failing that, the nearest enclosing table) was set."""
        while True:
            found = self.origins.get(pointer)
            if found is not None or not pointer:
                return found
            pointer = pointer[: pointer.rfind("/")]

    def runtimes(self) -> dict[str, dict[str, Any]]:
        """The runtime handlers cri-o ends up with: the files' tables over the built-in crun."""
        handlers: dict[str, dict[str, Any]] = {DEFAULT_RUNTIME_NAME: dict(BUILTIN_RUNTIME)}
        configured = self.get("/crio/runtime/runtimes", {})
        if isinstance(configured, dict):
            for name, handler in configured.items():
                if isinstance(handler, dict):
                    handlers[name] = handler
        return handlers

    def set_by(self, path: Optional[str]) -> list[str]:
        """Effective pointers of the values that path set and nothing later overrode."""
        return [p for p, origin in self.origins.items() if origin.path == path]


def split_pointer(pointer: str) -> list[str]:
    if not pointer:
        return []
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


_STORAGE_KEEP_IF_EMPTY = {"/crio/root", "/crio/runroot", "/crio/storage_driver"}


class _Merger:
    def __init__(self) -> None:
        self.config = CrioConfig()

    def add(self, path: Optional[str], value: Any, parsed: bool) -> None:
        self.config.files.append(ConfigFile(path, value, parsed))
        if not parsed or not isinstance(value, dict):
            return
        self._big_integers(path, value, "", ())
        self._table(TOP, value, self.config.value, "", "", path, (), ())

    def _big_integers(self, path: Optional[str], value: Any, pointer: str, key: tuple[str, ...]) -> None:
        """Integers beyond 64 bits: tomllib reads them, BurntSushi's parser refuses the file."""
        if isinstance(value, bool):
            return
        if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
            message = f"{value} is out of range for int64"
            expected = "an integer from -2^63 to 2^63-1"
            self.config.decode_errors.append(DecodeError(Origin(path, pointer), key, message, expected))
        elif isinstance(value, dict):
            for name, item in value.items():
                self._big_integers(path, item, pointer_join(pointer, name), (*key, name))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self._big_integers(path, item, pointer_join(pointer, index), key)

    def _drop(self, pointer: str) -> None:
        prefix = pointer + "/"
        for key in [k for k in self.config.origins if k == pointer or k.startswith(prefix)]:
            del self.config.origins[key]

    def _table(
        self,
        spec: Table,
        data: dict[str, Any],
        effective: dict[str, Any],
        epointer: str,
        fpointer: str,
        path: Optional[str],
        schema_path: tuple[str, ...],
        key: tuple[str, ...],
    ) -> None:
        seen: dict[str, str] = {}
        for name, datum in data.items():
            fchild = pointer_join(fpointer, name)
            found = spec.lookup(name)
            if found is None:
                at = fchild
                inner = datum
                while isinstance(inner, dict) and inner and isinstance(next(iter(inner.values())), dict):
                    first = next(iter(inner))
                    at, inner = pointer_join(at, first), inner[first]
                unknown = Unknown(Origin(path, fchild), schema_path, name, isinstance(datum, dict), at)
                self.config.unknown.append(unknown)
                continue
            canonical, child = found
            if canonical in seen:
                earlier = Origin(path, pointer_join(fpointer, seen[canonical]))
                self.config.case_clashes.append(
                    CaseClash(Origin(path, fchild), earlier, canonical, (seen[canonical], name))
                )
            seen[canonical] = name
            self._field(
                child,
                datum,
                effective,
                canonical,
                pointer_join(epointer, canonical),
                fchild,
                path,
                (*schema_path, canonical),
                (*key, name),
            )

    def _field(
        self,
        spec: Spec,
        datum: Any,
        parent: dict[str, Any],
        name: str,
        epointer: str,
        fpointer: str,
        path: Optional[str],
        schema_path: tuple[str, ...],
        key: tuple[str, ...],
    ) -> None:
        config = self.config
        origin = Origin(path, fpointer)
        if isinstance(spec, Table):
            if not isinstance(datum, dict):
                message = f"type mismatch for {spec.go}: expected table but found {go_type(datum)}"
                config.decode_errors.append(DecodeError(origin, key, message, describe(spec)))
                return
            table = parent.get(name)
            if not isinstance(table, dict):
                table = parent[name] = {}
            config.origins[epointer] = origin
            self._table(spec, datum, table, epointer, fpointer, path, schema_path, key)
            return
        if isinstance(spec, TableMap):
            if not isinstance(datum, dict):
                message = f"incompatible types: TOML value has type {go_type(datum)}; destination has type map"
                config.decode_errors.append(DecodeError(origin, key, message, describe(spec)))
                return
            entries = parent.get(name)
            if not isinstance(entries, dict):
                entries = parent[name] = {}
            config.origins[epointer] = origin
            for entry_name, entry in datum.items():
                self._entry(spec, entry, entries, entry_name, epointer, fpointer, path, schema_path, key)
            return
        error = scalar_error(spec, datum)
        if error is not None:
            config.decode_errors.append(DecodeError(origin, key, error, describe(spec)))
            return
        if epointer in _STORAGE_KEEP_IF_EMPTY and datum == "":
            return
        if epointer == "/crio/storage_option" and isinstance(parent.get(name), list):
            # Every file's storage options are kept; a repeated option keeps its last position.
            combined: list[tuple[str, Origin]] = [
                (item, config.origins.get(pointer_join(epointer, i), origin)) for i, item in enumerate(parent[name])
            ]
            combined += [(item, Origin(path, pointer_join(fpointer, i))) for i, item in enumerate(datum)]
            kept: list[tuple[str, Origin]] = []
            for item, item_origin in reversed(combined):
                if all(item != other for other, _ in kept):
                    kept.append((item, item_origin))
            kept.reverse()
            self._drop(epointer)
            parent[name] = [item for item, _ in kept]
            config.origins[epointer] = origin
            for index, (_, item_origin) in enumerate(kept):
                config.origins[pointer_join(epointer, index)] = item_origin
            return
        self._drop(epointer)
        parent[name] = copy.deepcopy(datum)
        config.origins[epointer] = origin
        if isinstance(datum, list):
            for index in range(len(datum)):
                config.origins[pointer_join(epointer, index)] = Origin(path, pointer_join(fpointer, index))
        elif isinstance(datum, dict):
            for item in datum:
                config.origins[pointer_join(epointer, item)] = Origin(path, pointer_join(fpointer, item))

    def _entry(
        self,
        spec: TableMap,
        entry: Any,
        entries: dict[str, Any],
        entry_name: str,
        map_pointer: str,
        fpointer: str,
        path: Optional[str],
        schema_path: tuple[str, ...],
        key: tuple[str, ...],
    ) -> None:
        config = self.config
        epointer = pointer_join(map_pointer, entry_name)
        fentry = pointer_join(fpointer, entry_name)
        origin = Origin(path, fentry)
        if not isinstance(entry, dict):
            message = f"type mismatch for {spec.element.go}: expected table but found {go_type(entry)}"
            config.decode_errors.append(DecodeError(origin, (*key, entry_name), message, describe(spec.element)))
            return
        earlier = config.origins.get(epointer)
        if earlier is not None and earlier.path != path:
            given = {found[0] for found in map(spec.element.lookup, entry) if found is not None}
            earlier_keys = entries.get(entry_name, {})
            lost = tuple(k for k in earlier_keys if k not in given)
            if lost:
                config.replacements.append(Replacement(origin, earlier, schema_path[-1], entry_name, lost))
        self._drop(epointer)
        table: dict[str, Any] = {}
        entries[entry_name] = table
        config.origins[epointer] = origin
        self._table(spec.element, entry, table, epointer, fentry, path, (*schema_path, "NAME"), (*key, entry_name))


def merge(files: Sequence[tuple[Optional[str], Any, bool]]) -> CrioConfig:
    """Merge (path, parsed value, parsed?) in cri-o's order into the effective configuration."""
    merger = _Merger()
    for path, value, parsed in files:
        merger.add(path, value, parsed)
    return merger.config


# ---------------------------------------------------------------------------------------------------------------
# Reading a configuration the way cri-o reads it


@dataclass(frozen=True)
class Unreadable:
    """An entry cri-o tries to read as a configuration file and cannot: cri-o does not start."""

    path: str
    message: str  # what cri-o reports
    detail: str  # why, in words


@dataclass
class CrioCollection(Collection):
    """crio.conf and its drop-ins: each file in merge order, what cri-o cannot read, and the merged config."""

    main: Optional[str] = None
    dropin_dirs: list[str] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # the files in cri-o's merge order
    unreadable: list[Unreadable] = field(default_factory=list)
    config: CrioConfig = field(default_factory=CrioConfig)
    # For each drop-in file: the directory it was found under.
    found_under: dict[str, str] = field(default_factory=dict)


_HEX = frozenset("0123456789abcdefABCDEF")
_TIME_WITHOUT_SECONDS = re.compile(r"(?<![\d:])\d\d:\d\d(?![:\d])")


def _basic_escapes(segment: str) -> str:
    """TOML 1.1's \\e and \\xHH escapes as the \\uXXXX escapes TOML 1.0 has."""
    out = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "\\" and i + 1 < len(segment):
            following = segment[i + 1]
            if following == "e":
                out.append("\\u001B")
                i += 2
                continue
            digits = segment[i + 2 : i + 4]
            if following == "x" and len(digits) == 2 and set(digits) <= _HEX:
                out.append("\\u00" + digits)
                i += 4
                continue
            out.append(segment[i : i + 2])
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    """The index just past the string that starts at start ('...', "...", or their triple-quoted forms)."""
    quote = text[start]
    if text.startswith(quote * 3, start):
        i = start + 3
        while i < len(text):
            if quote == '"' and text[i] == "\\":
                i += 2
                continue
            if text.startswith(quote * 3, i):
                end = i + 3
                # Up to two more quotes belong to the content.
                while end < len(text) and text[end] == quote and end - i < 5:
                    end += 1
                return end
            i += 1
        return len(text)
    i = start + 1
    while i < len(text) and text[i] != "\n":
        if quote == '"' and text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return i


def toml_1_1_as_1_0(text: str) -> str:
    """Rewrite what TOML 1.1 adds (and BurntSushi/toml 1.6 accepts) into TOML 1.0 that tomllib reads.

    Newlines, comments and a trailing comma inside inline tables; \\e and \\xHH escapes; times without
    seconds. Every line stays on its line: the newlines inside an inline table move to just after it.
    """
    out: list[str] = []
    depth = 0
    held = 0
    i = 0
    while i < len(text):
        char = text[i]
        if char in "\"'":
            end = _string_end(text, i)
            segment = text[i:end]
            out.append(_basic_escapes(segment) if char == '"' else segment)
            i = end
            continue
        if char == "#":
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            if not depth:
                out.append(text[i:end])
            i = end
            continue
        if char == "\n" and depth:
            if out and out[-1] == "\r":
                out.pop()
            out.append(" ")
            held += 1
            i += 1
            continue
        if char == "{":
            depth += 1
        elif char == "}" and depth:
            spaces = []
            while out and out[-1] in (" ", "\t"):
                spaces.append(out.pop())
            if out and out[-1] == ",":
                out.pop()
            out.extend(spaces)
            depth -= 1
            out.append("}")
            if not depth and held:
                out.append("\n" * held)
                held = 0
            i += 1
            continue
        elif char.isdigit() and _TIME_WITHOUT_SECONDS.match(text, i):
            out.append(text[i : i + 5] + ":00")
            i += 5
            continue
        out.append(char)
        i += 1
    return "".join(out)


def as_crio_reads(document: Document) -> Document:
    """A document parsed as cri-o's decoder parses it, where tomllib is stricter.

    BurntSushi/toml skips a UTF-8 byte-order mark and, from v1.6, reads TOML 1.1; tomllib reads neither. When
    tomllib refused the text, parse it again without the mark and with the TOML 1.1 forms rewritten.
    """
    if document.parsed or not any(p.code == "DOC001" for p in document.load_problems):
        return document
    text = document.text[1:] if document.text.startswith("\ufeff") else document.text
    parsed = parse_toml(toml_1_1_as_1_0(text).encode("utf-8", errors="surrogatepass"))
    if not parsed.ok:
        return document
    return Document(
        document.path,
        document.kind,
        document.text,
        parsed.value,
        True,
        [p for p in document.load_problems if p.code != "DOC001"] + [p for p in parsed.problems if p.code != "DOC002"],
        document.format,
        LineLocator(text),
    )


def refine_crio(document: Document) -> Document:
    """What cri-o's decoder makes of a file: a byte-order mark and TOML 1.1 pass, bytes that are not UTF-8 do not."""
    document = as_crio_reads(document)
    document.load_problems = [
        replace(problem, code=NOT_UTF8) if problem.code == "DOC002" else problem for problem in document.load_problems
    ]
    return document


def _describe(error: OSError) -> str:
    return (error.strerror or str(error)).lower()


_NULL_DEVICE = (1, 3)


def _read_entry(path: str, loader: Loader, collection: CrioCollection) -> None:
    """Read one entry the way UpdateFromDropInFile does (os.ReadFile, which follows links)."""
    try:
        info = os.stat(path)
    except OSError as error:
        collection.unreadable.append(
            Unreadable(path, f"open {path}: {_describe(error)}", "a symbolic link whose target does not exist")
        )
        return
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        collection.unreadable.append(
            Unreadable(
                path,
                f"read {path}: is a directory",
                "a symbolic link to a directory: the walk does not follow it, it reads it as a file",
            )
        )
        return
    if stat.S_ISFIFO(mode):
        collection.unreadable.append(
            Unreadable(
                path, f"{path}: a FIFO", "a named pipe: reading it blocks until something writes, so cri-o hangs"
            )
        )
        return
    if stat.S_ISCHR(mode) and (os.major(info.st_rdev), os.minor(info.st_rdev)) == _NULL_DEVICE:
        collection.skipped.append(Skipped(path, "reads as an empty file (/dev/null): sets nothing"))
        return
    if not stat.S_ISREG(mode):
        collection.unreadable.append(
            Unreadable(path, f"read {path}: not a regular file", "a socket or device, which cri-o cannot decode")
        )
        return
    document = loader(path, CRIO)
    document.kind = CRIO_PART
    collection.documents.append(document)
    collection.order.append(path)


def _walk(path: str, loader: Loader, collection: CrioCollection, top: str) -> None:
    """filepath.Walk: lstat every entry; recurse into directories in lexical order; read everything else."""
    try:
        info = os.lstat(path)
    except OSError as error:
        collection.unreadable.append(Unreadable(path, f"lstat {path}: {_describe(error)}", "it vanished or is hidden"))
        return
    if not stat.S_ISDIR(info.st_mode):
        collection.found_under[path] = top
        _read_entry(path, loader, collection)
        return
    try:
        names = sorted(os.listdir(path), key=os.fsencode)
    except OSError as error:
        collection.unreadable.append(
            Unreadable(path, f"open {path}: {_describe(error)}", "a directory that cannot be listed")
        )
        return
    for name in names:
        _walk(os.path.join(path, name), loader, collection, top)


def read_crio_config(main_path: Optional[str], dropin_dir: Optional[str], loader: Loader) -> CrioCollection:
    """crio.conf, then every file under the drop-in directory, read and merged as cri-o does.

    Either may be None or absent: cri-o skips a missing crio.conf (unless --config names it) and a missing
    drop-in directory. The collection holds each file as a document (kind crio-part), the entries cri-o could
    not read, and the merged configuration with the origin of every value (`effective_config`, `origin_of`).
    """
    return read_crio_configs(main_path, [dropin_dir] if dropin_dir else [], loader)


def read_crio_configs(main_path: Optional[str], dropin_dirs: Sequence[str], loader: Loader) -> CrioCollection:
    # "dir/" would make lstat follow a link that cri-o's walk does not follow.
    main_path = os.path.normpath(main_path) if main_path else None
    dropin_dirs = [os.path.normpath(d) for d in dropin_dirs]
    directories = [d for d in (os.path.dirname(main_path) if main_path else None, *dropin_dirs) if d]
    collection = CrioCollection(CRIO_CONFIG, directories[-1:] or ["."], main=main_path, dropin_dirs=list(dropin_dirs))
    if main_path is not None:
        if os.path.exists(main_path):
            _read_entry(main_path, loader, collection)
        elif os.path.lexists(main_path):
            # Unlike a drop-in, a main file that does not exist is skipped (unless --config names it).
            collection.skipped.append(Skipped(main_path, "a symbolic link to nothing: cri-o skips it"))
        else:
            collection.skipped.append(Skipped(main_path, "not present: cri-o starts from its built-in defaults"))
    for directory in dropin_dirs:
        if not os.path.exists(directory):
            if os.path.lexists(directory):
                collection.skipped.append(Skipped(directory, "a symbolic link to nothing: cri-o skips it"))
            else:
                collection.skipped.append(Skipped(directory, "not present: no drop-in files"))
            continue
        if os.path.islink(directory) and os.path.isdir(directory):
            # UpdateFromPath stats the path (following the link), then filepath.Walk lstats it: a link is
            # walked as one file, and reading a directory fails.
            collection.unreadable.append(
                Unreadable(
                    directory,
                    f"read {directory}: is a directory",
                    "the drop-in directory itself is a symbolic link, which filepath.Walk does not follow: "
                    "cri-o reads the link as a file",
                )
            )
            continue
        _walk(directory, loader, collection, directory)
    by_path = {document.path: document for document in collection.documents}
    collection.config = merge(
        [(path, by_path[path].value, by_path[path].parsed) for path in collection.order if path in by_path]
    )
    collection.config.unread_entries = bool(collection.unreadable)
    return collection


def effective_config(collection: Collection) -> dict[str, Any]:
    """The merged values of a cri-o configuration (what the files set; cri-o's defaults are not filled in)."""
    if isinstance(collection, CrioCollection):
        return collection.config.value
    return {}


def origin_of(collection: Collection, pointer: str) -> Optional[Origin]:
    """The file and pointer that set the effective value at pointer (e.g. /crio/runtime/hooks_dir)."""
    if isinstance(collection, CrioCollection):
        return collection.config.origin(pointer)
    return None


def single_file_config(value: Any) -> CrioConfig:
    """A file linted on its own is the whole configuration: cri-o's defaults plus that file."""
    return merge([(None, value, True)])


# ---------------------------------------------------------------------------------------------------------------
# Registration


def _has_crio_table(value: Any) -> bool:
    return isinstance(value, dict) and any(key.casefold() == "crio" for key in value)


def _sniff(path: str, value: Any) -> bool:
    if _has_crio_table(value):
        return True
    name = posixpath.basename(path)
    return name == "crio.conf" or posixpath.basename(posixpath.dirname(path)) == "crio.conf.d"


register_kind(Kind(CRIO, "cri-o configuration", ("toml",), _sniff, order=25, refine=refine_crio))


def _is_crio_home(path: str) -> bool:
    """/etc/crio: a directory holding crio.conf or crio.conf.d."""
    return os.path.isfile(os.path.join(path, "crio.conf")) or os.path.isdir(os.path.join(path, "crio.conf.d"))


def _claims(path: str) -> bool:
    name = os.path.basename(os.path.normpath(path))
    return name.endswith("crio.conf.d") or _is_crio_home(path)


def _read(directories: Sequence[str], loader: Loader) -> Collection:
    main: Optional[str] = None
    dropins: list[str] = []
    for directory in directories:
        if _is_crio_home(directory) and not os.path.basename(os.path.normpath(directory)).endswith(".conf.d"):
            main = os.path.join(directory, "crio.conf")
            dropins.append(os.path.join(directory, "crio.conf.d"))
        else:
            dropins.append(directory)
    return read_crio_configs(main, dropins, loader)


register_directory_kind(
    DirectoryKind(
        CRIO_CONFIG,
        CRIO,
        "cri-o configuration directory (crio.conf and crio.conf.d, merged)",
        _claims,
        _read,
        order=30,
    )
)
