"""NODE: what only the whole node shows: validation markers against the driver's real place, stray nodes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.collection import NODE, Collection
from nvidia_oci_hook.node.driver import (
    FOUND,
    DriverRootAnswer,
    resolve_driver_root,
    stray_device_nodes,
    strays_beside,
)
from nvidia_oci_hook.node.markers import VALIDATIONS, marker_problems
from nvidia_oci_hook.rules.base import Context, rule

CRIO_COLLISION_ERROR = (
    "privileged container was configured with a device container path that already exists on the host"
)


def _answer(context: Context) -> DriverRootAnswer:
    host = context.host
    assert host is not None
    return context.cached("driver-root", lambda: resolve_driver_root(host, context.driver_roots))  # type: ignore[no-any-return]


@rule("NODE001", "validation-markers-contradict-driver", Severity.ERROR, [NODE], needs_host=True)
def validation_markers_contradict_driver(value: Any, context: Context) -> Iterator[Problem]:
    """The GPU Operator's validation markers point at a driver root the node does not have.

    ## What it checks
    The files in `/run/nvidia/validations` against where the driver really is (nvidia-smi, libnvidia-ml.so.1,
    libcuda.so.1 under each `--driver-root` candidate): `toolkit-ready` without `host-driver-ready` while the
    driver is installed on the host (the race left by a validator pod that failed before its cleanup hook),
    `host-driver-ready` while the driver is not on the host, and a `driver-ready` file whose `IS_HOST_DRIVER` or
    `NVIDIA_DRIVER_ROOT` disagrees with the evidence.

    ## Why it matters
    The device plugin picks `NVIDIA_DRIVER_ROOT` from these markers. With `toolkit-ready` present and
    `host-driver-ready` missing it chooses `/run/nvidia/driver` on a node whose driver is on `/`, and every GPU
    pod then fails with `lstat /run/nvidia/driver/dev/nvidiactl: no such file or directory`; restarting pods
    does not help while the stale files stay.

    ## Example
    `/run/nvidia/validations/toolkit-ready` present, `host-driver-ready` absent, `/usr/bin/nvidia-smi` and
    `/usr/lib/x86_64-linux-gnu/libcuda.so.1` on the host, `/run/nvidia/driver` empty.

    ## Fix
    `rm -f /run/nvidia/validations/*-ready`, then delete the nvidia-operator-validator and device-plugin pods so
    that they validate again and pick the right root.
    """
    host = context.host
    if host is None:
        return
    answer = _answer(context)
    if answer.status != FOUND:
        return
    fix = f"rm -f {VALIDATIONS}/*-ready and delete the operator-validator and device-plugin pods"
    for problem in marker_problems(host, answer):
        yield Problem("", problem.message, fix, path=problem.marker)


@rule("NODE002", "stray-nvidia-device-nodes", Severity.ERROR, [NODE], needs_host=True)
def stray_nvidia_device_nodes(value: Any, context: Context) -> Iterator[Problem]:
    """NVIDIA device nodes sit in the host's /dev while the driver, and its /dev, live in a driver container.

    ## What it checks
    When the driver root is not `/` and has its own `dev/nvidia*` nodes, every `/dev/nvidia*` character device
    on the host's `/dev` (one that is the very file of the driver root's is not stray). Where no driver user
    space is found but one candidate root's `dev/` holds NVIDIA nodes (a driver container between restarts), the
    nodes alone decide.

    ## Why it matters
    Nothing on such a node should create them: they come from NVML running in a pod that mounts the host's
    `/dev` (NVML creates missing nodes when `ModifyDeviceFiles` is 1). From then on cri-o refuses every
    privileged container that gets GPUs from the device plugin ("privileged container was configured with a
    device container path that already exists on the host"), and containerd gives privileged containers two
    entries for each node.

    ## Example
    `/run/nvidia/driver/dev/nvidia0` (the driver container's) and a stray `/dev/nvidia0` on the host.

    ## Fix
    Remove the stray nodes (`rm /dev/nvidia*` on the host, with no GPU pod running) and stop what creates them:
    mount the host's `/dev` elsewhere in the pod that calls NVML (the DRA driver fix), or load the driver with
    `NVreg_ModifyDeviceFiles=0`.
    """
    host = context.host
    if host is None:
        return
    answer = _answer(context)
    strays = stray_device_nodes(host, answer)
    dev_root = answer.dev_root()
    if not strays and answer.dev_only_root() is not None:
        # A driver container between restarts: its dev/ alone says where the nodes belong (doctor does the same).
        dev_root = answer.dev_only_root() or dev_root
        strays = strays_beside(host, dev_root)
    if not strays:
        return
    engines = {part.kind for part in value.parts} if isinstance(value, Collection) else set()
    consequence = (
        f"cri-o refuses privileged GPU containers ('{CRIO_COLLISION_ERROR}')"
        if "crio-config" in engines or not engines
        else "privileged containers get duplicate device entries"
    )
    for path in strays:
        yield Problem(
            "",
            f"{path} exists on the host while the driver's nodes are under {dev_root}/dev: {consequence}",
            f"rm {path} (no GPU pod running), and stop NVML from creating it",
            path=path,
        )


@rule("NODE003", "generated-config-overwritten", Severity.ERROR, [NODE], needs_host=True)
def generated_config_overwritten(value: Any, context: Context) -> Iterator[Problem]:
    """The containerd configuration in effect is generated by the distribution, and it was changed in a way
    the next start undoes.

    ## What it checks
    Where the distribution owns containerd's configuration (see `lint --node`'s list of places looked at): k3s
    and RKE2 write `<data-dir>/agent/etc/containerd/config.toml` at every start from `config-v3.toml.tmpl`,
    `config.toml.tmpl` or their built-in template, beginning it with `# File generated by k3s. DO NOT EDIT.`;
    k0s rewrites `/etc/k0s/containerd.toml` while it holds `# k0s_managed=true`; microk8s renders
    `args/containerd.toml` from `args/containerd-template.toml`. A generated file without its generator's first
    line, a k0s-managed file with settings of its own, a microk8s file with settings its template lacks, and a
    template changed after the file was generated (the change is not running yet) are each reported.

    ## Why it matters
    `nvidia-ctk runtime configure` and hand edits write the generated file; the runtime handler or `enable_cdi`
    they add works until the next restart of k3s, then vanishes, and GPU pods fail with `no runtime for "nvidia"
    is configured` or `unresolvable CDI devices` weeks later.

    ## Example
    `/var/lib/rancher/k3s/agent/etc/containerd/config.toml` rewritten by `nvidia-ctk runtime configure`, with no
    `config.toml.tmpl` beside it.

    ## Fix
    Make the change in the template (`config.toml.tmpl` or `config-v3.toml.tmpl` beginning with
    `{{ template "base" . }}`; for k0s a file in `/etc/k0s/containerd.d/`; for microk8s
    `containerd-template.toml`), then restart the distribution's service.
    """
    from nvidia_oci_hook.node.engines import NodeCollection
    from nvidia_oci_hook.node.locations import overwritten_edits

    host = context.host
    if host is None or not isinstance(value, NodeCollection) or value.locations.containerd is None:
        return
    for edit in overwritten_edits(host, value.locations.containerd):
        yield Problem("", edit.message, edit.fix, path=edit.path)
