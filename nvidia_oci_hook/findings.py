"""The one type every check reports, whatever the document kind or the rule."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional

# What the engine does with a container a problem is about, where a rule knows it (for the verdict of a pod on
# a node): refuses it, or starts it without a device it asked for.
OUTCOME_REFUSED = "refused"
OUTCOME_WITHOUT_DEVICE = "without-device"


class Severity(enum.IntEnum):
    INFO = 0
    WARNING = 1
    ERROR = 2

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (expected error, warning or info)") from None


@dataclass(frozen=True)
class Problem:
    """What a check yields: where in the document and what is wrong; the rule supplies code and severity."""

    pointer: str
    message: str
    hint: Optional[str] = None
    # For checks over several documents (a directory, a node): the file the pointer is in; None means the
    # document being checked.
    path: Optional[str] = None
    # The containerd series ("1.6", "2.1") the problem is one for: judged as one release (Context's
    # containerd_series), a problem of other series is not reported. None: every series.
    series: Optional[frozenset[str]] = None
    # The engines ("crio", "containerd") a CRI container config's problem is one for: judged for one engine
    # (Context's cri_engine), a problem of the other is not reported. None: both.
    engines: Optional[frozenset[str]] = None
    # OUTCOME_REFUSED or OUTCOME_WITHOUT_DEVICE for the engine(s) the problem is for; None: not said.
    outcome: Optional[str] = None


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    severity: Severity
    path: str
    pointer: str
    message: str
    line: Optional[int] = None
    column: Optional[int] = None
    hint: Optional[str] = None

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.path, self.line or 0, self.column or 0, self.code, self.pointer)
