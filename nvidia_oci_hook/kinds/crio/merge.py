"""The merged configuration: the value cri-o runs with at each key, and the file and pointer that set it.

- Merging (`UpdateFromFile`, `UpdateFromPath`, `UpdateFromDropInFile`): the main file, then every entry under the
  drop-in directory in `filepath.Walk` order (lexical, recursive, hidden files and any name included), each
  decoded on top of the result so far. A table is merged key by key; an array replaces the earlier array; an
  entry of `runtimes` or `workloads` replaces the whole earlier entry of that name (`unifyMap` decodes each
  element into a fresh struct); `storage_option` accumulates; an empty `root`, `runroot` or `storage_driver` keeps
  the earlier value. A file that cannot be read or decoded stops cri-o.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.crio.go_values import INT64_MAX, INT64_MIN, describe, go_type, scalar_error
from nvidia_oci_hook.kinds.crio.key_table import (
    BUILTIN_RUNTIME,
    DEFAULT_RUNTIME_NAME,
    DEFAULTS,
    TOP,
    Spec,
    Table,
    TableMap,
)


@dataclass(frozen=True)
class Origin:
    """Where a value was set: a file (None: the one document being linted on its own) and a pointer in it."""

    path: Optional[str]
    pointer: str


@dataclass(frozen=True)
class Unknown:
    """A key or table cri-o does not decode, hence ignores."""

    origin: Origin
    table: tuple[str, ...]  # the table it sits in, as in the key table (runtime names as NAME)
    key: str
    is_table: bool
    # Where to point: for a table, the innermost table along its first keys, which is where a header like
    # [plugins."io.containerd.grpc.v1.cri".containerd] opens it.
    at: str


@dataclass(frozen=True)
class DecodeError:
    """A value cri-o's decoder refuses: the whole file, and cri-o with it, is refused."""

    origin: Origin
    key: tuple[str, ...]  # the key path the decoder names in "(last key ...)"
    message: str  # the decoder's own words
    expected: str  # what the field takes, in words


@dataclass(frozen=True)
class CaseClash:
    """Two keys of one table that decode into the same field."""

    origin: Origin
    other: Origin
    field: str
    keys: tuple[str, str]


@dataclass(frozen=True)
class Replacement:
    """A runtimes or workloads entry redefined by a later file: the earlier table's other keys are lost."""

    origin: Origin  # the later table
    earlier: Origin
    map_name: str  # "runtimes" or "workloads"
    name: str
    lost: tuple[str, ...]


@dataclass
class ConfigFile:
    """One file in merge order, parsed or not."""

    path: Optional[str]
    value: Any
    parsed: bool


@dataclass
class CrioConfig:
    """The effective configuration and where each value came from."""

    files: list[ConfigFile] = field(default_factory=list)
    # The merged values, TOML-shaped with the canonical key names; only what the files set (defaults apart).
    value: dict[str, Any] = field(default_factory=dict)
    # Effective pointer -> where it was set; arrays have an origin for each element too.
    origins: dict[str, Origin] = field(default_factory=dict)
    unknown: list[Unknown] = field(default_factory=list)
    decode_errors: list[DecodeError] = field(default_factory=list)
    case_clashes: list[CaseClash] = field(default_factory=list)
    replacements: list[Replacement] = field(default_factory=list)
    # An entry could not be read at all (CRO005): what it would have set is unknown.
    unread_entries: bool = False

    @property
    def complete(self) -> bool:
        """Whether every file was read and parsed: otherwise cri-o refuses the whole configuration anyway."""
        return not self.unread_entries and all(f.parsed for f in self.files)

    def get(self, pointer: str, default: Any = None) -> Any:
        node: Any = self.value
        for part in split_pointer(pointer):
            if not isinstance(node, dict) or part not in node:
                return DEFAULTS.get(pointer, default)
            node = node[part]
        return node

    def is_set(self, pointer: str) -> bool:
        return pointer in self.origins

    def origin(self, pointer: str) -> Optional[Origin]:
        """Where the value at pointer (or, failing that, the nearest enclosing table) was set."""
        while True:
            found = self.origins.get(pointer)
            if found is not None or not pointer:
                return found
            pointer = pointer[: pointer.rfind("/")]

    def runtimes(self) -> dict[str, dict[str, Any]]:
        """The runtime handlers cri-o ends up with: the files' tables over the built-in crun."""
        handlers: dict[str, dict[str, Any]] = {DEFAULT_RUNTIME_NAME: dict(BUILTIN_RUNTIME)}
        configured = self.get("/crio/runtime/runtimes", {})
        if isinstance(configured, dict):
            for name, handler in configured.items():
                if isinstance(handler, dict):
                    handlers[name] = handler
        return handlers

    def set_by(self, path: Optional[str]) -> list[str]:
        """Effective pointers of the values that path set and nothing later overrode."""
        return [p for p, origin in self.origins.items() if origin.path == path]


def split_pointer(pointer: str) -> list[str]:
    if not pointer:
        return []
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


_STORAGE_KEEP_IF_EMPTY = {"/crio/root", "/crio/runroot", "/crio/storage_driver"}


class _Merger:
    def __init__(self) -> None:
        self.config = CrioConfig()

    def add(self, path: Optional[str], value: Any, parsed: bool) -> None:
        self.config.files.append(ConfigFile(path, value, parsed))
        if not parsed or not isinstance(value, dict):
            return
        self._big_integers(path, value, "", ())
        self._table(TOP, value, self.config.value, "", "", path, (), ())

    def _big_integers(self, path: Optional[str], value: Any, pointer: str, key: tuple[str, ...]) -> None:
        """Integers beyond 64 bits: tomllib reads them, BurntSushi's parser refuses the file. A stack of its own:
        a dotted key is one level per part, and a file may hold thousands of them."""
        pending = [(value, pointer, key)]
        while pending:
            item, at, where = pending.pop()
            if isinstance(item, bool):
                continue
            if isinstance(item, int) and not INT64_MIN <= item <= INT64_MAX:
                message = f"{item} is out of range for int64"
                expected = "an integer from -2^63 to 2^63-1"
                self.config.decode_errors.append(DecodeError(Origin(path, at), where, message, expected))
            elif isinstance(item, dict):
                children = [(child, pointer_join(at, name), (*where, name)) for name, child in item.items()]
                pending.extend(reversed(children))  # in the file's order, as the recursion reported them
            elif isinstance(item, list):
                pending.extend(reversed([(child, pointer_join(at, index), where) for index, child in enumerate(item)]))

    def _drop(self, pointer: str) -> None:
        prefix = pointer + "/"
        for key in [k for k in self.config.origins if k == pointer or k.startswith(prefix)]:
            del self.config.origins[key]

    def _table(
        self,
        spec: Table,
        data: dict[str, Any],
        effective: dict[str, Any],
        epointer: str,
        fpointer: str,
        path: Optional[str],
        schema_path: tuple[str, ...],
        key: tuple[str, ...],
    ) -> None:
        seen: dict[str, str] = {}
        for name, datum in data.items():
            fchild = pointer_join(fpointer, name)
            found = spec.lookup(name)
            if found is None:
                at = fchild
                inner = datum
                while isinstance(inner, dict) and inner and isinstance(next(iter(inner.values())), dict):
                    first = next(iter(inner))
                    at, inner = pointer_join(at, first), inner[first]
                unknown = Unknown(Origin(path, fchild), schema_path, name, isinstance(datum, dict), at)
                self.config.unknown.append(unknown)
                continue
            canonical, child = found
            if canonical in seen:
                earlier = Origin(path, pointer_join(fpointer, seen[canonical]))
                self.config.case_clashes.append(
                    CaseClash(Origin(path, fchild), earlier, canonical, (seen[canonical], name))
                )
            seen[canonical] = name
            self._field(
                child,
                datum,
                effective,
                canonical,
                pointer_join(epointer, canonical),
                fchild,
                path,
                (*schema_path, canonical),
                (*key, name),
            )

    def _field(
        self,
        spec: Spec,
        datum: Any,
        parent: dict[str, Any],
        name: str,
        epointer: str,
        fpointer: str,
        path: Optional[str],
        schema_path: tuple[str, ...],
        key: tuple[str, ...],
    ) -> None:
        config = self.config
        origin = Origin(path, fpointer)
        if isinstance(spec, Table):
            if not isinstance(datum, dict):
                message = f"type mismatch for {spec.go}: expected table but found {go_type(datum)}"
                config.decode_errors.append(DecodeError(origin, key, message, describe(spec)))
                return
            table = parent.get(name)
            if not isinstance(table, dict):
                table = parent[name] = {}
            config.origins[epointer] = origin
            self._table(spec, datum, table, epointer, fpointer, path, schema_path, key)
            return
        if isinstance(spec, TableMap):
            if not isinstance(datum, dict):
                message = f"incompatible types: TOML value has type {go_type(datum)}; destination has type map"
                config.decode_errors.append(DecodeError(origin, key, message, describe(spec)))
                return
            entries = parent.get(name)
            if not isinstance(entries, dict):
                entries = parent[name] = {}
            config.origins[epointer] = origin
            for entry_name, entry in datum.items():
                self._entry(spec, entry, entries, entry_name, epointer, fpointer, path, schema_path, key)
            return
        error = scalar_error(spec, datum)
        if error is not None:
            config.decode_errors.append(DecodeError(origin, key, error, describe(spec)))
            return
        if epointer in _STORAGE_KEEP_IF_EMPTY and datum == "":
            return
        if epointer == "/crio/storage_option" and isinstance(parent.get(name), list):
            # Every file's storage options are kept; a repeated option keeps its last position.
            combined: list[tuple[str, Origin]] = [
                (item, config.origins.get(pointer_join(epointer, i), origin)) for i, item in enumerate(parent[name])
            ]
            combined += [(item, Origin(path, pointer_join(fpointer, i))) for i, item in enumerate(datum)]
            kept: list[tuple[str, Origin]] = []
            for item, item_origin in reversed(combined):
                if all(item != other for other, _ in kept):
                    kept.append((item, item_origin))
            kept.reverse()
            self._drop(epointer)
            parent[name] = [item for item, _ in kept]
            config.origins[epointer] = origin
            for index, (_, item_origin) in enumerate(kept):
                config.origins[pointer_join(epointer, index)] = item_origin
            return
        self._drop(epointer)
        parent[name] = copy.deepcopy(datum)
        config.origins[epointer] = origin
        if isinstance(datum, list):
            for index in range(len(datum)):
                config.origins[pointer_join(epointer, index)] = Origin(path, pointer_join(fpointer, index))
        elif isinstance(datum, dict):
            for item in datum:
                config.origins[pointer_join(epointer, item)] = Origin(path, pointer_join(fpointer, item))

    def _entry(
        self,
        spec: TableMap,
        entry: Any,
        entries: dict[str, Any],
        entry_name: str,
        map_pointer: str,
        fpointer: str,
        path: Optional[str],
        schema_path: tuple[str, ...],
        key: tuple[str, ...],
    ) -> None:
        config = self.config
        epointer = pointer_join(map_pointer, entry_name)
        fentry = pointer_join(fpointer, entry_name)
        origin = Origin(path, fentry)
        if not isinstance(entry, dict):
            message = f"type mismatch for {spec.element.go}: expected table but found {go_type(entry)}"
            config.decode_errors.append(DecodeError(origin, (*key, entry_name), message, describe(spec.element)))
            return
        earlier = config.origins.get(epointer)
        if earlier is not None and earlier.path != path:
            given = {found[0] for found in map(spec.element.lookup, entry) if found is not None}
            earlier_keys = entries.get(entry_name, {})
            lost = tuple(k for k in earlier_keys if k not in given)
            if lost:
                config.replacements.append(Replacement(origin, earlier, schema_path[-1], entry_name, lost))
        self._drop(epointer)
        table: dict[str, Any] = {}
        entries[entry_name] = table
        config.origins[epointer] = origin
        self._table(spec.element, entry, table, epointer, fentry, path, (*schema_path, "NAME"), (*key, entry_name))


def merge(files: Sequence[tuple[Optional[str], Any, bool]]) -> CrioConfig:
    """Merge (path, parsed value, parsed?) in cri-o's order into the effective configuration."""
    merger = _Merger()
    for path, value, parsed in files:
        merger.add(path, value, parsed)
    return merger.config
