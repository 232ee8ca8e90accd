"""What the Kubernetes rules share: the objects of the document and of the whole run, and which containers run
NVIDIA's tooling or ask for a GPU."""

from __future__ import annotations

import re
from typing import Any, Optional

from nvidia_oci_hook.kinds.kubernetes.objects import (
    Container,
    KubeObject,
    Manifests,
    OperatorChoice,
    PodTemplate,
    objects,
)
from nvidia_oci_hook.rules.base import Context

# NVIDIA's GPU components by the image they run (NGC and GitHub registries, the projects' own names).
_COMPONENTS = (
    (re.compile(r"k8s-dra-driver|dra-driver-nvidia-gpu"), "NVIDIA's DRA GPU driver"),
    (re.compile(r"k8s-device-plugin|nvidia-device-plugin"), "NVIDIA's device plugin"),
    (re.compile(r"gpu-operator-validator|/gpu-operator-validator"), "the GPU Operator's validator"),
    (re.compile(r"gpu-operator"), "NVIDIA's GPU Operator"),
    (re.compile(r"container-toolkit|nvidia-container-toolkit"), "NVIDIA's container toolkit"),
    (re.compile(r"dcgm-exporter|/dcgm:"), "NVIDIA's DCGM"),
    (re.compile(r"k8s-mig-manager|mig-manager"), "NVIDIA's MIG manager"),
    (re.compile(r"gpu-feature-discovery"), "NVIDIA's GPU feature discovery"),
)


def document_objects(value: Any, context: Context) -> list[KubeObject]:
    """The judged objects of the document being linted, in stream order: those the run already walked."""

    def build() -> list[KubeObject]:
        if isinstance(context.manifests, Manifests):
            walked = context.manifests.in_file(context.document_path)
            if walked is not None:
                return walked
        return list(
            objects(value, context.document_path, OperatorChoice(context.gpu_operator_version, context.cri_engine))
        )

    return context.cached("k8s-objects", build)  # type: ignore[no-any-return]


def document_templates(value: Any, context: Context) -> list[PodTemplate]:
    def build() -> list[PodTemplate]:
        return [t for t in (obj.template for obj in document_objects(value, context)) if t is not None]

    return context.cached("k8s-templates", build)  # type: ignore[no-any-return]


def run_manifests(value: Any, context: Context) -> Manifests:
    """Every object of the run (all files given together), else the document's own."""
    if isinstance(context.manifests, Manifests):
        return context.manifests
    return context.cached("k8s-manifests", lambda: Manifests(document_objects(value, context)))  # type: ignore[no-any-return]


def nvidia_component(image: str) -> Optional[str]:
    """Which of NVIDIA's GPU components an image is, or None."""
    lowered = image.lower()
    for pattern, name in _COMPONENTS:
        if pattern.search(lowered):
            return name
    return None


def asks_gpu(container: Container) -> bool:
    """A GPU resource (nvidia.com/gpu, a MIG slice, a shared replica) or a DRA claim."""
    return bool(container.gpu_resources() or container.claims())


def nvidia_tooling(container: Container) -> Optional[str]:
    """Why the container runs NVIDIA's tooling (NVML among it), or None: its GPU request, an NVIDIA_* variable,
    an NVIDIA component's image, or a privileged container in a DaemonSet beside one."""
    resources = container.gpu_resources()
    if resources:
        return f"it asks for {', '.join(sorted(resources))}"
    if container.claims():
        return "it asks for a DRA claim"
    component = nvidia_component(container.image)
    if component is not None:
        return f"it runs {component} ({container.image})"
    for entry in container.env():
        if entry.name.startswith("NVIDIA_"):
            return f"it sets {entry.name}"
    template = container.template
    if container.privileged and template.owner.kind == "DaemonSet":
        for sibling in template.containers():
            sibling_component = nvidia_component(sibling.image)
            if sibling_component is not None:
                return f"it is privileged in a DaemonSet that runs {sibling_component}"
    return None
