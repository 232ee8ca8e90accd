"""The kubelet's device plugins as the node records them (its checkpoint, the plugin sockets, the static pods),
and doctor's `device-plugins` check on fake node roots.

The checkpoint's answers are serialized by google.protobuf (tests/formats/test_protowire.py builds the message
from a descriptor), not by the decoder under test."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path
from typing import Any, Optional

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.kubernetes.deviceplugin import CHECKPOINT, DEVICE_PLUGIN_DIR
from nvidia_oci_hook.node.checks.base import Check
from nvidia_oci_hook.node.checks.device_plugins import device_plugins_check
from nvidia_oci_hook.node.device_plugins import (
    AllocatedDevices,
    DeviceSpec,
    Mount,
    kubelet_pods,
    plugin_socket,
    read_device_plugins,
)
from nvidia_oci_hook.node.driver import resolve_driver_root
from tests.formats.test_protowire import google_encode
from tests.helpers import FakeHost
from tests.node.fakenodes import host_driver, seed_000
from tests.node.test_cdi_resolve import containerd_node, spec

POD_A = "6f1c2a44-3b1e-4f51-9a5e-0c8d2f6b7a10"
POD_B = "0d9e8c7b-6a5f-4e3d-2c1b-0a9f8e7d6c5b"
POD_C = "c3c3c3c3-1111-4222-8333-944444444444"
DRIVER_DEV = "/run/nvidia/driver/dev"


def answer(devices: tuple[tuple[str, str], ...] = (), cdi: tuple[str, ...] = (), **extra: Any) -> bytes:
    """A ContainerAllocateResponse as the NVIDIA device plugin writes one: (container path, host path) devices."""
    value = {
        "devices": [{"container_path": c, "host_path": h, "permissions": "rw"} for c, h in devices],
        "cdi_devices": [{"name": name} for name in cdi],
        "envs": {"NVIDIA_VISIBLE_DEVICES": "GPU-a"},
        **extra,
    }
    return google_encode(value)


def gpu_devices(root: str = "/dev") -> tuple[tuple[str, str], ...]:
    return (("/dev/nvidiactl", f"{root}/nvidiactl"), ("/dev/nvidia0", f"{root}/nvidia0"))


def entry(
    uid: str, raw: Any, container: str = "cuda", resource: str = "nvidia.com/gpu", ids: Any = None
) -> dict[str, Any]:
    return {
        "PodUID": uid,
        "ContainerName": container,
        "ResourceName": resource,
        "DeviceIDs": {"-1": ["GPU-a"]} if ids is None else ids,
        "AllocResp": base64.b64encode(raw).decode() if isinstance(raw, bytes) else raw,
    }


def checkpoint(host: FakeHost, *entries: dict[str, Any], registered: Optional[dict[str, Any]] = None) -> FakeHost:
    data = {
        "Data": {
            "PodDeviceEntries": list(entries),
            "RegisteredDevices": {"nvidia.com/gpu": ["GPU-a", "GPU-b"]} if registered is None else registered,
        },
        "Checksum": 1234567,
    }
    host.text(CHECKPOINT, json.dumps(data, separators=(",", ":")))
    return host


def socket(host: FakeHost, name: str) -> FakeHost:
    path = host.root / DEVICE_PLUGIN_DIR.lstrip("/") / name
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(path, stat.S_IFSOCK | 0o600)
    return host


def plugin_dir(host: FakeHost, *sockets: str) -> FakeHost:
    host.directory(DEVICE_PLUGIN_DIR)
    for name in ("kubelet.sock", *sockets):
        socket(host, name)
    return host


def pod(host: FakeHost, uid: str, mtime: Optional[float] = None) -> FakeHost:
    host.directory(f"/var/lib/kubelet/pods/{uid}")
    if mtime is not None:
        os.utime(host.root / f"var/lib/kubelet/pods/{uid}", (mtime, mtime))
    return host


def check(host: FakeHost, settings: Optional[Settings] = None) -> Check:
    view = HostView(str(host.root))
    settings = settings or Settings()
    return device_plugins_check(view, resolve_driver_root(view, settings.driver_roots), settings)


def doctor(host: FakeHost, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    status = main(["doctor", "--host-root", str(host.root), "--check", "device-plugins", *extra])
    out, err = capsys.readouterr()
    assert err == "", err
    return status, out


STATIC_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: gpu-burn
  namespace: kube-system
spec:
  containers:
  - name: burn
    image: burn:1
    resources:
      limits:
        nvidia.com/gpu: 1
"""


# --- reading -------------------------------------------------------------------------------------------------


def test_the_checkpoint_is_read_as_the_kubelet_wrote_it(fake_host: FakeHost) -> None:
    raw = answer(gpu_devices(DRIVER_DEV), cdi=("nvidia.com/gpu=0",),
                 mounts=[{"container_path": "/usr/bin/nvidia-smi", "host_path": "/usr/bin/nvidia-smi",
                          "read_only": True}],
                 annotations={"cdi.k8s.io/nvidia-device-plugin_x": "nvidia.com/gpu=1"})  # fmt: skip
    plugin_dir(fake_host, "nvidia-gpu.sock").directory(f"{DEVICE_PLUGIN_DIR}/not-a-socket")
    fake_host.file(f"{DEVICE_PLUGIN_DIR}/plain-file.sock")
    checkpoint(fake_host, entry(POD_A, raw, ids={"1": ["GPU-c"], "0": ["GPU-b"], "-1": ["GPU-a"]}))
    plugins = read_device_plugins(HostView(str(fake_host.root)))
    assert plugins.directory_found and plugins.checkpoint_found and plugins.checkpoint_problem is None
    assert plugins.kubelet_socket and plugins.sockets == ("nvidia-gpu.sock",)
    assert dict(plugins.registered) == {"nvidia.com/gpu": ("GPU-a", "GPU-b")}
    assert not plugins.old_shape
    (allocation,) = plugins.allocations
    assert (allocation.pod_uid, allocation.container, allocation.resource) == (POD_A, "cuda", "nvidia.com/gpu")
    assert allocation.device_ids == ("GPU-a", "GPU-b", "GPU-c"), "by NUMA node, -1 first"
    assert allocation.answer == AllocatedDevices(
        {"NVIDIA_VISIBLE_DEVICES": "GPU-a"},
        (Mount("/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi", True),),
        (DeviceSpec("/dev/nvidiactl", f"{DRIVER_DEV}/nvidiactl", "rw"),
         DeviceSpec("/dev/nvidia0", f"{DRIVER_DEV}/nvidia0", "rw")),
        {"cdi.k8s.io/nvidia-device-plugin_x": "nvidia.com/gpu=1"},
        ("nvidia.com/gpu=0",),
    )  # fmt: skip
    assert plugins.for_pod(POD_A) == [allocation] and plugins.for_pod(POD_B) == []
    assert plugins.is_registered("nvidia.com/gpu") and not plugins.is_registered("nvidia.com/mig-1g.10gb")


def test_answers_are_ordered_by_their_pod_s_directory_newest_last(fake_host: FakeHost) -> None:
    plugin_dir(fake_host)
    checkpoint(
        fake_host,
        entry(POD_B, answer(gpu_devices()), container="new"),
        entry(POD_C, answer(gpu_devices()), container="gone"),
        entry(POD_A, answer(gpu_devices()), container="old"),
        entry(POD_A, answer(), container="old", resource="example.com/other"),
    )
    pod(fake_host, POD_A, 1_700_000_000)
    pod(fake_host, POD_B, 1_800_000_000)
    plugins = read_device_plugins(HostView(str(fake_host.root)))
    assert [a.container for a in plugins.answers_for("nvidia.com/gpu")] == ["gone", "old", "new"]
    assert [a.resource for a in plugins.for_pod(POD_A)] == ["nvidia.com/gpu", "example.com/other"]


def test_a_sock_name_is_a_plugin_s_socket_only_when_it_is_one(fake_host: FakeHost) -> None:
    assert plugin_socket("nvidia.com/gpu") == "nvidia-gpu.sock"
    assert plugin_socket("nvidia.com/mig-1g.10gb") == "nvidia-mig-1g.10gb.sock"
    fake_host.file(f"{DEVICE_PLUGIN_DIR}/nvidia-gpu.sock").file(f"{DEVICE_PLUGIN_DIR}/kubelet.sock")
    plugins = read_device_plugins(HostView(str(fake_host.root)))
    assert (plugins.sockets, plugins.kubelet_socket, plugins.checkpoint_found) == ((), False, False)


def test_the_old_shape_of_kubelets_up_to_1_19(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    plugin_dir(fake_host, "nvidia-gpu.sock")
    host_driver(fake_host)
    checkpoint(fake_host, entry(POD_A, answer(gpu_devices()), ids=["GPU-a", "GPU-b"]))
    pod(fake_host, POD_A)
    plugins = read_device_plugins(HostView(str(fake_host.root)))
    assert plugins.old_shape and plugins.checkpoint_problem is None
    assert plugins.allocations[0].device_ids == ("GPU-a", "GPU-b")
    found = check(fake_host)
    assert found.status == "ok", found
    assert any(
        "kubelets 1.23 to 1.30 read this shape (kubernetes #102882), 1.31 and later do not" in line
        for line in found.evidence
    )


def test_kubelet_pods_from_directories_running_containers_and_static_pods(fake_host: FakeHost) -> None:
    pod(fake_host, POD_A)
    # A cri-o container (the kubelet's labels copied into the annotations) and a containerd one.
    fake_host.text(
        "/run/runc/aaa/state.json",
        json.dumps({"id": "aaa", "init_process_pid": 10, "config": {"labels": ["bundle=/run/containers/aaa"]}}),
    )
    fake_host.text("/run/containers/aaa/config.json", json.dumps({"annotations": {"io.kubernetes.pod.uid": POD_B}}))
    fake_host.text(
        "/run/containerd/runc/k8s.io/bbb/state.json",
        json.dumps({"id": "bbb", "init_process_pid": 11, "config": {"labels": ["bundle=/run/containerd/bbb"]}}),
    )
    fake_host.text("/run/containerd/bbb/config.json",
                   json.dumps({"annotations": {"io.kubernetes.cri.sandbox-uid": POD_C}}))  # fmt: skip
    # The running kubelet names its configuration relative to its working directory; a drop-in overrides it.
    fake_host.text("/proc/42/cmdline", "/usr/bin/kubelet\0--config=kubelet.yaml\0--config-dir=/etc/kubelet.d\0")
    fake_host.symlink("/proc/42/cwd", "/etc/kubernetes")
    fake_host.text("/etc/kubernetes/kubelet.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\n"
                   "kind: KubeletConfiguration\nstaticPodPath: manifests\n")  # fmt: skip
    fake_host.text("/etc/kubernetes/manifests/burn.yaml", STATIC_POD)
    fake_host.text("/etc/kubernetes/manifests/.hidden.yaml", STATIC_POD.replace("gpu-burn", "hidden"))
    fake_host.text("/etc/kubernetes/manifests/sub/deeper.yaml", STATIC_POD.replace("gpu-burn", "deeper"))
    pods = kubelet_pods(HostView(str(fake_host.root)))
    assert pods.kubelet is not None and pods.kubelet.config == "/etc/kubernetes/kubelet.yaml"
    assert pods.pods_dir_found and pods.directories == {POD_A} and pods.running == {POD_B, POD_C}
    assert pods.known(POD_A) and pods.known(POD_C) and not pods.known("other") and pods.judged
    assert (pods.static_pod_path, pods.static_source) == (
        "/etc/kubernetes/manifests",
        "staticPodPath in /etc/kubernetes/kubelet.yaml",
    )
    assert [(p.label, p.requests) for p in pods.static_pods] == [
        ("Pod kube-system/gpu-burn", (("burn", "nvidia.com/gpu"),))
    ]
    fake_host.text("/etc/kubelet.d/10-static.conf", "apiVersion: kubelet.config.k8s.io/v1beta1\n"
                   "kind: KubeletConfiguration\nstaticPodPath: /srv/static\n")  # fmt: skip
    pods = kubelet_pods(HostView(str(fake_host.root)))
    assert pods.static_pod_path == "/srv/static" and pods.static_pods == ()
    assert pods.problems == ("/srv/static: the static pod path does not exist (staticPodPath in "
                             "/etc/kubelet.d/10-static.conf)",)  # fmt: skip


def test_the_pod_manifest_path_flag_wins_and_the_default_config(fake_host: FakeHost) -> None:
    fake_host.text("/var/lib/kubelet/config.yaml", "kind: KubeletConfiguration\nstaticPodPath: /etc/static\n")
    pods = kubelet_pods(HostView(str(fake_host.root)))
    assert (pods.static_pod_path, pods.static_source) == (
        "/etc/static",
        "staticPodPath in /var/lib/kubelet/config.yaml",
    )
    assert not pods.judged, "no pods directory, no running container"
    fake_host.text("/proc/7/cmdline", "kubelet\0--pod-manifest-path\0/srv/pods.yaml\0--root-dir=/data/kubelet\0")
    fake_host.text("/srv/pods.yaml", STATIC_POD)
    pod(fake_host, POD_A)  # under the default root: not this kubelet's
    fake_host.directory(f"/data/kubelet/pods/{POD_B}")
    pods = kubelet_pods(HostView(str(fake_host.root)))
    assert (
        pods.static_pod_path == "/srv/pods.yaml" and pods.static_source == "--pod-manifest-path of the kubelet (pid 7)"
    )
    assert len(pods.static_pods) == 1 and pods.directories == {POD_B} and pods.pods_dir == "/data/kubelet/pods"


def test_an_unreadable_kubelet_configuration_is_a_problem_not_an_error(fake_host: FakeHost) -> None:
    fake_host.text("/var/lib/kubelet/config.yaml", "kind: [unclosed\n")
    pods = kubelet_pods(HostView(str(fake_host.root)))
    assert not pods.static_read and pods.static_pod_path is None
    assert pods.problems[0].startswith("/var/lib/kubelet/config.yaml: the kubelet's configuration cannot be read")


# --- doctor's check --------------------------------------------------------------------------------------------


@pytest.mark.root
def test_seed_000_from_the_plugin_s_side(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_000(fake_host)
    plugin_dir(fake_host, "nvidia-gpu.sock")
    # NVIDIA's plugin answering for two GPUs repeats the control node: it is named once.
    twice = (*gpu_devices(DRIVER_DEV), ("/dev/nvidiactl", f"{DRIVER_DEV}/nvidiactl"))
    checkpoint(fake_host, entry(POD_A, answer(twice)))
    pod(fake_host, POD_A)
    found = check(fake_host)
    assert found.status == "error"
    assert found.summary.startswith(
        f"the device plugins hand out device paths this node does not have ({DRIVER_DEV}/nvidiactl, to 1 container)"
    )
    (line,) = found.evidence
    assert line.startswith(
        f"pod {POD_A} container cuda (nvidia.com/gpu): device {DRIVER_DEV}/nvidiactl (at /dev/nvidiactl), "
        f"{DRIVER_DEV}/nvidia0 (at /dev/nvidia0) do not exist on this node"
    )
    assert f"containerd refuses the container (`lstat {DRIVER_DEV}/nvidiactl: no such file or directory`)" in line
    assert "cri-o starts it without the device, silently" in line
    assert line.endswith("the node has /dev/nvidiactl, /dev/nvidia0: the driver is under /, not /run/nvidia/driver")
    assert found.fix is not None and "/run/nvidia/validations" in found.fix
    assert found.counts == {"allocations": 1, "undecodable_allocations": 0, "allocations_missing_host_path": 1,
                            "unresolved_cdi_names": 0, "unregistered_resources": 0, "stale_allocations": 0}  # fmt: skip
    status, out = doctor(fake_host, capsys)
    assert status == 1 and out.startswith("[error] device-plugins: the device plugins hand out device paths")
    assert f"    fix: {found.fix}" in out


@pytest.mark.root
def test_a_healthy_node(fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]) -> None:
    host_driver(fake_host)
    plugin_dir(fake_host, "nvidia-gpu.sock")
    checkpoint(fake_host, entry(POD_A, answer(gpu_devices())), entry(POD_B, answer(gpu_devices()), container="b"))
    pod(fake_host, POD_A)
    pod(fake_host, POD_B)
    found = check(fake_host)
    assert (found.status, found.evidence) == ("ok", []), found
    assert found.summary == (
        "nvidia.com/gpu: plugin registered (2 devices), 2 allocations, every host path present and every CDI name "
        "resolved"
    )
    assert found.counts["allocations_missing_host_path"] == 0 and found.counts["stale_allocations"] == 0
    status, out = doctor(fake_host, capsys)
    assert status == 0 and out.startswith("[ok] device-plugins: nvidia.com/gpu: plugin registered")


def test_no_device_plugin_directory_is_unknown(fake_host: FakeHost) -> None:
    found = check(fake_host)
    assert found.status == "unknown" and found.counts == {}
    assert found.summary.startswith(f"no kubelet device-plugin directory ({DEVICE_PLUGIN_DIR})")


@pytest.mark.root
def test_a_cdi_name_no_spec_defines(fake_host: FakeHost, as_root: None) -> None:
    containerd_node(host_driver(fake_host)).text("/var/run/cdi/nvidia.yaml", spec())
    plugin_dir(fake_host, "nvidia-gpu.sock")
    checkpoint(
        fake_host,
        entry(POD_A, answer(cdi=("nvidia.com/gpu=0",))),
        entry(POD_B, answer(cdi=("nvidia.com/gpu=7",))),
        entry(POD_C, answer(annotations={"cdi.k8s.io/nvidia-device-plugin_c": "nvidia.com/gpu=all,nvidia.com/gpu=9"})),
    )
    for uid in (POD_A, POD_B, POD_C):
        pod(fake_host, uid)
    found = check(fake_host)
    assert found.status == "error", found
    assert found.counts["unresolved_cdi_names"] == 2
    assert found.summary.startswith("2 CDI device names the device plugins hand out do not resolve on this node "
                                    "(nvidia.com/gpu=7: no spec in /etc/cdi, /var/run/cdi defines it")  # fmt: skip
    assert [line.split(": ")[0:2] for line in found.evidence] == [
        [f"pod {POD_B} container cuda (nvidia.com/gpu)", "CDI device nvidia.com/gpu=7"],
        [f"pod {POD_C} container cuda (nvidia.com/gpu)", "CDI device nvidia.com/gpu=9"],
    ]
    assert "containerd 1.7.24" in found.evidence[0]
    assert "the engine: unresolvable CDI devices nvidia.com/gpu=7" in found.evidence[0]
    assert found.fix is not None and "nvidia-ctk cdi list" in found.fix


def test_a_cdi_name_with_no_engine_on_the_node(fake_host: FakeHost) -> None:
    plugin_dir(fake_host).text("/etc/cdi/nvidia.yaml", spec())
    checkpoint(fake_host, entry(POD_A, answer(cdi=("nvidia.com/gpu=0", "nvidia.com/gpu=3", "gpu3"))))
    pod(fake_host, POD_A)
    found = check(fake_host)
    assert found.status == "error" and found.counts["unresolved_cdi_names"] == 2
    evidence = "\n".join(found.evidence)
    assert "CDI device gpu3: the CDI library: 'gpu3' is not a qualified CDI device name" in evidence
    assert "CDI device nvidia.com/gpu=3: no CRI engine found; the CDI spec directories /etc/cdi, /var/run/cdi: " \
           "no spec defines it; the engine: unresolvable CDI devices nvidia.com/gpu=3" in evidence  # fmt: skip
    assert "nvidia.com/gpu=0" not in evidence


@pytest.mark.root
def test_allocations_of_pods_that_are_gone(fake_host: FakeHost, as_root: None) -> None:
    seed_000(fake_host)
    plugin_dir(fake_host, "nvidia-gpu.sock")
    checkpoint(fake_host, entry(POD_A, answer(gpu_devices())), entry(POD_B, answer(gpu_devices(DRIVER_DEV))),
               entry(POD_C, answer(gpu_devices())))  # fmt: skip
    pod(fake_host, POD_A)
    fake_host.text(
        "/run/runc/ccc/state.json",
        json.dumps({"id": "ccc", "init_process_pid": 10, "config": {"labels": ["bundle=/run/containers/ccc"]}}),
    )
    fake_host.text("/run/containers/ccc/config.json", json.dumps({"annotations": {"io.kubernetes.pod.uid": POD_C}}))
    found = check(fake_host)
    assert found.status == "warning", found
    assert found.counts["stale_allocations"] == 1 and found.counts["allocations_missing_host_path"] == 0
    (line,) = found.evidence
    assert line.startswith(f"pod {POD_B} container cuda (nvidia.com/gpu): the checkpoint still gives it GPU-a, and "
                           f"the pod is gone (no /var/lib/kubelet/pods/{POD_B}, no running container)")  # fmt: skip
    assert line.endswith(f"its answer named {DRIVER_DEV}/nvidiactl, which this node does not have")
    assert found.summary == "the checkpoint still gives devices to 1 container of pods that are gone"


@pytest.mark.root
def test_a_static_pod_asking_for_a_gpu_no_plugin_registered(fake_host: FakeHost, as_root: None) -> None:
    plugin_dir(fake_host)
    fake_host.text(
        "/var/lib/kubelet/config.yaml", "kind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/manifests\n"
    )
    fake_host.text("/etc/kubernetes/manifests/burn.yaml", STATIC_POD)
    found = check(fake_host)
    assert found.status == "warning", found
    assert found.counts["unregistered_resources"] == 1
    assert found.summary == (
        "static pods ask for nvidia.com/gpu, which no device plugin registered here: the kubelet runs them without "
        "the GPU"
    )
    assert found.evidence[0] == (
        "static Pod kube-system/gpu-burn (/etc/kubernetes/manifests/burn.yaml) container burn asks for nvidia.com/gpu, "
        f"and no device plugin registered it (no nvidia-gpu.sock in {DEVICE_PLUGIN_DIR}, not among the checkpoint's "
        "RegisteredDevices): the kubelet admits a static pod anyway and runs it without the GPU "
        "(pkg/kubelet/lifecycle/predicate.go)"
    )
    assert "counts" not in found.summary and found.fix is not None and "device plugin" in found.fix
    # Its twin: the plugin's socket is there.
    socket(fake_host, "nvidia-gpu.sock")
    found = check(fake_host)
    assert found.status == "ok" and found.counts["unregistered_resources"] == 0
    assert found.summary.startswith("nvidia.com/gpu: plugin socket present, 0 allocations")


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"{not json", "not JSON: "),
        (b"\xff\xfe", "not JSON: "),
        (b"[1, 2]", "not the kubelet's checkpoint: the JSON is list, not an object"),
        (b'{"Data": {"PodDeviceEntries": {}}}', "not the kubelet's checkpoint: Data.PodDeviceEntries is dict"),
        (b'{"Data": {"RegisteredDevices": {"nvidia.com/gpu": "GPU-a"}}}',
         "Data.RegisteredDevices[nvidia.com/gpu] is str, not a list"),
        (b"[" * 100_000, "not JSON: "),
    ],
    ids=["garbage", "not-utf8", "a-list", "entries-not-a-list", "ids-not-a-list", "nested-too-deep"],
)  # fmt: skip
def test_a_checkpoint_that_is_not_one(
    fake_host: FakeHost, capsys: pytest.CaptureFixture[str], content: bytes, problem: str
) -> None:
    plugin_dir(fake_host).text(CHECKPOINT, "")
    (fake_host.root / CHECKPOINT.lstrip("/")).write_bytes(content)
    plugins = read_device_plugins(HostView(str(fake_host.root)))
    assert plugins.checkpoint_problem is not None and problem in plugins.checkpoint_problem
    found = check(fake_host)
    assert found.status == "warning" and "allocations" not in found.counts
    assert found.evidence[0].startswith(f"{CHECKPOINT}: {plugins.checkpoint_problem}: the kubelet cannot read it")
    status, out = doctor(fake_host, capsys)
    assert status == 0 and out.startswith(
        "[warning] device-plugins: the kubelet's device-plugin checkpoint is unusable"
    )


def test_entries_whose_answer_does_not_decode(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    plugin_dir(fake_host)
    checkpoint(
        fake_host,
        entry(POD_A, "not base64!"),
        entry(POD_A, b"\x0a\x05\x0a\x01", container="truncated"),
        entry(POD_A, b"\x2a\x03\x0a\x01\xff", container="not-utf8"),
        entry(POD_A, answer(), container="fine"),
        entry(POD_A, None, container="null"),  # Go writes a nil []byte as null: an empty answer
        entry(POD_A, answer(), container="numa", ids={"x": ["GPU-a"]}),
    )
    pod(fake_host, POD_A)
    plugins = read_device_plugins(HostView(str(fake_host.root)))
    problems = {a.container: a.problem for a in plugins.allocations}
    assert problems["cuda"] is not None and problems["cuda"].startswith("its AllocResp is not base64")
    assert problems["truncated"] == (
        "its AllocResp is not a ContainerAllocateResponse (a length-delimited field runs past the end)"
    )
    assert problems["not-utf8"] is not None and "not UTF-8" in problems["not-utf8"]
    assert problems["fine"] is None and problems["null"] is None and "numa" not in problems
    assert plugins.checkpoint_problem == (
        "not the kubelet's checkpoint: Data.PodDeviceEntries[5].DeviceIDs has the NUMA node 'x', not an integer"
    )
    found = check(fake_host)
    assert found.status == "warning" and found.counts["undecodable_allocations"] == 3
    assert f"pod {POD_A} container truncated (nvidia.com/gpu): its AllocResp is not a ContainerAllocateResponse" \
           in "\n".join(found.evidence)  # fmt: skip
    status, out = doctor(fake_host, capsys)
    assert status == 0 and out.startswith("[warning] device-plugins: the kubelet's device-plugin checkpoint is")


def test_a_checkpoint_link_that_leaves_the_host_root_is_not_followed_out(fake_host: FakeHost, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"Data": {"PodDeviceEntries": [entry(POD_A, answer())]}}))
    plugin_dir(fake_host)
    for target in (str(outside), "../../../../../../../../../../" + str(outside).lstrip("/")):
        link = fake_host.root / CHECKPOINT.lstrip("/")
        if link.is_symlink():
            link.unlink()
        fake_host.symlink(CHECKPOINT, target)
        plugins = read_device_plugins(HostView(str(fake_host.root)))
        assert plugins.allocations == () and plugins.checkpoint_found
        assert plugins.checkpoint_problem is not None and plugins.checkpoint_problem.startswith(
            f"cannot be read: {CHECKPOINT}: cannot open: No such file or directory"
        ), plugins.checkpoint_problem
    # The same file inside the root, through a link that stays there, is read.
    fake_host.text("/srv/checkpoint.json", outside.read_text())
    (fake_host.root / CHECKPOINT.lstrip("/")).unlink()
    fake_host.symlink(CHECKPOINT, "/srv/checkpoint.json")
    assert [a.pod_uid for a in read_device_plugins(HostView(str(fake_host.root))).allocations] == [POD_A]
