"""The words the runtime-facing modes use: one line that refuses a container, and the log entry."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    from nvidia_oci_hook.engine.records import Edit, EngineFinding, Plan


def _container(container_id: Optional[str]) -> str:
    return f"container {container_id}" if container_id else "the container"


def refusal(container_id: Optional[str], findings: list[EngineFinding]) -> str:
    """One line: the first reason, where it is, what to do, and how many more there are."""
    first = findings[0]
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    hint = f"; fix: {first.hint}" if first.hint else ""
    return (
        f"nvidia-oci-hook: refusing {_container(container_id)}: [{first.code}] {first.message} "
        f"at {first.pointer or '/'}{hint}{more}"
    )


def headline(container_id: Optional[str], plan: Plan) -> str:
    parts = []
    if plan.edits:
        parts.append(f"{len(plan.edits)} edit{'s' if len(plan.edits) != 1 else ''}")
    if plan.findings:
        parts.append(f"{len(plan.findings)} finding{'s' if len(plan.findings) != 1 else ''}")
    first = plan.edits[0].message if plan.edits else plan.findings[0].message
    return f"{_container(container_id)}: {', '.join(parts)}; first: {first}"


def log_entry(
    container_id: Optional[str], bundle: Optional[str], edits: list[Edit], findings: list[EngineFinding]
) -> dict[str, Any]:
    return {
        "container": container_id,
        "bundle": bundle,
        "edits": [edit.as_dict() for edit in edits],
        "findings": [finding.as_dict() for finding in findings],
    }
