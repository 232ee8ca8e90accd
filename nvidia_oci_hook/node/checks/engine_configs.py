"""doctor's `engine-configs`: `lint --node`'s errors, over every document that decides what a GPU container gets
on this node (the engines' configurations, hooks directories, CDI spec directories).

The rules already say, with a stable code and the exact place, what each engine will do with its documents
(a hook it ignores, a CDI spec its library refuses, a device path the node lacks); doctor reports their errors
as one check, the first twenty listed, so that a healthy node is one that lint --node passes too. The fix is
each rule's own, shown by `nvidia-oci-hook lint --node`; doctor repairs nothing here.
"""

from __future__ import annotations

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.node.checks.base import ERROR, OK, Check

NAME = "engine-configs"
SHOWN = 20


def engine_configs_check(host_root: str, settings: Settings) -> Check:
    from nvidia_oci_hook.findings import Severity
    from nvidia_oci_hook.lint import LintOptions, lint_paths

    # The toolkit's config.toml has a check of its own (nvidia-toolkit): its findings are not counted twice.
    options = LintOptions(
        host_root=host_root, driver_roots=settings.driver_roots, node=True, settings=settings, ignore=("NCT",)
    )
    run = lint_paths([], options)
    errors = [
        f"{finding.path}{':' + str(finding.line) if finding.line else ''}: {finding.code} {finding.message}"
        for result in run.files
        for finding in result.findings
        if finding.severity >= Severity.ERROR
    ]
    if not errors:
        return Check(NAME, OK, f"lint --node: no error in {len(run.files)} document(s)")
    return Check(
        NAME,
        ERROR,
        f"lint --node: {len(errors)} error{'s' if len(errors) != 1 else ''}; first: {errors[0]}",
        errors[:SHOWN] + ([f"and {len(errors) - SHOWN} more"] if len(errors) > SHOWN else []),
        f"nvidia-oci-hook lint --node --host-root {host_root} shows each with its fix",
    )
