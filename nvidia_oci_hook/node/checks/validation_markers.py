"""doctor's `validation-markers`: the GPU Operator's markers in /run/nvidia/validations against the evidence.

The device plugin picks its driver root from these markers, so markers that disagree with where the driver
really is break every GPU pod it serves: a partial set (seed 000: toolkit-ready without host-driver-ready on a
host-driver node, and the plugin looks under /run/nvidia/driver), a marker that contradicts the driver root found,
or one older than the last boot that nothing has checked since. Not judged until the driver root is known. The
fix removes those markers (`--fix` does, one repair each); the operator's validator writes them again once its
pods and the device plugin's are deleted.
"""

from __future__ import annotations

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.base import ERROR, OK, UNKNOWN, Check, Repair, unlink
from nvidia_oci_hook.node.driver import FOUND, DriverRootAnswer
from nvidia_oci_hook.node.markers import boot_time, marker_problems

NAME = "validation-markers"


def markers_check(host: HostView, answer: DriverRootAnswer) -> Check:
    if answer.status != FOUND:
        return Check(NAME, UNKNOWN, "not judged: the driver root is not known")
    booted = boot_time(host)
    problems = marker_problems(host, answer, booted)
    note = [] if booted is not None else ["boot time unknown (no /proc/stat btime): staleness not judged"]
    if not problems:
        return Check(NAME, OK, "the validation markers agree with the evidence", note, counts={"markers": 0})
    markers = sorted({problem.marker for problem in problems})
    return Check(
        NAME,
        ERROR,
        problems[0].message,
        [f"{p.marker}: {p.kind}" + ("" if p is problems[0] else f": {p.message}") for p in problems] + note,
        f"rm -f {' '.join(markers)}, then delete the nvidia-operator-validator and "
        "device-plugin pods so that they validate again",
        [Repair(f"remove {marker}", unlink(host, marker)) for marker in markers],
        counts={"markers": len(markers)},
    )
