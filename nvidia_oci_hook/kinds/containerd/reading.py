"""The root config.toml and every file its `imports` name, read and merged the way containerd does.

Followed: `LoadConfig` in services/server/config/config.go (containerd 1.7) and cmd/containerd/server/config/config.go
(2.x), and measured with `containerd config dump` on 1.6.20, 1.7.24 and 2.1.9.

- Order: breadth first. The root, then the files its `imports` name in order, then their own imports; a path read
  once is not read again (so circular imports end).
- An entry is cleaned and, when relative, joined to the directory of the file that names it; an entry holding a
  `*` is then a Go `filepath.Glob` (lexical order, `*` and `?` never cross a `/`, hidden files match); an entry
  without a `*` is a path, even one holding `?` or `[`. (containerd 1.6 globs a relative pattern against its working
  directory instead.)
- Versions: 1.x keeps the last non-zero `version` it read, and reads every file at that version; 2.x first
  migrates a file of version 0 or 1 to the version read so far, then also keeps the last non-zero version, and
  migrates the CRI sections of a version 2 result into version 3's plugins.
- Merging: 1.x replaces a whole `plugins` section by the later file's; 2.x merges plugin tables key by key, a
  later leaf (a `false`, an empty array) replacing the earlier one. At the top level both keep the earlier value
  where the later one is Go's zero value (`0`, `""`, `false`) and append arrays.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.host import LOCAL, HostView
from nvidia_oci_hook.kinds.collection import (
    Collection,
    DirectoryKind,
    Loader,
    Skipped,
    register_directory_kind,
    register_follower,
)
from nvidia_oci_hook.kinds.containerd.kind import CONTAINERD
from nvidia_oci_hook.kinds.containerd.pathmatch import _go_pattern, go_path_match
from nvidia_oci_hook.kinds.containerd.versions import CRI_RUNTIME, CRI_V2, V1X
from nvidia_oci_hook.kinds.document import Document

# The collection kind: a root file and its drop-ins, which the drop-in rules check together.
CONTAINERD_CONFIG = "containerd-config"


class DropIn(dict):  # type: ignore[type-arg]
    """A drop-in's value, as the per-file rules see it: a file without a version is read at the root's."""

    def __init__(self, value: Mapping[str, Any], root: str, root_version: Optional[int]) -> None:
        super().__init__(value)
        self.root = root
        self.declared_version: Any = value.get("version")
        self.root_version = root_version

    @property
    def inherits_version(self) -> bool:
        return self.declared_version in (None, 0) and self.root_version is not None


def declared_version(value: Any) -> Optional[int]:
    """A file's own `version`, None when it sets none (or 0, which containerd takes for unset)."""
    raw = value.get("version") if isinstance(value, dict) else None
    if isinstance(raw, int) and not isinstance(raw, bool) and raw != 0:
        return raw
    return None


@dataclass
class ContainerdCollection(Collection):
    """config.toml and its drop-ins: each file in containerd's reading order, and what each one imported."""

    root: Optional[str] = None
    order: list[str] = field(default_factory=list)
    # For each drop-in: the file whose imports named it, and the index of the entry.
    imported_by: dict[str, tuple[str, int]] = field(default_factory=dict)
    # Import entries containerd cannot read (missing files, directories, bad patterns): (file, index, why).
    unreadable: list[tuple[str, int, str]] = field(default_factory=list)

    def value_of(self, path: str) -> Any:
        document = self.document(path)
        return document.value if document is not None and document.parsed else None

    def dropins(self) -> list[Document]:
        return [d for d in self.documents if d.path != self.root]

    @property
    def root_version(self) -> Optional[int]:
        return declared_version(self.value_of(self.root)) if self.root else None


_META = re.compile(r"[*?\[\\]")


def go_glob(pattern: str, files: HostView = LOCAL) -> tuple[list[str], Optional[str]]:
    """filepath.Glob: (matches in Go's order, an error such as "syntax error in pattern"), in files (the node's
    under its host root)."""
    if any(_go_pattern(part) is None for part in pattern.split("/")):
        return [], "syntax error in pattern"
    directory, name = posixpath.split(pattern)
    if not _META.search(pattern):
        return ([pattern] if files.lexists(pattern) else []), None
    if not _META.search(directory):
        return _glob_in(directory or ".", name, directory, files), None
    if directory != "/":
        directory = directory.rstrip("/")
    parents, error = go_glob(directory, files)
    out: list[str] = []
    for parent in parents:
        if files.is_dir(parent):
            out.extend(_glob_in(parent, name, parent, files))
    return out, error


def _glob_in(directory: str, name: str, prefix: str, files: HostView) -> list[str]:
    try:
        names = sorted(files.listdir(directory), key=os.fsencode)
    except (OSError, ValueError):
        return []
    return [posixpath.join(prefix, entry) for entry in names if go_path_match(name, entry)]


def _resolve(parent: str, entry: str, files: HostView) -> tuple[list[str], Optional[str]]:
    """resolveImports for one entry of the file at `parent`: an absolute entry is a path of the node the file
    is on (files), a relative one is relative to the file."""
    path = posixpath.normpath(entry) if entry else "."
    if not path.startswith("/"):
        path = posixpath.normpath(posixpath.join(posixpath.dirname(parent), path))
    if "*" in path:
        return go_glob(path, files)
    return [path], None


def read_containerd_config(path: str, loader: Loader, files: HostView = LOCAL) -> ContainerdCollection:
    """The root file at `path` and every file its imports name, as containerd reads them.

    files is where `path` and the imports are (the node's, under its host root), and loader reads through it.
    Each file is a document of kind containerd; a drop-in's value is a DropIn (a file without a version is read
    at the root's).
    """
    return collect(loader(path, CONTAINERD), loader, files)


def collect(root: Document, loader: Loader, files: HostView = LOCAL) -> ContainerdCollection:
    """The collection for a root document already loaded (lint of one file)."""
    collection = ContainerdCollection(
        CONTAINERD_CONFIG, [posixpath.dirname(root.path) or "."], root=root.path, order=[root.path]
    )
    collection.documents.append(root)
    root_version = declared_version(root.value) if root.parsed else None
    pending: list[tuple[str, Document]] = [(root.path, root)]
    seen = {root.path}
    while pending:
        parent, document = pending.pop(0)
        imports = document.value.get("imports") if document.parsed and isinstance(document.value, dict) else None
        if not isinstance(imports, list):
            continue
        for index, entry in enumerate(imports):
            if not isinstance(entry, str):
                continue  # a wrong type is CTD001's
            paths, error = _resolve(parent, entry, files)
            if error:
                collection.unreadable.append((parent, index, f"{entry}: {error}"))
            for found in paths:
                if found in seen:
                    continue
                seen.add(found)
                if not files.is_file(found):
                    why = "is a directory" if files.is_dir(found) else "no such file or directory"
                    collection.unreadable.append((parent, index, f"{found}: {why}"))
                    collection.skipped.append(Skipped(found, f"named by {parent}, {why}: containerd cannot read it"))
                    continue
                dropin = loader(found, CONTAINERD)
                dropin.kind = CONTAINERD
                if dropin.parsed and isinstance(dropin.value, dict):
                    dropin.value = DropIn(dropin.value, root.path, root_version)
                collection.documents.append(dropin)
                collection.order.append(found)
                collection.imported_by[found] = (parent, index)
                pending.append((found, dropin))
    return collection


# ---------------------------------------------------------------------------------------------------------------
# The merged configuration


def _is_zero(value: Any) -> bool:
    """Go's zero value, which mergo does not let override an earlier one."""
    return value is False or value == "" or (type(value) in (int, float) and value == 0)


def _merge_top(into: dict[str, Any], value: Mapping[str, Any], deep_plugins: bool) -> None:
    for key, item in value.items():
        if key == "plugins" and isinstance(item, dict):
            plugins = into.setdefault("plugins", {})
            if not isinstance(plugins, dict):
                plugins = into["plugins"] = {}
            for name, section in item.items():
                if deep_plugins and isinstance(section, dict) and isinstance(plugins.get(name), dict):
                    _merge_deep(plugins[name], section)
                else:
                    plugins[name] = _copy(section)
        elif isinstance(item, list):
            earlier = into.get(key)
            if isinstance(earlier, list):
                into[key] = earlier + [x for x in item if not (deep_plugins and x in earlier)]
            else:
                into[key] = list(item)
        elif isinstance(item, dict) and isinstance(into.get(key), dict):
            for sub, subitem in item.items():
                if not _is_zero(subitem) or sub not in into[key]:
                    into[key][sub] = _copy(subitem)
        elif not _is_zero(item) or key not in into:
            into[key] = _copy(item)


def _merge_deep(into: dict[str, Any], value: Mapping[str, Any]) -> None:
    for key, item in value.items():
        if isinstance(item, dict) and isinstance(into.get(key), dict):
            _merge_deep(into[key], item)
        else:
            into[key] = _copy(item)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


_V1_NAMES = {"cri": CRI_V2}
# What containerd 2.x's CRI runtime plugin does not take over from io.containerd.grpc.v1.cri (image and
# streaming settings move to other plugins).
_NOT_MIGRATED = frozenset(
    {
        "sandbox_image",
        "registry",
        "image_decryption",
        "max_concurrent_downloads",
        "image_pull_progress_timeout",
        "image_pull_with_sync_fs",
        "stats_collect_period",
        "disable_tcp_service",
        "stream_server_address",
        "stream_server_port",
        "stream_idle_timeout",
        "enable_tls_streaming",
        "x509_key_pair_streaming",
    }
)


def _migrate_cri(merged: dict[str, Any]) -> None:
    """The CRI runtime plugin's migration of a version 2 result (keys already in version 3's plugin win)."""
    plugins = merged.get("plugins")
    if not isinstance(plugins, dict) or not isinstance(plugins.get(CRI_V2), dict):
        return
    source = plugins[CRI_V2]
    target = plugins.get(CRI_RUNTIME)
    if not isinstance(target, dict):
        target = plugins[CRI_RUNTIME] = {}
    for key, item in source.items():
        if key in ("cni", "containerd") and isinstance(item, dict):
            inner = target.setdefault(key, {})
            if isinstance(inner, dict):
                for sub, subitem in item.items():
                    inner.setdefault(sub, _copy(subitem))
        elif key not in _NOT_MIGRATED:
            target.setdefault(key, _copy(item))


def effective_config(collection: Collection, series: str = "2.1") -> dict[str, Any]:
    """The merged configuration as containerd `series` ("1.7", "2.1") reads it, before its defaults are filled in.

    ContainerdConfig(effective_config(...)) then answers which runtimes, enable_cdi and cdi_spec_dirs are in
    effect. For 2.x the result is always a version 3 (or 4) configuration, its CRI settings migrated as 2.x
    migrates them; a file that does not parse contributes nothing.
    """
    files = []
    if isinstance(collection, ContainerdCollection):
        files = [collection.value_of(path) for path in collection.order]
    else:
        files = [d.value for d in collection.documents if d.parsed and d.kind == CONTAINERD]
    modern = series not in V1X
    merged: dict[str, Any] = {}
    # 2.x starts from its default configuration, of version 3; 1.x from none (read as version 1).
    version: Optional[int] = 3 if modern else None
    for value in files:
        if not isinstance(value, dict):
            continue
        own = declared_version(value)
        if modern and (own or 1) == 1:
            # MigrateConfigTo the version read so far: short plugin names become URIs, the version that one.
            plugins = value.get("plugins")
            if isinstance(plugins, dict):
                value = {**value, "plugins": {_V1_NAMES.get(k, k): v for k, v in plugins.items()}}
            own = None
        _merge_top(merged, {k: v for k, v in value.items() if k != "version"}, deep_plugins=modern)
        version = own or version
    if modern and version is not None and version < 3:
        _migrate_cri(merged)
        version = 3
    merged["version"] = version or 1
    return merged


# ---------------------------------------------------------------------------------------------------------------
# `lint /etc/containerd`: the directory holding config.toml


def _claims(path: str) -> bool:
    return os.path.basename(os.path.normpath(path)) == "containerd" and os.path.isfile(
        os.path.join(path, "config.toml")
    )


def _read(directories: Sequence[str], loader: Loader) -> Collection:
    collections = [read_containerd_config(os.path.join(d, "config.toml"), loader) for d in directories]
    first = collections[0]
    for other in collections[1:]:
        first.parts.append(other)
    return first


register_directory_kind(
    DirectoryKind(
        CONTAINERD_CONFIG,
        CONTAINERD,
        "containerd configuration directory (config.toml and the files it imports)",
        _claims,
        _read,
        order=35,
    )
)


def _follow(document: Document, loader: Loader) -> Optional[Collection]:
    imports = document.value.get("imports") if isinstance(document.value, dict) else None
    if not isinstance(imports, list) or not imports:
        return None
    return collect(document, loader)


register_follower(CONTAINERD, _follow)
