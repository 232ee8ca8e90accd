"""The DRV rules end to end: lint on a config.json (and a CRI container config) on a fake node laid out as the
driver lays out /proc and its libraries, each failure of the issue beside its healthy twin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.cli.test_cli import run
from tests.engine.support import config, device
from tests.helpers import FakeHost
from tests.node import fakenodes

pytestmark = pytest.mark.usefixtures("as_root")

LOADED = "550.54.15"
UUIDS = fakenodes.GPU_UUIDS
CTL = device("/dev/nvidiactl", 195, 255)


def two_gpu_node(root: Path, version: str = LOADED) -> FakeHost:
    return fakenodes.two_gpu_node(FakeHost(root), version)


def bundle(tmp_path: Path, env: list[str], **changes: Any) -> Path:
    value = config(**changes)
    value["process"]["env"] = ["PATH=/bin", *env]
    directory = tmp_path / "bundle"
    (directory / "rootfs").mkdir(parents=True, exist_ok=True)
    path = directory / "config.json"
    path.write_text(json.dumps(value))
    return path


def lint(
    capsys: pytest.CaptureFixture[str], host_root: Optional[Path], path: Path, *extra: str
) -> tuple[int, list[dict[str, Any]]]:
    args = ["lint", "--format", "json", *extra, str(path)]
    args += ["--host-root", str(host_root)] if host_root else ["--offline"]
    status, out, _err = run(capsys, *args)
    return status, [finding for result in json.loads(out)["files"] for finding in result["findings"]]


def drv(findings: list[dict[str, Any]]) -> list[str]:
    return [finding["code"] for finding in findings if finding["code"].startswith("DRV")]


def only(findings: list[dict[str, Any]], code: str) -> dict[str, Any]:
    found = [finding for finding in findings if finding["code"] == code]
    assert len(found) == 1, findings
    return found[0]


# -- NVIDIA_VISIBLE_DEVICES ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", "is GPU index 7, but the node has 2 GPUs"),
        ("0,2", "2 is GPU index 2, but the node has 2 GPUs"),
        ("GPU-00000000-0000-0000-0000-000000000000", "is no GPU of this node"),
        ("0000:99:00.0", "is no GPU's PCI bus id on this node"),
        ("3:0", "is GPU index 3, but the node has 2 GPUs"),
        ("gpu0", "is no device form NVIDIA's tools know"),
    ],
)
def test_visible_devices_the_node_does_not_have(
    tmp_path: Path, value: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    host = two_gpu_node(tmp_path / "host")
    status, findings = lint(capsys, host.root, bundle(tmp_path, [f"NVIDIA_VISIBLE_DEVICES={value}"]))
    finding = only(findings, "DRV004")
    assert expected in finding["message"] and "unknown device'" in finding["message"], finding
    assert finding["pointer"] == "/process/env/1" and status == 1


@pytest.mark.parametrize(
    "value",
    ["0", "1", "0,1", " 1 , 0 ", "all", "none", "void", "", UUIDS[1], UUIDS[0].upper(), "0000:19:00.0", "19:00.0"],
)
def test_visible_devices_the_node_has(tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    host = two_gpu_node(tmp_path / "host")
    _, findings = lint(capsys, host.root, bundle(tmp_path, [f"NVIDIA_VISIBLE_DEVICES={value}"]))
    assert "DRV004" not in drv(findings) and "DRV002" not in drv(findings), findings


def test_mig_devices_are_not_decidable_without_nvml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = two_gpu_node(tmp_path / "host")
    _, findings = lint(
        capsys, host.root, bundle(tmp_path, ["NVIDIA_VISIBLE_DEVICES=MIG-5c9b5cb9-9b6c-5b1a-8a2b-aaaaaaaaaaaa,1:0"])
    )
    assert drv(findings).count("DRV002") == 2 and "DRV004" not in drv(findings)
    assert "only NVML lists" in findings[0]["message"]


def test_a_node_without_the_module_lists_no_gpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = FakeHost(tmp_path / "host")
    fakenodes.host_driver(host)
    _, findings = lint(capsys, host.root, bundle(tmp_path, ["NVIDIA_VISIBLE_DEVICES=1"]))
    assert "the node lists no GPUs" in only(findings, "DRV002")["message"]


def test_a_privileged_container_is_left_to_gpu004(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = two_gpu_node(tmp_path / "host")
    path = bundle(tmp_path, ["NVIDIA_VISIBLE_DEVICES=7"])
    value = json.loads(path.read_text())
    value["process"]["capabilities"] = {"bounding": ["CAP_SYS_ADMIN"]}
    path.write_text(json.dumps(value))
    _, findings = lint(capsys, host.root, path)
    assert "DRV004" not in drv(findings)


def test_cri_config_envs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = two_gpu_node(tmp_path / "host")
    cri = tmp_path / "container.json"
    cri.write_text(
        json.dumps(
            {
                "metadata": {"name": "cuda"},
                "image": {"image": "cuda"},
                "envs": [
                    {"key": "NVIDIA_VISIBLE_DEVICES", "value": "5"},
                    {"key": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,graphic"},
                ],
            }
        )
    )
    _, findings = lint(capsys, host.root, cri)
    assert sorted(drv(findings)) == ["DRV004", "DRV005"]
    assert only(findings, "DRV004")["pointer"] == "/envs/0"


# -- NVIDIA_DRIVER_CAPABILITIES and the MIG variables ----------------------------------------------------------------


def test_a_misspelt_capability_with_the_hooks_own_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, findings = lint(capsys, None, bundle(tmp_path, ["NVIDIA_DRIVER_CAPABILITIES=compute,graphic"]))
    finding = only(findings, "DRV005")
    assert "unsupported capabilities found in 'compute,graphic' (allowed 'compute')" in finding["message"]
    assert finding["hint"] == "write graphic -> graphics"


@pytest.mark.parametrize("value", ["compute,graphics", "all", "compute,utility,video,display,ngx,compat32", "", "none"])
def test_known_capabilities(tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, findings = lint(capsys, None, bundle(tmp_path, [f"NVIDIA_DRIVER_CAPABILITIES={value}"]))
    assert "DRV005" not in drv(findings)


def test_mig_config_in_an_unprivileged_container(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = bundle(tmp_path, ["NVIDIA_MIG_CONFIG_DEVICES=all", "NVIDIA_MIG_MONITOR_DEVICES="])
    _, findings = lint(capsys, None, path)
    assert "cannot set MIG_CONFIG_DEVICES in non privileged container" in only(findings, "DRV006")["message"]
    value = json.loads(path.read_text())
    value["process"]["capabilities"] = {"bounding": ["CAP_SYS_ADMIN"]}
    path.write_text(json.dumps(value))
    assert "DRV006" not in drv(lint(capsys, None, path)[1])


# -- who acts on the variables -----------------------------------------------------------------------------------------


def test_visible_devices_nothing_acts_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, findings = lint(capsys, None, bundle(tmp_path, ["NVIDIA_VISIBLE_DEVICES=0"]))
    assert "the container starts without a GPU" in only(findings, "DRV007")["message"]


@pytest.mark.parametrize(
    "changes",
    [
        {"hooks": {"prestart": [{"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["x", "prestart"]}]}},
        {"linux": {"devices": [device("/dev/nvidia0", 195, 0), CTL], "resources": {"devices": []}}},
    ],
    ids=["nvidia-hook", "nvidia-devices"],
)
def test_visible_devices_acted_on(tmp_path: Path, changes: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    _, findings = lint(capsys, None, bundle(tmp_path, ["NVIDIA_VISIBLE_DEVICES=0"], **changes))
    assert "DRV007" not in drv(findings)


# -- the image's own driver -------------------------------------------------------------------------------------------


def test_an_image_that_carries_another_driver(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = two_gpu_node(tmp_path / "host")
    path = bundle(tmp_path, [])
    fakenodes.driver_libraries(FakeHost(path.parent / "rootfs"), "545.23.08")
    _, findings = lint(capsys, host.root, path)
    finding = only(findings, "DRV008")
    assert "driver libraries of 545.23.08" in finding["message"] and f"module is {LOADED}" in finding["message"]
    assert "/usr/lib/x86_64-linux-gnu/libcuda.so.545.23.08" in finding["message"]
    assert finding["pointer"] == "/root/path"


def test_an_image_without_a_driver_or_with_compat_libraries_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = two_gpu_node(tmp_path / "host")
    path = bundle(tmp_path, [])
    FakeHost(path.parent / "rootfs").text("/usr/local/cuda/compat/libcuda.so.570.124.06", "\x7fELF")
    assert "DRV008" not in drv(lint(capsys, host.root, path)[1])


# -- requirements ----------------------------------------------------------------------------------------------------

ISSUE_REQUIREMENT = "NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=tesla,driver>=470,driver<471"
CLI_REFUSAL = (
    "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver to a newer "
    "version, or use an earlier cuda container"
)


def test_the_issues_requirement_on_a_550_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = two_gpu_node(tmp_path / "host")
    status, findings = lint(capsys, host.root, bundle(tmp_path, [ISSUE_REQUIREMENT]))
    finding = only(findings, "DRV001")
    assert CLI_REFUSAL in finding["message"], finding
    assert "driver 550.54.15 supports CUDA 12.4 at most (CUDA 12.4 Update 1 needs >= 550.54.15" in finding["message"]
    assert "failing: cuda>=12.8, driver<471" in finding["message"]
    assert "CUDA driver version is insufficient for CUDA runtime version" in finding["message"]
    assert finding["hint"].startswith("run it on a node with driver >= 570.26 (CUDA 12.8 GA)")
    assert finding["pointer"] == "/process/env/1" and status == 1


@pytest.mark.parametrize(
    "env",
    [
        ["NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=470,driver<471"],
        [ISSUE_REQUIREMENT, "NVIDIA_DISABLE_REQUIRE=true"],
        ["NVIDIA_REQUIRE_CUDA=cuda>=12.8 driver>=550,driver<551"],
        ["CUDA_VERSION=12.4.1"],
    ],
    ids=["cuda-12.4", "disabled", "branch-term-holds", "legacy-12.4"],
)
def test_requirements_the_node_meets(tmp_path: Path, env: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    host = two_gpu_node(tmp_path / "host")
    _, findings = lint(capsys, host.root, bundle(tmp_path, env))
    assert not [code for code in drv(findings) if code in ("DRV001", "DRV002", "DRV003")], findings


def test_a_legacy_images_cuda_version_is_a_requirement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = two_gpu_node(tmp_path / "host")
    _, findings = lint(capsys, host.root, bundle(tmp_path, ["CUDA_VERSION=12.8.0"]))
    assert "CUDA_VERSION=cuda>=12.8 is not met" in only(findings, "DRV001")["message"]


def test_a_term_that_depends_on_the_brand_is_not_decided(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = two_gpu_node(tmp_path / "host", "535.104.05")
    _, findings = lint(
        capsys, host.root, bundle(tmp_path, ["NVIDIA_REQUIRE_CUDA=cuda>=13.0 brand=tesla,driver>=535,driver<536"])
    )
    finding = only(findings, "DRV002")
    assert "the GPU's brand, which only NVML tells" in finding["message"] and "DRV001" not in drv(findings)


def test_a_driver_beyond_the_table_leaves_cuda_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = two_gpu_node(tmp_path / "host", "610.43.02")
    _, findings = lint(capsys, host.root, bundle(tmp_path, ["NVIDIA_REQUIRE_CUDA=cuda>=13.3"]))
    assert "newer than NVIDIA's table as read" in only(findings, "DRV002")["message"]
    _, findings = lint(capsys, host.root, bundle(tmp_path, ["NVIDIA_REQUIRE_CUDA=driver>=600"]))
    assert drv(findings) == []


@pytest.mark.parametrize("host_root", [True, False], ids=["node", "offline"])
def test_a_malformed_requirement(tmp_path: Path, host_root: bool, capsys: pytest.CaptureFixture[str]) -> None:
    host = two_gpu_node(tmp_path / "host")
    _, findings = lint(capsys, host.root if host_root else None, bundle(tmp_path, ["NVIDIA_REQUIRE_CUDA=cuda=>12.0"]))
    finding = only(findings, "DRV003")
    assert "'nvidia-container-cli: requirement error: invalid expression'" in finding["message"], finding


def test_forward_compatibility_libraries_in_the_image(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = two_gpu_node(tmp_path / "host")
    path = bundle(tmp_path, [ISSUE_REQUIREMENT])
    rootfs = FakeHost(path.parent / "rootfs")
    rootfs.text("/usr/local/cuda/compat/libcuda.so.570.124.06", "\x7fELF")
    _, findings = lint(capsys, host.root, path)
    finding = only(findings, "DRV009")
    assert "/usr/local/cuda/compat/libcuda.so.570.124.06: CUDA 12.8" in finding["message"]
    assert CLI_REFUSAL in finding["message"] and "error 804" in finding["message"]
    assert "DRV001" not in drv(findings)
    # Compat libraries of the node's own branch are never used: the requirement stays unmet.
    (path.parent / "rootfs/usr/local/cuda/compat/libcuda.so.570.124.06").rename(
        path.parent / "rootfs/usr/local/cuda/compat/libcuda.so.550.163.01"
    )
    assert "DRV001" in drv(lint(capsys, host.root, path)[1])


def test_requirements_in_a_cri_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = two_gpu_node(tmp_path / "host")
    cri = tmp_path / "container.json"
    key, _, value = ISSUE_REQUIREMENT.partition("=")
    cri.write_text(json.dumps({"metadata": {"name": "cuda"}, "envs": [{"key": key, "value": value}]}))
    _, findings = lint(capsys, host.root, cri)
    assert CLI_REFUSAL in only(findings, "DRV001")["message"] and findings[0]["pointer"] == "/envs/0"
