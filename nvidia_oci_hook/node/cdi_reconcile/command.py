"""`cdi reconcile`: rewrite CDI spec files so that injecting their devices succeeds on this node.

A spec generated for one driver root (the GPU Operator's `/run/nvidia/driver`, or `/`) names host paths that do
not exist once the driver lives under the other root, and the engine then fails every container that requests
one of its devices.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from typing import TextIO

from nvidia_oci_hook.host import DEFAULT_DRIVER_ROOTS, HostView
from nvidia_oci_hook.kinds.cdi.directories import DEFAULT_SPEC_DIRS
from nvidia_oci_hook.node.cdi_reconcile.plans import SpecPlan, plan_spec_dirs, write_plans
from nvidia_oci_hook.node.driver import FOUND, resolve_driver_root


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _diff(plan: SpecPlan) -> str:
    assert plan.old_text is not None and plan.new_text is not None
    lines = difflib.unified_diff(
        plan.old_text.splitlines(keepends=True),
        plan.new_text.splitlines(keepends=True),
        plan.path,
        f"{plan.path} (reconciled)",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def run(
    spec_dirs: Sequence[str],
    host_root: str,
    driver_roots: Sequence[str],
    dry_run: bool,
    diff: bool,
    out: TextIO,
    err: TextIO,
) -> int:
    """Reconcile the spec files of spec_dirs; 0 when nothing is left unreconciled, 1 when a problem remains."""
    if not os.path.isdir(host_root):
        err.write(f"--host-root {host_root}: not a directory\n")
        return 1
    host = HostView(host_root)
    writing = not (dry_run or diff)
    if writing and host.read_only():
        err.write(f"--host-root {host_root}: read-only file system: nothing was changed\n")
        return 2
    roots = tuple(driver_roots) or DEFAULT_DRIVER_ROOTS
    directories = list(spec_dirs) or list(DEFAULT_SPEC_DIRS)
    answer = resolve_driver_root(host, roots)
    if answer.status == FOUND:
        err.write(f"driver root: {answer.root} ({answer.reason})\n")
    else:
        err.write(f"driver root: {answer.status} ({answer.reason}); nothing is moved\n")
    if host.rooted:
        err.write(f"the node read under {host_root}; every path below is the node's own\n")
    plans = plan_spec_dirs(host, directories, roots)
    if writing:
        write_plans(host, plans)
    verb = "changed" if writing else "would change"
    for plan in plans:
        if plan.changed:
            for change in plan.changes:
                err.write(f"{verb} {plan.path}: {change}\n")
            if diff:
                out.write(_diff(plan))
        for problem in plan.problems:
            err.write(f"problem {plan.path}: {problem}; left unchanged\n")
    changed = sum(1 for plan in plans if plan.changed)
    blocked = sum(1 for plan in plans if plan.problems)
    if not changed and not blocked:
        err.write(f"nothing to do: {_plural(len(plans), 'spec file')} in {', '.join(directories)}\n")
    else:
        err.write(f"{_plural(len(plans), 'spec file')}: {changed} {verb}, {blocked} left unchanged with problems\n")
    return 1 if blocked else 0
