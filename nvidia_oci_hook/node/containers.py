"""The containers running on the node, from the low-level runtimes' state, and whether each can still open the
NVIDIA devices its spec gave it.

A GPU container that worked for hours loses its GPUs when its device cgroup is applied again without the NVIDIA
rules (a `systemctl daemon-reload` under the systemd cgroup driver with runc 1.1.3 to 1.1.6, rules that legacy
injection added behind the engine's back, an update that re-applies an empty list): `open("/dev/nvidiactl")`
then fails with EPERM and NVML says `Unknown Error`. On cgroup v1 the rules in force are the cgroup's
`devices.list`; cgroup v2 keeps them in an eBPF program that cannot be read back, so there a probe opens each
node from inside the container's cgroup and mount namespace (`probe_open`).

State is read where the runtimes keep it: runc's `state.json` under `/run/runc` (runc's default root, which
cri-o and podman use) and under `/run/containerd/runc/NAMESPACE` (containerd's runc shim), crun's `status`
under `/run/crun`, the roots the engines' configurations name (cri-o's `runtime_root`, the `Root` option of
containerd's runc handlers), and any other root given.
"""

from __future__ import annotations

import errno
import json
import os
import posixpath
from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.devices import NVIDIA_MAJOR

RUNC_ROOTS = ("/run/runc",)
CONTAINERD_RUNC_ROOT = "/run/containerd/runc"
CRUN_ROOTS = ("/run/crun",)
DEVICES_V1 = "/sys/fs/cgroup/devices"
# Present where /sys/fs/cgroup is the cgroup v2 hierarchy itself.
CGROUP_V2_MARKER = "/sys/fs/cgroup/cgroup.controllers"
# The pod and container names the engines put in a container's annotations: containerd's CRI plugin, cri-o.
NAME_ANNOTATIONS = (
    ("io.kubernetes.cri.sandbox-namespace", "io.kubernetes.cri.sandbox-name", "io.kubernetes.cri.container-name"),
    ("io.kubernetes.pod.namespace", "io.kubernetes.pod.name", "io.kubernetes.container.name"),
)


@dataclass(frozen=True)
class GivenDevice:
    """A device node the spec gives the container."""

    path: str
    kind: str  # "c" or "b"
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.path} ({self.kind} {self.major}:{self.minor})"

    @property
    def rule(self) -> str:
        return f"{self.kind} {self.major}:{self.minor} rwm"


@dataclass
class RunningContainer:
    id: str
    runtime: str  # "runc" or "crun"
    state_path: str  # as shown to the user
    pid: int
    bundle: Optional[str]
    spec: Optional[dict[str, Any]]
    created: Optional[str]
    devices_cgroup: Optional[str]  # the cgroup v1 devices directory, as a host path
    cgroup_v2: Optional[str] = None  # the cgroup v2 directory, where the device rules are an eBPF program
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        annotations = (self.spec or {}).get("annotations")
        if isinstance(annotations, dict):
            for keys in NAME_ANNOTATIONS:
                namespace, pod, container = (annotations.get(key) for key in keys)
                if isinstance(pod, str) and pod:
                    where = f"pod {namespace}/{pod}" if isinstance(namespace, str) and namespace else f"pod {pod}"
                    shown = f" container {container}" if isinstance(container, str) and container else ""
                    return f"{where}{shown} ({self.id[:12]})"
        return f"container {self.id}"


def nvidia_majors(host: HostView) -> set[int]:
    """The character majors of the NVIDIA driver's nodes: 195, and nvidia-uvm's and nvidia-caps' from
    /proc/devices."""
    majors = {NVIDIA_MAJOR}
    text = host.read_text("/proc/devices") or ""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].startswith("nvidia"):
            majors.add(int(parts[0]))
    return majors


def given_nvidia_devices(spec: Optional[dict[str, Any]], majors: set[int]) -> list[GivenDevice]:
    """The NVIDIA nodes among the spec's linux.devices: an NVIDIA major, or a /dev/nvidia* path."""
    linux = spec.get("linux") if isinstance(spec, dict) else None
    entries = linux.get("devices") if isinstance(linux, dict) else None
    found = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        path, kind, major, minor = (entry.get(key) for key in ("path", "type", "major", "minor"))
        if not (isinstance(path, str) and kind in ("c", "b") and isinstance(major, int) and isinstance(minor, int)):
            continue
        if major in majors or path.startswith("/dev/nvidia"):
            found.append(GivenDevice(path, str(kind), major, minor))
    return found


def v1_allows(devices_list: str, device: GivenDevice, access: str = "rw") -> bool:
    """Whether a cgroup v1 devices.list lets the container open the node for access (its exceptions, or
    `a *:* rwm` for a cgroup that allows everything)."""
    for line in devices_list.splitlines():
        parts = line.split()
        if len(parts) != 3 or ":" not in parts[1]:
            continue
        kind, numbers, granted = parts
        major, _, minor = numbers.partition(":")
        if kind not in ("a", device.kind):
            continue
        if major not in ("*", str(device.major)) or minor not in ("*", str(device.minor)):
            continue
        if all(char in granted for char in access):
            return True
    return False


def _alive(pid: int) -> bool:
    return pid > 0 and os.path.exists(f"/proc/{pid}")


def _read_json(host: HostView, path: str) -> Any:
    raw = host.read_prefix(path, 16 << 20)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _spec(host: HostView, bundle: Optional[str]) -> Optional[dict[str, Any]]:
    if not bundle or not bundle.startswith("/"):
        return None
    value = _read_json(host, posixpath.join(bundle, "config.json"))
    return value if isinstance(value, dict) else None


def _runc_container(host: HostView, state_path: str) -> Optional[RunningContainer]:
    state = _read_json(host, state_path)
    if not isinstance(state, dict):
        return None
    pid = state.get("init_process_pid")
    if not isinstance(pid, int) or (not host.rooted and not _alive(pid)):
        return None
    config: dict[str, Any] = state["config"] if isinstance(state.get("config"), dict) else {}
    labels: list[Any] = config["labels"] if isinstance(config.get("labels"), list) else []
    # runc keeps the bundle among the labels of its own config: "bundle=/run/...".
    bundle = next((label[7:] for label in labels if isinstance(label, str) and label.startswith("bundle=")), None)
    paths: dict[str, Any] = state["cgroup_paths"] if isinstance(state.get("cgroup_paths"), dict) else {}
    devices = paths.get("devices") if isinstance(paths.get("devices"), str) else None
    # runc keeps the unified hierarchy's path under the empty controller name.
    unified = paths.get("") if isinstance(paths.get(""), str) else None
    created = state.get("created") if isinstance(state.get("created"), str) else None
    return RunningContainer(
        str(state.get("id") or os.path.basename(os.path.dirname(state_path))),
        "runc",
        state_path,
        pid,
        bundle,
        _spec(host, bundle),
        created,
        devices,
        unified if devices is None else None,
    )


def _crun_container(host: HostView, status_path: str) -> Optional[RunningContainer]:
    status = _read_json(host, status_path)
    if not isinstance(status, dict):
        return None
    pid = status.get("pid")
    if not isinstance(pid, int) or (not host.rooted and not _alive(pid)):
        return None
    bundle = status.get("bundle") if isinstance(status.get("bundle"), str) else None
    cgroup = status.get("cgroup-path") if isinstance(status.get("cgroup-path"), str) else None
    unified = host.exists(CGROUP_V2_MARKER)
    devices = os.path.join(DEVICES_V1, cgroup.lstrip("/")) if cgroup and not unified else None
    created = status.get("created") if isinstance(status.get("created"), str) else None
    return RunningContainer(
        os.path.basename(os.path.dirname(status_path)),
        "crun",
        status_path,
        pid,
        bundle,
        _spec(host, bundle),
        created,
        devices,
        os.path.join("/sys/fs/cgroup", cgroup.lstrip("/")) if cgroup and unified else None,
    )


def configured_roots(host: HostView) -> tuple[list[str], list[str]]:
    """The state roots the engines' configurations name: cri-o's runtime_root of each runtime (after its
    drop-ins), and the Root option of containerd's runc handlers, which holds one directory per namespace.
    Returns (roots, containerd roots)."""
    from nvidia_oci_hook.kinds.containerd.config import ContainerdConfig
    from nvidia_oci_hook.kinds.loading import read_toml
    from nvidia_oci_hook.node.engines import containerd_in_effect, crio_files, dig

    roots: list[str] = []
    for path in crio_files(host):
        runtimes = dig(read_toml(host, path), "crio", "runtime", "runtimes")
        for table in runtimes.values() if isinstance(runtimes, dict) else []:
            root = dig(table, "runtime_root")
            if isinstance(root, str) and root.startswith("/") and root not in roots:
                roots.append(root)
    containerd_roots: list[str] = []
    config = containerd_in_effect(host)
    if config is not None:
        for runtime in ContainerdConfig(config).runtimes():
            _, root = runtime.option("Root")
            if runtime.is_runc and isinstance(root, str) and root.startswith("/") and root not in containerd_roots:
                containerd_roots.append(root)
    return roots, containerd_roots


def state_roots(host: HostView, extra: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(runtime, root directory) for every state root to look in: the standard ones, the engines'
    configurations' and extra; a root may hold runc's state or crun's."""
    named, containerd_named = configured_roots(host)
    plain = list(dict.fromkeys((*RUNC_ROOTS, *CRUN_ROOTS, *named, *extra)))
    for parent in (CONTAINERD_RUNC_ROOT, *containerd_named):
        plain += [posixpath.join(parent, namespace) for namespace in host.list_dir(parent)]
    return [(runtime, root) for root in dict.fromkeys(plain) for runtime in ("runc", "crun")]


def running_containers(host: HostView, extra_roots: tuple[str, ...] = ()) -> list[RunningContainer]:
    """Every container a runtime's state says is running (its init process alive, on the node itself)."""
    found: list[RunningContainer] = []
    seen: set[str] = set()
    for runtime, root in state_roots(host, extra_roots):
        for name in host.list_dir(root):
            state_file = posixpath.join(root, name, "state.json" if runtime == "runc" else "status")
            # Read, not stat'ed first: the view keeps what it stat'ed for the run, and a runtime writes a new
            # container's state just after its directory, so a caller that looks again would never see it.
            container = (_runc_container if runtime == "runc" else _crun_container)(host, state_file)
            if container is not None and container.state_path not in seen:
                seen.add(container.state_path)
                found.append(container)
    return found


@dataclass
class Access:
    """What a running container can still open of the NVIDIA nodes it was given."""

    container: RunningContainer
    given: list[GivenDevice]
    lost: list[GivenDevice]
    judged: bool  # False: its device rules could not be read (cgroup v2, no cgroup found)
    why: str = ""


def device_access(host: HostView, containers: list[RunningContainer]) -> list[Access]:
    """For each container given NVIDIA nodes: the nodes its device cgroup no longer allows."""
    majors = nvidia_majors(host)
    results = []
    for container in containers:
        given = given_nvidia_devices(container.spec, majors)
        if not given:
            continue
        if container.devices_cgroup is None:
            if container.cgroup_v2 and not host.rooted:
                results.append(_probed(container, given))
            else:
                results.append(Access(container, given, [], False, "no cgroup v1 devices controller for it"))
            continue
        devices_list = host.read_text(os.path.join(container.devices_cgroup, "devices.list"))
        if devices_list is None:
            results.append(Access(container, given, [], False, f"{container.devices_cgroup}/devices.list unreadable"))
            continue
        lost = [device for device in given if not v1_allows(devices_list, device)]
        results.append(Access(container, given, lost, True))
    return results


# What a probe's open gives where the cgroup allows the node: success, or the driver's own refusal (no GPU
# behind the node, no driver loaded).
_ALLOWED_ERRNOS = (0, errno.ENXIO, errno.ENODEV, errno.ENOENT)


def _probed(container: RunningContainer, given: list[GivenDevice]) -> Access:
    """The cgroup v2 verdict: each node opened from inside the container's cgroup and mount namespace."""
    assert container.cgroup_v2 is not None
    procs = os.path.join(container.cgroup_v2, "cgroup.procs")
    lost = []
    for device in given:
        code = probe_open(container.pid, procs, device)
        if code is None:
            return Access(container, given, [], False, f"the open probe could not join {container.cgroup_v2}")
        if code == errno.EPERM:
            lost.append(device)
        elif code not in _ALLOWED_ERRNOS:
            return Access(container, given, [], False, f"opening {device.path} gave {errno.errorcode.get(code, code)}")
    return Access(container, given, lost, True)


def spec_rules_for(spec: Optional[dict[str, Any]], device: GivenDevice) -> list[str]:
    """The spec's own allow rules (linux.resources.devices) that cover the node, as devices.allow takes them."""
    linux = spec.get("linux") if isinstance(spec, dict) else None
    resources = linux.get("resources") if isinstance(linux, dict) else None
    rules = resources.get("devices") if isinstance(resources, dict) else None
    found = []
    for rule in rules if isinstance(rules, list) else []:
        if not isinstance(rule, dict) or rule.get("allow") is not True:
            continue
        kind = rule.get("type") or "a"
        major, minor = rule.get("major"), rule.get("minor")
        if (
            kind not in ("a", device.kind)
            or major not in (None, -1, device.major)
            or minor not in (None, -1, device.minor)
        ):
            continue
        access = rule.get("access") if isinstance(rule.get("access"), str) else "rwm"
        shown_major = "*" if major in (None, -1) else str(major)
        shown_minor = "*" if minor in (None, -1) else str(minor)
        found.append(f"{kind} {shown_major}:{shown_minor} {access}")
    return found


CLONE_NEWNS = 0x00020000


def probe_open(pid: int, cgroup_procs: str, device: GivenDevice) -> Optional[int]:
    """Open the node as the container would: a child joins the container's cgroup (cgroup_procs: the cgroup.procs
    file of the cgroup its device rules apply to) and mount namespace, opens the node read-write, and exits. The
    errno it met (0: opened), or None when the probe could not be made. Nothing is left behind: the child is gone,
    the cgroup and the namespace are the container's own.

    On cgroup v2, where the rules are an eBPF program attached to the container's cgroup, this is the only way to
    learn them; on cgroup v1 it sees what devices.list says."""
    import ctypes

    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe, and never returns
        code = -1
        try:
            os.close(reader)
            with open(cgroup_procs, "w", encoding="ascii") as handle:
                handle.write(str(os.getpid()))
            namespace = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
            if ctypes.CDLL(None, use_errno=True).setns(namespace, CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), "setns")
            try:
                os.close(os.open(device.path, os.O_RDWR | os.O_CLOEXEC))
                code = 0
            except OSError as exc:
                code = exc.errno or -1
        except BaseException:
            code = -1
        finally:
            try:
                os.write(writer, str(code).encode())
            finally:
                os._exit(0)
    os.close(writer)
    try:
        answer = os.read(reader, 16)
    finally:
        os.close(reader)
        os.waitpid(child, 0)
    try:
        code = int(answer)
    except ValueError:
        return None
    return None if code < 0 else code
