"""doctor's `nvidia-toolkit`: NVIDIA Container Toolkit's config.toml, as the release on the node reads it, against
the node.

The file decides what happens to every GPU container that goes through NVIDIA's runtime or its legacy hook: the
mode, the driver root of the legacy path (`nvidia-container-cli.root`: seed 000's failure has a second home
here, the GPU Operator writing `/run/nvidia/driver` on a node whose driver is on `/`), the runtimes, the hook's
and the CLI's paths. The check lints each file in effect (found as `lint --node` finds them: the engines' NVIDIA
handlers and the wrappers they run) with the NCT rules and reports their errors and warnings; each rule's fix is
shown by `nvidia-oci-hook lint --node --select NCT`. A node with no toolkit is fine: nothing goes through it.
"""

from __future__ import annotations

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.base import ERROR, OK, WARNING, Check

NAME = "nvidia-toolkit"
SHOWN = 20


def toolkit_check(host: HostView, settings: Settings) -> Check:
    from nvidia_oci_hook.findings import Severity
    from nvidia_oci_hook.kinds.collection import bound
    from nvidia_oci_hook.kinds.loading import load_document
    from nvidia_oci_hook.lint import LintOptions, active_rules, lint_document
    from nvidia_oci_hook.node.engines import runtime_handlers
    from nvidia_oci_hook.node.toolkit import read_toolkit
    from nvidia_oci_hook.rules.base import Context

    options = LintOptions(host_root=host.root, driver_roots=settings.driver_roots, select=("NCT",), node=True)
    reading = read_toolkit(host, bound(load_document, host), runtime_handlers(host))
    if not reading.documents:
        return Check(NAME, OK, "no NVIDIA Container Toolkit on this node: no GPU container goes through it")
    release = reading.release.version if reading.release and reading.release.version else None
    rules = active_rules(options)
    findings = []
    for document in reading.documents:
        context = Context(host=host, driver_roots=settings.driver_roots, settings=settings, toolkit_release=release)
        findings.extend(lint_document(document, rules, context))
    errors = [f for f in findings if f.severity >= Severity.ERROR]
    warnings = [f for f in findings if f.severity == Severity.WARNING]
    paths = ", ".join(document.path for document in reading.documents)
    judged = f"toolkit {release}" if release else "the newest toolkit modelled (release not found)"
    lines = [
        f"{f.path}{':' + str(f.line) if f.line else ''}: {f.severity.label} {f.code} {f.message}"
        for f in (*errors, *warnings)
    ]
    evidence = [f"{path}: {what}" for path, what in reading.looked] + lines[:SHOWN]
    if len(lines) > SHOWN:
        evidence.append(f"and {len(lines) - SHOWN} more")
    counts = {"errors": len(errors), "warnings": len(warnings)}
    if not errors and not warnings:
        return Check(NAME, OK, f"{paths}: as {judged} reads it, nothing wrong", evidence, counts=counts)
    first = errors[0] if errors else warnings[0]
    return Check(
        NAME,
        ERROR if errors else WARNING,
        f"{paths}, as {judged} reads it: {len(errors)} error(s), {len(warnings)} warning(s); first: {first.code} "
        f"{first.message}",
        evidence,
        f"nvidia-oci-hook lint --node --select NCT --host-root {host.root} shows each with its fix",
        counts=counts,
    )
