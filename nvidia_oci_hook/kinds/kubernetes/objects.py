"""The objects of a manifest stream that decide what a GPU container gets, walked once.

Rules see objects, pod templates and containers, never the shapes of Deployments, Jobs or CronJobs: every
workload's pod template is found here, with the JSON pointer of each part, so a rule reports the field itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple, Optional

from nvidia_oci_hook.formats.jsontext import pointer_join

# The object annotation that silences codes (or code prefixes) for that object: `CODE[,CODE]`.
IGNORE_ANNOTATION = "nvidia-oci-hook.io/ignore"

CORE, APPS, BATCH, NODE_API, RESOURCE_API = "v1", "apps", "batch", "node.k8s.io", "resource.k8s.io"

# kind -> (API groups it is served in, the path from the object to its pod template; () for a Pod itself).
WORKLOADS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "Pod": (frozenset({CORE}), ()),
    "PodTemplate": (frozenset({CORE}), ("template",)),
    "ReplicationController": (frozenset({CORE}), ("spec", "template")),
    "Deployment": (frozenset({APPS, "extensions"}), ("spec", "template")),
    "StatefulSet": (frozenset({APPS}), ("spec", "template")),
    "DaemonSet": (frozenset({APPS, "extensions"}), ("spec", "template")),
    "ReplicaSet": (frozenset({APPS, "extensions"}), ("spec", "template")),
    "Job": (frozenset({BATCH}), ("spec", "template")),
    "CronJob": (frozenset({BATCH}), ("spec", "jobTemplate", "spec", "template")),
}
RUNTIME_CLASS = "RuntimeClass"
# A ConfigMap holds what other objects mount: an entrypoint script in the GPU Operator's assets is in a file of
# its own, beside the DaemonSet that runs it.
CONFIG_MAP = "ConfigMap"
# The GPU Operator's configuration, judged through the operands it renders (gpu_operator.py).
CLUSTER_POLICY = "ClusterPolicy"
OPERATOR_GROUP = "nvidia.com"
DRA_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "DeviceClass"})
# The resource.k8s.io versions that serve the DRA kinds judged here (structured parameters, Kubernetes 1.32+).
DRA_VERSIONS = frozenset({"v1beta1", "v1beta2", "v1"})
CONTAINER_SECTIONS = ("initContainers", "containers", "ephemeralContainers")

# Extended resources that are NVIDIA GPUs: the device plugin's full GPUs, its MIG strategies' slices and shared
# (time-sliced or MPS) replicas.
_GPU_RESOURCE = re.compile(r"^nvidia\.com/(gpu(\.shared)?|mig-[0-9a-z.+-]+)$")


def group_of(api_version: str) -> str:
    """The API group of an apiVersion (`v1` for the core group)."""
    return api_version.split("/", 1)[0] if "/" in api_version else CORE


def version_of(api_version: str) -> str:
    return api_version.rsplit("/", 1)[-1]


def is_gpu_resource(name: str) -> bool:
    return bool(_GPU_RESOURCE.match(name))


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def ignored_codes(metadata: Any) -> frozenset[str]:
    annotations = _mapping(_mapping(metadata).get("annotations"))
    text = annotations.get(IGNORE_ANNOTATION)
    if not isinstance(text, str):
        return frozenset()
    return frozenset(code.strip().upper() for code in text.split(",") if code.strip())


@dataclass(frozen=True)
class KubeObject:
    """An object of the stream this tool judges: a workload, a RuntimeClass, a DRA object, or a ConfigMap that
    a workload may mount."""

    pointer: str
    api_version: str
    kind: str
    value: dict[str, Any]
    # The file the object is in, as named: objects of other files are judged together with it.
    path: str = ""

    @property
    def metadata(self) -> dict[str, Any]:
        return _mapping(self.value.get("metadata"))

    @property
    def name(self) -> str:
        return _text(self.metadata.get("name")) or _text(self.metadata.get("generateName"))

    @property
    def namespace(self) -> str:
        return _text(self.metadata.get("namespace"))

    @property
    def label(self) -> str:
        """`DaemonSet nvidia-system/nvidia-dra-driver`, as kubectl names an object."""
        name = self.name or "(unnamed)"
        return f"{self.kind} {self.namespace}/{name}" if self.namespace else f"{self.kind} {name}"

    @property
    def group(self) -> str:
        return group_of(self.api_version)

    @property
    def version(self) -> str:
        return version_of(self.api_version)

    @property
    def ignored(self) -> frozenset[str]:
        return ignored_codes(self.metadata)

    def field_path(self, pointer: str) -> str:
        """The path the API server names a field by in its errors (`spec.template.spec.containers[0].resources.
        limits[nvidia.com/gpu]`), for a pointer into this object: indexes and map keys in brackets."""
        path = ""
        previous = ""
        for raw in pointer[len(self.pointer) :].split("/")[1:]:
            token = raw.replace("~1", "/").replace("~0", "~")
            if token.isdigit() or previous in ("limits", "requests", "annotations", "labels"):
                path += f"[{token}]"
            else:
                path += f".{token}" if path else token
            previous = token
        return path

    @cached_property
    def template(self) -> Optional[PodTemplate]:
        """The pod template of a workload (a Pod's own metadata and spec), None for other kinds."""
        path = WORKLOADS.get(self.kind, (frozenset(), None))[1]
        if path is None:
            return None
        pointer: str = self.pointer
        node: Any = self.value
        for key in path:
            pointer, node = pointer_join(pointer, key), _mapping(node).get(key)
        if not isinstance(node, dict):
            return None
        return PodTemplate(self, pointer, node)


@dataclass(frozen=True)
class PodTemplate:
    owner: KubeObject
    pointer: str  # of the object holding metadata and spec: the Pod itself, or a workload's template
    value: dict[str, Any]

    @property
    def metadata(self) -> dict[str, Any]:
        return _mapping(self.value.get("metadata"))

    @property
    def spec(self) -> dict[str, Any]:
        return _mapping(self.value.get("spec"))

    @cached_property
    def spec_pointer(self) -> str:
        return pointer_join(self.pointer, "spec")

    @property
    def annotations(self) -> dict[str, Any]:
        return _mapping(self.metadata.get("annotations"))

    def containers(self, sections: tuple[str, ...] = CONTAINER_SECTIONS) -> Iterator[Container]:
        if sections == CONTAINER_SECTIONS:
            return iter(self._containers)
        return (container for container in self._containers if container.section in sections)

    # Every rule walks the containers: each is made once, and what it reads of itself is kept (cached_property).
    @cached_property
    def _containers(self) -> list[Container]:
        spec = self.spec
        found = []
        for section in CONTAINER_SECTIONS:
            base = pointer_join(self.spec_pointer, section)
            for index, value in enumerate(_list(spec.get(section))):
                if isinstance(value, dict):
                    found.append(Container(self, f"{base}/{index}", section, value))
        return found

    def volumes(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """name -> (pointer, volume)."""
        return self._volumes

    @cached_property
    def _volumes(self) -> dict[str, tuple[str, dict[str, Any]]]:
        base = pointer_join(self.spec_pointer, "volumes")
        found: dict[str, tuple[str, dict[str, Any]]] = {}
        for index, volume in enumerate(_list(self.spec.get("volumes"))):
            if isinstance(volume, dict) and isinstance(volume.get("name"), str):
                found.setdefault(volume["name"], (f"{base}/{index}", volume))
        return found

    def host_path_of(self, volume_name: str) -> Optional[tuple[str, str]]:
        """(pointer of hostPath.path, the path normalised) of a hostPath volume."""
        entry = self.volumes().get(volume_name)
        if entry is None:
            return None
        pointer, volume = entry
        host_path = _mapping(volume.get("hostPath")).get("path")
        if not isinstance(host_path, str):
            return None
        return f"{pointer}/hostPath/path", normalise_path(host_path)

    def resource_claims(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """pod.spec.resourceClaims: name -> (pointer, entry)."""
        base = pointer_join(self.spec_pointer, "resourceClaims")
        found: dict[str, tuple[str, dict[str, Any]]] = {}
        for index, claim in enumerate(_list(self.spec.get("resourceClaims"))):
            if isinstance(claim, dict) and isinstance(claim.get("name"), str):
                found.setdefault(claim["name"], (f"{base}/{index}", claim))
        return found


# Tuples, not dataclasses: a cluster's pods hold hundreds of thousands of them, and a frozen dataclass takes
# several times as long to make.
class EnvVar(NamedTuple):
    pointer: str
    name: str
    value: Optional[str]  # None: valueFrom, or no value
    from_source: bool = False

    @property
    def literal(self) -> Optional[str]:
        """The value kubelet gives the variable when the manifest alone tells it, else None (valueFrom, or a
        `$(VAR)` reference kubelet expands)."""
        if self.from_source:
            return None
        text = self.value if self.value is not None else ""  # a name without value or valueFrom: ""
        return None if "$(" in text else text


class Mount(NamedTuple):
    pointer: str
    name: str
    mount_path: str  # normalised
    read_only: bool
    sub_path: str


@dataclass(frozen=True)
class Container:
    template: PodTemplate
    pointer: str
    section: str
    value: dict[str, Any]

    @property
    def name(self) -> str:
        return _text(self.value.get("name"))

    @property
    def init(self) -> bool:
        return self.section == "initContainers"

    @property
    def label(self) -> str:
        word = {"initContainers": "init container", "ephemeralContainers": "ephemeral container"}.get(
            self.section, "container"
        )
        return f"{word} {self.name or '(unnamed)'}"

    @property
    def image(self) -> str:
        return _text(self.value.get("image"))

    def env(self) -> list[EnvVar]:
        return self._env

    @cached_property
    def _env(self) -> list[EnvVar]:
        entries = self.value.get("env")
        if not isinstance(entries, list):
            return []
        base = f"{self.pointer}/env/"
        found = []
        for index, entry in enumerate(entries):
            if isinstance(entry, dict):
                name = entry.get("name")
                if isinstance(name, str):
                    value = entry.get("value")
                    found.append(
                        EnvVar(base + str(index), name, value if isinstance(value, str) else None, "valueFrom" in entry)
                    )
        return found

    @cached_property
    def env_by_name(self) -> dict[str, EnvVar]:
        """The entry that wins for each name: kubelet keeps the last of several."""
        return {entry.name: entry for entry in self._env}

    def env_value(self, name: str) -> Optional[EnvVar]:
        """The entry that wins for name: kubelet keeps the last of several (and the pod's after the plugin's)."""
        found = None
        for entry in self.env():
            if entry.name == name:
                found = entry
        return found

    def mounts(self) -> list[Mount]:
        return self._mounts

    @cached_property
    def _mounts(self) -> list[Mount]:
        base = pointer_join(self.pointer, "volumeMounts")
        found: list[Mount] = []
        for index, entry in enumerate(_list(self.value.get("volumeMounts"))):
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                found.append(
                    Mount(
                        f"{base}/{index}",
                        entry["name"],
                        normalise_path(_text(entry.get("mountPath"))),
                        entry.get("readOnly") is True,
                        _text(entry.get("subPath")),
                    )
                )
        return found

    def resources(self, which: str) -> dict[str, tuple[str, Any]]:
        """resources.requests or resources.limits: name -> (pointer, quantity as written)."""
        return self._resources.get(which, {})

    @cached_property
    def _resources(self) -> dict[str, dict[str, tuple[str, Any]]]:
        resources = _mapping(self.value.get("resources"))
        found = {}
        for which in ("requests", "limits"):
            base = f"{self.pointer}/resources/{which}"
            found[which] = {
                name: (pointer_join(base, name), quantity)
                for name, quantity in _mapping(resources.get(which)).items()
                if isinstance(name, str)
            }
        return found

    def gpu_resources(self) -> dict[str, tuple[str, Any]]:
        """The NVIDIA GPU resources asked, from limits (where the API server takes an extended resource's
        request from) then requests: name -> (pointer, quantity)."""
        return self._gpu_resources

    @cached_property
    def _gpu_resources(self) -> dict[str, tuple[str, Any]]:
        found = {name: entry for name, entry in self.resources("requests").items() if is_gpu_resource(name)}
        found.update({name: entry for name, entry in self.resources("limits").items() if is_gpu_resource(name)})
        return found

    def claims(self) -> list[tuple[str, str]]:
        """resources.claims: (pointer, the pod claim's name)."""
        return self._claims

    @cached_property
    def _claims(self) -> list[tuple[str, str]]:
        resources = _mapping(self.value.get("resources"))
        base = pointer_join(pointer_join(self.pointer, "resources"), "claims")
        return [
            (f"{base}/{index}", entry["name"])
            for index, entry in enumerate(_list(resources.get("claims")))
            if isinstance(entry, dict) and isinstance(entry.get("name"), str)
        ]

    @property
    def security_context(self) -> dict[str, Any]:
        return _mapping(self.value.get("securityContext"))

    @property
    def privileged(self) -> Optional[str]:
        """The pointer of securityContext.privileged when it is true."""
        if self.security_context.get("privileged") is True:
            return f"{self.pointer}/securityContext/privileged"
        return None

    def added_capabilities(self) -> list[tuple[str, str]]:
        """(pointer, capability without its CAP_ prefix, upper case) of securityContext.capabilities.add."""
        base = f"{self.pointer}/securityContext/capabilities/add"
        added = _list(_mapping(self.security_context.get("capabilities")).get("add"))
        return [
            (f"{base}/{index}", name.upper().removeprefix("CAP_"))
            for index, name in enumerate(added)
            if isinstance(name, str)
        ]

    def command_line(self) -> list[tuple[str, str]]:
        """(pointer, text) of every command and args entry."""
        found: list[tuple[str, str]] = []
        for key in ("command", "args"):
            base = pointer_join(self.pointer, key)
            found.extend(
                (f"{base}/{index}", text)
                for index, text in enumerate(_list(self.value.get(key)))
                if isinstance(text, str)
            )
        return found


def normalise_path(path: str) -> str:
    """A path as the kubelet compares it: `/dev/` and `/dev` are one place, `//dev/.` too."""
    if not path or (path[0] == "/" and "//" not in path and "/." not in path and (path == "/" or path[-1] != "/")):
        return path
    import posixpath

    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/") if normal.startswith("/") else normal


# ---------------------------------------------------------------------------------------------------------------
# The walk


def _object(pointer: str, value: Any, path: str = "") -> Optional[KubeObject]:
    if not isinstance(value, dict):
        return None
    api_version, kind = value.get("apiVersion"), value.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    group = group_of(api_version)
    if kind in WORKLOADS and group in WORKLOADS[kind][0]:
        return KubeObject(pointer, api_version, kind, value, path)
    if kind == RUNTIME_CLASS and group == NODE_API:
        return KubeObject(pointer, api_version, kind, value, path)
    if kind in DRA_KINDS and group == RESOURCE_API:
        return KubeObject(pointer, api_version, kind, value, path)
    if kind == CONFIG_MAP and api_version == "v1":
        return KubeObject(pointer, api_version, kind, value, path)
    if kind == CLUSTER_POLICY and group == OPERATOR_GROUP:
        return KubeObject(pointer, api_version, kind, value, path)
    return None


@dataclass(frozen=True)
class OperatorChoice:
    """How a ClusterPolicy's operands are rendered: the GPU Operator release (--gpu-operator-version; None: the
    one the stream names, else the newest) and the nodes' engine (--engine; None: containerd and cri-o both)."""

    release: Optional[str] = None
    engine: Optional[str] = None


def _operands(policy: KubeObject, stream: Any, path: str, choice: Optional[OperatorChoice]) -> Iterator[KubeObject]:
    """The operands the GPU Operator release renders from a ClusterPolicy."""
    from nvidia_oci_hook.kinds.kubernetes.gpu_operator import operands

    choice = choice or OperatorChoice()
    for pointer, operand in operands(stream, policy.pointer, policy.value, choice.release, choice.engine):
        yield KubeObject(pointer, "apps/v1", "DaemonSet", operand.value, path)


def objects(stream: Any, path: str = "", operator: Optional[OperatorChoice] = None) -> Iterator[KubeObject]:
    """Every object of the stream this tool judges, in stream order; `kind: List` items (kubectl's `-o yaml`)
    and the items of a `*List` kind (`PodList`) are objects too, and after a ClusterPolicy the operands the GPU
    Operator renders from it (rendered as `operator` says). Other objects are passed over."""
    for index, value in enumerate(_list(stream)):
        pointer = f"/{index}"
        found = _object(pointer, value, path)
        if found is not None:
            yield found
            if found.kind == CLUSTER_POLICY:
                yield from _operands(found, stream, path, operator)
            continue
        if isinstance(value, dict) and _text(value.get("kind")).endswith("List"):
            for item_index, item in enumerate(_list(value.get("items"))):
                item_found = _object(f"{pointer}/items/{item_index}", item, path)
                if item_found is not None:
                    yield item_found
                    if item_found.kind == CLUSTER_POLICY:
                        yield from _operands(item_found, stream, path, operator)


@dataclass
class Manifests:
    """What the whole input holds, for the rules that judge one object by others (a RuntimeClass a pod names,
    a DeviceClass a claim names): every manifest file and stream given in one run."""

    objects: list[KubeObject] = field(default_factory=list)

    def in_file(self, path: str) -> Optional[list[KubeObject]]:
        """The objects of one file, in stream order; None for a file not among them."""
        if not hasattr(self, "_by_path"):
            by_path: dict[str, list[KubeObject]] = {}
            for obj in self.objects:
                by_path.setdefault(obj.path, []).append(obj)
            self._by_path = by_path
        return self._by_path.get(path)

    def of_kind(self, kind: str) -> list[KubeObject]:
        return [obj for obj in self.objects if obj.kind == kind]

    def named(self, kind: str) -> dict[str, KubeObject]:
        found: dict[str, KubeObject] = {}
        for obj in self.of_kind(kind):
            found.setdefault(obj.name, obj)
        return found

    def templates(self) -> Iterator[PodTemplate]:
        for obj in self.objects:
            template = obj.template
            if template is not None:
                yield template


def object_at(stream: Any, pointer: str) -> Optional[KubeObject]:
    """The object a pointer is in: `/N` or `/N/items/M`."""
    tokens = pointer.split("/")
    if len(tokens) < 2 or not tokens[1].isdigit():
        return None
    documents = _list(stream)
    index = int(tokens[1])
    if index >= len(documents):
        return None
    found = _object(f"/{index}", documents[index])
    if found is not None:
        return found
    if len(tokens) >= 4 and tokens[2] == "items" and tokens[3].isdigit():
        items = _list(_mapping(documents[index]).get("items"))
        item = int(tokens[3])
        if item < len(items):
            return _object(f"/{index}/items/{item}", items[item])
    return None


_CONTAINER_IN_POINTER = re.compile(r"/spec/(initContainers|containers|ephemeralContainers)/(\d+)(?=/|$)")


def container_at(obj: KubeObject, pointer: str) -> Optional[Container]:
    template = obj.template
    if template is None or not pointer.startswith(template.spec_pointer + "/"):
        return None
    match = _CONTAINER_IN_POINTER.match(pointer, len(template.pointer))
    if match is None:
        return None
    section, index = match.group(1), int(match.group(2))
    items = _list(template.spec.get(section))
    if index >= len(items) or not isinstance(items[index], dict):
        return None
    return Container(template, f"{template.spec_pointer}/{section}/{index}", section, items[index])
