"""kinds/cdi/: Go's formatting and YAML resolution, the library's name checks, text refinement, spec directories."""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.formats.leanyaml import go_resolve_plain
from nvidia_oci_hook.kinds.cdi.codes import CDI, JSON_READ_AS_YAML, TEXT
from nvidia_oci_hook.kinds.cdi.directories import cache_devices, claims_directory, read_spec_dirs
from nvidia_oci_hook.kinds.cdi.goformat import go_format_float32, go_json_float, go_quote
from nvidia_oci_hook.kinds.cdi.goyaml import go_yaml_load, refine_document
from nvidia_oci_hook.kinds.cdi.names import NamePanic, device_name_error, vendor_or_class_error
from nvidia_oci_hook.kinds.cdi.specs_go import minimum_version
from nvidia_oci_hook.kinds.cdi.validation import analyse
from nvidia_oci_hook.kinds.document import parse_document
from nvidia_oci_hook.lint import LintOptions, load_file
from tests.cdi.corpus import MUTATIONS, dump, nvidia_spec
from tests.cdi.support import lint_spec


@pytest.mark.parametrize(
    ("text", "quoted"),
    [("gpu 0", '"gpu 0"'), ('a"b\\', '"a\\"b\\\\"'), ("tab\t", '"tab\\t"'), ("\x7f", '"\\x7f"'),
     ("caf\u00e9", '"caf\u00e9"'), ("a\u00adb", '"a\\u00adb"'), ("\U0001f600", '"\U0001f600"'),
     ("\u2028", '"\\u2028"')],
)  # fmt: skip
def test_go_quote_is_strconv_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.5, "0.5"), (1e6, "1e+06"), (123456.0, "123456"), (1e-5, "1e-05"), (0.0001, "0.0001"), (-0.0, "-0"),
     (16777217.0, "1.6777216e+07"), (0.1, "0.1"), (math.inf, "+Inf"), (-math.inf, "-Inf"), (math.nan, "NaN"),
     (1e39, "+Inf"), (3.14159, "3.14159")],
)  # fmt: skip
def test_float_to_string_as_sigs_yaml_does(value: float, text: str) -> None:
    assert go_format_float32(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1"), (195.0, "195"), (1e20, "100000000000000000000"), (1e21, "1e+21"), (1e-7, "1e-7"),
     (1.5e-6, "0.0000015"), (-0.0, "-0"), (2.5, "2.5"), (1.2345e300, "1.2345e+300")],
)  # fmt: skip
def test_float_to_json_as_encoding_json_does(value: float, text: str) -> None:
    assert go_json_float(value) == text


@pytest.mark.parametrize(
    ("plain", "value"),
    [("y", True), ("No", False), ("ON", True), ("true", True), ("yes", True), ("~", None), ("", None),
     ("08", 8.0), ("017", 15), ("0o17", 15), ("0x1F", 31), ("0b101", 5), ("-0b101", -5), ("1_000", 1000),
     ("1e3", 1000.0), (".5", 0.5), ("+.5", 0.5), ("1:20", "1:20"), ("2001-12-14", "2001-12-14"),
     ("9223372036854775808", 9223372036854775808), ("18446744073709551616", 1.8446744073709552e19),
     ("1e400", "1e400"), ("tRUE", "tRUE"), ("0.5.0", "0.5.0"), ("-", "-"), ("nvidia.com/gpu", "nvidia.com/gpu")],
)  # fmt: skip
def test_plain_scalars_resolve_as_goyaml_v2_does(plain: str, value: Any) -> None:
    resolved = go_resolve_plain(plain)
    assert resolved == value and type(resolved) is type(value)


def test_yaml_is_read_as_goyaml_v2_reads_it() -> None:
    value = go_yaml_load("a: y\nb: '08'\nc: 08\nd: 2024-01-01\ne: !!str 5\nbase: &b {x: 1}\nf:\n  <<: *b\n---\nz: 1\n")
    assert value == {"a": True, "b": "08", "c": 8.0, "d": "2024-01-01", "e": "5", "base": {"x": 1}, "f": {"x": 1}}


@pytest.mark.parametrize(
    ("name", "error"),
    [("nvidia.com", None), ("", "empty name"), ("1x", '"1x", should start with letter'),
     ("ab-", '"ab-", should end with a letter or digit'), ("a b", "invalid character ' ' in name \"a b\""),
     ("aé", 'invalid character \'\ufffd\' in name "aé"')],
)  # fmt: skip
def test_vendor_and_class_errors_are_the_library_text(name: str, error: Any) -> None:
    assert vendor_or_class_error(name) == error


def test_one_letter_vendor_panics_as_the_library_does() -> None:
    with pytest.raises(NamePanic, match=r"slice bounds out of range \[1:0\]"):
        vendor_or_class_error("x")
    assert vendor_or_class_error("1") == '"1", should start with letter'


@pytest.mark.parametrize(
    ("name", "error"),
    [("0", None), ("a", None), ("GPU-1:0", None), ("", "invalid (empty) device name"),
     ("-a", 'invalid class "-a", should start with a letter or digit'),
     ("a/b", "invalid character '/' in device name \"a/b\""),
     ("a-", 'invalid name "a-", should end with a letter or digit')],
)  # fmt: skip
def test_device_name_errors_are_the_library_text(name: str, error: Any) -> None:
    assert device_name_error(name) == error


def test_minimum_version_follows_the_fields_used() -> None:
    spec = analyse(nvidia_spec(1, naming="uuid")).spec
    assert spec is not None and minimum_version(spec) == "0.3.0"
    spec = analyse(nvidia_spec(1, driver_root="/run/nvidia/driver", naming="uuid")).spec
    assert spec is not None and minimum_version(spec) == "0.5.0"
    value = nvidia_spec(1)
    value["annotations"] = {"a": "b"}
    value["containerEdits"]["additionalGids"] = [44]
    spec = analyse(value).spec
    assert spec is not None and minimum_version(spec) == "0.7.0"


def test_keys_match_fields_without_regard_to_case_and_the_sorted_last_wins() -> None:
    value = nvidia_spec(1)
    value["CDIVersion"] = "9.9.9"  # sorts before cdiVersion: the library keeps "0.5.0"
    value["containerEdits"]["deviceNodes"][0]["HOSTPATH"] = "/dev/nvidia-modeset"
    analysis = analyse(value)
    assert analysis.loads and analysis.spec is not None
    assert analysis.spec.text("cdiVersion") == "0.5.0"
    edits = analysis.spec.get("containerEdits")
    assert edits.items_of("deviceNodes")[0].at("hostPath") == "/containerEdits/deviceNodes/0/HOSTPATH"


def test_numbers_and_booleans_become_strings_where_a_string_is_expected() -> None:
    value = nvidia_spec(1)
    value["devices"][0]["name"] = 7.5
    value["containerEdits"]["env"] = [True]
    problems = analyse(value).problems
    assert [(p.code, p.library) for p in problems] == [
        ("CDI011", 'invalid CDI Spec: invalid container edits: invalid environment variable "true"')
    ]
    assert analyse(value).spec.get("devices")[0].text("name") == "7.5"  # type: ignore[union-attr]


def _document(raw: bytes, name: str = "spec.json") -> Any:
    document = parse_document(name, raw, CDI)
    refine_document(document)
    return document


def test_refine_turns_a_duplicate_key_into_a_refusal() -> None:
    document = _document(b'{"cdiVersion": "0.5.0", "cdiVersion": "0.5.0"}')
    assert [p.code for p in document.load_problems] == [TEXT]
    assert 'key "cdiVersion" already set in map' in document.load_problems[0].message


def test_refine_reads_json_that_only_yaml_accepts() -> None:
    raw = b'\xef\xbb\xbf{"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",}'
    document = _document(raw)
    assert document.parsed and document.value == {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu"}
    assert [p.code for p in document.load_problems] == [JSON_READ_AS_YAML]
    assert document.locate("/kind").line == 1


def test_refine_keeps_a_syntax_error_that_yaml_refuses_too() -> None:
    document = _document(b'{"cdiVersion": "0.5.0"')
    assert not document.parsed and [p.code for p in document.load_problems] == ["DOC001"]


def test_refine_reads_the_first_of_several_yaml_documents() -> None:
    document = _document(b"cdiVersion: 0.5.0\n---\ncdiVersion: 0.6.0\n", "spec.yaml")
    assert document.value == {"cdiVersion": "0.5.0"}
    assert [(p.code, document.locate_problem(p).line) for p in document.load_problems] == [(JSON_READ_AS_YAML, 2)]


def test_cdi_specs_are_recognised_without_kind() -> None:
    raw = dump(nvidia_spec(1), False)
    assert parse_document("nvidia.json", raw).kind == CDI
    assert parse_document("nvidia.yaml", dump(nvidia_spec(1), True)).kind == CDI
    assert parse_document("config.json", b'{"ociVersion": "1.0.2"}').kind != CDI


def _loader(path: str, kind: str) -> Any:
    return load_file(path, kind, LintOptions(kind=CDI, offline=True))


def test_spec_directory_reading_follows_the_library(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    (etc / "sub").mkdir(parents=True)
    spec = dump(nvidia_spec(1), False)
    for name in ("b.json", "a.yaml", "c.yml", "d.JSON", "e.json.bak", "sub/f.yaml", ".json"):
        (etc / name).write_bytes(spec)
    (etc / "README.md").write_text("cdiVersion is explained here\n")
    (etc / "notes.yml").write_text("not a spec\n")
    os.symlink(tmp_path / "nowhere.json", etc / "g.json")
    collection = read_spec_dirs([str(etc), str(tmp_path / "missing")], _loader)
    assert [Path(d.path).name for d in collection.documents] == [".json", "a.yaml", "b.json"]
    skipped = {Path(s.path).name: s.reason for s in collection.skipped}
    assert sorted(skipped) == ["c.yml", "d.JSON", "g.json", "sub"]
    assert "cannot be read" in skipped["g.json"] and "f.yaml" in skipped["sub"]
    assert collection.unread == {}
    os.symlink(etc, tmp_path / "linked")
    linked = read_spec_dirs([str(tmp_path / "linked")], _loader)
    assert linked.documents == [] and "symbolic link" in linked.unread[str(tmp_path / "linked")]


def test_specs_the_library_refuses_take_no_part_in_conflicts(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    good, refused = nvidia_spec(1), nvidia_spec(1)
    refused["cdiVersion"] = "9.9.9"
    (etc / "a.json").write_bytes(dump(good, False))
    (etc / "b.json").write_bytes(dump(refused, False))
    devices = cache_devices(read_spec_dirs([str(etc)], _loader))
    assert sorted(devices) == ["nvidia.com/gpu=0", "nvidia.com/gpu=all"]
    assert {Path(d.path).name for d in devices.values()} == {"a.json"}


def test_directories_holding_specs_are_claimed(tmp_path: Path) -> None:
    (tmp_path / "cdi").mkdir()
    (tmp_path / "cdi" / "nvidia.yaml").write_bytes(dump(nvidia_spec(1), True))
    (tmp_path / "hooks.d").mkdir()
    (tmp_path / "hooks.d" / "oci-nvidia-hook.json").write_text('{"version": "1.0.0", "hook": {"path": "/x"}}')
    assert claims_directory(str(tmp_path / "cdi"))
    assert not claims_directory(str(tmp_path / "hooks.d"))
    assert not claims_directory(str(tmp_path / "absent"))


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(10 if depth < 4 else 6)
    if choice == 0:
        return rng.choice([None, True, False])
    if choice == 1:
        return rng.choice([0, -1, 2**70, 1.5, -0.0, 1e300])
    if choice in (2, 3, 4, 5):
        return rng.choice(["", "x", "0.5.0", "nvidia.com/gpu", "/dev/nvidia0", "A=1", "createContainer", "\U0001f600"])
    if choice in (6, 7):
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    keys = ["cdiVersion", "kind", "devices", "containerEdits", "name", "deviceNodes", "path", "hooks", "mounts",
            "hostPath", "env", "intelRdt", "closID", "annotations", "major", "type", "x"]  # fmt: skip
    return {rng.choice(keys): _random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def test_no_input_makes_the_model_raise(tmp_path: Path) -> None:
    rng = random.Random(11)
    for _ in range(3000):
        value = _random_value(rng)
        if rng.random() < 0.5:
            value = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [value], "containerEdits": value}
        analysis = analyse(value)
        assert all(p.library for p in analysis.problems)
    for index in range(200):
        spec = nvidia_spec(1, compact=True)
        for _ in range(4):
            rng.choice(MUTATIONS)(rng, spec)
        findings = lint_spec(tmp_path, dump(spec, index % 2 == 1), "spec.yaml" if index % 2 else "spec.json")
        assert all(f.message for f in findings)
    for raw in (b"", b"null", b"[]", b"\xff\xfe", b"{" * 5000, b"a: [" * 3000, b"- - - -", json.dumps("x").encode()):
        assert all(f.message for f in lint_spec(tmp_path, raw, "spec.yaml"))
        assert all(f.message for f in lint_spec(tmp_path, raw, "spec.json"))


@pytest.mark.parametrize(
    ("raw", "name"),
    [(b'{"kind": "a", "kind": "b", "x": "\\/"}', "spec.json"), (b"\xef\xbb\xbf{'a': 1,}", "spec.json"),
     (b"a: y\n---\nb: 1\n", "spec.yaml"), (b"a: 1\na: 2\n", "spec.yaml")],
)  # fmt: skip
def test_refining_twice_changes_nothing(raw: bytes, name: str) -> None:
    document = _document(raw, name)
    once = (list(document.load_problems), document.value)
    refine_document(document)
    assert (document.load_problems, document.value) == once
