"""The pod on this node (`lint --node POD.yaml`): what only the node decides about a pod's GPU — whether a device
plugin is there to answer, whether the engine reads the CDI names it answers, whether the engine has the pod's
runtime handler. The CRI config the kubelet derives is judged by the CRI rules themselves (node/pods.py); these
rules say what no CRI config shows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.kubernetes import KUBERNETES
from nvidia_oci_hook.rules.base import Context, rule


def _node_problems(code: str, value: Any, context: Context) -> Iterator[Problem]:
    if context.pod_node is None:
        return
    from nvidia_oci_hook.node.pods import document_judgements

    for judgement in document_judgements(value, context):
        for found_code, problem in judgement.node_problems:
            if found_code == code:
                yield problem


@rule("K8S101", "gpu-resource-without-plugin", Severity.ERROR, [KUBERNETES], needs_host=True)
def gpu_resource_without_plugin(value: Any, context: Context) -> Iterator[Problem]:
    """No device plugin on this node answers for the GPU resource the pod asks (`lint --node`).

    ## What it checks
    With `--node`: each GPU resource a container asks (`nvidia.com/gpu`, `nvidia.com/mig-*`) against the device
    plugins of this node: a plugin socket in `/var/lib/kubelet/device-plugins` or the resource among the devices
    the kubelet's checkpoint says were registered.

    ## Why it matters
    The kubelet admits a static pod asking for an extended resource no plugin registered and runs it without it
    (`pkg/kubelet/lifecycle/predicate.go`): the container starts with no GPU and nothing says so. Through the API
    server, the scheduler does not place the pod on this node (0 allocatable), and it stays Pending elsewhere.

    ## Example
    A pod asking `nvidia.com/gpu: 1` on a node whose device-plugin pod is crash-looping.

    ## Fix
    Start the device plugin on this node (the GPU Operator's `nvidia-device-plugin-daemonset` pod; `kubectl logs`
    says why it stopped), then restart the pod.
    """
    return _node_problems("K8S101", value, context)


@rule("K8S102", "cdi-device-engine-cdi-off", Severity.ERROR, [KUBERNETES], needs_host=True)
def cdi_device_engine_cdi_off(value: Any, context: Context) -> Iterator[Problem]:
    """The container gets CDI device names and this node's engine resolves none (`lint --node`).

    ## What it checks
    With `--node`: whether the CRI config the kubelet derives for the container holds CDI names (`CDI_devices`
    from the device plugin's `cdi-cri` strategy or a DRA claim, `cdi.k8s.io/` annotations from `cdi-annotations`)
    while the engine on this node resolves no CDI device: containerd 1.6, or containerd 1.7 without
    `enable_cdi = true` (or any release with it set to false).

    ## Why it matters
    Such an engine drops the names without a word (measured: containerd 1.6 with a real kubelet): the pod runs,
    and its container has no GPU.

    ## Example
    NVIDIA's device plugin with `deviceListStrategy: cdi-cri` on a node running containerd 1.7 with its default
    configuration.

    ## Fix
    Turn CDI on in the engine (`enable_cdi = true` in containerd 1.7's CRI plugin; upgrade 1.6), or set the device
    plugin's `deviceListStrategy` back to `envvar`.
    """
    return _node_problems("K8S102", value, context)


@rule("K8S103", "runtime-handler-not-on-node", Severity.ERROR, [KUBERNETES], needs_host=True)
def runtime_handler_not_on_node(value: Any, context: Context) -> Iterator[Problem]:
    """This node's engine has no runtime handler for the pod's RuntimeClass (`lint --node`).

    ## What it checks
    With `--node`: the handler of the pod's RuntimeClass (the input's RuntimeClass of that name; its name where the
    input holds none; `--runtime-handler NAME` overrides) against the runtime handlers of the engine's
    configuration in effect on this node (cri-o's `crio.runtime.runtimes`, containerd's CRI runtimes).

    ## Why it matters
    The engine refuses the pod's sandbox: cri-o with `failed to find runtime handler nvidia from runtime list`,
    containerd with `failed to get sandbox runtime: no runtime for "nvidia" is configured`. The pod never starts.

    ## Example
    `runtimeClassName: nvidia` on a node where `nvidia-ctk runtime configure` never ran, or where the engine was
    not restarted after it did.

    ## Fix
    Configure the engine (`nvidia-ctk runtime configure --runtime=crio|containerd`, or `nvidia-oci-hook
    configure`) and restart it, or name one of its handlers.
    """
    return _node_problems("K8S103", value, context)


@rule("K8S104", "gpu-env-without-nvidia-runtime", Severity.ERROR, [KUBERNETES], needs_host=True)
def gpu_env_without_nvidia_runtime(value: Any, context: Context) -> Iterator[Problem]:
    """The container's GPU rests on NVIDIA_VISIBLE_DEVICES alone and nothing on this node injects it (`lint --node`).

    ## What it checks
    With `--node`: a container whose device plugin answers with no device spec, no CDI name and no `cdi.k8s.io/`
    annotation (NVIDIA's device plugin's default `envvar` strategy: only `NVIDIA_VISIBLE_DEVICES`), while the
    runtime handler the pod runs on (its RuntimeClass's, else the engine's default) is not NVIDIA's runtime and no
    NVIDIA hook (`nvidia-container-runtime-hook`) is registered in the engine's hooks directories.

    ## Why it matters
    The variable is only a request to NVIDIA's runtime or hook: runc and crun ignore it. Measured with a real
    kubelet 1.32 on cri-o 1.37 and containerd 1.7 and 2.1: the pod runs, and its container has no
    `/dev/nvidia*` node.

    ## Example
    A GPU pod without `runtimeClassName` on a node whose default handler is runc, with the device plugin on its
    default strategy.

    ## Fix
    Run the pod with NVIDIA's runtime (`runtimeClassName: nvidia`, after `nvidia-ctk runtime configure`), or make
    the plugin hand out devices itself (`deviceListStrategy: cdi-cri` with CDI on in the engine, or
    `PASS_DEVICE_SPECS=true`).
    """
    return _node_problems("K8S104", value, context)


@rule("K8S105", "device-plugin-answer-unknown", Severity.INFO, [KUBERNETES], needs_host=True)
def device_plugin_answer_unknown(value: Any, context: Context) -> Iterator[Problem]:
    """The device plugin registered on this node but has answered no pod yet (`lint --node`).

    ## What it checks
    With `--node`: a GPU resource whose plugin is registered while the kubelet's checkpoint holds no answer of it
    for any pod of this node.

    ## Why it matters
    What the container would get (device paths, CDI names, `NVIDIA_VISIBLE_DEVICES`) is the plugin's answer; until
    it has answered once, the devices of the pod cannot be judged here, and the verdict stays open.

    ## Example
    A fresh node whose device plugin registered a minute ago.

    ## Fix
    Nothing to fix: run `lint --node` again once a GPU pod runs on the node, or read the plugin's configuration
    (`deviceListStrategy`, the driver root it was given).
    """
    return _node_problems("K8S105", value, context)


@rule("K8S106", "cluster-policy-cdi-engine-off", Severity.ERROR, [KUBERNETES], needs_host=True)
def cluster_policy_cdi_engine_off(value: Any, context: Context) -> Iterator[Problem]:
    """The GPU Operator's ClusterPolicy turns CDI on, and this node's engine resolves no CDI device (`lint --node`).

    ## What it checks
    With `--node` and a ClusterPolicy in the input: CDI as its GPU Operator release reads it (`cdi.enabled`, on by
    default from 25.10) against the engine on this node: containerd 1.6, or a later containerd with CDI off. Only
    for the releases that then give the device plugin CDI strategies alone (`cdi-annotations,cdi-cri`, 25.10 and
    later); up to 25.3 `envvar` stays beside `cdi-annotations` and NVIDIA's runtime stays the default, so GPUs still
    arrive, and nothing is reported.

    ## Why it matters
    The operator's toolkit turns CDI on in the engine's configuration itself (`CDI_ENABLED=true` makes
    `nvidia-ctk-installer` write `enable_cdi = true`) and restarts it: a node whose engine still has CDI off is one
    where that has not happened (the toolkit pod failed or has not run here, or the engine was restarted on another
    configuration). Meanwhile the device plugin answers with CDI names only, and such an engine drops them without
    a word: GPU pods run without GPUs (K8S102, measured with a real kubelet on containerd 1.6).

    ## Example
    GPU Operator 25.10's default ClusterPolicy (`kubectl get clusterpolicy -o yaml | nvidia-oci-hook lint --node -`)
    on a node whose containerd 1.7 has `enable_cdi` unset.

    ## Fix
    Find why the toolkit has not configured the engine (`kubectl logs` of the `nvidia-container-toolkit-daemonset`
    pod on this node), or turn CDI on in the engine (`enable_cdi = true`) and restart it; where nodes must stay
    without CDI, set `cdi.enabled: false` in the ClusterPolicy.
    """
    node = context.pod_node
    if node is None or node.cdi_off is None:
        return
    from nvidia_oci_hook.kinds.kubernetes.gpu_operator import RELEASES, cdi_setting, release_for
    from nvidia_oci_hook.kinds.kubernetes.objects import CLUSTER_POLICY
    from nvidia_oci_hook.rules.kubernetes.common import document_objects

    for obj in document_objects(value, context):
        if obj.kind != CLUSTER_POLICY:
            continue
        version, how = release_for(value, obj.value, context.gpu_operator_version)
        release = RELEASES[version]
        enabled, pointer = cdi_setting(obj.pointer, obj.value, release)
        if not enabled or "envvar" in release.cdi_strategy.split(","):
            continue
        yield Problem(
            pointer,
            f"CDI is on for GPU Operator {version} ({how}): its device plugin answers with CDI names only "
            f"({release.cdi_strategy}) and NVIDIA's runtime is not the default, but this node's {node.label} "
            f"resolves no CDI name ({node.cdi_off}): the toolkit has not configured it, and GPU pods here run "
            "without GPUs",
            "read the nvidia-container-toolkit-daemonset pod's log on this node, or set enable_cdi = true in the "
            "engine and restart it; cdi.enabled: false where nodes must stay without CDI",
        )
