"""CRI container configs: every rule's trigger and clean twin, and the corpus with its expected codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.rules.base import all_rules
from tests.helpers import FakeHost, codes, lint_value
from tests.node import fakenodes

CORPUS = Path(__file__).parent / "corpus"


def cri(devices: Optional[list[dict[str, str]]] = None, privileged: bool = False, **extra: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"metadata": {"name": "c"}, "image": {"image": "busybox"}, **extra}
    if devices is not None:
        value["devices"] = devices
    if privileged:
        value["linux"] = {"security_context": {"privileged": True}}
    return value


def device(container: str, host: str, permissions: str = "rw") -> dict[str, str]:
    return {"container_path": container, "host_path": host, "permissions": permissions}


def node_with_stray_devices(host: FakeHost) -> None:
    """The seeds' node: driver on the host, /run/nvidia/driver empty, /dev/nvidia* present on the host."""
    host.device("/dev/nvidiactl", "c", 195, 255).device("/dev/nvidia0", "c", 195, 0).directory("/run/nvidia/driver")


def node_with_cdi_spec(host: FakeHost, *names: str) -> None:
    devices = [{"name": name, "containerEdits": {"env": [f"GPU={name}"]}} for name in names]
    host.text(
        "/var/run/cdi/nvidia.json", json.dumps({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": devices})
    )


def node_with_cdi_nodes(host: FakeHost, host_paths: dict[str, str]) -> None:
    """A CDI spec whose devices name these host nodes, on the seeds' node (/dev/nvidia0 there, the driver root
    empty)."""
    node_with_stray_devices(host)
    devices = [
        {"name": name, "containerEdits": {"deviceNodes": [{"path": f"/dev/nvidia{name}", "hostPath": path}]}}
        for name, path in host_paths.items()
    ]
    host.text(
        "/var/run/cdi/nvidia.json", json.dumps({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": devices})
    )


def envs(**variables: str) -> dict[str, Any]:
    return cri(envs=[{"key": key, "value": value} for key, value in variables.items()])


def two_gpu_node(host: FakeHost) -> None:
    fakenodes.two_gpu_node(host)


PLUGIN_DEVICE = device("/dev/nvidia0", "/run/nvidia/driver/dev/nvidia0")

CASES: list[tuple[str, dict[str, Any], dict[str, Any], Callable[[FakeHost], None]]] = [
    ("CRI001", cri([PLUGIN_DEVICE], privileged=True), cri([PLUGIN_DEVICE]), node_with_stray_devices),
    ("CRI001", cri([PLUGIN_DEVICE], privileged=True),
     cri([device("/dev/nvidia0", "/dev/nvidia0")], privileged=True), node_with_stray_devices),
    ("CRI002", cri([device("/dev/nvidiactl", "/run/nvidia/driver/dev/nvidiactl")]),
     cri([device("/dev/nvidiactl", "/dev/nvidiactl")]), node_with_stray_devices),
    ("CRI003", cri([device("/dev/nvidia0", "/run/nvidia/driver/dev/nvidia0")]),
     cri([device("/dev/nvidia0", "/dev/nvidia0")]),
     lambda h: node_with_stray_devices(h.file("/run/nvidia/driver/dev/nvidia0"))),
    ("CRI004", cri(cdi_devices=[{"name": "nvidia.com/gpu0"}]), cri(cdi_devices=[{"name": "nvidia.com/gpu=0"}]),
     node_with_stray_devices),
    ("CRI005", cri([device("/dev/nvidia0", "/dev/nvidia0", "rw-")]), cri([device("/dev/nvidia0", "/dev/nvidia0")]),
     node_with_stray_devices),
    ("CRI006", cri([device("/dev/nvidia0", "/dev/nvidia0", "")]), cri([device("/dev/nvidia0", "/dev/nvidia0")]),
     node_with_stray_devices),
    ("CRI006", cri([{"container_path": "/dev/nvidia0", "host_path": "/dev/nvidia0"}]),
     cri([device("/dev/nvidia0", "/dev/nvidia0", "r")]), node_with_stray_devices),
    ("CRI007", cri([device("/dev/nvidia0", "")]), cri([device("/dev/nvidia0", "/dev/nvidia0")]),
     node_with_stray_devices),
    ("CRI008", cri([device("/dev/null", "/run/nvidia/driver")]), cri([device("/dev/nvidia", "/run/nvidia/driver")]),
     node_with_stray_devices),
    ("CRI009", cri([device("/dev/null", "/dev/nvidia0")]), cri([device("/dev/nvidia0", "/dev/nvidia0")]),
     lambda host: node_with_stray_devices(host.text("/proc/devices", "Character devices:\n  1 mem\n"))),
    ("CRI010", cri([device("/dev/zero", "/dev/nvidia0")]), cri([device("/dev/nvidia0", "/dev/nvidia0")]),
     node_with_stray_devices),
    ("REC001", cri(cdi_devices=[{"name": "nvidia.com/gpu=7"}]), cri(cdi_devices=[{"name": "nvidia.com/gpu=0"}]),
     lambda host: node_with_cdi_spec(host, "0")),
    ("REC003", cri(cdi_devices=[{"name": "nvidia.com/gpu=0"}]), cri(cdi_devices=[{"name": "nvidia.com/gpu=1"}]),
     lambda host: node_with_cdi_nodes(host, {"0": "/run/nvidia/driver/dev/nvidia0", "1": "/dev/nvidia0"})),
    ("DRV001", envs(NVIDIA_REQUIRE_CUDA="cuda>=12.8 brand=tesla,driver>=470,driver<471"),
     envs(NVIDIA_REQUIRE_CUDA="cuda>=12.4 brand=tesla,driver>=470,driver<471"), two_gpu_node),
    ("DRV002", envs(NVIDIA_REQUIRE_CUDA="cuda>=13.0 brand=tesla,driver>=550,driver<551"),
     envs(NVIDIA_REQUIRE_CUDA="cuda>=12.0"), two_gpu_node),
    ("DRV003", envs(NVIDIA_REQUIRE_CUDA="cuda>>12"), envs(NVIDIA_REQUIRE_CUDA="cuda>12"), two_gpu_node),
    ("DRV004", envs(NVIDIA_VISIBLE_DEVICES="2"), envs(NVIDIA_VISIBLE_DEVICES="1"), two_gpu_node),
    ("DRV005", envs(NVIDIA_DRIVER_CAPABILITIES="video,graphic"), envs(NVIDIA_DRIVER_CAPABILITIES="video"),
     two_gpu_node),
    ("DRV006", envs(NVIDIA_MIG_MONITOR_DEVICES="all"), {**envs(NVIDIA_MIG_MONITOR_DEVICES="all"),
     "linux": {"security_context": {"privileged": True}}}, two_gpu_node),
]  # fmt: skip


def test_every_cri_rule_has_a_case() -> None:
    assert {code for code, *_ in CASES} == {r.code for r in all_rules() if "cri" in r.kinds and r.check} - {"GPU005"}


@pytest.mark.root
@pytest.mark.parametrize(("code", "trigger", "clean", "host"), CASES, ids=[c[0] for c in CASES])
def test_trigger_and_clean_twin(
    code: str, trigger: dict[str, Any], clean: dict[str, Any], host: Callable[[FakeHost], None],
    fake_host: FakeHost, as_root: None,
) -> None:  # fmt: skip
    host(fake_host)
    assert code in codes(lint_value(trigger, host_root=fake_host.root))
    assert code not in codes(lint_value(clean, host_root=fake_host.root))


@pytest.mark.root
def test_collision_message_quotes_crio_and_the_hint_rewrites_the_root(fake_host: FakeHost, as_root: None) -> None:
    node_with_stray_devices(fake_host)
    value = cri([PLUGIN_DEVICE, device("/dev/nvidiactl", "/run/nvidia/driver/dev/nvidiactl")], privileged=True)
    findings = lint_value(value, host_root=fake_host.root)
    collision = [f for f in findings if f.code == "CRI001"]
    assert collision[0].pointer == "/devices/0/container_path"
    assert "privileged container was configured with a device container path that already exists on the host" in (
        collision[0].message
    )
    missing = [f.message for f in findings if f.code == "CRI002" and f.pointer == "/devices/0/host_path"]
    # Each engine's own outcome: containerd refuses, cri-o starts the container without the device.
    assert missing == [
        "host_path /run/nvidia/driver/dev/nvidia0 does not exist on the host: containerd refuses the container "
        "(`lstat /run/nvidia/driver/dev/nvidia0: no such file or directory`)",
        "host_path /run/nvidia/driver/dev/nvidia0 does not exist on the host: cri-o skips the device without a word "
        "and starts the container without it at /dev/nvidia0",
    ]
    hints = {f.hint for f in findings if f.code == "CRI002" and f.pointer == "/devices/0/host_path"}
    assert hints == {"use /dev/nvidia0: the driver is under /, not /run/nvidia/driver"}


def test_keys_match_without_regard_to_case() -> None:
    value = {
        "metadata": {"name": "c"},
        "Devices": [device("/dev/x", "/dev/x", "rwz")],
        "cdi_Devices": [{"Name": "bad"}],
    }
    found = lint_value(value)
    assert [(f.code, f.pointer) for f in found] == [
        ("CRI005", "/Devices/0/permissions"),
        ("CRI004", "/cdi_Devices/0/name"),
    ]


@pytest.mark.root
def test_corpus_expected_codes(fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]) -> None:
    node_with_stray_devices(fake_host)
    node_with_cdi_spec(fake_host, "1", "all")
    expected = json.loads((CORPUS / "expected.json").read_text())["files"]
    for name, want in expected.items():
        status = main(["lint", "--format", "json", "--host-root", str(fake_host.root), str(CORPUS / name)])
        (result,) = json.loads(capsys.readouterr().out)["files"]
        assert result["kind"] == want["kind"], name
        assert sorted(f["code"] for f in result["findings"]) == sorted(want["codes"]), name
        assert status == (1 if want["codes"] else 0), name
        assert all(f["line"] for f in result["findings"]), name


def _cdi_spec(kind: str = "nvidia.com/gpu") -> str:
    return json.dumps(
        {"cdiVersion": "0.5.0", "kind": kind, "devices": [{"name": "0", "containerEdits": {"env": ["A=1"]}}]}
    )


def test_an_unresolvable_cdi_request_gives_its_reason(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    fake_host.text("/etc/cdi/a.json", _cdi_spec()).text("/etc/cdi/b.json", _cdi_spec())
    fake_host.text("/var/run/cdi/net.json", _cdi_spec("example.com/net"))
    config = cri(
        cdi_devices=[{"name": "nvidia.com/gpu=0"}, {"name": "example.com/net=0"}],
        annotations={"cdi.k8s.io/extra": "example.com/net=1"},
    )
    path = fake_host.root / "container.json"
    path.write_text(json.dumps(config, indent=2))
    status = main(["lint", "--format", "json", "--host-root", str(fake_host.root), str(path)])
    (result,) = json.loads(capsys.readouterr().out)["files"]
    found = {f["pointer"]: f for f in result["findings"] if f["code"] == "REC001"}
    assert status == 1 and result["kind"] == "cri"
    assert sorted(found) == ["/annotations/cdi.k8s.io~1extra", "/cdi_devices/0"]
    assert (
        "CDI device nvidia.com/gpu=0 is unresolvable (conflict): /etc/cdi/a.json and /etc/cdi/b.json"
        in (found["/cdi_devices/0"]["message"])
    )
    assert found["/annotations/cdi.k8s.io~1extra"]["message"].startswith(
        "CDI device example.com/net=1 is unresolvable (not-defined): no spec in /etc/cdi, /var/run/cdi defines it; "
        "defined: example.com/net=0"
    )


@pytest.mark.root
@pytest.mark.parametrize(
    "packages, engines",
    [(["containerd"], ["containerd"]), (["cri-o"], ["crio"]), (["containerd", "cri-o"], ["containerd", "crio"]),
     ([], ["containerd", "crio"])],
    ids=["containerd-node", "crio-node", "both", "neither"],
)  # fmt: skip
def test_a_config_is_judged_for_the_nodes_engine(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str], packages: list[str], engines: list[str]
) -> None:
    node_with_stray_devices(fake_host)
    status_file = "".join(f"Package: {p}\nStatus: install ok installed\nVersion: 1.7.24-1\n\n" for p in packages)
    fake_host.text("/var/lib/dpkg/status", status_file)
    config = fake_host.root.parent / "missing.json"
    config.write_text(json.dumps(cri([device("/dev/nvidiactl", "/run/nvidia/driver/dev/nvidiactl")])))
    main(["lint", "--kind", "cri", "--host-root", str(fake_host.root), "--format", "json", str(config)])
    (result,) = json.loads(capsys.readouterr().out)["files"]
    said = sorted("cri-o" if "cri-o skips" in f["message"] else "containerd" for f in result["findings"])
    assert said == sorted("cri-o" if e == "crio" else "containerd" for e in engines), result
    # --engine names the engine whatever the node has.
    main(["lint", "--kind", "cri", "--engine", "crio", "--host-root", str(fake_host.root), "--format", "json",
          str(config)])  # fmt: skip
    (result,) = json.loads(capsys.readouterr().out)["files"]
    assert [f["code"] for f in result["findings"]] == ["CRI002"] and "cri-o skips" in result["findings"][0]["message"]


@pytest.mark.root
def test_a_relative_container_path_is_looked_up_where_crio_runs(fake_host: FakeHost, as_root: None) -> None:
    node_with_stray_devices(fake_host)
    value = cri([device("dev/nvidia0", "/run/nvidia/driver/dev/nvidia0")], privileged=True)
    (collision,) = [f for f in lint_value(value, host_root=fake_host.root) if f.code == "CRI001"]
    # No cri-o runs on this node: its working directory under systemd, /, is where it looks.
    assert "the relative dev/nvidia0 is /dev/nvidia0 in cri-o's working directory under systemd" in collision.message
    assert "CRI001" not in codes(lint_value(cri([device("dev/nvidia9", "/dev/nvidia0")], privileged=True),
                                            host_root=fake_host.root))  # fmt: skip
