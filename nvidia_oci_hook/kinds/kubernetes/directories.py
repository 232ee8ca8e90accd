"""A directory of manifests (a repository's `manifests/`, a rendered chart): every YAML or JSON file in it and its
subdirectories that holds Kubernetes objects, read in path order, as `kubectl apply -R -f DIR` reads them."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from nvidia_oci_hook.io import ReadError
from nvidia_oci_hook.kinds.collection import Collection, DirectoryKind, Loader, Skipped, register_directory_kind
from nvidia_oci_hook.kinds.kubernetes.stream import looks_like_manifests

KUBERNETES_DIRS = "kubernetes-dirs"
MANIFEST_EXTENSIONS = (".yaml", ".yml", ".json")
_SNIFF_BYTES = 1 << 16
# A directory that is not a manifest repository (`/`, a home directory) is not walked far to find out.
_CLAIM_ENTRIES = 2048
_CLAIM_DEPTH = 1


def _files(directory: str) -> Iterator[str]:
    """Manifest-named files below directory, in path order; links to directories are not followed (a loop)."""
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            yield from _files(entry.path)
        elif entry.name.lower().endswith(MANIFEST_EXTENSIONS) and entry.is_file():
            yield entry.path


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read(_SNIFF_BYTES)
    except OSError:
        return b""


def claims_directory(path: str) -> bool:
    """Whether a directory given on the command line holds manifests: looked for breadth first, near its top
    and among a bounded number of entries, so that a home directory is not walked to find out. A filesystem's
    root is never one: it would be read whole."""
    if os.path.realpath(path) == "/":
        return False
    pending = [(path, 0)]
    visited = 0
    while pending and visited < _CLAIM_ENTRIES:
        directory, depth = pending.pop(0)
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            visited += 1
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                if depth < _CLAIM_DEPTH:
                    pending.append((entry.path, depth + 1))
            elif entry.name.lower().endswith(MANIFEST_EXTENSIONS) and looks_like_manifests(
                entry.path, _head(entry.path)
            ):
                return True
    return False


def read_manifest_dirs(directories: Sequence[str], loader: Loader) -> Collection:
    from nvidia_oci_hook.kinds.kubernetes import KUBERNETES

    collection = Collection(KUBERNETES_DIRS, list(directories))
    for directory in directories:
        for path in _files(directory):
            if not looks_like_manifests(path, _head(path)):
                collection.skipped.append(Skipped(path, "holds no Kubernetes object (apiVersion and kind)"))
                continue
            try:
                collection.documents.append(loader(path, KUBERNETES))
            except ReadError as exc:
                collection.skipped.append(Skipped(path, f"cannot be read: {exc}"))
    return collection


register_directory_kind(
    DirectoryKind(
        KUBERNETES_DIRS, "kubernetes", "directories of Kubernetes manifests", claims_directory, read_manifest_dirs, 15
    )
)
