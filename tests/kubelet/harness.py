"""A throwaway real kubelet (../shared/peers/bin/kubelet, Kubernetes 1.32) running static pods on a real engine, with
a device plugin of the tests' own (tests/kubelet/device_plugin.py): the path a GPU pod really takes, Pod ->
kubelet (device plugin Allocate, env order, mounts, privileged) -> CRI ContainerConfig -> engine.

`Kubelet.start(engine, node_setup=..., plugin_answer=...)` runs, as ../shared/peers/README.md says the kubelet runs
on these machines:

- an anchor process (catatonit) in a private mount namespace of its own, with tmpfs over /var/lib, /var/log and
  /run, a private /dev (a tmpfs holding copies of the machine's device nodes, the machine's /dev/pts, an empty
  /dev/shm), and regular files bound over the six sysctls the kubelet writes at start (vm.overcommit_memory,
  vm.panic_on_oom, kernel.panic, kernel.panic_on_oops, kernel.keys.root_maxkeys, kernel.keys.root_maxbytes), which
  it would otherwise set on the machine. The kubelet's hard-coded device-plugin socket directory
  (/var/lib/kubelet/device-plugins), its pods' logs, fake /dev/nvidia* nodes and driver roots under /run stay in
  there. The kubelet, the plugin and containerd enter that namespace (nsenter); cri-o enters it and makes one of
  its own below it (CrioDaemon's, so that its overlay mounts leave with it). The engines' own directories stay in
  /tmp, seen alike from both sides.
- the engine: cri-o 1.37 (tests/e2e/crio.py) or containerd 1.7 / 2.1 (tests/e2e/cri.py, `restrict_oom_score_adj`),
  each with runc behind bounded_runc (privileged containers run in this sandbox) and CDI read from /var/run/cdi;
  or containerd 1.7 with enable_cdi = false (CDI_OFF), as it runs where enable_cdi is not turned on.
- the kubelet: standalone (no API server), static pods from a directory, the read-only port (`GET /pods`) on a free
  port of 127.0.0.1, a cgroup root of its own, cgroupfs, no iptables chains, eviction and image GC that never act.
- the device plugin, when an answer is given: it registers `resource` with `devices`, and the kubelet has them once
  its checkpoint lists them.

`host_root` (/proc/ANCHOR/root) shows the namespace's view of the node from outside: the kubelet's real checkpoint
is `host_root / "var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"`, as `doctor --host-root` and
`lint --node --host-root` read it. Paths under it go through symlinks as the reader's own root resolves them: use
the real paths (/run, not /var/run).

Pods go in as manifests (`add_static_pod`, a dict or YAML; `pod_manifest` writes one that runs here), come out as
the kubelet reports them (`wait_for(name, predicate)` on `GET /pods`), and their output is read from their CRI logs
(`container_log`) or through crictl (`crictl`, `exec`). `set_plugin_answer` changes the plugin's Allocate answer
between pods; `calls` is what the kubelet asked the plugin; `restart` restarts the kubelet alone.

`close()` stops the kubelet and the plugin, removes every pod through CRI, kills what is left in the namespace and
in the kubelet's cgroup root, stops the engine, lets the namespace go, removes the cgroups and the directory.

Measured here (2 CPUs): a start takes about 1 s whatever the engine (the engine 0.3 to 0.7 s with its image, the
kubelet 0.1 s to answer, the plugin 0.2 s until the kubelet's checkpoint lists its devices); a pod runs to its end
in about 1 s (the kubelet's PLEG relists every second), a container the engine refuses shows its waiting reason in
0.8 s; close() takes 0.4 to 0.6 s.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable, Optional, Union

from nvidia_oci_hook.kinds.kubernetes import deviceplugin
from tests.containerd.real import stop_daemon
from tests.e2e.cri import (
    BUSYBOX_IMAGE,
    CRIClient,
    CRIDaemon,
    CRIUnavailable,
    _kill_cgroup,
    _remove_cgroup,
    _wait_gone,
    cgroup_dirs,
    cri,
    cri_config,
    parse_cri_log,
)
from tests.e2e.crio import HOST_TOOLS, PEERS, CrioDaemon, bounded_runc
from tests.e2e.crio import skip_reason as crio_skip_reason

REPOSITORY = Path(__file__).resolve().parents[2]
KUBELET = PEERS / "kubelet"
CRICTL = PEERS / "crictl"
ENGINES = ("crio", "containerd-1.7", "containerd-2.1")
# containerd 1.7 as it runs where enable_cdi is not turned on (its default): it drops every CDI name. Kubelet.start
# takes it beside ENGINES.
CDI_OFF = "containerd-1.7-cdi-off"
RESOURCE = "nvidia.com/gpu"
DEVICES = ("gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7")
# The sysctls the kubelet's container manager sets at start (cm/container_manager_linux.go setupKernelTunables).
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
CDI_SPEC_DIR = "/var/run/cdi"
# What the kubelet logs (--v 2) once it has taken a plugin's device list in (devicemanager/manager.go).
PROCESSED = '"Processed device updates for resource"'

Pod = dict[str, Any]


class KubeletUnavailable(RuntimeError):
    """The namespace, the engine, the kubelet or the plugin could not be set up; the message says which and why."""


def skip_reason() -> Optional[str]:
    """Why the kubelet tests cannot run here at all, in one line; None when they can."""
    if not KUBELET.is_file():
        return f"no kubelet at {KUBELET} (../shared/peers is absent)"
    if os.geteuid() != 0:
        return "the kubelet needs root (mount namespaces, cgroups)"
    for tool in ("unshare", "nsenter", "catatonit", "mount", "umount"):
        if shutil.which(tool, path=HOST_TOOLS) is None:
            return f"{tool} is not installed"
    return crio_skip_reason()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _catatonit() -> str:
    found = shutil.which("catatonit", path=HOST_TOOLS)
    if found is None:
        raise KubeletUnavailable("catatonit is not installed")
    return found


def _mount_namespace(pid: int) -> Optional[str]:
    with contextlib.suppress(OSError):
        return os.readlink(f"/proc/{pid}/ns/mnt")
    return None


def processes_in_namespace(namespace: str) -> list[int]:
    """Every process whose mount namespace is `namespace` (as /proc/PID/ns/mnt reads)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _mount_namespace(int(entry.name)) == namespace:
            found.append(int(entry.name))
    return found


# The anchor's namespace, set up through nsenter once catatonit holds it: $1 is the harness's directory.
NAMESPACE_SETUP = """set -eu
work=$1
for point in /var/lib /var/log /run; do mount -t tmpfs -o mode=755 tmpfs "$point"; done
mkdir -p /var/lib/kubelet /var/log/pods /var/log/containers /run/cdi
mkdir "$work/host-dev"
mount --rbind /dev "$work/host-dev"
mount -t tmpfs -o mode=755,nosuid tmpfs /dev
cp -a -x "$work/host-dev/." /dev/
# A GPU machine's own nodes would stand in for the ones a test makes or leaves out.
rm -rf /dev/nvidia*
mount --bind "$work/host-dev/pts" /dev/pts
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
umount -l "$work/host-dev"
rmdir "$work/host-dev"
for name in {sysctls}; do
    mkdir -p "$work/sysctl/${{name%/*}}"
    cat "/proc/sys/$name" > "$work/sysctl/$name"
    mount --bind "$work/sysctl/$name" "/proc/sys/$name"
done
"""


class _AnchoredCrio(CrioDaemon):
    """cri-o in a mount namespace of its own below the anchor's, instead of below the machine's."""

    anchor = 0

    def _namespace_script(self) -> str:
        return f'exec nsenter --target {self.anchor} --mount -- unshare --mount --propagation slave -- "$@"'


def _containerd_binary(engine: str) -> Path:
    from tests.containerd.real import CANDIDATES

    binary = CANDIDATES[1] if engine.startswith("containerd-1.7") else CANDIDATES[2]
    if not os.access(binary, os.X_OK):
        raise KubeletUnavailable(f"no {engine} at {binary}: run `sh scripts/setup test` (tests/containerd/setup.sh)")
    return binary


def kubelet_config(
    workdir: Path, *, endpoint: str, cgroup_root: str, read_only_port: int, healthz_port: int, port: int
) -> dict[str, Any]:
    """The KubeletConfiguration: static pods, read-only port, cgroupfs under cgroup_root, nothing outside the
    namespace and the directory, nothing that evicts or collects."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "staticPodPath": str(workdir / "manifests"),
        # The file source also watches with inotify; the period only bounds how late a missed event is seen.
        "fileCheckFrequency": "1s",
        "syncFrequency": "2s",
        "containerRuntimeEndpoint": endpoint,
        "imageServiceEndpoint": endpoint,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "cgroupsPerQOS": True,
        "failSwapOn": False,
        "failCgroupV1": False,
        "registerNode": False,
        "address": "127.0.0.1",
        "port": port,
        "readOnlyPort": read_only_port,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "oomScoreAdj": 0,
        "volumePluginDir": str(workdir / "volume-plugins"),
        # The host's network namespace is the machine's: its iptables stay as they are.
        "makeIPTablesUtilChains": False,
        "protectKernelDefaults": False,
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "1Mi",
            "nodefs.inodesFree": "1",
            "imagefs.available": "1Mi",
            "imagefs.inodesFree": "1",
        },
        "evictionPressureTransitionPeriod": "1s",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "imageMinimumGCAge": "24h",
        "localStorageCapacityIsolation": False,
        "featureGates": {"KubeletPodResources": True},
    }


def pod_manifest(
    name: str,
    command: Sequence[str],
    *,
    gpus: int = 0,
    resource: str = RESOURCE,
    privileged: bool = False,
    restart_policy: str = "Never",
    env: Optional[Mapping[str, str]] = None,
    annotations: Optional[Mapping[str, str]] = None,
    container: str = "main",
) -> dict[str, Any]:
    """A static pod that runs here: busybox as imported (never pulled), host network, one container, BestEffort
    (only extended resources are asked for)."""
    spec: dict[str, Any] = {
        "name": container,
        "image": BUSYBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": list(command),
    }
    if gpus:
        spec["resources"] = {"limits": {resource: str(gpus)}}
    if privileged:
        spec["securityContext"] = {"privileged": True}
    if env:
        spec["env"] = [{"name": key, "value": value} for key, value in env.items()]
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "hostNetwork": True,
            "restartPolicy": restart_policy,
            "terminationGracePeriodSeconds": 0,
            "containers": [spec],
        },
    }


def container_status(pod: Pod, container: str = "main") -> dict[str, Any]:
    for status in pod.get("status", {}).get("containerStatuses") or []:
        if status.get("name") == container:
            found: dict[str, Any] = status
            return found
    return {}


def waiting(pod: Pod, container: str = "main") -> tuple[str, str]:
    """The container's waiting (reason, message), ("", "") when it is not waiting."""
    state = container_status(pod, container).get("state", {}).get("waiting")
    return (state.get("reason", ""), state.get("message", "")) if state else ("", "")


def phase(pod: Pod) -> str:
    value: str = pod.get("status", {}).get("phase", "")
    return value


def finished(pod: Pod) -> bool:
    return phase(pod) in ("Succeeded", "Failed")


class Kubelet:
    """A running kubelet, its engine and (optionally) its device plugin, in a mount namespace of their own."""

    def __init__(self, workdir: Path, engine: str) -> None:
        self.workdir = workdir
        self.engine_name = engine
        # A node name is a DNS subdomain, and a static pod's name ends with it.
        self.node_name = "nvoh-" + "".join(character for character in workdir.name.lower() if character.isalnum())
        self.cgroup_root = f"/nvoh-kubelet-{workdir.name}"
        self.manifests = workdir / "manifests"
        self.anchor: Optional[subprocess.Popen[bytes]] = None
        self.namespace: Optional[str] = None
        self.engine: Optional[CRIClient] = None
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.plugin: Optional[subprocess.Popen[bytes]] = None
        self.plugin_config = workdir / "plugin.json"
        self.plugin_calls = workdir / "plugin-calls.jsonl"
        self.read_only_port = 0
        self.timings: dict[str, float] = {}

    # Starting.

    @classmethod
    def start(
        cls,
        engine: str = "crio",
        *,
        node_setup: Optional[Callable[[Path], None]] = None,
        plugin_answer: Optional[Mapping[str, Any]] = None,
        devices: Sequence[str] = DEVICES,
        resource: str = RESOURCE,
        timeout: float = 60,
    ) -> Kubelet:
        """Start the namespace, `node_setup(host_root)` (to make fake device nodes and driver roots in it), the
        engine, the kubelet and, when plugin_answer is given (see device_plugin.py: {"*": answer, ID: answer}), the
        device plugin; raises KubeletUnavailable after cleaning up."""
        if engine not in (*ENGINES, CDI_OFF):
            raise ValueError(f"engine {engine!r}: one of {', '.join((*ENGINES, CDI_OFF))}")
        reason = skip_reason()
        if reason is not None:
            raise KubeletUnavailable(reason)
        kubelet = cls(Path(tempfile.mkdtemp(prefix="kubelet", dir="/tmp")), engine)
        try:
            began = time.monotonic()
            kubelet._start_namespace()
            if node_setup is not None:
                node_setup(kubelet.host_root)
            stamp = time.monotonic()
            kubelet._start_engine(timeout)
            kubelet.timings["engine"] = time.monotonic() - stamp
            stamp = time.monotonic()
            kubelet._start_kubelet(timeout)
            kubelet.timings["kubelet"] = time.monotonic() - stamp
            if plugin_answer is not None:
                stamp = time.monotonic()
                kubelet.start_plugin(plugin_answer, devices=devices, resource=resource, timeout=timeout)
                kubelet.timings["plugin"] = time.monotonic() - stamp
            kubelet.timings["start"] = time.monotonic() - began
        except BaseException:
            kubelet.close()
            raise
        return kubelet

    def __enter__(self) -> Kubelet:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def host_root(self) -> Path:
        """The namespace's root, seen from outside."""
        if self.anchor is None:
            raise KubeletUnavailable("the namespace is not there")
        return Path(f"/proc/{self.anchor.pid}/root")

    def node_path(self, path: str) -> Path:
        """A path of the node (as the kubelet and the engine see it), seen from outside."""
        return self.host_root / path.lstrip("/")

    def _enter(self) -> list[str]:
        assert self.anchor is not None
        return ["nsenter", "--target", str(self.anchor.pid), "--mount", "--"]

    def _start_namespace(self) -> None:
        self.manifests.mkdir()
        (self.workdir / "volume-plugins").mkdir()
        self.anchor = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--", _catatonit(), "-P"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        # catatonit is there once unshare has exec'd it, in the new namespace.
        deadline = time.monotonic() + 10
        own = _mount_namespace(os.getpid())
        while time.monotonic() < deadline:
            namespace = _mount_namespace(self.anchor.pid)
            if namespace is not None and namespace != own and self._anchor_is_catatonit():
                self.namespace = namespace
                break
            if self.anchor.poll() is not None:
                break
            time.sleep(0.005)
        if self.namespace is None:
            raise KubeletUnavailable(f"the namespace's anchor did not start (exit {self.anchor.poll()})")
        script = NAMESPACE_SETUP.format(sysctls=" ".join(KUBELET_SYSCTLS))
        done = subprocess.run(
            [*self._enter(), "sh", "-c", script, "sh", str(self.workdir)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            raise KubeletUnavailable(f"setting up the namespace failed: {done.stderr.strip()}")

    def _anchor_is_catatonit(self) -> bool:
        assert self.anchor is not None
        with contextlib.suppress(OSError):
            return Path(f"/proc/{self.anchor.pid}/exe").resolve().name == "catatonit"
        return False

    def _start_engine(self, timeout: float) -> None:
        runc = bounded_runc(self.workdir / "runtime")
        assert self.anchor is not None
        try:
            if self.engine_name == "crio":
                crio = _AnchoredCrio.prepare(runtimes={"runc": runc}, cdi_spec_dirs=[CDI_SPEC_DIR])
                assert isinstance(crio, _AnchoredCrio)
                self.engine = crio
                crio.anchor = self.anchor.pid
                crio.run(timeout)
            else:
                daemon = CRIDaemon(
                    Path(tempfile.mkdtemp(prefix="cri", dir="/tmp")), _containerd_binary(self.engine_name)
                )
                self.engine = daemon
                config = cri_config(
                    daemon.workdir,
                    binary_name=runc,
                    container_annotations=(),
                    enable_cdi=self.engine_name != CDI_OFF,
                    cdi_spec_dirs=[CDI_SPEC_DIR],
                )
                daemon._start([*self._enter(), _catatonit(), "--"], config, timeout)
        except CRIUnavailable as error:
            raise KubeletUnavailable(f"{self.engine_name} did not start: {error}") from error

    def _start_kubelet(self, timeout: float) -> None:
        assert self.engine is not None
        for top in cgroup_dirs("/"):
            # cgroup_dirs("/") is each hierarchy's root: the kubelet checks that its cgroup root exists in all.
            own = top / self.cgroup_root.lstrip("/")
            own.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (top / name).exists():
                    (own / name).write_text((top / name).read_text())
        self.read_only_port = _free_port()
        config = kubelet_config(
            self.workdir,
            endpoint=f"unix://{self.engine.socket}",
            cgroup_root=self.cgroup_root,
            read_only_port=self.read_only_port,
            healthz_port=_free_port(),
            port=_free_port(),
        )
        (self.workdir / "kubelet.json").write_text(json.dumps(config, indent=1))
        command = [
            KUBELET,
            "--config",
            self.workdir / "kubelet.json",
            "--hostname-override",
            self.node_name,
            "--v",
            "2",
        ]
        # Appended to: a restarted kubelet's log follows the first one's.
        with (self.workdir / "kubelet.log").open("a") as out:
            self.process = subprocess.Popen(
                [*self._enter(), *map(str, command)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={"PATH": f"{HOST_TOOLS}:/usr/local/sbin:/usr/local/bin", "HOME": "/root"},
            )
        deadline = time.monotonic() + timeout
        registration = self.node_path(deviceplugin.KUBELET_SOCKET)
        while True:
            if self.process.poll() is not None:
                raise KubeletUnavailable(
                    f"the kubelet exited with status {self.process.returncode}:\n{self.log()[-3000:]}"
                )
            with contextlib.suppress(OSError, ValueError):
                if registration.exists():
                    self.pods()
                    return
            if time.monotonic() > deadline:
                raise KubeletUnavailable(f"the kubelet did not come up in {timeout} s:\n{self.log()[-3000:]}")
            time.sleep(0.05)

    def restart(self, timeout: float = 60) -> None:
        """Stop the kubelet and start it again in the same namespace, on the same engine and directories; with a
        plugin, until the kubelet has the plugin's devices again (the plugin registers anew on its own)."""
        processed = self.log().count(PROCESSED)
        if self.process is not None:
            stop_daemon(self.process)
        self._start_kubelet(timeout)
        if self.plugin is None:
            return
        deadline = time.monotonic() + timeout
        while self.log().count(PROCESSED) <= processed:
            if time.monotonic() > deadline:
                raise KubeletUnavailable(f"the kubelet did not get the plugin's devices again in {timeout} s")
            time.sleep(0.05)

    # The device plugin.

    def start_plugin(
        self,
        answer: Mapping[str, Any],
        *,
        devices: Sequence[str] = DEVICES,
        resource: str = RESOURCE,
        timeout: float = 30,
    ) -> None:
        """Start the device plugin and wait until the kubelet has its devices (its checkpoint lists them)."""
        if self.plugin is not None:
            raise KubeletUnavailable("a plugin runs already")
        self.plugin_config.write_text(
            json.dumps(
                {
                    "resource": resource,
                    "devices": list(devices),
                    "answers": dict(answer),
                    "calls": str(self.plugin_calls),
                }
            )
        )
        pythonpath = os.pathsep.join(filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")]))
        with (self.workdir / "plugin.log").open("w") as out:
            self.plugin = subprocess.Popen(
                [
                    *self._enter(),
                    sys.executable,
                    "-m",
                    "tests.kubelet.device_plugin",
                    "--config",
                    str(self.plugin_config),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "PYTHONPATH": pythonpath},
            )
        deadline = time.monotonic() + timeout
        while sorted(self.checkpoint().get("Data", {}).get("RegisteredDevices", {}).get(resource) or []) != sorted(
            devices
        ):
            if self.plugin.poll() is not None:
                log = (self.workdir / "plugin.log").read_text(errors="replace")
                raise KubeletUnavailable(f"the device plugin exited with status {self.plugin.returncode}:\n{log}")
            if time.monotonic() > deadline:
                raise KubeletUnavailable(f"the kubelet did not list the plugin's devices in {timeout} s")
            time.sleep(0.05)

    def set_plugin_answer(self, answer: Mapping[str, Any]) -> None:
        """The plugin's Allocate answers from now on ({"*": answer, ID: answer}); it reads them on every call."""
        config = json.loads(self.plugin_config.read_text())
        config["answers"] = dict(answer)
        partial = self.plugin_config.with_name(".plugin.json.partial")
        partial.write_text(json.dumps(config))
        partial.replace(self.plugin_config)

    def calls(self, method: Optional[str] = None) -> list[dict[str, Any]]:
        """The calls the kubelet made to the plugin, in order ({"method", "request", "response"})."""
        if not self.plugin_calls.exists():
            return []
        found = [json.loads(line) for line in self.plugin_calls.read_text().splitlines() if line]
        return [call for call in found if method is None or call["method"] == method]

    def stop_plugin(self) -> None:
        if self.plugin is not None:
            stop_daemon(self.plugin)
            self.plugin = None

    # Pods.

    def pod_name(self, name: str) -> str:
        """The name the kubelet gives a static pod: the manifest's name and the node's."""
        return f"{name}-{self.node_name}"

    def add_static_pod(self, manifest: Union[Mapping[str, Any], str], name: Optional[str] = None) -> str:
        """Put a Pod manifest (a dict, or YAML / JSON text) in the static pod directory; returns the pod's name as
        the kubelet lists it."""
        if isinstance(manifest, str):
            import yaml

            text, loaded = manifest, yaml.safe_load(manifest)
        else:
            text, loaded = json.dumps(manifest), manifest
        base = name or loaded["metadata"]["name"]
        # The file source skips names that start with a dot: the manifest appears whole.
        partial = self.manifests / f".{base}.partial"
        partial.write_text(text)
        partial.replace(self.manifests / f"{base}.yaml")
        return self.pod_name(base)

    def remove_static_pod(self, name: str, timeout: float = 30) -> None:
        """Take the manifest away and wait until the kubelet no longer lists the pod."""
        base = name[: -len(self.node_name) - 1] if name.endswith(f"-{self.node_name}") else name
        (self.manifests / f"{base}.yaml").unlink(missing_ok=True)
        deadline = time.monotonic() + timeout
        while self.pod(name) is not None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the kubelet still lists {name} after {timeout} s")
            time.sleep(0.1)

    def pods(self) -> list[Pod]:
        """The kubelet's pods, from its read-only port (the PodList of `GET /pods`)."""
        url = f"http://127.0.0.1:{self.read_only_port}/pods"
        with urllib.request.urlopen(url, timeout=10) as response:
            listed: list[Pod] = json.load(response).get("items") or []
            return listed

    def pod(self, name: str) -> Optional[Pod]:
        """The pod by its name or its manifest's name."""
        for pod in self.pods():
            if pod["metadata"]["name"] in (name, self.pod_name(name)):
                return pod
        return None

    def wait_for(self, name: str, predicate: Callable[[Pod], bool], timeout: float = 60) -> Pod:
        """The pod once predicate(pod) holds; raises TimeoutError with the last status seen and the kubelet's log."""
        deadline = time.monotonic() + timeout
        last: Optional[Pod] = None
        while True:
            if self.process is None or self.process.poll() is not None:
                raise KubeletUnavailable(f"the kubelet is not running:\n{self.log()[-3000:]}")
            with contextlib.suppress(OSError, ValueError):
                last = self.pod(name)
                if last is not None and predicate(last):
                    return last
            if time.monotonic() > deadline:
                status = json.dumps((last or {}).get("status"), indent=1)
                raise TimeoutError(f"{name}: not there after {timeout} s; last status {status}\n{self.log()[-3000:]}")
            time.sleep(0.1)

    def container_log(self, name: str, container: str = "main", stream: Optional[str] = None) -> str:
        """What the container wrote (its CRI log under /var/log/pods, without the line prefixes)."""
        pod = self.pod(name)
        if pod is None:
            raise KeyError(name)
        metadata = pod["metadata"]
        directory = self.node_path(f"/var/log/pods/{metadata['namespace']}_{metadata['name']}_{metadata['uid']}")
        logs = sorted((directory / container).glob("*.log"), key=lambda path: int(path.stem))
        return parse_cri_log(logs[-1].read_text(errors="replace"), stream) if logs else ""

    def crictl(self, *arguments: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """crictl against the engine, in the namespace (where the container logs it reads are)."""
        assert self.engine is not None
        command = [*self._enter(), str(CRICTL), "--runtime-endpoint", f"unix://{self.engine.socket}", *arguments]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)

    def container_id(self, name: str, container: str = "main") -> str:
        """The engine's ID of the pod's container, from the kubelet's status ("" before the engine made one)."""
        pod = self.pod(name)
        found = container_status(pod, container).get("containerID", "") if pod is not None else ""
        return str(found).split("://", 1)[-1]

    def exec(self, name: str, *command: str, container: str = "main") -> subprocess.CompletedProcess[str]:
        """Run command in the pod's running container (crictl exec)."""
        return self.crictl("exec", self.container_id(name, container), *command)

    def checkpoint(self) -> dict[str, Any]:
        """The device manager's checkpoint as the kubelet wrote it ({} while there is none)."""
        path = self.node_path(deviceplugin.CHECKPOINT)
        try:
            loaded: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return loaded

    def allocations(self, pod_uid: str) -> list[dict[str, Any]]:
        """The checkpoint's entries for one pod, each with its AllocResp decoded (`response`)."""
        found = []
        for entry in self.checkpoint().get("Data", {}).get("PodDeviceEntries") or []:
            if entry.get("PodUID") == pod_uid:
                response = deviceplugin.CONTAINER_ALLOCATE_RESPONSE.decode(base64.b64decode(entry["AllocResp"]))
                found.append({**entry, "response": response})
        return found

    def log(self) -> str:
        path = self.workdir / "kubelet.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # Stopping.

    def close(self) -> None:
        """Stop everything and remove every trace: pods, processes, mounts, cgroups, directories."""
        if self.process is not None:
            stop_daemon(self.process)
        self.stop_plugin()
        if self.engine is not None:
            self._stop_containers()
            self.engine.remove_pods()
            _wait_gone(_kill_cgroup(self.cgroup_root))
            if self.anchor is not None and self.anchor.poll() is None:
                self._unmount_in_namespace(self.engine.workdir)
            self.engine.close()
        if self.anchor is not None:
            # Whatever still runs in the namespace was started into it here: the namespace goes with the last.
            if self.namespace is not None:
                leftovers = [pid for pid in processes_in_namespace(self.namespace) if pid != self.anchor.pid]
                for pid in leftovers:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                _wait_gone(leftovers)
            stop_daemon(self.anchor)
        _remove_cgroup(self.cgroup_root)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _stop_containers(self) -> None:
        """Stop every container at once: a pod's stop waits out each container's grace period, and a `sleep` that
        is its container's PID 1 never ends on SIGTERM."""
        engine = self.engine
        if engine is None or not engine.answers():
            return
        with contextlib.suppress(Exception):
            for container in engine.runtime.ListContainers(cri.ListContainersRequest(), timeout=10).containers:
                with contextlib.suppress(Exception):
                    engine.runtime.StopContainer(
                        cri.StopContainerRequest(container_id=container.id, timeout=0), timeout=10
                    )

    def _unmount_in_namespace(self, directory: Path) -> None:
        """Unmount, in the namespace, what an engine mounted under its directory (containerd's snapshots)."""
        assert self.anchor is not None
        prefix = f"{directory}/"
        with contextlib.suppress(OSError), open(f"/proc/{self.anchor.pid}/mountinfo", encoding="utf-8") as table:
            points = [line.split()[4] for line in table]
            below = [point for point in reversed(points) if f"{point}/".startswith(prefix)]
            if below:
                subprocess.run(
                    [*self._enter(), "umount", "--lazy", *below], capture_output=True, timeout=30, check=False
                )
