"""What the runtime-facing modes did, as JSON lines in a file and as syslog messages (journald reads those).

Logging never blocks a container: a log that cannot be written is skipped. Nothing is logged for a container
the engine had nothing to say about, so ordinary containers cost no log I/O.
"""

from __future__ import annotations

import time

from nvidia_oci_hook import leanos
from nvidia_oci_hook.engine import jsoncodec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, Optional

    from nvidia_oci_hook.config import Settings
    from nvidia_oci_hook.host import HostView

_SYSLOG_SOCKET = "/dev/log"


def _timestamp() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


def record(settings: Settings, mode: str, entry: dict[str, Any], summary: str, error: bool = False) -> None:
    """One JSON line in the log file and one syslog message: summary is what a person reads first."""
    line = {"time": _timestamp(), "mode": mode, "pid": leanos.getpid(), "summary": summary}
    line.update(entry)
    if settings.log_file:
        try:
            # One write with O_APPEND: lines from containers starting at once never interleave.
            fd = leanos.open(
                settings.log_file, leanos.O_WRONLY | leanos.O_APPEND | leanos.O_CREAT | leanos.O_CLOEXEC, 0o640
            )
            try:
                leanos.write(fd, (jsoncodec.dumps(line) + "\n").encode("utf-8", "replace"))
            finally:
                leanos.close(fd)
        except OSError:
            pass
    if settings.log_syslog and leanos.exists(_SYSLOG_SOCKET):
        import syslog

        syslog.openlog("nvidia-oci-hook", syslog.LOG_PID, syslog.LOG_DAEMON)
        syslog.syslog(syslog.LOG_ERR if error else syslog.LOG_INFO, f"{mode}: {summary}")
        syslog.closelog()


# logrotate's compress is gzip unless compresscmd says otherwise; our configuration keeps it.
_COMPRESSED = (".gz",)


def _rotation_key(base: str, name: str) -> Optional[tuple[int, str, int]]:
    """Where name stands among base's rotated files (smaller: older), or None when it is not one of them.

    logrotate's two naming schemes: numbered (`base.1` is the newest, `base.2.gz` older, ...) and dateext
    (`base-20261201`, `base-20261201-1764547200`, ... with the default and the usual dateformats: the name's
    date sorts as the time). Dated files come first: when both are there, the scheme changed, and either order is a
    guess; a log read whole rarely mixes them.
    """
    if not name.startswith(base) or len(name) == len(base):
        return None
    rest = name[len(base) :]
    for extension in _COMPRESSED:
        if rest.endswith(extension):
            rest = rest[: -len(extension)]
            break
    if rest[:1] == "." and rest[1:].isascii() and rest[1:].isdigit():
        return (1, "", -int(rest[1:]))
    stamp = rest[1:]
    if rest[:1] == "-" and stamp[:1].isdigit() and stamp.isascii() and stamp.replace("-", "").isdigit():
        return (0, stamp, 0)
    return None


def log_files(path: str, files: Optional[HostView] = None) -> list[str]:
    """path and its rotated files, oldest first: what `nvidia-oci-hook log` reads, in the order it was written.
    files: where path is (the node's under a host root); this machine's by default."""
    directory, base = leanos.split(path)
    try:
        names = files.listdir(directory or ".") if files is not None else leanos.listdir(directory or ".")
    except (OSError, ValueError):
        names = []
    rotated = []
    for name in names:
        key = _rotation_key(base, name)
        if key is not None:
            rotated.append((key, leanos.join(directory, name)))
    rotated.sort()
    return [found for _, found in rotated] + [path]


def read_all_entries(path: str, files: Optional[HostView] = None) -> list[dict[str, Any]]:
    """The entries of path and of its rotated files, oldest first. A rotated file that a rotation running at the
    same time removed is skipped; path itself missing with nothing rotated is the caller's OSError."""
    found_files = log_files(path, files)
    entries: list[dict[str, Any]] = []
    for found in found_files:
        try:
            entries.extend(read_entries(found, files))
        except FileNotFoundError:
            if found == path and len(found_files) == 1:
                raise
        except OSError as exc:
            if exc.filename is None:  # gzip's BadGzipFile names no file: say which one it was
                raise OSError(exc.errno, str(exc), found) from None
            raise
    return entries


def _open_raw(path: str, files: Optional[HostView]) -> IO[bytes]:
    if files is None:
        return open(path, "rb")
    from nvidia_oci_hook.io import ReadError

    try:
        return open(files.open_read(path), "rb")
    except ReadError as exc:
        missing = not files.lexists(path)
        raise (FileNotFoundError if missing else OSError)(2 if missing else 5, str(exc), path) from None


def read_entries(path: str, files: Optional[HostView] = None) -> list[dict[str, Any]]:
    """The entries of one log file (compressed or not); a line that is not one of ours (cut short by a full disk,
    say) is skipped."""
    with _open_raw(path, files) as raw:
        if not path.endswith(".gz"):
            return _entries(raw)
        import gzip  # here: only the log viewer reads rotated files, the writers on the runtime path never do

        with gzip.GzipFile(fileobj=raw, mode="rb") as unpacked:
            return _entries(unpacked)  # type: ignore[arg-type]


def _entries(raw: IO[bytes]) -> list[dict[str, Any]]:
    import io

    entries = []
    handle = io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
    try:
        for line in handle:
            try:
                entry = jsoncodec.loads(line)
            except jsoncodec.JSONDecodeError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("summary"), str):
                entries.append(entry)
    except EOFError:
        pass  # a compressed file cut short (a full disk while gzip wrote it): what precedes is still there
    finally:
        handle.detach()  # the file is its opener's to close
    return entries


def format_entries(entries: list[dict[str, Any]]) -> str:
    lines = []
    for entry in entries:
        lines.append(f"{entry.get('time', '?')}  {entry.get('mode', '?')}  {entry['summary']}")
        previous_why = None
        for edit in entry.get("edits") or []:
            lines.append(f"    edit  {edit.get('code')}  {edit.get('pointer')}: {edit.get('edit')}")
            if edit.get("why") != previous_why:  # the edits of one CDI request share theirs
                lines.append(f"          why: {edit.get('why')}")
            previous_why = edit.get("why")
        for finding in entry.get("findings") or []:
            where = f"{finding.get('code')}  {finding.get('pointer')}"
            lines.append(f"    {finding.get('severity')}  {where}: {finding.get('message')}")
            if finding.get("hint"):
                lines.append(f"          fix: {finding['hint']}")
    return "\n".join(lines) + ("\n" if lines else "")
