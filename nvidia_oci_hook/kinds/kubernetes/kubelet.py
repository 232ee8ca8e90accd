"""The kubelet's translation: a pod template's container -> the CRI ContainerConfig the engine gets.

What kubelet 1.32+ does (pkg/kubelet): `GenerateRunContainerOptions` (kubelet_pods.go) starts from what the
device plugins and DRA give the container (`GetResources`: devices, mounts, envs, annotations, CDI names), then
appends the volume mounts and the pod's own environment after the plugins'; `generateContainerConfig`
(kuberuntime_container.go) turns that into the ContainerConfig: the plugins' annotations become container
annotations (the pod's own go to the sandbox only), `makeCDIDevices` copies the CDI names, `makeMounts` adds the
termination-log mount, the security context gives `privileged` and capabilities.

The parts only the node knows (what a device plugin answers; the claims' CDI names) come in as `PluginAnswer`s;
every part of the config says where it came from (`Origin`), so a finding about the config is reported at the
manifest's own line. A pure function: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.kubernetes.objects import Container, normalise_path

# Where the kubelet keeps a pod's files (the termination log, emptyDir and projected volumes): its --root-dir.
KUBELET_ROOT = "/var/lib/kubelet"
DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"


@dataclass(frozen=True)
class PluginAnswer:
    """What a device plugin handed (or would hand) one container for one resource: its Allocate answer."""

    resource: str
    devices: tuple[tuple[str, str, str], ...] = ()  # (container_path, host_path, permissions)
    mounts: tuple[tuple[str, str, bool], ...] = ()  # (container_path, host_path, read_only)
    envs: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    cdi_devices: tuple[str, ...] = ()
    # Where the answer is known from, in words: the kubelet's checkpoint for this pod, or the plugin's answer to
    # another pod of this node.
    source: str = ""


@dataclass(frozen=True)
class Origin:
    """Where a part of the derived config came from: the manifest field it is reported at, and in words."""

    pointer: str
    source: str


@dataclass
class DerivedConfig:
    container: Container
    config: dict[str, Any]
    origins: dict[str, Origin] = field(default_factory=dict)  # pointer into config -> origin

    def origin_of(self, pointer: str) -> Origin:
        """The origin of the config's part a pointer is in: its longest recorded prefix, else the container."""
        probe = pointer
        while True:
            if probe in self.origins:
                return self.origins[probe]
            if not probe:
                return Origin(self.container.pointer, "the container")
            probe = probe.rsplit("/", 1)[0]


def _first_wins(answers: Sequence[PluginAnswer], pick: Any) -> list[tuple[Any, Any, PluginAnswer]]:
    """The entries of every answer, de-duplicated by key with the first kept, as the device manager merges the
    answers of a container's resources (cm/devicemanager/pod_devices.go deviceRunContainerOptions: a conflict is
    only logged)."""
    seen: set[Any] = set()
    merged = []
    for answer in answers:
        for key, item in pick(answer):
            if key not in seen:
                seen.add(key)
                merged.append((key, item, answer))
    return merged


def _volume_host_path(container: Container, name: str, pod_uid: str) -> str:
    volume = container.template.volumes().get(name, ("", {}))[1]
    host_path = volume.get("hostPath")
    if isinstance(host_path, dict) and isinstance(host_path.get("path"), str):
        return normalise_path(host_path["path"])
    plugin = next((key for key in volume if key != "name"), "emptyDir")
    kebab = "".join("-" + c.lower() if c.isupper() else c for c in plugin)
    return f"{KUBELET_ROOT}/pods/{pod_uid}/volumes/kubernetes.io~{kebab}/{name}"


def derive(
    container: Container,
    answers: Sequence[PluginAnswer] = (),
    claim_cdi_devices: Optional[Mapping[str, Sequence[str]]] = None,
    pod_uid: str = "",
) -> DerivedConfig:
    """The ContainerConfig the kubelet builds for container, given the answers of the device plugins for its
    resources and the CDI names of its DRA claims (pod claim name -> names)."""
    template = container.template
    pod_uid = pod_uid or str(template.metadata.get("uid") or "POD_UID")
    derived = DerivedConfig(container, {})
    config = derived.config
    origins = derived.origins
    requested = container.resources("limits") | container.resources("requests")

    def answer_origin(answer: PluginAnswer, what: str) -> Origin:
        pointer = requested.get(answer.resource, (container.pointer, None))[0]
        return Origin(pointer, f"{what} of the device plugin for {answer.resource} ({answer.source})")

    config["metadata"] = {"name": container.name, "attempt": 0}
    origins["/metadata"] = Origin(container.pointer, "the container's name")
    config["image"] = {"image": container.image, "user_specified_image": container.image}
    origins["/image"] = Origin(pointer_join(container.pointer, "image"), "the container's image")
    for key in ("command", "args"):
        value = container.value.get(key)
        if isinstance(value, list):
            config[key] = [str(item) for item in value]
            origins[f"/{key}"] = Origin(pointer_join(container.pointer, key), f"the container's {key}")
    if isinstance(container.value.get("workingDir"), str):
        config["working_dir"] = container.value["workingDir"]

    # The plugins' envs, then the pod's after them: the engine keeps the last value of a name.
    envs: list[dict[str, str]] = []
    for name, value, answer in _first_wins(answers, lambda a: [(k, v) for k, v in a.envs.items()]):
        origins[f"/envs/{len(envs)}"] = answer_origin(answer, f"env {name}")
        envs.append({"key": name, "value": value})
    for entry in container.env():
        origins[f"/envs/{len(envs)}"] = Origin(entry.pointer, f"the pod's env {entry.name}")
        value = entry.value if entry.value is not None else ""
        envs.append({"key": entry.name, "value": value})
    config["envs"] = envs

    mounts: list[dict[str, Any]] = []
    for path, (host_path, read_only), answer in _first_wins(answers, lambda a: [(c, (h, r)) for c, h, r in a.mounts]):
        origins[f"/mounts/{len(mounts)}"] = answer_origin(answer, f"mount {path}")
        mounts.append({"container_path": path, "host_path": host_path, "readonly": read_only})
    for mount in container.mounts():
        host_path = _volume_host_path(container, mount.name, pod_uid)
        if mount.sub_path:
            host_path = f"{host_path.rstrip('/')}/{mount.sub_path}"
        origins[f"/mounts/{len(mounts)}"] = Origin(mount.pointer, f"the volume {mount.name}")
        mounts.append({"container_path": mount.mount_path, "host_path": host_path, "readonly": mount.read_only})
    termination = container.value.get("terminationMessagePath", DEFAULT_TERMINATION_MESSAGE_PATH)
    if isinstance(termination, str) and termination:
        origins[f"/mounts/{len(mounts)}"] = Origin(container.pointer, "the kubelet's termination-log file")
        mounts.append(
            {
                "container_path": termination,
                "host_path": f"{KUBELET_ROOT}/pods/{pod_uid}/containers/{container.name}/termination-log",
                "readonly": False,
            }
        )
    config["mounts"] = mounts

    devices: list[dict[str, str]] = []
    for path, (host_path, permissions), answer in _first_wins(
        answers, lambda a: [(c, (h, p)) for c, h, p in a.devices]
    ):
        origins[f"/devices/{len(devices)}"] = answer_origin(answer, f"device {path}")
        devices.append({"container_path": path, "host_path": host_path, "permissions": permissions})
    config["devices"] = devices

    cdi: list[dict[str, str]] = []
    for name, _, answer in _first_wins(answers, lambda a: [(n, n) for n in a.cdi_devices]):
        origins[f"/CDI_devices/{len(cdi)}"] = answer_origin(answer, f"CDI device {name}")
        cdi.append({"name": name})
    claims = template.resource_claims()
    for pointer, claim in container.claims():
        if claim not in claims:
            continue  # the API server refuses such a pod (K8S014)
        for name in (claim_cdi_devices or {}).get(claim, ()):
            origins[f"/CDI_devices/{len(cdi)}"] = Origin(pointer, f"CDI device {name} of the DRA claim {claim}")
            cdi.append({"name": name})
    config["CDI_devices"] = cdi

    annotations: dict[str, str] = {}
    for key, value, answer in _first_wins(answers, lambda a: list(a.annotations.items())):
        origins[pointer_join("/annotations", key)] = answer_origin(answer, f"annotation {key}")
        annotations[key] = value
    config["annotations"] = annotations
    config["labels"] = {
        "io.kubernetes.container.name": container.name,
        "io.kubernetes.pod.name": str(template.owner.name),
        "io.kubernetes.pod.namespace": str(template.owner.namespace or "default"),
        "io.kubernetes.pod.uid": pod_uid,
    }

    context = container.security_context
    security: dict[str, Any] = {}
    privileged = container.privileged
    if privileged is not None:
        security["privileged"] = True
        origins["/linux/security_context/privileged"] = Origin(privileged, "the container's securityContext")
    added = [name for _, name in container.added_capabilities()]
    if added:
        security["capabilities"] = {"add_capabilities": added}
        origins["/linux/security_context/capabilities"] = Origin(
            pointer_join(container.pointer, "securityContext"), "the container's securityContext"
        )
    if context.get("readOnlyRootFilesystem") is True:
        security["readonly_rootfs"] = True
    if template.spec.get("hostNetwork") is True:
        security["namespace_options"] = {"network": "NODE"}
    config["linux"] = {"security_context": security}
    return derived


def handler_of(
    container: Container, runtime_classes: Mapping[str, Any], override: Optional[str] = None
) -> Optional[tuple[str, str, str]]:
    """(handler, pointer, where it came from) of the pod's RuntimeClass: --runtime-handler, the handler of the
    RuntimeClass the input defines, or the class's own name where the input holds no RuntimeClass of that name
    (the GPU Operator names its class after its handler); None for the engine's default handler."""
    template = container.template
    name = template.spec.get("runtimeClassName")
    pointer = pointer_join(template.spec_pointer, "runtimeClassName")
    if override:
        return override, pointer if isinstance(name, str) else template.spec_pointer, "--runtime-handler"
    if not isinstance(name, str) or not name:
        return None
    defined = runtime_classes.get(name)
    if defined is not None:
        handler = defined.value.get("handler")
        if isinstance(handler, str) and handler:
            return handler, pointer, f"RuntimeClass {name}'s handler"
    return name, pointer, f"runtimeClassName {name} (no RuntimeClass of that name given: its handler taken as {name})"
