"""Documents that only mean something together: CDI spec directories, hooks.d directories, a whole node.

A directory kind says which files an engine reads from a directory and in what order; the collection it builds
is checked by rules whose kinds name the directory kind, and whose problems carry the path of the file they
are about.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Callable, Optional

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.cdi.releases import Judge
from nvidia_oci_hook.kinds.document import Document, load_all_kinds

# The kind of the collection `lint --node` builds: the node's engine configurations, CDI and hooks.d directories.
NODE = "node"


@dataclass(frozen=True)
class Skipped:
    """A file or directory an engine passes over, and why."""

    path: str
    reason: str


@dataclass
class Collection:
    kind: str
    # In the engine's order of priority, lowest first (for CDI: later directories win).
    directories: list[str]
    documents: list[Document] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    # Collections inside this one (a node holds its CDI and hooks.d collections).
    parts: list[Collection] = field(default_factory=list)
    # Places looked at that hold no document of their own (package databases), and what was found there.
    looked: list[tuple[str, str]] = field(default_factory=list)
    # Who judges the CDI specs in this collection and its parts (the engines that read them); none: as linted.
    cdi_judges: tuple[Judge, ...] = ()
    # The containerd release (its number) that reads the containerd configuration in this collection: the one
    # found on the node; None: as linted.
    containerd_release: Optional[str] = None
    # The NVIDIA Container Toolkit release (its number) that reads the toolkit configuration in this collection:
    # the one found on the node; None: as linted.
    toolkit_release: Optional[str] = None

    def document(self, path: str) -> Optional[Document]:
        for document in self.documents:
            if document.path == path:
                return document
        for part in self.parts:
            found = part.document(path)
            if found is not None:
                return found
        return None


# Loads one file as the given document kind; provided by the linter (bounded reads, size limits, display paths).
Loader = Callable[[str, str], Document]
# Loads one file from where it is: the node's files under a host root, or this machine's (a file named by hand).
FileLoader = Callable[[str, str, "HostView"], Document]


def bound(load: FileLoader, files: HostView) -> Loader:
    """The loader that reads through files."""
    return lambda path, kind: load(path, kind, files)


@dataclass(frozen=True)
class DirectoryKind:
    name: str
    member_kind: str
    title: str
    # Whether a directory given on the command line (without --kind) holds this kind of document.
    claims: Callable[[str], bool]
    # Reads directories (lowest priority first) the way the engine does.
    read: Callable[[Sequence[str], Loader], Collection]
    order: int = 50


_DIRECTORY_KINDS: dict[str, DirectoryKind] = {}


def register_directory_kind(kind: DirectoryKind) -> DirectoryKind:
    _DIRECTORY_KINDS[kind.name] = kind
    return kind


def directory_kinds() -> list[DirectoryKind]:
    load_all_kinds()
    return sorted(_DIRECTORY_KINDS.values(), key=lambda k: (k.order, k.name))


# Readers of the documents a file names itself (containerd's imports): member kind -> read(document, loader),
# which returns the collection of the file and those it names, or None when it names none. A file named on the
# command line and the files it names are this machine's.
FollowImports = Callable[[Document, Loader], Optional[Collection]]
_FOLLOWERS: dict[str, FollowImports] = {}


def register_follower(member_kind: str, follow: FollowImports) -> None:
    _FOLLOWERS[member_kind] = follow


def follow_imports(document: Document, loader: Loader) -> Optional[Collection]:
    """The collection of a file and the files it names (as its engine reads them), or None when it names none."""
    load_all_kinds()
    follow = _FOLLOWERS.get(document.kind)
    return follow(document, loader) if follow is not None and document.parsed else None


def directory_kind_for(path: str, member_kind: Optional[str]) -> Optional[DirectoryKind]:
    for kind in directory_kinds():
        if member_kind is not None:
            if kind.member_kind == member_kind:
                return kind
        elif kind.claims(path):
            return kind
    return None
