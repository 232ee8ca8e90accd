"""A UTF-8 byte-order mark and a lone carriage return (one not followed by a line feed) in containerd's config.toml:
containerd 1.6 and 1.7 (go-toml v1) read the file, 2.0 and later (go-toml v2) refuse it, and lint judged as each
release says so, at the lines and columns containerd 1.x itself reports.

Measured with `containerd --config FILE config dump` (test_the_real_releases_do_what_lint_says runs it again):
1.6.20 (Debian 12) and 1.7.24 (trixie) load every case below, reading a lone carriage return as a line break between
statements, as part of the comment it is in (`oom_score` after one stays 0), and as a character of a multi-line or
literal string (`root = "/var/lib/a\\rb"`); they report a wrong type behind one at go-toml v1's position: `(1, 13):
Can't convert x(string) to int` for `version = 2\\room_score = "x"`, `(1, 1)` for `oom_score = "x"` behind the mark.
2.1.9 (sid) refuses each: `failed to unmarshal TOML at row 1 column 1: toml: invalid character at start of key:
U+00EF 'ï'`, `row 1 column 12: toml: expected newline but got U+000D`, `row 1 column 19: toml: carriage returns are
not allowed in comments`, `row 2 column 21: toml: carriage returns must be followed by a newline character`,
`row 2 column 19: toml: literal strings cannot have new lines`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from nvidia_oci_hook.findings import Finding, Severity
from nvidia_oci_hook.formats.gotoml import as_go_toml_v1
from nvidia_oci_hook.kinds.containerd.kind import CONTAINERD
from nvidia_oci_hook.kinds.containerd.versions import V2X, series_of
from nvidia_oci_hook.kinds.document import parse_document
from nvidia_oci_hook.lint import LintOptions, lint_paths

CRI = b'[plugins."io.containerd.grpc.v1.cri"]'
# (bytes, what containerd 1.x reads, where 2.x refuses: (line, column), its words)
CASES: dict[str, tuple[bytes, dict[str, Any], tuple[int, int], str]] = {
    "bom": (
        b"\xef\xbb\xbfversion = 2\n" + CRI + b"\n  enable_cdi = true\n",
        {"version": 2, "plugins": {"io.containerd.grpc.v1.cri": {"enable_cdi": True}}},
        (1, 1),
        "toml: invalid character at start of key: U+00EF 'ï'",
    ),
    "cr-between": (
        b"version = 2\room_score = -999\r" + CRI + b"\r  enable_cdi = true\r",
        {"version": 2, "oom_score": -999, "plugins": {"io.containerd.grpc.v1.cri": {"enable_cdi": True}}},
        (1, 12),
        "toml: expected newline but got U+000D",
    ),
    "cr-in-comment": (
        b"version = 2 # note\room_score = 5\n",
        {"version": 2},
        (1, 19),
        "toml: carriage returns are not allowed in comments",
    ),
    "cr-in-multiline-string": (
        b'version = 2\nroot = """/var/lib/a\rb"""\n',
        {"version": 2, "root": "/var/lib/a\rb"},
        (2, 21),
        "toml: carriage returns must be followed by a newline character",
    ),
    "cr-in-literal-string": (
        b"version = 2\nroot = '/var/lib/a\rb'\n",
        {"version": 2, "root": "/var/lib/a\rb"},
        (2, 19),
        "toml: literal strings cannot have new lines",
    ),
}
RELEASES = ("1.6.20", "1.7.24", "2.0.5", "2.1.9", "2.2.7", "2.3.4")


def errors(tmp_path: Path, raw: bytes, release: Optional[str] = None) -> list[Finding]:
    config = tmp_path / "config.toml"
    config.write_bytes(raw)
    options = LintOptions(kind=CONTAINERD, offline=True, containerd_release=release)
    (result,) = lint_paths([str(config)], options).files
    return [f for f in result.findings if f.severity == Severity.ERROR]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("case", CASES)
def test_each_release_reads_or_refuses_the_file_as_its_decoder_does(tmp_path: Path, case: str, release: str) -> None:
    raw, _, (line, column), words = CASES[case]
    found = errors(tmp_path, raw, release)
    if series_of(release) in V2X:
        (refusal,) = found
        assert (refusal.code, refusal.line, refusal.column) == ("DOC001", line, column)
        assert f"`failed to unmarshal TOML at row {line} column {column}: {words}`" in refusal.message
        assert "1.6 and 1.7 read it" in refusal.message
    else:
        assert found == []


@pytest.mark.parametrize("case", CASES)
def test_containerd_1_reads_what_go_toml_v1_reads(case: str) -> None:
    raw, value, _, _ = CASES[case]
    document = parse_document("config.toml", raw, CONTAINERD)
    assert document.parsed and document.value == value
    assert [(p.code, p.series) for p in document.load_problems] == [("DOC001", V2X)]


def test_unjudged_the_file_is_one_containerd_2_refuses(tmp_path: Path) -> None:
    (refusal,) = errors(tmp_path, CASES["bom"][0])
    assert refusal.code == "DOC001" and refusal.line == 1


@pytest.mark.parametrize(
    "raw, line, column",
    [
        (b'version = 2\room_score = "x"\n', 1, 13),
        (b'\xef\xbb\xbfoom_score = "x"\n', 1, 1),
        (b"version = 2\noom_score = 5\n" + CRI + b'\r  max_container_log_line_size = "x"\n', 3, 41),
    ],
    ids=["behind-a-lone-return", "behind-the-mark", "behind-a-header"],
)
def test_a_finding_behind_one_sits_where_containerd_1_says(tmp_path: Path, raw: bytes, line: int, column: int) -> None:
    (found,) = errors(tmp_path, raw, "1.6.20")
    assert (found.code, found.line, found.column) == ("CTD001", line, column)


def test_where_go_toml_v1_refuses_too_each_refusal_is_at_its_own_place(tmp_path: Path) -> None:
    # containerd 1.6.20: `(2, 7): cannot have multiple equals for the same key`.
    raw = b"\xef\xbb\xbfversion = 2\r[plugins]\n  x = = 1\n"
    (v1,) = errors(tmp_path, raw, "1.6.20")
    assert (v1.code, v1.line, v1.column) == ("DOC001", 2, 7)
    both = errors(tmp_path, raw, "2.1.9")
    assert sorted((f.line, f.column) for f in both) == [(1, 1), (2, 7)]
    # A carriage return in a basic string is refused by both, at the same character: said once.
    (once,) = errors(tmp_path, b'version = 2\nroot = "a\rb"\n', "2.1.9")
    assert (once.line, once.column) == (2, 10)


def test_a_stand_in_is_one_the_text_does_not_hold() -> None:
    read, returns, stand_in = as_go_toml_v1("a = '\ue000\r'\r")
    assert stand_in != "\ue000" and read == f"a = '\ue000{stand_in}'\n"
    assert [offset for offset, _ in returns] == [6, 8]


@pytest.mark.runtime
def test_the_real_releases_do_what_lint_says(tmp_path: Path) -> None:
    from tests.containerd.real import binaries, describe, dump

    wrong = []
    for binary in binaries():
        for case, (raw, _, (line, column), words) in CASES.items():
            config = tmp_path / f"{case}.toml"
            config.write_bytes(raw)
            result = dump(binary, config, tmp_path)
            if binary.series in V2X:
                said = f"at row {line} column {column}: {words}"
                if not result.refused or said not in result.stderr:
                    wrong.append(f"{case}: expected a refusal {said!r}: {describe(binary, config, result)}")
            elif result.refused:
                wrong.append(f"{case}: expected it loaded: {describe(binary, config, result)}")
    assert not wrong, "\n".join(wrong)
