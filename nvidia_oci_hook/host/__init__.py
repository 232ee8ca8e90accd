"""HostView: the one way to touch the node, rooted at --host-root: every read, list, stat, readlink, create, write,
rename, mkdir, symlink and unlink of a node path goes through it.

Paths given to it are node paths as a container spec or the node's own files name them ("/usr/lib/libcuda.so.1",
a state file's cgroup path, an `imports` entry). Symbolic links are followed inside the root, so an absolute link
target on a node mounted at /host resolves under /host, not under the filesystem this tool happens to run in.
"""

from __future__ import annotations

import stat

from nvidia_oci_hook import leanos

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Optional

# Linux's errno value, named here: importing errno costs every container start a tenth of a millisecond.
_EINVAL = 22

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


def _identity(info: leanos.stat_result) -> DeviceIdentity:
    mode = info.st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "c" if stat.S_ISCHR(mode) else "b"
        return DeviceIdentity(kind, leanos.major(info.st_rdev), leanos.minor(info.st_rdev))
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

    Every path is a node path ("/etc/cdi/nvidia.yaml"). On "/" the kernel's own resolution is the node's, and
    this class makes plain calls. On any other host root, HostView(root) is a RootedView (host/rooted.py), which
    resolves each component inside the root and makes every call relative to a resolved directory: loaded only
    then, so that the runtime path, which always looks at "/", pays nothing for it.
    """

    rooted = False

    # Files a user names are read as named: relative paths, and pipes (`lint <(...)`); a node's paths are absolute
    # and only its regular files are read.
    _as_named = False

    def __new__(cls, root: str = "/") -> HostView:
        if cls is HostView and leanos.abspath(root) != "/":
            from nvidia_oci_hook.host.rooted import RootedView

            return super().__new__(RootedView)
        return super().__new__(cls)

    def __init__(self, root: str = "/") -> None:
        self.root = leanos.abspath(root)
        # One view serves one run; several rules ask about the same paths.
        self._stats: dict[str, Optional[leanos.stat_result]] = {}

    # -- resolution --------------------------------------------------------------------------------------------

    def canonical(self, path: str) -> Optional[str]:
        """The node path with every link resolved inside the root, if it exists: two names of one place compare
        equal."""
        if self.stat(path) is None:
            return None
        return leanos.realpath(path)

    # -- looking -----------------------------------------------------------------------------------------------

    def lookup(self, path: str, follow: bool = True) -> leanos.stat_result:
        """stat (or, without follow, lstat) of a node path; raises OSError as the kernel would on the node."""
        if not path.startswith("/") and not self._as_named:
            raise OSError(_EINVAL, "not an absolute node path", path)
        return leanos.stat(path, follow_symlinks=follow)

    def stat(self, path: str) -> Optional[leanos.stat_result]:
        if path in self._stats:
            return self._stats[path]
        try:
            result: Optional[leanos.stat_result] = self.lookup(path)
        except (OSError, ValueError):
            result = None
        self._stats[path] = result
        return result

    def lstat(self, path: str) -> Optional[leanos.stat_result]:
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
        return leanos.readlink(path)

    def listdir(self, path: str) -> list[str]:
        """Names in a node directory, unsorted, as os.listdir; raises OSError."""
        return leanos.listdir(path)

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
                child = leanos.join(directory, name)
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
        import glob as globbing

        return sorted(globbing.glob(pattern))

    # -- reading -----------------------------------------------------------------------------------------------

    def open_read(self, path: str) -> int:
        """A read descriptor of a node file; raises io.ReadError. Only a regular file is opened: reading a FIFO
        or a device node of the node would block or act on it."""
        from nvidia_oci_hook import io

        try:
            fd = self._open(path, leanos.O_RDONLY)
        except (OSError, ValueError) as exc:
            raise io.ReadError(f"{path}: cannot open: {getattr(exc, 'strerror', None) or exc}") from None
        info = leanos.fstat(fd)
        if not stat.S_ISREG(info.st_mode) and not self._as_named:
            leanos.close(fd)
            raise io.ReadError(f"{path}: is a directory" if stat.S_ISDIR(info.st_mode) else f"{path}: not a file")
        leanos.set_blocking(fd, True)
        return fd

    def _open(self, path: str, flags: int) -> int:
        # Not blocking: a FIFO is refused once it is open, and opening one must not wait for a writer.
        return leanos.open(path, flags | leanos.O_CLOEXEC | leanos.O_NONBLOCK)

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
                chunk = leanos.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        except OSError:
            return None
        finally:
            leanos.close(fd)
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
            return bool(leanos.statvfs(self.root).f_flag & leanos.ST_RDONLY)
        except OSError:
            return False

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace a node file atomically, in its resolved directory (io.write_atomic); a link in the last
        component is replaced, not followed, as rename does."""
        from nvidia_oci_hook import io

        self._changed()
        io.write_atomic(path, data)

    def write_existing(self, path: str, data: bytes) -> None:
        """Write to a node file that exists, never creating one (a cgroup's control files)."""
        self._changed()
        fd = self._open(path, leanos.O_WRONLY)
        try:
            leanos.set_blocking(fd, True)
            if not stat.S_ISREG(leanos.fstat(fd).st_mode):
                raise OSError(_EINVAL, "not a regular file", path)
            leanos.write(fd, data)
        finally:
            leanos.close(fd)

    def makedirs(self, path: str, mode: int = 0o755) -> None:
        """Create a node directory and its missing parents, each resolved inside the root."""
        self._changed()
        leanos.makedirs(path, mode, exist_ok=True)

    def symlink(self, target: str, path: str) -> None:
        """Create a link at a node path (its target is stored as given, never followed here)."""
        self._changed()
        leanos.symlink(target, path)

    def unlink(self, path: str) -> None:
        """Remove a node path's name (a link itself, never what it points to); raises OSError."""
        self._changed()
        leanos.unlink(path)


class UserFiles(HostView):
    """This machine's files as a user names them on the command line (`lint FILE`, --containerd-config): plain
    paths, relative ones too, and pipes."""

    _as_named = True

    def __init__(self) -> None:
        super().__init__("/")

    def _open(self, path: str, flags: int) -> int:
        # Not blocking: a FIFO is refused once it is open, and opening one must not wait for a writer.
        return leanos.open(path, flags | leanos.O_CLOEXEC | leanos.O_NONBLOCK)

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
    path = leanos.normpath(path)
    if not path.startswith("/") or host.exists(path):
        return None
    root, relative = owning_root(roots, path)
    for other in roots:
        if other.rstrip("/") == root.rstrip("/"):
            continue
        candidate = leanos.join(other, relative) if relative else other
        if host.exists(candidate):
            return RootRewrite(path, root, other, leanos.normpath(candidate))
    return None
