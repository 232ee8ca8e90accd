"""TOML as pelletier/go-toml v1 reads it where tomllib differs: a UTF-8 byte-order mark and a lone carriage return
(one not followed by a line feed). containerd 1.6 and 1.7 and NVIDIA's container toolkit decode with it.

`LoadBytes` drops a byte-order mark before it lexes, and the lexer takes a lone carriage return for a line break
between statements and inside arrays, for part of the comment it is in (the comment runs on to the next line
feed), and for a character of a literal or multi-line string; in a basic string it is an error (`unescaped control
character U+000D`). Its positions count line feeds only. `as_go_toml_v1` rewrites such a text into one tomllib
reads the same way, every character at its offset, so that findings sit on the file's own lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

from nvidia_oci_hook.formats.parsing import Parsed
from nvidia_oci_hook.formats.positions import LineIndex, PositionMap
from nvidia_oci_hook.formats.tomltext import LineLocator, parse_toml, string_end

BOM = "\ufeff"
# Where a lone carriage return is, which decides what go-toml v1 makes of it.
BETWEEN, IN_COMMENT, IN_MULTILINE, IN_LITERAL, IN_BASIC = "between", "comment", "multi-line", "literal", "basic"


def _lone_returns(text: str, start: int, end: int) -> Iterator[int]:
    index = text.find("\r", start, end)
    while index != -1:
        if not text.startswith("\n", index + 1):
            yield index
        index = text.find("\r", index + 1, end)


def _stand_in(text: str) -> str:
    """A private-use character the text does not hold, for the carriage returns inside strings."""
    code = 0xE000
    while chr(code) in text:
        code += 1
    return chr(code)


def as_go_toml_v1(text: str) -> tuple[str, list[tuple[int, str]], str]:
    """The text (without its byte-order mark) as tomllib can read it the way go-toml v1 does, each lone carriage
    return's (offset, where it is), and the stand-in used for those inside strings."""
    chars = list(text)
    found: list[tuple[int, str]] = []
    stand_in = _stand_in(text)
    i = 0
    while i < len(text):
        char = text[i]
        if char in "\"'":
            end = string_end(text, i)
            where = IN_MULTILINE if text.startswith(char * 3, i) else IN_BASIC if char == '"' else IN_LITERAL
            for index in _lone_returns(text, i, end):
                found.append((index, where))
                if where != IN_BASIC:
                    chars[index] = stand_in
            i = end
        elif char == "#":
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            for index in _lone_returns(text, i, end):
                found.append((index, IN_COMMENT))
                chars[index] = " "
            i = end
        else:
            if char == "\r" and not text.startswith("\n", i + 1):
                found.append((i, BETWEEN))
                chars[i] = "\n"
            i += 1
    return "".join(chars), found, stand_in


def restored(value: Any, stand_in: str) -> Any:
    if isinstance(value, str):
        return value.replace(stand_in, "\r")
    if isinstance(value, dict):
        return {restored(key, stand_in): restored(item, stand_in) for key, item in value.items()}
    if isinstance(value, list):
        return [restored(item, stand_in) for item in value]
    return value


def starts(lines: list[str], ends: int = 0) -> list[int]:
    """The offset each line starts at, given the lines and the length of what ended each (0: kept in the line)."""
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + ends)
    return starts


class SameOffsets(PositionMap):
    """The read text's positions, at the lines and columns of the text it was made from (same offsets)."""

    def __init__(self, text: str, read: str) -> None:
        line_starts = starts(read.splitlines(keepends=True))
        index = LineIndex(text)
        located = LineLocator(read).positions
        super().__init__(text, {p: index.line_col(line_starts[at[0] - 1] + at[1] - 1) for p, at in located.items()})


@dataclass
class Reread:
    """A text tomllib refused, read again as go-toml v1 reads it: the text without its mark (`body`), what tomllib
    was given (`read`), each lone carriage return's (offset, where it is), and tomllib's reading of it."""

    body: str
    read: str
    returns: list[tuple[int, str]]
    stand_in: str
    parsed: Parsed

    @property
    def value(self) -> Any:
        """The parsed value, the carriage returns inside strings given back."""
        if any(where in (IN_MULTILINE, IN_LITERAL) for _, where in self.returns):
            return restored(self.parsed.value, self.stand_in)
        return self.parsed.value

    def locator(self) -> SameOffsets:
        return SameOffsets(self.body, self.read)


def reread(text: str) -> Optional[Reread]:
    """text read as go-toml v1 reads it; None where it holds neither a byte-order mark nor a lone carriage return
    (go-toml v1 then reads it as tomllib does)."""
    body = text[len(BOM) :] if text.startswith(BOM) else text
    read, returns, stand_in = as_go_toml_v1(body)
    if body is text and not returns:
        return None
    return Reread(body, read, returns, stand_in, parse_toml(read.encode("utf-8", errors="surrogatepass")))
