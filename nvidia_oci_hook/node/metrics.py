"""`doctor --format prometheus`: the checks' verdicts and counts, and the runtime modes' log, as the Prometheus text
exposition format (version 0.0.4) that node_exporter's textfile collector reads.

Written by hand rather than with prometheus_client (docs/fleet/metrics.md says why): every family here is a gauge or a
counter without timestamps, so the format needs only HELP, TYPE, samples and the escaping of label values.
A number a check could not judge is left out, never written as 0: absent means unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.base import ERROR, OK, UNKNOWN, WARNING, Check

PREFIX = "nvidia_oci_hook_"
STATUS_VALUES = {OK: 0, WARNING: 1, ERROR: 2, UNKNOWN: 3}
# The modes the runtime-facing code logs under: the wrapper and the precreate filter edit specs; the guard
# (logged as prestart whichever stage runs it) can only refuse. Their series exist at 0 before the first entry,
# so that rate() and increase() see the first one.
EDITING_MODES = ("runtime", "precreate")
MODES = (*EDITING_MODES, "prestart")

# (metric, check, count key, help): one gauge per count a check fills.
_COUNTS = (
    ("driver_version_mismatches", "driver-versions", "mismatched_roots", "Driver roots whose user-space "
     "libraries, as the .so.1 links and the linker cache select them, are not the loaded kernel module's version "
     "(driver-versions check)."),
    ("stray_device_nodes", "stray-device-nodes", "stray_nodes", "NVIDIA device nodes in the host's /dev that "
     "belong under the driver root's dev/ (stray-device-nodes check)."),
    ("validation_markers_contradicting", "validation-markers", "markers", "GPU Operator validation markers that "
     "contradict the evidence or are older than the last boot (validation-markers check)."),
    ("containers_gpu_access_lost", "gpu-access", "containers_lost", "Running containers whose device cgroup no "
     "longer lets them open the NVIDIA nodes their spec gave them (gpu-access check)."),
    ("cdi_specs_unreconciled", "cdi-specs", "unreconciled_specs", "CDI spec files that cdi reconcile would "
     "rewrite or cannot reconcile (cdi-specs check)."),
    ("device_plugin_allocations", "device-plugins", "allocations", "Entries of the kubelet's device-plugin "
     "checkpoint: a device plugin's answer to one container for one resource (device-plugins check)."),
    ("device_plugin_allocations_missing_host_path", "device-plugins", "allocations_missing_host_path",
     "Allocations to pods still on the node that name device host paths the node does not have: containerd "
     "refuses those containers, cri-o runs them without the device (device-plugins check)."),
    ("device_plugin_unresolved_cdi_names", "device-plugins", "unresolved_cdi_names", "CDI device names that "
     "device plugins handed pods still on the node and that the node's CRI engine cannot resolve "
     "(device-plugins check)."),
    ("device_plugin_stale_allocations", "device-plugins", "stale_allocations", "Allocations the kubelet's "
     "checkpoint still holds for pods that are gone (device-plugins check)."),
    ("device_plugin_unregistered_resources", "device-plugins", "unregistered_resources", "nvidia.com resources "
     "that static pods ask for and no device plugin registered: the kubelet runs those pods without them "
     "(device-plugins check)."),
)  # fmt: skip

Value = Union[int, float]


@dataclass(frozen=True)
class LogCounts:
    """What the runtime modes' log says they did, by mode (and by edit code)."""

    reconciled: dict[str, int]
    edits: dict[tuple[str, str], int]
    refused: dict[str, int]


def count_log(entries: Iterable[dict[str, Any]]) -> LogCounts:
    """Containers reconciled (edits applied), edits by code, containers refused: a refused container's edits
    were never applied, so they count as neither."""
    reconciled = dict.fromkeys(EDITING_MODES, 0)
    refused = dict.fromkeys(MODES, 0)
    edits: dict[tuple[str, str], int] = {}
    for entry in entries:
        mode = entry.get("mode")
        if not isinstance(mode, str):
            continue
        if entry.get("refused") is True:
            refused[mode] = refused.get(mode, 0) + 1
            continue
        applied = [edit for edit in entry.get("edits") or [] if isinstance(edit, dict)]
        if not applied:
            continue
        reconciled[mode] = reconciled.get(mode, 0) + 1
        for edit in applied:
            code = edit.get("code")
            key = (mode, code if isinstance(code, str) else "")
            edits[key] = edits.get(key, 0) + 1
    return LogCounts(reconciled, edits, refused)


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: Value) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


class _Exposition:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: Sequence[tuple[dict[str, str], Value]]) -> None:
        if not samples:
            return
        self.lines.append(f"# HELP {PREFIX}{name} {help_text}")  # our own words: no backslash, no newline
        self.lines.append(f"# TYPE {PREFIX}{name} {kind}")
        for labels, value in samples:
            shown = ",".join(f'{key}="{_label_value(text)}"' for key, text in labels.items())
            self.lines.append(
                f"{PREFIX}{name}{{{shown}}} {_number(value)}" if shown else f"{PREFIX}{name} {_number(value)}"
            )

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def render_prometheus(
    checks: Sequence[Check], version: str, finished: float, duration: float, log: Optional[LogCounts]
) -> str:
    """The metrics of one doctor run: finished is the unix time it ended, duration its length in seconds; log is
    None when there is no log to read (the counters are then absent)."""
    out = _Exposition()
    by_name = {check.name: check for check in checks}
    out.family(
        "check_status",
        "gauge",
        "Status of each doctor check that ran: 0 ok, 1 warning, 2 error, 3 unknown.",
        [({"check": check.name}, STATUS_VALUES[check.status]) for check in checks],
    )
    for metric, name, key, help_text in _COUNTS:
        check = by_name.get(name)
        if check is not None and key in check.counts:
            out.family(metric, "gauge", help_text, [({}, check.counts[key])])
    engines = by_name.get("engines")
    unresolvable = engines.counts_by_engine.get("cdi_unresolvable_names", {}) if engines else {}
    out.family(
        "cdi_unresolvable_names",
        "gauge",
        "CDI device names declared in the spec files an engine reads that it cannot resolve (a same-directory "
        "conflict dropped them, or its CDI library refuses their spec), for each engine found.",
        [({"engine": engine}, count) for engine, count in sorted(unresolvable.items())],
    )
    root = by_name.get("driver-root")
    if root is not None and root.facts:
        out.family(
            "driver_root_info",
            "gauge",
            "The driver root doctor found (status found, ambiguous or none; root empty unless found), always 1.",
            [({"root": root.facts["root"], "status": root.facts["status"]}, 1)],
        )
    out.family("build_info", "gauge", "The nvidia-oci-hook version that wrote these metrics, always 1.",
               [({"version": version}, 1)])  # fmt: skip
    out.family("last_run_timestamp_seconds", "gauge", "Unix time the doctor run finished.", [({}, finished)])
    out.family("doctor_duration_seconds", "gauge", "How long the doctor run took, in seconds.", [({}, duration)])
    if log is not None:
        out.family(
            "containers_reconciled_total",
            "counter",
            "Containers whose spec the runtime wrapper or the precreate filter edited, from the log, by mode.",
            [({"mode": mode}, count) for mode, count in sorted(log.reconciled.items())],
        )
        out.family(
            "edits_total",
            "counter",
            "Edits applied to containers' specs, from the log, by mode and code.",
            [({"mode": mode, "code": code}, count) for (mode, code), count in sorted(log.edits.items())],
        )
        out.family(
            "containers_refused_total",
            "counter",
            "Containers the wrapper, the precreate filter or the guard refused, from the log, by mode.",
            [({"mode": mode}, count) for mode, count in sorted(log.refused.items())],
        )
    return out.text()


def read_log(path: Optional[str], files: Optional[HostView] = None) -> Optional[LogCounts]:
    """The counts of the log at path (a node path, read through files); None when there is none or it cannot be
    read (the counters are then absent rather than 0, which would read as a reset)."""
    from nvidia_oci_hook.runtime.logbook import read_all_entries

    if not path:
        return None
    try:
        # The rotated files too: a rotation alone must not look like a counter reset. Only the deletion of the
        # oldest one lowers the counts, which rate() and increase() take for a reset, as they should.
        return count_log(read_all_entries(path, files))
    except (OSError, EOFError, UnicodeError):
        return None
