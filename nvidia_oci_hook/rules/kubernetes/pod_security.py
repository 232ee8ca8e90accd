"""Privilege given to a container that asks for a GPU: what the engine and NVIDIA's toolkit then do with it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.kubernetes import KUBERNETES
from nvidia_oci_hook.kinds.kubernetes.objects import Container
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.cri import CRIO_COLLISION_ERROR
from nvidia_oci_hook.rules.kubernetes.common import asks_gpu, document_templates

# Added capabilities that put CAP_SYS_ADMIN in the container's bounding set (the engines add `capabilities.add`
# to every set, bounding included; `ALL` is every capability).
_SYS_ADMIN = frozenset({"SYS_ADMIN", "ALL"})


def toolkit_privileged(container: Container) -> Optional[tuple[str, str]]:
    """(pointer, what it is) where NVIDIA's toolkit counts the container as privileged, else None.

    The toolkit's test is CAP_SYS_ADMIN in the bounding set (internal/config/image/privileged.go), which
    `privileged: true` gives and so does adding SYS_ADMIN (or ALL)."""
    pointer = container.privileged
    if pointer is not None:
        return pointer, "privileged: true"
    for cap_pointer, name in container.added_capabilities():
        if name in _SYS_ADMIN:
            return cap_pointer, f"capabilities.add {name}"
    return None


def _gpu_request(container: Container) -> str:
    resources = container.gpu_resources()
    if resources:
        return ", ".join(sorted(resources))
    return "a DRA claim"


@rule("K8S003", "privileged-gpu-container", Severity.WARNING, [KUBERNETES])
def privileged_gpu_container(value: Any, context: Context) -> Iterator[Problem]:
    """A container that asks for a GPU runs privileged, or adds CAP_SYS_ADMIN.

    ## What it checks
    A container (init and ephemeral ones too) that asks for a GPU (`nvidia.com/gpu`, a MIG slice
    `nvidia.com/mig-*`, a shared replica, or a DRA claim through `resources.claims`) and sets
    `securityContext.privileged: true`, or adds `SYS_ADMIN` (`CAP_SYS_ADMIN`, `ALL`) to its capabilities.

    ## Why it matters
    - Privileged, the engine (containerd, cri-o) gives the container every device node of the host, so it sees
      and can use **every GPU of the node**, not the ones the scheduler counted for it (NVIDIA/k8s-device-plugin
      #336, NVIDIA/gpu-operator #1145): other pods' GPUs are shared without anyone knowing.
    - On cri-o, a privileged container given a CDI device whose container path differs from its host path (the
      GPU Operator's driver container: `/run/nvidia/driver/dev/nvidia0` → `/dev/nvidia0`) is refused when the
      host already holds that path: "privileged container was configured with a device container path that
      already exists on the host" (cri-o's container_create; NVIDIA/k8s-dra-driver-gpu #477).
    - NVIDIA's toolkit counts a container as privileged by CAP_SYS_ADMIN in its bounding set
      (nvidia-container-toolkit `internal/config/image/privileged.go`): adding SYS_ADMIN alone makes it honour
      `NVIDIA_VISIBLE_DEVICES` from the pod or the image even where the node set
      `accept-nvidia-visible-devices-envvar-when-unprivileged = false` to stop exactly that.
    - With CDI on, privileged containers were reported to get `NVIDIA_VISIBLE_DEVICES=void` and no GPU at all
      (NVIDIA/gpu-operator #2115).

    ## Example
    A Deployment's container with `resources: {limits: {nvidia.com/gpu: 1}}` and
    `securityContext: {privileged: true}`.

    ## Fix
    Drop `privileged: true` and add only the capabilities the program needs (`SYS_NICE`, `IPC_LOCK`, …); the
    device plugin or DRA driver gives the GPUs. Where every GPU is meant (a node agent), do not ask for one.
    """
    for template in document_templates(value, context):
        for container in template.containers():
            if not asks_gpu(container):
                continue
            found = toolkit_privileged(container)
            if found is None:
                continue
            pointer, what = found
            asked = _gpu_request(container)
            if container.privileged is not None:
                message = (
                    f"runs privileged and asks for {asked}: the engine gives it every device of the host, so it "
                    "sees and uses every GPU of the node, not only those the scheduler counted for it; on cri-o a "
                    "CDI GPU whose host path differs from its container path is refused while the host holds that "
                    f"path ({CRIO_COLLISION_ERROR})"
                )
            else:
                message = (
                    f"adds {what.split()[-1]} and asks for {asked}: NVIDIA's toolkit counts CAP_SYS_ADMIN as "
                    "privileged, so it honours NVIDIA_VISIBLE_DEVICES from the pod or the image (all, in CUDA base "
                    "images) even where the node refuses it to unprivileged containers, and the container can be "
                    "given GPUs the scheduler never counted for it"
                )
            yield Problem(
                pointer,
                message,
                "drop privileged / SYS_ADMIN and add only the capabilities the program needs; the device plugin "
                "or DRA driver gives the GPUs",
            )
