"""What the config names on the node, looked for under --host-root: imported files (CTD005) and the programs of
runtimes (CTD111)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.containerd.config import SERVICE_PATH, program_candidates
from nvidia_oci_hook.rules.base import Context, register, rule
from nvidia_oci_hook.rules.containerd.config_view import KINDS, _config


def _import_missing(value: Any, context: Context) -> Iterator[Problem]:
    host = context.host
    imports = _config(value, context).value.get("imports")
    if host is None or not isinstance(imports, list):
        return
    for index, entry in enumerate(imports):
        if not isinstance(entry, str) or "*" in entry or not entry.startswith("/"):
            continue  # globs may match nothing; relative paths are relative to the file, which a rule cannot see
        identity = host.identity(entry)
        if identity is not None and identity.type == "file":
            continue
        what = "does not exist on this node" if identity is None else f"is {identity.describe()}, not a file"
        engine = f"open {entry}: no such file or directory" if identity is None else "read ...: is a directory"
        yield Problem(
            f"/imports/{index}",
            f'imports entry "{entry}" {what}: containerd refuses to start (`{engine}`); containerd 2.x\'s '
            "`config dump` skips it, its daemon does not",
            "create the file, or remove the entry (a glob such as /etc/containerd/conf.d/*.toml may match nothing)",
        )


register(
    "CTD005",
    "import-missing",
    Severity.ERROR,
    KINDS,
    needs_host=True,
    schema_level=True,
    check=_import_missing,
    doc="""A file named in `imports` does not exist on the node.

    ## What it checks
    Every absolute entry of `imports` without a `*`: it must be a file under `--host-root`. Entries with a `*`
    are globs, which may match nothing; relative entries are resolved against the directory of the file, which
    this check does not see.

    ## Why it matters
    containerd reads every imported file at start-up and refuses to start when one is missing: containerd 1.x
    says `failed to load TOML: /etc/containerd/conf.d/99-nvidia.toml: open ...: no such file or directory`,
    containerd 2.x `open ...: no such file or directory` (its `containerd config dump` silently skips the file,
    so a check with it passes). A drop-in deleted by a package removal takes the whole runtime down at the next
    restart.

    ## Example
    `imports = ["/etc/containerd/conf.d/99-nvidia.toml"]` after the NVIDIA Container Toolkit was removed.

    ## Fix
    Restore the file or remove the entry; prefer a glob (`/etc/containerd/conf.d/*.toml`), which tolerates an
    empty directory.
    """,
)


def _binary_problem(context: Context, name: str) -> Optional[tuple[str, str]]:
    """(why the program `name` cannot be run on the host, what the runc shim then says), or None if it can."""
    host = context.host
    if host is None:
        return None
    candidates = program_candidates(name)
    if not candidates:
        return (
            f"{name} is a relative path, which the runc shim resolves against its own working directory",
            f"fork/exec {name}: no such file or directory",
        )
    for candidate in candidates:
        if host.is_executable(candidate):
            return None
    existing = [candidate for candidate in candidates if host.exists(candidate)]
    if existing:
        identity = host.identity(existing[0])
        what = "a file without an execute bit" if identity is not None and identity.type == "file" else "not a file"
        shown = name if name.startswith("/") else f'"{name}"'
        return f"{existing[0]} is {what}", f"fork/exec {shown}: permission denied"
    if name.startswith("/"):
        return f"{name} does not exist on this node", f"fork/exec {name}: no such file or directory"
    return (
        f"{name} is not in any directory of containerd's PATH ({':'.join(SERVICE_PATH)})",
        f'exec: "{name}": executable file not found in $PATH',
    )


@rule("CTD111", "runtime-binary-missing", Severity.ERROR, KINDS, needs_host=True)
def runtime_binary_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A runtime's program (options.BinaryName, runtime_path) is missing or not executable on the node.

    ## What it checks
    For every runtime of the CRI plugin that the file's version reads: the runc shim's
    `options.BinaryName` (for `runtime_type = "io.containerd.runc.v2"`), and `runtime_path` (the shim binary,
    where set). An absolute path must be an executable file under `--host-root`; a bare name must be one in a
    directory of containerd's usual PATH (`/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`).

    ## Why it matters
    containerd loads the file without checking either path. Every pod that uses the runtime then fails at
    sandbox creation, and stays in ContainerCreating: the runc shim cannot start the runtime (measured with
    containerd 1.6, 1.7 and 2.1: `failed to create shim task: OCI runtime create failed: unable to retrieve OCI
    runtime error (open .../log.json: no such file or directory): fork/exec /usr/bin/nvidia-container-runtime:
    no such file or directory: unknown`; `exec: "nvidia-container-runtime": executable file not found in $PATH`
    for a bare name; `permission denied` for a file without an execute bit). Typical after removing or moving
    the NVIDIA Container Toolkit while containerd still points at `/usr/bin/nvidia-container-runtime`.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
    ```
    on a node where the toolkit lives in `/usr/bin`.

    ## Fix
    Install the program, or correct the path (`command -v nvidia-container-runtime`), then restart containerd.
    """
    if context.host is None:
        return
    config = _config(value, context)
    for runtime in config.runtimes():
        checks: list[tuple[str, str, Any]] = []
        if runtime.is_runc:
            key, binary = runtime.option("BinaryName")
            if key is not None:
                checks.append((f"{runtime.pointer}/options/{key}", "options.BinaryName", binary))
        path = runtime.table.get("runtime_path")
        checks.append((f"{runtime.pointer}/runtime_path", "runtime_path", path))
        for pointer, label, program in checks:
            if not isinstance(program, str) or not program:
                continue
            problem = _binary_problem(context, program)
            if problem is None:
                continue
            why, engine = problem
            effect = (
                f"the runc shim cannot run it, so every pod that uses this runtime fails to start (`{engine}`)"
                if label == "options.BinaryName"
                else "containerd cannot start this runtime's shim, so every pod that uses it fails to start"
            )
            yield Problem(
                pointer,
                f'runtime "{runtime.name}" {label} = "{program}": {why}; {effect}',
                f"install it, or set the path that `command -v {posixpath.basename(program)}` prints on the node",
            )
