"""TOML documents (cri-o and containerd configs): values from tomllib (tomli before 3.11), positions from a
line scan of table headers and keys, which is all a configuration file's findings need."""

from __future__ import annotations

import re
import sys
from typing import Any, Optional

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.formats.parsing import LoadProblem, Parsed, decode_utf8, register_format
from nvidia_oci_hook.formats.positions import PositionMap

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.9 and 3.10
    import tomli as tomllib

_HEADER = re.compile(r"^\s*(\[\[?)\s*(.+?)\s*(\]\]?)\s*(?:#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*'))*)\s*="""
)
_KEY_PART = re.compile(r"""[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*'""")
_ERROR_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def go_scalar_type(value: Any) -> Optional[str]:
    """The Go type of a TOML scalar as both Go TOML decoders the engines use (go-toml, BurntSushi/toml) print it;
    None for dates, arrays and tables, which each decoder names its own way."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return None


def split_key(dotted: str) -> list[str]:
    parts = []
    for match in _KEY_PART.finditer(dotted):
        token = match.group()
        if token.startswith('"'):
            token = token[1:-1].encode().decode("unicode_escape")
        elif token.startswith("'"):
            token = token[1:-1]
        parts.append(token)
    return parts


class LineLocator(PositionMap):
    """pointer -> (line, column) for tables, arrays of tables and keys, found by scanning the lines.

    Multi-line strings and arrays are skipped by tracking open delimiters, so keys inside them are not taken
    for real ones.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text, {"": (1, 1)})
        self._scan()

    def _scan(self) -> None:
        table: list[str] = []
        array_counts: dict[str, int] = {}
        table_pointer = ""
        in_multiline: Optional[str] = None
        depth = 0
        for number, line in enumerate(self.text.splitlines(), start=1):
            if in_multiline is not None:
                if in_multiline in line:
                    in_multiline = None
                continue
            if depth > 0:
                depth += _bracket_balance(line)
                continue
            header = _HEADER.match(line)
            if header and header.group(1) == header.group(3)[::-1].replace("]", "["):
                table = split_key(header.group(2))
                pointer = ""
                for part in table:
                    # A header also defines the tables above it ([a.b.c] makes a and a.b): they sit here too.
                    pointer = pointer_join(pointer, part)
                    self.positions.setdefault(pointer, (number, line.index("[") + 1))
                if header.group(1) == "[[":
                    index = array_counts.get(pointer, 0)
                    array_counts[pointer] = index + 1
                    self.positions.setdefault(pointer, (number, 1))
                    pointer = f"{pointer}/{index}"
                self.positions.setdefault(pointer, (number, line.index("[") + 1))
                table_pointer = pointer
                continue
            key = _KEY.match(line)
            if not key:
                continue
            pointer = table_pointer
            for part in split_key(key.group(1)):
                pointer = pointer_join(pointer, part)
                self.positions.setdefault(pointer, (number, len(line) - len(line.lstrip()) + 1))
            rest = line[key.end() :]
            for quote in ('"""', "'''"):
                if rest.count(quote) == 1:
                    in_multiline = quote
            if in_multiline is None:
                depth = _bracket_balance(rest)


def _bracket_balance(text: str) -> int:
    """Open minus closed brackets outside strings and comments on one line."""
    balance = 0
    quote = None
    for char in text:
        if quote:
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#":
            break
        elif char in "[{":
            balance += 1
        elif char in "]}":
            balance -= 1
    return balance


def parse_toml(raw: bytes) -> Parsed:
    problems: list[LoadProblem] = []
    text = decode_utf8(raw, problems)
    try:
        value: Any = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        position = _ERROR_POSITION.search(message)
        reason = _ERROR_POSITION.sub("", message).strip()
        problems.append(
            LoadProblem(
                "DOC001",
                f"invalid TOML: {reason}",
                line=int(position.group(1)) if position else None,
                column=int(position.group(2)) if position else None,
            )
        )
        return Parsed(text, None, False, problems, LineLocator(""))
    except RecursionError:
        problems.append(LoadProblem("DOC003", "TOML nested deeper than this tool parses"))
        return Parsed(text, None, False, problems, LineLocator(""))
    return Parsed(text, value, True, problems, LineLocator(text))


register_format("toml", parse_toml)


def string_end(text: str, start: int) -> int:
    """The index just past the string that starts at start ('...', "...", or their triple-quoted forms)."""
    quote = text[start]
    if text.startswith(quote * 3, start):
        i = start + 3
        while i < len(text):
            if quote == '"' and text[i] == "\\":
                i += 2
                continue
            if text.startswith(quote * 3, i):
                end = i + 3
                # Up to two more quotes belong to the content.
                while end < len(text) and text[end] == quote and end - i < 5:
                    end += 1
                return end
            i += 1
        return len(text)
    i = start + 1
    while i < len(text) and text[i] != "\n":
        if quote == '"' and text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return i
