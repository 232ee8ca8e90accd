"""RootedView: the node under a host root other than "/", every path resolved inside it.

Each component is resolved here, from directory descriptors: an absolute link target restarts at the root, ".."
stops at it, more than 40 links is ELOOP, and the final call names one component relative to its resolved
directory without following a link (O_NOFOLLOW, dir_fd=), then checks (fstat) that it reached the object the
resolution found, so the kernel never resolves a node's link against this machine's "/". Only HostView(root)
makes one, for a root that is not "/"; nothing else in the package joins a root and a path.
"""

from __future__ import annotations

import fnmatch
import os
import stat

from nvidia_oci_hook.host import _EINVAL, HostView

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

_MAX_LINKS = 40  # the kernel's own limit on links followed in one lookup
_ENOTDIR, _ELOOP, _ESTALE = 20, 40, 116  # Linux's, as in the host package
_DIRECTORY_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Descriptors of resolved directories kept for one run; a node's /proc has a directory per process.
_MAX_OPEN_DIRECTORIES = 256
_GLOB_MAGIC = "*?["


class RootedView(HostView):
    rooted = True

    def __init__(self, root: str = "/") -> None:
        super().__init__(root)
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

    # -- the operations, each on a resolved directory ----------------------------------------------------------

    def canonical(self, path: str) -> Optional[str]:
        if self.stat(path) is None:
            return None
        try:
            return self._walk(path, True)[2]
        except (OSError, ValueError):
            return None

    def lookup(self, path: str, follow: bool = True) -> os.stat_result:
        if not path.startswith("/"):
            raise OSError(_EINVAL, "not an absolute node path", path)
        fd, name, _ = self._walk(path, follow)
        return os.stat(name, dir_fd=fd, follow_symlinks=False)

    def readlink(self, path: str) -> str:
        fd, name, _ = self._walk(path, False)
        return os.readlink(name, dir_fd=fd)

    def listdir(self, path: str) -> list[str]:
        fd = self._open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    def glob(self, pattern: str) -> list[str]:
        matches = ["/"]
        for part in [p for p in pattern.split("/") if p]:
            following: list[str] = []
            for base in matches:
                if not any(c in part for c in _GLOB_MAGIC):
                    candidate = os.path.join(base, part)
                    if self.lexists(candidate):
                        following.append(candidate)
                    continue
                for name in self.list_dir(base):
                    if name.startswith(".") and not part.startswith("."):
                        continue
                    if fnmatch.fnmatchcase(name, part):
                        following.append(os.path.join(base, name))
            matches = following
        return sorted(matches)

    def write_atomic(self, path: str, data: bytes) -> None:
        from nvidia_oci_hook import io

        self._changed()
        fd, name, _ = self._walk(path, False)
        directory = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
        try:
            io.write_atomic(name, data, dir_fd=directory)
        finally:
            os.close(directory)

    def makedirs(self, path: str, mode: int = 0o755) -> None:
        self._changed()
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
        self._changed()
        fd, name, _ = self._walk(path, False)
        os.symlink(target, name, dir_fd=fd)

    def unlink(self, path: str) -> None:
        self._changed()
        fd, name, _ = self._walk(path, False)
        os.unlink(name, dir_fd=fd)


def _joined(resolved: list[str], last: str = "") -> str:
    parts = [*resolved, last] if last else resolved
    return "/" + "/".join(parts)
