"""Decoding as sigs.k8s.io/yaml and encoding/json do: the parsed value converted to JSON as sigs.k8s.io/yaml
converts YAML, then decoded into the specs-go types with unknown fields refused, keeping every error."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.formats.leanyaml import INT64_MAX, INT64_MIN, UINT64_MAX
from nvidia_oci_hook.kinds.cdi.codes import UNKNOWN_FIELD, WRONG_TYPE
from nvidia_oci_hook.kinds.cdi.goformat import go_format_float32, go_json_float, go_quote
from nvidia_oci_hook.kinds.cdi.releases import Library
from nvidia_oci_hook.kinds.cdi.specs_go import FIELD_HISTORY, GoStruct, GoType, match_field


@dataclass(frozen=True)
class Number:
    """A number as encoding/json reads it: the literal json.Marshal wrote."""

    literal: str


@dataclass(frozen=True)
class LibraryProblem:
    """One reason the library refuses a spec: the rule code, where, this tool's words and the library's."""

    code: str
    pointer: str
    message: str
    library: str  # the library's error text, as it would report it were this the first problem
    hint: Optional[str] = None
    panic: bool = False


@dataclass
class _Converted:
    """A JSON-able value (sigs.k8s.io/yaml's intermediate form) and the pointer of the document value."""

    value: Any  # dict[str, _Converted] | list[_Converted] | str | bool | None | Number
    pointer: str


class _ConversionError(Exception):
    pass


def _key_string(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int) and INT64_MIN <= key <= INT64_MAX:
        return str(key)
    if isinstance(key, float):
        text = go_format_float32(key)
        return {"+Inf": ".inf", "-Inf": "-.inf", "NaN": ".nan"}.get(text, text)
    kind = "<nil>" if key is None else ("uint64" if isinstance(key, int) else type(key).__name__)
    raise _ConversionError(f"unsupported map key of type: {kind}")


def _scalar(value: Any) -> Any:
    """A parsed scalar as goyaml.v2 would have typed it (JSON numbers are YAML plain scalars)."""
    if value is None or isinstance(value, (bool, str, float)):
        return value
    if isinstance(value, int):
        if INT64_MIN <= value <= UINT64_MAX:
            return value
        try:
            return float(value)  # goyaml.v2: too large for int64 and uint64, so a float
        except OverflowError:
            return str(value)  # and beyond float64, a string
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)  # a timestamp PyYAML constructed: goyaml.v2 leaves it a string


def _convert(value: Any, target: Optional[GoType], pointer: str) -> _Converted:
    """sigs.k8s.io/yaml convertToJSONableObject, then what json.Marshal makes of the result."""
    target = target.target if target is not None else None
    if isinstance(value, dict):
        converted: dict[str, _Converted] = {}
        for key, item in value.items():
            key_string = _key_string(key)
            child_target = None
            if target is not None and target.kind == "struct":
                matched = match_field(target, key_string)
                child_target = matched[1] if matched else None
            elif target is not None and target.kind == "map":
                child_target = target.elem
            converted[key_string] = _convert(item, child_target, pointer_join(pointer, str(key)))
        return _Converted(dict(sorted(converted.items())), pointer)
    if isinstance(value, (list, tuple)):
        elem = target.elem if target is not None and target.kind == "slice" else None
        return _Converted([_convert(item, elem, f"{pointer}/{index}") for index, item in enumerate(value)], pointer)
    scalar = _scalar(value)
    if target is not None and target.kind == "string" and not isinstance(scalar, (str, type(None))):
        if isinstance(scalar, bool):
            return _Converted("true" if scalar else "false", pointer)
        if isinstance(scalar, int):
            return _Converted(str(scalar), pointer)
        return _Converted(go_format_float32(scalar), pointer)
    if isinstance(scalar, bool) or scalar is None or isinstance(scalar, str):
        return _Converted(scalar, pointer)
    if isinstance(scalar, int):
        return _Converted(Number(str(scalar)), pointer)
    if math.isnan(scalar) or math.isinf(scalar):
        raise _ConversionError(f"json: unsupported value: {go_format_float32(scalar)}")
    return _Converted(Number(go_json_float(scalar)), pointer)


def _json_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Number):
        return "number"
    return "string"


class _Decoder:
    """encoding/json with DisallowUnknownFields into the specs-go types; keeps every error, first one first."""

    def __init__(self, library: Library) -> None:
        self.library = library
        self.problems: list[LibraryProblem] = []

    def error(self, code: str, pointer: str, message: str, library: str, hint: Optional[str] = None) -> None:
        self.problems.append(
            LibraryProblem(
                code,
                pointer,
                message,
                f"failed to unmarshal CDI Spec: error unmarshaling JSON: while decoding JSON: {library}",
                hint,
            )
        )

    def type_error(self, node: _Converted, go_type: GoType, context: Optional[tuple[str, list[str]]]) -> None:
        shown = _json_kind(node.value)
        if isinstance(node.value, Number) and go_type.kind in ("int", "uint32"):
            shown = f"number {node.value.literal}"
        where = f"Go struct field {context[0]}.{'.'.join(context[1])}" if context else "Go value"
        field_name = context[1][-1] if context else "the document"
        library = f"json: cannot unmarshal {shown} into {where} of type {go_type.name}"
        expected = {
            "string": "a string",
            "int": "an integer",
            "uint32": "an unsigned 32-bit integer",
            "bool": "true or false",
            "struct": "an object",
            "slice": "an array",
            "map": "an object of strings",
        }[go_type.kind]
        found = _describe(node.value)
        self.error(WRONG_TYPE, node.pointer, f"{field_name}: expected {expected}, found {found}", library)

    def decode(
        self, node: _Converted, go_type: GoType, context: Optional[tuple[str, list[str]]], existing: Any = None
    ) -> Any:
        value = node.value
        if go_type.kind == "ptr":
            if value is None:
                return None
            assert go_type.elem is not None
            return self.decode(node, go_type.elem, context, existing)
        if value is None:
            # null sets a slice or map to nil and leaves anything else as it was: its zero value if new.
            if go_type.kind in ("slice", "map"):
                return None
            if existing is not None:
                return existing
            if go_type.kind == "struct":
                return GoStruct(go_type, node.pointer)
            return {"string": "", "int": 0, "uint32": 0, "bool": False}[go_type.kind]
        if go_type.kind == "struct":
            if not isinstance(value, dict):
                self.type_error(node, go_type, context)
                return existing
            result = existing if isinstance(existing, GoStruct) else GoStruct(go_type, node.pointer)
            for key, child in value.items():
                matched = match_field(go_type, key)
                if matched is None:
                    self.unknown_field(go_type, key, node.pointer)
                    continue
                name, field_type = matched
                stack = [*(context[1] if context else []), name]
                result.values[name] = self.decode(child, field_type, (go_type.short, stack), result.values.get(name))
                result.pointers[name] = child.pointer
            return result
        if go_type.kind == "slice":
            if not isinstance(value, list):
                self.type_error(node, go_type, context)
                return existing
            assert go_type.elem is not None
            old = existing if isinstance(existing, list) else []
            return [
                self.decode(item, go_type.elem, context, old[index] if index < len(old) else None)
                for index, item in enumerate(value)
            ]
        if go_type.kind == "map":
            if not isinstance(value, dict):
                self.type_error(node, go_type, context)
                return existing
            assert go_type.elem is not None
            result_map = dict(existing) if isinstance(existing, dict) else {}
            for key, child in value.items():
                result_map[key] = self.decode(child, go_type.elem, context, None)
            return result_map
        if go_type.kind == "string":
            if isinstance(value, str):
                return value
        elif go_type.kind == "bool":
            if isinstance(value, bool):
                return value
        elif isinstance(value, Number):
            number = _parse_literal(value.literal, go_type)
            if number is not None:
                return number
        self.type_error(node, go_type, context)
        return existing

    def unknown_field(self, struct_type: GoType, key: str, pointer: str) -> None:
        where = pointer_join(pointer, key)
        library = f"json: unknown field {go_quote(key)}"
        name = struct_type.short
        history = next(
            (found for (owner, field_name), found in FIELD_HISTORY.items() if owner == name and field_name == key),
            None,
        )
        if history is not None:
            change, release = history
            if change == "added":
                message = (
                    f"{key} is a field of CDI spec {release} (library v{release} on); library v{self.library.release}"
                )
                message += " does not know it"
                hint = f"drop the field, or run only engines built with container-device-interface v{release} or later"
            else:
                message = f"{key} was removed in library v{release}: library v{self.library.release} does not know it"
                hint = "drop the field" + (", and use enableMonitoring" if name == "IntelRdt" else "")
            self.error(UNKNOWN_FIELD, where, message, library, hint)
            return
        known = [field_name for field_name, _ in struct_type.fields]
        close = _closest(key, known)
        hint = f"did you mean {close!r}?" if close else f"a {name} has only: {', '.join(known)}"
        self.error(UNKNOWN_FIELD, where, f"unknown field {go_quote(key)} in a {name}", library, hint)


def _closest(key: str, names: Sequence[str]) -> Optional[str]:
    import difflib

    matches = difflib.get_close_matches(key.lower(), [name.lower() for name in names], n=1, cutoff=0.75)
    if not matches:
        return None
    return next(name for name in names if name.lower() == matches[0])


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Number):
        return f"the number {value.literal}"
    return f"the string {go_quote(value)}"


_INT_LITERAL = re.compile(r"^-?(0|[1-9][0-9]*)$")


def _parse_literal(literal: str, go_type: GoType) -> Optional[int]:
    """strconv.ParseInt / ParseUint of a JSON number literal, with the field's range; None if Go refuses it."""
    if not _INT_LITERAL.match(literal):
        return None
    number = int(literal)
    if go_type.kind == "uint32":
        return number if 0 <= number <= 2**32 - 1 and not literal.startswith("-") else None
    return number if INT64_MIN <= number <= INT64_MAX else None
