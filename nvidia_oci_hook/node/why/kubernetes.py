"""The causes of the Kubernetes layer's errors (kubelet, the API server's admission, NVIDIA's device plugin and
toolkit): each names a manifest pattern the node cannot see, and the node decides what it can of it (the engine's
runtime handlers and default runtime, NVIDIA's hook in cri-o's hooks directories, the toolkit's config.toml, the
driver, the device plugins registered with kubelet).
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from typing import Optional

from nvidia_oci_hook.node.toolkit import (
    ACCEPT_ENVVAR,
    ACCEPT_MOUNTS,
    DEFAULT_CONFIG,
    OPERATOR_CONFIG,
    is_nvidia_program,
)
from nvidia_oci_hook.node.why.causes import Cause, Node

# NVIDIA's hook by the names it is installed as; in a cri-o hooks directory it serves every container, whatever
# the handler (gpu-operator #1298: with it the 'nvidia' handler does not exist, and none is needed).
_NVIDIA_HOOKS = frozenset({"nvidia-container-runtime-hook", "nvidia-container-toolkit"})
# kubelet's device plugin directory (k8s.io/kubelet deviceplugin/v1beta1 DevicePluginPath), its own registration
# socket, and the checkpoint where it records the devices registered and those given to each pod's containers.
PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
KUBELET_SOCKET = "kubelet.sock"
CHECKPOINT = "kubelet_internal_checkpoint"
_LISTING = "kubectl get runtimeclass -o custom-columns=NAME:.metadata.name,HANDLER:.handler"


@dataclass
class EngineRuntimes:
    """One engine's runtime handlers, the one it runs a pod without runtimeClassName with, and (cri-o) the hooks
    files that run NVIDIA's hook for every container."""

    engine: str
    label: str
    handlers: dict[str, str]
    default: str
    nvidia_hooks: list[str] = field(default_factory=list)

    @property
    def default_program(self) -> str:
        return self.handlers.get(self.default, self.default)

    @property
    def default_is_nvidia(self) -> bool:
        return is_nvidia_program(self.default_program)

    @property
    def gives_gpus_by_default(self) -> bool:
        return self.default_is_nvidia or bool(self.nvidia_hooks)

    def nvidia_handlers(self) -> list[str]:
        return [name for name, program in self.handlers.items() if is_nvidia_program(program)]

    def describe_default(self) -> str:
        line = f"{self.label} runs a pod without runtimeClassName with {self.default} ({self.default_program})"
        if self.nvidia_hooks:
            line += f"; NVIDIA's hook runs for every container from {', '.join(self.nvidia_hooks)}"
        return line


def _crio(node: Node) -> Optional[tuple[str, list[str]]]:
    """cri-o's default runtime and the hooks files in its hooks directories that run NVIDIA's hook."""
    from nvidia_oci_hook.kinds.crio.merge import merge
    from nvidia_oci_hook.kinds.loading import read_toml
    from nvidia_oci_hook.node.engines import crio_config_files

    view, paths = crio_config_files(node.host, node.by_hand)
    present = [(path, value, True) for path in paths for value in [read_toml(view, path)] if value is not None]
    if not present:
        return None
    config = merge(present)
    default = config.get("/crio/runtime/default_runtime") or "crun"
    directories = config.get("/crio/runtime/hooks_dir")
    hooks = []
    for directory in directories if isinstance(directories, list) else []:
        if not isinstance(directory, str):
            continue
        for name in sorted(node.host.list_dir(directory)):
            path = posixpath.join(directory, name)
            if not name.endswith(".json"):
                continue
            try:
                value = json.loads(node.host.read_text(path, limit=1 << 20) or "null")
            except ValueError:
                continue
            program = (value.get("hook") or {}).get("path") if isinstance(value, dict) else None
            if isinstance(program, str) and posixpath.basename(program) in _NVIDIA_HOOKS:
                hooks.append(path)
    return str(default), hooks


def engine_runtimes(node: Node) -> list[EngineRuntimes]:
    """The runtimes of each engine configured on the node; only the engine kubelet talks to where the node says
    which one that is."""
    from nvidia_oci_hook.kinds.cdi.releases import ENGINE_NAMES
    from nvidia_oci_hook.kinds.containerd.config import ContainerdConfig
    from nvidia_oci_hook.node.engines import containerd_in_effect, cri_engine_of, runtime_handlers

    handlers = runtime_handlers(node.host, node.by_hand)
    found = []
    if "crio" in handlers:
        crio = _crio(node)
        default, hooks = crio if crio is not None else ("crun", [])
        found.append(EngineRuntimes("crio", ENGINE_NAMES["crio"], handlers["crio"], default, hooks))
    if "containerd" in handlers:
        config = ContainerdConfig(containerd_in_effect(node.host, node.by_hand) or {})
        default = (config.cri_containerd() or {}).get("default_runtime_name") or "runc"
        found.append(EngineRuntimes("containerd", ENGINE_NAMES["containerd"], handlers["containerd"], str(default)))
    if len(found) > 1:
        kubelets = cri_engine_of(node.host)
        found = [engine for engine in found if engine.engine == kubelets] or found
    return found


def runtime_class_side(node: Node, engine: str, name: str) -> Cause:
    """The manifest side of a handler the engine lacks: a RuntimeClass whose handler is name, chosen by the pod's
    runtimeClassName; what to point it at instead, from what the engine has."""
    code = "RuntimeClass"
    runtimes = next((found for found in engine_runtimes(node) if found.engine == engine), None)
    asked = f"the pod's runtimeClassName names a RuntimeClass whose handler is {name}"
    if runtimes is None:
        return Cause(code, None, f"{asked}; this node's handlers are unknown (no configuration read)", [_LISTING])
    if name in runtimes.handlers:
        return Cause(code, False, f"{asked}, which {runtimes.label} on this node defines: the manifest fits this node")
    evidence = [f"{_LISTING} shows which class names {name}", runtimes.describe_default()]
    others = [handler for handler in runtimes.nvidia_handlers() if handler != name]
    if others:
        fix = (
            f"point the pods at a RuntimeClass whose handler is {others[0]} (the handler that runs NVIDIA's runtime "
            "on this node); a RuntimeClass's handler cannot be changed: create another, or delete and recreate it"
        )
    elif runtimes.gives_gpus_by_default:
        fix = (
            f"drop runtimeClassName from the pod: {runtimes.label} gives GPUs to a pod without one here "
            f"({runtimes.describe_default()})"
        )
    else:
        fix = (
            f"register a handler {name} that runs NVIDIA's runtime in {runtimes.label} (the engines cause), or point "
            f"the RuntimeClass at one of: {', '.join(runtimes.handlers)}"
        )
    summary = f"{asked}, and {runtimes.label} on this node has no handler {name}"
    return Cause(code, True, summary, evidence, fix)


def runtimeclass_not_found(node: Node, groups: dict[str, str]) -> list[Cause]:
    name = groups["name"]
    admission = "admission" in groups
    where = "the API server's RuntimeClass admission" if admission else "kubelet"
    causes = [
        Cause(
            "RuntimeClass",
            True,
            f"the cluster has no RuntimeClass {name} (as {where} found; kubectl get runtimeclass {name} shows it now)",
            [f"{_LISTING} lists the classes there are"],
            f"create the RuntimeClass {name} (apiVersion node.k8s.io/v1, handler: the engine's handler that runs "
            "NVIDIA's runtime, as the next cause names it), or set the pod's runtimeClassName to a class there is",
        )
    ]
    found = engine_runtimes(node)
    if not found:
        unknown = "no cri-o or containerd configuration on this node: its runtime handlers are unknown"
        causes.append(Cause("engines", None, unknown))
    for runtimes in found:
        causes.append(_handler_for_new_class(runtimes, name))
    return causes


def _handler_for_new_class(runtimes: EngineRuntimes, name: str) -> Cause:
    """Whether a RuntimeClass name with handler name is all this node needs."""
    from nvidia_oci_hook.node.engines import handler_list

    evidence = [f"{runtimes.label} runtime handlers: {handler_list(runtimes.handlers)}", runtimes.describe_default()]
    if name in runtimes.handlers:
        return Cause(
            "engines",
            False,
            f"{runtimes.label} on this node defines a handler {name} ({runtimes.handlers[name]}): creating the "
            f"RuntimeClass {name} with handler: {name} is all this node needs",
            evidence,
        )
    others = runtimes.nvidia_handlers()
    if others:
        fix = f"create the RuntimeClass {name} with handler: {others[0]} (the handler that runs NVIDIA's runtime here)"
    elif runtimes.gives_gpus_by_default:
        fix = f"drop runtimeClassName from the pod: {runtimes.label} gives GPUs to a pod without one here"
    else:
        fix = (
            f"register a handler {name} that runs NVIDIA's runtime in {runtimes.label} (nvidia-ctk runtime configure "
            f"--runtime={runtimes.engine}, or nvidia-oci-hook configure {runtimes.engine}) and restart it, then create "
            "the RuntimeClass"
        )
    return Cause(
        "engines",
        True,
        f"{runtimes.label} on this node has no handler {name}: creating the RuntimeClass {name} with handler: {name} "
        "alone is not enough (the pod would then fail on the missing handler)",
        evidence,
        fix,
    )


def runtimeclass_not_found_undecided(groups: dict[str, str]) -> list[str]:
    return [
        f"which pods name {groups['name']}: kubectl get pods -A -o custom-columns=NAMESPACE:.metadata.namespace,"
        "NAME:.metadata.name,CLASS:.spec.runtimeClassName (a Deployment's pods are never created: its "
        "ReplicaSet's FailedCreate event carries the error)",
    ]


def _driver_present(node: Node) -> Cause:
    from nvidia_oci_hook.node.driver import FOUND, NONE, resolve_driver_root

    code = "driver"
    answer = resolve_driver_root(node.host, node.settings.driver_roots)
    evidence = answer.evidence_lines()
    if answer.status == NONE:
        return Cause(
            code,
            True,
            f"no NVIDIA driver on this node ({answer.reason}): NVML has nothing to load, whatever the runtime",
            evidence,
            "install the driver (or let the GPU Operator's driver container run), or keep the device plugin off nodes "
            "without GPUs (nodeSelector or affinity)",
        )
    if answer.status != FOUND or answer.root is None:
        return Cause(code, None, f"the driver's root is not decided here: {answer.reason}", evidence)
    found = answer.evidence[answer.root]
    library = any(path.endswith("/libnvidia-ml.so.1") for path in found.userspace)
    dev_root = answer.dev_root() or "/"
    control = answer.evidence[dev_root].has_control_node if dev_root in answer.evidence else False
    control = control or node.host.exists("/dev/nvidiactl")
    missing = [what for what, present in (("libnvidia-ml.so.1", library), ("/dev/nvidiactl", control)) if not present]
    if missing:
        return Cause(
            code,
            True,
            f"the driver under {answer.root} lacks {' and '.join(missing)}: NVML cannot start in any container",
            evidence,
            "finish the driver's installation (the kernel module loaded, its user space installed), then restart the "
            "device plugin's pod",
        )
    return Cause(code, False, f"the driver is on this node (libnvidia-ml.so.1 and nvidiactl under {answer.root})")


def device_plugin_no_platform(node: Node, groups: dict[str, str]) -> list[Cause]:
    code = "default-runtime"
    found = engine_runtimes(node)
    if not found:
        runtime = Cause(code, None, "no cri-o or containerd configuration on this node: its default runtime is unknown")
    else:
        evidence = [runtimes.describe_default() for runtimes in found]
        lacking = [runtimes for runtimes in found if not runtimes.gives_gpus_by_default]
        if not lacking:
            runtime = Cause(
                code,
                False,
                "the engine's default runtime here is NVIDIA's (or NVIDIA's hook serves every container): the plugin "
                "gets the driver without a runtimeClassName",
                evidence,
            )
        else:
            first = lacking[0]
            handlers = first.nvidia_handlers()
            if handlers:
                fix = (
                    f"give the device plugin's pod runtimeClassName: a class with handler: {handlers[0]} (the "
                    f"handler that runs NVIDIA's runtime; Helm: --set runtimeClassName=nvidia with a RuntimeClass "
                    f"nvidia whose handler is {handlers[0]}), or make {handlers[0]} the engine's default runtime"
                )
            else:
                fix = (
                    f"{first.label} has no handler that runs NVIDIA's runtime: register one (nvidia-ctk runtime "
                    f"configure --runtime={first.engine}) and restart it, then give the device plugin's pod "
                    "runtimeClassName: nvidia (or make it the default runtime)"
                )
            runtime = Cause(
                code,
                True,
                f"{first.label}'s default runtime {first.default} ({first.default_program}) is not NVIDIA's: the "
                "device plugin's pod gets no driver libraries unless it names runtimeClassName",
                evidence,
                fix,
            )
    return [runtime, _driver_present(node)]


def device_plugin_no_platform_undecided(groups: dict[str, str]) -> list[str]:
    return [
        "whether the device plugin's pod names a runtimeClassName: kubectl get ds -A -l "
        "app.kubernetes.io/name=nvidia-device-plugin -o jsonpath='{..spec.template.spec.runtimeClassName}' (the "
        "chart's value runtimeClassName); NVML is what the plugin failed to find in its own container",
    ]


def envvar_unprivileged(node: Node, groups: dict[str, str]) -> list[Cause]:
    from nvidia_oci_hook.node.why.toolkit import configs_in_effect

    code = "toolkit-config"
    configs = [(config.path, config.settings) for config in configs_in_effect(node) if config.present]
    refused = "the container was not privileged" if groups.get("privileged", "false") == "false" else ""
    if not configs:
        setting = Cause(
            code,
            None,
            f"no NVIDIA toolkit config.toml on this node ({DEFAULT_CONFIG}, {OPERATOR_CONFIG}, or where an NVIDIA "
            "runtime handler's wrapper points): its default accepts the "
            "variable from unprivileged containers, so the toolkit that wrote this reads one elsewhere "
            "(NVIDIA_CTK_CONFIG_FILE_PATH)",
        )
    else:
        off = [(path, value) for path, value in configs if value.get(ACCEPT_ENVVAR) is False]
        evidence = [
            f"{path}: {ACCEPT_ENVVAR} = {str(value.get(ACCEPT_ENVVAR, 'unset (true)')).lower()}, {ACCEPT_MOUNTS} = "
            f"{str(value.get(ACCEPT_MOUNTS, 'unset (false)')).lower()}"
            for path, value in configs
        ]
        if off:
            setting = Cause(
                code,
                True,
                f"{off[0][0]} sets {ACCEPT_ENVVAR} = false: NVIDIA's hook takes GPUs from unprivileged containers only "
                f"as the device plugin's volume mounts" + (f" ({refused})" if refused else ""),
                evidence,
                "give the container its GPUs by requesting nvidia.com/gpu (the device plugin's volume-mounts "
                "strategy then passes them); set the key true only where every pod may pick its GPUs itself",
            )
        else:
            setting = Cause(
                code,
                False,
                f"no NVIDIA toolkit config.toml on this node sets {ACCEPT_ENVVAR} = false: the error came from "
                "another node, or from a toolkit that reads its config elsewhere",
                evidence,
            )
    return [
        setting,
        Cause(
            "pod-env",
            None,
            "the pod sets NVIDIA_VISIBLE_DEVICES itself (or its image bakes it, as NGC and CUDA images do) without "
            "requesting nvidia.com/gpu: only the device plugin's mounts may choose GPUs here",
            [],
            "request nvidia.com/gpu instead; in a pod that needs no GPU, set NVIDIA_VISIBLE_DEVICES=void to "
            "override the image's value",
        ),
    ]


def envvar_unprivileged_undecided(groups: dict[str, str]) -> list[str]:
    return [
        "where NVIDIA_VISIBLE_DEVICES comes from: the pod's env (kubectl get pod POD -o jsonpath="
        "'{..env}') or its image's (the image config's Env), and whether the pod requests nvidia.com/gpu",
    ]


# kubelet's device manager reasons, as pkg/kubelet/cm/devicemanager/manager.go devicesToAllocate writes them.
_REQUESTED = re.compile(r"requested number of devices unavailable for (\S+?)\. Requested: (\d+), Available: (\d+)")
_UNHEALTHY = re.compile(r"cannot allocate unhealthy devices (\S+?)(?:,|$)")
_UNREGISTERED = re.compile(r"cannot allocate unregistered device (\S+?)(?:,|$)")


@dataclass
class Checkpoint:
    """kubelet's device manager checkpoint: the devices registered per resource, and per pod the containers'."""

    registered: dict[str, list[str]]
    # (pod UID, container, resource) -> device IDs
    allocated: dict[tuple[str, str, str], list[str]]


def read_checkpoint(node: Node) -> Optional[Checkpoint]:
    text = node.host.read_text(posixpath.join(PLUGIN_DIR, CHECKPOINT), limit=16 << 20)
    if text is None:
        return None
    try:
        data = json.loads(text).get("Data") or {}
    except (ValueError, AttributeError):
        return None
    if not isinstance(data, dict):
        return None
    registered = {
        str(name): [str(device) for device in devices]
        for name, devices in (data.get("RegisteredDevices") or {}).items()
        if isinstance(devices, list)
    }
    allocated: dict[tuple[str, str, str], list[str]] = {}
    for entry in data.get("PodDeviceEntries") or []:
        if not isinstance(entry, dict):
            continue
        ids = entry.get("DeviceIDs")
        # Checkpoint v1 keeps a list; v2 keeps the list per NUMA node.
        devices = ids if isinstance(ids, list) else [d for part in (ids or {}).values() for d in part or []]
        key = (str(entry.get("PodUID")), str(entry.get("ContainerName")), str(entry.get("ResourceName")))
        allocated.setdefault(key, []).extend(str(device) for device in devices)
    return Checkpoint(registered, allocated)


def _resource(groups: dict[str, str]) -> Optional[tuple[str, str]]:
    """(the reason kind, the resource) from the device manager's reason, if the text carries one."""
    reason = groups.get("reason", "")
    for kind, pattern in (("count", _REQUESTED), ("unhealthy", _UNHEALTHY), ("unregistered", _UNREGISTERED)):
        match = pattern.search(reason)
        if match:
            return kind, match.group(1)
    return None


def _plugin_registered(node: Node, resource: Optional[str], checkpoint: Optional[Checkpoint]) -> Cause:
    code = "device-plugin"
    if not node.host.is_dir("/var/lib/kubelet"):
        unknown = "no /var/lib/kubelet on this node: not a Kubernetes node, or kubelet's root is elsewhere"
        return Cause(code, None, unknown)
    sockets = [name for name in node.host.list_dir(PLUGIN_DIR) if name.endswith(".sock") and name != KUBELET_SOCKET]
    what = resource or "the resource"
    evidence = [f"{PLUGIN_DIR}: {', '.join(sockets) or 'no plugin socket'}"]
    if checkpoint is not None and resource in checkpoint.registered:
        evidence.append(f"{CHECKPOINT}: {resource} registered with {len(checkpoint.registered[resource])} device(s)")
    domain, _, name = (resource or "").partition("/")
    if sockets and not (domain == "nvidia.com" and name):
        summary = f"device plugins registered here: {', '.join(sockets)}; which one serves {what} is not decided here"
        return Cause(code, None, summary, evidence)
    # NVIDIA's plugin serves each resource on nvidia-<name>.sock (internal/plugin/server.go getPluginSocketPath).
    present = [socket for socket in sockets if socket == f"nvidia-{name}.sock"]
    fix = (
        f"start the device plugin for {what} on this node (its DaemonSet's pod, with the driver and runtime it "
        "needs), then recreate the failed pod: kubelet does not retry an admission it refused"
    )
    if not present:
        return Cause(code, True, f"no device plugin for {what} is registered with kubelet on this node", evidence, fix)
    return Cause(
        code,
        False,
        f"a device plugin serves {what} on this node now ({', '.join(present)}): it was not registered, or had no "
        "healthy device, only when the pod was admitted (after a kubelet or node restart); recreate the pod",
        evidence,
    )


def _init_and_app(checkpoint: Optional[Checkpoint], resource: Optional[str]) -> Cause:
    """kubelet gives an init container's devices to the app containers after it (devicesToReuse): a pod whose two
    containers hold the same device asked for it in an init container and a container. After a kubelet restart,
    such a pod is admitted again and fails (kubernetes #124345, #138446)."""
    code = "init-container-devices"
    summary = (
        "the pod requests the device in an init container and in a container: after a kubelet restart kubelet "
        "admits it again and refuses it (kubernetes #124345, #138446)"
    )
    fix = (
        "request the device in the containers only (move the init container's GPU work into the container), or "
        "recreate the pod after each kubelet restart: the fault is kubelet's"
    )
    if checkpoint is None:
        return Cause(code, None, summary + f"; {CHECKPOINT} is not on this node to show which pods do", [], fix)
    shared = []
    by_pod: dict[tuple[str, str], dict[str, set[str]]] = {}
    for (pod, container, name), devices in checkpoint.allocated.items():
        if resource is None or name == resource:
            by_pod.setdefault((pod, name), {})[container] = set(devices)
    for (pod, name), containers in sorted(by_pod.items()):
        names = sorted(containers)
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :] if containers[a] & containers[b]]
        if pairs:
            a, b = pairs[0]
            both = ", ".join(sorted(containers[a] & containers[b]))
            shared.append(f"pod {pod}: {a} and {b} hold the same {name} device(s) {both}")
    if shared:
        return Cause(code, True, summary + f" ({len(shared)} such pod(s) on this node)", shared, fix)
    return Cause(code, None, summary + f"; no pod in {CHECKPOINT} has two containers sharing a device", [], fix)


def _device_count(node: Node, groups: dict[str, str], checkpoint: Optional[Checkpoint]) -> Cause:
    code = "device-count"
    match = _REQUESTED.search(groups.get("reason", ""))
    if match is None:
        return Cause(code, None, "fewer free devices than the pod requested: the error text does not say which reason")
    resource, requested, available = match.group(1), int(match.group(2)), int(match.group(3))
    evidence = []
    if checkpoint is not None:
        registered = checkpoint.registered.get(resource, [])
        held = {d for (_, _, name), devices in checkpoint.allocated.items() if name == resource for d in devices}
        evidence.append(f"{CHECKPOINT}: {len(registered)} {resource} device(s) registered, {len(held)} held by pods")
        for (pod, container, name), devices in sorted(checkpoint.allocated.items()):
            if name == resource:
                evidence.append(f"pod {pod} container {container}: {', '.join(devices)}")
    if resource == "nvidia.com/gpu":
        gpus = node.driver().visible_gpus()
        if gpus is not None:
            evidence.insert(0, f"the kernel module lists {len(gpus)} GPU(s)")
    return Cause(
        code,
        True,
        f"the container asked for {requested} {resource} while kubelet had {available} free",
        evidence,
        f"request at most what the node has free, or free {resource} devices held by other pods (a pod the "
        "scheduler placed here counted on devices kubelet no longer had: a kubelet restart, an unhealthy device, "
        "or a pod bound to the node by hand)",
    )


def allocate_failed(node: Node, groups: dict[str, str]) -> list[Cause]:
    parsed = _resource(groups)
    resource = parsed[1] if parsed else None
    checkpoint = read_checkpoint(node)
    causes = [_init_and_app(checkpoint, resource), _plugin_registered(node, resource, checkpoint)]
    if (parsed is None and not groups.get("other")) or (parsed is not None and parsed[0] == "count"):
        causes.append(_device_count(node, groups, checkpoint))
    return causes


def allocate_failed_undecided(groups: dict[str, str]) -> list[str]:
    return [
        "which of the pod's containers ask for the device: kubectl get pod POD -o jsonpath='{range "
        '.spec.initContainers[*]}{.name} {.resources}{"\\n"}{end}{range .spec.containers[*]}{.name} '
        "{.resources}{\"\\n\"}{end}' (kubelet's Allocate runs for init containers first)",
    ]
