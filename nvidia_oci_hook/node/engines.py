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
from nvidia_oci_hook.kinds.collection import NODE, Collection, Loader, Skipped, directory_kinds
from nvidia_oci_hook.node.engine_versions import EngineRelease, installed_engines

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


def crio_files(host: HostView) -> list[str]:
    """cri-o's configuration files in the order it reads them: crio.conf, then its drop-ins by name (later ones
    win)."""
    drop_ins = [name for name in sorted(host.list_dir(CRIO_DROPINS)) if not name.startswith(".")]
    return [CRIO_MAIN] + [posixpath.join(CRIO_DROPINS, name) for name in drop_ins]


def _directory_kind(member_kind: str) -> Any:
    for kind in directory_kinds():
        if kind.member_kind == member_kind:
            return kind
    return None


def discover_node(host: HostView, loader: Loader) -> Collection:
    """Every engine configuration, hooks directory and CDI spec directory under the host root."""
    node = Collection(NODE, [host.root])
    facts = NodeFacts()
    found, looked = installed_engines(host)
    facts.releases = {release.engine: release for release in found}
    node.looked.extend(looked)
    for release in found:
        node.looked.append((release.source, _release_note(release)))
    _read_crio(host, loader, node, facts)
    _read_containerd(host, loader, node, facts)
    _read_podman(host, loader, node, facts)
    _read_hooks(host, loader, node, facts)
    _read_cdi(host, loader, node, facts)
    for engine in facts.cdi_dirs:
        if engine not in facts.releases:
            node.looked.append(
                (
                    host.shown(ENGINE_CONFIGS[engine]),
                    f"{ENGINE_NAMES[engine]}, release not found: its CDI specs are judged with CDI library "
                    f"{NEWEST.release}",
                )
            )
    return node


def _missing(host: HostView, node: Collection, path: str, why: str) -> None:
    node.skipped.append(Skipped(host.shown(path), why))


def _read_crio(host: HostView, loader: Loader, node: Collection, facts: NodeFacts) -> None:
    if not host.exists(CRIO_MAIN) and not host.exists(CRIO_DROPINS):
        _missing(host, node, CRIO_MAIN, "not present: cri-o is not configured here")
        if "crio" in facts.releases:
            facts.cdi_dirs["crio"] = DEFAULT_CDI_SPEC_DIRS  # installed, on its defaults
        return
    from nvidia_oci_hook.kinds.crio.reading import effective_config, read_crio_config

    collection: Collection = read_crio_config(host.shown(CRIO_MAIN), host.shown(CRIO_DROPINS), loader)
    node.parts.append(collection)
    effective = effective_config(collection)
    runtime = dig(effective, "crio", "runtime")
    facts.hooks_dirs["cri-o"] = _strings(dig(runtime, "hooks_dir")) or CRIO_DEFAULT_HOOKS_DIRS
    facts.cdi_dirs["crio"] = _strings(dig(runtime, "cdi_spec_dirs")) or DEFAULT_CDI_SPEC_DIRS


def _read_containerd(host: HostView, loader: Loader, node: Collection, facts: NodeFacts) -> None:
    if not host.exists(CONTAINERD_CONFIG):
        _missing(host, node, CONTAINERD_CONFIG, "not present: containerd runs on its defaults, or is not here")
        release = facts.releases.get("containerd")
        # On its defaults, containerd reads CDI specs from 2.0 on (1.7 has enable_cdi off).
        if release is not None and (release.version is None or version_key(release.version) >= (2,)):
            facts.cdi_dirs["containerd"] = DEFAULT_CDI_SPEC_DIRS
        return
    import nvidia_oci_hook.kinds.containerd.config as containerd

    document = loader(host.shown(CONTAINERD_CONFIG), "containerd")
    node.documents.append(document)
    if _containerd_reads_cdi(containerd.ContainerdConfig(document.value), facts.releases.get("containerd")):
        facts.cdi_dirs["containerd"] = containerd.cdi_spec_dirs(document.value) or DEFAULT_CDI_SPEC_DIRS


def _containerd_reads_cdi(config: Any, release: Optional[EngineRelease]) -> bool:
    """enable_cdi as set, else containerd's default: off in 1.7, on from 2.0 (1.6 reads no CDI at all). Where
    the release is not known, a version 3 configuration is 2.x's own; an older one is taken to be read."""
    if release is not None and release.version and version_key(release.version) < (1, 7):
        return False
    enabled = (config.cri or {}).get("enable_cdi")
    if isinstance(enabled, bool):
        return enabled
    if release is not None and release.version:
        return version_key(release.version) >= (2,)
    return True


def _read_podman(host: HostView, loader: Loader, node: Collection, facts: NodeFacts) -> None:
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


def _read_hooks(host: HostView, loader: Loader, node: Collection, facts: NodeFacts) -> None:
    from nvidia_oci_hook.kinds.hooksd.directories import read_hooks_dirs

    # Engines that read the same directories share one reading; cri-o's stricter rules apply if it is one of them.
    readers: dict[tuple[str, ...], list[str]] = {}
    for engine, directories in facts.hooks_dirs.items():
        readers.setdefault(directories, []).append(engine)
    for directories, engines in readers.items():
        present = [d for d in directories if host.exists(d)]
        for directory in directories:
            if directory not in present:
                _missing(host, node, directory, f"not present ({' and '.join(engines)} hooks directory)")
        if present:
            node.parts.append(read_hooks_dirs([host.shown(d) for d in present], loader, crio_reads="cri-o" in engines))


def _read_cdi(host: HostView, loader: Loader, node: Collection, facts: NodeFacts) -> None:
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
                _missing(host, node, directory, f"not present ({names} CDI spec directory)")
        if present:
            collection = read_spec_dirs([host.shown(d) for d in present], loader)
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
