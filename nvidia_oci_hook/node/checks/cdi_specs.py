"""doctor's `cdi-specs`: whether the CDI specs in the configured spec directories name paths this node has.

A spec generated for one driver root (`/run/nvidia/driver/dev/nvidiactl`) on a node whose driver is on another
(`/`) makes every container asking for its devices fail: the engine injects paths that do not exist. The verdict
is `cdi reconcile`'s plan: each path moved to the driver root that holds it, or the reason it cannot be. The fix
rewrites each spec that can be reconciled in full (`--fix` does, one repair per file, atomically, and not
where the file changed since it was planned); the others are regenerated.
"""

from __future__ import annotations

from typing import Any, Callable

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.base import ERROR, OK, Check, Repair

NAME = "cdi-specs"


def cdi_specs_check(host: HostView, settings: Settings) -> Check:
    from nvidia_oci_hook.node.cdi_reconcile.plans import plan_spec_dirs, write_plans

    plans = plan_spec_dirs(host, settings.cdi_spec_dirs, settings.driver_roots)
    changes = [f"{plan.path}: {change}" for plan in plans for change in plan.changes]
    problems = [f"{plan.path}: {problem}" for plan in plans for problem in plan.problems]
    fixable = [plan for plan in plans if plan.new_text is not None]
    counts = {"unreconciled_specs": sum(bool(plan.changes or plan.problems) for plan in plans)}
    if not changes and not problems:
        return Check(NAME, OK, f"{len(plans)} CDI spec file(s) match this node's driver root", counts=counts)
    repairs = [
        Repair(f"rewrite {plan.path} ({len(plan.changes)} change(s))", _writer(host, plan, write_plans))
        for plan in fixable
    ]
    first = (problems or changes)[0]
    return Check(
        NAME,
        ERROR,
        f"CDI specs name paths this node does not have: {first}",
        changes + problems,
        "nvidia-oci-hook cdi reconcile (or regenerate: nvidia-ctk cdi generate)",
        repairs,
        counts=counts,
    )


def _writer(host: HostView, plan: Any, write_plans: Callable[[HostView, list[Any]], None]) -> Callable[[], None]:
    return lambda: write_plans(host, [plan])
