"""Hooks directories (podman, cri-o): the directory kind, and what the engine does with each name in them.

`read_hooks_dirs` reads directories the way `hooks.New` does: lowest priority first, only names ending in
`.json`, each directory in byte order of names, the same file name in a later directory replacing the earlier
one only when the later file loads.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

from nvidia_oci_hook import io
from nvidia_oci_hook.formats import jsontext
from nvidia_oci_hook.host import LOCAL, HostView
from nvidia_oci_hook.kinds.collection import Collection, DirectoryKind, Loader, register_directory_kind
from nvidia_oci_hook.kinds.document import Document
from nvidia_oci_hook.kinds.hooksd.hook_file import HOOKSD, _sniff

HOOKSD_DIRS = "hooksd-dirs"

# hooks.DefaultDir and hooks.OverrideDir. cri-o and podman read DEFAULT_DIR alone unless configured otherwise;
# configured with both, OVERRIDE_DIR comes later and wins.
DEFAULT_DIR = "/usr/share/containers/oci/hooks.d"
OVERRIDE_DIR = "/etc/containers/oci/hooks.d"

JSON_SUFFIX = ".json"

DOCUMENT = "document"  # a *.json regular file, read
NOT_JSON = "not-json"  # ignored: the name does not end in .json
VANISHED = "vanished"  # ignored: a *.json name whose target does not exist (a dangling link)
UNREADABLE = "unreadable"  # a *.json name the loader fails on: a directory, a FIFO, no permission


@dataclass
class Entry:
    """One name in a hooks directory, and what the engine does with it."""

    directory: str
    name: str
    path: str
    status: str
    reason: str = ""  # for the non-documents: the engine's text or what happens
    document: Optional[Document] = None
    looks_like_hook: bool = False  # for NOT_JSON: the content is a hooks.d file


@dataclass
class HooksCollection(Collection):
    """Hooks directories as one engine reads them (lowest priority first) and every name found in them."""

    crio: bool = False  # cri-o reads these directories: precreate is fatal there
    entries: list[Entry] = field(default_factory=list)
    missing_directories: list[str] = field(default_factory=list)

    def entries_in(self, directory: str) -> list[Entry]:
        return [entry for entry in self.entries if entry.directory == directory]


def _go_sorted(names: list[str]) -> list[str]:
    return sorted(names, key=os.fsencode)


def _looks_like_hook(path: str, files: HostView) -> bool:
    """A regular file whose content is a hooks.d file; anything else is not read (a FIFO would block)."""
    try:
        if not stat.S_ISREG(files.lookup(path).st_mode):
            return False
        raw = files.read_bytes(path, 1 << 20)
        return _sniff(path, jsontext.decode(raw.decode("utf-8", errors="replace")))
    except (io.ReadError, io.TooLarge, ValueError, OSError):
        return False


def _entry(directory: str, name: str, loader: Loader, files: HostView) -> Entry:
    path = posixpath.join(directory, name)
    if not name.endswith(JSON_SUFFIX):
        return Entry(directory, name, path, NOT_JSON, looks_like_hook=_looks_like_hook(path, files))
    try:
        info = files.lookup(path)
    except FileNotFoundError:
        return Entry(directory, name, path, VANISHED, "a link to a file that does not exist")
    except OSError as exc:
        return Entry(directory, name, path, UNREADABLE, f"open {path}: {(exc.strerror or str(exc)).lower()}")
    if stat.S_ISDIR(info.st_mode):
        return Entry(directory, name, path, UNREADABLE, f"read {path}: is a directory")
    if stat.S_ISFIFO(info.st_mode):
        return Entry(directory, name, path, UNREADABLE, "a FIFO: the loader's read blocks, and the engine with it")
    if stat.S_ISSOCK(info.st_mode):
        return Entry(directory, name, path, UNREADABLE, f"open {path}: no such device or address")
    if not stat.S_ISREG(info.st_mode):
        what = "a character device" if stat.S_ISCHR(info.st_mode) else "a block device"
        return Entry(directory, name, path, UNREADABLE, f"{what}, not a hooks.d file")
    try:
        document = loader(path, HOOKSD)
    except io.ReadError as exc:
        return Entry(directory, name, path, UNREADABLE, str(exc))
    return Entry(directory, name, path, DOCUMENT, document=document)


def read_hooks_dirs(
    directories: Sequence[str], loader: Loader, *, crio_reads: bool = False, files: HostView = LOCAL
) -> HooksCollection:
    """Read hooks directories in an engine's order, lowest priority first, as containers/common's hooks.New does.

    For cri-o the order is its `hooks_dir` list (default: DEFAULT_DIR alone); for podman, containers.conf's
    `[engine] hooks_dir` (default: DEFAULT_DIR alone; measured with podman 4.3, which does not read
    OVERRIDE_DIR unless it is listed). Where both default directories are configured, pass
    [DEFAULT_DIR, OVERRIDE_DIR]. `crio_reads` says that cri-o reads these directories, where a precreate stage
    stops the daemon. A directory that does not exist is skipped, as the engines skip it. files is where the
    directories are (the node's, under its host root), and loader reads through it.
    """
    # A directory listed twice is read twice; only its last reading decides what masks what.
    last = {os.path.normpath(directory): index for index, directory in enumerate(directories)}
    ordered = [d for index, d in enumerate(directories) if last[os.path.normpath(d)] == index]
    collection = HooksCollection(HOOKSD_DIRS, ordered, crio=crio_reads)
    for directory in ordered:
        try:
            names = files.listdir(directory)
        except FileNotFoundError:
            collection.missing_directories.append(directory)
            continue
        except NotADirectoryError:
            reason = f"readdirent {directory}: not a directory"  # podman 4.3's words
            collection.entries.append(Entry(directory, "", directory, UNREADABLE, reason))
            continue
        except OSError as exc:
            reason = f"open {directory}: {(exc.strerror or str(exc)).lower()}"
            collection.entries.append(Entry(directory, "", directory, UNREADABLE, reason))
            continue
        for name in _go_sorted(names):
            entry = _entry(directory, name, loader, files)
            collection.entries.append(entry)
            if entry.document is not None:
                collection.documents.append(entry.document)
    return collection


def _claims(directory: str) -> bool:
    """A directory named hooks.d, or one holding a *.json file that is a hooks.d file."""
    if os.path.basename(os.path.normpath(directory)) == "hooks.d":
        return True
    try:
        names = [name for name in os.listdir(directory) if name.endswith(JSON_SUFFIX)]
    except OSError:
        return False
    return any(_looks_like_hook(os.path.join(directory, name), LOCAL) for name in _go_sorted(names)[:20])


register_directory_kind(
    DirectoryKind(
        HOOKSD_DIRS,
        HOOKSD,
        "OCI hooks directories (podman, cri-o)",
        _claims,
        lambda directories, loader: read_hooks_dirs(directories, loader),
        order=30,
    )
)
