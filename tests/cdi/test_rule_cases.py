"""Every CDI rule: the smallest spec (or spec directory) that triggers it, and a clean twin that must not.

Specs are linted as the CDI cache reads them: each alone in a spec directory, through `lint --kind cdi DIR`.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Union

import pytest

from nvidia_oci_hook.kinds.cdi.releases import Judge, library
from nvidia_oci_hook.rules.base import all_rules
from tests.cdi.support import driver_on_host, lint_dirs, lint_spec, spec_bytes
from tests.helpers import FakeHost, codes
from tests.node.fakenodes import loaded_module

CTL = {"path": "/dev/nvidiactl"}
# Library v1.0.1 alone; and on behalf of an engine release, which leaves the other releases out of it.
V101 = (Judge(library("1.0.1")),)
CONTAINERD_2_1 = (Judge(library("1.0.1"), ("containerd 2.1.4",)),)
CONTAINERD_2_2 = (Judge(library("1.1.0"), ("containerd 2.2.1",)),)


def gpu(name: str = "0", *nodes: dict[str, Any], **edits: Any) -> dict[str, Any]:
    device_nodes = list(nodes) or [{"path": f"/dev/nvidia{name}"}]
    return {"name": name, "containerEdits": {"deviceNodes": device_nodes, **edits}}


def spec(
    *devices: dict[str, Any], version: str = "0.5.0", kind: str = "nvidia.com/gpu", **edits: Any
) -> dict[str, Any]:
    return {
        "cdiVersion": version,
        "kind": kind,
        "devices": list(devices) or [gpu()],
        "containerEdits": {"deviceNodes": [CTL], **edits},
    }


def with_key(value: dict[str, Any], pointer: str, key: str, item: Any) -> dict[str, Any]:
    """A copy of value with value[pointer][key] = item (pointer: slash-separated keys and indices)."""
    result = copy.deepcopy(value)
    target: Any = result
    for part in [p for p in pointer.split("/") if p]:
        target = target[int(part)] if isinstance(target, list) else target[part]
    target[key] = item
    return result


Spec = Union[bytes, dict[str, Any]]


@dataclass
class Case:
    code: str
    trigger: Spec
    clean: Spec
    host: Optional[Callable[[FakeHost], Any]] = None
    name: str = "spec.json"
    id: str = ""
    # Who judges (default: the newest library, with CDI107 and CDI109 on the other releases).
    judges: tuple[Judge, ...] = ()


CLEAN = spec()
CLEAN_TEXT = (
    b'{"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", '
    b'"devices": [{"name": "0", "containerEdits": {"env": ["A=/b"]}}]}'
)
MOUNT = {"hostPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
         "containerPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", "options": ["ro", "bind"]}  # fmt: skip


def driver_upgraded_on_host(host: FakeHost) -> None:
    """The driver on the host, module 550.54.15 loaded, a library of 545.23.08 left beside its own."""
    driver_on_host(host)
    loaded_module(host, "550.54.15")
    host.file("/usr/lib/x86_64-linux-gnu/libcuda.so.545.23.08")


CASES = [
    Case("CDI001", CLEAN_TEXT.replace(b'"kind"', b'"kind": "x/y", "kind"'), CLEAN_TEXT, id="duplicate-key"),
    Case("CDI001", CLEAN_TEXT.replace(b"A=/b", b"A=\\/b"), CLEAN_TEXT, id="escaped-slash"),
    Case("CDI001", CLEAN_TEXT.replace(b"A=/b", b"A=\\ud83d\\ude00"), CLEAN_TEXT.replace(b"A=/b", b"A=\\u00e9"),
         id="surrogate"),
    Case("CDI001", CLEAN_TEXT.replace(b"A=/b", b"A=\x7f"), CLEAN_TEXT, id="control-character"),
    Case("CDI001", b"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\nkind: nvidia.com/gpu\ndevices: [{name: '0', "
         b"containerEdits: {env: [A=b]}}]\n", b"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [{name: '0', "
         b"containerEdits: {env: [A=b]}}]\n", name="spec.yaml", id="yaml-duplicate-key"),
    Case("CDI002", with_key(CLEAN, "devices/0/containerEdits/deviceNodes/0", "readOnly", True),
         with_key(CLEAN, "devices/0/containerEdits/deviceNodes/0", "HostPath", "/dev/nvidia0")),
    Case("CDI002", with_key(CLEAN, "devices/0/containerEdits", "netDevices", [{"hostInterfaceName": "e", "name": "n"}]),
         CLEAN, id="net-devices", judges=V101),
    Case("CDI003", with_key(CLEAN, "devices/0/containerEdits/deviceNodes/0", "major", "195"),
         with_key(CLEAN, "devices/0/containerEdits/deviceNodes/0", "major", 195.0)),
    Case("CDI003", b"[]", CLEAN, id="not-an-object"),
    Case("CDI003", b"major: .nan\n", CLEAN, name="spec.yaml", id="nan"),
    Case("CDI004", spec(version="0.5"), spec(version="v0.5.0"), judges=CONTAINERD_2_1),
    Case("CDI004", spec(version="1.1.0"), spec(version="0.5.0"), id="v1.1.0", judges=V101),
    Case("CDI005", spec(gpu("0"), version="0.4.0"), spec(gpu("gpu0", {"path": "/dev/nvidia0"}), version="0.4.0")),
    Case("CDI005", spec(kind="nvidia.com/gpu.mig"), spec(kind="nvidia.com/gpu-mig"), id="dot-in-class"),
    Case("CDI006", spec(kind="nvidia.com"), spec(kind="nvidia.com/gpu")),
    Case("CDI006", spec(kind="x/gpu"), spec(kind="xy/gpu"), id="panic"),
    Case("CDI007", spec(gpu("gpu 0", {"path": "/dev/nvidia0"})), spec(gpu("gpu-0", {"path": "/dev/nvidia0"}))),
    Case("CDI008", spec(gpu("0"), gpu("0")), spec(gpu("0"), gpu("1"))),
    Case("CDI009", with_key(CLEAN, "", "devices", []), CLEAN),
    Case("CDI010", spec({"name": "0", "containerEdits": {}}), spec({"name": "0", "containerEdits": {"env": ["A=1"]}})),
    Case("CDI011", spec(env=["NVIDIA_VISIBLE_DEVICES"]), spec(env=["NVIDIA_VISIBLE_DEVICES="])),
    Case("CDI012", spec(gpu("0", {"path": "/dev/nvidia0", "type": "char"})),
         spec(gpu("0", {"path": "/dev/nvidia0", "type": "c", "major": 195}))),
    Case("CDI012", spec(gpu("0", {"path": "/dev/nvidia0", "permissions": "rwx"})),
         spec(gpu("0", {"path": "/dev/nvidia0", "permissions": "rw"})), id="permissions"),
    Case("CDI013", spec(hooks=[{"hookName": "create-container", "path": "/usr/bin/nvidia-cdi-hook"}]),
         spec(hooks=[{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook"}])),
    Case("CDI014", spec(mounts=[{**MOUNT, "hostPath": ""}]), spec(mounts=[MOUNT])),
    Case("CDI015", spec(gpu("0", intelRdt={"closID": "a/b"}), version="0.7.0"),
         spec(gpu("0", intelRdt={"closID": "ab"}), version="0.7.0"), judges=CONTAINERD_2_1),
    Case("CDI018", spec(gpu("0", netDevices=[{"hostInterfaceName": "eth1", "name": ""}]), version="1.1.0"),
         spec(gpu("0", netDevices=[{"hostInterfaceName": "eth1", "name": "net1"}]), version="1.1.0"),
         judges=CONTAINERD_2_2),
    Case("CDI016", b"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: '0'\n  containerEdits:\n"
         b"    deviceNodes:\n    - path: /dev/nvidia0\n    -\n"
         b"containerEdits:\n  deviceNodes: [{path: /dev/nvidiactl}]\n",
         spec(), name="spec.yaml"),
    Case("CDI017", b"\xef\xbb\xbf" + CLEAN_TEXT, CLEAN_TEXT),
    Case("CDI017", b"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [{name: '0', containerEdits: {env: [A=b]}}]\n"
         b"---\nfoo: 1\n", CLEAN, name="spec.yaml", id="two-documents"),
    Case("CDI101", spec(gpu("3")), spec(gpu("0")), host=driver_on_host),
    Case("CDI102", spec(gpu("0", {"path": "/dev/nvidia0", "hostPath": "/run/nvidia/driver/dev/nvidia0"})),
         spec(gpu("0", {"path": "/dev/nvidia0", "hostPath": "/dev/nvidia0"})), host=driver_on_host),
    Case("CDI103", spec(gpu("0", {"path": "/dev/nvidia0", "type": "b"})),
         spec(gpu("0", {"path": "/dev/nvidia0", "type": "c"})), host=driver_on_host),
    Case("CDI103", spec(gpu("0", {"path": "/dev/nvidia0", "hostPath": "/usr/bin/nvidia-smi"})),
         spec(gpu("0", {"path": "/dev/nvidia0", "hostPath": "/usr/bin/nvidia-smi", "type": "c", "major": 195})),
         host=driver_on_host, id="not-a-device"),
    Case("CDI104", spec(mounts=[{**MOUNT, "hostPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05"}]),
         spec(mounts=[MOUNT]), host=driver_on_host),
    Case("CDI104", spec(hooks=[{"hookName": "createContainer", "path": "/usr/local/bin/nvidia-cdi-hook"}]),
         spec(hooks=[{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook"}]), host=driver_on_host,
         id="hook"),
    Case("CDI105", spec(gpu("0"), gpu("1", {"path": "/dev/nvidia0", "hostPath": "/dev/nvidia1"})),
         spec(gpu("0"), gpu("1"), gpu("all", {"path": "/dev/nvidia0"}, {"path": "/dev/nvidia1"}))),
    Case("CDI105", spec(gpu("0", {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}),
                        gpu("1", {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 1})),
         spec(gpu("0"), gpu("all", {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0})), id="numbers"),
    Case("CDI106", with_key(spec(), "", "containerEdits", {"env": ["A=1"]}), spec()),
    Case("CDI107", spec(gpu("0", intelRdt={"closID": "gpu", "enableCMT": True}), version="0.7.0"),
         spec(version="0.5.0"), judges=V101),
    Case("CDI108", spec(version="1.0.0"), spec(version="0.5.0"), judges=CONTAINERD_2_1),
    Case("CDI108", spec(version="0.7.0"), spec(gpu("0", intelRdt={"closID": "gpu"}), version="0.7.0"), id="0.7.0",
         judges=CONTAINERD_2_1),
    Case("CDI109", spec(version="1.1.0"), spec(version="0.5.0")),
    Case("CDI109", spec(gpu("0", intelRdt={"closID": "gpu"}), version="0.7.0"), spec(), id="intel-rdt"),
    # The old driver's library is still there: the spec loads and mounts, NVML refuses it.
    Case("CDI110", spec(mounts=[{**MOUNT, "hostPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.545.23.08"}]),
         spec(mounts=[MOUNT]), host=driver_upgraded_on_host),
]  # fmt: skip


def _case_id(case: Case) -> str:
    return f"{case.code}-{case.id}" if case.id else case.code


def _lint(tmp_path: Path, value: Spec, case: Case, fake_host: FakeHost) -> list[str]:
    host_root = None
    if case.host is not None:
        case.host(fake_host)
        host_root = fake_host.root
    return codes(lint_spec(tmp_path, value, case.name, host_root=host_root, judges=case.judges))


@pytest.mark.root
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_rule_fires_on_trigger(case: Case, tmp_path: Path, fake_host: FakeHost, as_root: None) -> None:
    assert case.code in _lint(tmp_path, case.trigger, case, fake_host)


@pytest.mark.root
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_clean_twin_has_no_cdi_finding(case: Case, tmp_path: Path, fake_host: FakeHost, as_root: None) -> None:
    found = _lint(tmp_path, case.clean, case, fake_host)
    assert not [code for code in found if code.startswith("CDI")], found


# ---------------------------------------------------------------------------------------------------------------
# Spec directories


def _write(directory: Path, name: str, value: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(spec_bytes(value, name.endswith(".yaml")))


DirCase = tuple[str, Callable[[Path], list[Path]], Callable[[Path], list[Path]]]


def _conflict(root: Path) -> list[Path]:
    _write(root / "etc", "a.json", spec(gpu("0")))
    _write(root / "etc", "b.yaml", spec(gpu("0")))
    return [root / "etc"]


def _no_conflict(root: Path) -> list[Path]:
    _write(root / "etc", "a.json", spec(gpu("0")))
    _write(root / "etc", "b.yaml", spec(gpu("1")))
    _write(root / "etc", "c.json", spec(gpu("0"), kind="example.com/gpu"))
    return [root / "etc"]


def _override(root: Path) -> list[Path]:
    _write(root / "etc", "a.json", spec(gpu("0")))
    _write(root / "run", "a.json", spec(gpu("0")))
    return [root / "etc", root / "run"]


def _separate(root: Path) -> list[Path]:
    _write(root / "etc", "a.json", spec(gpu("0")))
    _write(root / "run", "a.json", spec(gpu("1")))
    return [root / "etc", root / "run"]


def _yml(root: Path) -> list[Path]:
    _write(root / "etc", "a.yml", spec(gpu("0")))
    _write(root / "etc" / "sub", "b.yaml", spec(gpu("1")))
    return [root / "etc"]


def _yaml(root: Path) -> list[Path]:
    _write(root / "etc", "a.yaml", spec(gpu("0")))
    (root / "etc" / "notes.yml").write_text("not a spec\n")
    (root / "etc" / "sub").mkdir()
    return [root / "etc"]


def _linked(root: Path) -> list[Path]:
    _write(root / "real", "a.json", spec(gpu("0")))
    os.symlink(root / "real", root / "etc")
    return [root / "etc"]


def _real(root: Path) -> list[Path]:
    _write(root / "real", "a.json", spec(gpu("0")))
    return [root / "real"]


DIR_CASES: list[DirCase] = [
    ("CDI201", _conflict, _no_conflict),
    ("CDI202", _override, _separate),
    ("CDI203", _yml, _yaml),
    ("CDI204", _linked, _real),
]


@pytest.mark.parametrize(("code", "trigger", "clean"), DIR_CASES, ids=[case[0] for case in DIR_CASES])
def test_directory_rule_fires_on_trigger_and_not_on_clean_twin(
    code: str, trigger: Callable[[Path], list[Path]], clean: Callable[[Path], list[Path]], tmp_path: Path
) -> None:
    assert code in codes(lint_dirs(trigger(tmp_path / "trigger")))
    found = codes(lint_dirs(clean(tmp_path / "clean")))
    assert not [c for c in found if c.startswith("CDI")], found


def test_every_cdi_rule_has_a_case() -> None:
    covered = {case.code for case in CASES} | {code for code, *_ in DIR_CASES}
    assert covered == {rule.code for rule in all_rules() if rule.kinds & {"cdi", "cdi-dirs"}}
