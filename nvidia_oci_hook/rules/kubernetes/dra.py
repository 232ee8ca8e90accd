"""Dynamic Resource Allocation: the claims a pod names, the classes and templates they name, and the
resource.k8s.io versions a release serves."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.kubernetes import KUBERNETES
from nvidia_oci_hook.kinds.kubernetes.objects import (
    DRA_KINDS,
    RESOURCE_API,
    KubeObject,
    Manifests,
    PodTemplate,
)
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.kubernetes.common import document_objects, document_templates, run_manifests

# resource.k8s.io versions: (first release that serves it, last release that serves it or None while served).
# Read from each release's OpenAPI (kubernetes-validate's schemas) and the API server's own deprecation warning
# (`resource.k8s.io/v1beta1 ResourceSlice is deprecated in v1.35+, unavailable in v1.38+`).
SERVED: dict[str, tuple[tuple[int, int], Optional[tuple[int, int]]]] = {
    "v1alpha1": ((1, 26), (1, 26)),
    "v1alpha2": ((1, 27), (1, 30)),
    "v1alpha3": ((1, 31), (1, 33)),
    "v1beta1": ((1, 32), (1, 37)),
    "v1beta2": ((1, 33), None),
    "v1": ((1, 34), None),
}
# Alpha and beta API versions are off by default (KEP-3136); v1, GA in 1.34, is the only one on by default.
ON_BY_DEFAULT = frozenset({"v1"})
# DRA's core (the DynamicResourceAllocation feature gate) is on by default from this release; before it, an
# API server without the gate drops pod.spec.resourceClaims and the containers' resources.claims.
DRA_ON_BY_DEFAULT = (1, 34)

_RELEASE = re.compile(r"v?(\d+)\.(\d+)")


def release_of(text: Optional[str]) -> Optional[tuple[int, int]]:
    """(major, minor) of `1.32` or `v1.32.4`; None for anything else."""
    match = _RELEASE.match(text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def _shown(release: tuple[int, int]) -> str:
    return f"{release[0]}.{release[1]}"


def served(version: str, release: tuple[int, int]) -> bool:
    span = SERVED.get(version)
    if span is None:
        return False
    first, last = span
    return first <= release and (last is None or release <= last)


def _claim_lists(template: PodTemplate) -> dict[str, list[str]]:
    """Pod claim name -> the containers that list it in resources.claims."""
    named: dict[str, list[str]] = {}
    for container in template.containers():
        for _, name in container.claims():
            named.setdefault(name, []).append(container.label)
    return named


@rule("K8S014", "container-claim-not-in-pod", Severity.ERROR, [KUBERNETES])
def container_claim_not_in_pod(value: Any, context: Context) -> Iterator[Problem]:
    """A container's `resources.claims` names a claim the pod's `spec.resourceClaims` does not define.

    ## What it checks
    Every entry of a container's (or init or ephemeral container's) `resources.claims` whose `name` is not the
    `name` of one entry of the pod's `spec.resourceClaims`, in Pods and in the pod templates of workloads.

    ## Why it matters
    A container reaches a DRA claim only through the pod: `resources.claims[].name` must be the name of one
    entry in `pod.spec.resourceClaims`, which says which ResourceClaim (or ResourceClaimTemplate) it is. The
    API server's pod validation (kubernetes `pkg/apis/core/validation`, `validateResourceClaimNames`) refuses
    the pod, or the workload whose template holds it: `spec.containers[0].resources.claims[0]: Not found:
    "gpu": must be one of the names in pod.spec.resourceClaims which is empty`. Nothing is created.

    ## Example
    `containers: [{name: main, resources: {claims: [{name: gpu}]}}]` with no `resourceClaims` in the pod
    spec, or with `resourceClaims: [{name: gpus, resourceClaimTemplateName: single-gpu}]` (a typo).

    ## Fix
    Add the claim to the pod: `spec.resourceClaims: [{name: gpu, resourceClaimTemplateName: <template>}]`,
    or correct the container's entry to the name the pod gives it.
    """
    for template in document_templates(value, context):
        defined = template.resource_claims()
        shown = ", ".join(sorted(defined)) if defined else "none"
        for container in template.containers():
            for pointer, name in container.claims():
                if name in defined:
                    continue
                listed = " which is empty" if not defined else f": {shown}"
                refusal = (
                    f'{template.owner.field_path(pointer)}: Not found: "{name}": must be one of the names in '
                    f"pod.spec.resourceClaims{listed}"
                )
                yield Problem(
                    f"{pointer}/name",
                    f"resources.claims names {name!r}, which the pod's spec.resourceClaims does not define "
                    f"(it defines {shown}): the API server refuses the {template.owner.kind}: {refusal}",
                    f"add `{{name: {name}, resourceClaimTemplateName: <template>}}` (or resourceClaimName) to "
                    "spec.resourceClaims, or name the pod's claim here",
                )


@rule("K8S015", "pod-claim-unused", Severity.WARNING, [KUBERNETES])
def pod_claim_unused(value: Any, context: Context) -> Iterator[Problem]:
    """A pod claim no container lists in `resources.claims`: its devices are held and no container gets them.

    ## What it checks
    Every entry of a pod's (or pod template's) `spec.resourceClaims` whose `name` appears in no container's,
    init container's or ephemeral container's `resources.claims`.

    ## Why it matters
    The scheduler allocates every claim of the pod, and kubelet prepares every one (the DRA driver's
    NodePrepareResources runs, CDI specs are written). But kubelet's DRA manager (`pkg/kubelet/cm/dra/
    manager.go`) hands a claim's CDI devices only to the containers whose `resources.claims` name it: a claim
    no container names reaches no container. The GPUs stay allocated to the pod, out of reach of other pods,
    while the pod's containers start without them (CUDA reports no device).

    ## Example
    `resourceClaims: [{name: gpu, resourceClaimTemplateName: single-gpu}]` and a container with
    `resources: {limits: {cpu: 1}}` but no `claims`.

    ## Fix
    Add `resources: {claims: [{name: gpu}]}` to the container that needs the devices, or drop the claim.
    """
    for template in document_templates(value, context):
        named = _claim_lists(template)
        for name, (pointer, _) in template.resource_claims().items():
            if name in named:
                continue
            yield Problem(
                f"{pointer}/name",
                f"the pod claim {name!r} is listed in no container's resources.claims: the scheduler allocates "
                "its devices and kubelet prepares them, but kubelet injects a claim's CDI devices only into the "
                "containers that list it, so the devices are held for this pod and no container gets them",
                f"add `resources: {{claims: [{{name: {name}}}]}}` to the container that uses the devices, or "
                "remove the claim",
            )


def _requests(obj: KubeObject) -> Iterator[tuple[str, dict[str, Any]]]:
    """(pointer, request) of a ResourceClaim's or ResourceClaimTemplate's spec.devices.requests."""
    path = ("spec", "devices", "requests") if obj.kind == "ResourceClaim" else ("spec", "spec", "devices", "requests")
    node: Any = obj.value
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, list):
        return
    base = obj.pointer + "/" + "/".join(path)
    for index, request in enumerate(node):
        if isinstance(request, dict):
            yield f"{base}/{index}", request


def device_class_names(obj: KubeObject) -> Iterator[tuple[str, str]]:
    """(pointer, class) of every deviceClassName a claim or template asks: the request's own (v1beta1),
    `exactly.deviceClassName` (v1beta2, v1) and each `firstAvailable[].deviceClassName` (all three)."""
    for pointer, request in _requests(obj):
        if isinstance(request.get("deviceClassName"), str):
            yield f"{pointer}/deviceClassName", request["deviceClassName"]
        exactly = request.get("exactly")
        if isinstance(exactly, dict) and isinstance(exactly.get("deviceClassName"), str):
            yield f"{pointer}/exactly/deviceClassName", exactly["deviceClassName"]
        alternatives = request.get("firstAvailable")
        for index, sub in enumerate(alternatives if isinstance(alternatives, list) else []):
            if isinstance(sub, dict) and isinstance(sub.get("deviceClassName"), str):
                yield f"{pointer}/firstAvailable/{index}/deviceClassName", sub["deviceClassName"]


def _dra_objects(manifests: Manifests, kind: str) -> list[KubeObject]:
    return [obj for obj in manifests.of_kind(kind) if obj.group == RESOURCE_API]


def _same_namespace(a: str, b: str) -> bool:
    # Manifests rendered without a namespace land in the one they are applied to: only two written ones differ.
    return not a or not b or a == b


@rule("K8S016", "dra-reference-not-found", Severity.ERROR, [KUBERNETES])
def dra_reference_not_found(value: Any, context: Context) -> Iterator[Problem]:
    """A claim or pod names a DeviceClass, ResourceClaimTemplate or ResourceClaim the input does not define.

    ## What it checks
    Judged against the objects of the whole run (every file given together), and only for the kinds the run
    holds at all: a ResourceClaim's or ResourceClaimTemplate's `deviceClassName` (the request's own in
    `resource.k8s.io/v1beta1`; `exactly.deviceClassName` in v1beta2 and v1; every
    `firstAvailable[].deviceClassName`) that names no DeviceClass of the run, and a pod's
    `spec.resourceClaims[].resourceClaimTemplateName` (or `resourceClaimName`) that names no
    ResourceClaimTemplate (ResourceClaim) of the run in the pod's namespace.

    ## Why it matters
    The API server accepts all of these: names are resolved later. The scheduler's allocator
    (`k8s.io/dynamic-resource-allocation/structured`) cannot allocate a request whose class does not exist
    (`claim default/x, request gpu: could not retrieve device class gpu.nvidia: deviceclass.resource.k8s.io
    "gpu.nvidia" not found`), and the resource claim controller cannot create a pod's claim from a template
    that does not exist: either way the pod stays Pending. A typo in a class name (NVIDIA's driver defines
    `gpu.nvidia.com`, `mig.nvidia.com`) is the common cause.

    ## Example
    A ResourceClaimTemplate asking `exactly: {deviceClassName: gpu.nvidia}` in a run whose only DeviceClass is
    `gpu.nvidia.com`.

    ## Fix
    Name a DeviceClass (template, claim) the cluster has: `kubectl get deviceclasses` lists them. Lint the
    driver's chart output with the workloads so the classes are part of the run.
    """
    manifests = run_manifests(value, context)
    classes = {obj.name for obj in _dra_objects(manifests, "DeviceClass")}
    for obj in document_objects(value, context):
        if not classes or obj.group != RESOURCE_API or obj.kind not in ("ResourceClaim", "ResourceClaimTemplate"):
            continue
        for pointer, name in device_class_names(obj):
            if name in classes:
                continue
            yield Problem(
                pointer,
                f"asks for DeviceClass {name!r}, which the input does not define (it defines "
                f"{', '.join(sorted(classes))}): the scheduler cannot allocate the request (could not retrieve "
                f'device class {name}: deviceclass.resource.k8s.io "{name}" not found) and every pod using '
                "it stays Pending",
                f"name one of the DeviceClasses the cluster has ({', '.join(sorted(classes))})",
            )
    referred = (
        ("resourceClaimTemplateName", "ResourceClaimTemplate", "the resource claim controller cannot create"),
        ("resourceClaimName", "ResourceClaim", "the scheduler cannot find"),
    )
    for template in document_templates(value, context):
        namespace = template.owner.namespace
        for name, (pointer, entry) in template.resource_claims().items():
            raw_source = entry.get("source")
            source: dict[str, Any] = raw_source if isinstance(raw_source, dict) else {}
            for key, kind, consequence in referred:
                target, target_pointer = entry.get(key), f"{pointer}/{key}"
                if not isinstance(target, str) and isinstance(source.get(key), str):
                    target, target_pointer = source[key], f"{pointer}/source/{key}"
                if not isinstance(target, str):
                    continue
                defined = _dra_objects(manifests, kind)
                if not defined or any(
                    obj.name == target and _same_namespace(obj.namespace, namespace) for obj in defined
                ):
                    continue
                yield Problem(
                    target_pointer,
                    f"the pod claim {name!r} names {kind} {target!r}, which the input does not define in this "
                    f"namespace (it defines {', '.join(sorted({obj.name for obj in defined}))}): {consequence} "
                    f'the pod\'s claim ({kind.lower()}.resource.k8s.io "{target}" not found) and the pod stays '
                    "Pending",
                    f"name a {kind} of the pod's namespace, or add {kind} {target!r} to it",
                )


def _served_list(release: tuple[int, int]) -> list[str]:
    return [version for version in SERVED if served(version, release)]


@rule("K8S017", "dra-api-not-served", Severity.ERROR, [KUBERNETES])
def dra_api_not_served(value: Any, context: Context) -> Iterator[Problem]:
    """DRA objects or pod claims that the cluster's release does not serve by default.

    ## What it checks
    Only with `--kubernetes-version`. A ResourceClaim, ResourceClaimTemplate or DeviceClass whose
    `apiVersion` that release does not serve: `resource.k8s.io/v1alpha2` 1.27 to 1.30, `v1alpha3` 1.31 to 1.33,
    `v1beta1` 1.32 to 1.37, `v1beta2` 1.33 on, `v1` 1.34 on (each release's OpenAPI; the API server warns that
    v1beta1 is deprecated in 1.35 and unavailable in 1.38). From 1.34, where `v1` is served by default, an
    object of an alpha or beta version, which that release serves only when it is enabled. Before 1.34, a pod
    or pod template with `spec.resourceClaims`.

    ## Why it matters
    An API version the release does not serve (or has not enabled: beta APIs are off by default) does not
    exist for it: `kubectl apply` answers `no matches for kind "ResourceClaimTemplate" in version
    "resource.k8s.io/v1"` (`ensure CRDs are installed first`), and a Helm release fails the same way.
    Before 1.34 DRA itself is off by default (the `DynamicResourceAllocation` feature gate: alpha to 1.31,
    beta but off in 1.32 and 1.33; GA and on in 1.34): where it is not enabled on the API server, the API
    server drops `spec.resourceClaims` and every container's `resources.claims` (`pkg/api/pod/util.go`,
    `dropDisabledDynamicResourceAllocationFields`) and the pod runs without the devices.

    ## Example
    The DRA driver's DeviceClass `apiVersion: resource.k8s.io/v1` applied to a 1.32 cluster.

    ## Fix
    Write the version the release serves (`v1` from 1.34; `v1beta1` on 1.32, `v1beta2` on 1.33, with
    `--runtime-config=resource.k8s.io/<version>=true` and the `DynamicResourceAllocation` feature gate on the
    API server, scheduler, controller manager and kubelets), or upgrade the cluster to 1.34.
    """
    release = release_of(context.kubernetes_version)
    if release is None:
        return
    on_by_default = release >= DRA_ON_BY_DEFAULT
    for obj in document_objects(value, context):
        if obj.kind not in DRA_KINDS or obj.group != RESOURCE_API:
            continue
        version, pointer = obj.version, f"{obj.pointer}/apiVersion"
        refusal = f'no matches for kind "{obj.kind}" in version "{obj.api_version}"'
        offered = [v for v in _served_list(release) if v in ON_BY_DEFAULT] or _served_list(release)
        hint = (
            f"write apiVersion resource.k8s.io/{offered[-1]}"
            if offered
            else f"Kubernetes {_shown(release)} has no structured-parameters DRA; upgrade the cluster (1.34 serves v1)"
        )
        if not served(version, release):
            span = SERVED.get(version)
            when = (
                f"served {_shown(span[0])} to {_shown(span[1])}"
                if span and span[1]
                else (f"served from {_shown(span[0])}" if span else "no release serves it")
            )
            yield Problem(
                pointer,
                f"Kubernetes {_shown(release)} does not serve resource.k8s.io/{version} ({when}): kubectl and "
                f"the API server answer: {refusal}",
                hint,
            )
        elif on_by_default and version not in ON_BY_DEFAULT:
            yield Problem(
                pointer,
                f"Kubernetes {_shown(release)} serves resource.k8s.io/{version} only where the API server enables "
                f"it (--runtime-config=resource.k8s.io/{version}=true; alpha and beta APIs are off by default): "
                f"elsewhere kubectl answers: {refusal}",
                "write apiVersion resource.k8s.io/v1, served by default from 1.34",
            )
    if on_by_default:
        return
    for template in document_templates(value, context):
        claims = template.spec.get("resourceClaims")
        if not isinstance(claims, list) or not claims:
            continue
        yield Problem(
            f"{template.spec_pointer}/resourceClaims",
            f"DRA is off by default in Kubernetes {_shown(release)} (the DynamicResourceAllocation feature "
            "gate is on by default from 1.34): where it is not enabled, the API server drops "
            "spec.resourceClaims and the containers' resources.claims, and the pod runs without the claimed "
            "devices",
            "enable the DynamicResourceAllocation feature gate (API server, scheduler, controller manager, "
            f"kubelets) and resource.k8s.io/{(_served_list(release) or ['v1beta1'])[-1]} in --runtime-config, "
            "or upgrade to 1.34",
        )
