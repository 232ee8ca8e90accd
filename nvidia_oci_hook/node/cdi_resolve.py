"""`cdi resolve`: whether each CDI device name resolves for each engine on the node, from which spec and with
which edits, and when it does not, the one reason (engine/cdi_reasons.py), the file, the engine's own error
text and the fix.

Each engine is judged as it reads specs: its CDI spec directories (from the configuration in effect), its CDI
library release (from the release found), whether CDI is on at all. The cache rules are the library's:
`*.json` and `*.yaml` directly in each directory, a later directory overriding an earlier one, two specs of
one directory conflicting.
"""

from __future__ import annotations

import posixpath
import stat
from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.engine import cdi_reasons
from nvidia_oci_hook.engine.cdi_reasons import declared_names, unresolvable_text
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.cdi.directories import Definition, SpecCollection, definitions, read_spec_dirs
from nvidia_oci_hook.kinds.cdi.releases import ENGINE_NAMES, NEWEST, Library, UnknownRelease, engine_library
from nvidia_oci_hook.kinds.cdi.validation import analyse
from nvidia_oci_hook.kinds.cdinames import cache_settle, cdi_name_error
from nvidia_oci_hook.kinds.collection import FileLoader, bound
from nvidia_oci_hook.node.engines import DEFAULT_CDI_SPEC_DIRS, NodeFacts, discover_node
from nvidia_oci_hook.node.locations import ByHand

# Where each engine is told to read other directories (the fix for a spec in a directory it does not read).
SPEC_DIRS_SETTING = {
    "crio": "cdi_spec_dirs in [crio.runtime] of cri-o's configuration",
    "containerd": "cdi_spec_dirs in the CRI plugin table of containerd's configuration",
    "podman": "cdi_spec_dirs in [engine] of containers.conf (podman 5 and later)",
}
_EDIT_LISTS = ("deviceNodes", "mounts", "env", "hooks", "additionalGids", "netDevices")


class BadName(ValueError):
    """A name that is neither a qualified CDI device name nor vendor/class=*."""


def check_name(name: str) -> None:
    problem = cdi_name_error(name[:-1] + "x" if name.endswith("=*") else name)
    if problem is not None:
        raise BadName(problem.replace(repr(name[:-1] + "x"), repr(name)))


@dataclass
class Resolution:
    name: str
    resolved: bool
    spec: Optional[str] = None  # the file it resolves from
    edits: dict[str, Any] = field(default_factory=dict)  # "spec" and "device": the containerEdits applied
    reason: Optional[str] = None
    message: str = ""
    engine_error: Optional[str] = None
    fix: Optional[str] = None
    files: list[str] = field(default_factory=list)
    defined: list[str] = field(default_factory=list)  # for not-defined: the names that are, nearest first

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"name": self.name, "resolved": self.resolved}
        if self.resolved:
            found.update(spec=self.spec, edits=self.edits)
        else:
            found.update(
                reason=self.reason,
                message=self.message,
                engine_error=self.engine_error,
                fix=self.fix,
                files=self.files,
                defined=self.defined,
            )
        return found


@dataclass
class EngineResolution:
    engine: str
    label: str  # "containerd 1.7.24", or "containerd (release not found)"
    library: Optional[str]
    config: Optional[str]
    spec_dirs: list[str]
    cdi_off: Optional[str]
    names: list[Resolution] = field(default_factory=list)

    @property
    def resolved(self) -> bool:
        return all(resolution.resolved for resolution in self.names)

    def as_json(self) -> dict[str, Any]:
        return {
            "engine": ENGINE_NAMES[self.engine],
            "label": self.label,
            "cdi_library": self.library,
            "config": self.config,
            "spec_dirs": self.spec_dirs,
            "cdi_enabled": self.cdi_off is None,
            "cdi_off": self.cdi_off,
            "names": [resolution.as_json() for resolution in self.names],
        }


class NoEngine(Exception):
    """No engine found to judge with, and none named."""


@dataclass(frozen=True)
class _Loaded:
    """One spec file as one library release reads it."""

    path: str
    declared: list[str]
    error: Optional[str]  # the library's error text; None when it loads
    newest_error: Optional[str]  # the same for the newest release
    hint: Optional[str]
    version: Optional[str]


def _matches(pattern: str, name: str) -> bool:
    if pattern.endswith("=*"):
        return name.partition("=")[0] == pattern[:-2]
    return name == pattern


def _read(collection: SpecCollection, library: Library) -> list[_Loaded]:
    loaded = []
    for document in collection.documents:
        value = document.value if document.parsed else None
        if value is None:
            problem = document.load_problems[0].message if document.load_problems else "does not parse"
            loaded.append(_Loaded(document.path, [], problem, problem, None, None))
            continue
        analysis = analyse(value, library)
        newest = analysis if library is NEWEST else analyse(value, NEWEST)
        first = analysis.problems[0] if analysis.problems else None
        version = value.get("cdiVersion") if isinstance(value, dict) else None
        loaded.append(
            _Loaded(
                document.path,
                declared_names(value),
                analysis.library_error,
                newest.library_error,
                first.hint if first else None,
                version if isinstance(version, str) else None,
            )
        )
    return loaded


def _edits(document_value: Any, device_name: str) -> dict[str, Any]:
    """The containerEdits a resolved device brings: the spec's own, then the device's."""
    found: dict[str, Any] = {}
    if not isinstance(document_value, dict):
        return found
    spec_edits = document_value.get("containerEdits")
    if isinstance(spec_edits, dict) and any(spec_edits.get(key) for key in _EDIT_LISTS):
        found["spec"] = {key: spec_edits[key] for key in _EDIT_LISTS if spec_edits.get(key)}
    for device in document_value.get("devices") or []:
        if isinstance(device, dict) and device.get("name") == device_name:
            edits = device.get("containerEdits")
            if isinstance(edits, dict):
                found["device"] = {key: edits[key] for key in _EDIT_LISTS if edits.get(key)}
    return found


def describe_edits(edits: dict[str, Any]) -> list[str]:
    """One line per kind of edit, for the text report."""
    lines = []
    for scope in ("device", "spec"):
        block = edits.get(scope) or {}
        parts = []
        nodes = [n.get("path") for n in block.get("deviceNodes", []) if isinstance(n, dict)]
        if nodes:
            parts.append("device nodes " + ", ".join(str(n) for n in nodes))
        mounts = [m for m in block.get("mounts", []) if isinstance(m, dict)]
        if mounts:
            parts.append(f"{len(mounts)} mount{'s' if len(mounts) != 1 else ''}")
        if block.get("env"):
            parts.append("env " + ", ".join(str(e) for e in block["env"]))
        hooks = [f"{h.get('hookName')} {h.get('path')}" for h in block.get("hooks", []) if isinstance(h, dict)]
        if hooks:
            parts.append("hooks " + ", ".join(hooks))
        if parts:
            lines.append(("device: " if scope == "device" else "spec-wide: ") + "; ".join(parts))
    return lines


class _EngineView:
    """One engine's reading of its directories, and of the directories it does not read."""

    def __init__(
        self,
        host: HostView,
        load: FileLoader,
        engine: str,
        library: Library,
        directories: tuple[str, ...],
        others: tuple[str, ...],
    ) -> None:
        self.host = host
        self.engine = engine
        self.library = library
        self.directories = directories
        collection = read_spec_dirs(list(directories), bound(load, host), host)
        self.values = {document.path: document.value for document in collection.documents}
        self.unreadable = [item.path for item in collection.skipped if "cannot be read" in item.reason]
        found = definitions(collection, library)
        self.winners, self.conflicts = cache_settle((d.name, d.priority, d) for d in found)
        self.loaded = _read(collection, library)
        scanned = {host.canonical(d) or d for d in directories}
        elsewhere = [d for d in others if (host.canonical(d) or d) not in scanned and host.exists(d)]
        # The library reads no subdirectory: a spec moved into one (or unpacked with its folder) is not read.
        elsewhere += [
            posixpath.join(d, name)
            for d in directories
            for name in host.list_dir(d)
            if (info := host.stat(posixpath.join(d, name))) is not None and stat.S_ISDIR(info.st_mode)
        ]
        self.elsewhere: list[Definition] = []
        if elsewhere:
            other = read_spec_dirs(elsewhere, bound(load, host), host)
            self.elsewhere = definitions(other, NEWEST)
            self.values.update({document.path: document.value for document in other.documents})

    def resolve(self, pattern: str, label: str) -> list[Resolution]:
        hits = sorted(name for name in self.winners if _matches(pattern, name))
        if hits:
            return [self._resolved(name) for name in hits]
        return [self._unresolved(pattern, label)]

    def _resolved(self, name: str) -> Resolution:
        definition = self.winners[name]
        device = name.partition("=")[2]
        return Resolution(name, True, definition.path, _edits(self.values.get(definition.path), device))

    def _unresolved(self, pattern: str, label: str) -> Resolution:
        error = unresolvable_text([pattern])
        conflicting = sorted(name for name in self.conflicts if _matches(pattern, name))
        if conflicting:
            files = sorted({d.path for d in self.conflicts[conflicting[0]]})
            return Resolution(
                pattern,
                False,
                reason=cdi_reasons.CONFLICT,
                message=f"{' and '.join(files)} both define {conflicting[0]} in one directory: the CDI cache "
                "records a conflicting device and drops it from every directory",
                engine_error=error,
                fix=f"keep one of {', '.join(files)}: delete the other or move it out of the directory "
                "(a backup name ending in .bak is not read)",
                files=files,
            )
        for loaded in self.loaded:
            if loaded.error is None or not any(_matches(pattern, name) for name in loaded.declared):
                continue
            if loaded.newest_error is None:
                needs = loaded.hint or "the spec's content needs a newer library"
                return Resolution(
                    pattern,
                    False,
                    reason=cdi_reasons.LIBRARY_TOO_OLD,
                    message=f"{loaded.path} defines it, but CDI library v{self.library.release}, which {label} "
                    f"vendors, refuses the spec (cdiVersion {loaded.version}): {loaded.error}; v{NEWEST.release} "
                    "loads it",
                    engine_error=f"{error} (and at the spec's load, logged once at WARN: {loaded.error})",
                    fix=f"{needs} (nvidia-ctk cdi generate writes the lowest version the content needs), or "
                    f"upgrade {ENGINE_NAMES[self.engine]}",
                    files=[loaded.path],
                )
            return Resolution(
                pattern,
                False,
                reason=cdi_reasons.NOT_LOADED,
                message=f"{loaded.path} defines it, but the CDI library refuses the spec: {loaded.error}",
                engine_error=f"{error} (and at the spec's load, logged once at WARN: {loaded.error})",
                fix=f"fix {loaded.path} as the error says (nvidia-oci-hook lint {loaded.path} shows each problem "
                "with its fix), or regenerate it",
                files=[loaded.path],
            )
        outside = [d for d in self.elsewhere if _matches(pattern, d.name)]
        if outside:
            path = outside[-1].path
            directory = posixpath.dirname(path)
            parent = posixpath.dirname(directory)
            if parent in self.directories:
                why = f"{directory} is a subdirectory of {parent}, and the CDI library reads no subdirectory"
                fix = f"move {path} up into {parent}"
            else:
                why = f"{ENGINE_NAMES[self.engine]} reads specs only from {', '.join(self.directories)}"
                own = self.directories[-1] if self.directories else "/var/run/cdi"
                fix = f"move {path} into {own}, or add {directory} to {SPEC_DIRS_SETTING[self.engine]}"
            return Resolution(
                pattern,
                False,
                reason=cdi_reasons.NOT_SCANNED,
                message=f"{path} defines it, but {why}",
                engine_error=error,
                fix=fix,
                files=[path],
            )
        defined = sorted(self.winners)
        nearest = cdi_reasons.nearest(pattern if not pattern.endswith("=*") else pattern[:-1], defined)
        detail = cdi_reasons.not_defined_detail(
            pattern if not pattern.endswith("=*") else pattern[:-1], defined, self.conflicts
        )
        if pattern.endswith("=*"):
            detail = detail.replace("the request names the GPU by other, ", "")
        unreadable = f"; {', '.join(self.unreadable)} could not be read" if self.unreadable else ""
        return Resolution(
            pattern,
            False,
            reason=cdi_reasons.NOT_DEFINED,
            message=f"no spec in {', '.join(self.directories)} defines it; {detail}{unreadable}",
            engine_error=error,
            fix=cdi_reasons.REASONS[cdi_reasons.NOT_DEFINED][1],
            defined=nearest,
        )


def _engines_of(facts: NodeFacts) -> list[str]:
    found = set(facts.releases) | set(facts.cdi_dirs) | set(facts.cdi_off) | set(facts.configs)
    return [engine for engine in ("containerd", "crio", "podman") if engine in found]


def resolve(
    host: HostView,
    load: FileLoader,
    names: list[str],
    engine: Optional[str] = None,
    release: Optional[str] = None,
    by_hand: Optional[ByHand] = None,
) -> list[EngineResolution]:
    """Each name for each engine found (or the one named). Raises NoEngine when there is none, UnknownRelease
    for a release no model covers."""
    node = discover_node(host, load, by_hand, (engine, release) if engine and release else None)
    facts = node.facts
    engines = [engine] if engine else _engines_of(facts)
    if not engines:
        raise NoEngine("no containerd, cri-o or podman found on the node; name one with --engine")
    results = []
    for key in engines:
        found = facts.releases.get(key)
        version = release or (found.version if found else None)
        label = _label(key, version)
        directories = facts.cdi_dirs.get(key, DEFAULT_CDI_SPEC_DIRS)
        off = facts.cdi_off.get(key)
        if off is not None:
            # No library reads anything here (containerd 1.6 vendors none).
            result = EngineResolution(key, label, None, facts.configs.get(key), [], off)
            result.names = [_off(name, key, off, facts.configs.get(key)) for name in names]
            results.append(result)
            continue
        library = engine_library(key, version) if version else NEWEST
        result = EngineResolution(key, label, library.release, facts.configs.get(key), list(directories), None)
        view = _view(host, load, facts, key, library, directories)
        for name in names:
            result.names.extend(view.resolve(name, label))
        results.append(result)
    return results


def _label(engine: str, version: Optional[str]) -> str:
    return f"{ENGINE_NAMES[engine]} {version}" if version else f"{ENGINE_NAMES[engine]} (release not found)"


def _view(
    host: HostView, load: FileLoader, facts: NodeFacts, engine: str, library: Library, directories: tuple[str, ...]
) -> _EngineView:
    others = tuple(
        dict.fromkeys([*cdi_reasons.WELL_KNOWN_DIRS, *(d for other in facts.cdi_dirs.values() for d in other)])
    )
    return _EngineView(host, load, engine, library, directories, tuple(d for d in others if d not in directories))


def declared_unresolvable(
    host: HostView, load: FileLoader, by_hand: Optional[ByHand] = None
) -> dict[str, list[Resolution]]:
    """For each engine found (by its name: containerd, cri-o, podman), the CDI device names declared in the spec
    files it reads that it cannot resolve (a same-directory conflict dropped them, or its CDI library refuses the
    spec that declares them), each with its reason. An engine with CDI off reads no spec: it has none. A release
    no model covers is judged with the newest library, as lint --node judges it."""
    facts = discover_node(host, load, by_hand).facts
    found: dict[str, list[Resolution]] = {}
    for key in _engines_of(facts):
        if key in facts.cdi_off:
            found[ENGINE_NAMES[key]] = []
            continue
        release = facts.releases.get(key)
        version = release.version if release else None
        try:
            library = engine_library(key, version) if version else NEWEST
        except UnknownRelease:
            library = NEWEST
        view = _view(host, load, facts, key, library, facts.cdi_dirs.get(key, DEFAULT_CDI_SPEC_DIRS))
        declared = {name for loaded in view.loaded for name in loaded.declared}
        found[ENGINE_NAMES[key]] = [
            view.resolve(name, _label(key, version))[0] for name in sorted(declared - set(view.winners))
        ]
    return found


def _off(name: str, engine: str, why: str, config: Optional[str]) -> Resolution:
    if "does not resolve CDI devices at all" in why:
        fix = (
            "upgrade containerd to 1.7 or later and set enable_cdi = true, or let nvidia-oci-hook's runtime "
            "wrapper resolve the requests (nvidia-oci-hook configure --runtime containerd)"
        )
    else:
        where = f" in {config}" if config else ""
        fix = (
            f'set enable_cdi = true{where} (version 2: under [plugins."io.containerd.grpc.v1.cri"]; version 3: '
            'under [plugins."io.containerd.cri.v1.runtime"]), then restart containerd'
        )
    return Resolution(
        name,
        False,
        reason=cdi_reasons.CDI_OFF,
        message=f"CDI is off in {ENGINE_NAMES[engine]}: {why}",
        engine_error="none: the request is ignored and the container starts without the device",
        fix=fix,
        files=[config] if config else [],
    )


def render_text(results: list[EngineResolution]) -> str:
    lines = []
    for result in results:
        library = f" (CDI library v{result.library})" if result.cdi_off is None else ""
        where = f"; spec dirs {', '.join(result.spec_dirs)}" if result.spec_dirs else ""
        config = f"; config {result.config}" if result.config else ""
        lines.append(f"{result.label}{library}{config}{where}")
        for resolution in result.names:
            if resolution.resolved:
                lines.append(f"  {resolution.name}: resolves from {resolution.spec}")
                lines.extend(f"      {line}" for line in describe_edits(resolution.edits))
                continue
            lines.append(f"  {resolution.name}: unresolvable ({resolution.reason}): {resolution.message}")
            if resolution.engine_error:
                lines.append(f"      engine error: {resolution.engine_error}")
            lines.append(f"      fix: {resolution.fix}")
    unresolved = sum(not r.resolved for result in results for r in result.names)
    total = sum(len(result.names) for result in results)
    lines.append(
        f"{total - unresolved} of {total} resolve"
        + (f"; {unresolved} unresolvable" if unresolved else "")
        + f" ({len(results)} engine{'s' if len(results) != 1 else ''})"
    )
    return "\n".join(lines) + "\n"


def known_release(engine: str, version: str) -> str:
    """The release as given, if a model covers it; raises UnknownRelease."""
    engine_library(engine, version)
    return version


__all__ = [
    "BadName",
    "NoEngine",
    "UnknownRelease",
    "check_name",
    "declared_unresolvable",
    "known_release",
    "render_text",
    "resolve",
]
