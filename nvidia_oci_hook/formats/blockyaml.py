"""The block-style YAML that kubectl, helm and Go's YAML encoders write, read at the speed a cluster's manifests need.

`kubectl get pods -A -o yaml` of a large cluster is tens of megabytes of one shape: block mappings and sequences,
one `key: value` or `- value` a line, plain or simply quoted scalars, literal block scalars, `{}` and `[]`. Each
line is read by one regular expression and placed by its indentation; scalars are typed as leanyaml types them
(goyaml.v2's rules, as sigs.k8s.io/yaml gives them to the API server). Anything else (folded block scalars or ones
with an indentation indicator, flow collections with content, anchors, tags, comments after a value, keys that
repeat, plain scalars on several lines, tabs) raises Unsupported, and the caller reads that document with
leanyaml, which reads all of it or says why not. So this module never decides what a text means where leanyaml
might decide otherwise: its tests hold the two equal.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from nvidia_oci_hook.formats.leanyaml import go_resolve_plain


class Unsupported(ValueError):
    """The text is outside the shape read here; another reader decides what it is."""


# indent, an optional sequence entry dash, an optional mapping key (plain, or quoted without escapes), the rest.
_LINE = re.compile(
    r"(?m)( *)(?:(-)(?: +|$))?"
    r"(?:((?:[^\s\-?:,\[\]{}#&*!|>'\"%@`]|-(?=\S))[^\s:]*(?::[^\s:]+)*|'[^'\n]*'|\"[^\"\\\n]*\") *:(?: +|$))?"
    r"(.*)$"
)
_SINGLE = re.compile(r"'([^']*)' *$")
_DOUBLE = re.compile(r'"([^"\\]*)" *$')
# What cannot start a plain scalar here; "-" can when followed by a non-blank (`-1`, `--flag`).
_NOT_PLAIN = frozenset("?:,[]{}#&*!|>%@`\t")
_CACHE_LENGTH = 12

MAP, SEQ = 0, 1
# The end of a block whose key stands at a column: the next content line indented no deeper.
_BLOCK_ENDS: dict[int, re.Pattern[str]] = {}


def _plain(text: str, cache: dict[str, Any]) -> Any:
    if len(text) <= _CACHE_LENGTH:
        found = cache.get(text, cache)
        if found is not cache:
            return found
    if (
        text[0] in _NOT_PLAIN
        or ": " in text
        or " #" in text
        or text[-1] == ":"
        or (text[0] == "-" and text[1:2] in (" ", ""))
    ):
        raise Unsupported(text)
    value = go_resolve_plain(text.rstrip(" "))
    if len(text) <= _CACHE_LENGTH:
        cache[text] = value
    return value


def _scalar(text: str, cache: dict[str, Any]) -> Any:
    first = text[0]
    if first == "'":
        match = _SINGLE.match(text)
        if match is None:
            raise Unsupported(text)
        return match.group(1)
    if first == '"':
        match = _DOUBLE.match(text)
        if match is None:
            raise Unsupported(text)
        return match.group(1)
    if text == "{}":
        return {}
    if text == "[]":
        return []
    return _plain(text, cache)


_CHOMPING = {"|": 0, "|-": -1, "|+": 1}


def _literal(text: str, position: int, size: int, container: int, chomping: int) -> tuple[str, int]:
    """The literal block scalar whose lines start at position, below a header at a collection's column
    container, and where the next line after it starts: as leanyaml reads one, without its indentation indicator
    (which raises Unsupported, as a folded scalar does)."""
    breaks = 0
    most = 0
    lines: list[str] = []
    indent = -1
    leading_break = False
    while position <= size:
        line_end = text.find("\n", position, size)
        if line_end == -1:
            if position < size:
                raise Unsupported("a block scalar's last line without a line break")
            break
        line = text[position:line_end]
        spaces = len(line) - len(line.lstrip(" "))
        if indent < 0:
            most = max(most, spaces)
            if spaces == len(line):
                breaks += 1
                position = line_end + 1
                continue
            indent = max(most, container + 1, 1)
        if spaces == len(line) and spaces <= indent:
            breaks += 1
            position = line_end + 1
            continue
        if spaces < indent:
            break
        if leading_break:
            lines.append("\n")
        if breaks:
            lines.append("\n" * breaks)
            breaks = 0
        lines.append(line[indent:])
        leading_break = True
        position = line_end + 1
    if chomping != -1 and leading_break:
        lines.append("\n")
    if chomping == 1 and breaks:
        lines.append("\n" * breaks)
    return "".join(lines), position


def _key(text: str, cache: dict[str, Any]) -> Any:
    if text[0] in "'\"":
        return text[1:-1]
    found = cache.get(text, cache)
    if found is cache:
        found = go_resolve_plain(text)
        cache[text] = found
    return found


def loads(text: str, start: int = 0, end: Optional[int] = None, prune: frozenset[str] = frozenset()) -> Any:
    """The value of the one document in text (or in text[start:end], which start and end at line starts, read
    without a copy); raises Unsupported where the text is outside this shape.

    prune: keys whose block is passed over unread in a Kubernetes object (a mapping whose `apiVersion` came
    before them, as Go's encoders sort it): `status`, which the API server writes and no check reads, is a third
    of `kubectl get pods -o yaml`.
    """
    size = len(text) if end is None else end
    if text.find("\t", start, size) != -1 or text.find("\r", start, size) != -1:
        raise Unsupported("tab or carriage return")
    match_line = _LINE.match
    position = start
    values: dict[str, Any] = {}
    keys: dict[str, Any] = {}
    missing = keys  # a sentinel no cache holds as a value
    # Open collections, innermost last: (column, container, MAP or SEQ).
    stack: list[tuple[int, Any, int]] = []
    root: Any = None
    started = False
    # A key (or a dash) whose value is on the lines below: (container, key or index, column, is a mapping key).
    pending: Optional[tuple[Any, Any, int, bool]] = None
    # Line by line without a list of lines, which for a cluster's pods would outweigh the values read from them.
    while position <= size:
        match = match_line(text, position, size)
        position = match.end() + 1  # type: ignore[union-attr]
        indent, dash, key, rest = match.groups()  # type: ignore[union-attr]
        if key is None and dash is None:
            if not rest or rest[0] == "#":
                continue
            if not indent and rest[:3] in ("---", "...") and (len(rest) == 3 or rest[3] == " "):
                if started or rest[0] == "." or rest[3:].strip():
                    raise Unsupported("document marker")
                continue
        column = len(indent)
        if rest and rest[-1] == " ":
            rest = rest.rstrip(" ")
        if pending is not None:
            container, slot, pending_column, is_key = pending
            pending = None
            if column > pending_column or (is_key and column == pending_column and dash):
                nested: Any = [] if dash else {}
                container[slot] = nested
                stack.append((column, nested, SEQ if dash else MAP))
        while stack and stack[-1][0] > column:
            stack.pop()
        if not dash and len(stack) > 1 and stack[-1][2] == SEQ and stack[-1][0] == column:
            stack.pop()  # an indentless sequence ends at its key's column, at the mapping's next key
        if not stack:
            if started:
                raise Unsupported("content after the root node")
            started = True
            root = [] if dash else {}
            stack.append((column, root, SEQ if dash else MAP))
        frame_column, container, frame_kind = stack[-1]
        if frame_column != column:
            raise Unsupported("indentation")
        if dash:
            if frame_kind != SEQ:
                raise Unsupported("sequence entry in a mapping")
            if key is None:
                if rest in _CHOMPING:
                    literal, position = _literal(text, position, size, column, _CHOMPING[rest])
                    container.append(literal)
                elif rest:
                    container.append(_scalar(rest, values))
                else:
                    container.append(None)
                    pending = (container, len(container) - 1, column, False)
                continue
            entry: dict[Any, Any] = {}
            container.append(entry)
            container = entry
            column = match.start(3) - match.start()  # type: ignore[union-attr]
            stack.append((column, entry, MAP))
        elif frame_kind != MAP or key is None:
            raise Unsupported("not a mapping entry")
        typed = keys.get(key, missing)
        if typed is missing:
            typed = key[1:-1] if key[0] in "'\"" else go_resolve_plain(key)
            keys[key] = typed
        if typed in container:
            raise Unsupported("duplicate key")
        if not rest:
            if typed in prune and "apiVersion" in container:
                # The rest of the key's block: every line below it indented deeper (or a comment or blank line).
                ends = _BLOCK_ENDS.get(column)
                if ends is None:
                    ends = _BLOCK_ENDS[column] = re.compile(rf"\n {{0,{column}}}(?=[^ \n#])")
                after = ends.search(text, position - 1, size)
                position = after.start() + 1 if after is not None else size + 1
                continue
            container[typed] = None
            pending = (container, typed, column, True)
            continue
        if rest in _CHOMPING:
            container[typed], position = _literal(text, position, size, column, _CHOMPING[rest])
            continue
        if rest[0] in "'\"{[" or len(rest) > _CACHE_LENGTH:
            container[typed] = _scalar(rest, values)
            continue
        value = values.get(rest, missing)
        container[typed] = _scalar(rest, values) if value is missing else value
    return root
