"""NVIDIA's GPU infrastructure as deployed on the cluster: the device plugin, the DRA GPU driver and the GPU
Operator's container toolkit, judged for the settings that break the node or its GPU pods."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.kubernetes import KUBERNETES
from nvidia_oci_hook.kinds.kubernetes.objects import RESOURCE_API, Container, EnvVar, KubeObject, PodTemplate
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.kubernetes.common import document_templates, nvidia_component, run_manifests

DEVICE_PLUGIN = "NVIDIA's device plugin"
DRA_DRIVER = "NVIDIA's DRA GPU driver"
TOOLKIT = "NVIDIA's container toolkit"

# Programs the device plugin's image also runs that advertise nothing: its config manager, GPU feature
# discovery and the MPS control daemon (NVIDIA/k8s-device-plugin's chart, the GPU Operator's assets).
_NOT_THE_PLUGIN = ("config-manager", "gpu-feature-discovery", "mps-control-daemon")
# The DRA driver's kubelet plugin that publishes GPUs; `compute-domain-kubelet-plugin` publishes ComputeDomain
# channels only (the chart runs it alone where resources.gpus.enabled=false).
_GPU_KUBELET_PLUGIN = "gpu-kubelet-plugin"
_GPU_DRIVER_SELECTOR = re.compile(r"device\.driver\s*==\s*['\"]gpu\.nvidia\.com['\"]")

# The device plugin's --device-list-strategy values (k8s-device-plugin api/config/v1/strategy.go).
STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
# What the GPU Operator sets (controllers/object_controls.go): with CDI on, and off (its asset's value).
OPERATOR_CDI_STRATEGY = "cdi-annotations,cdi-cri"
OPERATOR_STRATEGY = "envvar"
_CDI_DIRS = ("/var/run/cdi", "/run/cdi", "/etc/cdi")
VOLUME_MOUNTS_ROOT = "/var/run/nvidia-container-devices"


def _true(entry: Optional[EnvVar]) -> bool:
    return entry is not None and (entry.value or "").strip().lower() in ("true", "1", "yes", "on")


def _commands(container: Container) -> str:
    return " ".join(text for _, text in container.command_line())


def device_plugin_containers(templates: Iterable[PodTemplate]) -> Iterator[Container]:
    """The containers that run NVIDIA's device plugin itself (not its sidecars or GFD from the same image)."""
    for template in templates:
        for container in template.containers(("containers",)):
            if nvidia_component(container.image) != DEVICE_PLUGIN:
                continue
            if any(word in _commands(container) for word in _NOT_THE_PLUGIN):
                continue
            yield container


def dra_gpu_plugins(templates: Iterable[PodTemplate]) -> Iterator[Container]:
    """The DRA driver's kubelet-plugin containers that publish GPUs (its `gpus` container)."""
    for template in templates:
        for container in template.containers(("containers",)):
            if nvidia_component(container.image) != DRA_DRIVER:
                continue
            if _GPU_KUBELET_PLUGIN in _commands(container) or (
                container.name == "gpus" and not container.command_line()
            ):
                yield container


def gpu_device_classes(objects: Iterable[KubeObject]) -> Iterator[KubeObject]:
    """DeviceClasses that select the DRA driver's GPUs (the chart creates them only where it publishes GPUs)."""
    for obj in objects:
        if obj.kind != "DeviceClass" or obj.group != RESOURCE_API:
            continue
        if obj.name in ("gpu.nvidia.com", "mig.nvidia.com") or any(
            _GPU_DRIVER_SELECTOR.search(expression) for expression in _cel_expressions(obj)
        ):
            yield obj


def _cel_expressions(obj: KubeObject) -> Iterator[str]:
    spec = obj.value.get("spec")
    selectors = spec.get("selectors") if isinstance(spec, dict) else None
    for selector in selectors if isinstance(selectors, list) else []:
        cel = selector.get("cel") if isinstance(selector, dict) else None
        if isinstance(cel, dict) and isinstance(cel.get("expression"), str):
            yield cel["expression"]


def toolkit_containers(templates: Iterable[PodTemplate]) -> Iterator[Container]:
    for template in templates:
        for container in template.containers(("containers",)):
            if nvidia_component(container.image) == TOOLKIT:
                yield container


# ---------------------------------------------------------------------------------------------------------------
# Where a pod template may run, as far as nodeSelector and one required node-affinity term say


@dataclass
class Placement:
    allowed: dict[str, set[str]] = field(default_factory=dict)
    forbidden: dict[str, set[str]] = field(default_factory=dict)
    present: set[str] = field(default_factory=set)
    absent: set[str] = field(default_factory=set)

    def allow(self, key: str, values: set[str]) -> None:
        self.allowed[key] = self.allowed[key] & values if key in self.allowed else set(values)


def placement(template: PodTemplate) -> Placement:
    found = Placement()
    selector = template.spec.get("nodeSelector")
    for key, value in (selector if isinstance(selector, dict) else {}).items():
        found.allow(str(key), {str(value)})
    affinity = template.spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(node, dict) else None
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    # Terms are ORed: only a single one bounds the nodes simply.
    if isinstance(terms, list) and len(terms) == 1 and isinstance(terms[0], dict):
        expressions = terms[0].get("matchExpressions")
        for expression in expressions if isinstance(expressions, list) else []:
            if not isinstance(expression, dict) or not isinstance(expression.get("key"), str):
                continue
            key, operator = expression["key"], expression.get("operator")
            values = {str(v) for v in expression.get("values") or [] if isinstance(v, (str, int, float))}
            if operator == "In":
                found.allow(key, values)
            elif operator == "NotIn":
                found.forbidden.setdefault(key, set()).update(values)
            elif operator == "Exists":
                found.present.add(key)
            elif operator == "DoesNotExist":
                found.absent.add(key)
    return found


def _excludes(a: Placement, b: Placement) -> bool:
    for key, values in a.allowed.items():
        if key in b.allowed and not values & b.allowed[key]:
            return True
        if values <= b.forbidden.get(key, set()) or key in b.absent:
            return True
    return any(key in b.absent for key in a.present)


def disjoint(a: PodTemplate, b: PodTemplate) -> bool:
    """Whether no node can run both templates' pods, by their node selectors and required node affinity."""
    first, second = placement(a), placement(b)
    return _excludes(first, second) or _excludes(second, first)


def _where(obj: KubeObject, context: Context) -> str:
    return obj.label if not obj.path or obj.path == context.document_path else f"{obj.label} ({obj.path})"


@rule("K8S018", "device-plugin-beside-dra-gpu-driver", Severity.WARNING, [KUBERNETES])
def device_plugin_beside_dra_gpu_driver(value: Any, context: Context) -> Iterator[Problem]:
    """NVIDIA's device plugin and NVIDIA's DRA GPU driver both hand out GPUs, on the same nodes.

    ## What it checks
    Across every file of the run: a container that runs NVIDIA's device plugin (not its config manager,
    GPU feature discovery or MPS daemon from the same image) beside either the DRA driver's kubelet plugin
    that publishes GPUs (its `gpus` container, `gpu-kubelet-plugin`) or a DeviceClass that selects the
    driver's GPUs (`gpu.nvidia.com`, `mig.nvidia.com`, or a selector on `device.driver == 'gpu.nvidia.com'`).
    The DRA driver deployed for ComputeDomains only (`resources.gpus.enabled=false`: no `gpus` container, no
    GPU DeviceClass) is not judged. Where both DaemonSets' `nodeSelector` (and one required node-affinity
    term) keep them on different nodes, nothing is reported.

    ## Why it matters
    Both advertise the same physical GPUs, and neither knows of the other: the device plugin as
    `nvidia.com/gpu`, the DRA driver as ResourceSlice devices. On a node that runs both, the scheduler can give
    one GPU to a pod asking `nvidia.com/gpu` and to a DRA claim at once. The DRA driver's own chart refuses
    to publish GPUs by default for that reason ("this DRA driver cannot be deployed alongside the standard GPU
    device plugin on the same node", `templates/validation.yaml`), and the GPU Operator takes either a
    ClusterPolicy with the device plugin or a GPUCluster for DRA, not both.

    ## Example
    The GPU Operator's `nvidia-device-plugin-daemonset` and the DRA driver's kubelet-plugin DaemonSet, both
    on every GPU node.

    ## Fix
    Disable the device plugin where the DRA driver publishes GPUs (GPU Operator: `devicePlugin.enabled=false`),
    or keep the two on disjoint nodes with node selectors; a DRA driver needed only for ComputeDomains is
    deployed with `resources.gpus.enabled=false`. From Kubernetes 1.35 the DRA driver can serve
    `nvidia.com/gpu` requests itself (the DeviceClass's `extendedResourceName`, feature gate
    `DRAExtendedResource`).
    """
    plugins = list(device_plugin_containers(document_templates(value, context)))
    if not plugins:
        return
    manifests = run_manifests(value, context)
    drivers = list(dra_gpu_plugins(manifests.templates()))
    classes = list(gpu_device_classes(manifests.objects))
    for plugin in plugins:
        if drivers:
            beside = [driver for driver in drivers if not disjoint(plugin.template, driver.template)]
            if not beside:
                continue
            what = f"NVIDIA's DRA GPU driver ({_where(beside[0].template.owner, context)}, {beside[0].label})"
            placed = "nothing keeps the two on different nodes"
        elif classes:
            what = f"DeviceClass {classes[0].name} ({_where(classes[0], context)}) of NVIDIA's DRA GPU driver"
            placed = "the input does not show where the driver runs"
        else:
            continue
        yield Problem(
            f"{plugin.pointer}/image",
            f"NVIDIA's device plugin advertises the node's GPUs as nvidia.com/gpu while {what} publishes the "
            f"same GPUs as DRA devices, and {placed}: on a node that runs both, one GPU can be given to a "
            "device-plugin pod and to a DRA claim at once (NVIDIA: never both on one node)",
            "disable the device plugin where the DRA driver publishes GPUs (GPU Operator: devicePlugin.enabled="
            "false), keep them on disjoint nodes with nodeSelectors, or deploy the DRA driver with "
            "resources.gpus.enabled=false where it serves ComputeDomains only",
        )


def _configures_containerd(container: Container) -> Optional[EnvVar]:
    """The RUNTIME=containerd entry of a toolkit container that edits containerd's configuration."""
    runtime = container.env_value("RUNTIME")
    if runtime is None or (runtime.value or "").strip() != "containerd":
        return None
    if _true(container.env_value("ENABLE_NRI_PLUGIN")) or _true(container.env_value("NO_RUNTIME_CONFIG")):
        return None
    return runtime


# The toolkit image's release in its tag (`container-toolkit:v1.17.8-ubuntu20.04`).
_TOOLKIT_TAG = re.compile(r":v?(\d+)\.(\d+)\.\d+")


def _reads_config_sources(container: Container) -> bool:
    """Whether the toolkit reads RUNTIME_CONFIG_SOURCE(S): its installer does from 1.18 (nvidia-ctk-installer);
    an image whose tag says nothing is taken to."""
    release = _TOOLKIT_TAG.search(container.image)
    return release is None or (int(release[1]), int(release[2])) >= (1, 18)


def _config_sources(container: Container) -> Optional[EnvVar]:
    """The entry the installer reads its config sources from (RUNTIME_CONFIG_SOURCES before _SOURCE)."""
    return container.env_value("RUNTIME_CONFIG_SOURCES") or container.env_value("RUNTIME_CONFIG_SOURCE")


@rule("K8S019", "toolkit-config-source-command", Severity.WARNING, [KUBERNETES])
def toolkit_config_source_command(value: Any, context: Context) -> Iterator[Problem]:
    """The toolkit takes containerd's config from `containerd config dump`: a drop-in containerd may refuse.

    ## What it checks
    A container running NVIDIA's container toolkit image with `RUNTIME=containerd` (the GPU Operator's
    `nvidia-container-toolkit-ctr`) whose config sources (`RUNTIME_CONFIG_SOURCE`, or `_SOURCES`) are unset
    (the installer's default is `command,file`) or begin with `command`. Not where the toolkit leaves
    containerd's configuration alone (`ENABLE_NRI_PLUGIN=true`, `NO_RUNTIME_CONFIG=true`), nor for an image
    tagged before 1.18, whose installer reads the file only. A ClusterPolicy is judged through the toolkit
    DaemonSet its GPU Operator release renders: from 25.10 its stock toolkit gets this warning.

    ## Why it matters
    The installer (`nvidia-ctk-installer`, toolkit 1.18 and later, GPU Operator 25.10 and later) loads the
    first source that answers and takes the drop-in's `version` from it. `containerd config dump` prints the
    running containerd's migrated configuration: `version = 4` on containerd 2.3. Where the node's
    `/etc/containerd/config.toml` is still version 2 or 3 (AKS, GKE and many distributions), the toolkit writes
    `/etc/containerd/conf.d/99-nvidia.toml` as version 4 and containerd refuses to start:
    `containerd: drop-in config version 4 higher than root config version 2`; the node goes NotReady
    (NVIDIA/aicr #1688, NVIDIA/gpu-operator #2646; NVIDIA documents `RUNTIME_CONFIG_SOURCE=file` for GKE).
    Whether a node is affected depends on its containerd and root config: `nvidia-oci-hook lint --node` on the
    node decides it.

    ## Example
    `env: [{name: RUNTIME, value: containerd}]` in the toolkit DaemonSet, with no `RUNTIME_CONFIG_SOURCE`.

    ## Fix
    Set `RUNTIME_CONFIG_SOURCE=file` (ClusterPolicy `toolkit.env`), so the drop-in takes the version of the
    config on disk, or enable the operator's NRI plugin (`cdi.nriPluginEnabled=true`), which leaves
    containerd's configuration unchanged.
    """
    for container in toolkit_containers(document_templates(value, context)):
        runtime = _configures_containerd(container)
        if runtime is None:
            continue
        if not _reads_config_sources(container):
            continue
        sources = _config_sources(container)
        if sources is not None and (sources.from_source or sources.value is None):
            continue
        text = sources.value if sources is not None and sources.value is not None else "command,file"
        first = text.split(",")[0].split("=")[0].strip()
        if first != "command":
            continue
        pointer = f"{sources.pointer}/value" if sources is not None else f"{runtime.pointer}/value"
        said = f"{sources.name}={text}" if sources is not None else "RUNTIME_CONFIG_SOURCE unset (command,file)"
        yield Problem(
            pointer,
            f"the toolkit configures containerd with {said}: it writes its drop-in in the version "
            "`containerd config dump` prints, version 4 on containerd 2.3, and where the node's root config is "
            "version 2 or 3 containerd refuses to start (containerd: drop-in config version 4 higher than root "
            "config version 2) and the node goes NotReady; `nvidia-oci-hook lint --node` on the node decides it",
            "set RUNTIME_CONFIG_SOURCE=file in the toolkit's env (ClusterPolicy toolkit.env), or enable the "
            "operator's NRI plugin (cdi.nriPluginEnabled=true)",
        )


@rule("K8S020", "toolkit-config-is-template", Severity.ERROR, [KUBERNETES])
def toolkit_config_is_template(value: Any, context: Context) -> Iterator[Problem]:
    """The toolkit container is pointed at a k3s/RKE2 containerd template (`config.toml.tmpl`) as its config.

    ## What it checks
    A container running NVIDIA's container toolkit image (`RUNTIME` unset or `containerd`, not in NRI mode)
    whose containerd config (`RUNTIME_CONFIG`, else `CONTAINERD_CONFIG`) or a `file=` config source of
    `RUNTIME_CONFIG_SOURCE` (read from toolkit 1.18) ends in `.tmpl`: k3s's and RKE2's `config.toml.tmpl` and
    `config-v3.toml.tmpl` under `/var/lib/rancher/*/agent/etc/containerd/`.

    ## Why it matters
    The toolkit reads and writes that file as plain TOML: neither the toolkit (`nvidia-ctk-installer`, up to
    1.20) nor the GPU Operator renders Go templates. Where the template holds k3s's directives (`{{ template
    "base" . }}`, k3s's documented way to extend its config) the toolkit fails: `unable to load config: …
    keys cannot contain { character`. Where it does not exist yet, the toolkit creates it (the `imports` line
    of its drop-in, or a whole config), and k3s then renders containerd's configuration from that file alone,
    without its own base template. NVIDIA's GPU Operator guide named
    `/var/lib/rancher/rke2/agent/etc/containerd/config.toml.tmpl` for RKE2 until August 2024 (GPU Operator
    24.6 and earlier, before the toolkit's drop-ins); it now defers to RKE2's
    guide, which sets only `CONTAINERD_SOCKET=/run/k3s/containerd/containerd.sock`: k3s and RKE2 find the
    toolkit's runtimes themselves. MicroK8s's `containerd-template.toml`, which NVIDIA still documents, is
    TOML and not judged here.

    ## Example
    `env: [{name: CONTAINERD_CONFIG, value: /var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl}]`.

    ## Fix
    Remove `CONTAINERD_CONFIG` (k3s/RKE2: set only `CONTAINERD_SOCKET=/run/k3s/containerd/containerd.sock`),
    or enable the operator's NRI plugin (`cdi.nriPluginEnabled=true`), which needs no containerd config.
    """
    for container in toolkit_containers(document_templates(value, context)):
        runtime = container.env_value("RUNTIME")
        if runtime is not None and (runtime.value or "").strip() not in ("", "containerd"):
            continue
        if _true(container.env_value("ENABLE_NRI_PLUGIN")) or _true(container.env_value("NO_RUNTIME_CONFIG")):
            continue
        found: list[tuple[EnvVar, str]] = []
        config = container.env_value("RUNTIME_CONFIG") or container.env_value("CONTAINERD_CONFIG")
        if config is not None and (config.value or "").strip().endswith(".tmpl"):
            found.append((config, (config.value or "").strip()))
        sources = _config_sources(container)
        if sources is not None and _reads_config_sources(container):
            for source in (sources.value or "").split(","):
                kind, _, path = source.partition("=")
                if kind.strip() == "file" and path.strip().endswith(".tmpl"):
                    found.append((sources, path.strip()))
        for entry, path in found:
            yield Problem(
                f"{entry.pointer}/value",
                f"{entry.name} points the toolkit at {path}, a k3s/RKE2 containerd template: the toolkit reads and "
                "writes it as plain TOML (it renders no templates), so it fails on k3s's directives (unable to "
                "load config: … keys cannot contain { character) or, where the file is new, writes a template "
                "from which k3s renders containerd's whole config without its base template",
                "remove CONTAINERD_CONFIG and set only CONTAINERD_SOCKET=/run/k3s/containerd/containerd.sock "
                "(k3s and RKE2 find the toolkit's runtimes themselves), or enable the operator's NRI plugin "
                "(cdi.nriPluginEnabled=true)",
            )


def _strategy(container: Container) -> Optional[tuple[str, str]]:
    """(pointer, value) of the device-list strategy the plugin runs with: its flag wins over the env."""
    line = container.command_line()
    for index, (pointer, text) in enumerate(line):
        if text.startswith("--device-list-strategy="):
            return pointer, text.split("=", 1)[1]
        if text == "--device-list-strategy" and index + 1 < len(line):
            return line[index + 1]
    entry = container.env_value("DEVICE_LIST_STRATEGY")
    if entry is None or entry.value is None:
        return None
    return f"{entry.pointer}/value", entry.value


def _mounts_cdi_dir(container: Container) -> bool:
    for mount in container.mounts():
        host = container.template.host_path_of(mount.name)
        if host is not None and mount.mount_path in _CDI_DIRS and host[1] in _CDI_DIRS:
            return True
    return False


def _why_broken(container: Container, strategies: list[str], toolkits: list[Container]) -> Optional[str]:
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown or not strategies:
        return (
            f"the plugin accepts only {', '.join(STRATEGIES)} and exits: invalid --device-list-strategy option: "
            f"invalid strategy: {unknown[0] if unknown else ''} (CrashLoopBackOff, no GPU advertised)"
        )
    cdi = [s for s in strategies if s.startswith("cdi-")]
    if _true(container.env_value("CDI_ENABLED")) and not cdi:
        return (
            "this is the GPU Operator's plugin with CDI on (CDI_ENABLED=true), where the operator does not make "
            "nvidia containerd's default runtime: GPU pods on the default runtime get only the device list as "
            "NVIDIA_VISIBLE_DEVICES (or /dev/null mounts), which runc ignores, and start without GPUs"
        )
    if cdi and not _mounts_cdi_dir(container):
        return (
            "the plugin writes its CDI spec (vendor k8s.device-plugin.nvidia.com) under /var/run/cdi, which is "
            "not the host's here: the engine cannot resolve the CDI devices the plugin names "
            "(unresolvable CDI devices …) and GPU containers fail to start"
        )
    if (
        "volume-mounts" in strategies
        and toolkits
        and not any(_true(toolkit.env_value("ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS")) for toolkit in toolkits)
    ):
        return (
            "the toolkit in this input does not accept the device list as volume mounts "
            "(ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS unset): it reads NVIDIA_VISIBLE_DEVICES="
            f"{VOLUME_MOUNTS_ROOT}, which names no GPU, and GPU containers fail to start"
        )
    return None


@rule("K8S021", "device-list-strategy-mismatch", Severity.WARNING, [KUBERNETES])
def device_list_strategy_mismatch(value: Any, context: Context) -> Iterator[Problem]:
    """The device plugin's `DEVICE_LIST_STRATEGY` (or `--device-list-strategy`) is one the node cannot honour.

    ## What it checks
    The strategy a container running NVIDIA's device plugin is given by its `--device-list-strategy` argument
    or `DEVICE_LIST_STRATEGY` env (comma-separated), reported where it breaks:
    - a value other than `envvar`, `volume-mounts`, `cdi-annotations`, `cdi-cri`;
    - the GPU Operator's plugin with CDI on (`CDI_ENABLED=true`) and no `cdi-*` strategy;
    - a `cdi-*` strategy in a container that does not mount the host's `/var/run/cdi` (or `/etc/cdi`);
    - `volume-mounts` where the run's toolkit container does not set
      `ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS=true` (judged only where a toolkit container is given).

    ## Why it matters
    The plugin refuses unknown values at start (`invalid --device-list-strategy option: invalid strategy: …`,
    `api/config/v1/strategy.go`). `envvar` hands the device list as `NVIDIA_VISIBLE_DEVICES`, which only
    NVIDIA's runtime reads; the GPU Operator with CDI on sets `cdi-annotations,cdi-cri` and no longer makes
    that runtime the default (`transformDevicePluginCtrForCDI`, `transformToolkitCtrForCDI`), so a hand-set
    `envvar` leaves GPU pods without GPUs. The `cdi-*` strategies name devices of the CDI spec the plugin
    writes to `/var/run/cdi`, which the engine reads only on the host. `volume-mounts` passes
    `/dev/null` mounts under `/var/run/nvidia-container-devices` that the toolkit reads only when told to
    (`accept-nvidia-visible-devices-as-volume-mounts`); otherwise it takes that directory from
    `NVIDIA_VISIBLE_DEVICES` as a device name. The GPU Operator derives the strategy itself: `envvar`
    without CDI, `cdi-annotations,cdi-cri` with it (its default from 25.10); a value set through
    `devicePlugin.env` overrides that.

    ## Example
    `devicePlugin.env: [{name: DEVICE_LIST_STRATEGY, value: envvar}]` on GPU Operator 25.10 (CDI on).

    ## Fix
    Drop the hand-set value and let the operator derive it; where isolation needs `volume-mounts` (RKE2's
    guide for operator 25.3), set `ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS=true` and
    `ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=false` on the toolkit too.
    """
    plugins = list(device_plugin_containers(document_templates(value, context)))
    if not plugins:
        return
    toolkits = list(toolkit_containers(run_manifests(value, context).templates()))
    for container in plugins:
        found = _strategy(container)
        if found is None:
            continue
        pointer, text = found
        strategies = [part.strip() for part in text.split(",") if part.strip()]
        why = _why_broken(container, strategies, toolkits)
        if why is None:
            continue
        operator = OPERATOR_CDI_STRATEGY if _true(container.env_value("CDI_ENABLED")) else OPERATOR_STRATEGY
        yield Problem(
            pointer,
            f"the device plugin runs with device-list strategy {text!r}: {why}",
            f"drop the hand-set strategy: the GPU Operator sets {operator} here (cdi-annotations,cdi-cri with "
            "CDI on, envvar without); the plugin's own default is envvar",
        )
