"""Every rule: the smallest document that triggers it, and a clean twin that must not.

The table must name every registered rule; a rule without a case fails test_every_rule_has_a_case.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import pytest

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.rules.base import all_rules
from tests.helpers import FakeHost, codes, lint_value
from tests.node import fakenodes

V = "1.0.2"
ALLOW_ALL = [{"allow": True, "access": "rwm"}]
DENY_ALL = [{"allow": False, "access": "rwm"}]


def dev(path: str, major: int, minor: int, kind: str = "c") -> dict[str, Any]:
    return {"path": path, "type": kind, "major": major, "minor": minor}


def allow(major: int, minor: int, kind: str = "c") -> dict[str, Any]:
    return {"allow": True, "type": kind, "major": major, "minor": minor, "access": "rwm"}


def spec(devices: Optional[list[Any]] = None, rules: Optional[list[Any]] = None, **extra: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"ociVersion": V, **extra}
    linux: dict[str, Any] = dict(value.pop("linux", {}))
    if devices is not None:
        linux["devices"] = devices
        if rules is None:
            rules = DENY_ALL + [allow(d["major"], d["minor"], d["type"]) for d in devices]
    if rules is not None:
        linux.setdefault("resources", {})["devices"] = rules
    if linux:
        value["linux"] = linux
    return value


def gpu_set(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [dev("/dev/nvidiactl", 195, 255), dev("/dev/nvidia0", 195, 0), *extra]


def privileged(value: dict[str, Any]) -> dict[str, Any]:
    value = copy.deepcopy(value)
    value.setdefault("process", {"cwd": "/"})["capabilities"] = {"bounding": ["CAP_SYS_ADMIN"]}
    return value


def state(**fields: Any) -> dict[str, Any]:
    return {"ociVersion": V, "id": "c", "status": "created", "bundle": "/bundles/c", **fields}


def hook(stage: str, **fields: Any) -> dict[str, Any]:
    return {"ociVersion": V, "hooks": {stage: [{"path": "/usr/bin/hook", **fields}]}}


def bind(source: str, destination: str) -> dict[str, Any]:
    return {"destination": destination, "type": "bind", "source": source, "options": ["rbind", "ro"]}


Document = Union[bytes, dict[str, Any]]


@dataclass
class Case:
    code: str
    trigger: Document
    clean: Document
    host: Optional[Callable[[FakeHost], Any]] = None
    driver_roots: tuple[str, ...] = ("/", "/run/nvidia/driver")
    id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    settings: Optional[Settings] = None


def two_gpu_node(host: FakeHost) -> None:
    fakenodes.two_gpu_node(host)


def driver_on_host(host: FakeHost) -> None:
    host.file("/usr/lib/x86_64-linux-gnu/libcuda.so.1").executable("/usr/bin/nvidia-ctk")
    host.directory("/run/nvidia/driver")


def stray_host_nodes(host: FakeHost) -> None:
    host.device("/dev/nvidia0", "c", 195, 0).device("/dev/nvidiactl", "c", 195, 255)


def cdi_spec(*nodes: dict[str, Any]) -> Callable[[FakeHost], Any]:
    """A host with /etc/cdi/gpu.json defining example.com/gpu=0 with these device nodes."""
    device = {"name": "0", "containerEdits": {"deviceNodes": list(nodes)}}
    spec = {"cdiVersion": "0.5.0", "kind": "example.com/gpu", "devices": [device]}
    return lambda host: host.text("/etc/cdi/gpu.json", json.dumps(spec))


def cdi_node_on_host(host: FakeHost) -> None:
    cdi_spec({"path": "/dev/nvidia0"})(host)
    host.device("/dev/nvidia0", "c", 195, 0)
    os.chmod(host.root / "dev/nvidia0", 0o666)


GPU0 = {"cdi.k8s.io/gpu": "example.com/gpu=0"}


CASES = [
    Case("DOC001", b'{"ociVersion": "1.0.2",}', b'{"ociVersion": "1.0.2"}'),
    Case("DOC001", b"", b'{"ociVersion": "1.0.2"}', id="empty"),
    Case("DOC001", b'{"ociVersion": "1.0.2", "x": NaN}', b'{"ociVersion": "1.0.2", "x": 0}', id="nan"),
    Case(
        "DOC002", b'{"ociVersion": "1.0.2", "hostname": "h\xe9"}', '{"ociVersion": "1.0.2", "hostname": "hé"}'.encode()
    ),
    Case("DOC003", b"[" * 20000 + b"]" * 20000, b"[" * 50 + b"]" * 50),
    Case("DOC005", b'{"ociVersion": "1.0.2", "hostname": "a", "hostname": "b"}', b'{"ociVersion": "1.0.2"}'),
    Case("SCH001", {"ociVersion": V, "linux": {"devices": [{"path": "/dev/x", "type": "c", "major": "1"}]}}, spec()),
    Case(
        "SCH001",
        {"id": "x", "status": "paused", "bundle": "/b", "ociVersion": V},
        {"id": "x", "status": "created", "bundle": "/b", "ociVersion": V},
        id="state",
    ),
    Case("SCH001", [], spec(), id="array"),
    Case("SCH001", "config", spec(), id="string"),
    Case("DEV001", spec([dev("/dev/fuse", 10, 229), dev("/dev/fuse", 10, 229)]), spec([dev("/dev/fuse", 10, 229)])),
    Case("DEV002", spec(gpu_set(dev("/dev/nvidia0", 195, 1))), spec(gpu_set(dev("/dev/nvidia1", 195, 1)))),
    Case("DEV003", spec(gpu_set(), rules=DENY_ALL), spec(gpu_set())),
    Case(
        "DEV003",
        spec(gpu_set(), rules=[*DENY_ALL, allow(195, 255), {**allow(195, 0), "access": "r"}]),
        spec(gpu_set(), rules=ALLOW_ALL),
        id="read-only",
    ),
    Case(
        "DEV004",
        spec(gpu_set(), mounts=[bind("/run/nvidia/driver/dev/nvidia0", "/dev/nvidia0")]),
        spec(gpu_set(), mounts=[bind("/run/nvidia/driver/dev", "/host/dev")]),
    ),
    Case(
        "DEV004",
        spec(gpu_set(), mounts=[bind("/dev", "/dev")]),
        spec(gpu_set(), mounts=[{"destination": "/dev", "type": "tmpfs", "source": "tmpfs"}]),
        id="parent",
    ),
    Case("DEV005", spec([dev("/dev/null", 195, 0)]), spec([dev("/dev/null", 1, 3)])),
    Case(
        "DEV006",
        spec([{**dev("/dev/nvidia0", 195, 0), "fileMode": 0o20666}, dev("/dev/nvidiactl", 195, 255)]),
        spec([{**dev("/dev/nvidia0", 195, 0), "fileMode": 0o666}, dev("/dev/nvidiactl", 195, 255)]),
    ),
    Case("CFG001", spec(linux={"rootfsPropagation": "rslave"}), spec(linux={"rootfsPropagation": "slave"})),
    Case("CFG002", spec(process={"cwd": "workspace"}), spec(process={"cwd": "/workspace"})),
    Case("HOOK001", hook("createRuntime", path="nvidia-ctk"), hook("createRuntime")),
    Case("HOOK002", hook("poststop", timeout=0), hook("poststop", timeout=1)),
    Case("HOOK003", hook("createContainer", env=["DEBUG=1"]), hook("createContainer", env=["DEBUG=1", "PATH=/bin"])),
    Case("HOOK004", hook("prestart"), hook("createRuntime")),
    Case(
        "HOOK005",
        hook("createRuntime"),
        hook("createRuntime"),
        host=lambda h: h.directory("/usr/bin"),
        extra={"clean_host": lambda h: h.executable("/usr/bin/hook")},
    ),
    Case(
        "HOOK006",
        hook("createRuntime"),
        hook("createRuntime"),
        host=lambda h: h.file("/usr/bin/hook", 0o644),
        extra={"clean_host": lambda h: h.executable("/usr/bin/hook")},
    ),
    Case("GPU001", spec([dev("/dev/nvidia0", 195, 0)]), spec(gpu_set())),
    Case("GPU002", spec([dev("/dev/nvidia-uvm", 510, 0)]), spec(gpu_set(dev("/dev/nvidia-uvm", 510, 0)))),
    Case(
        "GPU002",
        spec(gpu_set(dev("/dev/nvidia-uvm-tools", 510, 1))),
        spec(gpu_set(dev("/dev/nvidia-uvm", 510, 0), dev("/dev/nvidia-uvm-tools", 510, 1))),
        id="tools",
    ),
    Case(
        "GPU003",
        spec([dev("/dev/nvidiactl", 195, 255), dev("/dev/nvidia1", 195, 0)]),
        spec([dev("/dev/nvidiactl", 195, 255), dev("/dev/nvidia1", 195, 1)]),
    ),
    Case(
        "GPU003",
        spec(gpu_set(dev("/dev/nvidia-uvm", 510, 0), dev("/dev/nvidia-uvm-tools", 511, 1))),
        spec(gpu_set(dev("/dev/nvidia-uvm", 510, 0), dev("/dev/nvidia-uvm-tools", 510, 1))),
        id="uvm-major",
    ),
    Case(
        "GPU004",
        privileged(spec(process={"cwd": "/", "env": ["NVIDIA_VISIBLE_DEVICES=0"]})),
        spec(process={"cwd": "/", "env": ["NVIDIA_VISIBLE_DEVICES=0"]}),
    ),
    Case(
        "GPU004",
        spec(rules=ALLOW_ALL, process={"cwd": "/", "env": ["NVIDIA_VISIBLE_DEVICES=GPU-1a2b"]}),
        spec(rules=ALLOW_ALL, process={"cwd": "/", "env": ["NVIDIA_VISIBLE_DEVICES=all"]}),
        id="allow-all",
    ),
    Case(
        "GPU005",
        spec(annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=0, nvidia.com/gpu=1"}),
        spec(annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=0,nvidia.com/gpu=1"}),
    ),
    Case("GPU005", spec(annotations={"cdi.k8s.io/gpu": "gpu0"}), spec(annotations={"other/gpu": "gpu0"}), id="bare"),
    Case(
        "GPU005",
        state(annotations={"cdi.k8s.io/x": "gpu"}),
        state(annotations={"cdi.k8s.io/x": "a.io/gpu=0"}),
        id="state",
    ),
    Case("STA001", state(bundle="bundles/c"), state()),
    Case(
        "STA002",
        state(),
        state(),
        host=lambda h: h.directory("/bundles/c"),
        extra={"clean_host": lambda h: h.file("/bundles/c/config.json")},
    ),
    Case(
        "HOST001",
        spec(mounts=[bind("/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/libcuda.so.1")]),
        spec(mounts=[bind("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/libcuda.so.1")]),
        host=driver_on_host,
    ),
    Case(
        "HOST001",
        hook("createContainer", path="/run/nvidia/driver/usr/bin/nvidia-ctk"),
        hook("createContainer", path="/usr/bin/nvidia-ctk"),
        host=driver_on_host,
        id="hook",
    ),
    Case(
        "HOST002",
        privileged(spec(gpu_set(dev("/dev/nvidia1", 195, 1)))),
        privileged(spec(gpu_set(dev("/dev/nvidia1", 195, 1)))),
        host=lambda h: stray_host_nodes(h.device("/dev/nvidia1", "c", 195, 7)),
        extra={"clean_host": lambda h: stray_host_nodes(h.device("/dev/nvidia1", "c", 195, 1))},
    ),
    Case(
        "HOST003",
        spec(mounts=[bind("/opt/missing/libfoo.so", "/usr/lib/libfoo.so")]),
        spec(mounts=[bind("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/libcuda.so.1")]),
        host=driver_on_host,
    ),
    Case(
        "REC001",
        spec([dev("/dev/nvidia0", 195, 0)], annotations={"cdi.k8s.io/gpu": "example.com/gpu=1"}),
        spec([dev("/dev/nvidia0", 195, 0)], annotations=GPU0),
        host=cdi_spec(dev("/dev/nvidia0", 195, 0)),
    ),
    Case(
        "REC002",
        spec(process={"cwd": "/", "env": ["NVIDIA_VISIBLE_DEVICES=example.com/gpu=0,example.com/gpu="]}),
        spec(process={"cwd": "/", "env": ["NVIDIA_VISIBLE_DEVICES=0,1"]}),
        host=cdi_spec(dev("/dev/nvidia0", 195, 0)),
    ),
    Case(
        "REC003",
        spec(annotations=GPU0),
        spec([{**dev("/dev/nvidia0", 195, 0), "fileMode": 0o666}], annotations=GPU0),
        host=cdi_spec({"path": "/dev/nvidia0"}),
        extra={"clean_host": cdi_node_on_host},
    ),
    Case(
        "REC004",
        spec(gpu_set(dev("/dev/nvidia0", 195, 1))),
        spec(gpu_set()),
        host=lambda h: h.directory("/etc"),
        settings=Settings(policy_device_conflict="refuse"),
    ),
    Case(
        "REC005",
        spec(mounts=[bind("/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/libcuda.so.1")]),
        spec(mounts=[bind("/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/libcuda.so.1")]),
        host=lambda h: h.directory("/usr/lib/x86_64-linux-gnu"),
        extra={"clean_host": lambda h: h.file("/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.1")},
    ),
    Case(
        "REC006",
        spec(annotations=GPU0),
        spec([dev("/dev/nvidia0", 195, 0)], annotations=GPU0),
        host=cdi_spec(dev("/dev/nvidia0", 195, 0)),
    ),
]


def env(*entries: str, devices: Optional[list[Any]] = None) -> dict[str, Any]:
    return spec(devices, process={"cwd": "/", "env": ["PATH=/bin", *entries]})


ISSUE_REQUIREMENT = "NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=tesla,driver>=470,driver<471"

CASES += [
    Case("DRV001", env(ISSUE_REQUIREMENT), env("NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=470,driver<471"),
         host=two_gpu_node),
    Case("DRV001", env("CUDA_VERSION=12.8.0"), env("CUDA_VERSION=12.4.1"), host=two_gpu_node, id="legacy-image"),
    Case("DRV002", env("NVIDIA_REQUIRE_CUDA=cuda>=13.0 brand=tesla,driver>=550,driver<551"),
         env("NVIDIA_REQUIRE_CUDA=cuda>=13.0 driver>=550,driver<551"), host=two_gpu_node),
    Case("DRV002", env("NVIDIA_VISIBLE_DEVICES=1:0", devices=gpu_set()),
         env("NVIDIA_VISIBLE_DEVICES=1", devices=gpu_set()), host=two_gpu_node, id="mig"),
    Case("DRV003", env("NVIDIA_REQUIRE_CUDA=cuda=>12.0"), env("NVIDIA_REQUIRE_CUDA=cuda>=12.0"), host=two_gpu_node),
    Case("DRV004", env("NVIDIA_VISIBLE_DEVICES=7", devices=gpu_set()),
         env("NVIDIA_VISIBLE_DEVICES=1", devices=gpu_set()), host=two_gpu_node),
    Case("DRV005", env("NVIDIA_DRIVER_CAPABILITIES=compute,graphic"),
         env("NVIDIA_DRIVER_CAPABILITIES=compute,graphics")),
    Case("DRV006", env("NVIDIA_MIG_CONFIG_DEVICES=all"), privileged(env("NVIDIA_MIG_CONFIG_DEVICES=all"))),
    Case("DRV007", env("NVIDIA_VISIBLE_DEVICES=0"), env("NVIDIA_VISIBLE_DEVICES=0", devices=gpu_set())),
]  # fmt: skip


def _case_id(case: Case) -> str:
    return f"{case.code}-{case.id}" if case.id else case.code


OCI_KINDS = {"oci", "oci-state", "*"}


def test_every_oci_rule_has_a_case() -> None:
    # DOC004 needs a 32 MiB file (tests/cli/test_robustness); DOC006 is YAML (tests/formats/test_formats); DRV008
    # and DRV009 read the bundle's root filesystem beside a config file (tests/node/test_driver_rules).
    covered = {case.code for case in CASES} | {"DOC004", "DOC006", "DRV008", "DRV009"}
    assert covered == {rule.code for rule in all_rules() if rule.kinds & OCI_KINDS}


def _lint(
    document: Document, host_builder: Optional[Callable[[FakeHost], Any]], fake_host: FakeHost, case: Case
) -> list[str]:
    host_root = None
    if host_builder is not None:
        host_builder(fake_host)
        host_root = fake_host.root
    return codes(lint_value(document, host_root=host_root, driver_roots=case.driver_roots, settings=case.settings))


@pytest.mark.root
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_rule_fires_on_trigger(case: Case, fake_host: FakeHost, as_root: None) -> None:
    assert case.code in _lint(case.trigger, case.host, fake_host, case)


@pytest.mark.root
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_rule_silent_on_clean_twin(case: Case, fake_host: FakeHost, as_root: None) -> None:
    found = _lint(case.clean, case.extra.get("clean_host", case.host), fake_host, case)
    assert case.code not in found
    assert not [code for code in found if code.startswith(case.code[:3])], found


@pytest.mark.parametrize(
    ("value", "pointer", "code"),
    [
        (spec([{**dev("/dev/nvidia0", 195, 0), "fileMode": 8630}]), "/linux/devices/0/fileMode", "DEV006"),
        (spec(linux={"rootfsPropagation": "rshared"}), "/linux/rootfsPropagation", "CFG001"),
        (hook("poststart", timeout=0), "/hooks/poststart/0/timeout", "HOOK002"),
    ],
)
def test_specific_rule_replaces_the_schema_finding(value: dict[str, Any], pointer: str, code: str) -> None:
    full = [(f.code, f.pointer) for f in lint_value(value)]
    assert (code, pointer) in full and ("SCH001", pointer) not in full
    schema_only = [(f.code, f.pointer) for f in lint_value(value, schema_only=True)]
    assert schema_only == [("SCH001", pointer)]
