"""Bounded reads and atomic writes: every document this tool reads or writes goes through here."""

from __future__ import annotations

import stat
import sys

from nvidia_oci_hook import leanos

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Union

# Far above any real config.json, CDI spec or runtime config; keeps a hostile file from exhausting memory.
DEFAULT_MAX_BYTES = 32 * 1024 * 1024


class ReadError(Exception):
    """A path that cannot be read at all: the caller exits with status 2."""


class TooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} bytes is more than the {limit} bytes this tool reads")
        self.size = size
        self.limit = limit


def _describe(exc: OSError) -> str:
    return exc.strerror or str(exc)


def read_bounded(path: str, limit: int = DEFAULT_MAX_BYTES) -> bytes:
    """Read a file or '-' (stdin), refusing more than limit bytes."""
    if path == "-":
        data = sys.stdin.buffer.read(limit + 1)
        if len(data) > limit:
            raise TooLarge(len(data), limit)
        return data
    try:
        fd = leanos.open(path, leanos.O_RDONLY | leanos.O_CLOEXEC)
    except OSError as exc:
        raise ReadError(f"{path}: cannot open: {_describe(exc)}") from None
    return read_descriptor(fd, path, limit)


def read_descriptor(fd: int, path: str, limit: int = DEFAULT_MAX_BYTES) -> bytes:
    """Read an open file to its end and close it, refusing more than limit bytes; path names it in errors."""
    try:
        info = leanos.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ReadError(f"{path}: is a directory")
        if stat.S_ISREG(info.st_mode) and info.st_size > limit:
            raise TooLarge(info.st_size, limit)
        chunks = []
        total = 0
        while True:
            chunk = leanos.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise TooLarge(total, limit)
        return b"".join(chunks)
    except OSError as exc:
        raise ReadError(f"{path}: cannot read: {_describe(exc)}") from None
    finally:
        leanos.close(fd)


def write_atomic(path: str, data: bytes, dir_fd: Optional[int] = None) -> None:
    """Replace path with data so that a crash or kill at any moment leaves the old file or the new one.

    The temporary file sits in the same directory (rename is atomic only within a file system), gets the old
    file's mode and owner before it is renamed over it, and is fsynced, as is the directory afterwards. With
    dir_fd (an open directory), path is one name in it and nothing is looked up by a path from "/": how the
    host layer writes under a host root. A link at the name is replaced, never followed.
    """
    if dir_fd is None:
        directory_fd = leanos.open(
            leanos.dirname(leanos.abspath(path)), leanos.O_RDONLY | leanos.O_DIRECTORY | leanos.O_CLOEXEC
        )
        name = leanos.basename(path)
    else:
        directory_fd, name = dir_fd, path
    try:
        _write_in(directory_fd, name, data)
    finally:
        if dir_fd is None:
            leanos.close(directory_fd)


def _write_in(directory: int, name: str, data: bytes) -> None:
    try:
        old: Optional[leanos.stat_result] = leanos.stat(name, dir_fd=directory, follow_symlinks=False)
        if not stat.S_ISREG(old.st_mode):  # type: ignore[union-attr]
            old = None
    except FileNotFoundError:
        old = None
    temporary = f".{name}.{leanos.getpid()}.tmp"
    flags = leanos.O_WRONLY | leanos.O_CREAT | leanos.O_EXCL | leanos.O_NOFOLLOW | leanos.O_CLOEXEC
    try:
        fd = leanos.open(temporary, flags, 0o600, dir_fd=directory)
    except FileExistsError:
        # Left by a process with the same pid that was killed mid-write: nobody else writes this name.
        leanos.unlink(temporary, dir_fd=directory)
        fd = leanos.open(temporary, flags, 0o600, dir_fd=directory)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[leanos.write(fd, view) :]
            if old is not None:
                leanos.fchmod(fd, stat.S_IMODE(old.st_mode))
                if (old.st_uid, old.st_gid) != (leanos.getuid(), leanos.getgid()):
                    leanos.fchown(fd, old.st_uid, old.st_gid)
            else:
                leanos.fchmod(fd, 0o644)
            leanos.fsync(fd)
        finally:
            leanos.close(fd)
        leanos.rename(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with _suppress_os_error():
            leanos.unlink(temporary, dir_fd=directory)
        raise
    # Before the directory's fsync, so that it makes the removals durable too.
    remove_stale_temporaries(directory, name)
    leanos.fsync(directory)


def remove_stale_temporaries(directory: Union[str, int], name: str) -> None:
    """Remove the `.NAME.PID.tmp` files in directory (a path, or an open directory) whose writer is gone: a
    writer killed between its write and its rename (kill -9 of a wrapper leaves one about once in a hundred kills)
    leaves its temporary behind.

    Called only by a write into directory, which has just created and renamed an entry there, so the one listing
    this costs reads a directory that is hot in the cache; nothing else on the runtime path lists a bundle.
    Only a regular file is removed (a symlink of that name is not ours, and is never followed), and only when no
    process has its pid: a live writer's temporary is its to rename or remove. The pid is that of the writer's pid
    namespace; the writers of one directory (the wrapper in the engine's, the CLI on the node) share the host's.
    """
    prefix = f".{name}."
    own = leanos.getpid()
    try:
        names = leanos.listdir(directory)
    except OSError:
        return
    at = directory if isinstance(directory, int) else None
    for found in names:
        if not (found.startswith(prefix) and found.endswith(".tmp")):
            continue
        digits = found[len(prefix) : -len(".tmp")]
        # Plain ASCII digits of a plausible pid: anything else is not a name write_atomic makes.
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 10):
            continue
        pid = int(digits)
        if pid == own or pid == 0 or _alive(pid):
            continue
        target = found if at is not None else leanos.join(directory, found)  # type: ignore[arg-type]
        try:
            if not stat.S_ISREG(leanos.stat(target, dir_fd=at, follow_symlinks=False).st_mode):
                continue
            leanos.unlink(target, dir_fd=at)  # unlink removes a name, never what a symlink points to
        except OSError:
            continue


def _alive(pid: int) -> bool:
    """Whether a process has pid; when that cannot be told, it is taken as alive (nothing of its is removed)."""
    try:
        leanos.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True  # EPERM: it exists, as another user
    return True


class _suppress_os_error:  # contextlib costs start-up time on the runtime path
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, value: object, traceback: object) -> bool:
        return isinstance(value, OSError)
