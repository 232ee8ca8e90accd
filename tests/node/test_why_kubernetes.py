"""`why TEXT` for the Kubernetes layer's errors on fake node roots: each text on a node where the cause the node can
decide holds and on one where it does not, and the manifest pattern each points at."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FakeHost
from tests.node.fakenodes import host_driver
from tests.node.test_why import (
    CONTAINERD_NVIDIA,
    CONTAINERD_V2,
    DPKG,
    containerd_node,
    crio_node,
    signature_and_verdicts,
    verdicts,
    why,
)

pytestmark = pytest.mark.root

HOOKS = "/usr/share/containers/oci/hooks.d"
NVIDIA_HOOK = (
    '{"version": "1.0.0", "hook": {"path": "/usr/local/nvidia/toolkit/nvidia-container-runtime-hook", "args": '
    '["nvidia-container-runtime-hook", "prestart"]}, "when": {"always": true}, "stages": ["prestart"]}'
)
CONTAINERD_DEFAULT_NVIDIA = (
    CONTAINERD_V2 + '[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "nvidia"\n'
)
CONTAINERD_NVIDIA_LEGACY = CONTAINERD_NVIDIA.replace("runtimes.nvidia", "runtimes.nvidia-legacy").replace(
    "/usr/bin/nvidia-container-runtime", "/usr/bin/nvidia-container-runtime.legacy"
)


def cause(report: dict[str, Any], code: str) -> dict[str, Any]:
    return next(found for found in report["causes"] if found["code"] == code)


def test_a_handler_the_engine_lacks_points_at_the_runtimeclass(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    text = 'failed to get sandbox runtime: no runtime for "nvidia" is configured'
    # NVIDIA's runtime is registered under another name: the RuntimeClass should name that one.
    legacy = containerd_node(fake_host, CONTAINERD_V2 + CONTAINERD_NVIDIA_LEGACY)
    status, report = why(capsys, legacy, text)
    assert status == 0
    assert signature_and_verdicts(report) == (
        ["containerd-runtime-handler-unknown"],
        {"engines": True, "RuntimeClass": True, "CTD117": False},
    )
    assert "handler is nvidia-legacy" in cause(report, "RuntimeClass")["fix"]
    assert any("kubectl get runtimeclass" in line for line in report["undecided"])

    # cri-o in hook mode (gpu-operator #1298): NVIDIA's hook serves every container, no handler is needed.
    hooked = crio_node(FakeHost(tmp_path / "hooked")).text(f"{HOOKS}/oci-nvidia-hook.json", NVIDIA_HOOK)
    crio_text = "failed to find runtime handler nvidia from runtime list map[crun:0xc000 runc:0xc001]"
    status, report = why(capsys, hooked, crio_text)
    assert status == 0 and verdicts(report)["RuntimeClass"] is True
    assert cause(report, "RuntimeClass")["fix"].startswith("drop runtimeClassName from the pod")
    assert "oci-nvidia-hook.json" in cause(report, "RuntimeClass")["fix"]


def test_runtimeclass_not_found_and_whether_creating_it_suffices(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    admission = 'Error creating: pods "gpu-7d9f-" is forbidden: pod rejected: RuntimeClass "nvidia" not found'
    ready = containerd_node(fake_host, CONTAINERD_V2 + CONTAINERD_NVIDIA)
    status, report = why(capsys, ready, admission)
    assert status == 0
    assert signature_and_verdicts(report) == (["runtimeclass-not-found"], {"RuntimeClass": True, "engines": False})
    assert "the API server's RuntimeClass admission" in cause(report, "RuntimeClass")["summary"]
    assert "is all this node needs" in cause(report, "engines")["summary"]

    # kubelet's own words, escaped inside its log line; this node has no handler nvidia at all.
    kubelet = (
        'E0301 10:00:00.000000    4242 pod_workers.go:1301] "Error syncing pod, skipping" err="failed to '
        '\\"CreatePodSandbox\\" for \\"gpu_default(1)\\" with CreatePodSandboxError: \\"Failed to create sandbox for '
        'pod \\\\\\"gpu_default(1)\\\\\\": runtimeclass.node.k8s.io \\\\\\"nvidia\\\\\\" not found\\""'
    )
    bare = containerd_node(FakeHost(tmp_path / "bare"))
    status, report = why(capsys, bare, kubelet)
    assert status == 0
    assert signature_and_verdicts(report) == (["runtimeclass-not-found"], {"RuntimeClass": True, "engines": True})
    assert "alone is not enough" in cause(report, "engines")["summary"]
    assert "nvidia-oci-hook configure containerd" in cause(report, "engines")["fix"]
    assert any("CLASS:.spec.runtimeClassName" in line for line in report["undecided"])


def test_device_plugin_without_nvml(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "E0301 10:00:00.000000       1 factory.go:118] Incompatible strategy detected auto"
    # containerd's default is runc while NVIDIA's runtime is the handler nvidia: the plugin's pod needs the class.
    status, report = why(capsys, containerd_node(fake_host, CONTAINERD_V2 + CONTAINERD_NVIDIA), text)
    assert status == 0
    assert signature_and_verdicts(report) == (
        ["device-plugin-no-platform"],
        {"default-runtime": True, "driver": False},
    )
    assert "handler: nvidia" in cause(report, "default-runtime")["fix"]
    assert any("runtimeClassName" in line for line in report["undecided"])

    default = containerd_node(FakeHost(tmp_path / "default"), CONTAINERD_DEFAULT_NVIDIA + CONTAINERD_NVIDIA)
    status, report = why(capsys, default, text)
    assert status == 1 and verdicts(report) == {"default-runtime": False, "driver": False}

    hooked = crio_node(FakeHost(tmp_path / "hooked")).text(f"{HOOKS}/oci-nvidia-hook.json", NVIDIA_HOOK)
    status, report = why(capsys, hooked, "Unsupported platform detected; defaulting to nvml")
    assert status == 1 and verdicts(report) == {"default-runtime": False, "driver": False}

    # No driver at all: nothing to find, whatever the runtime.
    bare = FakeHost(tmp_path / "bare").text(
        "/etc/containerd/config.toml", CONTAINERD_DEFAULT_NVIDIA + CONTAINERD_NVIDIA
    )
    bare.text("/var/lib/dpkg/status", DPKG.format("containerd", "1.7.24~ds1-6"))
    status, report = why(capsys, bare, "Incompatible platform detected")
    assert status == 0 and verdicts(report) == {"driver": True, "default-runtime": False}
    assert "no NVIDIA driver on this node" in cause(report, "driver")["summary"]


TOOLKIT_CONFIG = "/etc/nvidia-container-runtime/config.toml"


@pytest.mark.parametrize(
    "text",
    [
        "nvidia-container-cli: insufficient privileges to read device list from NVIDIA_VISIBLE_DEVICES envvar",
        "Ignoring devices specified in NVIDIA_VISIBLE_DEVICES (privileged=false, "
        "accept-nvidia-visible-devices-envvar-when-unprivileged=false)",
        "Ignoring devices requested by environment variable(s) in unprivileged container: [NVIDIA_VISIBLE_DEVICES]",
    ],
    ids=["toolkit-1.4", "toolkit-1.17", "toolkit-1.18"],
)
def test_nvidia_visible_devices_refused_unprivileged(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    refusing = host_driver(fake_host).text(
        TOOLKIT_CONFIG,
        "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n"
        "accept-nvidia-visible-devices-as-volume-mounts = true\n",
    )
    status, report = why(capsys, refusing, text)
    assert status == 0
    assert signature_and_verdicts(report) == (
        ["nvidia-envvar-unprivileged"],
        {"toolkit-config": True, "pod-env": None},
    )
    assert cause(report, "toolkit-config")["summary"].startswith(f"{TOOLKIT_CONFIG} sets accept-nvidia-visible")
    assert "nvidia.com/gpu" in cause(report, "pod-env")["fix"]

    accepting = host_driver(FakeHost(tmp_path / "accepting")).text(TOOLKIT_CONFIG, "disable-require = false\n")
    status, report = why(capsys, accepting, text)
    assert status == 1 and verdicts(report) == {"pod-env": None, "toolkit-config": False}

    status, report = why(capsys, host_driver(FakeHost(tmp_path / "absent")), text)
    assert status == 1 and verdicts(report) == {"toolkit-config": None, "pod-env": None}
    assert cause(report, "toolkit-config")["summary"].startswith("no NVIDIA toolkit config.toml on this node")


PLUGINS = "/var/lib/kubelet/device-plugins"


def checkpoint(*entries: tuple[str, str, list[str]], registered: int = 2) -> str:
    return json.dumps(
        {
            "Data": {
                "PodDeviceEntries": [
                    {
                        "PodUID": pod,
                        "ContainerName": container,
                        "ResourceName": "nvidia.com/gpu",
                        "DeviceIDs": {"-1": devices},
                        "AllocResp": "",
                    }
                    for pod, container, devices in entries
                ],
                "RegisteredDevices": {"nvidia.com/gpu": [f"GPU-{index}" for index in range(registered)]},
            },
            "Checksum": 0,
        }
    )


def test_unexpected_admission_error(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    described = (
        "Status:  Failed\nReason:  UnexpectedAdmissionError\nMessage: Pod was rejected: Allocate failed due to "
        "requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected"
    )
    # After a kubelet restart, before the plugin registered again: the init container's GPU is the app's.
    restarted = host_driver(fake_host).file(f"{PLUGINS}/kubelet.sock")
    restarted.text(
        f"{PLUGINS}/kubelet_internal_checkpoint", checkpoint(("u1", "warmup", ["GPU-0"]), ("u1", "train", ["GPU-0"]))
    )
    status, report = why(capsys, restarted, described)
    assert status == 0
    assert signature_and_verdicts(report) == (
        ["device-allocate-failed"],
        {"init-container-devices": True, "device-plugin": True, "device-count": True},
    )
    assert cause(report, "init-container-devices")["evidence"] == [
        "pod u1: train and warmup hold the same nvidia.com/gpu device(s) GPU-0"
    ]
    assert (
        cause(report, "device-count")["summary"] == "the container asked for 1 nvidia.com/gpu while kubelet had 0 free"
    )
    assert any("initContainers" in line for line in report["undecided"])

    # The plugin serves nvidia.com/gpu and no pod shares a device: the node shows none of the causes now.
    serving = host_driver(FakeHost(tmp_path / "serving")).file(f"{PLUGINS}/kubelet.sock")
    serving.file(f"{PLUGINS}/nvidia-gpu.sock")
    serving.text(f"{PLUGINS}/kubelet_internal_checkpoint", checkpoint(("u2", "main", ["GPU-1"])))
    unhealthy = (
        "Warning  UnexpectedAdmissionError  84s  kubelet  Allocate failed due to no healthy devices present; "
        "cannot allocate unhealthy devices nvidia.com/gpu, which is unexpected"
    )
    status, report = why(capsys, serving, unhealthy)
    assert status == 1
    assert verdicts(report) == {"init-container-devices": None, "device-plugin": False}
    assert "nvidia-gpu.sock" in cause(report, "device-plugin")["summary"]
    status, report = why(capsys, restarted, unhealthy)
    assert status == 0 and verdicts(report)["device-plugin"] is True


def test_the_bare_admission_reason_is_recognised_once(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    host_driver(fake_host)
    status, report = why(capsys, fake_host, "gpu-pod   0/1   UnexpectedAdmissionError   0   12s")
    assert [match["text"] for match in report["matches"]] == ["UnexpectedAdmissionError"]
    assert status == 1 and verdicts(report) == {
        "init-container-devices": None,
        "device-plugin": None,
        "device-count": None,
    }
