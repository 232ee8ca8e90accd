"""STA: OCI runtime state documents, as hooks receive them on standard input."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.document import OCI_STATE
from nvidia_oci_hook.rules.base import Context, rule


def _bundle(value: Any) -> Any:
    return value.get("bundle") if isinstance(value, dict) else None


@rule("STA001", "state-bundle-not-absolute", Severity.ERROR, [OCI_STATE])
def state_bundle_not_absolute(value: Any, context: Context) -> Iterator[Problem]:
    """The state's bundle is not an absolute path.

    ## What it checks
    That `bundle` starts with `/`, as the runtime-spec requires.

    ## Why it matters
    A hook finds the container's `config.json` (and from it the rootfs) through `bundle`; a relative path is
    resolved against the hook's working directory, which only runc sets to the bundle.

    ## Example
    `{"ociVersion": "1.0.2", "id": "gpu", "status": "created", "bundle": "bundles/gpu"}`

    ## Fix
    Whatever wrote the state must write the absolute bundle path; runc and crun always do.
    """
    bundle = _bundle(value)
    if isinstance(bundle, str) and not bundle.startswith("/"):
        yield Problem("/bundle", f"bundle {bundle!r} is not an absolute path", "write the absolute bundle path")


@rule("STA002", "state-bundle-missing", Severity.ERROR, [OCI_STATE], needs_host=True)
def state_bundle_missing(value: Any, context: Context) -> Iterator[Problem]:
    """The state's bundle, or its config.json, does not exist on the host.

    ## What it checks
    That `bundle` is a directory under `--host-root` holding `config.json`.

    ## Why it matters
    A prestart or createRuntime hook loads `<bundle>/config.json` to learn the container's devices and mounts;
    without it the hook fails and, for those stages, so does the container. A state saved for later
    inspection no longer matches anything once the container is deleted.

    ## Example
    `"bundle": "/run/containerd/io.containerd.runtime.v2.task/k8s.io/0123abcd"` after the task was deleted.

    ## Fix
    Check the state while the container exists; if the hook runs in another mount namespace (a hook inside a
    container), mount the runtime's state directory into it.
    """
    bundle = _bundle(value)
    if context.host is None or not isinstance(bundle, str) or not bundle.startswith("/"):
        return
    identity = context.host.identity(bundle)
    if identity is None or identity.type != "directory":
        what = "does not exist" if identity is None else f"is {identity.describe()}, not a directory"
        yield Problem("/bundle", f"bundle {bundle} {what} on the host", "check the state while the container exists")
    elif not context.host.exists(posixpath.join(bundle, "config.json")):
        yield Problem("/bundle", f"bundle {bundle} has no config.json", "check the state while the container exists")
