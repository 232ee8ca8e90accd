"""Runtimes whose pods fail or lose their GPUs: CDI annotations not forwarded, runc runtimes that disagree on the
cgroup driver, an entry without runtime_type (CTD112, CTD113, CTD116)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.containerd.config import ContainerdConfig, Runtime
from nvidia_oci_hook.kinds.containerd.pathmatch import go_path_match
from nvidia_oci_hook.kinds.containerd.reading import DropIn
from nvidia_oci_hook.kinds.containerd.versions import DEFAULT_RUNTIME, V1X
from nvidia_oci_hook.kinds.containerd.walk import toml_key
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.containerd.config_view import KINDS, _config, _first_child, _quoted, _who

CDI_SAMPLE_KEYS = ("cdi.k8s.io/nvidia-device-plugin_GPU-0", "cdi.k8s.io/gpu")


def _containerd_injects_cdi(config: ContainerdConfig) -> bool:
    """Whether containerd itself resolves CDI devices for this file (so the runtime does not have to)."""
    cri = config.cri or {}
    enabled = cri.get("enable_cdi")
    if config.version >= 3:
        return enabled is not False  # containerd 2.x enables CDI by default
    return enabled is True


def _nvidia_runtime(runtime: Runtime) -> Optional[str]:
    """The NVIDIA wrapper a runtime runs (BinaryName basename starting with nvidia), or None."""
    if not runtime.is_runc:
        return None
    _key, binary = runtime.option("BinaryName")
    if isinstance(binary, str) and posixpath.basename(binary).startswith("nvidia"):
        return binary
    return None


@rule("CTD112", "cdi-annotations-not-forwarded", Severity.WARNING, KINDS)
def cdi_annotations_not_forwarded(value: Any, context: Context) -> Iterator[Problem]:
    """An NVIDIA runtime does not receive the pod's cdi.k8s.io/ annotations.

    ## What it checks
    For a runtime whose `options.BinaryName` is an NVIDIA wrapper (its file name starts with `nvidia`, as
    `nvidia-container-runtime` does), when containerd does not resolve CDI devices itself (`enable_cdi` is not
    true in a version 1 or 2 file; false in a version 3 file): that `container_annotations` holds a pattern that
    matches `cdi.k8s.io/` keys. containerd copies a CRI container annotation into the OCI spec only if a
    pattern matches it, with Go's `path.Match`, in which `*` does not cross a `/`: `cdi.k8s.io/*` matches,
    `cdi.k8s.io*` and `*` do not.

    ## Why it matters
    In CDI mode, nvidia-container-runtime finds the devices to inject in the spec's `cdi.k8s.io/...`
    annotations, which the device plugin sets on the container. If containerd does not forward them the
    wrapper sees no request, and the container starts without the GPUs it was allocated.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Add `container_annotations = ["cdi.k8s.io/*"]` to the runtime (what `nvidia-ctk runtime configure
    --cdi.enabled` writes), or enable CDI in containerd itself (containerd 1.7 and later).
    """
    config = _config(value, context)
    if _containerd_injects_cdi(config):
        return
    for runtime in config.runtimes():
        binary = _nvidia_runtime(runtime)
        if binary is None:
            continue
        patterns = runtime.table.get("container_annotations")
        if patterns is not None and not isinstance(patterns, list):
            continue  # a wrong type is CTD001's
        strings = [p for p in patterns or [] if isinstance(p, str)]
        missing = [key for key in CDI_SAMPLE_KEYS if not any(go_path_match(p, key) for p in strings)]
        if not missing:
            continue
        why = (
            "containerd 1.6 and 1.7 do not inject them themselves, since enable_cdi is not true "
            "(containerd 2.x enables CDI by default)"
            if config.version <= 2
            else "containerd does not inject them itself, since enable_cdi = false"
        )
        if strings:
            listed = ", ".join(_quoted(p) for p in strings)
            forwarded = f"no pattern of container_annotations = [{listed}] matches {missing[0]}"
        else:
            forwarded = "it has no container_annotations"
        yield Problem(
            f"{runtime.pointer}/container_annotations" if patterns is not None else runtime.pointer,
            f'runtime "{runtime.name}" runs {binary}, which injects the CDI devices named in cdi.k8s.io/ '
            f"annotations, but {forwarded}, so containerd leaves those annotations out of the OCI spec: GPUs that "
            f"the device plugin requests by annotation (cdi-annotations strategy) are not injected, and {why}",
            'add "cdi.k8s.io/*" to container_annotations',
        )


def _systemd(runtime: Runtime) -> tuple[Optional[bool], Optional[str]]:
    key, setting = runtime.option("SystemdCgroup")
    if key is None:
        return False, None
    return (setting if isinstance(setting, bool) else None), key


@rule("CTD113", "systemd-cgroup-mismatch", Severity.WARNING, KINDS)
def systemd_cgroup_mismatch(value: Any, context: Context) -> Iterator[Problem]:
    """runc runtimes disagree on SystemdCgroup.

    ## What it checks
    That every runc runtime (`runtime_type = "io.containerd.runc.v2"`) of the CRI plugin has the same
    `options.SystemdCgroup` (absent means false) as the default runtime (`default_runtime_name`); in a version 3
    file that does not define `runc`, containerd 2.x's built-in `runc` (SystemdCgroup false) is the default;
    otherwise, when the default runtime is not a runc runtime of the file, the first runc runtime.

    ## Why it matters
    The kubelet has one cgroup driver and sends every pod's cgroup parent in that driver's format. A runtime
    whose runc uses the other driver fails every pod: with `SystemdCgroup = true` and the kubelet on cgroupfs,
    runc says `expected cgroupsPath to be of format "slice:prefix:name" for systemd cgroups, got
    "/kubepods/..." instead`; the other way round, the containers land outside the pod's cgroup and its limits.
    The GPU runtime is usually added later than `runc`, by a tool that writes its own default, so GPU pods
    fail while all others run.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Set `SystemdCgroup` the same in every runc runtime, to match the kubelet's `cgroupDriver` (`systemd` on
    systemd hosts with cgroup v2).
    """
    config = _config(value, context)
    runc = [runtime for runtime in config.runtimes() if runtime.is_runc]
    containerd = config.cri_containerd() or {}
    default_name = containerd.get("default_runtime_name", DEFAULT_RUNTIME)
    reference = next((r for r in runc if r.name == default_name), None)
    if reference is not None:
        expected, expected_key = _systemd(reference)
        role = f'the default runtime "{reference.name}"'
    elif default_name == DEFAULT_RUNTIME and config.version >= 3 and runc:
        # containerd 2.x keeps its built-in runc entry, with SystemdCgroup = false, next to the file's runtimes.
        expected, expected_key = False, None
        role = 'the default runtime "runc" (built in, SystemdCgroup = false)'
    elif len(runc) >= 2:
        reference = runc[0]
        expected, expected_key = _systemd(reference)
        role = f'runtime "{reference.name}"'
    else:
        return
    if expected is None:
        return
    if reference is not None:
        role += " uses " + _driver(expected, expected_key)
    for runtime in runc:
        if runtime is reference:
            continue
        actual, key = _systemd(runtime)
        if actual is None or actual == expected:
            continue
        yield Problem(
            f"{runtime.pointer}/options/{key}" if key else runtime.pointer,
            f'runtime "{runtime.name}" runs runc with the {_driver(actual, key)} cgroup driver, but {role}: the '
            "kubelet has one cgroup driver, so the pods of one of them fail to start or run outside their pod's cgroup",
            f"set SystemdCgroup = {'true' if expected else 'false'} in [{toml_key((*runtime.path, 'options'))}], "
            "to match the kubelet's cgroupDriver",
        )


def _driver(systemd: bool, key: Optional[str]) -> str:
    if systemd:
        return "systemd (SystemdCgroup = true)"
    return "cgroupfs (SystemdCgroup = false)" if key else "cgroupfs (SystemdCgroup not set)"


@rule("CTD116", "runtime-type-missing", Severity.ERROR, KINDS)
def runtime_type_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A runtime entry has no runtime_type.

    ## What it checks
    That every `containerd.runtimes` entry of the CRI plugin sets `runtime_type`. containerd 2.x keeps the
    built-in type of an entry named `runc`, so only other names are reported for a file that only 2.x reads.

    ## Why it matters
    containerd 1.6 and 1.7 replace their built-in runtimes with the file's entries as written, so an entry
    without `runtime_type` has an empty type (even one named `runc`, when the file only meant to set its
    `options`): containerd loads the file, and every pod that uses the runtime fails (`container.Runtime.Name
    must be set: invalid argument`); and since the runc options are decoded by type, `SystemdCgroup` and
    `BinaryName` are not applied to it either.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
    ```
    (`runtime_type` of `runc` is now empty on containerd 1.6 and 1.7.)

    ## Fix
    Add `runtime_type = "io.containerd.runc.v2"` to the entry (or the type of the shim it is meant for).
    """
    if isinstance(value, DropIn):
        return  # a drop-in: CTD118 judges it with the tables it merges with
    config = _config(value, context)
    readers = config.readers
    for runtime in config.runtimes():
        if "runtime_type" in runtime.table:
            continue
        failing = readers & V1X
        if runtime.name != DEFAULT_RUNTIME:
            failing = readers
        if not failing:
            continue
        yield Problem(
            _first_child(runtime.pointer, runtime.table),
            f'runtime "{runtime.name}" has no runtime_type: {_who(failing, "give")} it an empty type, so '
            'every pod that uses it fails to start ("container.Runtime.Name must be set") and its runc options '
            "are not applied",
            f'add runtime_type = "io.containerd.runc.v2" to [{toml_key(runtime.path)}]',
            series=frozenset(failing),
        )
