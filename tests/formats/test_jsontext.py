from __future__ import annotations

import json

import pytest

from nvidia_oci_hook.formats.jsontext import Positions, pointer_join
from nvidia_oci_hook.kinds.document import OCI_CONFIG, OCI_STATE, parse_document

TEXT = '{\n  "a/b": {"c~d": [10,\n    {"e": null}]},\n  "": "empty key",\n  "s": "x\\"y"\n}'


@pytest.mark.parametrize(
    ("pointer", "expected"),
    [
        ("", (1, 1)),
        ("/a~1b", (2, 3)),
        ("/a~1b/c~0d", (2, 11)),
        ("/a~1b/c~0d/0", (2, 19)),
        ("/a~1b/c~0d/1", (3, 5)),
        ("/a~1b/c~0d/1/e", (3, 6)),
        ("/", (4, 3)),
        ("/s", (5, 3)),
        ("/a~1b/c~0d/7", (2, 11)),  # a missing element falls back to its nearest ancestor
        ("/nope/deeper", (1, 1)),
    ],
)
def test_pointer_positions(pointer: str, expected: tuple[int, int]) -> None:
    assert json.loads(TEXT)  # the fixture itself is valid JSON
    assert Positions(TEXT).locate(pointer) == expected


def test_pointer_join_escapes() -> None:
    assert pointer_join("", "a/b~c") == "/a~1b~0c"
    assert pointer_join("/x", 3) == "/x/3"


def test_duplicate_keys_are_found_with_their_pointer() -> None:
    document = parse_document("c.json", b'{"process": {"cwd": "/", "cwd": "/w"}, "x": [{"k": 1, "k": 2}]}')
    assert [(p.code, p.pointer) for p in document.load_problems] == [
        ("DOC005", "/process/cwd"),
        ("DOC005", "/x/0/k"),
    ]


def test_kind_detection() -> None:
    state = b'{"ociVersion": "1.0.2", "id": "c", "status": "created", "pid": 4, "bundle": "/b"}'
    assert parse_document("x", state).kind == OCI_STATE
    assert parse_document("x", b'{"ociVersion": "1.0.2", "process": {"cwd": "/"}}').kind == OCI_CONFIG
    assert parse_document("x", state, kind=OCI_CONFIG).kind == OCI_CONFIG


def test_invalid_utf8_is_reported_and_the_rest_still_parses() -> None:
    document = parse_document("x", b'{\n "hostname": "a\xffb"}')
    assert document.parsed and document.value["hostname"] == "a\ufffdb"
    (problem,) = document.load_problems
    assert problem.code == "DOC002" and "line 2, column 16" in problem.message
