"""CRO: cri-o configurations, checked as cri-o 1.37 merges and validates them.

CRO0xx: cri-o refuses to load the configuration on any node (the `crio config` command and the daemon both stop):
the decoder's errors and what `Config.Validate(false)` rejects. These are the `--schema-only` checks.
CRO1xx: cri-o loads the configuration, but ignores part of it, refuses it only when the daemon starts, or runs
with something other than what the operator meant.

A rule gets either one file linted on its own (a dict: that file over cri-o's defaults) or a merged configuration
(a CrioCollection); every finding points at the file and line that set the value.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.crio.go_values import go_key, go_key_part, table_header, valid_go_duration
from nvidia_oci_hook.kinds.crio.key_table import (
    CRIO_VERSION,
    DEFAULT_RUNTIME_NAME,
    HOOKS_DIR_DEFAULT,
    REMOVED_KEYS,
    all_tables,
)
from nvidia_oci_hook.kinds.crio.merge import CrioConfig, Origin, Unknown, split_pointer
from nvidia_oci_hook.kinds.crio.reading import CRIO, CRIO_CONFIG, CrioCollection, single_file_config
from nvidia_oci_hook.kinds.crio.toml_syntax import NOT_UTF8
from nvidia_oci_hook.node.driver import resolve_driver_root, stray_device_nodes
from nvidia_oci_hook.rules.base import Check, Context, register

KINDS = (CRIO, CRIO_CONFIG)
# Where this project installs nvidia-oci-hook.json.
PROJECT_HOOKS_DIR = "/usr/share/containers/oci/hooks.d"
PROJECT_HOOK_FILE = "nvidia-oci-hook.json"
# The PATH systemd gives services, where cri-o looks up a runtime without runtime_path.
SERVICE_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
COLLISION_ERROR = "privileged container was configured with a device container path that already exists on the host"


# ---------------------------------------------------------------------------------------------------------------
# The view every check works on


@dataclass
class View:
    config: CrioConfig
    collection: Optional[CrioCollection]

    def problem(self, origin: Optional[Origin], message: str, hint: Optional[str] = None) -> Problem:
        if origin is None:
            origin = self.fallback()
        return Problem(origin.pointer, message, hint, origin.path)

    def fallback(self) -> Origin:
        """Where a finding about a default value goes: the main file, else the first file read."""
        if self.collection is None:
            return Origin(None, "")
        for path in self.collection.order:
            return Origin(path, "")
        return Origin(self.collection.main or self.collection.directories[0], "")

    def line(self, origin: Origin) -> Optional[int]:
        if self.collection is None or origin.path is None:
            return None
        document = self.collection.document(origin.path)
        return document.locate(origin.pointer).line if document is not None else None

    def at(self, origin: Optional[Origin]) -> str:
        """A place for a message: 'FILE line N' ('elsewhere in this file' for a file linted alone)."""
        if origin is None:
            return "cri-o's defaults"
        line = self.line(origin)
        if origin.path is None:
            return "elsewhere in this file"
        return f"{origin.path} line {line}" if line else origin.path

    def effective(self) -> Optional[CrioConfig]:
        """The merged config, for checks of what cri-o runs with; None when a file did not parse."""
        return self.config if self.config.complete else None


def view(value: Any, context: Context) -> Optional[View]:
    if isinstance(value, CrioCollection):
        return View(value.config, value)
    if isinstance(value, dict):
        config = context.cached(f"crio:{id(value)}", lambda: single_file_config(value))
        return View(config, None)
    return None


def crio_rule(
    code: str, name: str, severity: Severity, *, needs_host: bool = False, schema_level: bool = False
) -> Callable[[Check], Check]:
    def wrap(check: Check) -> Check:
        register(code, name, severity, KINDS, needs_host=needs_host, schema_level=schema_level, check=check)
        return check

    return wrap


def quote_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def key_at(pointer: str) -> str:
    """An effective pointer as a TOML key path: crio.runtime.hooks_dir."""
    return go_key(split_pointer(pointer))


def strings_at(config: CrioConfig, pointer: str) -> list[str]:
    value = config.get(pointer, [])
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


# ---------------------------------------------------------------------------------------------------------------
# CRO0xx: cri-o refuses the configuration


register(
    NOT_UTF8,
    "config-not-utf8",
    Severity.ERROR,
    KINDS,
    schema_level=True,
    doc="""A cri-o configuration file contains bytes that are not UTF-8.

    ## What it checks
    Every file cri-o reads (`crio.conf` and each drop-in) for bytes that are not UTF-8.

    ## Why it matters
    TOML must be UTF-8 and cri-o's decoder (BurntSushi/toml) refuses the file, so cri-o does not start: one
    such byte in any drop-in, even inside a comment, stops the whole node's container runtime.

    ## Example
    A drop-in saved in Latin-1 with `# Geräte` in a comment.

    ## Fix
    Re-encode the file as UTF-8: `iconv -f LATIN1 -t UTF-8 FILE -o FILE.new && mv FILE.new FILE`.
    """,
)


@crio_rule("CRO001", "wrong-type", Severity.ERROR, schema_level=True)
def wrong_type(value: Any, context: Context) -> Iterator[Problem]:
    """A value has a TOML type cri-o's decoder cannot put in its field.

    ## What it checks
    Every key cri-o reads against the Go type of its field in cri-o's `Config` structs (cri-o 1.37): strings,
    booleans, integers (unsigned where the field is), `time.Duration` (a string Go's `time.ParseDuration`
    accepts, or an integer), arrays of strings, tables of strings, and tables. Also integers beyond 64 bits, which
    the decoder's parser refuses even under keys cri-o ignores.

    ## Why it matters
    cri-o decodes each file with BurntSushi/toml and stops at the first mismatch: `crio config` fails and the
    daemon does not start, with `unable to decode configuration FILE: toml: line N (last key "K"): incompatible
    types: TOML value has type string; destination has type slice`. One bad drop-in anywhere under
    `crio.conf.d` takes the whole node's container runtime down.

    ## Example
    `hooks_dir = "/usr/share/containers/oci/hooks.d"` under `[crio.runtime]`: `hooks_dir` is an array.
    `privileged_without_host_devices = "true"` in a runtime table: a string where a boolean belongs.

    ## Fix
    Write the value with the type the message names: `hooks_dir = ["/usr/share/containers/oci/hooks.d"]`,
    `privileged_without_host_devices = true`. Check with `crio config > /dev/null` before restarting cri-o.
    """
    current = view(value, context)
    if current is None:
        return
    for error in current.config.decode_errors:
        line = current.line(error.origin)
        if error.origin.path is not None and line is not None:
            message = (
                f"cri-o refuses this configuration: unable to decode configuration {error.origin.path}: "
                f'toml: line {line} (last key "{go_key(error.key)}"): {error.message}'
            )
        else:
            message = f'cri-o refuses this file: toml: (last key "{go_key(error.key)}"): {error.message}'
        yield current.problem(error.origin, message, f"{error.key[-1]} takes {error.expected}")


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
    table is misplaced and so ignored (CRO101).

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
    if current.collection is None and not isinstance(config.get("/crio/runtime/runtimes"), dict):
        # A file linted on its own that defines no runtime relies on another file for them.
        return
    close = difflib.get_close_matches(name, list(runtimes), n=1, cutoff=0.6)
    hint = f"add [crio.runtime.runtimes.{go_key([name])}] with its runtime_path, or set default_runtime to "
    hint += f'"{close[0]}"' if close else "one of " + ", ".join(f'"{n}"' for n in sorted(runtimes))
    yield current.problem(
        config.origin(pointer),
        f'cri-o refuses this configuration: default_runtime set to "{name}", but no runtime entry table '
        f"[crio.runtime.runtimes.{name}] was found (runtimes defined: {', '.join(sorted(runtimes))})",
        hint,
    )


def _valid_mode(mode: str) -> bool:
    return bool(mode) and all(letter in "rwm" for letter in mode) and len(set(mode)) == len(mode)


def parse_device(entry: str) -> tuple[Optional[tuple[str, str, str]], Optional[str]]:
    """cri-o's parseDevice plus its /dev/ check: ((host, container, permissions), None) or (None, its error)."""
    parts = entry.split(":")
    permissions = "rwm"
    destination = ""
    if len(parts) > 3:
        return None, f"invalid device specification: {entry}"
    if len(parts) == 3:
        if not _valid_mode(parts[2]):
            return None, f"invalid device mode: {parts[2]}"
        permissions = parts[2]
    if len(parts) >= 2:
        if _valid_mode(parts[1]):
            permissions = parts[1]
        else:
            if parts[1] and not parts[1].startswith("/"):
                return None, f"invalid device mode: {parts[1]}"
            destination = parts[1]
    source = parts[0]
    destination = destination or source
    if not destination.startswith("/dev/"):
        return None, f"invalid device mode: {destination}"
    return (source, destination, permissions), None


@crio_rule("CRO003", "invalid-additional-device", Severity.ERROR, schema_level=True)
def invalid_additional_device(value: Any, context: Context) -> Iterator[Problem]:
    """An additional_devices entry is not HOST[:CONTAINER[:PERMISSIONS]] with a container path under /dev/.

    ## What it checks
    Each entry of the effective `additional_devices`, parsed as cri-o parses it: at most three `:`-separated
    fields; permissions made of `r`, `w` and `m`, each at most once; a second field that is either permissions or
    an absolute container path; and the container path (the host path when none is given) starting with `/dev/`.
    Empty entries are skipped, as cri-o skips them.

    ## Why it matters
    cri-o parses these devices while loading its configuration and refuses to start on the first bad one, with
    an error that is easy to misread: a container path outside `/dev/` is reported as `invalid device mode:
    /mnt/gpu`, and four fields as `invalid device specification: ...`. These devices go into every container on
    the node, so the entry is usually a GPU or a FUSE node someone meant to give to all pods.

    ## Example
    `additional_devices = ["/dev/nvidiactl:/nvidiactl:rw"]`: the container path is not under `/dev/`.
    `additional_devices = ["/dev/fuse:rwx"]`: `x` is not a device permission.

    ## Fix
    Write `"/dev/HOST:/dev/CONTAINER:rwm"`, or just `"/dev/HOST"` (same path, `rwm`). Do not hand GPUs to
    every container this way; use the device plugin or CDI.
    """
    current = view(value, context)
    config = current.effective() if current else None
    if current is None or config is None:
        return
    pointer = "/crio/runtime/additional_devices"
    for index, entry in enumerate(strings_at(config, pointer)):
        if not entry:
            continue
        _, error = parse_device(entry)
        if error is not None:
            yield current.problem(
                config.origin(pointer_join(pointer, index)),
                f'cri-o refuses this configuration: additional_devices entry "{entry}": {error}',
                'write "HOST_PATH[:CONTAINER_PATH[:PERMISSIONS]]", the container path under /dev/ and the '
                "permissions from r, w and m",
            )


# Capabilities cri-o knows (moby/sys/capability, up to CAP_CHECKPOINT_RESTORE).
CAPABILITIES = frozenset(
    "CAP_" + name
    for name in [
        "CHOWN",
        "DAC_OVERRIDE",
        "DAC_READ_SEARCH",
        "FOWNER",
        "FSETID",
        "KILL",
        "SETGID",
        "SETUID",
        "SETPCAP",
        "LINUX_IMMUTABLE",
        "NET_BIND_SERVICE",
        "NET_BROADCAST",
        "NET_ADMIN",
        "NET_RAW",
        "IPC_LOCK",
        "IPC_OWNER",
        "SYS_MODULE",
        "SYS_RAWIO",
        "SYS_CHROOT",
        "SYS_PTRACE",
        "SYS_PACCT",
        "SYS_ADMIN",
        "SYS_BOOT",
        "SYS_NICE",
        "SYS_RESOURCE",
        "SYS_TIME",
        "SYS_TTY_CONFIG",
        "MKNOD",
        "LEASE",
        "AUDIT_WRITE",
        "AUDIT_CONTROL",
        "SETFCAP",
        "MAC_OVERRIDE",
        "MAC_ADMIN",
        "SYSLOG",
        "WAKE_ALARM",
        "BLOCK_SUSPEND",
        "AUDIT_READ",
        "PERFMON",
        "BPF",
        "CHECKPOINT_RESTORE",
    ]
)
ULIMITS = frozenset(
    [
        "core",
        "cpu",
        "data",
        "fsize",
        "locks",
        "memlock",
        "msgqueue",
        "nice",
        "nofile",
        "nproc",
        "rss",
        "rtprio",
        "rttime",
        "sigpending",
        "stack",
    ]
)
POD_METRICS = ("cpu", "disk", "diskIO", "hugetlb", "memory", "network", "oom", "process", "spec", "pressure")
TLS_VERSIONS = ("VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13")
# Go's crypto/tls CipherSuites() and InsecureCipherSuites() names, plus Kubernetes' two aliases.
TLS_CIPHERS = frozenset(
    [
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        "TLS_RSA_WITH_RC4_128_SHA",
        "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA",
        "TLS_RSA_WITH_AES_256_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA256",
        "TLS_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    ]
)
# Annotations a runtime handler or workload may allow (pkg/annotations/v2 AllAllowedAnnotations).
_V2_ANNOTATIONS = [
    "cgroup2-mount-hierarchy-rw",
    "devices",
    "disable-fips",
    "link-logs",
    "platform-runtime-path",
    "pod-linux-overhead",
    "pod-linux-resources",
    "seccomp-notifier-action",
    "seccomp-profile",
    "shm-size",
    "spoofed",
    "try-skip-volume-selinux-label",
    "umask",
    "unified-cgroup",
    "userns-mode",
    "cpu-load-balancing",
    "cpu-quota",
    "cpu-c-states",
    "cpu-freq-governor",
    "cpu-shared",
    "irq-load-balancing",
]
ALLOWED_ANNOTATIONS = frozenset(
    [
        "io.kubernetes.cri.rdt-class",
        "bundle",
        "org.systemd.property.",
        "org.criu.config",
        "module.wasm.image/variant",
        "io.kubernetes.cri.container-type",
        "run.oci.",
        "io.containers.trace-syscall",
        "org.opencontainers.image.stopSignal",
        *(f"{name}.crio.io" for name in _V2_ANNOTATIONS if name != "skip-gomaxprocs"),
        *(
            f"io.kubernetes.cri-o.{name}"
            for name in [
                "userns-mode",
                "cgroup2-mount-hierarchy-rw",
                "UnifiedCgroup",
                "Spoofed",
                "ShmSize",
                "Devices",
                "TrySkipVolumeSELinuxLabel",
                "seccompNotifierAction",
                "umask",
                "PodLinuxOverhead",
                "PodLinuxResources",
                "LinkLogs",
                "PlatformRuntimePath",
                "DisableFIPS",
            ]
        ),
        "seccomp-profile.kubernetes.cri-o.io",
    ]
)
_NUMBER = re.compile(r"^[+-]?[0-9]+$")


def _go_int(text: str) -> Optional[int]:
    return int(text) if _NUMBER.match(text) and -(1 << 63) <= int(text) < (1 << 63) else None


def ulimit_error(entry: str) -> Optional[str]:
    """docker/go-units ParseUlimit, as cri-o calls it."""
    name, equals, limits = entry.partition("=")
    if not equals:
        return f"invalid ulimit argument: {entry}"
    if name not in ULIMITS:
        return f"invalid ulimit type: {name}"
    values = limits.split(":")
    if len(values) > 2:
        return f"too many limit value arguments - {limits}, can only have up to two, `soft[:hard]`"
    numbers = [_go_int(v) for v in values]
    for text, number in zip(values, numbers):
        if number is None:
            return f'strconv.ParseInt: parsing "{text}": invalid syntax'
    soft = numbers[0]
    hard = numbers[1] if len(numbers) == 2 else soft
    assert soft is not None and hard is not None
    if hard != -1:
        if soft == -1:
            return f"ulimit soft limit must be less than or equal to hard limit: soft: -1 (unlimited), hard: {hard}"
        if soft > hard:
            return f"ulimit soft limit must be less than or equal to hard limit: {soft} > {hard}"
    return None


def cpuset_error(text: str) -> Optional[str]:
    """k8s.io/utils/cpuset Parse."""
    if text == "":
        return None
    for part in text.split(","):
        bounds = part.split("-")
        if len(bounds) > 2 or not all(_NUMBER.match(b) and not b.startswith("-") for b in bounds):
            return f'invalid range "{part}"' if len(bounds) > 2 else f'strconv.Atoi: parsing "{part}": invalid syntax'
        if len(bounds) == 2 and int(bounds[0]) > int(bounds[1]):
            return f'invalid range "{part}" ({int(bounds[0])} > {int(bounds[1])})'
    return None


_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = (
    r"(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*"
    r"|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
)
_REFERENCE = re.compile(
    rf"^((?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*)(?::[\w][\w.-]{{0,127}})?"
    r"(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*):([0-9a-fA-F]{32,}))?$",
    re.ASCII,
)


def image_reference_error(text: str) -> Optional[str]:
    """The distribution reference grammar (reference.ParseNormalizedNamed), in outline."""
    if not text:
        return "repository name must have at least one component"
    if re.fullmatch(r"[a-f0-9]{64}", text):
        return f"invalid repository name ({text}), cannot specify 64-byte hexadecimal strings"
    match = _REFERENCE.match(text)
    if match is None:
        first, slash, rest = text.partition("/")
        lowered = first + slash + rest.lower() if slash else text.lower()
        if _REFERENCE.match(lowered):
            return f"invalid reference format: repository name ({rest or text}) must be lowercase"
        return "invalid reference format"
    if len(match.group(1)) > 255:
        return "repository name must not be more than 255 characters"
    if match.group(2) == "sha256" and len(match.group(3)) != 64:
        return "invalid checksum digest length"
    return None


def _duration_seconds(value: Any) -> Optional[float]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value / 1e9
    if isinstance(value, str) and valid_go_duration(value):
        return -1.0 if value.startswith("-") and re.search(r"[1-9]", value) else 0.0
    return None


ValueCheck = Callable[[CrioConfig], Iterator[tuple[str, str]]]


def _single(pointer: str, test: Callable[[Any], Optional[str]]) -> ValueCheck:
    def check(config: CrioConfig) -> Iterator[tuple[str, str]]:
        if config.is_set(pointer):
            error = test(config.get(pointer))
            if error is not None:
                yield pointer, error

    return check


def _each(pointer: str, test: Callable[[str], Optional[str]]) -> ValueCheck:
    def check(config: CrioConfig) -> Iterator[tuple[str, str]]:
        if config.is_set(pointer):
            for index, item in enumerate(strings_at(config, pointer)):
                error = test(item)
                if error is not None:
                    yield pointer_join(pointer, index), error

    return check


def _sysctl(entry: str) -> Optional[str]:
    if entry == "":
        return None
    key, equals, value = entry.partition("=")
    if not equals:
        return f'invalid default_sysctls: "{entry}" is not in key=value format'
    if f"{key.strip()}={value.strip()}" != entry:
        return f"invalid default_sysctls: '{entry}' is invalid, extra spaces found: format should be key=value"
    return None


def _capability(entry: str) -> Optional[str]:
    name = "CAP_" + entry.upper()
    if name in CAPABILITIES:
        return None
    return f'invalid capabilities: validating capabilities: "{name}": unknown capability'


def _absolute(what: str) -> Callable[[Any], Optional[str]]:
    return lambda v: None if isinstance(v, str) and v.startswith("/") else f'{what} dir "{v}" is not absolute'


def _workloads(config: CrioConfig) -> Iterator[tuple[str, str]]:
    workloads = config.get("/crio/runtime/workloads", {})
    if not isinstance(workloads, dict):
        return
    for name, workload in workloads.items():
        base = pointer_join("/crio/runtime/workloads", name)
        prefix = "workloads validation: "
        if not workload.get("activation_annotation"):
            yield base, f'{prefix}annotation shouldn\'t be empty for workload "{name}"'
        for index, annotation in enumerate(workload.get("allowed_annotations", [])):
            if annotation not in ALLOWED_ANNOTATIONS:
                yield (
                    pointer_join(pointer_join(base, "allowed_annotations"), index),
                    (f"{prefix}invalid allowed_annotation: {annotation}"),
                )
        resources = workload.get("resources")
        if not isinstance(resources, dict):
            continue
        rbase = pointer_join(base, "resources")
        cpuset = resources.get("cpuset", "")
        error = cpuset_error(cpuset)
        if error is not None:
            yield pointer_join(rbase, "cpuset"), f'{prefix}unable to parse cpuset "{cpuset}": {error}'
        quota, shares = resources.get("cpuquota", 0), resources.get("cpushares", 0)
        if quota != 0 and quota < shares:
            yield pointer_join(rbase, "cpuquota"), f"{prefix}cpuquota {quota} cannot be less than cpushares {shares}"
        period = resources.get("cpuperiod", 0)
        if period != 0 and period < 1000:
            yield pointer_join(rbase, "cpuperiod"), f"{prefix}cpuperiod {period} cannot be less than 1000 microseconds"


def _checkpoint_level(config: CrioConfig) -> Iterator[tuple[str, str]]:
    pointer = "/crio/checkpoint_restore/container_level_enabled"
    if not config.is_set(pointer) or config.get("/crio/runtime/enable_criu_support", True) is False:
        return
    level = config.get(pointer)
    if level not in ("none", "checkpoint_only", "checkpoint_restore"):
        yield (
            pointer,
            (
                f'validating checkpoint/restore config: invalid container_level_enabled "{level}": must be one of '
                '"none", "checkpoint_only" or "checkpoint_restore"'
            ),
        )


def _tls(config: CrioConfig) -> Iterator[tuple[str, str]]:
    if config.get("/crio/api/stream_enable_tls", False) is True:
        for key, what in (("stream_tls_cert", "cert"), ("stream_tls_key", "key")):
            if not config.get(f"/crio/api/{key}", ""):
                yield "/crio/api/stream_enable_tls", f"validating api config: stream TLS {what} path is empty"
    version = config.get("/crio/api/tls_min_version") or "VersionTLS12"
    if config.is_set("/crio/api/tls_min_version"):
        if version not in TLS_VERSIONS:
            yield (
                "/crio/api/tls_min_version",
                f'validating api config: validating tls_min_version: unknown tls version "{version}"',
            )
            return
        if version not in ("VersionTLS12", "VersionTLS13"):
            yield (
                "/crio/api/tls_min_version",
                "validating api config: tls_min_version must be VersionTLS12 or VersionTLS13, got unsupported version",
            )
            return
    if version == "VersionTLS12":
        for index, cipher in enumerate(strings_at(config, "/crio/api/tls_cipher_suites")):
            if cipher not in TLS_CIPHERS:
                yield (
                    pointer_join("/crio/api/tls_cipher_suites", index),
                    (
                        f"validating api config: validating tls_cipher_suites: Cipher suite {cipher} not supported "
                        "or doesn't exist"
                    ),
                )


def _pod_metrics(config: CrioConfig) -> Iterator[tuple[str, str]]:
    pointer = "/crio/stats/included_pod_metrics"
    metrics = strings_at(config, pointer)
    if metrics == ["all"]:
        return
    for index, metric in enumerate(metrics):
        if metric == "all":
            yield (
                pointer_join(pointer, index),
                "validating stats config: 'all' should be only one element in included_pod_metrics",
            )
        elif metric not in POD_METRICS:
            yield (
                pointer_join(pointer, index),
                f'validating stats config: invalid pod metrics "{metric}", '
                f"available metrics: [{' '.join(POD_METRICS)}]",
            )


def _grace_period(value: Any) -> Optional[str]:
    seconds = _duration_seconds(value)
    if seconds is not None and seconds < 0:
        return f"validating network config: invalid cni_status_grace_period: must not be negative, got {value}"
    return None


VALUE_CHECKS: tuple[ValueCheck, ...] = (
    _single(
        "/crio/image/image_volumes",
        lambda v: None if v in ("mkdir", "ignore", "bind") else "unrecognized image volume type specified",
    ),
    _single(
        "/crio/runtime/min_injected_gomaxprocs",
        lambda v: None if v >= 0 else f"validating runtime config: min_injected_gomaxprocs must be >= 0, got {v}",
    ),
    _each(
        "/crio/runtime/additional_artifact_stores",
        lambda v: (
            None
            if v.startswith("/")
            else f'validating runtime config: additional_artifact_stores entry must be absolute: "{v}"'
        ),
    ),
    _each(
        "/crio/runtime/default_ulimits",
        lambda v: (
            None
            if ulimit_error(v) is None
            else f"validating runtime config: unrecognized ulimit {v}: {ulimit_error(v)}"
        ),
    ),
    _single(
        "/crio/runtime/log_size_max",
        lambda v: "validating runtime config: log size max should be negative or >= 8192" if 0 <= v < 8192 else None,
    ),
    _each(
        "/crio/runtime/default_sysctls",
        lambda v: None if _sysctl(v) is None else f"validating runtime config: {_sysctl(v)}",
    ),
    _each(
        "/crio/runtime/default_capabilities",
        lambda v: None if _capability(v) is None else f"validating runtime config: {_capability(v)}",
    ),
    _single(
        "/crio/runtime/infra_ctr_cpuset",
        lambda v: (
            None
            if cpuset_error(v) is None
            else f"validating runtime config: invalid infra_ctr_cpuset: {cpuset_error(v)}"
        ),
    ),
    lambda config: ((p, f"validating runtime config: {m}") for p, m in _workloads(config)),
    _checkpoint_level,
    _single(
        "/crio/image/signature_policy_dir",
        lambda v: _prefixed("validating image config: ", _absolute("signature policy")(v)),
    ),
    _single(
        "/crio/image/namespaced_auth_dir",
        lambda v: _prefixed("validating image config: ", _absolute("namespaced auth")(v)),
    ),
    _single(
        "/crio/image/pause_image",
        lambda v: (
            None
            if image_reference_error(v) is None
            else f'validating image config: invalid pause image "{v}": {image_reference_error(v)}'
        ),
    ),
    _single(
        "/crio/image/short_name_mode",
        lambda v: (
            None if v in ("enforcing", "disabled", "") else f'validating image config: invalid short name mode "{v}"'
        ),
    ),
    _single("/crio/network/cni_status_grace_period", _grace_period),
    _tls,
    _pod_metrics,
)


def _prefixed(prefix: str, message: Optional[str]) -> Optional[str]:
    return None if message is None else prefix + message


@crio_rule("CRO004", "invalid-value", Severity.ERROR, schema_level=True)
def invalid_value(value: Any, context: Context) -> Iterator[Problem]:
    """A value has the right type but cri-o's configuration validation rejects it.

    ## What it checks
    What cri-o's `Config.Validate` rejects while loading, on any node (the checks `crio config` runs too):
    `image_volumes` (mkdir, ignore, bind), `log_size_max` (negative, or 8192 and more),
    `min_injected_gomaxprocs` (not negative), absolute `additional_artifact_stores`, `default_ulimits`
    (`name=soft[:hard]`, a known limit, soft not above hard), `default_sysctls` (`key=value`, no spaces around
    `=`), `default_capabilities` (names without `CAP_`), `infra_ctr_cpuset` (a CPU list), each workload
    (`activation_annotation`, `allowed_annotations`, `resources`), `container_level_enabled`, absolute
    `signature_policy_dir` and `namespaced_auth_dir`, `pause_image` (an image reference), `short_name_mode`,
    a non-negative `cni_status_grace_period`, the stream server's TLS settings (`tls_min_version`,
    `tls_cipher_suites`, a cert and key when `stream_enable_tls` is set) and `included_pod_metrics`.
    Checks that depend on the node (time zones, `taskset` on the PATH, the kernel's capability list) are not
    made here.

    ## Why it matters
    cri-o stops with the message quoted in the finding (for example `validating runtime config: validating
    capabilities: "CAP_CAP_SYS_ADMIN": unknown capability`); no pod on the node starts until the file is fixed.

    ## Example
    `default_capabilities = ["CAP_SYS_ADMIN"]`: cri-o adds the `CAP_` prefix itself, so this names
    `CAP_CAP_SYS_ADMIN`. `log_size_max = 1024`: below the 8192-byte minimum.

    ## Fix
    Use a value the message allows: `default_capabilities = ["SYS_ADMIN"]`, `log_size_max = -1` (no limit) or at
    least `8192`.
    """
    current = view(value, context)
    config = current.effective() if current else None
    if current is None or config is None:
        return
    for check in VALUE_CHECKS:
        for pointer, message in check(config):
            yield current.problem(config.origin(pointer), f"cri-o refuses this configuration: {message}")


@crio_rule("CRO005", "unreadable-config-entry", Severity.ERROR, schema_level=True)
def unreadable_config_entry(value: Any, context: Context) -> Iterator[Problem]:
    """An entry cri-o reads as a configuration file cannot be read as one.

    ## What it checks
    Every entry under the drop-in directory, walked as cri-o walks it (Go's `filepath.Walk`: links are not
    followed into directories, each non-directory entry is read with `os.ReadFile`): a symbolic link to a
    directory, a link to nothing, a named pipe, a socket; a drop-in directory that cannot be listed; and a
    drop-in directory that is itself a symbolic link (the walk reads the link as one file).

    ## Why it matters
    cri-o reads every entry whatever its name and stops at the first failure: `update config from path: walk
    path: read /etc/crio/crio.conf.d/old: is a directory`. A named pipe is worse: reading it blocks, and cri-o
    hangs at start-up without a message.

    ## Example
    `/etc/crio/crio.conf.d/backup -> /root/crio-backup` (a link to a directory), or `/etc/crio/crio.conf.d`
    itself a link to a ConfigMap mount.

    ## Fix
    Remove the entry, or replace the link with the file (or directory) it points to. A drop-in directory kept
    elsewhere should be named with cri-o's `--config-dir`, not linked.
    """
    current = view(value, context)
    if current is None or current.collection is None:
        return
    for entry in current.collection.unreadable:
        yield Problem(
            "",
            f"cri-o refuses this configuration: {entry.message} ({entry.detail})",
            "remove it from the drop-in directory, or put a regular file there",
            entry.path,
        )


# ---------------------------------------------------------------------------------------------------------------
# CRO1xx: ignored, refused only at start, or not what was meant

_CONTAINERD_KEYS = frozenset(
    [
        "version",
        "root",
        "state",
        "plugins",
        "grpc",
        "ttrpc",
        "debug",
        "metrics",
        "cgroup",
        "timeouts",
        "proxy_plugins",
        "stream_processors",
        "imports",
        "disabled_plugins",
        "required_plugins",
        "oom_score",
        "temp",
        "plugin_dir",
    ]
)


def _homes(key: str, here: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The tables where a key of this name is read, other than here."""
    folded = key.casefold()
    return [
        path for path, table in all_tables() if path != here and any(name.casefold() == folded for name in table.fields)
    ]


def _table_fields(path: tuple[str, ...]) -> list[str]:
    for candidate, table in all_tables():
        if candidate == path:
            return list(table.fields)
    return []


def _all_fields() -> list[str]:
    return sorted({name for _, table in all_tables() for name in table.fields})


def _close(key: str, names: Sequence[str], cutoff: float) -> Optional[str]:
    folded = {name.casefold(): name for name in names}
    found = difflib.get_close_matches(key.casefold(), list(folded), n=1, cutoff=cutoff)
    return folded[found[0]] if found else None


def unknown_message(unknown: Unknown) -> tuple[str, str]:
    parts = split_pointer(unknown.origin.pointer)
    what = f"table [{go_key(parts)}]" if unknown.is_table else f"key {go_key(parts[-1:])}"
    where = f" in [{go_key(parts[:-1])}]" if len(parts) > 1 and not unknown.is_table else ""
    lead = f"cri-o {CRIO_VERSION} ignores {what}{where}, silently"
    removed_key = (*unknown.table, unknown.key)
    if removed_key in REMOVED_KEYS:
        return f"{lead}: {REMOVED_KEYS[removed_key]}", f"delete {unknown.key}"
    homes = _homes(unknown.key, unknown.table)
    here = table_header(unknown.table) if unknown.table else "the top level"
    if homes:
        listed = " and ".join(table_header(home) for home in homes)
        if unknown.is_table:
            moved = "[" + ".".join([*map(go_key_part, homes[0]), *map(go_key_part, parts[len(unknown.table) :])]) + "]"
            return f"{lead}: {unknown.key} is a table of {listed}, not of {here}", f"write [{go_key(parts)}] as {moved}"
        return f"{lead}: {unknown.key} is read in {listed}, not in {here}", (
            f"move {unknown.key} under {table_header(homes[0])}"
        )
    if not unknown.table:
        if unknown.key in _CONTAINERD_KEYS:
            return f"{lead}: it reads only the [crio] table, and this looks like containerd's configuration", (
                "move containerd settings to /etc/containerd/config.toml"
            )
        if _close(unknown.key, ["crio"], 0.6):
            return f"{lead}: it reads only the [crio] table", f"rename [{unknown.key}] to [crio]"
        return f"{lead}: it reads only the [crio] table", "delete it, or move its settings under [crio]"
    close = _close(unknown.key, _table_fields(unknown.table), 0.75)
    if close:
        return f"{lead}: did you mean {close}?", f"rename {unknown.key} to {close}"
    elsewhere = _close(unknown.key, _all_fields(), 0.8)
    if elsewhere:
        home = table_header(_homes(elsewhere, ())[0])
        return f"{lead}: did you mean {elsewhere}, which is read in {home}?", (
            f"rename {unknown.key} to {elsewhere} and move it under {home}"
        )
    return f"{lead}: {here} has no such key", f"delete {unknown.key}, or check its spelling"


@crio_rule("CRO101", "unknown-key", Severity.WARNING)
def unknown_key(value: Any, context: Context) -> Iterator[Problem]:
    """A table or key that cri-o does not read, and therefore ignores without a word.

    ## What it checks
    Every table and key of every file against the keys cri-o 1.37 decodes (its `Config` structs; names are
    matched as cri-o's decoder matches them, exactly or else ignoring case). An unknown one is reported with the
    likely intent: a misspelling of a key of the same table, a key that belongs to another table (`hooks_dir`
    under `[crio]` instead of `[crio.runtime]`), a key removed from cri-o, or a whole table outside `[crio]`.

    ## Why it matters
    cri-o discards the decoder's list of undecoded keys: a misspelt or misplaced setting is dropped without a
    log line, and cri-o runs with the default. This is how `privileged_without_host_devices = true` written as
    `privileged_without_host_device`, or `[crio.runtimes.nvidia]` instead of `[crio.runtime.runtimes.nvidia]`,
    leaves a GPU runtime unconfigured while the file looks right.

    ## Example
    ```toml
    [crio.runtime.runtimes.nvidia]
    runtime_path = "/usr/bin/nvidia-container-runtime"
    privileged_without_host_device = true
    ```

    ## Fix
    Rename or move the key as the message says; delete keys that belong to another program or an older cri-o.
    `crio config` prints the configuration cri-o really runs with.
    """
    current = view(value, context)
    if current is None:
        return
    for unknown in current.config.unknown:
        message, hint = unknown_message(unknown)
        yield current.problem(Origin(unknown.origin.path, unknown.at), message, hint)


def _normal(path: str) -> str:
    return posixpath.normpath(path) if path.startswith("/") else path


@crio_rule("CRO102", "hooks-dir-misses-hook", Severity.WARNING)
def hooks_dir_misses_hook(value: Any, context: Context) -> Iterator[Problem]:
    """hooks_dir leaves out the directory where nvidia-oci-hook installs its hook.

    ## What it checks
    That the effective `hooks_dir` contains `/usr/share/containers/oci/hooks.d`, where this project installs
    `nvidia-oci-hook.json`. cri-o's default `hooks_dir` is that directory alone.

    ## Why it matters
    cri-o reads hooks only from the directories listed in `hooks_dir`; a configuration that sets it to another
    list (often just `/etc/containers/oci/hooks.d`, which cri-o does not read by default, or an empty list)
    leaves the hook out of every container, without any message, and the devices it would have checked or fixed
    reach runc unchecked.

    ## Example
    `hooks_dir = ["/etc/containers/oci/hooks.d"]` in a drop-in.

    ## Fix
    Add the directory: `hooks_dir = ["/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d"]` (a
    later directory's file of the same name wins), then restart cri-o; or install the hook into a directory
    that is listed.
    """
    current = view(value, context)
    config = current.effective() if current else None
    if current is None or config is None:
        return
    pointer = "/crio/runtime/hooks_dir"
    if not config.is_set(pointer):
        return
    directories = strings_at(config, pointer)
    if PROJECT_HOOKS_DIR in {_normal(d) for d in directories}:
        return
    listed = quote_list(directories) if directories else "empty"
    yield current.problem(
        config.origin(pointer),
        f"hooks_dir is {listed}: cri-o does not read {PROJECT_HOOKS_DIR}, where {PROJECT_HOOK_FILE} is installed, "
        f"so the hook never runs in cri-o's containers (cri-o's default is {quote_list(HOOKS_DIR_DEFAULT)})",
        f"add {PROJECT_HOOKS_DIR} to hooks_dir: hooks_dir = {quote_list([PROJECT_HOOKS_DIR, *directories])}",
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


@crio_rule("CRO104", "cdi-spec-dir-missing", Severity.WARNING, needs_host=True)
def cdi_spec_dir_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A cdi_spec_dirs entry does not exist on the node, or is not a directory.

    ## What it checks
    Each directory the files set in `cdi_spec_dirs` (cri-o's default is `/etc/cdi` and `/var/run/cdi`) must exist
    on the node and be a directory; an empty `cdi_spec_dirs` is reported too.

    ## Why it matters
    cri-o resolves every CDI device a pod asks for (`nvidia.com/gpu=0`) from the specs in these directories
    only. A missing directory is accepted silently (the CDI library watches for it to appear), so a misspelt
    path shows up only as pods failing with `unresolvable CDI devices nvidia.com/gpu=0` while the spec sits in
    the directory that was meant.

    ## Example
    `cdi_spec_dirs = ["/etc/cdi", "/run/cdi.d"]` while `nvidia-ctk cdi generate` writes to `/var/run/cdi`.

    ## Fix
    List the directories the CDI specs are written to (`nvidia-ctk cdi list` shows what it finds), or create the
    directory if specs will be generated there later.
    """
    current = view(value, context)
    config = current.effective() if current else None
    host = context.host
    pointer = "/crio/runtime/cdi_spec_dirs"
    if current is None or config is None or host is None or not config.is_set(pointer):
        return
    directories = strings_at(config, pointer)
    if not directories:
        yield current.problem(
            config.origin(pointer),
            "cdi_spec_dirs is empty: cri-o can resolve no CDI device, and every pod that asks for one fails with "
            "unresolvable CDI devices",
            'list the spec directories: cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]',
        )
        return
    for index, directory in enumerate(directories):
        identity = host.identity(directory) if directory.startswith("/") else None
        if identity is not None and identity.type == "directory":
            continue
        state = "does not exist on the node" if identity is None else f"is {identity.describe()}, not a directory"
        yield current.problem(
            config.origin(pointer_join(pointer, index)),
            f"CDI spec directory {directory} {state}: cri-o accepts it silently, and CDI devices whose specs are "
            "meant to be there fail as unresolvable",
            "correct the path, or create the directory where the CDI specs will be written",
        )


@crio_rule("CRO105", "additional-device-not-on-host", Severity.ERROR, needs_host=True)
def additional_device_not_on_host(value: Any, context: Context) -> Iterator[Problem]:
    """An additional_devices entry's host path is not a device node on this node.

    ## What it checks
    The host path of each well-formed `additional_devices` entry: cri-o reads the device's type and numbers
    from it while loading the configuration (runc's `DeviceFromPath`), so it must exist and be a character
    device, a block device or a FIFO.

    ## Why it matters
    On a node where the path is missing, cri-o refuses its configuration and does not start (`/dev/nvidia0 is
    not a valid device: lstat /dev/nvidia0: no such file or directory`; a regular file or a directory gives
    `not a device node`). Configurations shared by a whole cluster hit this on the nodes that lack the device:
    GPU device nodes, for instance, appear only once the driver is loaded, so cri-o fails on a fresh GPU node
    and on every CPU node.

    ## Example
    `additional_devices = ["/dev/nvidia-uvm"]` on a node where the NVIDIA driver has not created the UVM node yet.

    ## Fix
    Remove GPU nodes from `additional_devices` (give GPUs through the device plugin or CDI), or set the entry
    only on nodes that have the device. cri-o does not follow a symbolic link here: name the device node itself.
    """
    current = view(value, context)
    config = current.effective() if current else None
    host = context.host
    if current is None or config is None or host is None:
        return
    pointer = "/crio/runtime/additional_devices"
    for index, entry in enumerate(strings_at(config, pointer)):
        parsed, error = parse_device(entry) if entry else (None, None)
        if parsed is None or error is not None:
            continue
        source = parsed[0]
        identity = host.link_identity(source) if source.startswith("/") else None
        if identity is not None and identity.type in ("c", "b", "p"):
            continue
        reason = f"lstat {source}: no such file or directory" if identity is None else "not a device node"
        yield current.problem(
            config.origin(pointer_join(pointer, index)),
            f"cri-o refuses this configuration on this node: {source} is not a valid device: {reason}",
            f'remove "{entry}" from additional_devices, or set it only on nodes where {source} exists',
        )


@crio_rule("CRO106", "invalid-allowed-device", Severity.WARNING)
def invalid_allowed_device(value: Any, context: Context) -> Iterator[Problem]:
    """An allowed_devices entry can never match a device a pod asks for.

    ## What it checks
    Each entry of the effective `allowed_devices`: it must be an absolute host path, written the way pods write
    it in the devices annotation (no `//`, `.` or trailing `/`, since cri-o compares the strings exactly), and
    must not use the `host:container:permissions` form of `additional_devices`.

    ## Why it matters
    `allowed_devices` lists the host devices a pod may request with the `io.kubernetes.cri-o.Devices` (or
    `devices.crio.io`) annotation; cri-o refuses any other with `device /dev/fuse is specified but is not in
    allowed_devices`. An entry that is not written exactly as the path a pod names allows nothing, and the
    pods that need it fail to be created.

    ## Example
    `allowed_devices = ["/dev/fuse:/dev/fuse:rwm", "/dev/net/tun/"]`.

    ## Fix
    Write plain absolute host paths: `allowed_devices = ["/dev/fuse", "/dev/net/tun"]`.
    """
    current = view(value, context)
    config = current.effective() if current else None
    pointer = "/crio/runtime/allowed_devices"
    if current is None or config is None or not config.is_set(pointer):
        return
    for index, entry in enumerate(strings_at(config, pointer)):
        problem = None
        if ":" in entry:
            problem = (
                f'"{entry}" uses the host:container:permissions form; allowed_devices holds host paths only, '
                "compared exactly with what a pod asks for",
                f'write "{entry.split(":", 1)[0]}"',
            )
        elif not entry.startswith("/"):
            problem = (f'"{entry}" is not an absolute path, so no device request can match it', "write the full path")
        elif posixpath.normpath(entry) != entry:
            problem = (
                f'"{entry}" is not written as a pod names the device (cri-o compares the strings exactly)',
                f'write "{posixpath.normpath(entry)}"',
            )
        if problem is not None:
            yield current.problem(config.origin(pointer_join(pointer, index)), problem[0], problem[1])


GPU_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm")


def _gpu_handlers(found: list[Handler], default: str) -> list[Handler]:
    def is_gpu(handler: Handler) -> bool:
        program = handler.table.get("runtime_path") or ""
        base = posixpath.basename(program) if isinstance(program, str) else ""
        return "nvidia" in handler.name.casefold() or base.startswith("nvidia")

    gpu = [h for h in found if is_gpu(h)]
    return gpu or [h for h in found if h.name == default]


@crio_rule("CRO107", "privileged-gets-stray-gpu-nodes", Severity.WARNING, needs_host=True)
def privileged_gets_stray_gpu_nodes(value: Any, context: Context) -> Iterator[Problem]:
    """Privileged GPU containers get the host's stray /dev/nvidia* nodes while the driver lives under another root.

    ## What it checks
    On a node whose NVIDIA driver is under a driver root other than `/` (a `--driver-root` candidate such as
    `/run/nvidia/driver` holding `dev/nvidiactl`) and whose own `/dev` also holds `/dev/nvidia*` nodes (created
    by NVML in a pod that mounted the host's `/dev`, seed 003), each GPU runtime handler (named `nvidia...` or
    running an `nvidia...` program; the default runtime when there is none) whose
    `privileged_without_host_devices` is not `true`.

    ## Why it matters
    For a privileged container cri-o adds every device node of the host's `/dev`, so these stray nodes reach
    every privileged GPU pod, all GPUs included, next to the devices it was allocated. The same stray nodes
    also trip cri-o's check on CRI devices: a privileged container given `/run/nvidia/driver/dev/nvidia0` as
    `/dev/nvidia0` is refused with `privileged container was configured with a device container path that
    already exists on the host`. `privileged_without_host_devices = true` on the GPU runtime stops the first
    (privileged pods get only what they were given); it does not lift the second, which applies to every
    privileged container: that needs the stray nodes gone, or GPUs given through CDI, which the check skips.

    ## Example
    `/run/nvidia/driver/dev/nvidiactl` and `/dev/nvidiactl` both exist, and `[crio.runtime.runtimes.nvidia]`
    does not set `privileged_without_host_devices`.

    ## Fix
    Set `privileged_without_host_devices = true` in the GPU runtime's table (not on the default runtime if
    other privileged pods need host devices); remove the stray `/dev/nvidia*` nodes once nothing uses them and
    stop what creates them (mount the host's `/dev` elsewhere than `/dev` in the pod that calls NVML); prefer CDI
    for GPU allocation (device plugin `DEVICE_LIST_STRATEGY=cdi-cri`).
    """
    current = view(value, context)
    config = current.effective() if current else None
    host = context.host
    if current is None or config is None or host is None:
        return
    answer = resolve_driver_root(host, context.driver_roots)
    stray = stray_device_nodes(host, answer)
    roots = [answer.dev_root() or "/"]
    if not stray:
        return
    found, default = handlers(config)
    for handler in _gpu_handlers(found, default):
        if handler.table.get("privileged_without_host_devices") is True:
            continue
        origin = config.origin(handler.key("privileged_without_host_devices")) or config.origin(handler.pointer)
        caution = (
            "; it is the default runtime, so every privileged pod (network and storage agents included) would lose "
            "host devices: give GPU pods their own runtime instead"
            if handler.name == default
            else ""
        )
        yield current.problem(
            origin,
            f'privileged containers on runtime "{handler.name}" get every device node of the host\'s /dev, including '
            f"{', '.join(stray)}, although the driver's nodes are under {roots[0]}/dev; with these on the host, cri-o "
            f'also refuses privileged containers given {roots[0]}/dev/nvidia* as CRI devices ("{COLLISION_ERROR}")',
            f"set privileged_without_host_devices = true in [crio.runtime.runtimes.{go_key([handler.name])}]{caution}; "
            "remove the stray host nodes and stop what creates them",
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


@crio_rule("CRO111", "case-variant-keys", Severity.WARNING)
def case_variant_keys(value: Any, context: Context) -> Iterator[Problem]:
    """Two keys of one table differ only in case, and cri-o reads both into the same setting.

    ## What it checks
    Keys of the same table that name the same cri-o setting once case is ignored (`hooks_dir` and `Hooks_Dir`).

    ## Why it matters
    cri-o's decoder matches keys to settings without regard to case, and walks a table's keys in Go's random map
    order: which of the two values cri-o runs with can change from one restart to the next.

    ## Example
    ```toml
    [crio.runtime]
    default_runtime = "nvidia"
    Default_Runtime = "crun"
    ```

    ## Fix
    Keep one of the keys, spelt in lower case as cri-o documents it.
    """
    current = view(value, context)
    if current is None:
        return
    for clash in current.config.case_clashes:
        yield current.problem(
            clash.origin,
            f"{clash.keys[1]} and {clash.keys[0]} (at {current.at(clash.other)}) both set {clash.field}; cri-o takes "
            "them in random order, so either value may win at each start",
            f"delete one of them and spell the other {clash.field}",
        )


_CONFIG_SUFFIXES = (".conf", ".toml")


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _is_setting(config: CrioConfig, pointer: str) -> bool:
    """A key holding a value (not a table, not an array element)."""
    parent = config.get(pointer[: pointer.rfind("/")], None)
    return isinstance(parent, dict) and not isinstance(config.get(pointer), dict)


@crio_rule("CRO112", "stray-dropin-file", Severity.WARNING)
def stray_dropin_file(value: Any, context: Context) -> Iterator[Problem]:
    """A file in crio.conf.d that looks like a leftover is read as a drop-in all the same.

    ## What it checks
    Files under the drop-in directory that are hidden, in a subdirectory, or not named `*.conf` or `*.toml`
    (editor and package-manager leftovers such as `99-nvidia.conf.bak`, `.99-nvidia.conf.swp`,
    `crio.conf.rpmnew`, `10-old.conf.disabled`), with the settings each one makes take effect.

    ## Why it matters
    Unlike most `.d` directories, cri-o reads every regular file under `crio.conf.d`, recursively, whatever its
    name, in lexical order, later files winning. A backup copy sorts right after the file it copies and so
    silently reinstates the old settings; a binary swap file stops cri-o with a TOML error.

    ## Example
    `99-nvidia.toml` sets `default_runtime = "nvidia"`; an old `99-nvidia.toml.bak` next to it sets
    `default_runtime = "runc"`, and cri-o runs with runc.

    ## Fix
    Move leftovers out of `crio.conf.d` (a disabled drop-in belongs outside it, not renamed inside it).
    """
    current = view(value, context)
    if current is None or current.collection is None:
        return
    collection = current.collection
    for path in collection.order:
        top = collection.found_under.get(path)
        if top is None:
            continue
        relative = posixpath.relpath(path, top) if path.startswith(top) else posixpath.basename(path)
        name = posixpath.basename(path)
        reasons = []
        if any(part.startswith(".") for part in relative.split("/")):
            reasons.append("hidden")
        if "/" in relative:
            reasons.append(f"in the subdirectory {posixpath.dirname(relative)}")
        if not name.endswith(_CONFIG_SUFFIXES):
            reasons.append("not named *.conf or *.toml")
        if not reasons:
            continue
        leaves = [p for p in current.config.set_by(path) if _is_setting(current.config, p)]
        if leaves:
            shown = ", ".join(key_at(p) for p in leaves[:3]) + (
                f" and {len(leaves) - 3} more" if len(leaves) > 3 else ""
            )
            effect = f"its settings take effect: {shown}"
        else:
            effect = "it sets nothing that takes effect today"
        yield Problem(
            "",
            f"{name} is {_and(reasons)}, but cri-o reads every file under {top} whatever its name: {effect}",
            f"move {path} out of {top}",
            path,
        )
