"""What the runtime-facing modes did, as JSON lines in a file and as syslog messages (journald reads those).

Logging never blocks a container: a log that cannot be written is skipped. Nothing is logged for a container
the engine had nothing to say about, so ordinary containers cost no log I/O.
"""

from __future__ import annotations

import os
import time

from nvidia_oci_hook.engine import jsoncodec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nvidia_oci_hook.config import Settings

_SYSLOG_SOCKET = "/dev/log"


def _timestamp() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


def record(settings: Settings, mode: str, entry: dict[str, Any], summary: str, error: bool = False) -> None:
    """One JSON line in the log file and one syslog message: summary is what a person reads first."""
    line = {"time": _timestamp(), "mode": mode, "pid": os.getpid(), "summary": summary}
    line.update(entry)
    if settings.log_file:
        try:
            # One write with O_APPEND: lines from containers starting at once never interleave.
            fd = os.open(settings.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
            try:
                os.write(fd, (jsoncodec.dumps(line) + "\n").encode("utf-8", "replace"))
            finally:
                os.close(fd)
        except OSError:
            pass
    if settings.log_syslog and os.path.exists(_SYSLOG_SOCKET):
        import syslog

        syslog.openlog("nvidia-oci-hook", syslog.LOG_PID, syslog.LOG_DAEMON)
        syslog.syslog(syslog.LOG_ERR if error else syslog.LOG_INFO, f"{mode}: {summary}")
        syslog.closelog()


def read_entries(path: str) -> list[dict[str, Any]]:
    """The log's entries; a line that is not one of ours (cut short by a full disk, say) is skipped."""
    entries = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                entry = jsoncodec.loads(line)
            except jsoncodec.JSONDecodeError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("summary"), str):
                entries.append(entry)
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
