"""The toolkit's config.toml as its decoder unmarshals it into the release's `Config`.

pelletier/go-toml v1.9.5 (`Tree.Unmarshal`, marshal.go) walks the Go struct, not the file: for each field in
declaration order it looks up the field's tag, its lower-case, its upper-case and its first-letter-lowered forms
(`mode`, `MODE`), converts the value strictly (only a bool into a bool, only a string into a string: an int64 is
refused though Go could convert it), and stops at the first value it cannot convert with `(LINE, COL): Can't
convert V(T) to TYPE`. A key no field names is dropped without a word. After decoding, the release validates
what it must (`nvidia-container-cli.ldconfig`), and every binary that read the file refuses to go on.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.formats.tomltext import go_scalar_type
from nvidia_oci_hook.kinds.toolkit.releases import BOOL, STRING, STRINGS


@dataclass(frozen=True)
class Scalar:
    """A field of a scalar or list type: its shape (BOOL, STRING, STRINGS) and its Go type as the decoder's
    complaint names it (`config.ldconfigPath`, `[]string`); for a list, its element's too."""

    shape: str
    go_type: str
    element: str = "string"
    pointer: bool = False  # a `*feature`: the decoder names the pointed-to type


@dataclass(frozen=True)
class Table:
    go_type: str
    fields: tuple[tuple[str, Union[Scalar, Table]], ...]

    def get(self, key: str) -> Optional[Union[Scalar, Table]]:
        for name, spec in self.fields:
            if name == key:
                return spec
        return None


Spec = Union[Scalar, Table]


@dataclass(frozen=True)
class Refusal:
    """What makes the release refuse the file: where, and the decoder's or validator's own words."""

    pointer: str
    text: str


@dataclass(frozen=True)
class Unknown:
    pointer: str
    key: str  # the dotted key as written
    nearest: Optional[str]  # the dotted key the release knows that it most resembles


@dataclass
class Decoded:
    # Dotted key -> the value in effect; where the file sets it, the pointer; keys the release drops; and the
    # first refusal the release stops at (go-toml stops at the first), then the others a fix would meet next.
    settings: dict[str, Any] = field(default_factory=dict)
    set_at: dict[str, str] = field(default_factory=dict)
    unknown: list[Unknown] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)

    def value(self, key: str) -> Any:
        return self.settings.get(key)

    def pointer(self, key: str) -> str:
        """The pointer of the key where the file sets it, else of the nearest table it sets, else the root."""
        parts = key.split(".")
        while parts:
            found = self.set_at.get(".".join(parts))
            if found is not None:
                return found
            parts.pop()
        return ""


def go_value_text(value: Any) -> str:
    """A TOML value as Go's `%v` prints what go-toml v1 decoded it to."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        if math.isnan(value):
            return "NaN"
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(value, list):
        return "[" + " ".join(go_value_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return tree_text(value)
    return str(value)


def _toml_value(value: Any) -> str:
    """A value as go-toml v1 writes it into a tree's TOML text."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    return go_value_text(value)


def tree_text(table: dict[str, Any]) -> str:
    """A table as go-toml v1's Tree prints itself (`%v` calls its String: TOML, keys in alphabetical order)."""
    return "".join(f"{key} = {_toml_value(table[key])}\n" for key in sorted(table) if not isinstance(table[key], dict))


def go_type_text(value: Any) -> str:
    scalar = go_scalar_type(value)
    if scalar is not None:
        return scalar
    if isinstance(value, list):
        return "[]*toml.Tree" if value and all(isinstance(item, dict) for item in value) else "[]interface {}"
    if isinstance(value, dict):
        return "*toml.Tree"
    return "toml.LocalDateTime"  # dates and times, which no field of the toolkit takes


def _conversion_error(value: Any, spec: Spec) -> Optional[str]:
    """The decoder's complaint about value for spec (marshal.go valueFromToml), None where it converts."""
    shown = f"{go_value_text(value)}({go_type_text(value)})"
    if isinstance(value, dict):
        return None if isinstance(spec, Table) else f"Can't convert {shown} to a tree"
    if isinstance(value, list):
        if value and all(isinstance(item, dict) for item in value):
            return f"Can't convert {shown} to trees"
        if not (isinstance(spec, Scalar) and spec.shape == STRINGS):
            return f"Can't convert {shown} to a slice"
        for item in value:
            if not isinstance(item, str):
                return f"Can't convert {go_value_text(item)}({go_type_text(item)}) to {spec.element}"
        return None
    if isinstance(spec, Table):
        return f"Can't convert {shown} to {spec.go_type}"
    if spec.shape == BOOL and not isinstance(value, bool):
        return f"Can't convert {shown} to {spec.go_type}"
    if spec.shape == STRING and not isinstance(value, str):
        return f"Can't convert {shown} to {spec.go_type}"
    if spec.shape == STRINGS:
        return f"Can't convert {shown} to {spec.go_type}(slice)"
    return None


def _candidates(key: str) -> tuple[str, ...]:
    """The keys go-toml v1 tries for a field tagged key, in its order."""
    return (key, key.lower(), key.upper(), key[:1].lower() + key[1:])


def all_keys(table: Table, prefix: str = "") -> Iterator[tuple[str, Spec]]:
    for name, spec in table.fields:
        dotted = f"{prefix}{name}"
        yield dotted, spec
        if isinstance(spec, Table):
            yield from all_keys(spec, dotted + ".")


def defaults_of(table: Table, defaults: dict[str, Any]) -> dict[str, Any]:
    """The release's defaults of the table's settings, lists as lists (as a value the file sets)."""
    return {
        key: list(defaults[key]) if isinstance(defaults[key], tuple) else defaults[key]
        for key, spec in all_keys(table)
        if isinstance(spec, Scalar) and key in defaults
    }


def _nearest(dotted: str, known: list[str]) -> Optional[str]:
    """The known key most like dotted: a close spelling, else the same name in another table (`mode` written at
    the top level is `nvidia-container-runtime.mode`)."""
    close = difflib.get_close_matches(dotted, known, n=1, cutoff=0.75)
    if close:
        return close[0]
    name = dotted.rsplit(".", 1)[-1]
    elsewhere = [key for key in known if key.rsplit(".", 1)[-1] == name]
    return elsewhere[0] if len(elsewhere) == 1 else None


def decode(value: Any, top: Table, defaults: dict[str, Any], position: Any) -> Decoded:
    """value (tomllib's) decoded into the release's Config; position(pointer) -> "(LINE, COL)" as go-toml prints
    a key's position, for the refusals' text."""
    decoded = Decoded(settings=defaults_of(top, defaults))
    known = [key for key, _ in all_keys(top)]

    def walk(table_value: dict[str, Any], table: Table, pointer: str, prefix: str) -> None:
        used: set[str] = set()
        for name, spec in table.fields:
            key = next((k for k in _candidates(name) if k in table_value), None)
            if key is None:
                continue
            used.add(key)
            dotted, here = f"{prefix}{name}", pointer_join(pointer, key)
            decoded.set_at[dotted] = here
            item = table_value[key]
            complaint = _conversion_error(item, spec)
            if complaint is not None:
                decoded.refusals.append(Refusal(here, f"{position(here)}: {complaint}"))
                continue
            if isinstance(spec, Table):
                walk(item, spec, here, dotted + ".")
            else:
                decoded.settings[dotted] = list(item) if isinstance(item, list) else item
        for key in table_value:
            if key in used:
                continue
            dotted = f"{prefix}{key}"
            decoded.unknown.append(Unknown(pointer_join(pointer, key), dotted, _nearest(dotted, known)))

    if isinstance(value, dict):
        walk(value, top, "", "")
    return decoded
