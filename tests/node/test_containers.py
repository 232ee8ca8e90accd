"""Running containers from the runtimes' state on fake node roots, and the device rules they are judged by."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.gpu_access import gpu_access_check
from nvidia_oci_hook.node.containers import (
    GivenDevice,
    device_access,
    given_nvidia_devices,
    running_containers,
    spec_rules_for,
    v1_allows,
)

NVIDIA0 = GivenDevice("/dev/nvidia0", "c", 195, 0)


@pytest.mark.parametrize(
    "devices_list, allowed",
    [("c 195:0 rwm", True), ("c 195:* rwm", True), ("a *:* rwm", True), ("c *:* rw", True),
     ("c 195:0 r", False), ("c 195:1 rwm", False), ("b 195:0 rwm", False), ("c 1:3 rwm\nc 10:200 rwm", False),
     ("", False), ("garbage\nc 195:0", False), ("c 195:255 rwm\nc 195:0 m\nc 195:0 rw", True)],
)  # fmt: skip
def test_devices_list_is_read_as_the_kernel_applies_it(devices_list: str, allowed: bool) -> None:
    assert v1_allows(devices_list, NVIDIA0) is allowed


def test_nvidia_nodes_are_those_of_nvidia_majors_or_paths() -> None:
    spec = {"linux": {"devices": [
        {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0},
        {"path": "/dev/nvidia-uvm", "type": "c", "major": 509, "minor": 0},
        {"path": "/dev/renamed", "type": "c", "major": 508, "minor": 1},
        {"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229},
        {"path": "/dev/nvidia1"}, "not an entry",
    ]}}  # fmt: skip
    found = given_nvidia_devices(spec, {195, 508})
    assert [str(device) for device in found] == [
        "/dev/nvidia0 (c 195:0)", "/dev/nvidia-uvm (c 509:0)", "/dev/renamed (c 508:1)",
    ]  # fmt: skip


def test_the_spec_s_own_rules_are_what_is_restored() -> None:
    spec = {"linux": {"resources": {"devices": [
        {"allow": False, "access": "rwm"},
        {"allow": True, "type": "c", "major": 195, "minor": 0, "access": "rw"},
        {"allow": True, "type": "c", "major": 195, "access": "rwm"},
        {"allow": True, "type": "c", "major": 10, "minor": 229, "access": "rwm"},
        {"allow": True, "type": "b", "major": 195, "minor": 0},
    ]}}}  # fmt: skip
    assert spec_rules_for(spec, NVIDIA0) == ["c 195:0 rw", "c 195:* rwm"]
    assert spec_rules_for({}, NVIDIA0) == []


def _write(root: Path, path: str, value: Any) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(value if isinstance(value, str) else json.dumps(value))


def _gpu_spec(**annotations: str) -> dict[str, Any]:
    return {
        "annotations": annotations,
        "linux": {
            "devices": [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}],
            "resources": {"devices": [{"allow": True, "type": "c", "major": 195, "minor": 0, "access": "rwm"}]},
        },
    }


def test_containers_are_found_where_each_engine_s_runtime_keeps_them(tmp_path: Path) -> None:
    root = tmp_path / "node"
    # cri-o's container, run by runc under its default root.
    _write(root, "/run/runc/aaa/state.json", {
        "id": "aaa", "init_process_pid": 100, "created": "2026-11-30T10:00:00Z",
        "config": {"labels": ["io.kubernetes.pod.name=x", "bundle=/run/containers/aaa/userdata"]},
        "cgroup_paths": {"devices": "/sys/fs/cgroup/devices/kubepods/aaa"}})  # fmt: skip
    _write(root, "/run/containers/aaa/userdata/config.json", _gpu_spec(**{
        "io.kubernetes.pod.namespace": "ml", "io.kubernetes.pod.name": "trainer",
        "io.kubernetes.container.name": "cuda"}))  # fmt: skip
    _write(root, "/sys/fs/cgroup/devices/kubepods/aaa/devices.list", "c 1:3 rwm\n")
    _write(root, "/sys/fs/cgroup/devices/kubepods/aaa/devices.allow", "")  # the controller's file, always there
    # containerd's, under its runc shim's root for the k8s.io namespace.
    _write(root, "/run/containerd/runc/k8s.io/bbb/state.json", {
        "id": "bbb", "init_process_pid": 200, "config": {"labels": ["bundle=/run/containerd/bbb"]},
        "cgroup_paths": {"devices": "/sys/fs/cgroup/devices/k8s/bbb"}})  # fmt: skip
    _write(root, "/run/containerd/bbb/config.json", _gpu_spec())
    _write(root, "/sys/fs/cgroup/devices/k8s/bbb/devices.list", "c 195:0 rwm\n")
    # podman's, under crun, whose status names a cgroup path of its own.
    _write(root, "/run/crun/ccc/status", {"pid": 300, "bundle": "/var/lib/ccc", "cgroup-path": "/machine/ccc"})
    _write(root, "/var/lib/ccc/config.json", _gpu_spec())
    # A container given no GPU, and state that is not state.
    _write(root, "/run/runc/ddd/state.json", {"id": "ddd", "init_process_pid": 400, "config": {}})
    _write(root, "/run/runc/eee/state.json", "not json")

    host = HostView(str(root))
    containers = running_containers(host)
    assert sorted((container.id, container.runtime) for container in containers) == [
        ("aaa", "runc"), ("bbb", "runc"), ("ccc", "crun"), ("ddd", "runc"),
    ]  # fmt: skip
    accesses = {access.container.id: access for access in device_access(host, containers)}
    assert sorted(accesses) == ["aaa", "bbb", "ccc"]
    assert accesses["aaa"].container.name == "pod ml/trainer container cuda (aaa)"
    assert [str(device) for device in accesses["aaa"].lost] == ["/dev/nvidia0 (c 195:0)"]
    assert accesses["bbb"].judged and not accesses["bbb"].lost and accesses["bbb"].container.name == "container bbb"
    assert not accesses["ccc"].judged and "devices.list unreadable" in accesses["ccc"].why

    check = gpu_access_check(host)
    assert check.status == "error" and "pod ml/trainer container cuda (aaa)" in check.summary
    assert check.repairs == [], "nothing is restored without --restore-device-access"
    assert any("not judged" in line for line in check.evidence)
    restoring = gpu_access_check(host, restore=True)
    assert [repair.description for repair in restoring.repairs] == [
        "re-allow c 195:0 rwm for pod ml/trainer container cuda (aaa) (the spec's own rules)"
    ]
    restoring.repairs[0].perform()
    assert (root / "sys/fs/cgroup/devices/kubepods/aaa/devices.allow").read_text() == "c 195:0 rwm\n"


def test_a_node_without_gpu_containers_is_fine(tmp_path: Path) -> None:
    check = gpu_access_check(HostView(str(tmp_path)))
    assert check.status == "ok" and "no running container was given NVIDIA devices (0 running)" in check.summary


def test_every_check_doctor_makes_is_one_it_names(tmp_path: Path) -> None:
    from nvidia_oci_hook.config import Settings
    from nvidia_oci_hook.node.doctor import CHECK_NAMES, run_checks

    assert tuple(check.name for check in run_checks(str(tmp_path), Settings(), nvml=False)) == CHECK_NAMES


def test_the_roots_the_engines_configurations_name_are_looked_in(tmp_path: Path) -> None:
    root = tmp_path / "node"
    _write(root, "/etc/crio/crio.conf.d/10-gpu.conf",
           '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-oci-runtime"\n'
           'runtime_root = "/run/nvidia-runc"\n')  # fmt: skip
    _write(root, "/etc/containerd/config.toml",
           'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
           '  runtime_type = "io.containerd.runc.v2"\n'
           '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
           '    Root = "/run/kube/runc"\n')  # fmt: skip
    _write(root, "/run/nvidia-runc/fff/state.json", {"id": "fff", "init_process_pid": 5, "config": {}})
    _write(root, "/run/kube/runc/k8s.io/ggg/state.json", {"id": "ggg", "init_process_pid": 6, "config": {}})
    assert sorted(container.id for container in running_containers(HostView(str(root)))) == ["fff", "ggg"]
