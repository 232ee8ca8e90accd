"""CDI requests resolved and applied with the CDI library's semantics."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.engine.cdi import read_cache, requests
from nvidia_oci_hook.host import HostView
from tests.engine.support import codes, config, device, gpu_spec, run, write_spec
from tests.helpers import FakeHost

REQUEST = {"cdi.k8s.io/gpu": "example.com/gpu=0"}


def test_requests_from_annotations_and_visible_devices() -> None:
    value = config(
        annotations={"cdi.k8s.io/a": "example.com/gpu=0,example.com/gpu=1", "other/x": "example.com/gpu=9"},
        process={"env": ["NVIDIA_VISIBLE_DEVICES=example.com/gpu=1,0,all,example.com/gpu=2"]},
    )
    found, problems = requests(value, Settings())
    assert [r.name for r in found] == ["example.com/gpu=0", "example.com/gpu=1", "example.com/gpu=2"]
    assert problems == []
    found, _ = requests(value, Settings(cdi_annotation_prefixes=("other/",), cdi_visible_devices_env=False))
    assert [r.name for r in found] == ["example.com/gpu=9"]


def test_malformed_request_is_reported() -> None:
    value = config(annotations={"cdi.k8s.io/a": "example.com/gpu=0, example.com/gpu=1"})
    _, problems = requests(value, Settings())
    assert [p.code for p in problems] == ["GPU005"]
    assert "' example.com/gpu=1'" in problems[0].message and problems[0].gpu_unusable


def test_cache_priority_and_same_directory_conflict(tmp_path: Path) -> None:
    host = tmp_path / "host"
    low, high = host / "etc/cdi", host / "var/run/cdi"
    write_spec(low, "a.json", gpu_spec(devices={"0": {"env": ["FROM=low"]}, "1": {"env": ["FROM=low"]}}))
    write_spec(high, "b.json", gpu_spec(devices={"0": {"env": ["FROM=high"]}}))
    write_spec(high, "c.json", gpu_spec(devices={"2": {"env": ["FROM=c"]}}))
    write_spec(high, "d.json", gpu_spec(devices={"2": {"env": ["FROM=d"]}}))
    (high / "e.yml").write_text("not read")
    (high / "sub").mkdir()
    write_spec(high / "sub", "f.json", gpu_spec(devices={"3": {"env": ["FROM=sub"]}}))
    cache = read_cache(HostView(str(host)), ("/etc/cdi", "/var/run/cdi"))
    assert sorted(cache.devices) == ["example.com/gpu=0", "example.com/gpu=1"]
    assert cache.devices["example.com/gpu=0"][0].path == "/var/run/cdi/b.json"
    assert cache.devices["example.com/gpu=1"][0].path == "/etc/cdi/a.json"


def test_unusable_spec_named_when_a_device_is_unresolved(tmp_path: Path) -> None:
    host = tmp_path / "host"
    spec = gpu_spec()
    spec["devices"][0]["containerEdits"]["bogus"] = 1
    write_spec(host / "etc/cdi", "bad.json", spec)
    result = run(config(annotations=REQUEST), host)
    assert codes(result) == ["REC001"]
    assert (
        "is unresolvable (spec-not-loaded): the spec that defines it, /etc/cdi/bad.json, is not loaded: "
        'devices[0].containerEdits: unknown field "bogus"'
    ) in result.findings[0].message
    assert result.findings[0].hint == "fix /etc/cdi/bad.json (nvidia-oci-hook lint /etc/cdi/bad.json) or regenerate it"
    assert not result.changed


def test_nothing_injected_when_one_request_is_unresolved(tmp_path: Path) -> None:
    host = tmp_path / "host"
    write_spec(host / "etc/cdi", "gpu.json", gpu_spec(env=["SPEC=1"]))
    result = run(config(annotations={"cdi.k8s.io/gpu": "example.com/gpu=0,example.com/gpu=7"}), host)
    assert codes(result) == ["REC001"]
    assert result.findings[0].message.endswith(
        "CDI device example.com/gpu=7 (annotation cdi.k8s.io/gpu) is unresolvable (not-defined): no spec in "
        "/etc/cdi, /var/run/cdi defines it; defined: example.com/gpu=0"
    )


def test_a_name_two_specs_of_one_directory_define_is_a_conflict(tmp_path: Path) -> None:
    host = tmp_path / "host"
    write_spec(host / "etc/cdi", "a.json", gpu_spec())
    write_spec(host / "etc/cdi", "b.json", gpu_spec())
    write_spec(host / "var/run/cdi", "c.json", gpu_spec())  # a later directory does not bring it back
    result = run(config(annotations=REQUEST), host)
    (finding,) = result.findings
    assert "is unresolvable (conflict): /etc/cdi/a.json and /etc/cdi/b.json both define it" in finding.message
    assert finding.hint is not None and finding.hint.startswith("keep one of /etc/cdi/a.json, /etc/cdi/b.json")


def test_a_spec_in_a_directory_not_read_is_named(tmp_path: Path) -> None:
    host = tmp_path / "host"
    write_spec(host / "run/cdi", "nvidia.json", gpu_spec())  # /var/run is not a link on this fake node
    result = run(config(annotations=REQUEST), host)
    (finding,) = result.findings
    assert "is unresolvable (directory-not-scanned): /run/cdi/nvidia.json defines it" in finding.message
    assert finding.hint == "move /run/cdi/nvidia.json into /var/run/cdi, or add /run/cdi to cdi.spec_dirs"
    (host / "var").mkdir()
    (host / "var/run").symlink_to("../run")  # as on a real node: the same directory, read
    result = run(config(annotations=REQUEST), host)
    assert "REC001" not in codes(result) and result.changed


def test_a_uuid_request_against_indices_says_so(tmp_path: Path) -> None:
    host = tmp_path / "host"
    write_spec(host / "etc/cdi", "gpu.json", gpu_spec(devices={n: {"env": ["A=1"]} for n in ("0", "1", "all")}))
    result = run(config(annotations={"cdi.k8s.io/gpu": "example.com/gpu=GPU-8a3f"}), host)
    (finding,) = result.findings
    assert finding.message.endswith(
        "(not-defined): no spec in /etc/cdi, /var/run/cdi defines it; defined: example.com/gpu=all, example.com/gpu=0, "
        "example.com/gpu=1 (the request names the GPU by uuid, the specs by all and index)"
    )


def test_injection_follows_the_library(tmp_path: Path) -> None:
    host = tmp_path / "host"
    (host / "usr/lib").mkdir(parents=True)
    (host / "usr/lib/libcuda.so.1").write_text("")
    spec = gpu_spec(
        devices={
            "0": {
                "deviceNodes": [device("/dev/nvidia0", 195, 0)],
                "env": ["GPU=0"],
                "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook", "args": ["x"]}],
            }
        },
        env=["PATH=/usr/bin", "SPEC=1"],
        deviceNodes=[{**device("/dev/nvidiactl", 195, 255), "permissions": "rw"}],
        mounts=[
            {"hostPath": "/usr/lib/libcuda.so.1", "containerPath": "/usr/lib/libcuda.so.1", "options": ["ro", "bind"]}
        ],
        additionalGids=[0, 44],
    )
    write_spec(host / "var/run/cdi", "gpu.json", spec)
    value = config(annotations=REQUEST)
    value["linux"]["devices"] = [device("/dev/nvidia0", 195, 7)]
    result = run(value, host)
    new = result.config
    assert new["process"]["env"] == ["PATH=/usr/bin", "SPEC=1", "GPU=0"]  # same name replaced in place
    assert new["linux"]["devices"] == [device("/dev/nvidiactl", 195, 255), device("/dev/nvidia0", 195, 0)]
    allow = new["linux"]["resources"]["devices"]
    assert {"allow": True, "type": "c", "major": 195, "minor": 255, "access": "rw"} in allow
    assert {"allow": True, "type": "c", "major": 195, "minor": 0, "access": "rwm"} in allow
    assert [m["destination"] for m in new["mounts"]] == ["/proc", "/usr/lib/libcuda.so.1"]  # ordered by depth
    assert new["hooks"]["createContainer"] == [{"path": "/usr/bin/nvidia-cdi-hook", "args": ["x"]}]
    assert new["process"]["user"]["additionalGids"] == [44]  # gid 0 is never added
    assert set(codes(result)) == {"REC006"}
    assert result.unapplied()[0].pointer == "/annotations/cdi.k8s.io~1gpu"
    # Applying again (an engine that resolved the request itself) changes nothing.
    again = run(new, host)
    assert again.edits == [] and again.findings == []


def test_user_ids_given_to_device_nodes(tmp_path: Path) -> None:
    host = tmp_path / "host"
    write_spec(host / "etc/cdi", "gpu.json", gpu_spec())
    value = config(annotations=REQUEST)
    value["process"]["user"] = {"uid": 1000, "gid": 1001}
    result = run(value, host)
    node = result.config["linux"]["devices"][0]
    assert (node["uid"], node["gid"]) == (1000, 1001)


@pytest.mark.root
def test_host_node_fills_numbers_and_mode(as_root: None, fake_host: FakeHost) -> None:
    fake_host.device("/dev/nvidia3", "c", 195, 3)
    (fake_host.root / "dev/nvidia3").chmod(0o660)
    write_spec(
        fake_host.root / "etc/cdi", "gpu.json", gpu_spec(devices={"3": {"deviceNodes": [{"path": "/dev/nvidia3"}]}})
    )
    result = run(config(annotations={"cdi.k8s.io/g": "example.com/gpu=3"}), fake_host.root)
    assert result.config["linux"]["devices"] == [
        {"path": "/dev/nvidia3", "type": "c", "major": 195, "minor": 3, "fileMode": 0o660}
    ]


@pytest.mark.root
def test_host_node_under_stale_driver_root(as_root: None, fake_host: FakeHost) -> None:
    """Seed 000: the spec names /run/nvidia/driver/dev/nvidiactl; the node's driver is on the host."""
    fake_host.device("/dev/nvidiactl", "c", 195, 255)
    (fake_host.root / "dev/nvidiactl").chmod(0o666)
    node = {"path": "/dev/nvidiactl", "hostPath": "/run/nvidia/driver/dev/nvidiactl"}
    write_spec(fake_host.root / "etc/cdi", "gpu.json", gpu_spec(devices={"0": {"deviceNodes": [node]}}))
    result = run(config(annotations=REQUEST), fake_host.root)
    assert result.findings == []
    assert result.config["linux"]["devices"][0] == {**device("/dev/nvidiactl", 195, 255), "fileMode": 0o666}


def test_missing_host_node_is_reported(tmp_path: Path) -> None:
    host = tmp_path / "host"
    write_spec(host / "etc/cdi", "gpu.json", gpu_spec(devices={"0": {"deviceNodes": [{"path": "/dev/nvidia0"}]}}))
    result = run(config(annotations=REQUEST), host)
    assert "REC003" in codes(result)
    assert "host device /dev/nvidia0 does not exist" in result.findings[0].message
