"""CDI requests the container engine left unresolved, resolved and applied as the CDI library does.

Requests come from annotations (keys under the configured prefixes, values comma-separated qualified names)
and from qualified names in NVIDIA_VISIBLE_DEVICES. Specs are read from the spec directories the way the
library's cache reads them: only `*.json` and `*.yaml` files directly in each directory, a later directory
overriding an earlier one, and a name two specs of one directory both define dropped altogether.

Each spec file is read and checked in cdi_spec; the devices the requests resolve to are applied in cdi_apply.
"""

from __future__ import annotations

from nvidia_oci_hook import io, leanos
from nvidia_oci_hook.engine.cdi_apply import _Injection
from nvidia_oci_hook.engine.cdi_spec import Spec, SpecError, _load, parse_spec
from nvidia_oci_hook.engine.records import Edit, EngineFinding
from nvidia_oci_hook.engine.requests import VISIBLE_DEVICES, Request, requested_names
from nvidia_oci_hook.kinds.cdinames import cache_settle, cdi_name_error
from nvidia_oci_hook.kinds.oci import normalize_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nvidia_oci_hook.config import Settings
    from nvidia_oci_hook.host import HostView

SPEC_EXTENSIONS = (".json", ".yaml")


class SpecCache:
    """The devices the library's cache resolves, by qualified name, and the files it could not use."""

    def __init__(self) -> None:
        self.devices: dict[str, tuple[Spec, str]] = {}
        self.unusable: list[tuple[str, str, list[str]]] = []  # (path, reason, the names it declares)
        self.conflicts: dict[str, list[str]] = {}  # name -> the spec files of one directory that define it


def spec_paths(host: HostView, directory: str) -> list[str]:
    """Spec files the library reads in directory: lexical order, no subdirectories, .json and .yaml only."""
    result = []
    for name in host.list_dir(directory):
        path = leanos.join(directory, name)
        if name.endswith(SPEC_EXTENSIONS) and host.is_file(path):
            result.append(path)
    return result


def read_cache(host: HostView, directories: tuple[str, ...]) -> SpecCache:
    cache = SpecCache()
    found: list[tuple[str, int, tuple[Spec, str]]] = []
    for priority, directory in enumerate(directories):
        for path in spec_paths(host, directory):
            value: Any = None
            try:
                value = _load(host.read_bytes(path), path)
                spec = parse_spec(path, priority, value)
            except (SpecError, io.ReadError, io.TooLarge) as exc:
                from nvidia_oci_hook.engine.cdi_reasons import declared_names

                cache.unusable.append((path, str(exc), declared_names(value)))
                continue
            found.extend((f"{spec.kind}={name}", priority, (spec, name)) for name in spec.devices)
    cache.devices, conflicts = cache_settle(found)
    cache.conflicts = {name: [spec.path for spec, _ in fought] for name, fought in conflicts.items()}
    return cache


def requests(config: dict[str, Any], settings: Settings) -> tuple[list[Request], list[EngineFinding]]:
    """The CDI devices the config asks for, in order, each once; and the malformed requests."""
    found: list[Request] = []
    problems: list[EngineFinding] = []
    for request in requested_names(config, settings):
        reason = cdi_name_error(request.name)
        if reason is None:
            found.append(request)
        elif request.source == VISIBLE_DEVICES:
            problems.append(_invalid_request("REC002", request.pointer, request.source, request.name, reason))
        else:
            problems.append(_invalid_request("GPU005", request.pointer, request.source, request.name, reason))
    unique: dict[str, Request] = {}
    for request in found:
        unique.setdefault(request.name, request)
    return list(unique.values()), problems


def _invalid_request(code: str, pointer: str, source: str, name: str, reason: str) -> EngineFinding:
    # A malformed annotation is GPU005, the lint rule for annotations; REC002 is the same for the environment.
    return EngineFinding(
        code,
        "error",
        pointer,
        f"{source}: {name!r}: {reason}; the CDI library refuses the whole request",
        "write each device as vendor/class=name, separated by commas only (nvidia-ctk cdi list shows the names)",
        gpu_unusable=True,
    )


def unresolved_reason(
    name: str, cache: SpecCache, directories: tuple[str, ...], host: HostView
) -> tuple[str, str, str]:
    """(reason code, what the specs show, the fix) for a name the cache does not resolve."""
    from nvidia_oci_hook.engine import cdi_reasons

    if name in cache.conflicts:
        files = cache.conflicts[name]
        return (
            cdi_reasons.CONFLICT,
            f"{' and '.join(files)} both define it in one directory, so the CDI cache drops it",
            f"keep one of {', '.join(files)}: delete or move the other out of the directory",
        )
    for path, reason, names in cache.unusable:
        if name in names:
            return (
                cdi_reasons.NOT_LOADED,
                f"the spec that defines it, {path}, is not loaded: {reason}",
                f"fix {path} (nvidia-oci-hook lint {path}) or regenerate it",
            )
    scanned = {host.canonical(directory) or directory for directory in directories}
    elsewhere = tuple(
        directory
        for directory in cdi_reasons.WELL_KNOWN_DIRS
        if directory not in directories and (host.canonical(directory) or directory) not in scanned
    )
    if elsewhere:
        other = read_cache(host, elsewhere)
        if name in other.devices:
            spec = other.devices[name][0]
            return (
                cdi_reasons.NOT_SCANNED,
                f"{spec.path} defines it, but {leanos.dirname(spec.path)} is not among the spec directories "
                f"read ({', '.join(directories)})",
                f"move {spec.path} into {directories[-1]}, or add {leanos.dirname(spec.path)} to cdi.spec_dirs",
            )
    detail = cdi_reasons.not_defined_detail(name, cache.devices, cache.conflicts)
    if cache.unusable:
        path, reason, _ = cache.unusable[0]
        more = f" (and {len(cache.unusable) - 1} more)" if len(cache.unusable) > 1 else ""
        detail += f"; unusable spec {path}: {reason}{more}"
    return (
        cdi_reasons.NOT_DEFINED,
        f"no spec in {', '.join(directories)} defines it; {detail}",
        (
            "request a device the node has (nvidia-ctk cdi list), or regenerate the spec "
            "(nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml)"
        ),
    )


def _unresolved(request: Request, cache: SpecCache, directories: tuple[str, ...], host: HostView) -> EngineFinding:
    reason, detail, fix = unresolved_reason(request.name, cache, directories, host)
    return EngineFinding(
        "REC001",
        "error",
        request.pointer,
        f"CDI device {request.name} ({request.source}) is unresolvable ({reason}): {detail}",
        fix,
        gpu_unusable=True,
    )


def inject(
    config: dict[str, Any], host: HostView, settings: Settings
) -> tuple[list[Edit], list[EngineFinding], set[str]]:
    """Apply every CDI request to config (a working copy) in place.

    Returns the edits, the findings, and the device paths the requested devices define (their entries win a
    conflict under the "cdi" policy).
    """
    wanted, findings = requests(config, settings)
    if not wanted or findings:
        # The library parses every request before it resolves any: one malformed name, and nothing is injected.
        return [], findings, set()
    cache = read_cache(host, settings.cdi_spec_dirs)
    edits: list[Edit] = []
    cdi_paths: set[str] = set()
    applied_specs: set[str] = set()
    resolved: list[tuple[Request, Spec, str]] = []
    for request in wanted:
        entry = cache.devices.get(request.name)
        if entry is None:
            findings.append(_unresolved(request, cache, settings.cdi_spec_dirs, host))
            continue
        resolved.append((request, entry[0], entry[1]))
    if len(resolved) < len(wanted):
        # The library injects nothing when one name is unresolvable.
        return edits, findings, cdi_paths
    for request, spec, name in resolved:
        injection = _Injection(config, host, settings.driver_roots, request)
        if spec.path not in applied_specs:
            applied_specs.add(spec.path)
            injection.apply(spec.edits)
        injection.apply(spec.devices[name])
        edits.extend(injection.edits)
        findings.extend(injection.findings)
        for block in (spec.edits, spec.devices[name]):
            cdi_paths.update(normalize_path(node["path"]) for node in block.get("deviceNodes", []))
    return edits, findings, cdi_paths
