"""doctor's `driver-root`: which of the driver-root candidates holds the driver, and where its device nodes are.

Everything else doctor judges hangs on this answer: the markers, the stray nodes, the CDI specs and the engines'
configs are right or wrong relative to the root that really holds the driver's user space (`/` for a host
driver, `/run/nvidia/driver` for the GPU Operator's driver container). It is an error when no candidate holds a
driver (GPU containers get no driver files at all) and when two do (the host's and a container's: which one a
container gets depends on who injects it). The fix says which to keep or where to add the root; doctor repairs
nothing here.
"""

from __future__ import annotations

from nvidia_oci_hook.node.checks.base import ERROR, OK, Check, dev_of
from nvidia_oci_hook.node.driver import AMBIGUOUS, FOUND, DriverRootAnswer

NAME = "driver-root"


def driver_root_check(answer: DriverRootAnswer) -> Check:
    facts = {"root": answer.root or "", "status": answer.status}
    if answer.status == FOUND:
        dev_root = answer.dev_root()
        return Check(
            NAME,
            OK,
            f"driver under {answer.root}, device nodes under {dev_of(dev_root)}",
            answer.evidence_lines(),
            facts=facts,
        )
    fix = (
        "keep one driver: uninstall the host driver or disable the GPU Operator's driver container"
        if answer.status == AMBIGUOUS
        else "install the driver, or add its root to driver_roots in /etc/nvidia-oci-hook/config.yaml"
    )
    return Check(
        NAME, ERROR, f"driver root {answer.status}: {answer.reason}", answer.evidence_lines(), fix, facts=facts
    )
