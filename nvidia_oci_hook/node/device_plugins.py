"""What the kubelet's device plugins hand out on this node, and what the node knows of its pods.

The kubelet keeps each container's device-plugin answer in its device manager's checkpoint
(`/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint`, pkg/kubelet/cm/devicemanager/checkpoint): JSON of
`{"Data": {"PodDeviceEntries": [...], "RegisteredDevices": {resource: [ids]}}, "Checksum": N}`, each entry holding
the pod's UID, the container's name, the resource, the device IDs and `AllocResp`, the plugin's
ContainerAllocateResponse serialized as protobuf and base64-encoded by Go's JSON encoder. Kubelets up to 1.19
wrote `DeviceIDs` as a plain list; 1.20 and later write it per NUMA node (`{"0": [ids]}`, `"-1"` for devices
without topology). A later kubelet reads the old shape only with kubernetes #102882 (1.23, and patch releases of
1.21 and 1.22 from late 2021) and before #123398 (1.31 dropped it); without, like every kubelet facing a checkpoint
it cannot read, it goes on without it.

Every read goes through a HostView. Nothing here raises on what it reads: a checkpoint that cannot be read, is not
JSON or has the wrong shape says so in `checkpoint_problem`, an answer that does not decode in its allocation's
`problem`.
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
import stat
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from nvidia_oci_hook import io
from nvidia_oci_hook.formats.protowire import WireError
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.kubernetes.deviceplugin import (
    CHECKPOINT,
    CONTAINER_ALLOCATE_RESPONSE,
    DEVICE_PLUGIN_DIR,
    KUBELET_SOCKET,
)

KUBELET_ROOT_DIR = "/var/lib/kubelet"  # the kubelet's --root-dir default: pods/<uid> below it
KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"  # where kubeadm writes the KubeletConfiguration
# The pod UID in a running container's spec: cri-o copies the kubelet's container labels into the annotations;
# containerd's CRI plugin writes its own annotation.
POD_UID_ANNOTATIONS = ("io.kubernetes.pod.uid", "io.kubernetes.cri.sandbox-uid")
VENDOR_PREFIX = "nvidia.com/"

# A checkpoint holds one base64 answer of a few hundred bytes per container and resource.
CHECKPOINT_MAX_BYTES = 64 << 20
_MANIFEST_MAX_BYTES = 1 << 20
_MAX_STATIC_FILES = 512


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool


@dataclass(frozen=True)
class DeviceSpec:
    container_path: str
    host_path: str
    permissions: str


@dataclass(frozen=True)
class AllocatedDevices:
    """A device plugin's Allocate answer for one container (v1beta1 ContainerAllocateResponse)."""

    envs: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceSpec, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    cdi_devices: tuple[str, ...] = ()  # the qualified names, as the plugin wrote them


@dataclass(frozen=True)
class Allocation:
    """One entry of the checkpoint: what one plugin gave one container of one pod."""

    pod_uid: str
    container: str
    resource: str
    device_ids: tuple[str, ...]
    answer: Optional[AllocatedDevices]
    problem: Optional[str] = None  # why answer is None: the stored answer does not decode

    @property
    def label(self) -> str:
        return f"pod {self.pod_uid or '(no UID)'} container {self.container or '(unnamed)'} ({self.resource})"


@dataclass(frozen=True)
class DevicePlugins:
    directory_found: bool
    checkpoint_path: str = CHECKPOINT
    checkpoint_found: bool = False
    checkpoint_problem: Optional[str] = None  # one line: unreadable, not JSON, or not the kubelet's shape
    registered: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # RegisteredDevices
    sockets: tuple[str, ...] = ()  # plugin sockets in the directory, kubelet.sock left out
    kubelet_socket: bool = False
    allocations: tuple[Allocation, ...] = ()  # oldest pod first (by its directory's modification time)
    old_shape: bool = False  # DeviceIDs as plain lists: written by a kubelet 1.19 or older

    def for_pod(self, uid: str) -> list[Allocation]:
        return [allocation for allocation in self.allocations if allocation.pod_uid == uid]

    def answers_for(self, resource: str) -> list[Allocation]:
        """What the plugin handed this node's pods for resource, newest last."""
        return [allocation for allocation in self.allocations if allocation.resource == resource]

    def is_registered(self, resource: str) -> bool:
        """Whether a plugin registered resource: the checkpoint names it, or its socket is in the directory."""
        return resource in self.registered or plugin_socket(resource) in self.sockets


def plugin_socket(resource: str) -> str:
    """The socket a plugin for resource listens on, by NVIDIA's device plugin's naming (`nvidia-gpu.sock` for
    nvidia.com/gpu, `nvidia-mig-1g.10gb.sock` for a MIG strategy's resource: internal/plugin/server.go)."""
    vendor, _, name = resource.partition("/")
    return f"{vendor.split('.')[0]}-{name}.sock"


# ---------------------------------------------------------------------------------------------------------------
# The checkpoint


class _Shape(ValueError):
    """The JSON is not the checkpoint the kubelet writes."""


def _text(value: Any, where: str) -> str:
    # Go's decoder leaves a missing or null field at its zero value and refuses any other type.
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Shape(f"{where} is {type(value).__name__}, not a string")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _Shape(f"{where} is {type(value).__name__}, not a list")
    return tuple(_text(item, f"{where}[{index}]") for index, item in enumerate(value))


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Shape(f"{where} is {type(value).__name__}, not an object")
    return value


def _device_ids(value: Any, where: str) -> tuple[tuple[str, ...], bool]:
    """The IDs and whether they came in the old shape (a plain list)."""
    if isinstance(value, list):
        return _strings(value, where), True
    per_numa = _object(value, where)
    numbered: list[tuple[int, str]] = []
    for key in per_numa:
        try:
            numbered.append((int(key), key))
        except ValueError:
            raise _Shape(f"{where} has the NUMA node {key!r}, not an integer") from None
    ids: list[str] = []
    for _, key in sorted(numbered):
        ids.extend(_strings(per_numa[key], f"{where}[{key}]"))
    return tuple(ids), False


def decode_answer(raw: bytes) -> AllocatedDevices:
    """A ContainerAllocateResponse; raises ValueError (protowire's WireError) when the bytes are not one."""
    try:
        value = CONTAINER_ALLOCATE_RESPONSE.decode(raw)
    except (OverflowError, MemoryError):
        # A map entry's key or value of the wrong wire type is taken for a length: a huge one fails here.
        raise WireError("a map entry's field has the wrong wire type") from None
    return AllocatedDevices(
        dict(value["envs"]),
        tuple(Mount(m["container_path"], m["host_path"], m["read_only"]) for m in value["mounts"]),
        tuple(DeviceSpec(d["container_path"], d["host_path"], d["permissions"]) for d in value["devices"]),
        dict(value["annotations"]),
        tuple(c["name"] for c in value["cdi_devices"]),
    )


def _allocation(entry: dict[str, Any], where: str) -> tuple[Allocation, bool]:
    uid = _text(entry.get("PodUID"), f"{where}.PodUID")
    container = _text(entry.get("ContainerName"), f"{where}.ContainerName")
    resource = _text(entry.get("ResourceName"), f"{where}.ResourceName")
    ids, old = _device_ids(entry.get("DeviceIDs"), f"{where}.DeviceIDs")
    encoded = _text(entry.get("AllocResp"), f"{where}.AllocResp")
    try:
        # Go's encoding/json writes []byte as padded standard base64 and skips line breaks when reading it.
        raw = base64.b64decode(encoded.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError) as exc:
        return Allocation(uid, container, resource, ids, None, f"its AllocResp is not base64 ({exc})"), old
    try:
        answer = decode_answer(raw)
    except ValueError as exc:
        problem = f"its AllocResp is not a ContainerAllocateResponse ({exc})"
        return Allocation(uid, container, resource, ids, None, problem), old
    return Allocation(uid, container, resource, ids, answer), old


def _read_checkpoint(value: Any) -> tuple[list[Allocation], dict[str, tuple[str, ...]], bool, Optional[str]]:
    """(allocations, registered devices, old shape, the first problem): the well-formed entries are kept even
    where another is not, so that what can be shown is shown; the kubelet itself would read none of them."""
    if not isinstance(value, dict):
        return [], {}, False, f"not the kubelet's checkpoint: the JSON is {type(value).__name__}, not an object"
    problem: Optional[str] = None
    allocations: list[Allocation] = []
    registered: dict[str, tuple[str, ...]] = {}
    shapes: set[bool] = set()
    try:
        data = _object(value.get("Data"), "Data")
        entries = data.get("PodDeviceEntries")
        if entries is not None and not isinstance(entries, list):
            raise _Shape(f"Data.PodDeviceEntries is {type(entries).__name__}, not a list")
        for name, ids in _object(data.get("RegisteredDevices"), "Data.RegisteredDevices").items():
            registered[name] = _strings(ids, f"Data.RegisteredDevices[{name}]")
    except _Shape as exc:
        return [], registered, False, f"not the kubelet's checkpoint: {exc}"
    for index, entry in enumerate(entries or []):
        where = f"Data.PodDeviceEntries[{index}]"
        try:
            allocation, old = _allocation(_object(entry, where), where)
        except _Shape as exc:
            problem = problem or f"not the kubelet's checkpoint: {exc}"
            continue
        allocations.append(allocation)
        shapes.add(old)
    if len(shapes) > 1:
        problem = problem or (
            "not the kubelet's checkpoint: its entries mix DeviceIDs as lists (kubelet 1.19 and older) and per NUMA "
            "node (1.20 and later)"
        )
    return allocations, registered, shapes == {True}, problem


def read_device_plugins(host: HostView) -> DevicePlugins:
    if not host.is_dir(DEVICE_PLUGIN_DIR):
        return DevicePlugins(False)
    sockets = []
    kubelet_socket = False
    for name in host.list_dir(DEVICE_PLUGIN_DIR):
        info = host.stat(posixpath.join(DEVICE_PLUGIN_DIR, name))
        if info is None or not stat.S_ISSOCK(info.st_mode):
            continue
        if posixpath.join(DEVICE_PLUGIN_DIR, name) == KUBELET_SOCKET:
            kubelet_socket = True
        else:
            sockets.append(name)
    found = DevicePlugins(True, sockets=tuple(sockets), kubelet_socket=kubelet_socket)
    if not host.lexists(CHECKPOINT):
        return found
    try:
        raw = host.read_bytes(CHECKPOINT, CHECKPOINT_MAX_BYTES)
    except (io.ReadError, io.TooLarge) as exc:
        return replace(found, checkpoint_found=True, checkpoint_problem=f"cannot be read: {exc}")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return replace(found, checkpoint_found=True, checkpoint_problem=f"not JSON: {exc}")
    # The checksum is not verified: the kubelet's is FNV-32a over go-spew's dump of its Go structs (type names,
    # field order, Go's formatting of maps and byte slices), which only a re-implementation of go-spew would
    # reproduce; a near miss would call every sound checkpoint corrupt.
    allocations, registered, old, problem = _read_checkpoint(value)
    return replace(
        found,
        checkpoint_found=True,
        checkpoint_problem=problem,
        registered=registered,
        allocations=tuple(_newest_last(host, allocations)),
        old_shape=old,
    )


def _newest_last(host: HostView, allocations: list[Allocation]) -> list[Allocation]:
    """The checkpoint's order is Go's map order, which means nothing: pods are ordered by their directory's
    modification time under the kubelet's root (the kubelet fills it as it sets the pod up), those without one
    first; one pod's entries keep their order."""
    pods = pods_directory(host)
    times: dict[str, float] = {}
    for uid in {allocation.pod_uid for allocation in allocations}:
        info = host.stat(posixpath.join(pods, uid)) if _one_component(uid) else None
        times[uid] = info.st_mtime if info is not None else float("-inf")
    return sorted(allocations, key=lambda allocation: times[allocation.pod_uid])


def _one_component(name: str) -> bool:
    return bool(name) and "/" not in name and name not in (".", "..")


# ---------------------------------------------------------------------------------------------------------------
# The kubelet and its pods


@dataclass(frozen=True)
class KubeletProcess:
    """A running kubelet and the paths its command line names."""

    pid: int
    argv: tuple[str, ...]
    config: Optional[str]  # --config, absolute
    config_dir: Optional[str]  # --config-dir (drop-ins, kubelet 1.28 and later), absolute
    root_dir: Optional[str]  # --root-dir, absolute
    pod_manifest_path: Optional[str]  # --pod-manifest-path, absolute


_KUBELETS: weakref.WeakKeyDictionary[HostView, Optional[KubeletProcess]] = weakref.WeakKeyDictionary()


def running_kubelet(host: HostView) -> Optional[KubeletProcess]:
    """The kubelet in the host's /proc (the first, by pid), once per view. A kubelet built into another binary
    (k3s, RKE2's agent) is not found: its flags are not on a command line of its own."""
    if host in _KUBELETS:
        return _KUBELETS[host]
    found = _scan_kubelet(host)
    _KUBELETS[host] = found
    return found


def _scan_kubelet(host: HostView) -> Optional[KubeletProcess]:
    from nvidia_oci_hook.node.locations import _absolute, _flag

    try:
        pids = sorted(int(name) for name in host.listdir("/proc") if name.isdigit())
    except (OSError, ValueError):
        return None
    for pid in pids:
        raw = host.read_prefix(f"/proc/{pid}/cmdline", 1 << 16)
        if not raw:
            continue
        argv = tuple(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
        if not argv or posixpath.basename(argv[0]) != "kubelet":
            continue
        return KubeletProcess(
            pid,
            argv,
            _absolute(host, pid, _flag(argv, ("--config",))),
            _absolute(host, pid, _flag(argv, ("--config-dir",))),
            _absolute(host, pid, _flag(argv, ("--root-dir",))),
            _absolute(host, pid, _flag(argv, ("--pod-manifest-path",))),
        )
    return None


def pods_directory(host: HostView) -> str:
    kubelet = running_kubelet(host)
    root = kubelet.root_dir if kubelet is not None and kubelet.root_dir else KUBELET_ROOT_DIR
    return posixpath.join(root, "pods")


@dataclass(frozen=True)
class StaticPod:
    path: str  # the manifest file
    label: str  # "Pod kube-system/gpu-burn"
    requests: tuple[tuple[str, str], ...]  # (container, resource) for every nvidia.com/ resource asked


@dataclass(frozen=True)
class KubeletPods:
    """What the node knows of its pods, without the API server."""

    pods_dir: str
    pods_dir_found: bool
    directories: frozenset[str]  # UIDs with a directory under pods_dir
    running: frozenset[str]  # UIDs of the pods of running containers
    static_pod_path: Optional[str]  # None: the kubelet runs no static pods
    static_source: str  # where static_pod_path was found, in words
    static_pods: tuple[StaticPod, ...] = ()
    static_read: bool = True  # False where the kubelet's configuration or its static pod path cannot be read
    problems: tuple[str, ...] = ()  # one line each: a configuration or manifest that cannot be read
    kubelet: Optional[KubeletProcess] = None

    @property
    def judged(self) -> bool:
        """Whether a pod that is gone can be told from one that is not."""
        return self.pods_dir_found or bool(self.running)

    def known(self, uid: str) -> bool:
        return uid in self.directories or uid in self.running


def kubelet_pods(host: HostView, containers: Optional[Sequence[Any]] = None) -> KubeletPods:
    """containers: node.containers' running containers where the caller has them already."""
    if containers is None:
        from nvidia_oci_hook.node.containers import running_containers

        containers = running_containers(host)
    running = set()
    for container in containers:
        annotations = (container.spec or {}).get("annotations")
        if not isinstance(annotations, dict):
            continue
        for key in POD_UID_ANNOTATIONS:
            uid = annotations.get(key)
            if isinstance(uid, str) and uid:
                running.add(uid)
    kubelet = running_kubelet(host)
    pods_dir = pods_directory(host)
    problems: list[str] = []
    path, source, read = _static_pod_path(host, kubelet, problems)
    static = _static_pods(host, path, problems) if path is not None else ()
    if path is not None and not host.exists(path):
        problems.append(f"{path}: the static pod path does not exist ({source})")
    return KubeletPods(
        pods_dir,
        host.is_dir(pods_dir),
        frozenset(host.list_dir(pods_dir)),
        frozenset(running),
        path,
        source,
        tuple(static),
        read,
        tuple(problems),
        kubelet,
    )


def _kubelet_configuration(host: HostView, path: str, problems: list[str]) -> Optional[dict[str, Any]]:
    from nvidia_oci_hook.kinds.kubernetes.stream import read_stream

    try:
        raw = host.read_bytes(path, _MANIFEST_MAX_BYTES)
    except (io.ReadError, io.TooLarge) as exc:
        problems.append(f"{path}: the kubelet's configuration cannot be read: {exc}")
        return None
    parsed = read_stream(raw)
    documents = parsed.value if isinstance(parsed.value, list) else []
    found = next((document for document in documents if isinstance(document, dict)), None)
    if found is None:
        why = parsed.problems[0].message if parsed.problems else "no KubeletConfiguration in it"
        problems.append(f"{path}: the kubelet's configuration cannot be read: {why}")
    return found


def _static_pod_path(
    host: HostView, kubelet: Optional[KubeletProcess], problems: list[str]
) -> tuple[Optional[str], str, bool]:
    """(path, where it was found, whether the configuration could be read): the flag wins over the files, as the
    kubelet lets its command line override its configuration; a drop-in over the file, the last one winning."""
    if kubelet is not None and kubelet.pod_manifest_path:
        return kubelet.pod_manifest_path, f"--pod-manifest-path of the kubelet (pid {kubelet.pid})", True
    config = kubelet.config if kubelet is not None and kubelet.config else None
    files = [config] if config else ([KUBELET_CONFIG] if host.exists(KUBELET_CONFIG) else [])
    if kubelet is not None and kubelet.config_dir:
        names = [name for name in host.list_dir(kubelet.config_dir) if name.endswith(".conf")]
        files += [posixpath.join(kubelet.config_dir, name) for name in names]
    path: Optional[str] = None
    source = "no staticPodPath in the kubelet's configuration" if files else "no kubelet configuration found"
    read = True
    for file in files:
        value = _kubelet_configuration(host, file, problems)
        if value is None:
            read = False
            continue
        named = value.get("staticPodPath")
        if isinstance(named, str) and named:
            # The kubelet resolves its configuration's relative paths against the file's directory.
            path = posixpath.normpath(posixpath.join(posixpath.dirname(file), named))
            source = f"staticPodPath in {file}"
    return path, source, read


def _static_pods(host: HostView, path: str, problems: list[str]) -> list[StaticPod]:
    """The Pods in the static pod path: a file, or the files directly in a directory (not those starting with a
    dot, no subdirectory), as the kubelet's file source reads them."""
    if host.is_dir(path):
        names = [name for name in host.list_dir(path) if not name.startswith(".")]
        files = [posixpath.join(path, name) for name in names if host.is_file(posixpath.join(path, name))]
    else:
        files = [path] if host.is_file(path) else []
    if len(files) > _MAX_STATIC_FILES:
        problems.append(f"{path}: {len(files)} files; the first {_MAX_STATIC_FILES} are read")
        files = files[:_MAX_STATIC_FILES]
    found = []
    for file in files:
        found.extend(_pods_in(host, file, problems))
    return found


def _pods_in(host: HostView, file: str, problems: list[str]) -> list[StaticPod]:
    from nvidia_oci_hook.kinds.kubernetes.objects import objects
    from nvidia_oci_hook.kinds.kubernetes.stream import read_stream

    try:
        raw = host.read_bytes(file, _MANIFEST_MAX_BYTES)
    except (io.ReadError, io.TooLarge) as exc:
        problems.append(f"{file}: the static pod cannot be read: {exc}")
        return []
    parsed = read_stream(raw)
    if parsed.problems:
        problems.append(f"{file}: {parsed.problems[0].message}")
    found = []
    for obj in objects(parsed.value, file):
        template = obj.template
        if obj.kind != "Pod" or template is None:
            continue
        requests: list[tuple[str, str]] = []
        for container in template.containers(("initContainers", "containers")):
            asked = container.resources("limits") | container.resources("requests")
            for resource in asked:
                if resource.startswith(VENDOR_PREFIX) and (container.name, resource) not in requests:
                    requests.append((container.name, resource))
        found.append(StaticPod(file, obj.label, tuple(requests)))
    return found
