"""Go's encoding/json, for the few types the hooks.d loader decodes into, and Go's %q, with which the loader's
errors quote strings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from nvidia_oci_hook.formats import jsontext


@dataclass(frozen=True)
class GoType:
    kind: str  # string, bool, int, slice (of string), map (string to string), struct
    name: str  # as Go's errors print the type
    nullable: bool = False  # a pointer, slice or map: null sets it to nil; otherwise null leaves it alone
    fields: tuple[tuple[str, GoType], ...] = ()  # a struct's fields by JSON name, in declaration order
    struct_name: str = ""  # reflect's Name() of a struct type, used in error context


STRING = GoType("string", "string")
STRING_PTR = GoType("string", "string", nullable=True)
BOOL_PTR = GoType("bool", "bool", nullable=True)
INT_PTR = GoType("int", "int", nullable=True)
STRINGS = GoType("slice", "[]string", nullable=True)
STRING_MAP = GoType("map", "map[string]string", nullable=True)

VERSION_STRUCT = GoType("struct", "hooks.version", fields=(("version", STRING),), struct_name="version")
SPEC_HOOK = GoType(
    "struct",
    "specs.Hook",
    fields=(("path", STRING), ("args", STRINGS), ("env", STRINGS), ("timeout", INT_PTR)),
    struct_name="Hook",
)
WHEN = GoType(
    "struct",
    "hook.When",
    fields=(("always", BOOL_PTR), ("annotations", STRING_MAP), ("commands", STRINGS), ("hasBindMounts", BOOL_PTR)),
    struct_name="When",
)
HOOK_V1 = GoType(
    "struct",
    "hook.Hook",
    fields=(("version", STRING), ("hook", SPEC_HOOK), ("when", WHEN), ("stages", STRINGS)),
    struct_name="Hook",
)
HOOK_V0 = GoType(
    "struct",
    "hook.Hook",
    fields=(
        ("hook", STRING_PTR),
        ("arguments", STRINGS),
        ("stages", STRINGS),
        ("stage", STRINGS),
        ("cmds", STRINGS),
        ("cmd", STRINGS),
        ("annotations", STRINGS),
        ("annotation", STRINGS),
        ("hasbindmounts", BOOL_PTR),
    ),
    struct_name="Hook",
)

_KELVIN = "\u212a"
_LONG_S = "\u017f"
_INT64 = (-(2**63), 2**63 - 1)


def go_key_matches(name: str, key: str) -> bool:
    """Whether Go's decoder matches JSON key to a field whose JSON name is name (ASCII) when not exactly equal.

    Letters match either case; for names holding a k or an s, the Kelvin sign and the long s match too.
    """
    if any(ch in "kKsS" for ch in name):
        if len(key) != len(name):
            return False
        for want, got in zip(name, key):
            if want == got or (want.isalpha() and got.isascii() and want.upper() == got.upper()):
                continue
            if (want in "sS" and got == _LONG_S) or (want in "kK" and got == _KELVIN):
                continue
            return False
        return True
    return key.isascii() and len(key) == len(name) and key.lower() == name.lower()


def _field_for(struct: GoType, key: str) -> Optional[tuple[str, GoType]]:
    for entry in struct.fields:
        if entry[0] == key:
            return entry
    for entry in struct.fields:
        if go_key_matches(entry[0], key):
            return entry
    return None


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _number_text(value: Union[int, float]) -> str:
    return str(value) if isinstance(value, int) else repr(value)


@dataclass(frozen=True)
class TypeError_:
    """One json.UnmarshalTypeError: where, and Go's text for it."""

    pointer: str
    path: tuple[Any, ...]  # ("hook", "timeout"), ("stages", 1), ("when", "annotations", KEY)
    got: str  # "string", "number 1.5", ...
    go_type: GoType
    struct_name: str
    field_path: str

    @property
    def text(self) -> str:
        if self.struct_name or self.field_path:
            return (
                f"json: cannot unmarshal {self.got} into Go struct field {self.struct_name}.{self.field_path} "
                f"of type {self.go_type.name}"
            )
        return f"json: cannot unmarshal {self.got} into Go value of type {self.go_type.name}"


@dataclass
class Decoded:
    """A value decoded into a Go type: the result, where each part came from, and what went wrong."""

    value: Any
    # ("hook", "path") -> JSON pointer of the key that set it; ("stages", 0) for elements; ("when",
    # "annotations", KEY) for map entries.
    where: dict[tuple[Any, ...], str] = field(default_factory=dict)
    type_errors: list[TypeError_] = field(default_factory=list)
    unknown_keys: list[tuple[str, str, GoType]] = field(default_factory=list)  # (pointer, key, struct type)
    mistyped: set[tuple[Any, ...]] = field(default_factory=set)  # fields whose value had the wrong type

    def at(self, *path: Any) -> str:
        return self.where.get(path, "")


def _zero(go_type: GoType) -> Any:
    if go_type.nullable:
        return None
    if go_type.kind == "struct":
        return {name: _zero(sub) for name, sub in go_type.fields}
    return {"string": "", "bool": False, "int": 0}[go_type.kind]


def go_decode(value: Any, go_type: GoType) -> Decoded:
    """Decode a parsed JSON value into go_type as encoding/json.Unmarshal does, keeping every type error."""
    decoded = Decoded(None)
    decoded.value = _decode(value, go_type, "", (), ("", ()), _zero(go_type), decoded)
    return decoded


def _decode(
    value: Any,
    go_type: GoType,
    pointer: str,
    path: tuple[Any, ...],
    context: tuple[str, tuple[str, ...]],
    current: Any,
    out: Decoded,
) -> Any:
    if value is None:
        return None if go_type.nullable else current
    kind = go_type.kind

    def wrong(got: str) -> Any:
        out.type_errors.append(TypeError_(pointer, path, got, go_type, context[0], ".".join(context[1])))
        out.mistyped.add(path)
        return current

    if kind == "string":
        return value if isinstance(value, str) else wrong(_json_kind(value))
    if kind == "bool":
        return value if isinstance(value, bool) else wrong(_json_kind(value))
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return wrong(_json_kind(value))
        if isinstance(value, float) or not _INT64[0] <= value <= _INT64[1]:
            return wrong(f"number {_number_text(value)}")
        return value
    if kind == "slice":
        if not isinstance(value, list):
            return wrong(_json_kind(value))
        items = []
        for index, item in enumerate(value):
            item_pointer = jsontext.pointer_join(pointer, index)
            out.where[(*path, index)] = item_pointer
            items.append(_decode(item, STRING, item_pointer, (*path, index), context, "", out))
        return items
    if kind == "map":
        if not isinstance(value, dict):
            return wrong(_json_kind(value))
        merged = dict(current) if isinstance(current, dict) else {}
        for key, item in value.items():
            item_pointer = jsontext.pointer_join(pointer, key)
            out.where[(*path, key)] = item_pointer
            merged[key] = _decode(item, STRING, item_pointer, (*path, key), context, "", out)
        return merged
    # struct
    if not isinstance(value, dict):
        return wrong(_json_kind(value))
    result = dict(current) if isinstance(current, dict) else _zero(go_type)
    for key, item in value.items():
        item_pointer = jsontext.pointer_join(pointer, key)
        found = _field_for(go_type, key)
        if found is None:
            out.unknown_keys.append((item_pointer, key, go_type))
            continue
        name, sub_type = found
        out.where[(*path, name)] = item_pointer
        sub_context = (go_type.struct_name, (*context[1], name))
        result[name] = _decode(item, sub_type, item_pointer, (*path, name), sub_context, result[name], out)
    return result


def go_quote(text: str) -> str:
    """Go's %q: a double-quoted string with Go escapes for quotes, backslashes and unprintable characters."""
    parts = ['"']
    named = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
    for ch in text:
        if ch in '"\\':
            parts.append("\\" + ch)
        elif ch in named:
            parts.append(named[ch])
        elif ch == " " or (ch.isprintable() and not ch.isspace()):
            parts.append(ch)
        elif "\ud800" <= ch <= "\udfff":
            parts.append("\ufffd")  # Go's decoder already replaced an unpaired surrogate escape
        elif ord(ch) < 0x80:
            parts.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            parts.append(f"\\u{ord(ch):04x}")
        else:
            parts.append(f"\\U{ord(ch):08x}")
    parts.append('"')
    return "".join(parts)
