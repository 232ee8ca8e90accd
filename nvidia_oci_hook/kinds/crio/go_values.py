"""Go's view of values: type names and messages as BurntSushi/toml prints them."""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from typing import Any, Optional, Union

from nvidia_oci_hook.formats.tomltext import go_scalar_type
from nvidia_oci_hook.kinds.crio.key_table import Scalar, Spec, StringMap, Strings, TableMap


def table_header(path: Sequence[str]) -> str:
    return "[" + ".".join(go_key_part(part) if part != "NAME" else part for part in path) + "]" if path else "the top"


def go_type(value: Any) -> str:
    """The Go type BurntSushi/toml gives a parsed TOML value, as `%T` prints it."""
    scalar = go_scalar_type(value)
    if scalar is not None:
        return scalar
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return "time.Time"
    if isinstance(value, list):
        return "[]map[string]any" if value and all(isinstance(item, dict) for item in value) else "[]any"
    return "map[string]any"


_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def go_key_part(part: str) -> str:
    if part == "":
        return '""'
    if _BARE.match(part):
        return part
    return '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'


def go_key(parts: Sequence[str]) -> str:
    """A key path as the decoder prints it in `(last key "...")`."""
    return ".".join(go_key_part(part) for part in parts)


_DURATION = re.compile(r"^[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+$")


def valid_go_duration(text: str) -> bool:
    """Whether Go's time.ParseDuration accepts text (magnitude limits aside)."""
    return text in ("0", "+0", "-0") or bool(_DURATION.match(text))


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def scalar_error(spec: Union[Scalar, Strings, StringMap], value: Any) -> Optional[str]:
    """The decoder's complaint about value in a field of this type; None when it decodes."""

    def badtype(destination: str, found: Any) -> str:
        return f"incompatible types: TOML value has type {go_type(found)}; destination has type {destination}"

    if isinstance(spec, Strings):
        if not isinstance(value, list):
            return badtype("slice", value)
        for item in value:
            if not isinstance(item, str):
                return badtype("string", item)
        return None
    if isinstance(spec, StringMap):
        if not isinstance(value, dict):
            return badtype("map", value)
        for item in value.values():
            if not isinstance(item, str):
                return badtype("string", item)
        return None
    kind = spec.go
    if kind == "string":
        return None if isinstance(value, str) else badtype("string", value)
    if kind == "bool":
        return None if isinstance(value, bool) else badtype("boolean", value)
    if kind == "duration" and isinstance(value, str):
        return None if valid_go_duration(value) else f'invalid duration: "{value}"'
    if isinstance(value, bool) or not isinstance(value, int):
        return badtype("integer", value)
    if kind == "uinteger" and value < 0:
        return f"{value} is out of range for uint64"
    return None


def describe(spec: Spec) -> str:
    """What a field takes, for a message."""
    if isinstance(spec, Scalar):
        return {
            "string": "a string",
            "bool": "true or false",
            "integer": "an integer",
            "uinteger": "an integer of 0 or more",
            "duration": 'a duration such as "30s", or an integer of nanoseconds',
        }[spec.go]
    if isinstance(spec, Strings):
        return 'an array of strings, ["..."]'
    if isinstance(spec, StringMap):
        return "a table of strings"
    if isinstance(spec, TableMap):
        return "a table holding one table per name"
    return "a table"
