"""Both seeds through a real kubelet 1.32 (tests/kubelet/harness.py), from Pod manifests, on cri-o 1.37 and on
containerd 1.7 and 2.1, with the tests' own device plugin answering as NVIDIA's does (device specs whose host paths
lie under the driver root /run/nvidia/driver/dev).

- seed 000, a stale driver root: the driver is on `/` (its nodes under /dev), nothing is under /run/nvidia/driver.
  containerd keeps the pod waiting in CreateContainerError; cri-o runs it without the devices and says nothing.
- seed 003, a stray /dev/nvidia0 on the host: a privileged pod whose device's host path differs from its container
  path. cri-o refuses it in CreateContainerError; containerd runs it.
- no plugin registered: a static pod asking for nvidia.com/gpu is admitted and runs without a device.
- the kubelet's own checkpoint, read from outside through `host_root`, holds the plugin's Allocate answer.

One kubelet per engine serves the module: it first runs the pod that asks for a GPU before any plugin registered,
then starts the plugin; each test sets the node's device nodes and the plugin's answer it needs, and takes its pod
away at the end. The test of close() starts kubelets of its own, on cri-o and containerd 2.1.

What the kubelet recorded (`GET /pods`, containerStatuses[0].state.waiting), as seen here:

- seed 000, containerd 1.7 and 2.1: reason `CreateContainerError`, message `failed to generate container "ID"
  spec: failed to generate spec: lstat /run/nvidia/driver/dev/nvidiactl: no such file or directory`;
  cri-o: phase `Succeeded`, exit code 0, neither /dev/nvidiactl nor /dev/nvidia0 in the container.
- seed 003, cri-o: reason `CreateContainerError`, message `privileged container was configured with a device
  container path that already exists on the host`; containerd 1.7 and 2.1: phase `Succeeded`, /dev/nvidia0 in the
  container.
- no plugin, every engine: phase `Succeeded`, qosClass `BestEffort`, requests and limits `nvidia.com/gpu: "1"`, no
  device in the container, and not one line of the kubelet's log (--v 2) names nvidia.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.kinds.kubernetes.deviceplugin import CONTAINER_ALLOCATE_RESPONSE
from tests.e2e.cri import BUSYBOX_IMAGE, cgroup_dirs
from tests.kubelet.harness import (
    ENGINES,
    KUBELET_SYSCTLS,
    RESOURCE,
    Kubelet,
    KubeletUnavailable,
    Pod,
    container_status,
    finished,
    phase,
    pod_manifest,
    processes_in_namespace,
    skip_reason,
    waiting,
)

pytestmark = [pytest.mark.runtime, pytest.mark.root]

DRIVER_DEV = "/run/nvidia/driver/dev"
LSTAT = f"lstat {DRIVER_DEV}/nvidiactl: no such file or directory"
COLLISION = "privileged container was configured with a device container path that already exists on the host"
# The fake nodes' numbers: /dev/urandom's, harmless to open.
NUMBERS = (1, 9)
# A CDI spec the checkpoint test's answer names, in the directory both engines read: the pod runs.
CDI_SPEC = json.dumps(
    {
        "cdiVersion": "0.5.0",
        "kind": "example.com/gpu",
        "devices": [{"name": "0", "containerEdits": {"env": ["FROM_CDI=1"]}}],
    }
)

# A GPU pod as users write it, asking for a GPU on a node where no device plugin has registered yet.
UNPLUGGED = f"""\
apiVersion: v1
kind: Pod
metadata:
  name: unplugged
spec:
  hostNetwork: true
  restartPolicy: Never
  containers:
  - name: main
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: [sh, -c, ls /dev]
    resources:
      limits:
        nvidia.com/gpu: 1
"""


def device(path: str, host_path: str) -> dict[str, str]:
    return {"container_path": path, "host_path": host_path, "permissions": "rw"}


@pytest.fixture(scope="module", autouse=True)
def _needs_kubelet() -> None:
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)


@dataclass
class Node:
    engine: str
    kubelet: Kubelet
    # The pod that asked for a GPU before any plugin registered, as it ended, what it printed, and the kubelet's
    # log up to then.
    unplugged: Pod
    unplugged_output: str
    unplugged_log: str


def _cdi_spec(root: Path) -> None:
    (root / "run/cdi/example.json").write_text(CDI_SPEC)


@pytest.fixture(scope="module", params=ENGINES)
def node(request: pytest.FixtureRequest) -> Iterator[Node]:
    engine: str = request.param
    try:
        kubelet = Kubelet.start(engine, node_setup=_cdi_spec)
    except KubeletUnavailable as error:
        pytest.fail(str(error))
    try:
        name = kubelet.add_static_pod(UNPLUGGED)
        unplugged = kubelet.wait_for(name, finished)
        output, log = kubelet.container_log(name), kubelet.log()
        kubelet.remove_static_pod(name)
        kubelet.start_plugin({})
        yield Node(engine, kubelet, unplugged, output, log)
    finally:
        kubelet.close()


@contextlib.contextmanager
def nodes(kubelet: Kubelet, *paths: str) -> Iterator[None]:
    """Character devices at the node's paths (in the kubelet's namespace) for the test's duration."""
    made = []
    try:
        for path in paths:
            target = kubelet.node_path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.mknod(target, 0o666 | 0o020000, os.makedev(*NUMBERS))
            made.append(target)
        yield
    finally:
        for target in made:
            target.unlink(missing_ok=True)


@contextlib.contextmanager
def static_pod(kubelet: Kubelet, manifest: dict[str, Any]) -> Iterator[str]:
    name = kubelet.add_static_pod(manifest)
    try:
        yield name
    finally:
        kubelet.remove_static_pod(name)


def listed(output: str) -> set[str]:
    return set(output.split())


def _cli(*arguments: str) -> tuple[int, str]:
    """The tool as a user runs it, in this process (its output captured)."""
    import io
    from contextlib import redirect_stdout

    from nvidia_oci_hook.cli import main

    out = io.StringIO()
    with redirect_stdout(out):
        status = main(list(arguments))
    return status, out.getvalue()


def predicted(kubelet: Kubelet, manifest: dict[str, Any], tmp: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What `pod` says of the manifest on this node before it is created (its container's verdict), and what
    `lint --node` reports of it."""
    path = tmp / f"{manifest['metadata']['name']}.json"
    path.write_text(json.dumps(manifest))
    _, out = _cli("pod", "--host-root", str(kubelet.host_root), "--format", "json", str(path))
    (container,) = json.loads(out)["pods"]
    _, out = _cli("lint", "--node", "--host-root", str(kubelet.host_root), "--format", "json", str(path))
    (result,) = [result for result in json.loads(out)["files"] if result["path"] == str(path)]
    return container, result["findings"]


def why(kubelet: Kubelet, text: str) -> dict[str, Any]:
    _, out = _cli("why", "--host-root", str(kubelet.host_root), "--format", "json", text)
    return {cause["code"]: cause for cause in json.loads(out)["causes"]}


def doctor_check(kubelet: Kubelet, name: str) -> dict[str, Any]:
    _, out = _cli("doctor", "--host-root", str(kubelet.host_root), "--format", "json", "--check", name)
    (check,) = json.loads(out)["checks"]
    return check  # type: ignore[no-any-return]


def test_seed_000_a_stale_driver_root(node: Node, tmp_path: Path) -> None:
    kubelet = node.kubelet
    kubelet.set_plugin_answer(
        {
            "*": {
                "devices": [
                    device("/dev/nvidiactl", f"{DRIVER_DEV}/nvidiactl"),
                    device("/dev/nvidia0", f"{DRIVER_DEV}/nvidia0"),
                ]
            }
        }
    )
    assert not kubelet.node_path("/run/nvidia/driver").exists()
    with (
        nodes(kubelet, "/dev/nvidiactl", "/dev/nvidia0"),
        static_pod(kubelet, pod_manifest("seed000", ["sh", "-c", "ls /dev"], gpus=1)) as name,
    ):
        if node.engine == "crio":
            pod = kubelet.wait_for(name, finished)
            assert phase(pod) == "Succeeded", pod["status"]
            assert not {"nvidiactl", "nvidia0"} & listed(kubelet.container_log(name))
            assert kubelet.engine is not None
            assert "nvidiactl" not in kubelet.engine.log() + kubelet.log()
            message = ""
        else:
            pod = kubelet.wait_for(name, lambda pod: waiting(pod)[0] == "CreateContainerError")
            message = waiting(pod)[1]
            assert message.startswith('failed to generate container "'), message
            assert message.endswith(f" spec: failed to generate spec: {LSTAT}"), message
        allocated = kubelet.calls("Allocate")[-1]["response"]["container_responses"][0]
        assert [spec["host_path"] for spec in allocated["devices"]] == [
            f"{DRIVER_DEV}/nvidiactl",
            f"{DRIVER_DEV}/nvidia0",
        ]
        # The kubelet's own checkpoint now holds the plugin's answer: doctor sees seed 000 from the plugin's side,
        # `why` names the plugin that handed the path out, and lint --node predicts the next such pod.
        check = doctor_check(kubelet, "device-plugins")
        assert check["status"] == "error", check
        assert f"{DRIVER_DEV}/nvidiactl" in " ".join(check["evidence"])
        if node.engine != "crio":
            causes = why(kubelet, message)
            assert causes["CRI002"]["holds"] and causes["device-plugins"]["holds"], causes
        second = pod_manifest("seed000-again", ["sh", "-c", "ls /dev"], gpus=1)
        container, findings = predicted(kubelet, second, tmp_path)
        expected = "runs-without-gpu" if node.engine == "crio" else "refused"
        assert container["verdict"] == expected, container["reasons"]
        missing = [finding for finding in findings if finding["code"] == "CRI002"]
        assert missing and all(finding["line"] is None or finding["line"] > 0 for finding in missing), findings
        assert ("cri-o skips the device" if node.engine == "crio" else "containerd refuses") in missing[0]["message"]
        with static_pod(kubelet, second) as again:
            if node.engine == "crio":
                assert phase(kubelet.wait_for(again, finished)) == "Succeeded"
                assert not {"nvidiactl", "nvidia0"} & listed(kubelet.container_log(again))
            else:
                kubelet.wait_for(again, lambda pod: waiting(pod)[0] == "CreateContainerError")


def test_seed_003_a_stray_device_node_on_the_host(node: Node, tmp_path: Path) -> None:
    kubelet = node.kubelet
    kubelet.set_plugin_answer({"*": {"devices": [device("/dev/nvidia0", f"{DRIVER_DEV}/nvidia0")]}})
    manifest = pod_manifest("seed003", ["sh", "-c", "ls /dev"], gpus=1, privileged=True)
    with nodes(kubelet, f"{DRIVER_DEV}/nvidia0", "/dev/nvidia0"), static_pod(kubelet, manifest) as name:
        if node.engine == "crio":
            pod = kubelet.wait_for(name, lambda pod: waiting(pod)[0] == "CreateContainerError")
            assert waiting(pod)[1] == COLLISION
            # The fake node holds device nodes and no driver: the check cannot say where the driver is, but `why`
            # knows the text and names what decides it.
            causes = why(kubelet, COLLISION)
            assert {"stray-device-nodes", "NODE002"} <= set(causes), causes
        else:
            pod = kubelet.wait_for(name, finished)
            assert phase(pod) == "Succeeded", pod["status"]
            assert "nvidia0" in listed(kubelet.container_log(name))
        # The next such pod, judged before it is created: cri-o refuses it (CRI001), containerd gives it every
        # device of the host.
        container, findings = predicted(kubelet, {**manifest, "metadata": {"name": "seed003-again"}}, tmp_path)
        if node.engine == "crio":
            assert container["verdict"] == "refused", container["reasons"]
            assert [f["code"] for f in findings if f["code"] == "CRI001"] == ["CRI001"], findings
            assert COLLISION in " ".join(container["reasons"])
        else:
            assert container["verdict"] == "runs-with-every-gpu", container["reasons"]


def test_without_a_plugin_a_gpu_pod_runs_without_a_device(node: Node) -> None:
    pod = node.unplugged
    assert phase(pod) == "Succeeded", pod["status"]
    assert container_status(pod)["state"]["terminated"]["exitCode"] == 0
    assert not {name for name in listed(node.unplugged_output) if name.startswith("nvidia")}
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {RESOURCE: "1"}
    assert pod["status"]["qosClass"] == "BestEffort"
    assert "nvidia" not in node.unplugged_log
    assert pod["metadata"]["uid"] not in str(node.kubelet.checkpoint())


def test_the_checkpoint_holds_what_the_plugin_answered(node: Node) -> None:
    kubelet = node.kubelet
    answer = {
        "envs": {"NVIDIA_VISIBLE_DEVICES": "GPU-fake", "FROM_PLUGIN": "1"},
        "mounts": [{"container_path": "/opt/driver", "host_path": "/run/nvidia/driver", "read_only": True}],
        "devices": [device("/dev/nvidia0", f"{DRIVER_DEV}/nvidia0")],
        "annotations": {"example.com/allocated": "yes"},
        "cdi_devices": [{"name": "example.com/gpu=0"}],
    }
    kubelet.set_plugin_answer({"*": answer})
    command = ["sh", "-c", "echo FROM_PLUGIN=$FROM_PLUGIN FROM_CDI=$FROM_CDI; ls /dev"]
    with nodes(kubelet, f"{DRIVER_DEV}/nvidia0"), static_pod(kubelet, pod_manifest("ckpt", command, gpus=1)) as name:
        pod = kubelet.wait_for(name, finished)
        assert phase(pod) == "Succeeded", pod["status"]
        output = kubelet.container_log(name)
        assert "FROM_PLUGIN=1 FROM_CDI=1" in output
        assert "nvidia0" in listed(output)
        uid = pod["metadata"]["uid"]
        checkpoint = (kubelet.host_root / "var/lib/kubelet/device-plugins/kubelet_internal_checkpoint").read_text()
        entries = [entry for entry in kubelet.checkpoint()["Data"]["PodDeviceEntries"] if entry["PodUID"] == uid]
        assert uid in checkpoint
    assert len(entries) == 1, entries
    entry = entries[0]
    assert (entry["ContainerName"], entry["ResourceName"]) == ("main", RESOURCE)
    allocated = [call["request"] for call in kubelet.calls("Allocate")][-1]["container_requests"][0]["devices_ids"]
    assert sorted(device for ids in entry["DeviceIDs"].values() for device in ids) == sorted(allocated)
    decoded = CONTAINER_ALLOCATE_RESPONSE.decode(base64.b64decode(entry["AllocResp"]))
    assert decoded == answer
    assert [found["response"] for found in kubelet.allocations(uid)] == [answer]


def test_the_plugin_registers_again_when_the_kubelet_restarts(node: Node) -> None:
    kubelet = node.kubelet
    registered = len(kubelet.calls("Register"))
    kubelet.restart()
    assert len(kubelet.calls("Register")) == registered + 1
    kubelet.set_plugin_answer({"*": {"envs": {"FROM_PLUGIN": "again"}}})
    with static_pod(kubelet, pod_manifest("again", ["sh", "-c", "echo $FROM_PLUGIN"], gpus=1)) as name:
        pod = kubelet.wait_for(name, finished)
        assert phase(pod) == "Succeeded", pod["status"]
        assert kubelet.container_log(name) == "again\n"


def _machine() -> dict[str, Any]:
    """What of the machine a kubelet could leave changed: the mount table, the cgroup tree, the sysctls the kubelet
    writes. Other tests' daemons may come and go meanwhile: their mounts under /tmp and their cgroups (nvoh-*) are
    left out, and the test looks for its own by name."""
    with open("/proc/self/mountinfo", encoding="utf-8") as table:
        mounts = sorted(" ".join(line.split()[3:5]) for line in table if not line.split()[4].startswith("/tmp/"))
    tree = set()
    for top in cgroup_dirs("/"):
        for current, directories, _ in os.walk(top):
            directories[:] = [name for name in directories if not name.startswith("nvoh-")]
            tree.add(current)
    sysctls = {name: (Path("/proc/sys") / name).read_text() for name in KUBELET_SYSCTLS}
    return {"mounts": mounts, "cgroups": tree, "sysctls": sysctls}


@pytest.mark.parametrize("engine", ["crio", "containerd-2.1"])
def test_close_leaves_nothing_behind(engine: str) -> None:
    before = _machine()
    kubelet = Kubelet.start(engine, node_setup=_cdi_spec, plugin_answer={"*": {"envs": {"FROM_PLUGIN": "1"}}})
    closed = False
    try:
        assert kubelet.engine is not None and kubelet.namespace is not None
        ours = (str(kubelet.workdir), str(kubelet.engine.workdir))
        cgroups = [kubelet.cgroup_root, kubelet.engine.cgroup_parent]
        name = kubelet.add_static_pod(pod_manifest("busy", ["sleep", "600"], gpus=1))
        kubelet.wait_for(name, lambda pod: "running" in container_status(pod).get("state", {}))
        assert kubelet.crictl("ps", "--quiet").stdout.strip() == kubelet.container_id(name)
        assert kubelet.exec(name, "sh", "-c", "echo $FROM_PLUGIN").stdout == "1\n"
        assert cgroup_dirs(f"{kubelet.cgroup_root}/kubepods")
        kubelet.close()
        closed = True
        after = _machine()
        assert after == before
        with open("/proc/self/mountinfo", encoding="utf-8") as table:
            assert not [line for line in table if any(directory in line for directory in ours)]
        assert not [directory for parent in cgroups for directory in cgroup_dirs(parent)]
        assert not processes_in_namespace(kubelet.namespace)
        assert not [directory for directory in ours if Path(directory).exists()]
    finally:
        if not closed:
            kubelet.close()
