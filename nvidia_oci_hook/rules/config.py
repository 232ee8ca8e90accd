"""CFG: general config.json values that the runtime treats differently from what the schema says."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.document import OCI_CONFIG
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.devices import config

# Propagation values runc and crun accept beyond the runtime-spec schema's enum.
_RECURSIVE_PROPAGATION = ("rprivate", "rshared", "rslave", "runbindable")


@rule("CFG001", "recursive-rootfs-propagation", Severity.INFO, [OCI_CONFIG], supersedes_schema=True)
def recursive_rootfs_propagation(value: Any, context: Context) -> Iterator[Problem]:
    """linux.rootfsPropagation uses a recursive value outside the runtime-spec schema's enum.

    ## What it checks
    `linux.rootfsPropagation` set to `rslave`, `rshared`, `rprivate` or `runbindable`.

    ## Why it matters
    The runtime-spec schema lists only `private`, `shared`, `slave` and `unbindable`, so schema validators
    (and `--schema-only`) reject the spec; runc and crun accept the recursive forms, and containerd writes
    `rslave` or `rshared` for pods with host-to-container mount propagation. Nothing fails at run time; this
    note explains the schema error.

    ## Example
    `"linux": {"rootfsPropagation": "rslave"}`

    ## Fix
    Nothing, unless the spec must pass a strict validator: then use the non-recursive value, knowing that it
    no longer applies to mounts below the rootfs.
    """
    propagation = config(value, context).linux.get("rootfsPropagation")
    if propagation in _RECURSIVE_PROPAGATION:
        yield Problem(
            "/linux/rootfsPropagation",
            f"rootfsPropagation {propagation!r} is accepted by runc and crun but is not in the runtime-spec "
            "schema's enum (private, shared, slave, unbindable)",
            f"use {propagation[1:]!r} if the spec must pass a schema validator",
        )


@rule("CFG002", "relative-cwd", Severity.ERROR, [OCI_CONFIG])
def relative_cwd(value: Any, context: Context) -> Iterator[Problem]:
    """process.cwd is not an absolute path.

    ## What it checks
    That `process.cwd` starts with `/`, as the runtime-spec requires (its schema only asks for a string).

    ## Why it matters
    runc refuses the container: `Cwd must be an absolute path`.

    ## Example
    `"process": {"cwd": "workspace", "args": ["python", "train.py"]}`

    ## Fix
    Use the absolute path inside the container, for example `/workspace`.
    """
    cwd = config(value, context).process.get("cwd")
    if isinstance(cwd, str) and not cwd.startswith("/"):
        yield Problem("/process/cwd", f"process.cwd {cwd!r} is not absolute: runc refuses to start", f"use '/{cwd}'")
