"""`doctor` on fake node roots: each seed's cause in the first lines, the safe repairs, and a node `lint --node`
finds clean afterwards."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.driver import resolve_driver_root
from tests.helpers import FakeHost
from tests.node.fake_nvml import fake_nvml_library
from tests.node.fakenodes import container_driver, driver_container_restarting, host_driver, seed_000, seed_003
from tests.node.test_lint_node import containerd_node, crio_node, write

pytestmark = pytest.mark.root

ROOTS = ("/", "/run/nvidia/driver")


def doctor(host: FakeHost, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    status = main(["doctor", "--host-root", str(host.root), *extra])
    out, err = capsys.readouterr()
    assert err == ""
    return status, out


def lint_node_errors(host: FakeHost, capsys: pytest.CaptureFixture[str]) -> list[str]:
    main(["lint", "--node", "--host-root", str(host.root), "--format", "json"])
    report = json.loads(capsys.readouterr()[0])
    return [f["code"] for file in report["files"] for f in file["findings"] if f["severity"] == "error"]


def test_healthy_host_driver_node(fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]) -> None:
    containerd_node(host_driver(fake_host), "/")
    status, out = doctor(fake_host, capsys)
    assert status == 0, out
    assert "[error]" not in out and "[ok] driver-root: driver under /, device nodes under /dev" in out
    assert "[unknown] nvml: not read: --host-root is not /" in out


def test_healthy_container_driver_node(fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]) -> None:
    crio_node(container_driver(fake_host))
    status, out = doctor(fake_host, capsys)
    assert status == 0, out
    assert "[ok] driver-root: driver under /run/nvidia/driver, device nodes under /run/nvidia/driver/dev" in out


def test_both_drivers_is_ambiguous(fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]) -> None:
    container_driver(host_driver(fake_host))
    status, out = doctor(fake_host, capsys)
    assert status == 1
    assert out.startswith(
        "[error] driver-root: driver root ambiguous: driver files under each of /, /run/nvidia/driver"
    )


def test_no_driver(fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]) -> None:
    fake_host.device("/dev/nvidia0", "c", 195, 0)
    status, out = doctor(fake_host, capsys)
    assert status == 1 and out.startswith("[error] driver-root: driver root none: no nvidia-smi")
    status, out = doctor(fake_host, capsys, "--format", "npd")
    assert status == 1 and out.count("\n") == 1 and out.startswith("driver-root: driver root none")


def test_seed_000(fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]) -> None:
    containerd_node(seed_000(fake_host), "/run/nvidia/driver")
    status, out = doctor(fake_host, capsys)
    assert status == 1
    first = out.splitlines()[0]
    assert first.startswith("[error] validation-markers: toolkit-ready exists without host-driver-ready while the "
                            "driver is on the host"), out  # fmt: skip
    assert "'lstat /run/nvidia/driver/dev/nvidiactl: no such file or directory'" in first
    assert "[error] cdi-specs:" in out and "[error] engine-configs: lint --node" in out
    status, out = doctor(fake_host, capsys, "--format", "npd")
    # The other problems: the CDI spec, lint --node, and the missing /dev/char links (a warning).
    assert status == 1 and out.startswith("validation-markers: toolkit-ready exists") and out.endswith("(+3 more)\n")
    # A dry run changes nothing.
    status, out = doctor(fake_host, capsys, "--fix", "--dry-run")
    assert "would remove" in out and (fake_host.root / "run/nvidia/validations/toolkit-ready").exists()
    status, out = doctor(fake_host, capsys, "--fix")
    assert status == 0, out
    assert "fixed: remove /run/nvidia/validations/toolkit-ready" in out
    assert "fixed: rewrite /var/run/cdi/nvidia.yaml" in out
    assert lint_node_errors(fake_host, capsys) == []
    status, out = doctor(fake_host, capsys, "--fix")
    assert out.startswith("nothing to repair\n") and status == 0


def test_seed_003(fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]) -> None:
    crio_node(seed_003(fake_host))
    write(fake_host, "/proc/driver/nvidia/params", "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\n")
    status, out = doctor(fake_host, capsys)
    assert status == 1
    first = out.splitlines()[0]
    assert first.startswith("[error] stray-device-nodes: 2 NVIDIA nodes in the host's /dev while the driver's are "
                            "under /run/nvidia/driver/dev: cri-o refuses privileged GPU containers"), out  # fmt: skip
    assert "[warning] modify-device-files: ModifyDeviceFiles: 1 while the driver lives under /run/nvidia/driver" in out
    assert lint_node_errors(fake_host, capsys) == ["NODE002", "NODE002"]
    status, out = doctor(fake_host, capsys, "--fix")
    assert "fixed: remove /dev/nvidia0" in out and "fixed: remove /dev/nvidiactl" in out
    assert not (fake_host.root / "dev/nvidia0").exists()
    assert lint_node_errors(fake_host, capsys) == []


def test_a_stray_node_that_is_another_device_is_left(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    container_driver(fake_host)
    fake_host.device("/dev/nvidia0", "c", 195, 7)
    status, out = doctor(fake_host, capsys, "--fix")
    assert "not the same device as /run/nvidia/driver/dev/nvidia0, left alone" in out
    assert (fake_host.root / "dev/nvidia0").exists() and status == 1


def test_stray_nodes_beside_a_driver_root_that_holds_only_its_nodes(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """No driver user space anywhere, but the driver container's dev/ holds the nodes: the host's are strays."""
    driver_container_restarting(fake_host)
    fake_host.device("/dev/nvidiactl", "c", 195, 255).device("/dev/nvidia0", "c", 195, 7)
    status, out = doctor(fake_host, capsys, "--fix")
    assert status == 1, out
    assert "[error] driver-root: driver root none" in out
    check = next(line for line in out.splitlines() if "stray-device-nodes" in line)
    assert check.startswith(
        "[error] stray-device-nodes: 2 NVIDIA nodes in the host's /dev while the driver's are under "
        "/run/nvidia/driver/dev (driver user space not found): cri-o refuses privileged GPU containers"
    ), out
    assert "the driver's user space was not found (no nvidia-smi" in out
    assert "/run/nvidia/driver/dev holds the driver's nodes (/run/nvidia/driver/dev/nvidia0, " in out
    assert "/dev/nvidiactl (c 195:255): the same device as /run/nvidia/driver/dev/nvidiactl" in out
    assert "/dev/nvidia0 (c 195:7): not the same device as /run/nvidia/driver/dev/nvidia0" in out
    # Without the user space the driver root is not proven: --fix removes nothing.
    assert "fixed: remove" not in out
    assert (fake_host.root / "dev/nvidiactl").exists() and (fake_host.root / "dev/nvidia0").exists()
    status, out = doctor(fake_host, capsys, "--format", "json")
    (found,) = [c for c in json.loads(out)["checks"] if c["name"] == "stray-device-nodes"]
    assert (found["status"], found["repairs"]) == ("error", [])


def test_a_driver_root_that_holds_only_its_nodes_and_a_clean_host_dev(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    driver_container_restarting(fake_host)
    _, out = doctor(fake_host, capsys)
    assert "[ok] stray-device-nodes: no NVIDIA nodes in the host's /dev besides /run/nvidia/driver/dev" in out


def test_the_host_dev_mounted_as_the_driver_roots_is_not_stray(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The driver root's dev/ is the host's /dev itself: its nodes are the driver's own, with or without the user
    space found."""
    fake_host.device("/dev/nvidiactl", "c", 195, 255).device("/dev/nvidia0", "c", 195, 0)
    fake_host.symlink("/run/nvidia/driver/dev", "/dev")
    _, out = doctor(fake_host, capsys, "--fix")
    assert "[ok] stray-device-nodes: no NVIDIA nodes in the host's /dev besides /run/nvidia/driver/dev" in out
    container_driver_files = ("usr/bin/nvidia-smi", "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")
    for relative in container_driver_files:
        fake_host.executable(f"/run/nvidia/driver/{relative}")
    _, out = doctor(fake_host, capsys, "--fix")
    assert "[ok] driver-root: driver under /run/nvidia/driver" in out
    assert "[ok] stray-device-nodes:" in out and "fixed: remove" not in out
    assert (fake_host.root / "dev/nvidia0").exists()


def test_stale_markers_and_dev_char_links(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    host_driver(fake_host)
    fake_host.file("/run/nvidia/validations/host-driver-ready").file("/run/nvidia/validations/toolkit-ready")
    marker = fake_host.root / "run/nvidia/validations/toolkit-ready"
    os.utime(marker, (1_000_000, 1_000_000))
    write(fake_host, "/proc/stat", "cpu 1 2 3\nbtime 1700000000\n")
    status, out = doctor(fake_host, capsys, "--format", "json")
    assert status == 1
    checks = {check["name"]: check for check in json.loads(out)["checks"]}
    assert checks["validation-markers"]["status"] == "error"
    markers = checks["validation-markers"]
    assert markers["summary"].startswith("toolkit-ready is older than the last boot")
    assert markers["evidence"] == ["/run/nvidia/validations/toolkit-ready: stale"]
    assert checks["dev-char-links"]["status"] == "warning"
    assert checks["dev-char-links"]["evidence"] == [
        "/dev/char/195:0 for /dev/nvidia0",
        "/dev/char/195:255 for /dev/nvidiactl",
    ]
    fake_host.symlink("/dev/char/195:0", "../nvidia0").symlink("/dev/char/195:255", "../nvidiactl")
    _, out = doctor(fake_host, capsys, "--format", "json")
    assert {c["name"]: c["status"] for c in json.loads(out)["checks"]}["dev-char-links"] == "ok"


def test_usage(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--dry-run", "--host-root", str(fake_host.root)]) == 2
    assert "--dry-run previews --fix" in capsys.readouterr()[1]
    assert main(["doctor", "--host-root", "/nonexistent"]) == 2


def test_resolver_evidence(fake_host: FakeHost, as_root: None) -> None:
    answer = resolve_driver_root(HostView(str(container_driver(fake_host).root)), ROOTS)
    lines = answer.evidence_lines()
    assert lines[0] == "/: no nvidia-smi, libnvidia-ml.so.1 or libcuda.so.1"
    assert lines[1].startswith("/run/nvidia/driver: /run/nvidia/driver/usr/bin/nvidia-smi")
    assert "nodes /run/nvidia/driver/dev/nvidia0, /run/nvidia/driver/dev/nvidiactl" in lines[1]
    assert lines[2].startswith("kernel module loaded")


def test_node_problem_detector_plugin_config() -> None:
    """The example plugin configuration runs doctor in the npd format, with node-problem-detector's keys."""
    path = Path(__file__).resolve().parents[2] / "packaging/node-problem-detector/nvidia-oci-hook-doctor.json"
    config = json.loads(path.read_text())
    assert config["plugin"] == "custom" and {"invoke_interval", "timeout"} <= set(config["pluginConfig"])
    condition = config["conditions"][0]["type"]
    rule = config["rules"][0]
    assert rule["condition"] == condition and rule["type"] == "permanent"
    assert rule["path"] == "/usr/bin/nvidia-oci-hook" and rule["args"] == ["doctor", "--format", "npd"]
    # GPUAccessLost: doctor's gpu-access check alone, whose line names the containers.
    lost = next(rule for rule in config["rules"] if rule["condition"] == "GPUAccessLost")
    assert lost["args"] == ["doctor", "--check", "gpu-access", "--format", "npd"] and lost["type"] == "permanent"
    assert "GPUAccessLost" in [condition["type"] for condition in config["conditions"]]


@pytest.fixture
def nvml_library(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("FAKE_NVML_GPUS", "FAKE_NVML_CREATE_NODES_IN", "FAKE_NVML_FAIL_INIT", "FAKE_NVML_MIG"):
        monkeypatch.delenv(name, raising=False)
    return str(fake_nvml_library(tmp_path_factory))


def test_nvml_view_against_the_cdi_specs(
    fake_host: FakeHost,
    as_root: None,
    nvml_library: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    containerd_node(host_driver(fake_host), "/")
    monkeypatch.setenv("FAKE_NVML_GPUS", "0:GPU-11111111-2222-3333-4444-555555555555")
    monkeypatch.setenv("FAKE_NVML_MIG", "0")
    status, out = doctor(fake_host, capsys, "--nvml-library", nvml_library)
    assert status == 0, out
    assert "[ok] nvml: driver 550.54.15, 1 GPU" in out
    assert (
        "    GPU 0: minor 0, GPU-11111111-2222-3333-4444-555555555555, NVIDIA Fake GPU, brand tesla, "
        "compute capability 8.0, MIG on"
    ) in out
    assert "    driver 550.54.15, CUDA 12.4 (the cuda requirement's value)" in out
    # The node's only GPU is minor 1 now: the spec's /dev/nvidia0 names a GPU that is gone.
    monkeypatch.setenv("FAKE_NVML_GPUS", "1:GPU-66666666-2222-3333-4444-555555555555")
    status, out = doctor(fake_host, capsys, "--nvml-library", nvml_library)
    assert status == 1
    assert "[error] nvml: 1 CDI device names GPUs NVML does not see: nvidia.com/gpu=0 (/var/run/cdi/nvidia.yaml): " \
        "/dev/nvidia0 is minor 0, which no GPU has" in out  # fmt: skip


def test_nodes_nvml_creates_are_reported_and_removed(
    fake_host: FakeHost,
    as_root: None,
    nvml_library: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ModifyDeviceFiles=1: NVML makes the nodes it misses in /dev; where the driver root is not /, they go again."""
    crio_node(container_driver(fake_host)).directory("/dev")
    monkeypatch.setenv("FAKE_NVML_GPUS", "0:GPU-a,1:GPU-b")
    monkeypatch.setenv("FAKE_NVML_CREATE_NODES_IN", str(fake_host.root / "dev"))
    status, out = doctor(fake_host, capsys, "--nvml-library", nvml_library)
    for name in ("nvidiactl", "nvidia0", "nvidia1"):
        assert f"    NVML created /dev/{name}" in out
        assert f"    removed /dev/{name} again" in out
    assert not [p for p in (fake_host.root / "dev").iterdir() if p.name.startswith("nvidia")]
    assert status == 0, out  # nothing stray is left for the later checks to find


def test_the_engines_and_their_cdi_libraries(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    containerd_node(host_driver(fake_host), "/")
    write(
        fake_host, "/var/lib/dpkg/status", "Package: containerd\nStatus: install ok installed\nVersion: 2.1.4~ds1-1\n"
    )
    _, out = doctor(fake_host, capsys, "--format", "json")
    engines = next(check for check in json.loads(out)["checks"] if check["name"] == "engines")
    assert engines["status"] == "ok" and engines["summary"] == "containerd 2.1.4"
    assert engines["evidence"] == [
        "containerd 2.1.4: CDI library 1.0.1 (/var/lib/dpkg/status)",
        "containerd runtime handlers: runc (io.containerd.runc.v2)",  # the name a RuntimeClass's handler must match
    ]
    # Under another host root binaries are not run: without a package database entry nothing is found.
    (fake_host.root / "var/lib/dpkg/status").write_text("")
    fake_host.executable("/usr/bin/podman")
    _, out = doctor(fake_host, capsys, "--format", "json")
    engines = next(check for check in json.loads(out)["checks"] if check["name"] == "engines")
    assert engines["status"] == "unknown" and "no containerd, cri-o or podman found" in engines["summary"], engines


def test_the_engines_check_names_the_configuration_in_effect(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    host_driver(fake_host)
    write(fake_host, "/var/lib/dpkg/status", "Package: containerd\nStatus: install ok installed\nVersion: 1.7.24-1\n")
    k3s = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"
    write(fake_host, k3s, "# File generated by k3s. DO NOT EDIT. Use config.toml.tmpl instead.\nversion = 2\n")
    _, out = doctor(fake_host, capsys, "--format", "json")
    engines = next(check for check in json.loads(out)["checks"] if check["name"] == "engines")
    assert engines["evidence"][0] == f"containerd reads {k3s}: k3s's containerd"


def test_fix_creates_the_dev_char_links_once(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    container_driver(fake_host)  # nodes under /run/nvidia/driver/dev: the links point into the driver root
    fake_host.symlink("/dev/char/195:254", "../null")  # someone else's link at a node's number: left alone
    _, out = doctor(fake_host, capsys, "--check", "dev-char-links", "--fix", "--format", "json")
    report = json.loads(out)
    fixed = sorted(repair for repair in report["repairs"] if repair.startswith("fixed: link /dev/char/"))
    assert fixed and all(" to /run/nvidia/driver/dev/nvidia" in repair for repair in fixed), report["repairs"]
    assert os.readlink(fake_host.root / "dev/char/195:255") == "../../run/nvidia/driver/dev/nvidiactl"
    assert os.readlink(fake_host.root / "dev/char/195:254") == "../null"
    links = sorted(os.listdir(fake_host.root / "dev/char"))
    # The second run finds nothing to create, and changes nothing.
    _, out = doctor(fake_host, capsys, "--check", "dev-char-links", "--fix", "--format", "json")
    again = json.loads(out)
    assert not [repair for repair in again["repairs"] if repair.startswith("fixed: link")], again["repairs"]
    assert sorted(os.listdir(fake_host.root / "dev/char")) == links
