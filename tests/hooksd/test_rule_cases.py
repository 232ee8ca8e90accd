"""Every HKD rule: the smallest hooks file (or directory tree) that triggers it, and a clean twin that must not.

The tables must name every rule of the hooksd and hooksd-dirs kinds; a rule without a case fails
test_every_hooksd_rule_has_a_case. Host-aware rules get a fake host root built per case.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Union

import pytest

from nvidia_oci_hook.kinds.hooksd.directories import HOOKSD_DIRS
from nvidia_oci_hook.kinds.hooksd.hook_file import HOOKSD
from nvidia_oci_hook.rules.base import all_rules
from tests.helpers import FakeHost
from tests.hooksd.dir_cases import Special, hook
from tests.hooksd.helpers import codes, corpus_host, lint_dirs, lint_file

Doc = Union[bytes, dict[str, Any], list[Any], str, None]


def v1(**fields: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "version": "1.0.0",
        "hook": {"path": "/bin/true"},
        "when": {"always": True},
        "stages": ["createRuntime"],
    }
    value.update(fields)
    return value


def v0(**fields: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"hook": "/bin/true", "stages": ["createRuntime"], "cmds": [".*"]}
    value.update(fields)
    return value


def raw(document: Doc) -> bytes:
    return document if isinstance(document, bytes) else json.dumps(document).encode()


@dataclass
class Case:
    code: str
    trigger: Doc
    clean: Doc
    id: str = ""
    host: Optional[Callable[[FakeHost], Any]] = corpus_host
    driver_roots: tuple[str, ...] = ("/", "/run/nvidia/driver")


def nvidia_ctk_on_host(host: FakeHost) -> None:
    corpus_host(host).executable("/usr/bin/nvidia-ctk").directory("/run/nvidia/driver")


FILE_CASES = [
    Case("HKD001", v1(version="2.0.0"), v1()),
    Case("HKD001", v1(version="1.0"), v0(version="0.1.0"), id="short"),
    Case("HKD002", v1(stages="createRuntime"), v1()),
    Case("HKD002", [], v1(), id="array"),
    Case("HKD002", {"hook": {"path": "/bin/true"}, "stages": ["createRuntime"]}, v0(), id="no-version"),
    Case("HKD002", v1(hook={"path": "/bin/true", "timeout": 2.5}), v1(hook={"path": "/bin/true", "timeout": 2})),
    Case("HKD002", {"version": 1}, v1(), id="version-type"),
    Case("HKD003", {"version": "1.0.0", "hook": {"path": "/bin/true"}, "when": {"always": True}}, v1()),
    Case("HKD003", v1(hook={"args": ["x"]}), v1(hook={"path": "/bin/true", "args": ["x"]}), id="path"),
    Case("HKD003", {"cmds": [".*"], "stages": ["createRuntime"]}, v0(), id="legacy"),
    Case("HKD004", v0(stage=["prestart"]), v0(stage=None)),
    Case("HKD004", v0(cmd=["x"]), v0(cmd=None), id="cmd"),
    Case("HKD005", v1(when={"commands": ["(?=x)"]}), v1(when={"commands": ["^x"]})),
    Case("HKD005", v1(when={"annotations": {"a": "\\Z"}}), v1(when={"annotations": {"a": "\\z"}}), id="value"),
    Case("HKD005", v1(when={"commands": ["(?<n>x)"]}), v1(when={"commands": ["(?P<n>x)"]}), id="newer-go"),
    Case("HKD005", v0(annotations=["(", "x"]), v0(annotations=["(", ")"]), id="legacy-joined"),
    Case("HKD006", v1(stages=["pre-start"]), v1(stages=["poststop"])),
    Case("HKD007", v1(hook={"path": "/bin/true\u0000"}), v1()),
    Case("HKD007", v1(hook={"path": "/" + "a" * 4096}), v1(hook={"path": "/bin/" + "a" * 200}), id="long", host=None),
    Case("HKD008", v1(hook={"path": "/etc/passwd/hook"}), v1(hook={"path": "/bin/true"})),
    Case("HKD008", v1(hook={"path": "/bin/" + "x" * 256}), v1(hook={"path": "/bin/true/"[:-1]}), id="name-max"),
    Case("HKD101", v1(hook={"path": "/usr/bin/nvidia-ctk"}), v1()),
    Case(
        "HKD101",
        v1(hook={"path": "/run/nvidia/driver/usr/bin/nvidia-ctk"}),
        v1(hook={"path": "/usr/bin/nvidia-ctk"}),
        id="driver-root",
        host=nvidia_ctk_on_host,
    ),
    Case("HKD102", v1(hook={"path": "/etc/passwd"}), v1()),
    Case("HKD102", v1(hook={"path": "/etc"}), v1(), id="directory"),
    Case("HKD103", v1(when={}), v1()),
    Case("HKD103", v1(when={"always": False}), v1(when={"always": True}), id="always-false"),
    Case("HKD103", v1(when={"hasBindMounts": False}), v1(when={"hasBindMounts": True}), id="bind-false"),
    Case("HKD103", v0(cmds=None), v0(cmds=None, annotation=[]), id="legacy"),
    Case("HKD104", v1(stages=[]), v1()),
    Case("HKD105", v1(hook={"path": "bin/true"}), v1()),
    Case("HKD106", v1(hook={"path": "/bin/true", "timeout": 0}), v1(hook={"path": "/bin/true", "timeout": 1})),
    Case(
        "HKD107", v1(hook={"path": "/bin/true", "env": ["A=1"]}), v1(hook={"path": "/bin/true", "env": ["PATH=/bin"]})
    ),
    Case("HKD108", v1(stages=["prestart"]), v1()),
    Case("HKD109", v1(hook={"path": "/bin/cat"}, stages=["precreate"]), v1(hook={"path": "/bin/cat"})),
    Case("HKD110", v1(when={"always": True, "command": ["x"]}), v1(when={"always": True, "Commands": ["x"]})),
    Case("HKD110", v0(args=["x"]), v0(arguments=["x"]), id="legacy"),
    Case("HKD111", v1(stages=["prestart", "createRuntime"]), v1(stages=["createRuntime", "poststop"])),
]

Tree = dict[str, Union[str, Special]]


@dataclass
class DirCase:
    code: str
    trigger: Tree
    clean: Tree
    dirs: tuple[str, ...] = ("usr",)
    crio_reads: bool = False
    id: str = ""


DIR_CASES = [
    DirCase("HKD201", {"usr/nvidia": hook()}, {"usr/nvidia.json": hook()}),
    DirCase("HKD201", {"usr/gone.json": Special("link", "/nonexistent")}, {"usr/ok.json": hook()}, id="dangling"),
    DirCase("HKD201", {"usr": "x\n"}, {"usr/ok.json": hook()}, crio_reads=True, id="crio-not-a-directory"),
    DirCase("HKD202", {"usr/README": "text\n"}, {"usr/ok.json": hook()}),
    DirCase("HKD203", {"a/x.json": hook(), "b/x.json": hook()}, {"a/x.json": hook(), "b/y.json": hook()}, ("a", "b")),
    DirCase(
        "HKD204",
        {"usr/f.json": hook(path="/bin/cat", stages=["precreate"])},
        {"usr/f.json": hook(path="/bin/cat")},
        crio_reads=True,
    ),
    DirCase("HKD205", {"usr/x.json": Special("dir")}, {"usr/x": Special("dir")}),
    DirCase("HKD205", {"usr/x.json": Special("fifo")}, {"usr/x.json": hook()}, id="fifo"),
    DirCase("HKD205", {"usr": "not a directory\n"}, {"usr/ok.json": hook()}, id="not-a-directory"),
    DirCase(
        "HKD206",
        {"usr/a.json": hook(path="/nonexistent"), "usr/b.json": hook(version="2")},
        {"usr/b.json": hook(path="/nonexistent"), "usr/a.json": hook(version="2")},
    ),
    DirCase(
        "HKD207",
        {"usr/a.json": hook("w"), "usr/b.json": hook("w", stages=["prestart"])},
        {"usr/a.json": hook("w"), "usr/b.json": hook("v")},
    ),
]


def _id(case: Union[Case, DirCase]) -> str:
    return f"{case.code}-{case.id}" if case.id else case.code


def test_every_hooksd_rule_has_a_case() -> None:
    covered = {case.code for case in FILE_CASES} | {case.code for case in DIR_CASES}
    assert covered == {rule.code for rule in all_rules() if rule.kinds & {HOOKSD, HOOKSD_DIRS}}
    assert all(rule.code.startswith("HKD") for rule in all_rules() if rule.kinds & {HOOKSD, HOOKSD_DIRS})


def _file_codes(document: Doc, case: Case, fake_host: FakeHost) -> list[str]:
    host_root: Optional[Path] = None
    if case.host is not None:
        case.host(fake_host)
        host_root = fake_host.root
    return codes(lint_file(raw(document), host_root=host_root, driver_roots=case.driver_roots))


@pytest.mark.parametrize("case", FILE_CASES, ids=_id)
def test_rule_fires_on_trigger(case: Case, fake_host: FakeHost) -> None:
    assert case.code in _file_codes(case.trigger, case, fake_host)


@pytest.mark.parametrize("case", FILE_CASES, ids=_id)
def test_rule_silent_on_clean_twin(case: Case, fake_host: FakeHost) -> None:
    found = _file_codes(case.clean, case, fake_host)
    assert case.code not in found
    assert not [code for code in found if code.startswith("HKD")], found


def _dir_codes(tree: Tree, case: DirCase, tmp_path: Path, fake_host: FakeHost) -> list[str]:
    from tests.hooksd.dir_cases import DirCase as Built
    from tests.hooksd.dir_cases import build

    directories = build(Built(case.id, list(case.dirs), tree, {}), tmp_path / "tree", tmp_path / "marker")
    hits = lint_dirs(directories, crio_reads=case.crio_reads, host_root=corpus_host(fake_host).root)
    return codes(hits)


@pytest.mark.parametrize("case", DIR_CASES, ids=_id)
def test_directory_rule_fires_on_trigger(case: DirCase, tmp_path: Path, fake_host: FakeHost) -> None:
    assert case.code in _dir_codes(case.trigger, case, tmp_path, fake_host)


@pytest.mark.parametrize("case", DIR_CASES, ids=_id)
def test_directory_rule_silent_on_clean_twin(case: DirCase, tmp_path: Path, fake_host: FakeHost) -> None:
    assert case.code not in _dir_codes(case.clean, case, tmp_path, fake_host)


@pytest.mark.parametrize(
    ("document", "pointer", "line"),
    [
        (b'{"version": "1.0.0",\n "hook": {"path": "/bin/true"},\n "when": {"always": true},\n "stages": 7}',
         "/stages", 4),
        (b'{"version": "1.0.0", "hook": {"path": "/bin/true"},\n "when": {"commands": ["x", "(?=y)"]},\n'
         b' "stages": ["createRuntime"]}', "/when/commands/1", 2),
        (b'{"hook": "/bin/true",\n "cmds": [".*"],\n "stage": ["prestart"],\n "stages": ["poststop"]}', "/stage", 3),
    ],
)  # fmt: skip
def test_loader_findings_point_at_the_value(document: bytes, pointer: str, line: int) -> None:
    hits = [hit for hit in lint_file(document) if hit.code.startswith("HKD0")]
    assert [(hit.pointer, hit.line) for hit in hits] == [(pointer, line)]


def test_no_host_finding_on_a_file_the_loader_refuses_before_the_lookup(fake_host: FakeHost) -> None:
    refused_early = v1(hook={"path": "/usr/bin/missing", "timeout": "5"})
    found = codes(lint_file(raw(refused_early), host_root=corpus_host(fake_host).root))
    assert found == ["HKD002"]
