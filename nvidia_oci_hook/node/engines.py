"""`lint --node`: find the documents that decide what a GPU container gets on this node, where each engine
really reads them, and gather them into one collection for the per-document and cross-document rules."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.formats.tomltext import parse_toml
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.cdi.releases import (
    ENGINE_NAMES,
    NEWEST,
    Judge,
    UnknownRelease,
    engine_library,
    version_key,
)
from nvidia_oci_hook.kinds.collection import NODE, Collection, FileLoader, Skipped, bound, directory_kinds
from nvidia_oci_hook.kinds.loading import load_document, read_toml
from nvidia_oci_hook.node.engine_versions import EngineRelease, installed_engines
from nvidia_oci_hook.node.locations import ByHand, ConfigInEffect, Locations, find_locations, view_of

CRIO_MAIN = "/etc/crio/crio.conf"
CRIO_DROPINS = "/etc/crio/crio.conf.d"
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CONTAINERS_CONF = "/etc/containers/containers.conf"
# cri-o, and podman 4 (containers/common 0.50, measured), read only this hooks directory unless hooks_dir
# says otherwise.
CRIO_DEFAULT_HOOKS_DIRS = ("/usr/share/containers/oci/hooks.d",)
PODMAN_DEFAULT_HOOKS_DIRS = ("/usr/share/containers/oci/hooks.d",)
DEFAULT_CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
# Where an engine found only by its configuration was found.
ENGINE_CONFIGS = {"crio": CRIO_MAIN, "containerd": CONTAINERD_CONFIG, "podman": CONTAINERS_CONF}


@dataclass
class NodeFacts:
    """What the engines' configurations say about where to look next."""

    hooks_dirs: dict[str, tuple[str, ...]] = field(default_factory=dict)  # engine -> its hooks dirs
    cdi_dirs: dict[str, tuple[str, ...]] = field(default_factory=dict)  # engine key -> its CDI spec dirs
    releases: dict[str, EngineRelease] = field(default_factory=dict)  # engine key -> the release found
    # engine key -> why it resolves no CDI device at all (containerd 1.6, enable_cdi off)
    cdi_off: dict[str, str] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)  # engine key -> its configuration file (node path)


@dataclass
class NodeCollection(Collection):
    """The node's documents, and where each engine's configuration was found."""

    locations: Locations = field(default_factory=Locations)
    facts: NodeFacts = field(default_factory=NodeFacts)


def _strings(value: Any) -> Optional[tuple[str, ...]]:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return None


def dig(value: Any, *keys: str) -> Any:
    """value[key][key]...; None where a level is missing or not a table."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def crio_config_files(host: HostView, by_hand: Optional[ByHand] = None) -> tuple[HostView, list[str]]:
    """cri-o's configuration files in effect, in the order it reads them: crio.conf, then its drop-ins by name
    (later ones win); with where they are read: the node, or this machine for the files by_hand names."""
    chosen = find_locations(host, by_hand, versions=False).crio
    main, directory = (chosen.path, chosen.directory or CRIO_DROPINS) if chosen else (CRIO_MAIN, CRIO_DROPINS)
    view = view_of(host, chosen) if chosen else host
    drop_ins = [name for name in sorted(view.list_dir(directory)) if not name.startswith(".")]
    return view, [main] + [posixpath.join(directory, name) for name in drop_ins]


def crio_files(host: HostView) -> list[str]:
    """crio_config_files' node paths."""
    return crio_config_files(host)[1]


def containerd_in_effect(host: HostView, by_hand: Optional[ByHand] = None) -> Optional[dict[str, Any]]:
    """containerd's configuration in effect (named by hand, a running daemon's, the distribution's, the default
    file), its drop-ins merged; None where there is none."""
    from nvidia_oci_hook.io import ReadError
    from nvidia_oci_hook.kinds.containerd.reading import effective_config, read_containerd_config

    chosen = find_locations(host, by_hand, versions=False).containerd
    path = chosen.path if chosen else CONTAINERD_CONFIG
    view = view_of(host, chosen) if chosen else host
    if not view.exists(path):
        return None
    try:
        collection = read_containerd_config(path, bound(load_document, view), view)
    except ReadError:
        return None  # gone since it was seen: a daemon that is stopping took its configuration with it
    return effective_config(collection, _series(None, collection.root_version))


def _handler_configs(host: HostView, by_hand: Optional[ByHand]) -> tuple[Any, Optional[dict[str, Any]]]:
    """cri-o's merged configuration (None where it has no file) and containerd's in effect (None likewise)."""
    from nvidia_oci_hook.kinds.crio.merge import merge

    view, paths = crio_config_files(host, by_hand)
    files = [(path, read_toml(view, path)) for path in paths]
    present = [(path, value, True) for path, value in files if value is not None]
    return (merge(present) if present else None), containerd_in_effect(host, by_hand)


def runtime_handlers(host: HostView, by_hand: Optional[ByHand] = None) -> dict[str, dict[str, str]]:
    """engine -> {runtime handler: its program} as each engine's configuration in effect defines them, for the
    engines configured on the node: cri-o's files over its built-in crun, containerd's runtimes over its
    built-in runc. The name a RuntimeClass's handler must match."""
    from nvidia_oci_hook.kinds.containerd.config import ContainerdConfig

    found: dict[str, dict[str, str]] = {}
    crio, containerd = _handler_configs(host, by_hand)
    if crio is not None:
        handlers = {}
        for name, table in sorted(crio.runtimes().items()):
            path = table.get("runtime_path")
            handlers[name] = path if isinstance(path, str) and path else name
        found["crio"] = handlers
    if containerd is not None:
        handlers = {"runc": "io.containerd.runc.v2"}
        for runtime in ContainerdConfig(containerd).runtimes():
            binary = (runtime.options or {}).get("BinaryName")
            shim = runtime.type or "io.containerd.runc.v2"
            handlers[runtime.name] = binary if isinstance(binary, str) and binary else shim
        found["containerd"] = dict(sorted(handlers.items()))
    return found


def default_handlers(host: HostView, by_hand: Optional[ByHand] = None) -> dict[str, str]:
    """engine -> the handler a pod without a RuntimeClass runs on: cri-o's `default_runtime` (crun unless set),
    containerd's `default_runtime_name` (runc unless set)."""
    from nvidia_oci_hook.kinds.containerd.config import ContainerdConfig

    found: dict[str, str] = {}
    crio, containerd = _handler_configs(host, by_hand)
    if crio is not None:
        name = crio.get("/crio/runtime/default_runtime")
        found["crio"] = name if isinstance(name, str) and name else "crun"
    if containerd is not None:
        name = dig(ContainerdConfig(containerd).cri_containerd(), "default_runtime_name")
        found["containerd"] = name if isinstance(name, str) and name else "runc"
    return found


def handler_list(handlers: dict[str, str]) -> str:
    return ", ".join(f"{name} ({program})" for name, program in handlers.items())


def _directory_kind(member_kind: str) -> Any:
    for kind in directory_kinds():
        if kind.member_kind == member_kind:
            return kind
    return None


def discover_node(
    host: HostView, load: FileLoader, by_hand: Optional[ByHand] = None, release: Optional[tuple[str, str]] = None
) -> NodeCollection:
    """Every engine configuration, hooks directory and CDI spec directory under the host root, each named as the
    node names it; configuration files named by hand are read where they are; release, (engine, version),
    overrides the one found."""
    locations = find_locations(host, by_hand or ByHand())
    facts = NodeFacts()
    node = NodeCollection(NODE, [host.root], locations=locations, facts=facts)
    facts.releases, looked = engine_releases(host, locations)
    if release is not None:
        facts.releases[release[0]] = EngineRelease(release[0], release[1], "named by --engine")
    node.looked.extend(looked)
    node.looked.extend(locations.looked)
    for found_release in facts.releases.values():
        node.looked.append((found_release.source, _release_note(found_release)))
    _read_crio(host, load, node, facts, locations.crio)
    _read_containerd(host, load, node, facts, locations.containerd)
    _read_podman(host, node, facts)
    _read_hooks(host, load, node, facts)
    _read_cdi(host, load, node, facts)
    _read_toolkit(host, load, node, by_hand)
    for engine in facts.cdi_dirs:
        if engine not in facts.releases:
            node.looked.append(
                (
                    ENGINE_CONFIGS[engine],
                    f"{ENGINE_NAMES[engine]}, release not found: its CDI specs are judged with CDI library "
                    f"{NEWEST.release}",
                )
            )
    return node


def _missing(node: Collection, path: str, why: str) -> None:
    node.skipped.append(Skipped(path, why))


def engine_releases(
    host: HostView, locations: Optional[Locations] = None
) -> tuple[dict[str, EngineRelease], list[tuple[str, str]]]:
    """Each engine's release: a running daemon's binary decides, whatever a package database says (of several,
    the one that reads the configuration in effect, else the first, whose configuration is judged); else the
    installed binary's --version, else the package databases. And (place, what) for the places looked at."""
    found, looked = installed_engines(host)
    releases = {release.engine: release for release in found}
    locations = locations or find_locations(host)
    chosen = {
        in_effect.engine: in_effect.daemon
        for in_effect in (locations.containerd, locations.crio)
        if in_effect is not None and in_effect.daemon is not None
    }
    for daemon in locations.daemons:
        if daemon.engine not in chosen:
            chosen[daemon.engine] = daemon
    for daemon in chosen.values():
        if daemon.version is not None:
            releases[daemon.engine] = EngineRelease(daemon.engine, daemon.version, f"/proc/{daemon.pid}/exe")
    return releases, looked


def cri_engine_of(host: HostView) -> Optional[str]:
    """The one CRI engine of the node, which runs its CRI container configs: the daemon running, else the one
    installed; None where the node has both, or neither."""
    locations = find_locations(host, versions=False)
    running = {daemon.engine for daemon in locations.daemons} & {"crio", "containerd"}
    if len(running) == 1:
        return running.pop()
    if running:
        return None
    installed = {release.engine for release in installed_engines(host)[0]} & {"crio", "containerd"}
    return installed.pop() if len(installed) == 1 else None


def _in_effect(node: Collection, chosen: ConfigInEffect) -> None:
    if chosen.by_hand or chosen.daemon is not None or chosen.distribution is not None:
        node.looked.append((chosen.path, f"in effect for {ENGINE_NAMES[chosen.engine]}: {chosen.source}"))


def _read_crio(
    host: HostView, load: FileLoader, node: Collection, facts: NodeFacts, chosen: Optional[ConfigInEffect]
) -> None:
    chosen = chosen or ConfigInEffect("crio", CRIO_MAIN, "cri-o's default", CRIO_DROPINS)
    view = view_of(host, chosen)
    directory = chosen.directory or CRIO_DROPINS
    if not view.exists(chosen.path) and not view.exists(directory):
        node.skipped.append(Skipped(chosen.path, "not present: cri-o is not configured here"))
        if "crio" in facts.releases:
            facts.cdi_dirs["crio"] = DEFAULT_CDI_SPEC_DIRS  # installed, on its defaults
        return
    from nvidia_oci_hook.kinds.crio.reading import effective_config, read_crio_config

    _in_effect(node, chosen)
    facts.configs["crio"] = chosen.path
    collection: Collection = read_crio_config(chosen.path, directory, bound(load, view), view)
    node.parts.append(collection)
    effective = effective_config(collection)
    runtime = dig(effective, "crio", "runtime")
    facts.hooks_dirs["cri-o"] = _strings(dig(runtime, "hooks_dir")) or CRIO_DEFAULT_HOOKS_DIRS
    facts.cdi_dirs["crio"] = _strings(dig(runtime, "cdi_spec_dirs")) or DEFAULT_CDI_SPEC_DIRS


def _read_containerd(
    host: HostView, load: FileLoader, node: Collection, facts: NodeFacts, chosen: Optional[ConfigInEffect]
) -> None:
    chosen = chosen or ConfigInEffect("containerd", CONTAINERD_CONFIG, "containerd's default")
    view = view_of(host, chosen)
    release = facts.releases.get("containerd")
    if not view.exists(chosen.path):
        node.skipped.append(Skipped(chosen.path, "not present: containerd runs on its defaults, or is not here"))
        if release is not None:
            off = _containerd_cdi_off({}, release, f"{release.label} on its defaults")
            if off is None:
                facts.cdi_dirs["containerd"] = DEFAULT_CDI_SPEC_DIRS
            else:
                facts.cdi_off["containerd"] = off
        return
    import nvidia_oci_hook.kinds.containerd.config as containerd
    from nvidia_oci_hook.kinds.containerd.reading import effective_config, read_containerd_config

    _in_effect(node, chosen)
    facts.configs["containerd"] = chosen.path
    collection = read_containerd_config(chosen.path, bound(load, view), view)
    if release is not None and release.version:
        collection.containerd_release = release.version
    node.parts.append(collection)
    value = effective_config(collection, _series(release, collection.root_version))
    off = _containerd_cdi_off(containerd.ContainerdConfig(value).cri or {}, release, chosen.path)
    if off is None:
        facts.cdi_dirs["containerd"] = containerd.cdi_spec_dirs(value) or DEFAULT_CDI_SPEC_DIRS
    else:
        facts.cdi_off["containerd"] = off


def _series(release: Optional[EngineRelease], root_version: Optional[int]) -> str:
    """The containerd series whose merging of drop-ins applies: the release's, else what the root file's version
    says (3 is 2.x's own)."""
    if release is not None and release.version:
        return ".".join(release.version.split(".")[:2])
    return "2.1" if (root_version or 1) >= 3 else "1.7"


def _containerd_cdi_off(cri: Any, release: Optional[EngineRelease], where: str) -> Optional[str]:
    """Why containerd resolves no CDI device, or None where it does: enable_cdi as set, else its default, off
    in 1.7 and on from 2.0; 1.6 reads no CDI at all. Where the release is not known, CDI is taken to be read
    unless enable_cdi says otherwise."""
    version = release.version if release is not None else None
    if version and version_key(version) < (1, 7):
        return f"containerd {version} does not resolve CDI devices at all (CDI came with 1.7; it ignores enable_cdi)"
    enabled = cri.get("enable_cdi") if isinstance(cri, dict) else None
    if enabled is False:
        return f"enable_cdi = false in {where}"
    if enabled is None and version and version_key(version) < (2,):
        return f"containerd {version} has enable_cdi off unless it is set, and {where} does not set it"
    return None


def _read_podman(host: HostView, node: Collection, facts: NodeFacts) -> None:
    configured: Optional[tuple[str, ...]] = None
    cdi_dirs: Optional[tuple[str, ...]] = None
    text = host.read_text(CONTAINERS_CONF)
    if text is not None:
        parsed = parse_toml(text.encode())
        configured = _strings(dig(parsed.value, "engine", "hooks_dir"))
        cdi_dirs = _strings(dig(parsed.value, "engine", "cdi_spec_dirs"))
    if host.exists("/usr/bin/podman") or text is not None or "podman" in facts.releases:
        facts.hooks_dirs["podman"] = configured or PODMAN_DEFAULT_HOOKS_DIRS
        facts.cdi_dirs["podman"] = cdi_dirs or DEFAULT_CDI_SPEC_DIRS


def _read_hooks(host: HostView, load: FileLoader, node: Collection, facts: NodeFacts) -> None:
    from nvidia_oci_hook.kinds.hooksd.directories import read_hooks_dirs

    # Engines that read the same directories share one reading; cri-o's stricter rules apply if it is one of them.
    readers: dict[tuple[str, ...], list[str]] = {}
    for engine, directories in facts.hooks_dirs.items():
        readers.setdefault(directories, []).append(engine)
    for directories, engines in readers.items():
        present = [d for d in directories if host.exists(d)]
        for directory in directories:
            if directory not in present:
                _missing(node, directory, f"not present ({' and '.join(engines)} hooks directory)")
        if present:
            node.parts.append(read_hooks_dirs(present, bound(load, host), crio_reads="cri-o" in engines, files=host))


def _read_cdi(host: HostView, load: FileLoader, node: Collection, facts: NodeFacts) -> None:
    from nvidia_oci_hook.kinds.cdi.directories import read_spec_dirs

    # Engines that read the same directories share one reading, judged with each one's library.
    readers: dict[tuple[str, ...], list[str]] = {}
    for engine, directories in facts.cdi_dirs.items():
        readers.setdefault(directories, []).append(engine)
    if not readers:
        readers[DEFAULT_CDI_SPEC_DIRS] = []
    for directories, engines in readers.items():
        present = [d for d in directories if host.exists(d)]
        names = " and ".join(ENGINE_NAMES[engine] for engine in engines) or "default"
        for directory in directories:
            if directory not in present:
                _missing(node, directory, f"not present ({names} CDI spec directory)")
        if present:
            collection = read_spec_dirs(present, bound(load, host), host)
            collection.cdi_judges = _judges(engines, facts)
            node.parts.append(collection)


def _release_note(release: EngineRelease) -> str:
    if release.version is None:
        return f"{release.name}, release not found: its CDI specs are judged with CDI library {NEWEST.release}"
    try:
        return f"{release.label} (CDI library {engine_library(release.engine, release.version).release})"
    except UnknownRelease as exc:
        return str(exc)


def _judges(engines: list[str], facts: NodeFacts) -> tuple[Judge, ...]:
    """One judge per library among the engines that read a set of directories; an engine whose release was not
    found is judged with the newest library, and one whose library is not modelled is not judged."""
    judges: dict[str, Judge] = {}
    for engine in engines:
        release = facts.releases.get(engine)
        label = release.label if release and release.version else f"{ENGINE_NAMES[engine]} (release not found)"
        if release is None or release.version is None:
            library = NEWEST
        else:
            try:
                library = engine_library(engine, release.version)
            except UnknownRelease:
                continue  # said in the list of places looked at
        before = judges.get(library.release)
        judges[library.release] = Judge(library, (*before.engines, label) if before else (label,))
    return tuple(judges.values())


def looked_at_in(node: Collection) -> list[tuple[str, str]]:
    """(path, what) for every file read and every standard location found absent, for the report."""
    entries: list[tuple[str, str]] = []

    def walk(collection: Collection) -> None:
        entries.extend(collection.looked)
        entries.extend((document.path, document.kind) for document in collection.documents)
        entries.extend((item.path, item.reason) for item in collection.skipped)
        for part in collection.parts:
            walk(part)

    walk(node)
    return sorted(entries)


def engine_cdi_dirs(host: HostView) -> dict[str, tuple[str, ...]]:
    """engine -> the CDI spec directories its configuration in effect reads, for the engines configured here."""
    from nvidia_oci_hook.kinds.containerd.config import cdi_spec_dirs

    crio, containerd = _handler_configs(host, None)
    found: dict[str, tuple[str, ...]] = {}
    if crio is not None:
        found["cri-o"] = _strings(crio.get("/crio/runtime/cdi_spec_dirs")) or DEFAULT_CDI_SPEC_DIRS
    if containerd is not None:
        found["containerd"] = cdi_spec_dirs(containerd) or DEFAULT_CDI_SPEC_DIRS
    return found


def _read_toolkit(host: HostView, load: FileLoader, node: Collection, by_hand: Optional[ByHand]) -> None:
    from nvidia_oci_hook.kinds.toolkit import TOOLKIT
    from nvidia_oci_hook.node.toolkit import read_toolkit

    reading = read_toolkit(host, bound(load, host), runtime_handlers(host, by_hand))
    node.looked.extend(reading.looked)
    node.skipped.extend(Skipped(path, why) for path, why in reading.missing)
    if reading.documents:
        release = reading.release.version if reading.release else None
        node.parts.append(Collection(TOOLKIT + "-configs", [], reading.documents, toolkit_release=release))
