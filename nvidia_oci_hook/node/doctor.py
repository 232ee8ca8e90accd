"""`doctor`: the node's GPU plumbing checked as a whole, each check with its status, evidence and fix.

The checks run in cause-before-consequence order (where the driver is, what the markers say, what sits in /dev,
what NVML would do, then the CDI specs and engine configs built on all that), and the report lists problems
first, so its first lines name the cause. `--fix` performs only repairs that take nothing the node needs:
markers that contradict the evidence (the operator's validator writes them again), stray nodes that are the
same device as the driver root's own, CDI specs moved to the driver root that holds their paths.

Each check is a module of node/checks/ (its evidence, verdict, repairs and counts); this module only runs them,
in the order of `CHECKS`, orders their verdicts and renders them. Adding a check is one module there and one
entry in `CHECKS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Callable, Optional

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks import (
    cdi_specs,
    dev_char_links,
    device_plugins,
    driver_root,
    driver_versions,
    engine_configs,
    engines,
    gpu_access,
    kernel_module,
    modify_device_files,
    nvml,
    reload_risk,
    stray_device_nodes,
    toolkit,
    validation_markers,
)
from nvidia_oci_hook.node.checks.base import ERROR, OK, RANK, UNKNOWN, WARNING, Check, Inputs
from nvidia_oci_hook.node.driver import resolve_driver_root

# Every check, in the order run_checks runs them: (its name, how it is run on one doctor run's inputs).
CHECKS: tuple[tuple[str, Callable[[Inputs], Check]], ...] = (
    (driver_root.NAME, lambda run: driver_root.driver_root_check(run.answer)),
    (kernel_module.NAME, lambda run: kernel_module.kernel_module_check(run.answer)),
    (driver_versions.NAME, lambda run: driver_versions.driver_versions_check(run.host, run.answer)),
    (validation_markers.NAME, lambda run: validation_markers.markers_check(run.host, run.answer)),
    (stray_device_nodes.NAME, lambda run: stray_device_nodes.stray_nodes_check(run.host, run.answer, run.settings)),
    (modify_device_files.NAME, lambda run: modify_device_files.modify_device_files_check(run.host, run.answer)),
    (dev_char_links.NAME, lambda run: dev_char_links.dev_char_check(run.host, run.answer)),
    (nvml.NAME, lambda run: nvml.nvml_check(run.host, run.answer, run.settings, run.nvml_library, run.nvml)),
    (cdi_specs.NAME, lambda run: cdi_specs.cdi_specs_check(run.host, run.settings)),
    (toolkit.NAME, lambda run: toolkit.toolkit_check(run.host, run.settings)),
    (device_plugins.NAME, lambda run: device_plugins.device_plugins_check(run.host, run.answer, run.settings)),
    (
        gpu_access.NAME,
        lambda run: gpu_access.gpu_access_check(run.host, run.restore_device_access, run.runtime_roots),
    ),
    (reload_risk.NAME, lambda run: reload_risk.reload_risk_check(run.host, run.answer)),
    (engines.NAME, lambda run: engines.engines_check(run.host)),
    # The engines' configs are linted on a fresh view: the repairs above may have changed the node.
    (engine_configs.NAME, lambda run: engine_configs.engine_configs_check(run.host_root, run.settings)),
)
CHECK_NAMES = tuple(name for name, _ in CHECKS)
# The checks without which the node cannot be called healthy; the others may be unknown (NVML not installed).
CORE_CHECKS = (driver_root.NAME, kernel_module.NAME, validation_markers.NAME, stray_device_nodes.NAME)


def run_checks(
    host_root: str,
    settings: Settings,
    nvml: bool = True,
    nvml_library: Optional[str] = None,
    restore_device_access: bool = False,
    runtime_roots: tuple[str, ...] = (),
) -> list[Check]:
    host = HostView(host_root)
    answer = resolve_driver_root(host, settings.driver_roots)
    inputs = Inputs(host_root, host, answer, settings, nvml, nvml_library, restore_device_access, runtime_roots)
    return [check(inputs) for _, check in CHECKS]


def ordered(checks: Sequence[Check]) -> list[Check]:
    return sorted(checks, key=lambda check: RANK[check.status])


def overall(checks: Sequence[Check]) -> str:
    statuses = {check.status for check in checks}
    return ERROR if ERROR in statuses else WARNING if WARNING in statuses else OK


def render_text(checks: Sequence[Check], node_root: str = "") -> str:
    """node_root: where the node was read, when not at /; the paths in the checks are the node's own."""
    lines = []
    for check in ordered(checks):
        lines.append(f"[{check.status}] {check.name}: {check.summary}")
        lines.extend(f"    {line}" for line in check.evidence)
        if check.fix and check.status != OK:
            lines.append(f"    fix: {check.fix}")
    counts = {status: sum(check.status == status for check in checks) for status in (ERROR, WARNING, UNKNOWN, OK)}
    lines.append(
        ", ".join(f"{count} {status}" for status, count in counts.items() if count)
        + f" in {len(checks)} checks"
        + (f" (the node read under {node_root}; every path above is the node's own)" if node_root else "")
    )
    return "\n".join(lines) + "\n"


def render_npd(checks: Sequence[Check]) -> tuple[str, int]:
    """node-problem-detector's custom plugin protocol: one line, exit 0 OK, 1 problem, 2 unknown."""
    problems = [check for check in ordered(checks) if check.status in (ERROR, WARNING)]
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return f"{problems[0].name}: {problems[0].summary}{more}", 1
    unknown = [check for check in checks if check.name in CORE_CHECKS and check.status == UNKNOWN]
    if unknown:
        return f"{unknown[0].name}: {unknown[0].summary}", 2
    if len(checks) == 1:  # doctor --check NAME: that check's own word
        return f"{checks[0].name}: {checks[0].summary}", 2 if checks[0].status == UNKNOWN else 0
    return f"GPU node OK: {checks[0].summary}", 0
