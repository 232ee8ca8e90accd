"""A YAML reader for the block-style subset that CDI specs and the tool's own config file use.

The runc wrapper and the OCI hooks run on every container start and must start in a few milliseconds, which
PyYAML (or even `re`, `typing` or `dataclasses`) would spend on imports alone. This module imports `math` and
nothing else. It reads what `nvidia-ctk cdi generate`, Go's YAML libraries and PyYAML write, types plain scalars
exactly as goyaml.v2 does, and raises YAMLSubsetError for the rest: with `unsupported=True` where the text may be
valid YAML outside the subset (the caller then reads it with PyYAML), with `unsupported=False` where goyaml.v2
refuses it. It never guesses: a text it is unsure of is unsupported.

One parser, one file: the scanner, the block structure and goyaml.v2's scalar typing share the parser's state,
and on the runtime path each further module is one more file to find and load at every container start.
"""

from __future__ import annotations

import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# ---------------------------------------------------------------------------------------------------------------
# Plain scalars, typed as goyaml.v2 types them

_GO_RESOLVE: dict[str, Any] = {}
for _words, _value in (
    (("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    (("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
    (("", "~", "null", "Null", "NULL"), None),
    ((".nan", ".NaN", ".NAN"), math.nan),
    ((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    (("-.inf", "-.Inf", "-.INF"), -math.inf),
):
    for _word in _words:
        _GO_RESOLVE[_word] = _value

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
_BASE_DIGITS = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}
_DECIMAL = "0123456789"


def _is_plain_float(text: str) -> bool:
    """Whether text is `[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?`, the float syntax goyaml.v2 resolves.

    One final newline is tolerated, as a `$` anchor tolerates it; float() ignores it.
    """
    end = len(text) - 1 if text[-1:] == "\n" else len(text)
    index = 1 if text[:1] in ("+", "-") and end else 0
    start = index
    while index < end and text[index] in _DECIMAL:
        index += 1
    whole = index - start
    if index < end and text[index] == ".":
        index += 1
        fraction = index
        while index < end and text[index] in _DECIMAL:
            index += 1
        if not whole and index == fraction:
            return False
    elif not whole:
        return False
    if index < end and text[index] in "eE":
        index += 1
        if index < end and text[index] in "+-":
            index += 1
        exponent = index
        while index < end and text[index] in _DECIMAL:
            index += 1
        if index == exponent:
            return False
    return index == end


def _go_parse_int(text: str, signed: bool) -> int | None:
    """strconv.ParseInt / ParseUint with base 0 and 64 bits; None where Go returns an error."""
    body, negative = text, False
    if signed and body[:1] in ("+", "-"):
        negative, body = body[0] == "-", body[1:]
    if not body:
        return None
    prefix = body[:2].lower()
    if prefix in ("0x", "0o", "0b"):
        base, digits = {"0x": 16, "0o": 8, "0b": 2}[prefix], body[2:]
    elif body[0] == "0" and len(body) > 1:
        base, digits = 8, body[1:]
    else:
        base, digits = 10, body
    if not digits or any(char not in _BASE_DIGITS[base] for char in digits):
        return None
    number = -int(digits, base) if negative else int(digits, base)
    if signed and not INT64_MIN <= number <= INT64_MAX:
        return None
    if not signed and number > UINT64_MAX:
        return None
    return number


def go_resolve_plain(text: str) -> Any:
    """What goyaml.v2 makes of a plain (unquoted) scalar: bool, None, int, float or the string itself."""
    if text in _GO_RESOLVE:
        return _GO_RESOLVE[text]
    first = text[:1]
    if first == ".":
        if _is_plain_float(text):
            return float(text)
        return text
    if first and first in "+-0123456789":
        plain = text.replace("_", "")
        number = _go_parse_int(plain, signed=True)
        if number is None:
            number = _go_parse_int(plain, signed=False)
        if number is not None:
            return number
        if _is_plain_float(plain):
            value = float(plain)
            if not math.isinf(value):
                return value
    return text


# ---------------------------------------------------------------------------------------------------------------
# The reader


class YAMLSubsetError(ValueError):
    """The text is not read: `unsupported` when it may be valid YAML outside the subset, else it is not valid
    YAML (or is YAML that goyaml.v2 refuses, such as a key repeated in one mapping)."""

    def __init__(self, line: int, reason: str, unsupported: bool) -> None:
        super().__init__(line, reason, unsupported)
        self.line = line
        self.reason = reason
        self.unsupported = unsupported

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


def _error(row: int, reason: str) -> YAMLSubsetError:
    return YAMLSubsetError(row + 1, reason, False)


def _unsupported(row: int, reason: str) -> YAMLSubsetError:
    return YAMLSubsetError(row + 1, reason, True)


# Characters that cannot start a plain scalar; "-", "?" and ":" can when a non-blank follows.
_INDICATORS = "-?:,[]{}#&*!|>'\"%@`"
_FLOW_INDICATORS = ",[]{}"
_BLANKS = " \t"
_HEX = "0123456789abcdefABCDEF"
_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
    "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
# libyaml gives up on an implicit key whose ':' is more than 1024 characters past its start; keys anywhere near
# that (counted in bytes, to be safe) are left to PyYAML.
_SIMPLE_KEY_LIMIT = 1000
# libyaml, and so goyaml.v2 and PyYAML's load of one document, ignore what follows a complete root node as long as
# it scans as tokens; the subset does not tell those texts from the ones they refuse.
_AFTER_ROOT = "content after the root node"
# Deeper nesting is left to PyYAML rather than risk Python's recursion limit.
_MAX_DEPTH = 100


def _is_marker(line: str) -> bool:
    """A document start (---) or end (...) marker: at column 0, followed by a blank or the end of the line."""
    return line[:3] in ("---", "...") and (len(line) == 3 or line[3] in _BLANKS)


def _is_value_indicator(line: str, col: int) -> bool:
    return line[col] == ":" and (col + 1 == len(line) or line[col + 1] in _BLANKS)


def _is_entry(line: str, col: int) -> bool:
    """A block sequence entry indicator at col."""
    return line[col] == "-" and (col + 1 == len(line) or line[col + 1] in _BLANKS)


def _scan_plain(line: str, col: int) -> tuple[int, int]:
    """Where a single-line plain scalar starting at col ends in block context, trailing blanks excluded, and the
    column of the ':' that makes it a mapping key (-1 when none does)."""
    colon = line.find(":", col)
    comment = line.find("#", col)
    if colon < 0 and comment < 0:
        return len(line.rstrip(_BLANKS)), -1
    size = len(line)
    while colon >= 0 and colon + 1 < size and line[colon + 1] not in _BLANKS:
        colon = line.find(":", colon + 1)
    while comment >= 0 and line[comment - 1] not in _BLANKS:
        comment = line.find("#", comment + 1)
    if colon >= 0 and (comment < 0 or colon < comment):
        stop = colon
    else:
        colon = -1
        stop = comment if comment >= 0 else size
    return col + len(line[col:stop].rstrip(_BLANKS)), colon


def _key_too_long(line: str, col: int, colon: int) -> bool:
    # A character is at most 4 bytes: most keys are short enough to need no encoding.
    return colon - col > _SIMPLE_KEY_LIMIT // 4 and len(line[col:colon].encode("utf-8")) > _SIMPLE_KEY_LIMIT


def _describe(key: Any) -> str:
    """key on one line, for an error message."""
    if isinstance(key, str):
        out = []
        for char in key:
            if char in '"\\':
                out.append("\\" + char)
            elif char.isprintable():
                out.append(char)
            else:
                out.append(f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}")
        return '"' + "".join(out) + '"'
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return repr(key)


def _check_characters(text: str) -> None:
    """Refuse the characters goyaml.v2 refuses anywhere in a stream; leave to PyYAML those it reads as line
    breaks (NEL, LS, PS) and a byte-order mark past the start, which parsers skip in different places."""
    if text.replace("\n", "").replace("\t", "").isprintable():
        return
    for index, char in enumerate(text):
        if char.isprintable() or char in "\n\t":
            continue
        if char in "\x85\u2028\u2029\ufeff":
            raise _unsupported(text.count("\n", 0, index), f"character U+{ord(char):04X}")
        code = ord(char)
        if not (0xA0 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or code >= 0x10000):
            raise _error(text.count("\n", 0, index), f"character U+{code:04X} is not allowed in YAML")


def loads(text: str) -> Any:
    """The value of the one YAML document in text, with plain scalars typed as goyaml.v2 types them.

    Raises YAMLSubsetError: `unsupported` is true where the text may be valid YAML outside the subset.
    """
    if text[:1] == "\ufeff":
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    _check_characters(text)
    return _Reader(text.split("\n")).document()


class _Reader:
    """One pass over the lines of a text. Positions are (row, column), both from 0.

    Block structure follows libyaml (which goyaml.v2 ports): a collection's entries start at its column, a plain
    scalar continues on lines indented deeper than the innermost collection's column (its `container`), and a
    sequence may sit at its parent key's column.
    """

    __slots__ = ("count", "depth", "indents", "lines", "unbroken")

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.indents = [len(line) - len(line.lstrip(" ")) for line in lines]
        # A text that ends with a line break splits into a last empty string, which is not a line.
        self.count = len(lines) - 1 if lines[-1] == "" else len(lines)
        # The row of a last line that has no line break after it, else -1: a block scalar keeps only breaks.
        self.unbroken = -1 if lines[-1] == "" else len(lines) - 1
        self.depth = 0

    def enter(self, row: int) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _unsupported(row, f"collections nested deeper than {_MAX_DEPTH} levels")

    # -- lines between nodes

    def next_content(self, row: int, after_open_plain: bool) -> int:
        """The first row from row on that is neither blank nor a comment (self.count when none is)."""
        lines = self.lines
        indents = self.indents
        count = self.count
        while row < count:
            line = lines[row]
            indent = indents[row]
            if indent == len(line) or line[indent] == "#":
                row += 1
            elif line[indent] == "\t":
                # libyaml lets a plain scalar's scanner swallow some tabs at line starts; anywhere else a tab
                # there cannot start a token.
                if after_open_plain:
                    raise _unsupported(row, "tab character at the start of a line after a plain scalar")
                raise _error(row, "tab character in indentation")
            else:
                return row
        return row

    def after_value(self, row: int, container: int, open_plain: bool) -> int:
        """The next content row after a node that ended before row, checked not to be indented deeper than the
        node's container (where it would continue a plain scalar, or is out of place)."""
        next_row = self.next_content(row, open_plain)
        if next_row < self.count:
            line = self.lines[next_row]
            col = self.indents[next_row]
            if col > container and not _is_marker(line):
                continued = open_plain and all(self.lines[r].lstrip(" ")[:1] != "#" for r in range(row, next_row))
                # A line that starts with ':' does not continue the scalar, whose scanner stops there.
                if continued and not _is_value_indicator(line, col):
                    if _scan_plain(line, col)[1] >= 0:
                        raise _error(next_row, "mapping values are not allowed in this context")
                    raise _unsupported(next_row, "plain scalar on several lines")
                if container < 0:
                    raise _unsupported(next_row, _AFTER_ROOT)
                raise _error(next_row, "bad indentation")
        return next_row

    # -- the document

    def document(self) -> Any:
        lines = self.lines
        count = self.count
        row = self.next_content(0, False)
        if row < count and lines[row][:1] == "%":
            raise _unsupported(row, "directive")
        value = None
        if row < count and _is_marker(lines[row]) and lines[row][0] == "-":
            line = lines[row]
            col = 3
            while col < len(line) and line[col] in _BLANKS:
                col += 1
            if col == len(line) or line[col] == "#":
                row = self.next_content(row + 1, False)
            elif line[col] in "-?:" and (col + 1 == len(line) or line[col + 1] in _BLANKS):
                raise _unsupported(row, "node after a document start marker")
            else:
                value, row = self.node_at(row, col, -1, False)
                return self.document_end(value, row)
        elif row < count and _is_marker(lines[row]):
            raise _unsupported(row, "document end marker without a document")
        if row < count and not _is_marker(lines[row]):
            value, row = self.block_node(row, -1)
        return self.document_end(value, row)

    def document_end(self, value: Any, row: int) -> Any:
        lines = self.lines
        if row >= self.count:
            return value
        line = lines[row]
        if not _is_marker(line):
            raise _unsupported(row, _AFTER_ROOT)
        if line[0] == "-":
            raise _unsupported(row, "several documents")
        rest = line[3:].lstrip(_BLANKS)
        if rest and rest[0] != "#":
            raise _unsupported(row, "content after a document end marker")
        for later in range(row + 1, self.count):
            body = lines[later].lstrip(_BLANKS)
            if body and body[0] != "#":
                raise _unsupported(later, "content after a document end marker")
        return value

    # -- block nodes

    def block_node(self, row: int, container: int) -> tuple[Any, int]:
        """The node that starts a content line of its own, and the next content row after it."""
        line = self.lines[row]
        col = self.indents[row]
        if _is_entry(line, col):
            return self.block_sequence(row, col, False)
        return self.node_at(row, col, container, True)

    def node_at(self, row: int, col: int, container: int, collection_ok: bool) -> tuple[Any, int]:
        """The node at (row, col) and the next content row after it. Without collection_ok the node is on the
        line of a mapping key, where no block collection can start."""
        line = self.lines[row]
        char = line[col]
        if char == "|" or char == ">":
            value, row = self.block_scalar(row, col, container)
            return value, self.after_value(row, container, False)
        if char == "-" and _is_entry(line, col):
            if collection_ok:
                return self.block_sequence(row, col, False)
            raise _error(row, "block sequence entries are not allowed in this context")
        value, end_row, end, open_plain, is_key = self.scalar_head(row, col, container)
        if is_key:
            if collection_ok:
                return self.block_mapping(row, col, value, end)
            raise _error(row, "mapping values are not allowed in this context")
        return value, self.after_value(end_row + 1, container, open_plain)

    def scalar_head(self, row: int, col: int, container: int) -> tuple[Any, int, int, bool, bool]:
        """A scalar or flow collection at (row, col) in block context, and what follows it on its last line.

        Returns (value, last row, end column, open plain, is key): for a key, the end column is just past its ':';
        an open plain scalar is one that reaches the end of its line, where the next lines may continue it.
        """
        lines = self.lines
        line = lines[row]
        char = line[col]
        if char == '"' or char == "'":
            value, end_row, end = self.quoted(row, col)
        elif char == "[" or char == "{":
            value, end_row, end = self.flow(row, col)
        elif char in _INDICATORS and not (char in "-?:" and col + 1 < len(line) and line[col + 1] not in _BLANKS):
            raise self.bad_start(row, col, False)
        else:
            end, colon = _scan_plain(line, col)
            text = line[col:end]
            if text == "<<":
                raise _unsupported(row, "merge key <<")
            if colon >= 0:
                if colon - col > _SIMPLE_KEY_LIMIT // 4 and _key_too_long(line, col, colon):
                    raise _unsupported(row, "implicit mapping key too long")
                return go_resolve_plain(text), row, colon + 1, False, True
            open_plain = end == len(line) or line[end:].lstrip(_BLANKS) == ""
            return go_resolve_plain(text), row, end, open_plain, False
        last = lines[end_row]
        size = len(last)
        while end < size and last[end] in _BLANKS:
            end += 1
        if end == size or last[end] == "#":
            return value, end_row, end, False, False
        if last[end] == ":" and (end + 1 == size or last[end + 1] in _BLANKS):
            if char == "[" or char == "{":
                raise _unsupported(row, "flow collection as a mapping key")
            if end_row != row:
                raise _error(end_row, "mapping values are not allowed in this context")
            if _key_too_long(line, col, end):
                raise _unsupported(row, "implicit mapping key too long")
            return value, row, end + 1, False, True
        if container < 0:
            raise _unsupported(end_row, _AFTER_ROOT)
        if end_row != row:
            # Its column there may close the collections around the node, and what closes the root is ignored.
            raise _unsupported(end_row, "text after a node that spans lines")
        raise _error(end_row, f"unexpected {last[end]!r} after a node")

    def bad_start(self, row: int, col: int, flow: bool) -> YAMLSubsetError:
        """The error for a character that starts no node the subset reads."""
        char = self.lines[row][col]
        if char in "&*":
            return _unsupported(row, "anchor or alias")
        if char == "!":
            return _unsupported(row, "tag")
        if char in "?:":
            return _unsupported(row, f"{char!r} indicator")
        if char == "-":  # a block sequence entry indicator in flow context
            return _unsupported(row, "'-' indicator in a flow collection")
        if char == "%" and col == 0:
            return _unsupported(row, "directive")
        if char in "|>" and not flow:
            # libyaml takes a block scalar at its collection's column as the value of an empty entry before it.
            return _unsupported(row, "block scalar at a mapping key's or sequence entry's column")
        return _error(row, f"character {char!r} cannot start a node")

    def block_mapping(self, row: int, col: int, key: Any, after_colon: int) -> tuple[Any, int]:
        """The block mapping whose first key (already read) is at (row, col); its entries start at col."""
        self.enter(row)
        lines = self.lines
        mapping: dict[Any, Any] = {}
        while True:
            if key in mapping:
                raise self.duplicate(row, mapping, key)
            value, row = self.mapping_value(row, after_colon, col)
            mapping[key] = value
            if self.block_ends(row, col):
                break
            line = lines[row]
            if _is_entry(line, col):
                raise _error(row, "expected a mapping key, found a sequence entry")
            key, _, after_colon, _, is_key = self.scalar_head(row, col, col)
            if not is_key:
                raise _error(row, "could not find expected ':'")
        self.depth -= 1
        return mapping, row

    def block_ends(self, row: int, col: int) -> bool:
        """Whether the block whose entries stand at column col ends before row: at the end of the text, at a
        document marker or where the text dedents. Deeper indentation is goyaml.v2's "bad indentation"."""
        if row >= self.count:
            return True
        indent = self.indents[row]
        if indent != col:
            if indent < col:
                return True
            raise _error(row, "bad indentation")
        return col == 0 and _is_marker(self.lines[row])

    def mapping_value(self, row: int, col: int, container: int) -> tuple[Any, int]:
        """The value after a block mapping key's ':', which ends at (row, col), and the next content row."""
        line = self.lines[row]
        size = len(line)
        while col < size and line[col] in _BLANKS:
            col += 1
        if col < size and line[col] != "#":
            return self.node_at(row, col, container, False)
        next_row = self.next_content(row + 1, False)
        if next_row < self.count:
            line = self.lines[next_row]
            indent = self.indents[next_row]
            if indent > container:
                return self.block_node(next_row, container)
            if indent == container and _is_entry(line, indent):
                return self.block_sequence(next_row, indent, True)
        return None, next_row

    def block_sequence(self, row: int, col: int, indentless: bool) -> tuple[Any, int]:
        """The block sequence whose first '-' is at (row, col). An indentless one is at its parent key's column
        and ends at that mapping's next key."""
        self.enter(row)
        lines = self.lines
        count = self.count
        items: list[Any] = []
        while True:
            line = lines[row]
            size = len(line)
            start = col + 1
            while start < size and line[start] == " ":
                start += 1
            if start < size and line[start] == "\t":
                raise _error(row, "tab character after a sequence entry indicator")
            if start < size and line[start] != "#":
                value, row = self.node_at(row, start, col, True)
            else:
                row = self.next_content(row + 1, False)
                if row < count and self.indents[row] > col:
                    value, row = self.block_node(row, col)
                else:
                    value = None
            items.append(value)
            if self.block_ends(row, col):
                break
            line = lines[row]
            if not _is_entry(line, col):
                if indentless:
                    break
                if line[col] in "|>":
                    raise self.bad_start(row, col, False)
                raise _error(row, "expected a sequence entry '-'")
        self.depth -= 1
        return items, row

    def duplicate(self, row: int, mapping: dict[Any, Any], key: Any) -> YAMLSubsetError:
        for existing in mapping:
            if existing is key or existing == key:
                if type(existing) is type(key) and existing == key:
                    return _error(row, f"duplicate key {_describe(key)}")
                break
        # 1 and 1.0, true and 1, or two NaNs: one key to Python, two to Go.
        return _unsupported(row, f"keys equal in Python but not in Go: {_describe(key)}")

    # -- block scalars

    def block_scalar(self, row: int, col: int, container: int) -> tuple[str, int]:
        """The literal (|) or folded (>) scalar whose header is at (row, col), and the first row after it."""
        lines = self.lines
        count = self.count
        line = lines[row]
        size = len(line)
        literal = line[col] == "|"
        chomping = 0  # -1 strip, 0 clip, 1 keep
        increment = 0
        index = col + 1
        for _ in range(2):
            char = line[index : index + 1]
            if char and char in "+-" and not chomping:
                chomping = 1 if char == "+" else -1
            elif char and char in _DECIMAL and not increment:
                if char == "0":
                    raise _error(row, "block scalar indentation indicator 0")
                increment = int(char)
            else:
                break
            index += 1
        while index < size and line[index] in _BLANKS:
            index += 1
        if index < size and line[index] != "#":
            raise _error(row, "expected a comment or a line break after a block scalar header")
        indent = max(container, 0) + increment if increment else 0
        breaks = 0
        row += 1
        most = 0
        # Leading empty lines; without an indentation indicator they and the first content line set the indent.
        while row < count:
            line = lines[row]
            spaces = self.indents[row]
            if indent and spaces > indent:
                break
            if spaces > most:
                most = spaces
            if spaces == len(line):
                if row == self.unbroken:  # blanks, then the end of the text: no line break to keep
                    row += 1
                    break
                breaks += 1
                row += 1
                continue
            if line[spaces] == "\t" and (not indent or spaces < indent):
                raise _unsupported(row, "tab character in a block scalar's indentation")
            break
        if not indent:
            indent = max(most, container + 1, 1)
        chunks: list[str] = []
        leading_break = False
        leading_blank = False
        while row < count:
            line = lines[row]
            if self.indents[row] < indent:
                break
            content = line[indent:]
            trailing_blank = content[0] in _BLANKS
            if not literal and leading_break and not leading_blank and not trailing_blank:
                if not breaks:
                    chunks.append(" ")
            elif leading_break:
                chunks.append("\n")
            if breaks:
                chunks.append("\n" * breaks)
                breaks = 0
            leading_blank = trailing_blank
            chunks.append(content)
            if row == self.unbroken:
                leading_break = False
                row += 1
                break
            leading_break = True
            row += 1
            while row < count:
                line = lines[row]
                spaces = self.indents[row]
                if spaces > indent:
                    break
                if spaces == len(line):
                    if row == self.unbroken:
                        row += 1
                        break
                    breaks += 1
                    row += 1
                    continue
                if spaces < indent and line[spaces] == "\t":
                    raise _unsupported(row, "tab character in a block scalar's indentation")
                break
        if chomping != -1 and leading_break:
            chunks.append("\n")
        if chomping == 1 and breaks:
            chunks.append("\n" * breaks)
        return "".join(chunks), row

    # -- quoted scalars

    def quoted(self, row: int, col: int) -> tuple[str, int, int]:
        """The single- or double-quoted scalar at (row, col): its value, and the row and column just past it."""
        line = self.lines[row]
        if line[col] == "'":
            end = line.find("'", col + 1)
            while end >= 0 and line[end + 1 : end + 2] == "'":
                end = line.find("'", end + 2)
            if end >= 0:
                body = line[col + 1 : end]
                return body.replace("''", "'") if "''" in body else body, row, end + 1
        else:
            end = line.find('"', col + 1)
            if end >= 0 and "\\" not in line[col + 1 : end]:
                return line[col + 1 : end], row, end + 1
        return self.quoted_lines(row, col)

    def quoted_lines(self, row: int, col: int) -> tuple[str, int, int]:
        """A quoted scalar with escapes, or one that spans lines: a line break folds to a space, n empty lines
        to n newlines; blanks around a break go, and an escaped break leaves no space."""
        lines = self.lines
        count = self.count
        start_row = row
        quote = lines[row][col]
        double = quote == '"'
        parts: list[str] = []
        index = col + 1
        while True:
            line = lines[row]
            size = len(line)
            start = index
            escaped_break = False
            while index < size:
                char = line[index]
                if char == quote:
                    if not double and index + 1 < size and line[index + 1] == "'":
                        parts.append(line[start : index + 1])
                        index += 2
                        start = index
                        continue
                    parts.append(line[start:index])
                    return "".join(parts), row, index + 1
                if char == "\\" and double:
                    parts.append(line[start:index])
                    if index + 1 == size:
                        escaped_break = True
                        break
                    text, index = self.escape(row, line, index)
                    parts.append(text)
                    start = index
                    continue
                index += 1
            else:
                parts.append(line[start:].rstrip(_BLANKS))
            empty_lines = 0
            while True:
                row += 1
                if row >= count:
                    raise _error(start_row, "unclosed quoted scalar")
                line = lines[row]
                if _is_marker(line):
                    raise _error(row, "document marker inside a quoted scalar")
                index = len(line) - len(line.lstrip(_BLANKS))
                if index < len(line):
                    break
                empty_lines += 1
            if escaped_break or empty_lines:
                parts.append("\n" * empty_lines)
            else:
                parts.append(" ")

    @staticmethod
    def escape(row: int, line: str, index: int) -> tuple[str, int]:
        """The character that the escape sequence at line[index] (a backslash) stands for, and the index after."""
        char = line[index + 1]
        if char in _ESCAPES:
            return _ESCAPES[char], index + 2
        width = _HEX_ESCAPES.get(char)
        if width is None:
            if char == "'":
                raise _unsupported(row, "escape \\' (libyaml versions differ on it)")
            raise _error(row, f"unknown escape character {char!r}")
        digits = line[index + 2 : index + 2 + width]
        if len(digits) != width or any(digit not in _HEX for digit in digits):
            raise _error(row, f"escape \\{char} needs {width} hexadecimal digits")
        code = int(digits, 16)
        if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
            raise _error(row, f"escape \\{char}{digits} is not a Unicode character")
        return chr(code), index + 2 + width

    # -- flow collections

    def flow_skip(self, row: int, col: int, start_row: int) -> tuple[int, int]:
        """The position of the next token in a flow collection opened on start_row, past blanks, line breaks and
        comments."""
        lines = self.lines
        line = lines[row]
        while True:
            size = len(line)
            while col < size and line[col] in _BLANKS:
                col += 1
            if col < size and line[col] != "#":
                return row, col
            row += 1
            if row >= self.count:
                raise _error(start_row, "unclosed flow collection")
            line = lines[row]
            if _is_marker(line):
                raise _unsupported(row, "document marker inside a flow collection")
            col = 0

    def flow(self, row: int, col: int) -> tuple[Any, int, int]:
        """The flow sequence or mapping opened at (row, col): its value, and the row and column just past it."""
        self.enter(row)
        lines = self.lines
        start_row = row
        if lines[row][col] == "[":
            items: list[Any] = []
            row, col = self.flow_skip(row, col + 1, start_row)
            while True:
                char = lines[row][col]
                if char == "]":
                    break
                if char == ",":
                    raise _error(row, "expected a node, found ','")
                value, row, col = self.flow_node(row, col, start_row)
                items.append(value)
                row, col = self.flow_skip(row, col, start_row)
                char = lines[row][col]
                if char == ",":
                    row, col = self.flow_skip(row, col + 1, start_row)
                elif char == ":":
                    raise _unsupported(row, "mapping inside a flow sequence")
                elif char != "]":
                    raise _error(row, "expected ',' or ']' in a flow sequence")
            self.depth -= 1
            return items, row, col + 1
        mapping: dict[Any, Any] = {}
        row, col = self.flow_skip(row, col + 1, start_row)
        while True:
            char = lines[row][col]
            if char == "}":
                break
            if char == ",":
                raise _error(row, "expected a node, found ','")
            if char in "[{":
                raise _unsupported(row, "flow collection as a mapping key")
            key_row, key_col = row, col
            key, row, col = self.flow_node(row, col, start_row)
            line = lines[row]
            size = len(line)
            while col < size and line[col] in _BLANKS:
                col += 1
            if row != key_row or col == size or line[col] != ":":
                raise _unsupported(key_row, "flow mapping entry that is not `key: value` on one line")
            if _key_too_long(line, key_col, col):
                raise _unsupported(row, "implicit mapping key too long")
            if key in mapping:
                raise self.duplicate(key_row, mapping, key)
            row, col = self.flow_skip(row, col + 1, start_row)
            char = lines[row][col]
            if char == "," or char == "}":
                value = None
            else:
                value, row, col = self.flow_node(row, col, start_row)
                row, col = self.flow_skip(row, col, start_row)
            mapping[key] = value
            char = lines[row][col]
            if char == ",":
                row, col = self.flow_skip(row, col + 1, start_row)
            elif char != "}":
                raise _error(row, "expected ',' or '}' in a flow mapping")
        self.depth -= 1
        return mapping, row, col + 1

    def flow_node(self, row: int, col: int, start_row: int) -> tuple[Any, int, int]:
        """The node at (row, col) inside a flow collection, and the row and column just past it."""
        line = self.lines[row]
        char = line[col]
        if char == "[" or char == "{":
            return self.flow(row, col)
        if char == '"' or char == "'":
            return self.quoted(row, col)
        size = len(line)
        if char in _INDICATORS and not (char == "-" and col + 1 < size and line[col + 1] not in _BLANKS):
            raise self.bad_start(row, col, True)
        index = col
        while index < size:
            char = line[index]
            if char in _FLOW_INDICATORS:
                break
            if char == ":":
                if index + 1 == size or line[index + 1] in _BLANKS:
                    break
                # libyaml refuses `a:b` in flow context where PyYAML reads one scalar or a key and a value.
                raise _unsupported(row, "':' inside a plain scalar in a flow collection")
            if char == "#" and line[index - 1] in _BLANKS:
                break
            index += 1
        text = line[col:index].rstrip(_BLANKS)
        if text == "<<":
            raise _unsupported(row, "merge key <<")
        if index == size:
            next_row, next_col = self.flow_skip(row, index, start_row)
            if next_row != row and self.lines[next_row][next_col] not in ",]}":
                raise _unsupported(next_row, "plain scalar on several lines")
        return go_resolve_plain(text), row, col + len(text)
