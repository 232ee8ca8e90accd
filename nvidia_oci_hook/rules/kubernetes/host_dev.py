"""The host's /dev inside a container that runs NVIDIA's tooling (seed 003)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.kubernetes import KUBERNETES
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
                yield Problem(
                    f"{mount.pointer}/mountPath",
                    f"mounts the host's {shown} (volume {mount.name!r}, {volume_pointer}) at {mount.mount_path}, "
                    f"and {why}: NVML creates missing /dev/nvidia* nodes, here on the host; on a node whose "
                    "driver root is not / (the GPU Operator's /run/nvidia/driver), cri-o then refuses privileged "
                    f"containers given CDI GPUs: {CRIO_COLLISION_ERROR}",
                    "mount the host's /dev at /host/dev instead (bind it over /dev only where the driver's dev "
                    "root is /); `nvidia-oci-hook doctor --fix` removes nodes already created on the host",
                )
