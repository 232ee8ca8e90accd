"""Bounded reads: every document this tool reads goes through here."""

from __future__ import annotations

import os
import stat
import sys

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
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise ReadError(f"{path}: cannot open: {_describe(exc)}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ReadError(f"{path}: is a directory")
        if stat.S_ISREG(info.st_mode) and info.st_size > limit:
            raise TooLarge(info.st_size, limit)
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
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
        os.close(fd)
