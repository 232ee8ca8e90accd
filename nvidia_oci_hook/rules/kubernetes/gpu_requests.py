"""How a pod asks for GPUs: the quantities the API server accepts, the containers the kubelet gives them to, and
annotations that never reach a container."""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.kubernetes import KUBERNETES
from nvidia_oci_hook.kinds.kubernetes.objects import Container, PodTemplate, is_gpu_resource
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.kubernetes.common import document_objects, document_templates

# Ephemeral containers may not set resources at all (the API refuses them there), so only these two are judged.
_RESOURCE_SECTIONS = ("initContainers", "containers")

# resource.Quantity's grammar: a signed decimal number, then an exponent or one suffix.
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:[eE](?P<exponent>[+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$"
)
_SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_DECIMAL_EXPONENTS = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"))

# The CDI annotation prefix the engines (and NVIDIA's runtime, by default) read devices from.
CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"


def quantity(value: Any) -> Optional[Decimal]:
    """A resource quantity as written (YAML int, float or string), or None where it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value.strip())
    if match is None:
        return None
    try:
        number = Decimal(match.group("number"))
    except InvalidOperation:
        return None
    if match.group("exponent") is not None:
        return number.scaleb(int(match.group("exponent")))
    return number * _SUFFIXES[match.group("suffix") or ""]


def canonical(value: Decimal) -> str:
    """How the API server prints a decimal quantity back (resource.Quantity's String): `1k` for 1000,
    `500m` for 0.5."""
    if value == value.to_integral_value():
        whole = int(value)
        for exponent, suffix in _DECIMAL_EXPONENTS:
            if whole and whole % 10**exponent == 0:
                return f"{whole // 10**exponent}{suffix}"
        return str(whole)
    for scale, suffix in ((Decimal(1000), "m"), (Decimal(10**6), "u")):
        scaled = value * scale
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    # The API server keeps nine decimal places, rounding up.
    return f"{int((value * Decimal(10**9)).to_integral_value(rounding='ROUND_CEILING'))}n"


def gpu_entries(container: Container, which: str) -> dict[str, tuple[str, Any]]:
    """The NVIDIA GPU resources of resources.requests or resources.limits: name -> (pointer, quantity)."""
    return {name: entry for name, entry in container.resources(which).items() if is_gpu_resource(name)}


def asked_gpus(container: Container) -> list[str]:
    """The GPU resources a container asks for a non-zero count of (a quantity that does not parse counts: the
    API server is the one to judge it)."""
    asked = []
    for name, (_, written) in container.gpu_resources().items():
        count = quantity(written)
        if count is None or count != 0:
            asked.append(name)
    return sorted(asked)


def _sidecar(container: Container) -> bool:
    return container.init and container.value.get("restartPolicy") == "Always"


@rule("K8S009", "gpu-request-differs-from-limit", Severity.ERROR, [KUBERNETES])
def gpu_request_differs_from_limit(value: Any, context: Context) -> Iterator[Problem]:
    """A GPU request without an equal limit: the API server refuses the object.

    ## What it checks
    A container's (or init container's) `resources.requests` entry for `nvidia.com/gpu`, a MIG slice
    (`nvidia.com/mig-1g.10gb`) or a shared replica (`nvidia.com/gpu.shared`) whose `resources.limits` lacks the
    same resource or holds a different quantity. Quantities are compared as the API server compares them: `1`,
    `"1"` and `1000m` are one quantity.

    ## Why it matters
    GPUs are extended resources, which cannot be overcommitted. The API server's validation
    (`pkg/apis/core/validation/validation.go`, `ValidateResourceRequirements`) refuses a request without a limit
    with "Limit must be set for non overcommitable resources" and a request that differs from its limit with
    "must be equal to nvidia.com/gpu limit of 2". Validation of a Deployment, Job, DaemonSet or CronJob checks
    its pod template the same way, so the workload itself is refused and nothing runs.

    ## Example
    `resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}`, or
    `resources: {requests: {nvidia.com/gpu: 1}}`.

    ## Fix
    Write the GPU count under `limits` only; the API server sets the request from the limit. Where a request is
    written too, make it equal to the limit.
    """
    for template in document_templates(value, context):
        for container in template.containers(_RESOURCE_SECTIONS):
            limits = gpu_entries(container, "limits")
            base = pointer_join(container.pointer, "resources")
            for name, (pointer, written) in sorted(gpu_entries(container, "requests").items()):
                requested = quantity(written)
                if name not in limits:
                    yield Problem(
                        pointer,
                        f"requests {name} {written} without a limit of it: the API server refuses the object "
                        f"({template.owner.field_path(pointer_join(base, 'limits'))}: Required value: Limit must be "
                        "set for non overcommitable resources)",
                        f"write `{name}: {written}` under resources.limits (the request is then taken from the "
                        "limit and may be left out)",
                    )
                    continue
                limited = quantity(limits[name][1])
                if requested is None or limited is None or requested == limited:
                    continue
                yield Problem(
                    pointer,
                    f"requests {name} {written} but limits it to {limits[name][1]}: the API server refuses the "
                    f"object ({template.owner.field_path(pointer_join(base, 'requests'))}: Invalid value: "
                    f'"{canonical(requested)}": must be equal to {name} limit of {canonical(limited)})',
                    f"make the request equal to the limit ({limits[name][1]}), or drop the request: it is taken "
                    "from the limit",
                )


@rule("K8S010", "fractional-gpu-quantity", Severity.ERROR, [KUBERNETES])
def fractional_gpu_quantity(value: Any, context: Context) -> Iterator[Problem]:
    """A GPU count that is not a whole number (`0.5`, `500m`): the API server refuses the object.

    ## What it checks
    A `resources.limits` or `resources.requests` entry for `nvidia.com/gpu`, a MIG slice or a shared replica
    whose quantity is not an integer: `0.5`, `"500m"`, `1.5`, `"100u"`. YAML integers and strings are both
    read (`1`, `"1"`, `"2"` are whole); `0` is whole and asks for nothing.

    ## Why it matters
    Extended resources are counted in whole units (`IsIntegerResourceName` in the API's helpers), and the API
    server's `ValidateResourceQuantityValue` refuses any other quantity with "must be an integer"
    (`pkg/apis/core/validation/validation.go`). A workload's pod template is validated the same way, so the
    Deployment, Job or DaemonSet itself is refused. A share of a GPU is never asked this way: it is advertised
    by the device plugin as whole units (time-slicing or MPS replicas, `nvidia.com/gpu.shared`; MIG slices) or
    described by a DRA claim.

    ## Example
    `resources: {limits: {nvidia.com/gpu: 0.5}}`.

    ## Fix
    Ask for a whole number of GPUs. To share one GPU between pods, enable time-slicing or MPS in NVIDIA's device
    plugin (each replica is one unit of `nvidia.com/gpu` or `nvidia.com/gpu.shared`), use a MIG slice resource,
    or ask through DRA.
    """
    for template in document_templates(value, context):
        for container in template.containers(_RESOURCE_SECTIONS):
            for which in ("limits", "requests"):
                for name, (pointer, written) in sorted(gpu_entries(container, which).items()):
                    count = quantity(written)
                    if count is None or count == count.to_integral_value():
                        continue
                    yield Problem(
                        pointer,
                        f"asks for {written} of {name}, not a whole number: GPUs are counted in whole units and "
                        f"the API server refuses the object ({template.owner.field_path(pointer)}: Invalid value: "
                        f"{canonical(count)}: must be an integer)",
                        "ask for a whole number of GPUs; share a GPU through the device plugin's time-slicing or "
                        "MPS replicas, a MIG slice resource, or a DRA claim",
                    )


@rule("K8S011", "gpu-in-init-and-app-containers", Severity.WARNING, [KUBERNETES])
def gpu_in_init_and_app_containers(value: Any, context: Context) -> Iterator[Problem]:
    """An init container and a container of the same pod both ask for a GPU: a kubelet restart fails the pod.

    ## What it checks
    A (non-sidecar) init container that asks for a GPU resource (`nvidia.com/gpu`, a MIG slice, a shared
    replica) which a regular container of the same pod asks for too. Sidecars (init containers with
    `restartPolicy: Always`) keep their devices for the pod's life and are not judged.

    ## Why it matters
    The kubelet's device manager hands the devices of an init container that has completed to the pod's regular
    containers. After a kubelet restart it admits the running pod again and allocates afresh for the completed
    init container, whose devices the regular container now holds: admission fails and the kubelet rejects the
    running pod with `UnexpectedAdmissionError` ("Allocate failed due to requested number of devices unavailable
    for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected", or "Allocate failed due to no healthy
    devices present; cannot allocate unhealthy devices ..."). Its containers are stopped; a bare Pod stays
    failed, a workload's controller replaces it. Reported in kubernetes/kubernetes #124345 (GPUs, 2024) and
    #138446 (observed on 1.29.2 and 1.34.1, open in 2026): no release is known to fix it.

    ## Example
    A Job whose `initContainers` run a GPU check with `limits: {nvidia.com/gpu: 1}` before its main container,
    which asks for `nvidia.com/gpu: 1` as well.

    ## Fix
    Run the GPU step in the main container (a wrapper entrypoint that runs it first), or drop the GPU request
    from the init container where it does not need the GPU. Where the step must stay separate, make it a sidecar
    only if the node has GPUs to spare: a sidecar's GPUs are never handed on.
    """
    for template in document_templates(value, context):
        regular: dict[str, str] = {}
        for container in template.containers(("containers",)):
            for name in asked_gpus(container):
                regular.setdefault(name, container.name or "(unnamed)")
        if not regular:
            continue
        for container in template.containers(("initContainers",)):
            if _sidecar(container):
                continue
            resources = container.gpu_resources()
            for name in asked_gpus(container):
                if name not in regular:
                    continue
                yield Problem(
                    resources[name][0],
                    f"asks for {name}, and container {regular[name]} asks for it too: once this init container "
                    "completes, the kubelet hands its GPUs to the regular container; after a kubelet restart, "
                    "admission allocates for the completed init container again, finds the GPUs taken and "
                    "rejects the running pod with UnexpectedAdmissionError (kubernetes #124345, #138446)",
                    "run the GPU step in the main container (a wrapper entrypoint), or drop this init "
                    "container's GPU request if it does not need the GPU",
                )


def _cdi_annotations(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict):
        return []
    return [
        (key, text if isinstance(text, str) else str(text))
        for key, text in annotations.items()
        if isinstance(key, str) and key.startswith(CDI_ANNOTATION_PREFIX)
    ]


_POD_REACH = "the kubelet gives a pod's annotations to its sandbox only, not to its containers"
_WHAT_ENGINES_DO = (
    "containerd injects CDI devices from the container's own annotations and CDIDevices only, so the container "
    "gets no device; cri-o injects from those only too, but copies the pod's annotations into every container's "
    "OCI spec, where NVIDIA's runtime, if it runs the pod (mode cdi or auto, its default `cdi.k8s.io/` prefix), "
    "injects the named devices into every container, outside the scheduler's GPU accounting"
)


@rule("K8S012", "cdi-annotation-on-pod", Severity.ERROR, [KUBERNETES])
def cdi_annotation_on_pod(value: Any, context: Context) -> Iterator[Problem]:
    """A `cdi.k8s.io/*` annotation on a pod (or pod template): the engines' CDI injection never sees it.

    ## What it checks
    An annotation whose key starts with `cdi.k8s.io/` in a Pod's metadata, in a workload's pod template
    metadata, or in the workload's own metadata (which does not even reach its pods).

    ## Why it matters
    CDI annotations are container annotations: NVIDIA's device plugin (`cdi-annotations` strategy) returns them
    from Allocate and the kubelet puts them in the CRI container config. The pod's own annotations go to the
    pod sandbox only (kubelet `pkg/kubelet/kuberuntime/labels.go`: `newPodAnnotations` for the sandbox,
    `newContainerAnnotations` with the device plugin's annotations for each container). containerd applies CDI
    from the container config only (`internal/cri/server/container_create_linux.go`,
    `WithCDI(config.Annotations, config.CDIDevices)`), and passes pod annotations into an OCI spec only for a
    runtime's `pod_annotations` patterns (NVIDIA's installer sets `container_annotations`, not these): the
    container gets no device. cri-o's CDI injection also reads the container config only
    (`internal/factory/container/device_linux.go`, `SpecInjectCDIDevices`), but cri-o copies the sandbox's
    annotations into every container's OCI spec (`SpecAddAnnotations`); where the pod runs under NVIDIA's runtime
    in `cdi` or `auto` mode, that runtime reads `cdi.k8s.io/` annotations from the spec and prefers them over
    `NVIDIA_VISIBLE_DEVICES` (nvidia-container-toolkit `internal/config/image/cuda_image.go`), so every
    container of the pod gets the named devices, whatever the scheduler and device plugin allotted.
    NVIDIA's NRI plugin reads pod annotations of its own domain (`nvidia.cdi.k8s.io/container.<name>`); those
    are not judged here.

    ## Example
    `metadata: {annotations: {cdi.k8s.io/gpu: nvidia.com/gpu=0}}` on a Pod with no GPU request.

    ## Fix
    Ask for the GPU as a resource (`limits: {nvidia.com/gpu: 1}`) and let the device plugin choose it, or ask
    through a DRA ResourceClaim. Where the GPU Operator runs NVIDIA's NRI plugin (`cdi.nriPluginEnabled`), a
    pod annotation `nvidia.cdi.k8s.io/container.<name>: <CDI device>` names devices for one container.
    """
    for obj in document_objects(value, context):
        template: Optional[PodTemplate] = obj.template
        if template is None:
            continue
        places = [(template.pointer, template.metadata, "the pod's", f"{_POD_REACH}: {_WHAT_ENGINES_DO}")]
        if template.pointer != obj.pointer:
            places.append(
                (
                    obj.pointer,
                    obj.metadata,
                    f"the {obj.kind}'s own",
                    f"a {obj.kind}'s own annotations are not copied to its pods: no container gets the devices",
                )
            )
        for base, metadata, whose, outcome in places:
            for key, text in _cdi_annotations(metadata):
                pointer = pointer_join(pointer_join(pointer_join(base, "metadata"), "annotations"), key)
                yield Problem(
                    pointer,
                    f"{whose} annotation {key}={text} asks for CDI devices, but {outcome}",
                    "ask for the GPU as a resource (limits: nvidia.com/gpu) or a DRA claim, and remove the "
                    "annotation; with NVIDIA's NRI plugin, annotate the pod with "
                    "nvidia.cdi.k8s.io/container.<name> instead",
                )
