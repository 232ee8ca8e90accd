"""Values cri-o refuses while it loads its configuration, on any node.

Bytes that are not UTF-8 (CRO006), a TOML type the field cannot take (CRO001), and what `Config.Validate`
rejects (CRO004).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Callable, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.crio.go_values import go_key, valid_go_duration
from nvidia_oci_hook.kinds.crio.merge import CrioConfig
from nvidia_oci_hook.kinds.crio.toml_syntax import NOT_UTF8
from nvidia_oci_hook.rules.base import Context, register
from nvidia_oci_hook.rules.crio.config_view import KINDS, crio_rule, strings_at, view
from nvidia_oci_hook.rules.crio.known_names import (
    ALLOWED_ANNOTATIONS,
    CAPABILITIES,
    POD_METRICS,
    TLS_CIPHERS,
    TLS_VERSIONS,
    ULIMITS,
)

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
