"""The host's /dev inside a container that runs NVIDIA's tooling (seed 003)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.kubernetes import KUBERNETES
from nvidia_oci_hook.kinds.kubernetes.objects import Mount, normalise_path
from nvidia_oci_hook.nvidia.env import DRIVER_ROOT
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.cri import CRIO_COLLISION_ERROR
from nvidia_oci_hook.rules.kubernetes.common import document_templates, nvidia_tooling

# (hostPath, subPath, mountPath) shapes that put the host's /dev at the container's /dev.
_HOST_DEV_AT_DEV = {("/dev", "", "/dev"), ("/", "", "/"), ("/", "dev", "/dev")}


@rule("K8S001", "host-dev-mounted-over-dev", Severity.ERROR, [KUBERNETES])
def host_dev_mounted_over_dev(value: Any, context: Context) -> Iterator[Problem]:
    """A container that runs NVIDIA's tooling mounts the host's `/dev` at its own `/dev`.

    ## What it checks
    A `hostPath` volume of `/dev` (or of `/`) mounted at `/dev` (or at `/`, or `/` with `subPath: dev` at
    `/dev`) in a container that runs NVIDIA's tooling: one that asks for a GPU (`nvidia.com/gpu`, a MIG slice, a
    DRA claim), sets an `NVIDIA_*` variable, runs one of NVIDIA's GPU components (device plugin, DRA driver,
    GPU Operator, validator, toolkit, DCGM), or is privileged in a DaemonSet that runs one.

    ## Why it matters
    NVML creates the `/dev/nvidia*` nodes it needs when they are missing. With the host's `/dev` mounted there,
    it creates them **on the host**. On a node whose driver root is `/run/nvidia/driver` (the GPU Operator's
    driver container) the host's `/dev` then holds nodes that CDI specs put at the same container paths, and
    cri-o refuses every privileged container given such a GPU: "privileged container was configured with a
    device container path that already exists on the host" (NVIDIA/k8s-dra-driver-gpu #477). The pod that
    mounts `/dev` runs fine; the GPU pods that come after it fail.

    ## Example
    A DRA kubelet plugin DaemonSet with `volumes: [{name: host-dev, hostPath: {path: /dev}}]` and
    `volumeMounts: [{name: host-dev, mountPath: /dev}]` in its privileged plugin container.

    ## Fix
    Mount the host's `/dev` at `/host/dev`, and bind it over `/dev` inside the container only where the
    driver's dev root is `/` (what NVIDIA's DRA driver does since the fix of #477). `nvidia-oci-hook doctor`
    finds and removes nodes already created on the host.
    """
    for mount, described, why, root in _host_dev_mounts(value, context):
        if root == "/":
            continue  # K8S023's
        yield Problem(
            f"{mount.pointer}/mountPath",
            f"{described}, and {why}: NVML creates missing /dev/nvidia* nodes, here on the host; on a node whose "
            "driver root is not / (the GPU Operator's /run/nvidia/driver), cri-o then refuses privileged "
            f"containers given CDI GPUs: {CRIO_COLLISION_ERROR}",
            "mount the host's /dev at /host/dev instead (bind it over /dev only where the driver's dev "
            "root is /); `nvidia-oci-hook doctor --fix` removes nodes already created on the host",
        )


@rule("K8S023", "host-dev-mounted-over-dev-host-driver", Severity.INFO, [KUBERNETES])
def host_dev_mounted_over_dev_host_driver(value: Any, context: Context) -> Iterator[Problem]:
    """A container that runs NVIDIA's tooling mounts the host's `/dev` at its own `/dev`, and its own
    `NVIDIA_DRIVER_ROOT` is `/`.

    ## What it checks
    The mounts K8S001 checks, in a container whose `env` sets `NVIDIA_DRIVER_ROOT` to `/` (NVIDIA's DRA driver
    chart writes its `nvidiaDriverRoot` value there; `/` is the chart's default, a driver installed on the host).

    ## Why it matters
    With the driver on the host, the `/dev/nvidia*` nodes NVML creates in the host's `/dev` are the host driver's
    own, at the paths the GPU pods are given unchanged: the device plugin's host path and container path are both
    `/dev/nvidiaN`, and cri-o refuses a privileged container's device only where the two differ (K8S001), so
    nothing is refused. What can still go wrong: the node's driver moves to the GPU Operator's driver container
    (`/run/nvidia/driver`) while this DaemonSet keeps the mount; its `NVIDIA_DRIVER_ROOT` is then wrong as well,
    and K8S001 applies once it is corrected.

    ## Example
    NVIDIA's DRA driver 25.3.0 chart with its default `nvidiaDriverRoot: /`: the kubelet plugin mounts
    `hostPath: /dev` at `/dev` with `NVIDIA_DRIVER_ROOT: "/"` in its env.

    ## Fix
    Nothing while the driver stays on the host. Mount the host's `/dev` at `/host/dev` (NVIDIA's DRA driver does
    since 25.3.1) to keep the DaemonSet right for a driver container too.
    """
    for mount, described, why, root in _host_dev_mounts(value, context):
        if root != "/":
            continue
        yield Problem(
            f"{mount.pointer}/mountPath",
            f"{described}, and {why}, with NVIDIA_DRIVER_ROOT=/: the device nodes NVML creates there are the host "
            "driver's own, given to GPU pods at the same path, which cri-o does not refuse; only a move of this "
            "node's driver into a driver container (/run/nvidia/driver) with this mount kept would break GPU pods",
            "nothing to change while the driver is on the host; mounting the host's /dev at /host/dev keeps the "
            "DaemonSet right for a driver container too",
        )


def _host_dev_mounts(value: Any, context: Context) -> Iterator[tuple[Mount, str, str, Optional[str]]]:
    """(mount, what it mounts where, why the container runs NVIDIA's tooling, its own literal NVIDIA_DRIVER_ROOT
    normalised, or None) of each mount of the host's /dev at /dev."""
    for template in document_templates(value, context):
        for container in template.containers():
            for mount in container.mounts():
                host_path = template.host_path_of(mount.name)
                if host_path is None:
                    continue
                volume_pointer, path = host_path
                sub_path = mount.sub_path.strip("/")
                if (path, sub_path, mount.mount_path) not in _HOST_DEV_AT_DEV:
                    continue
                why = nvidia_tooling(container)
                if why is None:
                    continue
                shown = path if not sub_path else f"{path} (subPath {sub_path})"
                entry = container.env_value(DRIVER_ROOT)
                root = None if entry is None or entry.literal is None else normalise_path(entry.literal.strip())
                yield (
                    mount,
                    f"mounts the host's {shown} (volume {mount.name!r}, {volume_pointer}) at {mount.mount_path}",
                    why,
                    root,
                )
