"""TOML as cri-o's decoder reads it where tomllib differs: a byte-order mark and TOML 1.1 pass, non-UTF-8 does not."""

from __future__ import annotations

import re
from dataclasses import replace

from nvidia_oci_hook.formats.tomltext import LineLocator, parse_toml, string_end
from nvidia_oci_hook.kinds.document import Document

# The load problem for a cri-o file that is not UTF-8 (its TOML decoder refuses it; JSON decoders do not).
NOT_UTF8 = "CRO006"


_HEX = frozenset("0123456789abcdefABCDEF")
_TIME_WITHOUT_SECONDS = re.compile(r"(?<![\d:])\d\d:\d\d(?![:\d])")


def _basic_escapes(segment: str) -> str:
    """TOML 1.1's \\e and \\xHH escapes as the \\uXXXX escapes TOML 1.0 has."""
    out = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "\\" and i + 1 < len(segment):
            following = segment[i + 1]
            if following == "e":
                out.append("\\u001B")
                i += 2
                continue
            digits = segment[i + 2 : i + 4]
            if following == "x" and len(digits) == 2 and set(digits) <= _HEX:
                out.append("\\u00" + digits)
                i += 4
                continue
            out.append(segment[i : i + 2])
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def toml_1_1_as_1_0(text: str) -> str:
    """Rewrite what TOML 1.1 adds (and BurntSushi/toml 1.6 accepts) into TOML 1.0 that tomllib reads.

    Newlines, comments and a trailing comma inside inline tables; \\e and \\xHH escapes; times without
    seconds. Every line stays on its line: the newlines inside an inline table move to just after it.
    """
    out: list[str] = []
    depth = 0
    held = 0
    i = 0
    while i < len(text):
        char = text[i]
        if char in "\"'":
            end = string_end(text, i)
            segment = text[i:end]
            out.append(_basic_escapes(segment) if char == '"' else segment)
            i = end
            continue
        if char == "#":
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            if not depth:
                out.append(text[i:end])
            i = end
            continue
        if char == "\n" and depth:
            if out and out[-1] == "\r":
                out.pop()
            out.append(" ")
            held += 1
            i += 1
            continue
        if char == "{":
            depth += 1
        elif char == "}" and depth:
            spaces = []
            while out and out[-1] in (" ", "\t"):
                spaces.append(out.pop())
            if out and out[-1] == ",":
                out.pop()
            out.extend(spaces)
            depth -= 1
            out.append("}")
            if not depth and held:
                out.append("\n" * held)
                held = 0
            i += 1
            continue
        elif char.isdigit() and _TIME_WITHOUT_SECONDS.match(text, i):
            out.append(text[i : i + 5] + ":00")
            i += 5
            continue
        out.append(char)
        i += 1
    return "".join(out)


def as_crio_reads(document: Document) -> Document:
    """A document parsed as cri-o's decoder parses it, where tomllib is stricter.

    BurntSushi/toml skips a UTF-8 byte-order mark and, from v1.6, reads TOML 1.1; tomllib reads neither. When
    tomllib refused the text, parse it again without the mark and with the TOML 1.1 forms rewritten.
    """
    if document.parsed or not any(p.code == "DOC001" for p in document.load_problems):
        return document
    text = document.text[1:] if document.text.startswith("\ufeff") else document.text
    parsed = parse_toml(toml_1_1_as_1_0(text).encode("utf-8", errors="surrogatepass"))
    if not parsed.ok:
        return document
    return Document(
        document.path,
        document.kind,
        document.text,
        parsed.value,
        True,
        [p for p in document.load_problems if p.code != "DOC001"] + [p for p in parsed.problems if p.code != "DOC002"],
        document.format,
        LineLocator(text),
    )


def refine_crio(document: Document) -> Document:
    """What cri-o's decoder makes of a file: a byte-order mark and TOML 1.1 pass, bytes that are not UTF-8 do not."""
    document = as_crio_reads(document)
    document.load_problems = [
        replace(problem, code=NOT_UTF8) if problem.code == "DOC002" else problem for problem in document.load_problems
    ]
    return document
