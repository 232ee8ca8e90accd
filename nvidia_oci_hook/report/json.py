from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from nvidia_oci_hook.lint import FileResult
from nvidia_oci_hook.report.text import summarize

JSON_FORMAT_VERSION = 1


def as_dict(results: Sequence[FileResult]) -> dict[str, Any]:
    return {
        "version": JSON_FORMAT_VERSION,
        "files": [
            {
                "path": result.path,
                "kind": result.kind,
                "findings": [
                    {
                        "code": f.code,
                        "severity": f.severity.label,
                        "pointer": f.pointer,
                        "line": f.line,
                        "message": f.message,
                        "hint": f.hint,
                    }
                    for f in result.findings
                ],
            }
            for result in results
        ],
        "summary": summarize(results),
    }


def render_json(
    results: Sequence[FileResult], color: bool = False, looked_at: Sequence[tuple[str, str]] = (), node_root: str = ""
) -> str:
    report = as_dict(results)
    if looked_at:  # lint --node: every place looked at, and what was found there
        report["looked_at"] = [{"path": path, "found": what} for path, what in looked_at]
    if node_root:  # the node's paths (every "path" above) were read under this directory
        report["host_root"] = node_root
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"
