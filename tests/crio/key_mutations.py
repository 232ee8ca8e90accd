"""Seeded key mutations of TOML configurations, for the cri-o and the containerd fuzz tests.

Where the type-swapping fuzz tests change values, these change keys: a value moved under a dotted key that spells
another table's path (from the top, or repeating the table it sits in), a key renamed to a quoted name holding
dots, a name spliced from two known names (`locrio`), a table under one that does not exist, a key at the top
level, empty and case-changed names. A mutated document is written back as TOML text, each table with a header or
as dotted keys at random, so the same shape reaches the rules both as a header and as a dotted key.
"""

from __future__ import annotations

import copy
import datetime
import json
import math
import random
import re
from collections.abc import Sequence
from typing import Any, Callable

from nvidia_oci_hook.findings import Finding

# Shallow enough for every engine's own limits; deeper nesting has tests of its own.
MAX_DEPTH = 10

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _paths(node: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """(path, value) of every key in the document, tables before what they hold."""
    found: list[tuple[tuple[str, ...], Any]] = []
    if isinstance(node, dict):
        for key, item in node.items():
            found.append(((*path, key), item))
            found.extend(_paths(item, (*path, key)))
    return found


def _remove(document: dict[str, Any], path: tuple[str, ...]) -> None:
    node: Any = document
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]


def _place(document: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set a value at a path, replacing whatever non-table stands in the way."""
    node = document
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[path[-1]] = value


def _splice(rng: random.Random, names: Sequence[str]) -> str:
    first, second = rng.choice(names), rng.choice(names)
    return first[: rng.randint(0, len(first))] + second[rng.randint(0, len(second)) :] or "x"


class KeyMutator:
    """Mutations of one document; `tables` are paths of tables the engine reads (entries of a map as any name)."""

    def __init__(self, rng: random.Random, tables: Sequence[tuple[str, ...]]) -> None:
        self.rng = rng
        self.tables = [path for path in tables if path]
        self.names = sorted({part for path in tables for part in path}) or ["x"]

    def mutate(self, document: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        result = copy.deepcopy(document)
        keys = [(path, value) for path, value in _paths(result) if len(path) < MAX_DEPTH]
        if not keys:
            result[self.rng.choice(self.names)] = {self.rng.choice(self.names): 1}
            return "seed", result
        path, value = self.rng.choice(keys)
        parent, key = path[:-1], path[-1]
        operation = self.rng.choice(
            ["absolute", "repeated", "quoted", "quoted-path", "spliced", "orphan", "top", "empty", "case"]
        )
        if operation == "absolute":
            # A dotted key that names another table's whole path, written inside this table.
            target = (*parent, *self.rng.choice(self.tables), key)
        elif operation == "repeated":
            # The table's own path again, as if keys inside it were read from the top.
            target = (*parent, *parent[: self.rng.randint(1, max(1, len(parent)))], key)
        elif operation == "quoted":
            target = (*parent, f"{key}.{self.rng.choice(self.names)}")
        elif operation == "quoted-path":
            target = (*parent, ".".join((*self.rng.choice(self.tables), key)))
        elif operation == "spliced":
            target = (*parent, _splice(self.rng, [key, *self.names]), *(() if self.rng.random() < 0.5 else (key,)))
        elif operation == "orphan":
            target = (*parent, "nosuch", key)
        elif operation == "top":
            target = path[self.rng.randint(1, len(path) - 1) :] if len(path) > 1 else ("nosuch", key)
        elif operation == "empty":
            target = (*parent, self.rng.choice(["", ".", f"{key}.", f".{key}", f"{key}..x"]))
        else:
            target = (*parent, self.rng.choice([key.upper(), key.capitalize(), key.swapcase()]))
        target = target[:MAX_DEPTH]
        _remove(result, path)
        _place(result, target, value)
        return operation, result


def mutations(
    seed: str, document: dict[str, Any], tables: Sequence[tuple[str, ...]], count: int
) -> list[tuple[str, dict[str, Any]]]:
    """count seeded key mutations of document, as (label, mutated document)."""
    rng = random.Random(seed)
    mutator = KeyMutator(rng, tables)
    return [mutator.mutate(document) for _ in range(count)]


def _key(part: str) -> str:
    return part if _BARE.match(part) else json.dumps(part)


def _dotted(path: Sequence[str]) -> str:
    return ".".join(_key(part) for part in path)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML for {value!r}")


def _leaves(node: dict[str, Any], path: tuple[str, ...]) -> list[str]:
    lines = []
    for key, item in node.items():
        if isinstance(item, dict) and item:
            lines.extend(_leaves(item, (*path, key)))
        else:
            lines.append(f"{_dotted((*path, key))} = {_value(item)}")
    return lines


def to_toml(rng: random.Random, document: dict[str, Any]) -> str:
    """The document as TOML, each table a header or dotted keys of the table above, at random."""
    lines: list[str] = []

    def table(node: dict[str, Any], path: tuple[str, ...]) -> None:
        if path:
            lines.append(f"[{_dotted(path)}]")
        if path and rng.random() < 0.5:
            lines.extend(_leaves(node, ()))
            return
        tables = {key: item for key, item in node.items() if isinstance(item, dict) and item}
        for key, item in node.items():
            if key not in tables:
                lines.append(f"{_key(key)} = {_value(item)}")
        for key, item in tables.items():
            table(item, (*path, key))

    table(document, ())
    return "\n".join(lines) + "\n"


def assert_written_back_and_linted(
    rng: random.Random, label: str, mutated: dict[str, Any], lint: Callable[[str], list[Finding]]
) -> None:
    """The mutated document written as TOML reads back as the same value, and linting that text gives findings
    with a message and a line: the path a user's file takes, not only the parsed value's."""
    from nvidia_oci_hook.formats.tomltext import parse_toml

    text = to_toml(rng, mutated)
    reparsed = parse_toml(text.encode())
    assert reparsed.ok and reparsed.value == mutated, (label, text)
    for finding in lint(text):
        assert finding.message and finding.line is not None and finding.line >= 1, (label, text, finding)
