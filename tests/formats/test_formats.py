from __future__ import annotations

import pytest

from nvidia_oci_hook.formats.tomltext import LineLocator, parse_toml
from nvidia_oci_hook.formats.yamltext import parse_yaml
from nvidia_oci_hook.kinds.document import format_for, get_kind, parse_document

TOML = """\
# cri-o drop-in
[crio.runtime]
default_runtime = "nvidia"
hooks_dir = [
  "/usr/share/containers/oci/hooks.d",
  "/etc/containers/oci/hooks.d",
]

[crio.runtime.runtimes."nvidia"]
runtime_path = "/usr/bin/nvidia-oci-runtime"
description = '''
fake = "not a key"
'''
runtime_type = "oci"

[[plugins.list]]
name = "a"
[[plugins.list]]
name = "b"
dotted.key = 1
"""


@pytest.mark.parametrize(
    ("pointer", "line"),
    [
        ("/crio/runtime", 2),
        ("/crio", 2),  # implied by the first header that names it
        ("/plugins", 16),
        ("/crio/runtime/default_runtime", 3),
        ("/crio/runtime/hooks_dir", 4),
        ("/crio/runtime/hooks_dir/1", 4),
        ("/crio/runtime/runtimes/nvidia", 9),
        ("/crio/runtime/runtimes/nvidia/runtime_path", 10),
        ("/crio/runtime/runtimes/nvidia/runtime_type", 14),
        ("/crio/runtime/runtimes/nvidia/fake", 9),  # inside a multi-line string: not a key
        ("/plugins/list/0/name", 17),
        ("/plugins/list/1/name", 19),
        ("/plugins/list/1/dotted/key", 20),
    ],
)
def test_toml_locator(pointer: str, line: int) -> None:
    assert parse_toml(TOML.encode()).ok
    assert LineLocator(TOML).locate(pointer)[0] == line


def test_toml_error_has_line_and_column() -> None:
    parsed = parse_toml(b"[crio]\nx = 1\nx = 2\n")
    (problem,) = parsed.problems
    assert not parsed.ok and problem.code == "DOC001" and problem.line == 3


def test_yaml_positions_and_duplicates() -> None:
    parsed = parse_yaml(b"cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices:\n  - name: gpu0\n    name: gpu1\n")
    assert parsed.ok and parsed.value["devices"][0]["name"] == "gpu1"
    assert parsed.locator is not None and parsed.locator.locate("/devices/0") == (4, 5)
    assert parsed.locator.locate("/kind") == (2, 1)
    assert [(p.code, p.pointer, p.line) for p in parsed.problems] == [("DOC005", "/devices/0/name", 5)]


def test_yaml_syntax_error_position() -> None:
    parsed = parse_yaml(b"devices:\n  - name: [unclosed\n")
    (problem,) = parsed.problems
    assert not parsed.ok and problem.code == "DOC001" and problem.line == 3


def test_format_from_name_and_content() -> None:
    assert format_for("/etc/crio/crio.conf", None) == "toml"
    assert format_for("/etc/cdi/nvidia.yaml", None) == "yaml"
    assert format_for("spec.yaml", get_kind("oci")) == "json"  # the kind decides when the name disagrees
    assert parse_document("/etc/crio/crio.conf.d/10-nvidia", b"[crio.runtime]\nx = 1\n").format == "toml"
    assert parse_document("/etc/crio/crio.conf.d/10-nvidia", b"# comment\nx = 1\n").format == "toml"
    assert parse_document("config", b'[{"a": 1}]').format == "json"


def alias_bomb(levels: int = 9) -> bytes:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return ("\n".join(lines) + "\ncdiVersion: 0.5.0\n").encode()


def test_alias_bomb_is_refused_without_expanding_it() -> None:
    import time

    start = time.monotonic()
    parsed = parse_yaml(alias_bomb())
    assert time.monotonic() - start < 5
    (problem,) = parsed.problems
    assert not parsed.ok and problem.code == "DOC006" and "excessive aliasing" in problem.message


def test_self_referencing_alias_is_refused() -> None:
    parsed = parse_yaml(b"cdiVersion: 0.5.0\nx: &a [1, *a]\n")
    (problem,) = parsed.problems
    assert not parsed.ok and problem.code == "DOC006" and "contains itself" in problem.message


def test_modest_aliases_are_fine() -> None:
    parsed = parse_yaml(alias_bomb(levels=3))
    assert parsed.ok and parsed.problems == []
    assert len(parsed.value["l2"]) == 9
