"""`reconcile`: the wrapper's plan for one config.json, run by hand, with the edits shown and a diff on request."""

from __future__ import annotations

import difflib
import json
import sys

from nvidia_oci_hook import io
from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.engine.pipeline import plan
from nvidia_oci_hook.host import HostView

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


def _indent_of(text: str) -> Optional[int]:
    """The indentation the file uses (None: compact), so that --in-place keeps the file's style."""
    for line in text.splitlines()[1:3]:
        stripped = line.lstrip(" ")
        if stripped and len(stripped) < len(line):
            return len(line) - len(stripped)
    return None


def _render(value: Any, indent: Optional[int]) -> str:
    if indent is None:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=False, indent=indent) + "\n"


def reconcile_file(
    path: str,
    settings: Settings,
    host_root: str,
    *,
    in_place: bool = False,
    output: Optional[str] = None,
    diff: bool = False,
) -> int:
    raw = io.read_bounded(path)
    try:
        text = raw.decode("utf-8")
        config = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a JSON config: {exc}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: not a config.json: the top level is not an object")
    result = plan(config, HostView(host_root), settings)
    for edit in result.edits:
        sys.stderr.write(f"edit     {edit.code:<8} {edit.pointer}: {edit.message}\n         why: {edit.why}\n")
    for finding in result.findings:
        hint = f"\n         fix: {finding.hint}" if finding.hint else ""
        sys.stderr.write(f"{finding.severity:<8} {finding.code:<8} {finding.pointer or '/'}: {finding.message}{hint}\n")
    sys.stderr.write(
        f"{len(result.edits)} edit{'s' if len(result.edits) != 1 else ''}, "
        f"{len(result.findings)} problem{'s' if len(result.findings) != 1 else ''} left\n"
    )
    indent = _indent_of(text)
    if diff:
        before = json.dumps(config, ensure_ascii=False, indent=2).splitlines(keepends=True)
        after = json.dumps(result.config, ensure_ascii=False, indent=2).splitlines(keepends=True)
        label = "-" if path == "-" else path
        for line in difflib.unified_diff(before, after, f"{label} (as given)", f"{label} (reconciled)"):
            sys.stdout.write(line if line.endswith("\n") else line + "\n")
    elif in_place:
        if result.changed:
            io.write_atomic(path, _render(result.config, indent).encode("utf-8"))
    elif output is not None:
        io.write_atomic(output, _render(result.config, 2 if indent is None else indent).encode("utf-8"))
    else:
        sys.stdout.write(_render(result.config, 2))
    return 1 if any(finding.severity == "error" for finding in result.findings) else 0
