"""cri-o's key table: every table and key cri-o decodes, the Go type of each field, and cri-o's defaults.

- The key table is `tomlConfig` in `pkg/config/config.go`: `[crio]` (RootConfig) and its tables `api`, `runtime`,
  `checkpoint_restore`, `image`, `network`, `metrics`, `tracing`, `stats`, `nri`; `[crio.runtime.runtimes.NAME]`
  (RuntimeHandler) and `[crio.runtime.workloads.NAME]` (WorkloadConfig). Nothing else is decoded: every other
  table or key is silently ignored (cri-o drops the decoder's list of undecoded keys).
- Keys are matched to fields as BurntSushi's `unifyStruct` does: the exact name first, then case-insensitively.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

CRIO_VERSION = "1.37"


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
