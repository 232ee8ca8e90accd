"""Every CTD rule: the smallest config that triggers it and a clean twin; and the pieces the rules stand on.

The table must name every rule of the containerd kind; a rule without a case fails
test_every_containerd_rule_has_a_case.
"""

from __future__ import annotations

import copy
import datetime
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.findings import Finding, Severity
from nvidia_oci_hook.formats.tomltext import parse_toml
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.containerd.config import cdi_spec_dirs
from nvidia_oci_hook.kinds.containerd.kind import CONTAINERD, is_containerd_config
from nvidia_oci_hook.kinds.containerd.pathmatch import go_path_match
from nvidia_oci_hook.kinds.containerd.structs import MapOf, Table, plugin_tables, server_table
from nvidia_oci_hook.kinds.containerd.versions import describe_series
from nvidia_oci_hook.kinds.document import parse_document
from nvidia_oci_hook.lint import LintOptions, active_rules, lint_document
from nvidia_oci_hook.rules.base import Context, all_rules
from tests.containerd.corpus import entries
from tests.crio.key_mutations import assert_written_back_and_linted
from tests.crio.key_mutations import mutations as key_mutations
from tests.helpers import FakeHost

V2 = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n'
V2_RUNTIMES = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes'
V3 = 'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\n'
NVIDIA = "/usr/bin/nvidia-container-runtime"


def runc_and(name: str, options: str = "", extra: str = "", runc_options: str = "") -> str:
    """A version 2 config with runc and one more runc runtime."""
    text = f'{V2_RUNTIMES}.runc]\n  runtime_type = "io.containerd.runc.v2"\n'
    if runc_options:
        text += f"{V2_RUNTIMES[12:]}.runc.options]\n{runc_options}\n"
    text += f'{V2_RUNTIMES[12:]}.{name}]\n  runtime_type = "io.containerd.runc.v2"\n{extra}\n'
    if options:
        text += f"{V2_RUNTIMES[12:]}.{name}.options]\n{options}\n"
    return text


def lint_toml(
    text: Union[str, bytes], *, host_root: Optional[Path] = None, schema_only: bool = False, name: str = "config.toml"
) -> list[Finding]:
    options = LintOptions(kind=CONTAINERD, offline=host_root is None, schema_only=schema_only)
    raw = text if isinstance(text, bytes) else text.encode()
    document = parse_document(name, raw, CONTAINERD)
    host = HostView(str(host_root)) if host_root is not None else None
    return lint_document(document, active_rules(options), Context(host=host))


@dataclass
class Case:
    code: str
    trigger: Union[str, bytes]
    clean: Union[str, bytes]
    host: Optional[Callable[[FakeHost], Any]] = None
    clean_host: Optional[Callable[[FakeHost], Any]] = None
    id: str = ""
    line: Optional[int] = None  # the trigger's line, where it matters
    extra: dict[str, Any] = field(default_factory=dict)


def nothing(host: FakeHost) -> None:
    host.directory("/etc")


CASES = [
    Case("CTD001", V2 + 'enable_selinux = "yes"\n', V2 + "enable_selinux = true\n", line=3),
    Case("CTD001", 'version = "2"\n', "version = 2\n", id="version"),
    Case("CTD001", V2 + 'cdi_spec_dirs = "/etc/cdi"\n', V2 + 'cdi_spec_dirs = ["/etc/cdi"]\n', id="array"),
    Case("CTD001", "version = 2\nplugins = 1\n", "version = 2\n[plugins]\n", id="plugins"),
    Case("CTD001", f'{V2_RUNTIMES}]\n  runc = "x"\n', runc_and("x"), id="runtime-entry"),
    Case("CTD002", "version = 5\n", "version = 2\n"),
    Case("CTD002", "version = -1\n", "version = 1\n", id="negative"),
    Case("CTD003", "version = 2\n[plugins.cri]\nenable_selinux = true\n", V2 + "enable_selinux = true\n", line=2),
    Case("CTD003", 'version = 3\ndisabled_plugins = ["cri"]\n', 'version = 3\ndisabled_plugins = ["a.b"]\n', id="v3"),
    Case("CTD004", "version = 2\nroot = 2024-01-31\n", 'version = 2\nroot = "/var/lib/containerd"\n'),
    Case(
        "CTD004",
        'version = 2\n[plugins."io.containerd.x.v1.y"]\nwhen = 2024-01-31\n',
        'version = 3\n[plugins."io.containerd.x.v1.y"]\nwhen = 2024-01-31\n',
        id="v3",
    ),
    Case(
        "CTD005",
        'version = 2\nimports = ["/etc/containerd/conf.d/99-nvidia.toml"]\n',
        'version = 2\nimports = ["/etc/containerd/conf.d/99-nvidia.toml"]\n',
        host=nothing,
        clean_host=lambda h: h.file("/etc/containerd/conf.d/99-nvidia.toml"),
    ),
    Case(
        "CTD005",
        'version = 2\nimports = ["/etc/containerd/conf.d"]\n',
        'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n',
        host=lambda h: h.directory("/etc/containerd/conf.d"),
        clean_host=nothing,
        id="directory",
    ),
    Case("CTD006", b'version = 2\nroot = "/var/lib/donn\xe9es"\n', 'version = 2\nroot = "/var/lib/donn\u00e9es"\n'),
    Case(
        "CTD101",
        'version = 3\n[plugins."io.containerd.grpc.v1.cri"]\nenable_cdi = true\n',
        V3 + "enable_cdi = true\n",
        line=3,
    ),
    Case(
        "CTD101",
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\ncdi_spec_dirs = ["/etc/cdi"]\n',
        V2 + 'cdi_spec_dirs = ["/etc/cdi"]\n',
        id="nested",
    ),
    Case("CTD102", 'version = 2\n[grpc]\nadress = "/run/c.sock"\n', 'version = 2\n[grpc]\naddress = "/run/c.sock"\n'),
    Case(
        "CTD102",
        runc_and("nvidia", extra=f'  BinaryName = "{NVIDIA}"'),
        runc_and("nvidia", options=f'  BinaryName = "{NVIDIA}"', extra='  container_annotations = ["cdi.k8s.io/*"]'),
        id="option-in-runtime-table",
    ),
    Case(
        "CTD102",
        "version = 3\n[plugins.cri]\n",
        'version = 3\n[plugins."io.containerd.monitor.v1.cgroups"]\n',
        id="v3-short-plugin-name",
    ),
    Case(
        "CTD102",
        V2 + 'plugins."io.containerd.grpc.v1.cri".enable_selinux = true\n',
        V2 + "enable_selinux = true\n",
        id="dotted-key-from-the-top",
        line=3,
    ),
    Case(
        "CTD102",
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n"default_runtime_name" = "runc"\n'
        '"runtimes.runc.runtime_type" = "io.containerd.runc.v2"\n',
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n"default_runtime_name" = "runc"\n'
        'runtimes.runc.runtime_type = "io.containerd.runc.v2"\n',
        id="quoted-dotted-key",
        line=4,
    ),
    Case("CTD103", V2 + "enable_cdi = true\n", V2 + "enable_selinux = true\n"),
    Case("CTD103", V2 + "systemd_cgroup = false\n", V2 + "enable_selinux = false\n", id="removed-in-2"),
    Case("CTD103", V2 + "Enable_Selinux = true\n", V2 + "ENABLE_SELINUX = true\n", id="spelling"),
    Case(
        "CTD104",
        '[plugins."io.containerd.grpc.v1.cri"]\nenable_selinux = true\n',
        V2 + "enable_selinux = true\n",
        line=1,
    ),
    Case("CTD105", "[plugins.cri]\nenable_selinux = true\n", V2 + "enable_selinux = true\n"),
    Case("CTD106", "version = 3\n", "version = 2\n"),
    Case(
        "CTD110",
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\ndefault_runtime_name = "nvidia"\n',
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\ndefault_runtime_name = "runc"\n',
        line=3,
    ),
    Case(
        "CTD110",
        f'{V2_RUNTIMES}.kata]\nruntime_type = "io.containerd.kata.v2"\n',
        f'{V2_RUNTIMES}.kata]\nruntime_type = "io.containerd.kata.v2"\n'
        f'{V2_RUNTIMES[12:]}.runc]\nruntime_type = "io.containerd.runc.v2"\n',
        id="runc-replaced",
    ),
    Case(
        "CTD111",
        runc_and("nvidia", f'BinaryName = "{NVIDIA}"', 'container_annotations = ["cdi.k8s.io/*"]'),
        runc_and("nvidia", f'BinaryName = "{NVIDIA}"', 'container_annotations = ["cdi.k8s.io/*"]'),
        host=nothing,
        clean_host=lambda h: h.executable(NVIDIA),
    ),
    Case(
        "CTD111",
        runc_and("nvidia", 'BinaryName = "nvidia-container-runtime"', 'container_annotations = ["cdi.k8s.io/*"]'),
        runc_and("nvidia", 'BinaryName = "nvidia-container-runtime"', 'container_annotations = ["cdi.k8s.io/*"]'),
        host=nothing,
        clean_host=lambda h: h.executable("/usr/local/bin/nvidia-container-runtime"),
        id="path-lookup",
    ),
    Case(
        "CTD111",
        runc_and("nvidia", f'BinaryName = "{NVIDIA}"', 'container_annotations = ["cdi.k8s.io/*"]'),
        runc_and("nvidia", f'BinaryName = "{NVIDIA}"', 'container_annotations = ["cdi.k8s.io/*"]'),
        host=lambda h: h.file(NVIDIA, 0o644),
        clean_host=lambda h: h.executable(NVIDIA),
        id="not-executable",
    ),
    Case(
        "CTD111",
        runc_and("kata", extra='runtime_path = "/opt/kata/bin/containerd-shim-kata-v2"'),
        runc_and("kata", extra='runtime_path = "/opt/kata/bin/containerd-shim-kata-v2"'),
        host=nothing,
        clean_host=lambda h: h.executable("/opt/kata/bin/containerd-shim-kata-v2"),
        id="runtime-path",
    ),
    Case(
        "CTD112",
        runc_and("nvidia", f'BinaryName = "{NVIDIA}"'),
        runc_and("nvidia", f'BinaryName = "{NVIDIA}"', 'container_annotations = ["cdi.k8s.io/*"]'),
    ),
    Case(
        "CTD112",
        runc_and("nvidia", f'BinaryName = "{NVIDIA}"', 'container_annotations = ["cdi.k8s.io*"]'),
        runc_and("nvidia", f'BinaryName = "{NVIDIA}"', 'container_annotations = ["*"]').replace(
            "version = 2\n", 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\nenable_cdi = true\n'
        ),
        id="pattern",
    ),
    Case(
        "CTD113",
        runc_and("gpu", "SystemdCgroup = false", runc_options="SystemdCgroup = true"),
        runc_and("gpu", "SystemdCgroup = true", runc_options="SystemdCgroup = true"),
    ),
    Case(
        "CTD114",
        runc_and("gpu", 'SystemdCgroup = "true"', runc_options="SystemdCgroup = true"),
        runc_and("gpu", "SystemdCgroup = true", runc_options="SystemdCgroup = true"),
    ),
    Case("CTD114", runc_and("gpu", "IoGid = 4294967296"), runc_and("gpu", "IoGid = 4294967295"), id="range"),
    Case("CTD115", V2 + "systemd_cgroup = true\n", V2 + "enable_selinux = true\n"),
    Case("CTD115", runc_and("gpu", extra="io_type = 'pipe'"), runc_and("gpu", extra="io_type = 'fifo'"), id="io-type"),
    Case(
        "CTD120",
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\nsnapshotter = "overlay"\n',
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\nsnapshotter = "overlayfs"\n',
    ),
    Case(
        "CTD120",
        'version = 3\n[plugins."io.containerd.cri.v1.images"]\nsnapshotter = "stargz"\n',
        'version = 3\n[proxy_plugins.stargz]\ntype = "snapshot"\naddress = "/run/stargz.sock"\n'
        '[plugins."io.containerd.cri.v1.images"]\nsnapshotter = "stargz"\n',
        id="proxy",
    ),
    Case(
        "CTD121",
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\nsnapshotter = "btrfs"\n',
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\nsnapshotter = "native"\n',
    ),
    Case(
        "CTD116",
        f"{V2_RUNTIMES}.runc.options]\nSystemdCgroup = true\n",
        f'{V2_RUNTIMES}.runc]\nruntime_type = "io.containerd.runc.v2"\n'
        f"{V2_RUNTIMES[12:]}.runc.options]\nSystemdCgroup = true\n",
    ),
]


def _case_id(case: Case) -> str:
    return f"{case.code}-{case.id}" if case.id else case.code


def test_every_containerd_rule_has_a_case() -> None:
    assert {case.code for case in CASES} == {r.code for r in all_rules() if CONTAINERD in r.kinds}


def _lint(text: Union[str, bytes], builder: Optional[Callable[[FakeHost], Any]], fake_host: FakeHost) -> list[Finding]:
    if builder is None:
        return lint_toml(text)
    builder(fake_host)
    return lint_toml(text, host_root=fake_host.root)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_rule_fires_on_trigger(case: Case, fake_host: FakeHost) -> None:
    findings = [f for f in _lint(case.trigger, case.host, fake_host) if f.code == case.code]
    assert findings, case.trigger
    assert all(f.message and f.hint and f.line is not None for f in findings)
    if case.line is not None:
        assert findings[0].line == case.line


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_rule_silent_on_clean_twin(case: Case, fake_host: FakeHost) -> None:
    found = _lint(case.clean, case.clean_host or case.host, fake_host)
    assert case.code not in {f.code for f in found}
    assert not [f for f in found if f.severity >= Severity.WARNING], [(f.code, f.message) for f in found]


def test_schema_only_keeps_exactly_the_refusals() -> None:
    codes = {code for code in active_rules(LintOptions(schema_only=True)) if code.startswith("CTD")}
    assert codes == {"CTD001", "CTD002", "CTD003", "CTD004", "CTD005", "CTD006"}
    findings = lint_toml(V2 + 'enable_cdi = "yes"\nsystemd_cgroup = true\n', schema_only=True)
    assert [(f.code, f.line) for f in findings] == [("CTD001", 3)]


def test_offline_drops_the_host_rules() -> None:
    offline = {code for code in active_rules(LintOptions(offline=True)) if code.startswith("CTD")}
    assert "CTD111" not in offline and "CTD005" not in offline and "CTD110" in offline


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("cdi.k8s.io/*", "cdi.k8s.io/gpu", True),
        ("cdi.k8s.io/*", "cdi.k8s.io/a/b", False),
        ("cdi.k8s.io*", "cdi.k8s.io/gpu", False),
        ("*", "cdi.k8s.io/gpu", False),
        ("cdi.k8s.io/[a-z]*", "cdi.k8s.io/gpu", True),
        ("cdi.k8s.io/[^a-z]*", "cdi.k8s.io/gpu", False),
        ("cdi.k8s.io/gp?", "cdi.k8s.io/gpu", True),
        ("a\\*", "a*", True),
        ("[", "[", False),
        ("[]a]", "a", False),
        ("x[b-a]", "xa", False),
        ("[^a]", "/", True),
        ("?", "/", False),
    ],
)
def test_go_path_match_is_go_s_path_match(pattern: str, name: str, matches: bool) -> None:
    assert go_path_match(pattern, name) is matches


@pytest.mark.parametrize(
    ("series", "text"),
    [
        ({"1.6", "1.7", "2.0", "2.1", "2.2", "2.3"}, "containerd 1.6 and later"),
        ({"1.7", "2.0", "2.1", "2.2", "2.3"}, "containerd 1.7 and later"),
        ({"1.6", "1.7"}, "containerd 1.6 and 1.7"),
        ({"2.0", "2.1", "2.2"}, "containerd 2.0 to 2.2"),
        ({"2.0"}, "containerd 2.0"),
        ({"1.6", "2.3"}, "containerd 1.6 and 2.3"),
        (set(), "no containerd release"),
    ],
)
def test_describe_series(series: set[str], text: str) -> None:
    assert describe_series(series) == text


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("x.toml", {"version": 2}, True),
        ("x.toml", {"plugins": {"io.containerd.grpc.v1.cri": {}}}, True),
        ("x.toml", {"plugins": {"cri": {}}}, True),
        ("x.toml", {"version": 2, "crio": {}}, False),
        ("x.toml", {"version": True}, False),
        ("/etc/containerd/config.toml", {"root": "/var/lib/containerd"}, True),
        ("/etc/containerd/certs.d/registry.example/hosts.toml", {"server": "https://registry.example"}, False),
        ("x.toml", [], False),
    ],
)
def test_sniff(path: str, value: Any, expected: bool) -> None:
    assert is_containerd_config(path, value) is expected


@pytest.mark.parametrize(
    ("text", "dirs"),
    [
        (V2 + 'cdi_spec_dirs = ["/a"]\n', ("/a",)),
        (V3 + 'cdi_spec_dirs = ["/b"]\n', ("/b",)),
        ('version = 3\n[plugins."io.containerd.grpc.v1.cri"]\ncdi_spec_dirs = ["/c"]\n', None),
        ('[plugins.cri]\ncdi_spec_dirs = ["/d"]\n', ("/d",)),
        (V2 + "cdi_spec_dirs = 1\n", None),
    ],
)
def test_cdi_spec_dirs_reads_the_plugin_of_the_version(text: str, dirs: Optional[tuple[str, ...]]) -> None:
    assert cdi_spec_dirs(parse_toml(text.encode()).value) == dirs


def test_every_rule_doc_quotes_what_the_engine_says() -> None:
    for rule in all_rules():
        if CONTAINERD not in rule.kinds:
            continue
        assert rule.summary.endswith("."), rule.code
        assert "`" in rule.sections["Why it matters"], f"{rule.code}: quote the engine's message or setting"
        assert rule.name == rule.name.lower() and " " not in rule.name, rule.code


def test_cli_reports_file_line_and_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.toml"
    config.write_text('version = 3\n\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n')
    status = main(["lint", "--offline", str(config)])
    out = capsys.readouterr().out
    assert status == 1
    assert f"{config}:4:3: error CTD101 cdi-setting-ignored" in out
    assert main(["explain", "CTD101"]) == 0
    assert "## Why it matters" in capsys.readouterr().out


# --- no input makes a rule raise: every value of every corpus file replaced by values of other types ---

ODD_VALUES: list[Any] = [True, -1, 1.5, "x", [], {}, [1, "a"], [{}], {"a": [1]}, datetime.date(2024, 1, 31)]


def _mutations(value: Any) -> list[Any]:
    """Copies of `value` with one leaf or table replaced by each odd value."""
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for key, item in node.items():
                walk(item, (*path, key))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, (*path, index))

    walk(value, ())
    copies = []
    for path in paths[1:]:
        for odd in ODD_VALUES:
            mutated = copy.deepcopy(value)
            node = mutated
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = copy.deepcopy(odd)
            copies.append(mutated)
    return copies


def test_no_rule_raises_on_mistyped_values(tmp_path: Path) -> None:
    rules = [r for r in all_rules() if CONTAINERD in r.kinds and r.check is not None]
    host = HostView(str(tmp_path))
    checked = 0
    for entry in entries():
        parsed = parse_toml(entry.path.read_bytes())
        if not parsed.ok:
            continue
        for mutated in _mutations(parsed.value):
            context = Context(host=host)
            for rule in rules:
                assert rule.check is not None
                for problem in rule.check(mutated, context):
                    assert problem.message
            checked += 1
    assert checked > 3000


# --- dotted and quoted keys: TOML reads a dotted key relative to its table, a quoted key as one name ---

CRI = 'plugins."io.containerd.grpc.v1.cri"'
IGNORE = "containerd 1.6 and later ignore it"


@pytest.mark.parametrize(
    ("text", "line", "message", "hint"),
    [
        pytest.param(
            V2 + 'plugins."io.containerd.grpc.v1.cri".enable_selinux = true\n',
            3,
            f"plugins is not a key of {CRI}: {IGNORE}",
            f"containerd reads plugins from the top level in a version 2 file; names inside [{CRI}] are relative to "
            f"it, so this is {CRI}.plugins",
            id="own-path-from-the-top",
        ),
        pytest.param(
            V2 + 'grpc.address = "/run/containerd/containerd.sock"\n',
            3,
            f"grpc is not a key of {CRI}: {IGNORE}",
            f"containerd reads grpc from the top level in a version 2 file; names inside [{CRI}] are relative to "
            f"it, so this is {CRI}.grpc",
            id="top-level-table-path",
        ),
        pytest.param(
            f'version = 2\n[{CRI}.containerd]\ncontainerd.snapshotter = "overlayfs"\n',
            3,
            f"containerd is not a key of {CRI}.containerd: {IGNORE}",
            f"containerd reads containerd from [{CRI}] in a version 2 file; names inside [{CRI}.containerd] are "
            f"relative to it, so this is {CRI}.containerd.containerd",
            id="own-name-repeated",
        ),
        pytest.param(
            f'version = 2\n[{CRI}.containerd]\n"runtimes.runc.runtime_type" = "io.containerd.runc.v2"\n',
            3,
            f'"runtimes.runc.runtime_type" is not a key of {CRI}.containerd: {IGNORE}',
            'the quotes make "runtimes.runc.runtime_type" one key; write runtimes.runc.runtime_type without them',
            id="quoted-path-of-a-setting",
        ),
        pytest.param(
            f'version = 2\n[{CRI}.containerd.runtimes.runc]\nruntime_type = "io.containerd.runc.v2"\n'
            '"options.SystemdCgroup" = true\n',
            4,
            f'"options.SystemdCgroup" is not a key of {CRI}.containerd.runtimes.runc: {IGNORE}',
            'the quotes make "options.SystemdCgroup" one key; write options.SystemdCgroup without them',
            id="quoted-path-into-runc-options",
        ),
        pytest.param(
            f'version = 2\n[{CRI}.containerd.runtimes.runc]\nruntime_type = "io.containerd.runc.v2"\n'
            f'[{CRI}.containerd.runtimes.runc.options]\n"a.b" = true\n',
            5,
            f'"a.b" is not a key of {CRI}.containerd.runtimes.runc.options: {IGNORE}',
            "delete it, or check the key against `containerd config default`",
            id="quoted-dotted-key-in-runc-options",
        ),
        pytest.param(
            f'version = 2\n[{CRI}.containerd]\n"a.b" = 1\n',
            3,
            f'"a.b" is not a key of {CRI}.containerd: {IGNORE}',
            "delete it, or check the key against `containerd config default`",
            id="quoted-dotted-key",
        ),
        pytest.param(
            'version = 2\n"grpc.address" = "/run/containerd/containerd.sock"\n',
            2,
            f'"grpc.address" is not a key of the top level: {IGNORE}',
            'the quotes make "grpc.address" one key; write grpc.address without them',
            id="quoted-path-at-top-level",
        ),
        pytest.param(
            'version = 2\n"io.containerd.grpc.v1.cri".enable_selinux = true\n',
            2,
            f'"io.containerd.grpc.v1.cri" is not a key of the top level: {IGNORE}',
            f'containerd reads "io.containerd.grpc.v1.cri" only as [{CRI}]',
            id="plugin-section-at-top-level",
        ),
        pytest.param(
            f"version = 2\n[{CRI}.nosuch]\nx.y = 1\n",
            2,
            f"nosuch is not a key of {CRI}: {IGNORE}",
            "delete it, or check the key against `containerd config default`",
            id="under-a-table-that-does-not-exist",
        ),
        pytest.param(
            "version = 2\nnosuch.x = 1\n",
            2,
            f"nosuch is not a key of the top level: {IGNORE}",
            "delete it, or check the key against `containerd config default`",
            id="unknown-dotted-at-top-level",
        ),
        pytest.param(
            'version = 2\ngrpc.adress = "/run/containerd/containerd.sock"\n',
            2,
            f"adress is not a key of grpc: {IGNORE}",
            "did you mean address?",
            id="dotted-at-top-level",
        ),
    ],
)
def test_each_shape_of_key_gets_one_finding(text: str, line: int, message: str, hint: str) -> None:
    found = [(f.code, f.line, f.message, f.hint) for f in lint_toml(text)]
    assert found == [("CTD102", line, message, hint)]


def test_a_version_3_plugin_section_inside_itself() -> None:
    text = 'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\n"io.containerd.cri.v1.runtime".enable_cdi = true\n'
    section = 'plugins."io.containerd.cri.v1.runtime"'
    by_code = {f.code: f for f in lint_toml(text)}
    assert sorted(by_code) == ["CTD101", "CTD102", "CTD106"]
    assert by_code["CTD102"].hint == (
        f'containerd reads "io.containerd.cri.v1.runtime" only as [{section}]; names inside [{section}] are '
        f'relative to it, so this is {section}."io.containerd.cri.v1.runtime"'
    )


def test_right_dotted_keys_are_read() -> None:
    text = (
        V2 + 'containerd.runtimes.runc.runtime_type = "io.containerd.runc.v2"\n'
        "containerd.runtimes.runc.options.SystemdCgroup = true\n"
    )
    assert lint_toml(text) == []


def _table_paths(kind: Any, path: tuple[str, ...], out: list[tuple[str, ...]]) -> None:
    if isinstance(kind, MapOf):
        _table_paths(kind.value, (*path, "runc"), out)
    elif isinstance(kind, Table):
        out.append(path)
        for key, entry in kind.fields.items():
            _table_paths(entry.type, (*path, key), out)


def _tables(version: int) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    _table_paths(server_table(version)[0], (), out)
    for name, (table, _readers) in plugin_tables(version).items():
        _table_paths(table, ("plugins", name), out)
    return [(*path, "options") if path[-1:] == ("runc",) else path for path in out]


def test_no_rule_raises_on_moved_quoted_or_dotted_keys() -> None:
    rules = [r for r in all_rules() if CONTAINERD in r.kinds and r.check is not None]
    tables = {version: _tables(version) for version in (1, 2, 3)}
    rng = random.Random(20260407)
    checked = 0
    for entry in entries():
        parsed = parse_toml(entry.path.read_bytes())
        if not parsed.ok or not isinstance(parsed.value, dict):
            continue
        version = parsed.value.get("version")
        paths = tables.get(version if isinstance(version, int) and version in tables else 2, tables[2])
        for label, mutated in key_mutations(entry.id, parsed.value, paths, 30):
            context = Context()
            for rule in rules:
                assert rule.check is not None
                for problem in rule.check(mutated, context):
                    assert problem.message and problem.hint, (label, rule.code, problem)
            assert_written_back_and_linted(rng, label, mutated, lint_toml)
            checked += 1
    assert checked > 1000
