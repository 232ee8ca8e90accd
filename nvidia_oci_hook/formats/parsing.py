"""What every format parser returns, the registry of parsers by format name, and JSON's own parser.

A format (JSON, YAML, TOML) turns bytes into a value, the problems found while reading the text (the DOC rule
family) and a locator that maps JSON pointers and offsets to lines; the document kinds build on these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

from nvidia_oci_hook.formats import jsontext

# What a file name says about its format.
EXTENSIONS = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".conf": "toml"}


class Locator(Protocol):
    def locate(self, pointer: str) -> tuple[Optional[int], Optional[int]]: ...

    def line_col(self, offset: int) -> tuple[int, int]: ...


@dataclass(frozen=True)
class LoadProblem:
    """A problem found while reading the text itself; the rule code is one of the DOC family.

    `offset` is a character offset into the text; `line`/`column` may be given instead where the parser
    reports them directly (YAML, TOML).
    """

    code: str
    message: str
    offset: Optional[int] = None
    pointer: str = ""
    line: Optional[int] = None
    column: Optional[int] = None
    # The containerd series whose reader has this problem (as Problem.series): a file one release reads and another
    # refuses. None: every reader.
    series: Optional[frozenset[str]] = None


@dataclass(frozen=True)
class Parsed:
    """What a format parser returns: the parsed value (None if it failed), problems, and a locator."""

    text: str
    value: Any
    ok: bool
    problems: list[LoadProblem]
    locator: Optional[Locator] = None


FormatParser = Callable[[bytes], Parsed]

_FORMATS: dict[str, FormatParser] = {}


def register_format(name: str, parser: FormatParser) -> None:
    _FORMATS[name] = parser


def parser_for(name: str) -> FormatParser:
    return _FORMATS[name]


_TOML_LINE = re.compile(rb"^(\[\[?\s*[A-Za-z0-9_.\"' -]+\s*\]\]?|[A-Za-z0-9_.\"'-]+\s*=.*)\s*(#.*)?$")


def looks_like_toml(raw: bytes) -> bool:
    """A file without a telling name: TOML if its first meaningful line is a table header or a key = value."""
    for line in raw.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(b"#"):
            return True  # JSON has no comments
        return _TOML_LINE.match(stripped) is not None
    return False


def decode_utf8(raw: bytes, problems: list[LoadProblem]) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Go's decoders replace invalid bytes inside strings, so keep going the same way after reporting.
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        # The bytes before the first bad one decode cleanly, so their length is the offset in the text.
        problems.append(
            LoadProblem(
                "DOC002",
                f"byte 0x{raw[exc.start]:02x} at line {line}, column {column} (offset {exc.start}) is not valid UTF-8",
                len(raw[: exc.start].decode("utf-8")),
            )
        )
        return raw.decode("utf-8", errors="replace")


def parse_json(raw: bytes) -> Parsed:
    problems: list[LoadProblem] = []
    text = decode_utf8(raw, problems)
    locator = jsontext.Positions(text)
    if not text.strip():
        problems.append(LoadProblem("DOC001", "the file is empty: expected a JSON object", 0))
        return Parsed(text, None, False, problems, locator)
    try:
        value = jsontext.decode(text)
    except jsontext.JSONSyntaxError as exc:
        problems.append(LoadProblem("DOC001", f"invalid JSON: {exc.message}", max(exc.offset, 0)))
        return Parsed(text, None, False, problems, locator)
    except jsontext.JSONTooDeep as exc:
        problems.append(
            LoadProblem(
                "DOC003",
                f"JSON nested {exc.depth} levels deep; this tool parses documents up to its interpreter's "
                f"recursion limit and Go's decoder (runc, containerd, cri-o) stops at {jsontext.GO_MAX_DEPTH}",
                exc.offset,
            )
        )
        return Parsed(text, None, False, problems, locator)
    if jsontext.has_duplicate_keys(text):
        locator.offset_of("")
        for pointer, offset in locator.duplicate_keys:
            problems.append(
                LoadProblem(
                    "DOC005",
                    f"key {pointer.rsplit('/', 1)[-1]!r} appears more than once in the same object; "
                    "Go's decoder keeps the last one",
                    offset,
                    pointer,
                )
            )
    return Parsed(text, value, True, problems, locator)


register_format("json", parse_json)
