"""The system calls and path functions of the runtime-facing modes, without importing `os`.

`import os` costs about 2 ms of every container start: it builds `collections.abc`'s classes for `os.environ`
and `os.PathLike`. The calls themselves are the built-in `posix` module's, which `os` only re-exports, so the
runtime path takes them from there, with the few path functions it uses computed as `os.path` computes them on
POSIX paths (`tests/runtime/test_leanos.py` compares them). What it seldom needs (`makedirs`, `realpath`) imports
`os` on first use.
"""

from __future__ import annotations

import sys
from posix import (
    O_APPEND,
    O_CLOEXEC,
    O_CREAT,
    O_DIRECTORY,
    O_EXCL,
    O_NOFOLLOW,
    O_NONBLOCK,
    O_RDONLY,
    O_WRONLY,
    ST_RDONLY,
    X_OK,
    access,
    close,
    execv,
    fchmod,
    fchown,
    fstat,
    fsync,
    getcwd,
    geteuid,
    getgid,
    getpid,
    getuid,
    kill,
    listdir,
    lstat,
    major,
    minor,
    open,
    read,
    readlink,
    rename,
    set_blocking,
    stat,
    stat_result,
    statvfs,
    strerror,
    symlink,
    unlink,
    utime,
    write,
)
from posix import environ as _environ

__all__ = [
    "O_APPEND", "O_CLOEXEC", "O_CREAT", "O_DIRECTORY", "O_EXCL", "O_NOFOLLOW", "O_NONBLOCK", "O_RDONLY", "O_WRONLY",
    "ST_RDONLY", "X_OK", "abspath", "access", "basename", "close", "dirname", "environ", "execv", "exists", "fchmod",
    "fchown", "fsencode", "fstat", "fsync", "getcwd", "geteuid", "getgid", "getpid", "getuid", "isfile", "join",
    "kill", "listdir", "lstat", "major", "makedirs", "minor", "normpath", "open", "read", "readlink", "realpath",
    "rename", "samefile", "set_blocking", "split", "stat", "stat_result", "statvfs", "strerror", "symlink", "unlink",
    "utime", "write",
]  # fmt: skip

_ENCODING = sys.getfilesystemencoding()
_ERRORS = sys.getfilesystemencodeerrors()
_S_IFMT = 0o170000
_S_IFREG = 0o100000


def fsencode(name: str) -> bytes:
    return name.encode(_ENCODING, _ERRORS)


def environ() -> dict[str, str]:
    """The environment as it is now, decoded as os.environ decodes it (which changes the same table)."""
    return {key.decode(_ENCODING, _ERRORS): value.decode(_ENCODING, _ERRORS) for key, value in _environ.items()}


def join(first: str, *rest: str) -> str:
    path = first
    for part in rest:
        if part.startswith("/"):
            path = part
        elif not path or path.endswith("/"):
            path += part
        else:
            path += "/" + part
    return path


def split(path: str) -> tuple[str, str]:
    cut = path.rfind("/") + 1
    head, tail = path[:cut], path[cut:]
    if head and head != "/" * len(head):
        head = head.rstrip("/")
    return head, tail


def dirname(path: str) -> str:
    return split(path)[0]


def basename(path: str) -> str:
    return path[path.rfind("/") + 1 :]


def normpath(path: str) -> str:
    if not path:
        return "."
    # POSIX leaves the meaning of exactly two leading slashes to the system: they stay, three or more are one.
    leading = 2 if path.startswith("//") and not path.startswith("///") else 1 if path.startswith("/") else 0
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part != ".." or (not leading and not parts) or (parts and parts[-1] == ".."):
            parts.append(part)
        elif parts:
            parts.pop()
    return "/" * leading + "/".join(parts) or "."


def abspath(path: str) -> str:
    return normpath(path if path.startswith("/") else join(getcwd(), path))


def exists(path: str) -> bool:
    try:
        stat(path)
    except (OSError, ValueError):
        return False
    return True


def isfile(path: str) -> bool:
    try:
        return stat(path).st_mode & _S_IFMT == _S_IFREG
    except (OSError, ValueError):
        return False


def samefile(first: str, second: str) -> bool:
    one, other = stat(first), stat(second)
    return one.st_ino == other.st_ino and one.st_dev == other.st_dev


def realpath(path: str) -> str:
    import posixpath

    return posixpath.realpath(path)


def makedirs(path: str, mode: int = 0o777, exist_ok: bool = False) -> None:
    import os

    os.makedirs(path, mode, exist_ok=exist_ok)
