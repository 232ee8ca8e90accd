"""What every doctor check is made of: the statuses, the verdict (`Check`) with the repairs `--fix` may perform,
and what a check may read (`Inputs`). The check modules build on this alone, so that none of them imports doctor
and doctor can import them all.
"""

from __future__ import annotations

import contextlib
import posixpath
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.driver import DriverRootAnswer

OK = "ok"
WARNING = "warning"
ERROR = "error"
UNKNOWN = "unknown"
# Problems first: the report lists them so, and a verdict made of several takes the first.
RANK = {ERROR: 0, WARNING: 1, UNKNOWN: 2, OK: 3}


@dataclass
class Repair:
    description: str
    perform: Callable[[], None]


@dataclass
class Check:
    name: str
    status: str
    summary: str
    evidence: list[str] = field(default_factory=list)
    fix: Optional[str] = None
    repairs: list[Repair] = field(default_factory=list)
    # The numbers behind the verdict, kept apart from the words so that the metrics never parse a summary. A
    # check that could not judge leaves its count out: absent means unknown, never 0.
    counts: dict[str, int] = field(default_factory=dict)
    counts_by_engine: dict[str, dict[str, int]] = field(default_factory=dict)  # count -> engine -> value
    facts: dict[str, str] = field(default_factory=dict)  # what the check found, as labels (the driver root)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "summary": self.summary,
            "evidence": self.evidence,
            "fix": self.fix,
            "repairs": [repair.description for repair in self.repairs],
            "counts": {**self.counts, **self.counts_by_engine},
            "facts": self.facts,
        }


@dataclass(frozen=True)
class Inputs:
    """One doctor run: the node, the driver root found on it (read once, judged by many checks), the tool's
    settings and doctor's options."""

    host_root: str
    host: HostView
    answer: DriverRootAnswer
    settings: Settings
    nvml: bool = True  # False: NVML would answer for this machine, not for the node under host_root
    nvml_library: Optional[str] = None
    restore_device_access: bool = False
    runtime_roots: tuple[str, ...] = ()


def dev_of(root: Optional[str]) -> str:
    return posixpath.join(root or "/", "dev")


def unlink(host: HostView, path: str) -> Callable[[], None]:
    def perform() -> None:
        with contextlib.suppress(FileNotFoundError):  # gone already: what the repair wanted
            host.unlink(path)

    return perform
