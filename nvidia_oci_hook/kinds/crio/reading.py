"""Reading crio.conf and every entry under crio.conf.d the way cri-o does, and the kinds registered for them."""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.host import LOCAL, HostView
from nvidia_oci_hook.kinds.collection import (
    Collection,
    DirectoryKind,
    Loader,
    Skipped,
    register_directory_kind,
)
from nvidia_oci_hook.kinds.crio.merge import CrioConfig, Origin, merge
from nvidia_oci_hook.kinds.crio.toml_syntax import refine_crio
from nvidia_oci_hook.kinds.document import Kind, register_kind

CRIO = "crio"
# The directory kind, and the kind of the collection its rules check: the merged configuration.
CRIO_CONFIG = "crio-config"
# The kind of each file inside a merged configuration: its per-file problems are found while merging, so no rule
# runs on the file alone.
CRIO_PART = "crio-part"


@dataclass(frozen=True)
class Unreadable:
    """An entry cri-o tries to read as a configuration file and cannot: cri-o does not start."""

    path: str
    message: str  # what cri-o reports
    detail: str  # why, in words


@dataclass
class CrioCollection(Collection):
    """crio.conf and its drop-ins: each file in merge order, what cri-o cannot read, and the merged config."""

    main: Optional[str] = None
    dropin_dirs: list[str] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # the files in cri-o's merge order
    unreadable: list[Unreadable] = field(default_factory=list)
    config: CrioConfig = field(default_factory=CrioConfig)
    # For each drop-in file: the directory it was found under.
    found_under: dict[str, str] = field(default_factory=dict)


def _describe(error: OSError) -> str:
    return (error.strerror or str(error)).lower()


_NULL_DEVICE = (1, 3)


def _read_entry(path: str, loader: Loader, collection: CrioCollection, files: HostView) -> None:
    """Read one entry the way UpdateFromDropInFile does (os.ReadFile, which follows links)."""
    try:
        info = files.lookup(path)
    except OSError as error:
        collection.unreadable.append(
            Unreadable(path, f"open {path}: {_describe(error)}", "a symbolic link whose target does not exist")
        )
        return
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        collection.unreadable.append(
            Unreadable(
                path,
                f"read {path}: is a directory",
                "a symbolic link to a directory: the walk does not follow it, it reads it as a file",
            )
        )
        return
    if stat.S_ISFIFO(mode):
        collection.unreadable.append(
            Unreadable(
                path, f"{path}: a FIFO", "a named pipe: reading it blocks until something writes, so cri-o hangs"
            )
        )
        return
    if stat.S_ISCHR(mode) and (os.major(info.st_rdev), os.minor(info.st_rdev)) == _NULL_DEVICE:
        collection.skipped.append(Skipped(path, "reads as an empty file (/dev/null): sets nothing"))
        return
    if not stat.S_ISREG(mode):
        collection.unreadable.append(
            Unreadable(path, f"read {path}: not a regular file", "a socket or device, which cri-o cannot decode")
        )
        return
    document = loader(path, CRIO)
    document.kind = CRIO_PART
    collection.documents.append(document)
    collection.order.append(path)


def _walk(path: str, loader: Loader, collection: CrioCollection, top: str, files: HostView) -> None:
    """filepath.Walk: lstat every entry; recurse into directories in lexical order; read everything else."""
    try:
        info = files.lookup(path, follow=False)
    except OSError as error:
        collection.unreadable.append(Unreadable(path, f"lstat {path}: {_describe(error)}", "it vanished or is hidden"))
        return
    if not stat.S_ISDIR(info.st_mode):
        collection.found_under[path] = top
        _read_entry(path, loader, collection, files)
        return
    try:
        names = sorted(files.listdir(path), key=os.fsencode)
    except OSError as error:
        collection.unreadable.append(
            Unreadable(path, f"open {path}: {_describe(error)}", "a directory that cannot be listed")
        )
        return
    for name in names:
        _walk(posixpath.join(path, name), loader, collection, top, files)


def read_crio_config(
    main_path: Optional[str], dropin_dir: Optional[str], loader: Loader, files: HostView = LOCAL
) -> CrioCollection:
    """crio.conf, then every file under the drop-in directory, read and merged as cri-o does.

    Either may be None or absent: cri-o skips a missing crio.conf (unless --config names it) and a missing
    drop-in directory. The collection holds each file as a document (kind crio-part), the entries cri-o could
    not read, and the merged configuration with the origin of every value (`effective_config`, `origin_of`).
    files is where the paths are (the node's, under its host root), and loader reads through it.
    """
    return read_crio_configs(main_path, [dropin_dir] if dropin_dir else [], loader, files)


def read_crio_configs(
    main_path: Optional[str], dropin_dirs: Sequence[str], loader: Loader, files: HostView = LOCAL
) -> CrioCollection:
    # "dir/" would make lstat follow a link that cri-o's walk does not follow.
    main_path = os.path.normpath(main_path) if main_path else None
    dropin_dirs = [os.path.normpath(d) for d in dropin_dirs]
    directories = [d for d in (os.path.dirname(main_path) if main_path else None, *dropin_dirs) if d]
    collection = CrioCollection(CRIO_CONFIG, directories[-1:] or ["."], main=main_path, dropin_dirs=list(dropin_dirs))
    if main_path is not None:
        if files.exists(main_path):
            _read_entry(main_path, loader, collection, files)
        elif files.lexists(main_path):
            # Unlike a drop-in, a main file that does not exist is skipped (unless --config names it).
            collection.skipped.append(Skipped(main_path, "a symbolic link to nothing: cri-o skips it"))
        else:
            collection.skipped.append(Skipped(main_path, "not present: cri-o starts from its built-in defaults"))
    for directory in dropin_dirs:
        if not files.exists(directory):
            if files.lexists(directory):
                collection.skipped.append(Skipped(directory, "a symbolic link to nothing: cri-o skips it"))
            else:
                collection.skipped.append(Skipped(directory, "not present: no drop-in files"))
            continue
        if files.is_link(directory) and files.is_dir(directory):
            # UpdateFromPath stats the path (following the link), then filepath.Walk lstats it: a link is
            # walked as one file, and reading a directory fails.
            collection.unreadable.append(
                Unreadable(
                    directory,
                    f"read {directory}: is a directory",
                    "the drop-in directory itself is a symbolic link, which filepath.Walk does not follow: "
                    "cri-o reads the link as a file",
                )
            )
            continue
        _walk(directory, loader, collection, directory, files)
    by_path = {document.path: document for document in collection.documents}
    collection.config = merge(
        [(path, by_path[path].value, by_path[path].parsed) for path in collection.order if path in by_path]
    )
    collection.config.unread_entries = bool(collection.unreadable)
    return collection


def effective_config(collection: Collection) -> dict[str, Any]:
    """The merged values of a cri-o configuration (what the files set; cri-o's defaults are not filled in)."""
    if isinstance(collection, CrioCollection):
        return collection.config.value
    return {}


def origin_of(collection: Collection, pointer: str) -> Optional[Origin]:
    """The file and pointer that set the effective value at pointer (e.g. /crio/runtime/hooks_dir)."""
    if isinstance(collection, CrioCollection):
        return collection.config.origin(pointer)
    return None


def single_file_config(value: Any) -> CrioConfig:
    """A file linted on its own is the whole configuration: cri-o's defaults plus that file."""
    return merge([(None, value, True)])


# ---------------------------------------------------------------------------------------------------------------
# Registration


def _has_crio_table(value: Any) -> bool:
    return isinstance(value, dict) and any(key.casefold() == "crio" for key in value)


def _sniff(path: str, value: Any) -> bool:
    if _has_crio_table(value):
        return True
    name = posixpath.basename(path)
    return name == "crio.conf" or posixpath.basename(posixpath.dirname(path)) == "crio.conf.d"


register_kind(Kind(CRIO, "cri-o configuration", ("toml",), _sniff, order=25, refine=refine_crio, readers=("cri-o",)))


def _is_crio_home(path: str) -> bool:
    """/etc/crio: a directory holding crio.conf or crio.conf.d."""
    return os.path.isfile(os.path.join(path, "crio.conf")) or os.path.isdir(os.path.join(path, "crio.conf.d"))


def _claims(path: str) -> bool:
    name = os.path.basename(os.path.normpath(path))
    return name.endswith("crio.conf.d") or _is_crio_home(path)


def _read(directories: Sequence[str], loader: Loader) -> Collection:
    main: Optional[str] = None
    dropins: list[str] = []
    for directory in directories:
        if _is_crio_home(directory) and not os.path.basename(os.path.normpath(directory)).endswith(".conf.d"):
            main = os.path.join(directory, "crio.conf")
            dropins.append(os.path.join(directory, "crio.conf.d"))
        else:
            dropins.append(directory)
    return read_crio_configs(main, dropins, loader)


register_directory_kind(
    DirectoryKind(
        CRIO_CONFIG,
        CRIO,
        "cri-o configuration directory (crio.conf and crio.conf.d, merged)",
        _claims,
        _read,
        order=30,
    )
)
