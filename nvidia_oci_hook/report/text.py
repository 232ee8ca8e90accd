from __future__ import annotations

from collections.abc import Sequence

from nvidia_oci_hook.findings import Severity
from nvidia_oci_hook.lint import FileResult


def summarize(results: Sequence[FileResult]) -> dict[str, int]:
    counts = {severity.label: 0 for severity in sorted(Severity, reverse=True)}
    for result in results:
        for finding in result.findings:
            counts[finding.severity.label] += 1
    return counts


def render_text(
    results: Sequence[FileResult], color: bool = False, looked_at: Sequence[tuple[str, str]] = (), node_root: str = ""
) -> str:
    """node_root: where the node's files were read, when not at /; every path is still the node's own name."""
    colors = {Severity.ERROR: "\033[31m", Severity.WARNING: "\033[33m", Severity.INFO: "\033[36m"}
    lines = []
    if looked_at:
        lines.append(f"looked at (the node's paths, read under {node_root}):" if node_root else "looked at:")
        width = max(len(path) for path, _ in looked_at)
        lines.extend(f"  {path:<{width}}  {what}" for path, what in looked_at)
        lines.append("")
    for result in results:
        for finding in result.findings:
            where = finding.path
            if finding.line is not None:
                where += f":{finding.line}" + (f":{finding.column}" if finding.column is not None else "")
            label = finding.severity.label
            if color:
                label = f"{colors[finding.severity]}{label}\033[0m"
            pointer = f" [{finding.pointer}]" if finding.pointer else ""
            lines.append(f"{where}: {label} {finding.code} {finding.name}: {finding.message}{pointer}")
            if finding.hint:
                lines.append(f"    fix: {finding.hint}")
    counts = summarize(results)
    files = len(results)
    if any(counts.values()):
        parts = [f"{n} {label}{'s' if n != 1 else ''}" for label, n in counts.items() if n]
        lines.append(f"{', '.join(parts)} in {files} file{'s' if files != 1 else ''}")
    else:
        lines.append(f"no problems in {files} file{'s' if files != 1 else ''}")
    return "\n".join(lines) + "\n"
