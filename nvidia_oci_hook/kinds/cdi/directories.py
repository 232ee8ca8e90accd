"""Spec directories as the library's cache reads them (pkg/cdi/spec-dirs.go, cache.go): the files its scan reads
and the ones it passes over, each file's priority, and the devices the cache resolves; the cdi-dirs directory
kind."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

from nvidia_oci_hook.host import LOCAL, HostView
from nvidia_oci_hook.io import ReadError
from nvidia_oci_hook.kinds.cdi.codes import CDI, CDI_DIRS, TEXT
from nvidia_oci_hook.kinds.cdi.goyaml import refine_document
from nvidia_oci_hook.kinds.cdi.names import parse_qualifier
from nvidia_oci_hook.kinds.cdi.releases import NEWEST, Library
from nvidia_oci_hook.kinds.cdi.specs_go import GoStruct
from nvidia_oci_hook.kinds.cdi.validation import analyse
from nvidia_oci_hook.kinds.cdinames import cache_winners
from nvidia_oci_hook.kinds.collection import Collection, DirectoryKind, Loader, Skipped, register_directory_kind

# ---------------------------------------------------------------------------------------------------------------
# Spec directories (pkg/cdi/spec-dirs.go, cache.go)

# The engines' default spec directories, lowest priority first (pkg/cdi/spec-dirs.go DefaultSpecDirs).
DEFAULT_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")

SPEC_EXTENSIONS = (".json", ".yaml")
# Names an operator may take for a spec the library reads; the library skips them.
_LOOKALIKE = re.compile(r"\.(ya?ml|json)$", re.IGNORECASE)
_SNIFF_BYTES = 1 << 16


def _mentions_cdi_version(path: str, files: HostView) -> bool:
    head = files.read_text(path, _SNIFF_BYTES)
    return head is not None and "cdiversion" in head.lower()


def claims_directory(path: str, files: HostView = LOCAL) -> bool:
    """Whether path is a directory holding files that look like CDI specs (a cdiVersion key)."""
    try:
        names = files.listdir(path)
    except (OSError, ValueError):
        return False
    return any(
        _LOOKALIKE.search(name) and _mentions_cdi_version(posixpath.join(path, name), files)
        for name in sorted(names)[:256]
    )


@dataclass(frozen=True)
class SpecDirectory:
    path: str
    priority: int
    # Why the library reads nothing in it, or None.
    unread: Optional[str] = None


def spec_files(directory: str, files: HostView = LOCAL) -> tuple[list[str], list[Skipped], Optional[str]]:
    """The files the library's scan reads in directory (lexical order), near-misses it skips, and why it reads
    nothing at all (None if it reads the directory).

    filepath.Walk does not follow a symbolic link given as the root, skips subdirectories, and takes only
    names ending in .json or .yaml.
    """
    try:
        if files.is_link(directory) and not directory.endswith("/"):
            return [], [], "is a symbolic link, which the library's directory walk does not follow"
        if not files.is_dir(directory):
            return [], [], None if not files.exists(directory) else "is not a directory"
        names = sorted(files.listdir(directory))
    except OSError as exc:
        return [], [], f"cannot be read ({exc.strerror})"
    found: list[str] = []
    skipped: list[Skipped] = []
    for name in names:
        path = posixpath.join(directory, name)
        if files.is_dir(path) and not files.is_link(path):
            inside = _lookalikes_below(path, files)
            if inside:
                listed = ", ".join(inside)
                skipped.append(
                    Skipped(
                        path,
                        f"is a subdirectory holding CDI specs ({listed}), and the library does not descend into "
                        "subdirectories",
                    )
                )
            continue
        extension = name[name.rfind(".") :] if "." in name else ""  # filepath.Ext: ".json" is all extension
        if extension in SPEC_EXTENSIONS:
            found.append(path)
        elif _LOOKALIKE.search(name) and _mentions_cdi_version(path, files):
            why = f"ends in {extension}, and the library reads only names ending exactly in .json or .yaml"
            skipped.append(Skipped(path, why))
    return found, skipped, None


def _lookalikes_below(directory: str, files: HostView) -> list[str]:
    found = []
    for root, names in files.walk(directory):
        for name in sorted(names):
            if _LOOKALIKE.search(name) and _mentions_cdi_version(posixpath.join(root, name), files):
                found.append(posixpath.relpath(posixpath.join(root, name), directory))
                if len(found) >= 3:
                    return found
    return found


@dataclass
class SpecCollection(Collection):
    """A cdi-dirs collection that also knows each document's priority and the directories it reads nothing from."""

    priorities: dict[str, int] = field(default_factory=dict)
    unread: dict[str, str] = field(default_factory=dict)
    # Where the directories were read: a node's paths resolve through it, not through this machine's links.
    files: HostView = LOCAL

    def priority(self, path: str) -> int:
        return self.priorities.get(path, 0)


def read_spec_dirs(directories: Sequence[str], loader: Loader, files: HostView = LOCAL) -> SpecCollection:
    """Read spec directories as the CDI cache does: lowest priority first (for the engines, /etc/cdi then
    /var/run/cdi); a missing directory is simply empty. files is where the directories are (the node's, under
    its host root), and loader reads through it."""
    collection = SpecCollection(CDI_DIRS, list(directories), files=files)
    for priority, directory in enumerate(directories):
        paths, skipped, unread = spec_files(directory, files)
        if unread is not None:
            collection.unread[directory] = unread
            collection.skipped.append(Skipped(directory, unread))
        collection.skipped.extend(skipped)
        for path in paths:
            try:
                document = loader(path, CDI)
            except ReadError as exc:
                # The library records "failed to load CDI Spec open ...: ..." for it and goes on.
                reason = str(exc).split(": ", 1)[-1]
                collection.skipped.append(
                    Skipped(path, f"cannot be read ({reason}), so the library loads nothing from it")
                )
                continue
            refine_document(document)
            collection.documents.append(document)
            collection.priorities[document.path] = priority
    return collection


register_directory_kind(DirectoryKind(CDI_DIRS, CDI, "CDI spec directories", claims_directory, read_spec_dirs, 20))


# ---------------------------------------------------------------------------------------------------------------
# What the cache makes of a collection


@dataclass(frozen=True)
class Definition:
    """A device a loaded spec defines: qualified name, file, priority and pointer of its name."""

    name: str
    path: str
    priority: int
    pointer: str


def definitions(collection: SpecCollection, library: Library = NEWEST) -> list[Definition]:
    """Every device of every spec the library release loads, in the order its scan meets them."""
    result = []
    for document in collection.documents:
        if not document.parsed or any(
            problem.code in ("DOC001", "DOC002", "DOC003", "DOC004", TEXT) for problem in document.load_problems
        ):
            continue
        analysis = analyse(document.value, library)
        if not analysis.loads or analysis.spec is None:
            continue
        vendor, cls = parse_qualifier(analysis.spec.text("kind"))
        for device in analysis.spec.items_of("devices"):
            if isinstance(device, GoStruct):
                qualified = f"{vendor}/{cls}={device.text('name')}"
                result.append(
                    Definition(qualified, document.path, collection.priority(document.path), device.at("name"))
                )
    return result


def cache_devices(collection: SpecCollection, library: Library = NEWEST) -> dict[str, Definition]:
    """The devices the CDI cache of the library release resolves (Cache.refresh)."""
    return cache_winners((d.name, d.priority, d) for d in definitions(collection, library))
