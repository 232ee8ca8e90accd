"""Where each value is in a spec's YAML or JSON text, and the text edited there, value by value.

The file is edited as text, value by value, so that comments, key order, quoting and indentation survive; a place
where the text cannot be edited safely raises _CannotEdit, and the file is left as it is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from nvidia_oci_hook.formats import leanyaml
from nvidia_oci_hook.formats.jsontext import has_duplicate_keys, pointer_join
from nvidia_oci_hook.node.cdi_reconcile.path_moves import _Edit


class _CannotEdit(Exception):
    """The text cannot be edited safely at this place; the file is left as it is."""


@dataclass
class _Span:
    start: int
    end: int
    style: str  # "" plain, '"' or "'" quoted (YAML); '"' for JSON strings


@dataclass
class _Member:
    """A device node mapping and its `path` member: enough to insert a member right after it."""

    path_key: _Span
    path_value: _Span
    separator: str  # what goes before a new member: the comma (JSON, flow) or line break and indentation (block)
    colon: str  # what goes between a key and its value
    block: bool


_PLAIN_SAFE = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./+@=~-]*")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _tokens(pointer: str) -> list[str]:
    return [_unescape(token) for token in pointer.split("/")[1:]] if pointer else []


class _YAMLText:
    """Spans of values in a YAML text, from PyYAML's node tree (leanyaml keeps no positions)."""

    def __init__(self, text: str) -> None:
        import yaml

        self.text = text
        try:
            self.root = yaml.compose(text, Loader=yaml.SafeLoader)
        except (yaml.YAMLError, RecursionError) as exc:
            raise _CannotEdit(f"the text cannot be located value by value ({str(exc).splitlines()[0]})") from None
        self.references: dict[int, int] = {}
        stack = [self.root]
        while stack:
            node = stack.pop()
            self.references[id(node)] = self.references.get(id(node), 0) + 1
            if self.references[id(node)] > 1:
                continue
            if isinstance(node, yaml.MappingNode):
                stack.extend(part for pair in node.value for part in pair)
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(node.value)

    def node(self, pointer: str) -> Any:
        import yaml

        node = self.root
        for token in _tokens(pointer):
            if self.references.get(id(node), 0) > 1:
                raise _CannotEdit(f"{pointer} is reached through a YAML alias")
            if isinstance(node, yaml.MappingNode):
                found = [value for key, value in node.value if isinstance(key, yaml.ScalarNode) and key.value == token]
                if len(found) != 1:
                    raise _CannotEdit(f"{pointer}: the key is not found once in the text")
                node = found[0]
            elif isinstance(node, yaml.SequenceNode) and token.isdigit() and int(token) < len(node.value):
                node = node.value[int(token)]
            else:
                raise _CannotEdit(f"{pointer} is not in the text")
        if self.references.get(id(node), 0) > 1:
            raise _CannotEdit(f"{pointer} is a YAML alias or anchored value")
        return node

    def scalar(self, pointer: str) -> _Span:
        import yaml

        node = self.node(pointer)
        if not isinstance(node, yaml.ScalarNode) or node.style not in (None, '"', "'"):
            raise _CannotEdit(f"{pointer} is not a plain or quoted scalar")
        start, end = node.start_mark.index, node.end_mark.index
        if self.text[start : start + 1] in ("&", "!", "*"):
            raise _CannotEdit(f"{pointer} has an anchor or a tag")
        return _Span(start, end, node.style or "")

    def render(self, value: str, style: str) -> str:
        import yaml

        if style == "'" and "\n" not in value:
            return "'" + value.replace("'", "''") + "'"
        if style == "" and _PLAIN_SAFE.fullmatch(value) and leanyaml.go_resolve_plain(value) == value:
            with _quiet_yaml():
                if yaml.safe_load(value) == value:
                    return value
        return json.dumps(value, ensure_ascii=False)

    def member(self, pointer: str) -> _Member:
        import yaml

        mapping = self.node(pointer)
        if not isinstance(mapping, yaml.MappingNode):
            raise _CannotEdit(f"{pointer} is not a mapping")
        pairs = [(k, v) for k, v in mapping.value if isinstance(k, yaml.ScalarNode) and k.value == "path"]
        if len(pairs) != 1:
            raise _CannotEdit(f"{pointer}: no single path key")
        key, value = pairs[0]
        if not isinstance(value, yaml.ScalarNode):
            raise _CannotEdit(f"{pointer}/path is not a scalar")
        key_span = _Span(key.start_mark.index, key.end_mark.index, key.style or "")
        value_span = self.scalar(pointer_join(pointer, "path"))
        colon = self.text[key_span.end : value_span.start]
        if "\n" in colon or colon.strip() != ":":
            raise _CannotEdit(f"{pointer}/path: its value is not on its key's line")
        if mapping.flow_style:
            return _Member(key_span, value_span, self.flow_separator(mapping), colon, False)
        line_start = self.text.rfind("\n", 0, key_span.start) + 1
        indent = self.text[line_start : key_span.start]
        # The key may follow the "- " of its sequence entry: the new line lines up with the key itself.
        indent = " " * len(indent) if indent.strip(" ") in ("", "-") else ""
        if not indent and key_span.start != line_start:
            raise _CannotEdit(f"{pointer}: the path key's line cannot be continued")
        return _Member(key_span, value_span, indent, colon, True)

    def flow_separator(self, mapping: Any) -> str:
        if len(mapping.value) >= 2:
            between = self.text[mapping.value[0][1].end_mark.index : mapping.value[1][0].start_mark.index]
            if between.strip() == ",":
                return between
        return ", "

    def key_text(self, key: _Span) -> str:
        return self.render("hostPath", key.style) if key.style else "hostPath"

    def insertion(self, member: _Member, value: str) -> tuple[int, str]:
        """(offset, text) of a hostPath member right after path."""
        text = self.text
        rendered = self.render(value, member.path_value.style)
        if not member.block:
            return member.path_value.end, f"{member.separator}{self.key_text(member.path_key)}{member.colon}{rendered}"
        end = member.path_value.end
        line_end = text.find("\n", end)
        rest = text[end : len(text) if line_end < 0 else line_end].rstrip("\r")
        if rest.strip(" \t") and not rest.lstrip(" \t").startswith("#"):
            raise _CannotEdit("the path value's line goes on after it")
        newline = "\r\n" if line_end > 0 and text[line_end - 1] == "\r" else "\n"
        line = f"{member.separator}{self.key_text(member.path_key)}{member.colon}{rendered}"
        if line_end < 0:
            return len(text), newline + line
        return line_end + 1, line + newline


class _quiet_yaml:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, value: object, traceback: object) -> bool:
        import yaml

        return isinstance(value, yaml.YAMLError)


_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.DOTALL)


class _JSONText:
    """Spans of values and object members in a JSON text known to be valid."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.values: dict[str, _Span] = {}
        self.keys: dict[str, _Span] = {}
        self.members: dict[str, list[str]] = {}  # object pointer -> member pointers, in order
        self.opening: dict[str, int] = {}
        stack: list[list[Any]] = []  # [pointer, is_object, next index, pending key pointer]
        for match in _JSON_TOKEN.finditer(text):
            token = match.group()
            if token in (":", ","):
                continue
            if token in ("}", "]"):
                pointer = stack.pop()[0]
                self.values[pointer] = _Span(self.opening[pointer], match.end(), "")
                continue
            if stack and stack[-1][1] and stack[-1][3] is None:
                frame = stack[-1]
                pointer = pointer_join(frame[0], json.loads(token))
                frame[3] = pointer
                self.keys[pointer] = _Span(match.start(), match.end(), '"')
                self.members[frame[0]].append(pointer)
                continue
            if not stack:
                pointer = ""
            elif stack[-1][1]:
                pointer, stack[-1][3] = stack[-1][3], None
            else:
                pointer = f"{stack[-1][0]}/{stack[-1][2]}"
                stack[-1][2] += 1
            if token in ("{", "["):
                self.opening[pointer] = match.start()
                if token == "{":
                    self.members[pointer] = []
                stack.append([pointer, token == "{", 0, None])
            else:
                self.values[pointer] = _Span(match.start(), match.end(), '"' if token[0] == '"' else "")

    def scalar(self, pointer: str) -> _Span:
        span = self.values.get(pointer)
        if span is None or span.style != '"':
            raise _CannotEdit(f"{pointer} is not a string in the text")
        return span

    def render(self, value: str, style: str) -> str:
        return json.dumps(value, ensure_ascii=False)

    def member(self, pointer: str) -> _Member:
        members = self.members.get(pointer)
        path_pointer = pointer_join(pointer, "path")
        if members is None or path_pointer not in members:
            raise _CannotEdit(f"{pointer}: no path member")
        key = self.keys[path_pointer]
        value = self.scalar(path_pointer)
        colon = self.text[key.end : value.start]
        if len(members) >= 2:
            separator = self.text[self.values[members[0]].end : self.keys[members[1]].start]
        else:
            separator = "," + self.text[self.opening[pointer] + 1 : key.start]
        return _Member(key, value, separator, colon, False)

    def insertion(self, member: _Member, value: str) -> tuple[int, str]:
        return (
            member.path_value.end,
            f'{member.separator}"hostPath"{member.colon}{json.dumps(value, ensure_ascii=False)}',
        )


def _set(value: Any, pointer: str, new: str) -> None:
    tokens = _tokens(pointer)
    target = value
    for token in tokens[:-1]:
        target = target[int(token)] if isinstance(target, list) else target[token]
    if isinstance(target, list):
        target[int(tokens[-1])] = new
    else:
        target[tokens[-1]] = new


def _get(value: Any, pointer: str) -> Any:
    for token in _tokens(pointer):
        if isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        elif isinstance(value, dict) and token in value:
            value = value[token]
        else:
            return None
    return value


def _rewrite(text: str, value: Any, edits: list[_Edit], as_json: bool) -> str:
    """The text with edits applied in place; raises _CannotEdit."""
    located: _JSONText | _YAMLText
    if as_json:
        if has_duplicate_keys(text):
            raise _CannotEdit("a key appears twice in one object")
        located = _JSONText(text)
    else:
        located = _YAMLText(text)
    pieces: list[tuple[int, int, str]] = []
    for edit in edits:
        if edit.old is None:
            offset, inserted = located.insertion(located.member(edit.node), edit.new)
            pieces.append((offset, offset, inserted))
        else:
            if _get(value, edit.pointer) != edit.old:
                raise _CannotEdit(f"{edit.pointer} is not the string {edit.old!r} in the file")
            span = located.scalar(edit.pointer)
            pieces.append((span.start, span.end, located.render(edit.new, span.style)))
    pieces.sort()
    for (_, end, _), (start, _, _) in zip(pieces, pieces[1:]):
        if start < end:
            raise _CannotEdit("two edits overlap")
    for start, end, replacement in reversed(pieces):
        text = text[:start] + replacement + text[end:]
    return text
