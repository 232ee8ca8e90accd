"""HOOK: OCI hooks in config.json that will not run, or not as written."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.host import rewrite_for_existing_root
from nvidia_oci_hook.kinds.document import OCI_CONFIG
from nvidia_oci_hook.kinds.oci import Hook
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.devices import config


def hooks(value: Any, context: Context) -> list[Hook]:
    return config(value, context).hooks


@rule("HOOK001", "hook-path-not-absolute", Severity.ERROR, [OCI_CONFIG])
def hook_path_not_absolute(value: Any, context: Context) -> Iterator[Problem]:
    """A hook's path is not absolute.

    ## What it checks
    That every hook's `path` starts with `/`, as the runtime-spec requires.

    ## Why it matters
    runc runs the hook with the bundle directory as its working directory, so a relative path is looked up
    there, or, with no slash at all, fails with "executable file not found"; a failing prestart or
    createRuntime hook stops the container.

    ## Example
    `{"path": "nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "prestart"]}`

    ## Fix
    Use the absolute path: `command -v nvidia-container-runtime-hook` on the node prints it.
    """
    for hook in hooks(value, context):
        if hook.path is not None and not hook.path.startswith("/"):
            yield Problem(
                f"{hook.pointer}/path",
                f"{hook.stage} hook path {hook.path!r} is not absolute",
                f"use the absolute path, for example /usr/bin/{hook.path.rsplit('/', 1)[-1]}",
            )


@rule("HOOK002", "hook-timeout-too-small", Severity.ERROR, [OCI_CONFIG], supersedes_schema=True)
def hook_timeout_too_small(value: Any, context: Context) -> Iterator[Problem]:
    """A hook's timeout is less than one second.

    ## What it checks
    That a hook's `timeout`, when set, is at least 1 (seconds), as the runtime-spec requires.

    ## Why it matters
    runc starts the hook and fails the container at once: `hook ran past specified timeout of 0.0s` (measured
    with runc 1.1.5), however quickly the hook would have finished.

    ## Example
    `{"path": "/usr/bin/nvidia-oci-hook", "timeout": 0}`

    ## Fix
    Drop `timeout` or set it to the number of seconds the hook may take (5 to 30 is usual).
    """
    for hook in hooks(value, context):
        timeout = hook.timeout
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout < 1:
            yield Problem(
                f"{hook.pointer}/timeout",
                f"{hook.stage} hook timeout is {timeout}; it must be at least 1 second",
                "remove timeout, or set it to a whole number of seconds >= 1",
            )


@rule("HOOK003", "hook-env-without-path", Severity.WARNING, [OCI_CONFIG])
def hook_env_without_path(value: Any, context: Context) -> Iterator[Problem]:
    """A hook's env list has no PATH.

    ## What it checks
    Hooks that set `env` without a `PATH=` entry.

    ## Why it matters
    A hook with an `env` list gets only that environment. Without PATH, anything the hook runs by name
    (`ldconfig`, `modprobe`, `nvidia-smi`) is not found, and the error surfaces as the hook's own failure.

    ## Example
    `{"path": "/usr/bin/nvidia-ctk", "env": ["NVIDIA_CTK_DEBUG=1"]}`

    ## Fix
    Add `"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"` to `env`.
    """
    for hook in hooks(value, context):
        if hook.env is not None and not any(entry.startswith("PATH=") for entry in hook.env):
            yield Problem(
                f"{hook.pointer}/env",
                f"{hook.stage} hook {hook.path or ''} sets env without PATH; it gets no other environment",
                'add "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" to env',
            )


@rule("HOOK004", "deprecated-prestart", Severity.WARNING, [OCI_CONFIG])
def deprecated_prestart(value: Any, context: Context) -> Iterator[Problem]:
    """A hook uses the deprecated prestart stage.

    ## What it checks
    Entries under `hooks.prestart`.

    ## Why it matters
    The runtime-spec deprecated `prestart` in favour of `createRuntime`, which runs at the same moment in the
    same namespaces. cri-o and podman 5 already turn hooks.d `prestart` entries into `createRuntime` (podman 4
    still writes `prestart`); a runtime that drops the deprecated stage will silently skip the hook.

    ## Example
    `"hooks": {"prestart": [{"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["x", "prestart"]}]}`

    ## Fix
    Move the entry to `hooks.createRuntime`.
    """
    for hook in hooks(value, context):
        if hook.stage == "prestart":
            yield Problem(
                hook.pointer,
                f"prestart hook {hook.path or ''} uses a deprecated stage",
                "move it to hooks.createRuntime",
            )


@rule("HOOK005", "hook-path-missing", Severity.ERROR, [OCI_CONFIG], needs_host=True)
def hook_path_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A hook's program does not exist on the host.

    ## What it checks
    That every hook's absolute `path` exists under `--host-root`. (A path under a stale driver root is
    reported as HOST001 instead.)

    ## Why it matters
    runc fails the container with `error running hook #0: fork/exec PATH: no such file or directory`
    (createRuntime, createContainer, startContainer and prestart hooks), or logs and carries on (poststart,
    poststop), so the hook's work silently does not happen.

    ## Example
    `/usr/bin/nvidia-container-runtime-hook` after the toolkit package was removed.

    ## Fix
    Install the program, or correct the path in whatever writes the spec (a hooks.d file, the engine's
    config, an OCI runtime wrapper).
    """
    if context.host is None:
        return
    for hook in hooks(value, context):
        if hook.path and hook.path.startswith("/") and not context.host.exists(hook.path):
            if rewrite_for_existing_root(context.host, context.driver_roots, hook.path) is not None:
                continue
            yield Problem(
                f"{hook.pointer}/path",
                f"{hook.stage} hook {hook.path} does not exist on the host",
                "install it or correct the path",
            )


@rule("HOOK006", "hook-not-executable", Severity.ERROR, [OCI_CONFIG], needs_host=True)
def hook_not_executable(value: Any, context: Context) -> Iterator[Problem]:
    """A hook's program exists but is not an executable file.

    ## What it checks
    That every hook path that exists on the host is a regular file with an execute bit.

    ## Why it matters
    runc fails the container with `permission denied` when it runs the hook.

    ## Example
    A hook installed by `cp` without `-p`, mode 0644.

    ## Fix
    `chmod 0755 PATH`, or point the hook at the real executable.
    """
    if context.host is None:
        return
    for hook in hooks(value, context):
        if hook.path and hook.path.startswith("/"):
            identity = context.host.identity(hook.path)
            if identity is not None and not context.host.is_executable(hook.path):
                what = "a file without an execute bit" if identity.type == "file" else identity.describe()
                yield Problem(
                    f"{hook.pointer}/path",
                    f"{hook.stage} hook {hook.path} is {what}",
                    f"chmod 0755 {hook.path}" if identity.type == "file" else "point the hook at an executable",
                )
