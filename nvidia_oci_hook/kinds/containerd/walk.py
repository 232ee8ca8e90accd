"""Key lookup and the walk that finds wrong types and unknown keys."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any, Optional

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.formats.tomltext import go_scalar_type
from nvidia_oci_hook.kinds.containerd.structs import AnyValue, Field, ListOf, Scalar, Table, Type
from nvidia_oci_hook.kinds.containerd.versions import V1X, V2X


def go_toml_v1_spellings(name: str) -> set[str]:
    """The TOML keys go-toml v1 (containerd 1.x) matches to a struct field named or tagged `name`."""
    return {name, name.lower(), name.upper(), name[:1].lower() + name[1:]}


@dataclass(frozen=True)
class Match:
    key: str  # the spelling containerd documents
    field: Field
    series: frozenset[str]  # the series (of those reading the table) that take this spelling


def lookup(table: Table, key: str, readers: frozenset[str]) -> Optional[Match]:
    """Which field a TOML key sets, for the series that read the table; None when no series knows it."""
    if key in table.fields:
        entry = table.fields[key]
        series = entry.series & readers
        return Match(key, entry, series) if series else None
    for name, entry in table.fields.items():
        if name.casefold() != key.casefold():
            continue
        series = entry.series & readers & V2X
        if key in go_toml_v1_spellings(name):
            series |= entry.series & readers & V1X
        if series:
            return Match(name, entry, series)
    return None


def describe_value(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (datetime, date, time)):
        return "a date or time"
    if isinstance(value, list):
        return "an array of tables" if value and all(isinstance(v, dict) for v in value) else "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def go_toml_type(value: Any) -> str:
    """The Go type go-toml v1 reports for a TOML value in its errors ("Can't convert 5(int64) to string")."""
    scalar = go_scalar_type(value)
    if scalar is not None:
        return scalar
    if isinstance(value, dict):
        return "*toml.Tree"
    if isinstance(value, list):
        return "[]interface {}"
    return "toml.LocalDate"


def toml_key(parts: Iterable[str]) -> str:
    """A dotted TOML key, quoting the parts that are not bare keys: plugins."io.containerd.grpc.v1.cri".cni."""
    return ".".join(part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else f'"{part}"' for part in parts)


@dataclass(frozen=True)
class TypeIssue:
    pointer: str
    path: tuple[str, ...]
    value: Any
    expected: Type
    go_type: str  # the struct field's Go type
    series: frozenset[str]  # the series that refuse the file
    index: Optional[int] = None  # for an array element: its index

    @property
    def display(self) -> str:
        return toml_key(self.path) + (f"[{self.index}]" if self.index is not None else "")


@dataclass(frozen=True)
class KeyIssue:
    """A key that some, or all, of the series reading its table ignore."""

    pointer: str
    path: tuple[str, ...]
    key: str
    table: Table
    ignored_by: frozenset[str]
    readers: frozenset[str]
    canonical: Optional[str] = None  # the documented spelling, when the key is known under another spelling


@dataclass
class Walk:
    types: list[TypeIssue] = field(default_factory=list)
    keys: list[KeyIssue] = field(default_factory=list)


def walk_table(
    value: Mapping[str, Any], table: Table, pointer: str, path: tuple[str, ...], readers: frozenset[str], out: Walk
) -> None:
    for key, item in value.items():
        here, where = pointer_join(pointer, key), (*path, key)
        match = lookup(table, key, readers)
        if match is None:
            out.keys.append(KeyIssue(here, where, key, table, readers, readers))
            continue
        canonical = match.key if match.key != key else None
        if match.series != readers:
            out.keys.append(KeyIssue(here, where, key, table, readers - match.series, readers, canonical))
        walk_value(item, match.field.type, here, where, match.series, out)


def walk_value(value: Any, kind: Type, pointer: str, path: tuple[str, ...], series: frozenset[str], out: Walk) -> None:
    if isinstance(kind, AnyValue):
        return
    if isinstance(kind, Scalar):
        if not kind.accepts(value):
            out.types.append(TypeIssue(pointer, path, value, kind, kind.go, series))
        return
    if isinstance(kind, ListOf):
        if not isinstance(value, list):
            out.types.append(TypeIssue(pointer, path, value, kind, kind.go, series))
            return
        for index, item in enumerate(value):
            if not kind.item.accepts(item):
                out.types.append(
                    TypeIssue(pointer_join(pointer, index), path, item, kind.item, kind.item.go, series, index)
                )
        return
    if not isinstance(value, dict):
        out.types.append(TypeIssue(pointer, path, value, kind, kind.go, series))
        return
    if isinstance(kind, Table):
        walk_table(value, kind, pointer, path, series, out)
        return
    for key, item in value.items():
        walk_value(item, kind.value, pointer_join(pointer, key), (*path, key), series, out)


# No containerd setting is nested more than eight tables deep; deeper values (dotted keys can nest thousands of
# levels without any recursion in the TOML parser) are not looked at.
MAX_DEPTH = 64


def iter_tree(value: Any, max_depth: int = MAX_DEPTH) -> Iterator[tuple[str, tuple[str, ...], Any]]:
    """(pointer, path, node) for the value and everything in it, in document order, without recursion."""
    stack: list[tuple[str, tuple[str, ...], Any]] = [("", (), value)]
    while stack:
        pointer, path, node = stack.pop()
        yield pointer, path, node
        if len(path) >= max_depth:
            continue
        if isinstance(node, dict):
            items = [(pointer_join(pointer, key), (*path, key), item) for key, item in node.items()]
        elif isinstance(node, list):
            items = [(pointer_join(pointer, index), (*path, str(index)), item) for index, item in enumerate(node)]
        else:
            continue
        stack.extend(reversed(items))
