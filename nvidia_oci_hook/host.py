"""HostView: the one way to touch the node, rooted at --host-root: every read, list, stat, readlink, create, write,
rename, mkdir, symlink and unlink of a node path goes through it.

Paths given to it are node paths as a container spec or the node's own files name them ("/usr/lib/libcuda.so.1",
a state file's cgroup path, an `imports` entry). Symbolic links are followed inside the root, so an absolute link
target on a node mounted at /host resolves under /host, not under the filesystem this tool happens to run in.
"""

from __future__ import annotations

import os
import posixpath
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Optional

_MAX_LINKS = 40  # the kernel's own limit on links followed in one lookup
# Linux's errno values, named here: importing errno costs every container start a tenth of a millisecond.
_ENOTDIR, _EINVAL, _ELOOP, _ESTALE = 20, 22, 40, 116
_DIRECTORY_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Descriptors of resolved directories kept for one run; a node's /proc has a directory per process.
_MAX_OPEN_DIRECTORIES = 256
_GLOB_MAGIC = "*?["

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
    """The node's filesystem as its own processes see it, whatever machine this tool runs on.

    Every path is a node path ("/etc/cdi/nvidia.yaml"). On a host root other than "/" each component is resolved
    here, inside the root, from directory descriptors: an absolute link target restarts at the root, ".." stops at
    it, more than 40 links is ELOOP, and the final call names one component relative to its resolved directory
    without following a link (O_NOFOLLOW, dir_fd=), so the kernel never resolves a node's link against this
    machine's "/". On "/" the kernel's own resolution is the node's, and plain calls are made.
    """

    # Files a user names are read as named: relative paths, and pipes (`lint <(...)`); a node's paths are absolute
    # and only its regular files are read.
    _as_named = False

    def __init__(self, root: str = "/") -> None:
        self.root = os.path.abspath(root)
        self.rooted = self.root != "/"
        # One view serves one run; several rules ask about the same paths.
        self._stats: dict[str, Optional[os.stat_result]] = {}
        self._directories: dict[str, int] = {}  # canonical node path -> O_PATH descriptor

    def __del__(self) -> None:
        try:  # noqa: SIM105 - contextlib costs start-up time on the runtime path
            self.close()
        except Exception:  # at interpreter exit os may be gone; the descriptors go with the process
            pass

    def close(self) -> None:
        directories, self._directories = self._directories, {}
        for fd in directories.values():
            try:  # noqa: SIM105 - contextlib costs start-up time on the runtime path
                os.close(fd)
            except OSError:
                pass

    # -- resolution --------------------------------------------------------------------------------------------

    def _directory(self, canonical: str, parent: int, name: str) -> int:
        fd = self._directories.get(canonical)
        if fd is None:
            # O_NOFOLLOW with O_PATH opens a link itself, and O_DIRECTORY then refuses it: a directory swapped
            # for a link after the lstat that resolved it is never entered.
            fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
            if len(self._directories) >= _MAX_OPEN_DIRECTORIES:
                self._forget_all_but(canonical)
            self._directories[canonical] = fd
        return fd

    def _forget_all_but(self, canonical: str) -> None:
        """Close the cached descriptors that are not ancestors of canonical: the walk under way holds only those."""
        for key in list(self._directories):
            if key != "/" and not canonical.startswith(key + "/"):
                os.close(self._directories.pop(key))

    def _root_fd(self) -> int:
        fd = self._directories.get("/")
        if fd is None:
            fd = os.open(self.root, _DIRECTORY_FLAGS & ~os.O_NOFOLLOW)  # a host root that is a link is followed
            self._directories["/"] = fd
        return fd

    def _walk(self, path: str, follow: bool) -> tuple[int, str, str]:
        """(descriptor of the resolved parent directory, last component, canonical node path) of a node path.

        The last component need not exist (a file about to be created); every one before it must be a directory.
        With follow, a last component that is a link is resolved too. Raises OSError as the kernel would.
        """
        if not path.startswith("/"):
            raise OSError(_EINVAL, "not an absolute node path", path)
        pending = [part for part in reversed(path.split("/")) if part and part != "."]
        resolved: list[str] = []
        fd = self._root_fd()
        links = 0
        while pending:
            part = pending.pop()
            if part == "..":
                if resolved:
                    resolved.pop()
                    fd = self._reopen(resolved)
                continue
            last = not pending
            if last and not follow:
                return fd, part, _joined(resolved, part)
            try:
                info = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if last:
                    return fd, part, _joined(resolved, part)
                raise
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if links > _MAX_LINKS:
                    raise OSError(_ELOOP, os.strerror(_ELOOP), path)
                target = os.readlink(part, dir_fd=fd)
                if target.startswith("/"):
                    resolved = []
                    fd = self._root_fd()
                pending.extend(reversed([p for p in target.split("/") if p and p != "."]))
                continue
            if last:
                return fd, part, _joined(resolved, part)
            if not stat.S_ISDIR(info.st_mode):
                raise OSError(_ENOTDIR, os.strerror(_ENOTDIR), path)
            resolved.append(part)
            fd = self._directory(_joined(resolved), fd, part)
        # The path names a directory reached through "..", a link or nothing at all ("/").
        return fd, ".", _joined(resolved)

    def _reopen(self, resolved: list[str]) -> int:
        """The descriptor of an already resolved directory, reached again by its canonical components."""
        fd = self._root_fd()
        for index, part in enumerate(resolved):
            fd = self._directory(_joined(resolved[: index + 1]), fd, part)
        return fd

    def canonical(self, path: str) -> Optional[str]:
        """The node path with every link resolved inside the root, if it exists: two names of one place compare
        equal."""
        if self.stat(path) is None:
            return None
        if not self.rooted:
            return os.path.realpath(path)
        try:
            return self._walk(path, True)[2]
        except (OSError, ValueError):
            return None

    # -- looking -----------------------------------------------------------------------------------------------

    def lookup(self, path: str, follow: bool = True) -> os.stat_result:
        """stat (or, without follow, lstat) of a node path; raises OSError as the kernel would on the node."""
        if not path.startswith("/") and not self._as_named:
            raise OSError(_EINVAL, "not an absolute node path", path)
        if self.rooted:
            fd, name, _ = self._walk(path, follow)
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        return os.stat(path, follow_symlinks=follow)

    def stat(self, path: str) -> Optional[os.stat_result]:
        if path in self._stats:
            return self._stats[path]
        try:
            result: Optional[os.stat_result] = self.lookup(path)
        except (OSError, ValueError):
            result = None
        self._stats[path] = result
        return result

    def lstat(self, path: str) -> Optional[os.stat_result]:
        """path itself, a final symbolic link not followed: how the CDI library looks at a device node."""
        try:
            return self.lookup(path, follow=False)
        except (OSError, ValueError):
            return None

    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def lexists(self, path: str) -> bool:
        return self.lstat(path) is not None

    def is_file(self, path: str) -> bool:
        info = self.stat(path)
        return info is not None and stat.S_ISREG(info.st_mode)

    def is_dir(self, path: str) -> bool:
        info = self.stat(path)
        return info is not None and stat.S_ISDIR(info.st_mode)

    def is_link(self, path: str) -> bool:
        info = self.lstat(path)
        return info is not None and stat.S_ISLNK(info.st_mode)

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

    def readlink(self, path: str) -> str:
        """A link's target as the node stores it; raises OSError."""
        if not self.rooted:
            return os.readlink(path)
        fd, name, _ = self._walk(path, False)
        return os.readlink(name, dir_fd=fd)

    def listdir(self, path: str) -> list[str]:
        """Names in a node directory, unsorted, as os.listdir; raises OSError."""
        if not self.rooted:
            return os.listdir(path)
        fd = self._open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    def list_dir(self, path: str) -> list[str]:
        """Names in a node directory, sorted; empty when it is absent or unreadable."""
        try:
            return sorted(self.listdir(path))
        except (OSError, ValueError):
            return []

    def walk(self, path: str) -> Iterator[tuple[str, list[str]]]:
        """(directory, names of its non-directories) for path and every directory below it, links not
        followed, as os.walk top-down."""
        pending = [path]
        while pending:
            directory = pending.pop(0)
            files = []
            for name in self.list_dir(directory):
                child = posixpath.join(directory, name)
                info = self.lstat(child)
                if info is not None and stat.S_ISDIR(info.st_mode):
                    pending.append(child)
                else:
                    files.append(name)
            yield directory, files

    def glob(self, pattern: str) -> list[str]:
        """The node paths an absolute glob pattern matches, as Go's filepath.Glob: each component's pattern
        against the names of the directories matched so far; names starting with "." only by a pattern that
        does."""
        if not self.rooted:
            import glob as globbing

            return sorted(globbing.glob(pattern))
        import fnmatch

        matches = ["/"]
        for part in [p for p in pattern.split("/") if p]:
            following: list[str] = []
            for base in matches:
                if not any(c in part for c in _GLOB_MAGIC):
                    candidate = posixpath.join(base, part)
                    if self.lexists(candidate):
                        following.append(candidate)
                    continue
                for name in self.list_dir(base):
                    if name.startswith(".") and not part.startswith("."):
                        continue
                    if fnmatch.fnmatchcase(name, part):
                        following.append(posixpath.join(base, name))
            matches = following
        return sorted(matches)

    # -- reading -----------------------------------------------------------------------------------------------

    def _open(self, path: str, flags: int, follow: bool = True) -> int:
        """A descriptor of the node file path, opened relative to its resolved directory without following a
        link, then checked (fstat) to be the object that resolution found."""
        fd_dir, name, _ = self._walk(path, follow)
        seen = os.stat(name, dir_fd=fd_dir, follow_symlinks=False)
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=fd_dir)
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != (seen.st_dev, seen.st_ino):
            os.close(fd)
            raise OSError(_ESTALE, "changed while it was opened", path)
        return fd

    def open_read(self, path: str) -> int:
        """A read descriptor of a node file; raises io.ReadError. Only a regular file is opened: reading a FIFO
        or a device node of the node would block or act on it."""
        from nvidia_oci_hook import io

        try:
            if self.rooted:
                fd = self._open(path, os.O_RDONLY)
            else:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except (OSError, ValueError) as exc:
            raise io.ReadError(f"{path}: cannot open: {getattr(exc, 'strerror', None) or exc}") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) and not self._as_named:
            os.close(fd)
            raise io.ReadError(f"{path}: is a directory" if stat.S_ISDIR(info.st_mode) else f"{path}: not a file")
        os.set_blocking(fd, True)
        return fd

    def read_bytes(self, path: str, limit: int = 32 * 1024 * 1024) -> bytes:
        """A node file's bytes; raises io.ReadError, or io.TooLarge past limit."""
        from nvidia_oci_hook import io

        return io.read_descriptor(self.open_read(path), path, limit)

    def read_prefix(self, path: str, limit: int) -> Optional[bytes]:
        """The first limit bytes of a node file (a /proc entry, a marker, a file's head); None if absent or
        unreadable."""
        from nvidia_oci_hook import io

        try:
            fd = self.open_read(path)
        except (io.ReadError, ValueError):
            return None
        try:
            chunks = []
            left = limit
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        except OSError:
            return None
        finally:
            os.close(fd)
        return b"".join(chunks)

    def read_text(self, path: str, limit: int = 1 << 20) -> Optional[str]:
        """The first limit bytes of a small node file as text; None if absent or unreadable."""
        data = self.read_prefix(path, limit)
        return None if data is None else data.decode("utf-8", errors="replace")

    # -- changing ----------------------------------------------------------------------------------------------

    def _changed(self) -> None:
        self._stats.clear()

    def read_only(self) -> bool:
        """Whether the host root lies on a read-only mount (the DaemonSet mounts the node's / so)."""
        try:
            return bool(os.statvfs(self.root).f_flag & os.ST_RDONLY)
        except OSError:
            return False

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace a node file atomically, in its resolved directory (io.write_atomic); a link in the last
        component is replaced, not followed, as rename does."""
        from nvidia_oci_hook import io

        self._changed()
        if not self.rooted:
            io.write_atomic(path, data)
            return
        fd, name, _ = self._walk(path, False)
        directory = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
        try:
            io.write_atomic(name, data, dir_fd=directory)
        finally:
            os.close(directory)

    def write_existing(self, path: str, data: bytes) -> None:
        """Write to a node file that exists, never creating one (a cgroup's control files)."""
        self._changed()
        fd = self._open(path, os.O_WRONLY) if self.rooted else os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(_EINVAL, "not a regular file", path)
            os.write(fd, data)
        finally:
            os.close(fd)

    def makedirs(self, path: str, mode: int = 0o755) -> None:
        """Create a node directory and its missing parents, each resolved inside the root."""
        self._changed()
        if not self.rooted:
            os.makedirs(path, mode, exist_ok=True)
            return
        parts = [p for p in path.split("/") if p]
        for index in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:index])
            fd, name, _ = self._walk(prefix, True)
            if name == ".":
                continue
            try:
                os.mkdir(name, mode, dir_fd=fd)
            except FileExistsError:
                if not stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise OSError(_ENOTDIR, os.strerror(_ENOTDIR), prefix) from None

    def symlink(self, target: str, path: str) -> None:
        """Create a link at a node path (its target is stored as given, never followed here)."""
        self._changed()
        if not self.rooted:
            os.symlink(target, path)
            return
        fd, name, _ = self._walk(path, False)
        os.symlink(target, name, dir_fd=fd)

    def unlink(self, path: str) -> None:
        """Remove a node path's name (a link itself, never what it points to); raises OSError."""
        self._changed()
        if not self.rooted:
            os.unlink(path)
            return
        fd, name, _ = self._walk(path, False)
        os.unlink(name, dir_fd=fd)


def _joined(resolved: list[str], last: str = "") -> str:
    parts = [*resolved, last] if last else resolved
    return "/" + "/".join(parts)


class UserFiles(HostView):
    """This machine's files as a user names them on the command line (`lint FILE`, --containerd-config): plain
    paths, relative ones too, and pipes."""

    _as_named = True

    def __init__(self) -> None:
        super().__init__("/")

    def read_bytes(self, path: str, limit: int = 32 * 1024 * 1024) -> bytes:
        from nvidia_oci_hook import io

        return io.read_bounded(path, limit)  # "-" too: standard input


LOCAL = UserFiles()


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
