"""Driver-root rewrites, device deduplication and allow rules, through the whole pipeline."""

from __future__ import annotations

import copy
from pathlib import Path

from tests.engine.support import BASE, codes, config, device, gpu_spec, run, write_spec
from tests.helpers import control_node, lint_value

LIB = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"


def _bind(source: str, destination: str = LIB) -> dict[str, object]:
    return {"destination": destination, "type": "bind", "source": source, "options": ["ro", "bind"]}


def test_a_clean_config_is_left_alone(tmp_path: Path) -> None:
    result = run(copy.deepcopy(BASE), tmp_path)
    assert not result.changed and result.findings == []
    assert result.config is not None


def test_mount_source_moved_to_the_root_that_has_it(tmp_path: Path) -> None:
    (tmp_path / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (tmp_path / LIB.lstrip("/")).write_text("")
    value = config(mounts=[_bind("/run/nvidia/driver" + LIB)])
    value["hooks"] = {"createContainer": [{"path": "/run/nvidia/driver/usr/bin/nvidia-cdi-hook"}]}
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/nvidia-cdi-hook").write_text("")
    result = run(value, tmp_path)
    assert result.config["mounts"][0]["source"] == LIB
    assert result.config["hooks"]["createContainer"][0]["path"] == "/usr/bin/nvidia-cdi-hook"
    assert codes(result) == ["HOST001", "HOST001"]
    assert "does not exist under driver root /run/nvidia/driver, but exists under /" in result.edits[0].why


def test_the_other_direction_and_configured_roots(tmp_path: Path) -> None:
    (tmp_path / "opt/driver/usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (tmp_path / "opt/driver" / LIB.lstrip("/")).write_text("")
    result = run(config(mounts=[_bind(LIB)]), tmp_path, driver_roots=("/", "/opt/driver"))
    assert result.config["mounts"][0]["source"] == "/opt/driver" + LIB


def test_nothing_is_rewritten_on_a_guess(tmp_path: Path) -> None:
    # Only the directory exists under /: the whole path must exist to move it.
    (tmp_path / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    result = run(config(mounts=[_bind("/run/nvidia/driver" + LIB)]), tmp_path)
    assert not result.changed
    assert codes(result) == ["REC005"]
    assert result.findings[0].gpu_unusable and result.findings[0].pointer == "/mounts/0/source"


def test_missing_paths_outside_driver_roots_are_not_ours(tmp_path: Path) -> None:
    result = run(config(mounts=[_bind("/data/x", "/data")]), tmp_path)
    assert codes(result) == []


def test_the_same_device_twice_becomes_one(tmp_path: Path) -> None:
    value = config()
    value["linux"]["devices"] = [device("/dev/fuse", 10, 229), device("/dev/fuse", 10, 229)]
    value["linux"]["resources"]["devices"].append(
        {"allow": True, "type": "c", "major": 10, "minor": 229, "access": "rwm"}
    )
    result = run(value, tmp_path)
    assert result.config["linux"]["devices"] == [device("/dev/fuse", 10, 229)]
    assert codes(result) == ["DEV001"]


def _conflict() -> dict[str, object]:
    value = config()
    value["linux"]["devices"] = [device("/dev/nvidia0", 195, 1), device("/dev/nvidia0", 195, 0), control_node()]
    return value


def test_conflict_first_wins_without_cdi(tmp_path: Path) -> None:
    result = run(_conflict(), tmp_path)
    assert result.config["linux"]["devices"] == [device("/dev/nvidia0", 195, 1), control_node()]
    assert codes(result)[0] == "DEV002" and "kept the first entry" in result.edits[0].message


def test_conflict_refused_by_policy(tmp_path: Path) -> None:
    result = run(_conflict(), tmp_path, policy_device_conflict="refuse")
    assert "REC004" in codes(result)
    assert [f.code for f in result.refusals("gpu-unusable")] == ["REC004"]
    assert len(result.config["linux"]["devices"]) == 3


def test_privileged_host_devices_replaced_by_the_cdi_device(tmp_path: Path) -> None:
    """A privileged spec lists the host's /dev/nvidia0 (from a stray node) and the plugin's; CDI says c 195:0."""
    write_spec(tmp_path / "etc/cdi", "gpu.json", gpu_spec())
    value = _conflict()
    value["annotations"] = {"cdi.k8s.io/gpu": "example.com/gpu=0"}
    value["process"]["capabilities"] = {"bounding": ["CAP_SYS_ADMIN"]}
    value["linux"]["resources"]["devices"] = [{"allow": True, "access": "rwm"}]
    value["linux"]["devices"].insert(0, device("/dev/nvidia0", 195, 5))
    result = run(value, tmp_path)
    assert [d for d in result.config["linux"]["devices"] if d["path"] == "/dev/nvidia0"] == [
        device("/dev/nvidia0", 195, 0)
    ]


def test_conflict_cdi_entry_wins_when_the_engine_applied_it(tmp_path: Path) -> None:
    write_spec(tmp_path / "etc/cdi", "gpu.json", gpu_spec())
    value = config(annotations={"cdi.k8s.io/gpu": "example.com/gpu=0"})
    # containerd appended the host's entry for a privileged container after its own CDI injection.
    value["linux"]["devices"] = [device("/dev/nvidia0", 195, 0), device("/dev/nvidia0", 195, 9)]
    result = run(value, tmp_path)
    assert [d for d in result.config["linux"]["devices"] if d["path"] == "/dev/nvidia0"] == [
        device("/dev/nvidia0", 195, 0)
    ]


def test_every_device_gets_an_allow_rule(tmp_path: Path) -> None:
    value = config()
    value["linux"]["devices"] = [
        device("/dev/nvidia0", 195, 0),
        device("/dev/sda", 8, 0, "b"),
        {"path": "/dev/p", "type": "p"},
    ]
    result = run(value, tmp_path)
    rules = result.config["linux"]["resources"]["devices"]
    assert rules[1:] == [
        {"allow": True, "type": "c", "major": 195, "minor": 0, "access": "rwm"},
        {"allow": True, "type": "b", "major": 8, "minor": 0, "access": "rwm"},
    ]
    assert [e.gpu_unusable for e in result.edits] == [True, False]


def test_no_rule_added_where_access_is_granted(tmp_path: Path) -> None:
    value = config()
    value["linux"]["devices"] = [device("/dev/nvidia0", 195, 0)]
    value["linux"]["resources"]["devices"] = [{"allow": True, "access": "rwm"}]
    assert not run(value, tmp_path).changed


def test_shapes_runc_accepts_pass_through(tmp_path: Path) -> None:
    """The pause container's spec has no process.env; odd but valid shapes must not break the pipeline."""
    for value in (
        {"ociVersion": "1.0.2", "root": {"path": "rootfs"}},
        {"ociVersion": "1.0.2", "process": {"args": ["/pause"]}, "linux": {}},
        {"ociVersion": "1.0.2", "linux": {"devices": None, "resources": None}, "mounts": None, "hooks": None},
        {"ociVersion": "1.0.2", "annotations": {"cdi.k8s.io/x": 5}, "process": {"env": None}},
    ):
        result = run(value, tmp_path)
        assert not result.changed and result.findings == []


def _gpus_allowed(*devices: dict[str, object]) -> dict[str, object]:
    value = config()
    value["linux"]["devices"] = list(devices)
    value["linux"]["resources"]["devices"] = [{"allow": True, "access": "rwm"}]
    return value


def test_a_gpu_without_its_control_node_is_found_as_lint_finds_it(tmp_path: Path) -> None:
    """Nothing to edit, but no GPU to use: the plan's finding is lint's GPU001, word for word, and lint (whose REC
    rules run the plan) reports it once."""
    value = _gpus_allowed(device("/dev/nvidia0", 195, 0), device("/dev/nvidia1", 195, 1))
    result = run(value, tmp_path)
    assert not result.changed
    found = [(f.code, f.severity, f.pointer, f.message, f.hint, f.gpu_unusable) for f in result.findings]
    linted = [
        (f.code, f.severity.label, f.pointer, f.message, f.hint, True)
        for f in lint_value(value, host_root=tmp_path)
        if f.code == "GPU001"
    ]
    assert found == linted and [pointer for _, _, pointer, *_ in found] == ["/linux/devices/0", "/linux/devices/1"]
    assert found[0][3] == "/dev/nvidia0 is listed but /dev/nvidiactl is not: CUDA and NVML cannot use the GPU"
    assert [f.code for f in result.refusals("gpu-unusable")] == ["GPU001", "GPU001"]
    assert result.refusals("never") == []
    assert run(_gpus_allowed(device("/dev/nvidia0", 195, 0), control_node()), tmp_path).findings == []


def test_the_control_node_a_cdi_request_brings_counts(tmp_path: Path) -> None:
    value = config(annotations={"cdi.k8s.io/gpu": "example.com/gpu=0"})
    write_spec(tmp_path / "etc/cdi", "gpu.json", gpu_spec(deviceNodes=[control_node()]))
    result = run(value, tmp_path)
    assert "GPU001" not in codes(result)
    assert sorted(d["path"] for d in result.config["linux"]["devices"]) == ["/dev/nvidia0", "/dev/nvidiactl"]
    # A spec without it leaves the GPU unusable, after the request is applied.
    write_spec(tmp_path / "etc/cdi", "gpu.json", gpu_spec())
    result = run(value, tmp_path)
    assert [(f.code, f.pointer) for f in result.findings] == [("GPU001", "/linux/devices/0")]
    assert [f.code for f in result.unapplied() if f.gpu_unusable] == ["GPU001", "REC006"]


def test_deduplication_never_takes_the_control_node(tmp_path: Path) -> None:
    for devices in (
        [device("/dev/nvidia0", 195, 0), control_node(), control_node()],
        [device("/dev/nvidia0", 195, 0), device("/dev/nvidiactl", 195, 254), control_node()],
        [control_node(), device("/dev/nvidia0", 195, 0), device("/dev/nvidia0", 195, 0), control_node()],
    ):
        result = run(_gpus_allowed(*devices), tmp_path)
        listed = [d["path"] for d in result.config["linux"]["devices"]]
        assert sorted(listed) == ["/dev/nvidia0", "/dev/nvidiactl"], devices
        assert "GPU001" not in codes(result), devices
