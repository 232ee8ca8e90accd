"""TOML as each containerd series' decoder reads it where tomllib differs: a UTF-8 byte-order mark and a lone
carriage return (one not followed by a line feed).

containerd 1.6 and 1.7 load the file with pelletier/go-toml v1 (1.9.3 in 1.6.0 to 1.6.15, 1.9.5 after; the same
lexer): `LoadBytes` drops a byte-order mark before it lexes, and the lexer takes a lone carriage return for a line
break between statements and inside arrays, for part of the comment it is in (the comment runs on to the next line
feed), and for a character of a literal or multi-line string; in a basic string it is an error (`unescaped control
character U+000D`). Its positions count line feeds only. containerd 2.0 to 2.3 use go-toml v2 (2.2.3 to 2.3.0),
which refuses both: the mark is not the start of a key, and a carriage return must be followed by a line feed
everywhere.

tomllib refuses both as well, so where it refused such a text, the text is read again as go-toml v1 reads it (the
mark dropped; a lone carriage return made a line feed between statements, a space in a comment, a stand-in inside
a string that becomes a carriage return again in the value), and the 2.x refusal is kept as a load problem of
those series alone. Every character keeps its offset, so findings sit on the file's own lines as go-toml v1 counts
them.
"""

from __future__ import annotations

from dataclasses import replace

from nvidia_oci_hook.formats.gotoml import BETWEEN, BOM, IN_BASIC, IN_COMMENT, IN_LITERAL, IN_MULTILINE, reread, starts
from nvidia_oci_hook.formats.parsing import LoadProblem
from nvidia_oci_hook.formats.positions import LineIndex, PositionMap
from nvidia_oci_hook.kinds.containerd.versions import V2X
from nvidia_oci_hook.kinds.document import Document

# Where a lone carriage return is, and what containerd 2.1.9 says of one there, measured on Debian's build (its own
# go-toml v2; the releases built with the go-toml v2 they vendor say `invalid character in comment` and `need a \n
# after \r` for a comment and a multi-line string).
V2_WORDS = {
    BETWEEN: "toml: expected newline but got U+000D",
    IN_COMMENT: "toml: carriage returns are not allowed in comments",
    IN_MULTILINE: "toml: carriage returns must be followed by a newline character",
    IN_LITERAL: "toml: literal strings cannot have new lines",
    IN_BASIC: "toml: basic strings cannot have new lines",
}
_V2_BOM_WORDS = "toml: invalid character at start of key: U+00EF 'ï'"


def _v2_refusal(text: str, returns: list[tuple[int, str]], v1_reads: bool) -> LoadProblem:
    if text.startswith(BOM):
        what, words, (line, column) = "the file starts with a UTF-8 byte-order mark", _V2_BOM_WORDS, (1, 1)
    else:
        offset, where = returns[0]
        what, words = "a carriage return not followed by a line feed", V2_WORDS[where]
        line, column = LineIndex(text).line_col(offset)
    return LoadProblem(
        "DOC001",
        f"{what}: containerd 2.x refuses to load the file (2.1.9: `failed to unmarshal TOML at row {line} column "
        f"{column}: {words}`)" + ("; 1.6 and 1.7 read it" if v1_reads else ""),
        line=line,
        column=column,
        series=V2X,
    )


def as_containerd_reads(document: Document) -> Document:
    """The document as containerd 1.x reads it where tomllib refused a byte-order mark or a lone carriage return,
    with containerd 2.x's refusal beside it; any other document as it is."""
    if document.parsed or not any(p.code == "DOC001" for p in document.load_problems):
        return document
    text = document.text
    again = reread(text)
    if again is None:
        return document
    body, read, returns = again.body, again.read, again.returns
    # Offsets into the text (a byte that is not UTF-8) are offsets into the body from here on; tomllib's problems
    # on the text it was given (read) sit at the same offsets in the body.
    shift = len(text) - len(body)
    kept = [
        replace(p, offset=p.offset - shift) if p.offset is not None and shift else p
        for p in document.load_problems
        if p.code != "DOC001"
    ]
    parsed = again.parsed
    refusal = _v2_refusal(text, returns, parsed.ok)
    if not parsed.ok:
        # go-toml v1 refuses it too, where tomllib refuses the read text (tomllib counts line feeds, as go-toml v1).
        line_starts = starts(read.split("\n"), 1)
        failures = [
            replace(p, line=None, column=None, offset=line_starts[p.line - 1] + (p.column or 1) - 1) if p.line else p
            for p in parsed.problems
            if p.code == "DOC001"
        ]
        # Where both refuse the same character (a carriage return in a basic string), once is enough.
        same = body is text and returns[0][0] in {p.offset for p in failures}
        document.load_problems = [*kept, *failures, *([] if same else [refusal])]
        document.locator = PositionMap(body)
        return document
    problems = [*kept, *(p for p in parsed.problems if p.code != "DOC002"), refusal]
    return Document(document.path, document.kind, text, again.value, True, problems, document.format, again.locator())
