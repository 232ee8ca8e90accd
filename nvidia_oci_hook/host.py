"""HostView: the one way to ask what exists on the node, rooted at --host-root.

Paths given to it are host paths as a container spec names them ("/usr/lib/libcuda.so.1"). Symbolic links are
followed inside the root, so an absolute link target on a node mounted at /host resolves under /host, not under
the filesystem this tool happens to run in.
"""

from __future__ import annotations

import os
import posixpath
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

_MAX_LINKS = 40  # the kernel's own limit on links followed in one lookup

# Where an NVIDIA driver may live: installed on the host, or in the GPU Operator's driver container.
DEFAULT_DRIVER_ROOTS = ("/", "/run/nvidia/driver")


class DeviceIdentity:
    """What a path is on the host: a device node's type and numbers, or another kind of file."""

    __slots__ = ("major", "minor", "type")

    def __init__(self, type: str, major: int = 0, minor: int = 0) -> None:
        self.type = type  # "c", "b", "p" (FIFO), or "file", "directory", "symbolic link", "other"
        self.major = major
        self.minor = minor

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeviceIdentity):
            return NotImplemented
        return (self.type, self.major, self.minor) == (other.type, other.major, other.minor)

    def __hash__(self) -> int:
        return hash((self.type, self.major, self.minor))

    def __repr__(self) -> str:
        return f"DeviceIdentity({self.type!r}, {self.major}, {self.minor})"

    @property
    def is_device(self) -> bool:
        return self.type in ("c", "b")

    def describe(self) -> str:
        if self.is_device:
            return f"{self.type} {self.major}:{self.minor}"
        return "a FIFO" if self.type == "p" else f"a {self.type}"


def _identity(info: os.stat_result) -> DeviceIdentity:
    mode = info.st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "c" if stat.S_ISCHR(mode) else "b"
        return DeviceIdentity(kind, os.major(info.st_rdev), os.minor(info.st_rdev))
    if stat.S_ISFIFO(mode):
        return DeviceIdentity("p")
    if stat.S_ISDIR(mode):
        return DeviceIdentity("directory")
    if stat.S_ISREG(mode):
        return DeviceIdentity("file")
    if stat.S_ISLNK(mode):
        return DeviceIdentity("symbolic link")
    return DeviceIdentity("other")


class HostView:
    def __init__(self, root: str = "/") -> None:
        self.root = os.path.abspath(root)
        # One view serves one run; several rules ask about the same paths.
        self._stats: dict[str, Optional[os.stat_result]] = {}

    def _real(self, path: str) -> Optional[str]:
        """The on-disk path for host path, links resolved within the root; None if a component is missing."""
        if self.root == "/":
            return path
        pending = [part for part in path.split("/") if part]
        resolved: list[str] = []
        links = 0
        while pending:
            part = pending.pop(0)
            if part == ".":
                continue
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            candidate = os.path.join(self.root, *resolved, part)
            try:
                info = os.lstat(candidate)
            except OSError:
                return None
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if links > _MAX_LINKS:
                    return None
                target = os.readlink(candidate)
                if target.startswith("/"):
                    resolved = []
                pending[:0] = [p for p in target.split("/") if p]
                continue
            resolved.append(part)
        return os.path.join(self.root, *resolved)

    def shown(self, path: str) -> str:
        """A node path as this machine names it (under --host-root), for messages and for reading it."""
        return path if self.root == "/" else os.path.join(self.root, path.lstrip("/"))

    def stat(self, path: str) -> Optional[os.stat_result]:
        if path in self._stats:
            return self._stats[path]
        result = None
        if path.startswith("/"):
            real = self._real(posixpath.normpath(path))
            if real is not None:
                try:
                    result = os.stat(real)
                except (OSError, ValueError):
                    result = None
        self._stats[path] = result
        return result

    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def is_executable(self, path: str) -> bool:
        info = self.stat(path)
        return info is not None and stat.S_ISREG(info.st_mode) and bool(info.st_mode & 0o111)

    def identity(self, path: str) -> Optional[DeviceIdentity]:
        info = self.stat(path)
        return None if info is None else _identity(info)

    def link_identity(self, path: str) -> Optional[DeviceIdentity]:
        """What path itself is, a symbolic link not followed (lstat): how the CDI library and cri-o look at
        device nodes."""
        info = self.lstat(path)
        return None if info is None else _identity(info)

    def lstat(self, path: str) -> Optional[os.stat_result]:
        """path itself, a final symbolic link not followed: how the CDI library looks at a device node."""
        if not path.startswith("/"):
            return None
        path = posixpath.normpath(path)
        parent = self._real(posixpath.dirname(path))
        if parent is None:
            return None
        try:
            return os.lstat(os.path.join(parent, posixpath.basename(path)))
        except (OSError, ValueError):
            return None

    def is_file(self, path: str) -> bool:
        info = self.stat(path)
        return info is not None and stat.S_ISREG(info.st_mode)

    def real_path(self, path: str) -> Optional[str]:
        """Where host path lives on this machine's filesystem (links resolved inside the root), if it exists."""
        if not path.startswith("/") or self.stat(path) is None:
            return None
        return self._real(posixpath.normpath(path))

    def read_text(self, path: str, limit: int = 1 << 20) -> Optional[str]:
        """A small host file's text (marker files, /proc entries); None if absent or unreadable."""
        real = self.real_path(path)
        if real is None:
            return None
        try:
            with open(real, "rb") as handle:
                return handle.read(limit).decode("utf-8", errors="replace")
        except OSError:
            return None

    def list_dir(self, path: str) -> list[str]:
        """Names in a host directory, sorted; empty when it is absent."""
        real = self.real_path(path)
        if real is None:
            return []
        try:
            return sorted(os.listdir(real))
        except OSError:
            return []


def under_root(root: str, path: str) -> Optional[str]:
    """path relative to root ('' for root itself), matching whole components; None if outside."""
    root = root.rstrip("/")
    if not root:
        return path.lstrip("/")
    if path == root:
        return ""
    if path.startswith(root + "/"):
        return path[len(root) + 1 :]
    return None


def owning_root(roots: tuple[str, ...], path: str) -> tuple[str, str]:
    """The most specific candidate root containing path, and path relative to it."""
    best = ("/", path.lstrip("/"))
    best_length = -1
    for root in roots:
        relative = under_root(root, path)
        if relative is not None and len(root.rstrip("/")) > best_length:
            best, best_length = (root, relative), len(root.rstrip("/"))
    return best


class RootRewrite:
    __slots__ = ("existing_root", "missing_root", "path", "rewritten")

    def __init__(self, path: str, missing_root: str, existing_root: str, rewritten: str) -> None:
        self.path = path
        self.missing_root = missing_root
        self.existing_root = existing_root
        self.rewritten = rewritten


def rewrite_for_existing_root(host: HostView, roots: tuple[str, ...], path: str) -> Optional[RootRewrite]:
    """If path is missing but the same path relative to its driver root exists under another candidate root.

    Nothing is guessed: the whole relative path must exist under exactly the root that is proposed; the
    first candidate in the given order wins when several have it.
    """
    path = posixpath.normpath(path)
    if not path.startswith("/") or host.exists(path):
        return None
    root, relative = owning_root(roots, path)
    for other in roots:
        if other.rstrip("/") == root.rstrip("/"):
            continue
        candidate = posixpath.join(other, relative) if relative else other
        if host.exists(candidate):
            return RootRewrite(path, root, other, posixpath.normpath(candidate))
    return None
