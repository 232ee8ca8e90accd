"""Which runtime runs a GPU pod: the RuntimeClass it names, the one it should name, and the user namespace NVIDIA's
hooks cannot work in."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.kubernetes import KUBERNETES
from nvidia_oci_hook.kinds.kubernetes.objects import RUNTIME_CLASS, Container, KubeObject, Manifests, PodTemplate
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.kubernetes.common import document_templates, nvidia_component, nvidia_tooling, run_manifests
from nvidia_oci_hook.rules.kubernetes.gpu_requests import asked_gpus

# The handlers NVIDIA's toolkit installs (`nvidia`, and the mode-specific `nvidia-cdi`, `nvidia-legacy`, ...).
_NVIDIA_HANDLER = re.compile(r"^nvidia(-[a-z0-9]+)*$")
DEVICE_PLUGIN = "NVIDIA's device plugin"
# The device plugin's strategies whose devices the engine injects itself, with no NVIDIA runtime.
_CDI_STRATEGIES = frozenset({"cdi-annotations", "cdi-cri"})
_STRATEGY_FLAG = "--device-list-strategy"

ADMISSION_REFUSAL = 'pods "{pod}" is forbidden: pod rejected: RuntimeClass "{name}" not found'
USERNS_HOOK_ERROR = "Error: container create failed: read status from sync socket: No such process"


def runtime_class_name(template: PodTemplate) -> Optional[str]:
    name = template.spec.get("runtimeClassName")
    return name if isinstance(name, str) and name else None


def nvidia_handler(runtime_class: KubeObject) -> Optional[str]:
    handler = runtime_class.value.get("handler")
    return handler if isinstance(handler, str) and _NVIDIA_HANDLER.match(handler) else None


def nvidia_runtime_classes(manifests: Manifests) -> list[KubeObject]:
    """The run's RuntimeClasses whose handler is NVIDIA's runtime, `nvidia` first."""
    found = [obj for obj in manifests.of_kind(RUNTIME_CLASS) if nvidia_handler(obj)]
    return sorted(found, key=lambda obj: (nvidia_handler(obj) != "nvidia", obj.name))


def _strategies(container: Container) -> Optional[frozenset[str]]:
    """The device plugin's --device-list-strategy (flag over variable, as its CLI reads them); None where unset."""
    words = [text for _, text in container.command_line()]
    for index, word in enumerate(words):
        if word.startswith(_STRATEGY_FLAG + "="):
            return frozenset(part.strip() for part in word.split("=", 1)[1].split(",") if part.strip())
        if word == _STRATEGY_FLAG and index + 1 < len(words):
            return frozenset(part.strip() for part in words[index + 1].split(",") if part.strip())
    entry = container.env_value("DEVICE_LIST_STRATEGY")
    if entry is not None and entry.value is not None:
        return frozenset(part.strip() for part in entry.value.split(",") if part.strip())
    return None


def engine_injects_gpus(manifests: Manifests) -> bool:
    """Whether every NVIDIA device plugin of the run hands its GPUs to the engine by CDI (no NVIDIA runtime
    needed); False where the run holds none, or one with the envvar default or volume-mounts."""
    found = False
    for template in manifests.templates():
        for container in template.containers():
            if nvidia_component(container.image) != DEVICE_PLUGIN:
                continue
            found = True
            strategies = _strategies(container)
            if strategies is None or not strategies & _CDI_STRATEGIES:
                return False
    return found


def _pod_name(template: PodTemplate) -> str:
    owner = template.owner
    return owner.name if owner.kind == "Pod" and owner.name else f"{owner.name or '(unnamed)'}-…"


@rule("K8S007", "runtime-class-not-found", Severity.ERROR, [KUBERNETES])
def runtime_class_not_found(value: Any, context: Context) -> Iterator[Problem]:
    """A pod names a RuntimeClass that the input's RuntimeClasses do not include: the API server refuses the pod.

    ## What it checks
    The `runtimeClassName` of a pod that runs NVIDIA's tooling (asks for a GPU, sets an `NVIDIA_*` variable,
    runs one of NVIDIA's GPU components) or names a class that looks like NVIDIA's (`nvidia…`), where the input
    defines RuntimeClasses (`node.k8s.io/v1`) and none of them has that name. Every file and stream given to one
    `lint` run counts as the input: a RuntimeClass in another file of the run is found. Where the input defines
    no RuntimeClass at all nothing is said: the classes usually come from the cluster (the GPU Operator creates
    `nvidia`), and whether they exist cannot be decided offline. Lint the manifests together with the cluster's
    classes (`kubectl get runtimeclass -o yaml`) for an exact answer.

    ## Why it matters
    The API server's RuntimeClass admission plugin (on by default) looks the class up when a pod is created and
    refuses the pod when it does not exist (`plugin/pkg/admission/runtimeclass/admission.go`):
    `pods "x" is forbidden: pod rejected: RuntimeClass "nvidia" not found`. A Deployment, DaemonSet or Job is
    accepted, but each pod its controller creates is refused the same way (`FailedCreate` events), so the
    workload never runs a pod.

    ## Example
    A Deployment with `runtimeClassName: nvidia-cdi` applied with the GPU Operator's RuntimeClasses `nvidia` and
    `nvidia-legacy`.

    ## Fix
    Name a RuntimeClass the cluster defines (`kubectl get runtimeclass`), or create the one named, with the
    handler the node's engine configures (`nvidia` for NVIDIA's runtime). Where the class is defined outside the
    linted files, annotate the object with `nvidia-oci-hook.io/ignore: K8S007`.
    """
    classes = run_manifests(value, context).named(RUNTIME_CLASS)
    if not classes:
        return
    for template in document_templates(value, context):
        name = runtime_class_name(template)
        if name is None or name in classes:
            continue
        if not name.startswith("nvidia") and not any(nvidia_tooling(c) for c in template.containers()):
            continue
        close = difflib.get_close_matches(name, list(classes), n=1)
        known = ", ".join(sorted(classes))
        refusal = ADMISSION_REFUSAL.format(pod=_pod_name(template), name=name)
        yield Problem(
            pointer_join(template.spec_pointer, "runtimeClassName"),
            f"names RuntimeClass {name!r}, which the input's RuntimeClasses ({known}) do not include: the API "
            f"server's RuntimeClass admission refuses the pod ({refusal})"
            + ("" if template.owner.kind == "Pod" else ", so its controller creates no pod"),
            (f"did you mean {close[0]!r}? " if close else "")
            + "name a RuntimeClass the cluster defines, or create this one with the handler the node's engine "
            "configures",
        )


@rule("K8S008", "gpu-pod-without-nvidia-runtime-class", Severity.WARNING, [KUBERNETES])
def gpu_pod_without_nvidia_runtime_class(value: Any, context: Context) -> Iterator[Problem]:
    """A GPU pod names no RuntimeClass where the input's RuntimeClasses say NVIDIA's runtime is not the default.

    ## What it checks
    A pod without `runtimeClassName` that asks for a GPU through the device plugin (`nvidia.com/gpu`, a MIG
    slice, a shared replica) or runs NVIDIA's device plugin, where the input (every file of the `lint` run)
    defines a RuntimeClass whose handler is NVIDIA's (`nvidia`, `nvidia-cdi`, `nvidia-legacy`, ...). Such a
    class exists because the engine's default runtime is not (or need not be) NVIDIA's. GPU pods are not judged
    where every NVIDIA device plugin of the input uses a CDI strategy (`cdi-annotations`, `cdi-cri`): the engine
    injects those GPUs itself. DRA claims are not judged: they are injected by CDI too.

    ## Why it matters
    A pod without a RuntimeClass runs with the engine's default runtime. Where that is not NVIDIA's, NVIDIA's
    runtime and hook never see the container: with the device plugin's `envvar` strategy (its default) or
    `volume-mounts`, the container gets the device list but no GPU: no driver libraries, and device nodes only
    where the plugin passes device specs (`PASS_DEVICE_SPECS`, which the GPU Operator sets). NVIDIA's device
    plugin itself finds no NVML and logs `Incompatible strategy detected auto` (NVIDIA/k8s-device-plugin #1220),
    and the node advertises no GPU. Since GPU Operator 25.10, CDI is on by default and the toolkit does not make
    `nvidia` the default runtime (`NVIDIA_RUNTIME_SET_AS_DEFAULT=false`), while its device plugin uses
    `cdi-annotations,cdi-cri`, which works without it; with a standalone device plugin, or CDI off, it does not.
    Whether a node's default runtime is NVIDIA's cannot be decided from manifests: `nvidia-oci-hook lint --node`
    on the node reads its engine's configuration.

    ## Example
    `RuntimeClass nvidia` (handler `nvidia`) in the input, and a Job asking for `nvidia.com/gpu: 1` without
    `runtimeClassName`, with the device plugin's default strategy.

    ## Fix
    Set `runtimeClassName: nvidia` (the input's NVIDIA class) in the pod spec, or switch the device plugin to a
    CDI strategy (`cdi-cri`) with CDI enabled in the engine, or make NVIDIA's runtime the engine's default.
    """
    manifests = run_manifests(value, context)
    classes = nvidia_runtime_classes(manifests)
    if not classes:
        return
    chosen = classes[0]
    shown = f"RuntimeClass {chosen.name} (handler {nvidia_handler(chosen)})"
    by_cdi = engine_injects_gpus(manifests)
    undecided = (
        "whether the engine's default runtime is NVIDIA's cannot be decided offline (`nvidia-oci-hook lint --node` "
        "on the node reads its engine's configuration)"
    )
    for template in document_templates(value, context):
        if runtime_class_name(template) is not None:
            continue
        containers = list(template.containers(("initContainers", "containers")))
        gpu = [(c, asked_gpus(c)) for c in containers if asked_gpus(c)]
        plugins = [c for c in containers if nvidia_component(c.image) == DEVICE_PLUGIN]
        hint = f"set runtimeClassName: {chosen.name} in the pod spec"
        if plugins:
            names = ", ".join(c.name or "(unnamed)" for c in plugins)
            yield Problem(
                template.spec_pointer,
                f"runs NVIDIA's device plugin (container {names}) without runtimeClassName while the input "
                f"defines {shown}: under a default runtime that is not NVIDIA's the plugin finds no NVML, logs "
                "`Incompatible strategy detected auto` (k8s-device-plugin #1220) and the node advertises no GPU; "
                + undecided,
                hint,
            )
        elif gpu and not by_cdi:
            asked = "; ".join(f"container {c.name or '(unnamed)'} asks for {', '.join(names)}" for c, names in gpu)
            yield Problem(
                template.spec_pointer,
                f"names no runtimeClassName ({asked}) while the input defines {shown}, a sign the engine's default "
                "runtime is not NVIDIA's: the container then runs without NVIDIA's runtime and hook, and unless "
                "the device plugin hands GPUs over by CDI (cdi-cri, cdi-annotations) it gets no driver libraries "
                "(device nodes only where the plugin passes device specs; with the envvar strategy and none, no "
                f"GPU at all); {undecided}",
                hint + ", or use a CDI device-list strategy in the device plugin",
            )


@rule("K8S013", "gpu-pod-in-user-namespace", Severity.ERROR, [KUBERNETES])
def gpu_pod_in_user_namespace(value: Any, context: Context) -> Iterator[Problem]:
    """A GPU pod with `hostUsers: false`: NVIDIA's container hook fails in the pod's user namespace.

    ## What it checks
    `spec.hostUsers: false` (a Kubernetes user namespace for the pod) in a pod whose containers ask for a GPU:
    `nvidia.com/gpu`, a MIG slice, a shared replica, or a DRA claim.

    ## Why it matters
    NVIDIA documents user-namespaced GPU pods as unsupported (GPU Operator 26.3.1 release notes, known issue,
    and its CDI page; NVIDIA/nvidia-container-toolkit #648): the `createContainer` hook of NVIDIA's CDI specs
    (`nvidia-cdi-hook`, used by the device plugin's CDI strategies, DRA and the runtime's `cdi` and `jit-cdi`
    modes) runs as the remapped user inside the container's user namespace, cannot read the OCI bundle's
    `config.json` to find the container's root, and container creation fails:
    `Error: container create failed: read status from sync socket: No such process`. The same hook fails under
    podman's `--userns nomap` (#648: `error executing hook /usr/bin/nvidia-cdi-hook (exit code: 1)`). The pod
    never starts.

    ## Example
    `spec: {hostUsers: false, containers: [{name: main, resources: {limits: {nvidia.com/gpu: 1}}}]}`.

    ## Fix
    Leave `hostUsers` out (or set it to `true`) in pods that ask for GPUs and in the GPU Operator's own pods.
    """
    for template in document_templates(value, context):
        if template.spec.get("hostUsers") is not False:
            continue
        gpu = [c for c in template.containers() if asked_gpus(c) or c.claims()]
        if not gpu:
            continue
        names = ", ".join(c.name or "(unnamed)" for c in gpu)
        who = f"container {names} asks" if len(gpu) == 1 else f"containers {names} ask"
        yield Problem(
            pointer_join(template.spec_pointer, "hostUsers"),
            f"runs the pod in its own user namespace while {who} for a GPU: NVIDIA's "
            "createContainer hook (nvidia-cdi-hook) runs as the remapped user, cannot read the bundle's "
            f"config.json, and container creation fails ({USERNS_HOOK_ERROR}); NVIDIA documents user-namespaced "
            "GPU pods as unsupported (nvidia-container-toolkit #648)",
            "remove hostUsers: false (or set it to true) in this GPU pod",
        )
