"""A running GPU container that loses its device rules, found by `doctor` and given them back, under real runc and
under containerd through CRI, on this machine's cgroup v1 devices controller. Needs root, runc and containerd
(scripts/setup test installs them).

The container is given real NVIDIA nodes (c 195:0 and c 195:255) and no GPU is needed: where its cgroup allows
them, opening one gives ENXIO (no driver behind it); where the cgroup does not, EPERM, as on a node whose GPU
container lost access after a cgroup reload.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.gpu_access import gpu_access_check
from nvidia_oci_hook.node.containers import GivenDevice, probe_open, running_containers
from tests.e2e.bundles import base_config, bundle_rootfs, need, write_bundle
from tests.e2e.cri import CRIDaemon, run_pod_container

pytestmark = [pytest.mark.root, pytest.mark.runtime]

DEVICES_V1 = Path("/sys/fs/cgroup/devices")
NODES = [("/dev/nvidia0", 0), ("/dev/nvidiactl", 255)]


def _gpu_config(rootfs: Path, cgroup: str) -> dict[str, Any]:
    config = base_config(rootfs, "sleep 300")
    config["linux"]["devices"] = [
        {"path": path, "type": "c", "major": 195, "minor": minor, "fileMode": 0o666, "uid": 0, "gid": 0}
        for path, minor in NODES
    ]
    config["linux"]["resources"]["devices"] += [
        {"allow": True, "type": "c", "major": 195, "minor": minor, "access": "rwm"} for _, minor in NODES
    ]
    config["linux"]["cgroupsPath"] = cgroup
    # As containerd's CRI plugin names a pod's container.
    config["annotations"] = {
        "io.kubernetes.cri.sandbox-namespace": "default",
        "io.kubernetes.cri.sandbox-name": "gpu-pod",
        "io.kubernetes.cri.container-name": "cuda",
    }
    return config


class Container:
    def __init__(self, runc: str, root: Path, container_id: str) -> None:
        self.runc, self.root, self.id = runc, root, container_id

    def runc_args(self, *args: str) -> list[str]:
        return [self.runc, "--root", str(self.root), *args]

    def open_error(self, path: str) -> str:
        """What opening the node for reading and writing inside the container says."""
        result = subprocess.run(
            self.runc_args("exec", self.id, "sh", "-c", f"echo > {path}"), capture_output=True, text=True, timeout=20
        )
        return result.stderr


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Container]:
    assert DEVICES_V1.is_dir(), "this test needs the cgroup v1 devices controller"
    runc = need("runc")
    made = Container(runc, tmp_path / "state", f"gpu-{tmp_path.name}"[:60])
    cgroup = f"/nvidia-oci-hook-e2e/{made.id}"
    bundle = write_bundle(tmp_path / "bundle", _gpu_config(bundle_rootfs(tmp_path), cgroup))
    try:
        # The container inherits create's stdio: a pipe would stay open until it exits.
        subprocess.run(
            made.runc_args("run", "--detach", "--bundle", str(bundle), made.id),
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
        yield made
    finally:
        subprocess.run(made.runc_args("delete", "--force", made.id), capture_output=True, timeout=30)


def _gpu_access(root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any], list[str]]:
    status = main(["doctor", "--runtime-root", str(root), "--format", "json", *extra])
    report = json.loads(capsys.readouterr().out)
    check = next(check for check in report["checks"] if check["name"] == "gpu-access")
    return status, check, report["repairs"]


def test_a_container_that_lost_its_gpus_is_named_and_given_them_back(
    container: Container, capsys: pytest.CaptureFixture[str]
) -> None:
    devices = DEVICES_V1 / "nvidia-oci-hook-e2e" / container.id
    assert "No such device or address" in container.open_error("/dev/nvidia0"), "allowed: ENXIO, no GPU behind it"
    _, check, _ = _gpu_access(container.root, capsys)
    assert check["status"] == "ok" and check["summary"] == "1 GPU container(s) can open their NVIDIA devices", check

    # The probe cgroup v2 needs, made here on v1: a child in the container's cgroup and mount namespace opens the
    # node as the container would, and is gone after.
    (found,) = [c for c in running_containers(HostView("/"), (str(container.root),)) if c.id == container.id]
    procs = str(devices / "cgroup.procs")
    nvidia0 = GivenDevice("/dev/nvidia0", "c", 195, 0)
    members = (devices / "cgroup.procs").read_text()
    assert probe_open(found.pid, procs, nvidia0) == errno.ENXIO

    # What a reload that re-applies the rules without the NVIDIA ones leaves.
    for _, minor in NODES:
        (devices / "devices.deny").write_text(f"c 195:{minor} rwm\n")
    assert "Operation not permitted" in container.open_error("/dev/nvidia0")
    assert probe_open(found.pid, procs, nvidia0) == errno.EPERM
    assert (devices / "cgroup.procs").read_text() == members, "the probe left a process in the container's cgroup"
    status, check, _ = _gpu_access(container.root, capsys)
    assert status == 1 and check["status"] == "error", check
    assert "pod default/gpu-pod container cuda" in check["summary"]
    (line,) = check["evidence"]
    assert "lost /dev/nvidia0 (c 195:0), /dev/nvidiactl (c 195:255)" in line and "running since 20" in line
    assert check["fix"].startswith("restart pod default/gpu-pod container cuda")
    # node-problem-detector's GPUAccessLost rule: one line, exit 1, the container in it.
    assert main(["doctor", "--runtime-root", str(container.root), "--check", "gpu-access", "--format", "npd"]) == 1
    assert capsys.readouterr().out.startswith(
        "gpu-access: 1 running container(s) can no longer open their GPUs (Failed to initialize NVML: Unknown "
        "Error): pod default/gpu-pod container cuda"
    )

    # Without the flag, --fix changes no running container's cgroup.
    _, check, repairs = _gpu_access(container.root, capsys, "--fix")
    assert check["status"] == "error" and not any("re-allow" in repair for repair in repairs), repairs
    status, check, repairs = _gpu_access(container.root, capsys, "--fix", "--restore-device-access")
    assert [repair for repair in repairs if "re-allow" in repair] == [
        "fixed: re-allow c 195:0 rwm, c 195:255 rwm for pod default/gpu-pod container cuda "
        f"({container.id[:12]}) (the spec's own rules)"
    ], repairs
    assert check["status"] == "ok", check
    assert "No such device or address" in container.open_error("/dev/nvidiactl")
    _, check, _ = _gpu_access(container.root, capsys)
    assert check["status"] == "ok"
    assert main(["doctor", "--runtime-root", str(container.root), "--check", "gpu-access", "--format", "npd"]) == 0
    assert capsys.readouterr().out == "gpu-access: 1 GPU container(s) can open their NVIDIA devices\n"


def test_restoring_needs_fix_and_checks_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--restore-device-access"]) == 2
    assert "give --fix too" in capsys.readouterr().err
    assert main(["doctor", "--check", "gpu-acess"]) == 2
    assert "no check gpu-acess (checks: driver-root," in capsys.readouterr().err


def test_a_containerd_pod_that_lost_its_gpus_is_named_from_its_cri_annotations(tmp_path: Path) -> None:
    """The same under containerd through CRI: the devices a device plugin would hand over, the names kubelet
    gives, containerd's runc shim keeping the state. doctor runs while the container does."""
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    for name, minor in (("nvidia0", 0), ("nvidiactl", 255)):
        os.mknod(nodes / name, 0o666 | 0o020000, os.makedev(195, minor))
    seen: dict[str, Any] = {}

    def doctor_meanwhile(root: Path) -> None:
        host = HostView("/")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            found = [c for c in running_containers(host, (str(root),)) if "container main" in c.name]
            if found:
                break
            time.sleep(0.05)
        else:
            seen["error"] = "the container never showed up in the runtime's state"
            return
        (container,) = found
        seen["name"] = container.name
        seen["healthy"] = gpu_access_check(host, runtime_roots=(str(root),)).status
        assert container.devices_cgroup is not None
        for minor in (0, 255):
            Path(container.devices_cgroup, "devices.deny").write_text(f"c 195:{minor} rwm\n")
        lost = gpu_access_check(host, restore=True, runtime_roots=(str(root),))
        seen["lost"] = (lost.status, lost.summary)
        for repair in lost.repairs:
            repair.perform()
        seen["restored"] = gpu_access_check(host, runtime_roots=(str(root),)).status

    with CRIDaemon.start() as daemon:
        watcher = threading.Thread(target=doctor_meanwhile, args=(daemon.workdir / "runc" / "k8s.io",))
        watcher.start()
        # Long enough for doctor's three looks; the container reports what opening the node gives at the end.
        script = "sleep 6; echo > /dev/nvidia0 2>&1; echo done"
        devices = [(str(nodes / "nvidia0"), "/dev/nvidia0", "rwm"), (str(nodes / "nvidiactl"), "/dev/nvidiactl", "rwm")]
        result = run_pod_container(daemon, command=["sh", "-c", script], devices=devices, timeout=40)
        watcher.join(timeout=30)
    assert "error" not in seen, seen
    assert result.ran, result.error
    assert seen["name"].startswith("pod e2e/") and " container main (" in seen["name"], seen
    assert seen["healthy"] == "ok" and seen["restored"] == "ok", seen
    status, summary = seen["lost"]
    assert status == "error" and seen["name"] in summary, seen
    # Restored before its end, the container opens the node again: ENXIO, no GPU behind it.
    assert "No such device or address" in result.output, result.output
