"""What the engine reports: the edits it made and the problems it could not reconcile.

Both carry a rule code from the catalogue (`nvidia-oci-hook explain CODE`), so a problem reads the same in the
wrapper's log, in the prestart guard's refusal and in `lint`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional


# The code of the edits that apply a CDI request: a spec that lacks them lacks the whole device.
CDI_NOT_APPLIED = "REC006"


class EngineFinding:
    """A problem left in the spec. gpu_unusable: the container would start, but could not use its GPU."""

    __slots__ = ("code", "gpu_unusable", "hint", "message", "pointer", "severity")

    def __init__(
        self,
        code: str,
        severity: str,
        pointer: str,
        message: str,
        hint: Optional[str] = None,
        gpu_unusable: bool = False,
    ) -> None:
        self.code = code
        self.severity = severity  # "error", "warning" or "info"
        self.pointer = pointer
        self.message = message
        self.hint = hint
        self.gpu_unusable = gpu_unusable

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "pointer": self.pointer,
            "message": self.message,
            "hint": self.hint,
            "gpu_unusable": self.gpu_unusable,
        }


class Edit:
    """One change to the spec: what was done (message) where (pointer), and the problem it fixes (why).

    code and severity describe that problem as `lint` reports it on a spec that was not reconciled; the
    prestart guard, which cannot edit, reports it that way.
    """

    __slots__ = ("about", "code", "gpu_unusable", "message", "pointer", "severity", "why")

    def __init__(
        self,
        code: str,
        severity: str,
        pointer: str,
        message: str,
        why: str,
        gpu_unusable: bool = False,
        about: Optional[str] = None,
    ) -> None:
        self.code = code
        self.severity = severity
        self.pointer = pointer  # where the edit was made
        self.message = message
        self.why = why
        self.gpu_unusable = gpu_unusable
        # Where the problem shows in the config as given, when that is not where the edit was made (a CDI
        # request's annotation, for the edits that apply it).
        self.about = about

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "pointer": self.pointer, "edit": self.message, "why": self.why}


class Plan:
    """The result of the pipeline: the new config (the input is never modified), the edits and the findings."""

    __slots__ = ("config", "edits", "findings")

    def __init__(self, config: Any, edits: list[Edit], findings: list[EngineFinding]) -> None:
        self.config = config
        self.edits = edits
        self.findings = findings

    @property
    def changed(self) -> bool:
        return bool(self.edits)

    def refusals(self, fail_on: str) -> list[EngineFinding]:
        return refusing(self.findings, fail_on)

    def unapplied(self) -> list[EngineFinding]:
        """The problems of a spec that can no longer be edited: the findings, and each edit as the problem it
        would fix; the edits that apply one CDI request make one problem."""
        result = list(self.findings)
        grouped: dict[str, list[Edit]] = {}
        for edit in self.edits:
            if edit.code == CDI_NOT_APPLIED:
                grouped.setdefault(edit.why, []).append(edit)
                continue
            result.append(
                EngineFinding(
                    edit.code,
                    edit.severity,
                    edit.about or edit.pointer,
                    edit.why,
                    f"start it through nvidia-oci-runtime, which would: {edit.message}",
                    edit.gpu_unusable,
                )
            )
        for why, edits in grouped.items():
            first = edits[0]
            shown = "; ".join(edit.message for edit in edits[:3])
            if len(edits) > 3:
                shown += f"; and {len(edits) - 3} more"
            result.append(
                EngineFinding(
                    first.code,
                    first.severity,
                    first.about or first.pointer,
                    f"{why}: missing {shown}",
                    "start it through nvidia-oci-runtime, or resolve CDI in the engine (containerd >= 1.7, cri-o)",
                    first.gpu_unusable,
                )
            )
        return result


def refusing(findings: list[EngineFinding], fail_on: str) -> list[EngineFinding]:
    """The findings that refuse the container under policy fail_on (see config.FAIL_ON_CHOICES)."""
    if fail_on == "never":
        return []
    return [f for f in findings if f.severity == "error" and (fail_on == "error" or f.gpu_unusable)]
