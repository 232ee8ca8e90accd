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
    from typing import Any, Optional, Union


# Go's encoding/json writes <, > and & so in every string (cri-o's config.json is Go's MarshalIndent with a tab).
_GO_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"))


class _Style:
    """How a config's text is written, so that --in-place and --diff keep it: the indentation (None: compact; a
    number of spaces; a tab), and whether it escapes <, > and & as Go does."""

    def __init__(self, text: str) -> None:
        self.indent: Optional[Union[int, str]] = None
        for line in text.splitlines()[1:3]:
            stripped = line.lstrip(" \t")
            if stripped and len(stripped) < len(line):
                lead = line[: len(line) - len(stripped)]
                self.indent = "\t" if lead.startswith("\t") else len(lead)
                break
        self.go_escapes = any(escape in text for _char, escape in _GO_ESCAPES)
        self.final_newline = text.endswith("\n")

    def render(self, value: Any, indent: Optional[Union[int, str]] = None) -> str:
        """In the text's own style, or indented by indent (then ending with a newline, as a new file does)."""
        own = indent is None
        indent = self.indent if own else indent
        if indent is None:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        else:
            newline = "\n" if self.final_newline or not own else ""
            text = json.dumps(value, ensure_ascii=False, indent=indent) + newline
        if self.go_escapes:
            for char, escape in _GO_ESCAPES:
                text = text.replace(char, escape)
        return text


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
    style = _Style(text)
    if diff:
        # The text as given against the reconciled config in the same style; a compact text is one line, so both
        # sides are then indented, and the label says so.
        label = "-" if path == "-" else path
        if style.indent is None:
            before, after = style.render(config, 2), style.render(result.config, 2)
            given = f"{label} (as given, indented)"
        else:
            before, after, given = text, style.render(result.config), f"{label} (as given)"
        lines = difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), given, f"{label} (reconciled)"
        )
        sys.stderr.flush()  # the summary above, wholly before the diff wherever both streams go
        sys.stdout.write("".join(line if line.endswith("\n") else line + "\n" for line in lines))
        sys.stdout.flush()
    elif in_place:
        if result.changed:
            io.write_atomic(path, style.render(result.config).encode("utf-8"))
    elif output is not None:
        io.write_atomic(output, style.render(result.config, 2 if style.indent is None else None).encode("utf-8"))
    else:
        sys.stdout.write(style.render(result.config, 2))
    return 1 if any(finding.severity == "error" for finding in result.findings) else 0
