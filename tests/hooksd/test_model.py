"""The hooks.d model: Go's decoding rules, kind detection, the program lookup on the host."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.document import parse_document
from nvidia_oci_hook.kinds.hooksd.go_json import HOOK_V1, go_decode, go_key_matches, go_quote
from nvidia_oci_hook.kinds.hooksd.reading import V0, V1, read_hook
from nvidia_oci_hook.rules.hooksd.loading import EXISTS, MISSING, UNKNOWN, UNUSABLE, program
from tests.helpers import FakeHost


@pytest.mark.parametrize(
    ("name", "key", "matches"),
    [
        ("stages", "STAGES", True),
        ("stages", "\u017ftages", True),  # long s folds to s
        ("hook", "hoo\u212a", True),  # Kelvin sign folds to k
        ("path", "PATH", True),
        ("path", "p\u0101th", False),
        ("hasBindMounts", "hasbindmounts", True),
        ("stages", "stage", False),
        ("env", "\u212anv", False),
        ("annotations", "annotation", False),
    ],
)
def test_go_key_matching(name: str, key: str, matches: bool) -> None:
    assert go_key_matches(name, key) is matches


def test_case_variant_keys_merge_as_go_decodes_them() -> None:
    value = {
        "version": "1.0.0",
        "hook": {"path": "/a"},
        "Hook": {"args": ["a"]},  # decoded into the same struct: path stays
        "when": {"annotations": {"x": "1"}, "Annotations": {"y": "2"}},  # maps merge
        "stages": ["poststop"],
        "STAGES": ["createRuntime"],  # slices are replaced
    }
    decoded = go_decode(value, HOOK_V1)
    assert not decoded.type_errors
    assert decoded.value["hook"]["path"] == "/a" and decoded.value["hook"]["args"] == ["a"]
    assert decoded.value["when"]["annotations"] == {"x": "1", "y": "2"}
    assert decoded.value["stages"] == ["createRuntime"]
    assert decoded.at("stages") == "/STAGES"


def test_null_leaves_values_unset() -> None:
    decoded = go_decode({"version": None, "hook": None, "when": {"always": None}, "stages": None}, HOOK_V1)
    assert not decoded.type_errors
    assert decoded.value["version"] == "" and decoded.value["hook"]["path"] == ""
    assert decoded.value["when"]["always"] is None and decoded.value["stages"] is None


@pytest.mark.parametrize(
    ("timeout", "error"),
    [
        (9223372036854775807, None),
        (-9223372036854775808, None),
        (9223372036854775808, "cannot unmarshal number 9223372036854775808 into Go struct field Hook.hook.timeout"),
        (2.0, "cannot unmarshal number 2.0 into Go struct field Hook.hook.timeout of type int"),
        (True, "cannot unmarshal bool into Go struct field Hook.hook.timeout of type int"),
    ],
)
def test_int_range_and_types(timeout: Any, error: Any) -> None:
    decoded = go_decode({"hook": {"path": "/a", "timeout": timeout}}, HOOK_V1)
    texts = [e.text for e in decoded.type_errors]
    assert texts == ([] if error is None else [texts[0]]) and (error is None or error in texts[0])


def test_go_quote() -> None:
    assert go_quote('a"b\\c\n\t\x01\x7f é\u200b\U0001f600') == '"a\\"b\\\\c\\n\\t\\x01\\x7f é\\u200b\U0001f600"'


@pytest.mark.parametrize(
    ("document", "kind"),
    [
        ({"version": "1.0.0", "hook": {"path": "/bin/true"}, "when": {"always": True}, "stages": []}, "hooksd"),
        ({"hook": "/usr/bin/oci-systemd-hook", "stages": ["prestart"]}, "hooksd"),
        ({"version": "1.0.0", "stages": ["prestart"]}, "hooksd"),
        ({"ociVersion": "1.0.2", "hooks": {"prestart": [{"path": "/bin/true"}]}}, "oci"),
        ({"ociVersion": "1.0.2", "id": "c", "status": "created", "bundle": "/b", "pid": 1}, "oci-state"),
    ],
)
def test_kind_detection(document: dict[str, Any], kind: str) -> None:
    assert parse_document("x.json", json.dumps(document).encode()).kind == kind


def test_legacy_file_is_converted_as_the_loader_converts_it() -> None:
    hook = read_hook({"hook": "/usr/bin/x", "arguments": ["--debug"], "stage": ["prestart"], "annotation": ["a", "b"]})
    assert hook.version == V0 and not hook.errors
    assert hook.args == ["/usr/bin/x", "--debug"]
    assert hook.stages == ["prestart"] and hook.stages_pointer == "/stage"
    assert hook.when.any_of and hook.when.annotations == {".*": "a|b"}


def test_current_file_keeps_every_field_and_pointer() -> None:
    hook = read_hook(
        {
            "version": "1.0.0",
            "hook": {"path": "/p", "args": ["p"], "env": ["PATH=/bin"], "timeout": 5},
            "when": {"commands": ["^x$"], "hasBindMounts": True},
            "stages": ["poststop"],
        }
    )
    assert hook.version == V1 and not hook.errors and not hook.unknown_keys
    assert (hook.path, hook.args, hook.env, hook.timeout) == ("/p", ["p"], ["PATH=/bin"], 5)
    assert (hook.path_pointer, hook.timeout_pointer, hook.stage_pointer(0)) == (
        "/hook/path",
        "/hook/timeout",
        "/stages/0",
    )
    assert hook.when.commands == ["^x$"] and hook.when.has_bind_mounts is True and not hook.when.any_of


def test_every_error_reported_not_only_the_first() -> None:
    hook = read_hook(
        {
            "version": "1.0.0",
            "hook": {"path": "/p"},
            "when": {"commands": ["(?=a)", "b\\Z"], "annotations": {"(": ")"}},
            "stages": ["pre", "createRuntime", "post"],
        }
    )
    assert sorted(error.code for error in hook.errors) == ["HKD005"] * 4 + ["HKD006"] * 2
    assert all(error.after_program_check for error in hook.errors)


def test_program_lookup(fake_host: FakeHost) -> None:
    fake_host.executable("/usr/bin/tool").symlink("/usr/local/bin/tool", "/usr/bin/tool")
    host = HostView(str(fake_host.root))

    def state(path: str) -> str:
        return program(read_hook({"version": "1.0.0", "hook": {"path": path}, "stages": []}), host).state

    assert state("/usr/bin/tool") == EXISTS
    assert state("/usr/local/bin/tool") == EXISTS
    assert state("/usr/bin/missing") == MISSING
    assert state("/usr/bin/tool/sub") == UNUSABLE
    assert state("/usr/bin/tool/") == UNUSABLE
    assert state("/usr/bin/" + "x" * 256) == UNUSABLE
    assert state("/nonexistent/" + "x" * 256) == MISSING  # the lookup stops at the first missing component
    assert state("usr/bin/tool") == UNKNOWN
    assert program(read_hook({"version": "1.0.0", "hook": {"path": "/usr/bin/tool"}}), None).state == UNKNOWN
