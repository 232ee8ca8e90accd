"""Protocol Buffers' wire format, for the few messages this tool reads from the node or speaks: the kubelet's
device-plugin checkpoint stores each container's Allocate response as serialized protobuf
(k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1), and a generated module would pull protobuf into every run.

A message is described by a `Message`: field number -> `Field` (name, type, repeated, nested message). Decoding
follows proto3: unknown fields are skipped, a repeated scalar may come packed, a map is a repeated entry message
of key (1) and value (2), the last occurrence of a singular field wins. Encoding writes proto3's canonical form
(default values left out), which is what Go's encoder writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional


class WireError(ValueError):
    """The bytes are not a message of the expected shape."""


STRING, BYTES, BOOL, INT = "string", "bytes", "bool", "int"
MESSAGE, MAP = "message", "map"

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    repeated: bool = False
    message: Optional[Message] = None  # for MESSAGE


@dataclass(frozen=True)
class Message:
    name: str
    fields: Mapping[int, Field] = field(default_factory=dict)

    def decode(self, data: bytes) -> dict[str, Any]:
        return decode(self, data)

    def encode(self, value: Mapping[str, Any]) -> bytes:
        return encode(self, value)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if at >= len(data):
            raise WireError("truncated varint")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, at
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def _scalar(kind: str, raw: Any) -> Any:
    if kind == STRING:
        try:
            return bytes(raw).decode()
        except UnicodeDecodeError:
            raise WireError("a string field is not UTF-8") from None
    if kind == BYTES:
        return bytes(raw)
    if kind == BOOL:
        return bool(raw)
    return raw - (1 << 64) if raw >= 1 << 63 else raw  # int64's two's complement


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(number, wire type, raw value) of every field, in order."""
    found = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        raw: Any
        if number == 0:
            raise WireError("field number 0")
        if wire == _VARINT:
            raw, at = _varint(data, at)
        elif wire == _LENGTH:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise WireError("a length-delimited field runs past the end")
            raw, at = data[at : at + size], at + size
        elif wire in (_FIXED64, _FIXED32):
            width = 8 if wire == _FIXED64 else 4
            if at + width > len(data):
                raise WireError("a fixed-width field runs past the end")
            raw, at = int.from_bytes(data[at : at + width], "little"), at + width
        else:
            raise WireError(f"wire type {wire} (groups) is not supported")
        found.append((number, wire, raw))
    return found


def decode(message: Message, data: bytes) -> dict[str, Any]:
    """The message's fields by name: every field present or defaulted ("" / False / 0 / [] / {} / None for a
    singular message)."""
    value: dict[str, Any] = {}
    for declared in message.fields.values():
        value[declared.name] = (
            {}
            if declared.type == MAP
            else []
            if declared.repeated
            else None
            if declared.type == MESSAGE
            else _default(declared.type)
        )
    for number, wire, raw in _fields(bytes(data)):
        spec = message.fields.get(number)
        if spec is None:
            continue
        if spec.type == MAP:
            if wire != _LENGTH:
                raise WireError(f"{message.name}.{spec.name}: a map entry is not length-delimited")
            # A key or value of another wire type is an unknown field to Go's decoder: skipped.
            entry = {n: r for n, w, r in _fields(raw) if w == _LENGTH}
            value[spec.name][_scalar(STRING, entry.get(1, b""))] = _scalar(STRING, entry.get(2, b""))
        elif spec.type == MESSAGE:
            if wire != _LENGTH or spec.message is None:
                raise WireError(f"{message.name}.{spec.name}: not a message")
            nested = decode(spec.message, raw)
            if spec.repeated:
                value[spec.name].append(nested)
            else:
                value[spec.name] = nested
        elif spec.type in (STRING, BYTES):
            if wire != _LENGTH:
                raise WireError(f"{message.name}.{spec.name}: not length-delimited")
            item = _scalar(spec.type, raw)
            if spec.repeated:
                value[spec.name].append(item)
            else:
                value[spec.name] = item
        else:
            items = [raw] if wire != _LENGTH else _packed(raw)
            converted = [_scalar(spec.type, item) for item in items]
            if spec.repeated:
                value[spec.name].extend(converted)
            elif converted:
                value[spec.name] = converted[-1]
    return value


def _packed(data: bytes) -> list[int]:
    items, at = [], 0
    while at < len(data):
        item, at = _varint(data, at)
        items.append(item)
    return items


def _default(kind: str) -> Any:
    return {STRING: "", BYTES: b"", BOOL: False, INT: 0}[kind]


def _put_varint(number: int) -> bytes:
    number &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = number & 0x7F
        number >>= 7
        if number:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _put_varint(number << 3 | _LENGTH) + _put_varint(len(payload)) + payload


def encode(message: Message, value: Mapping[str, Any]) -> bytes:
    out = bytearray()
    for number in sorted(message.fields):
        spec = message.fields[number]
        given = value.get(spec.name)
        if given is None:
            continue
        if spec.type == MAP:
            for key, item in given.items():
                entry = _length_delimited(1, str(key).encode()) + _length_delimited(2, str(item).encode())
                out += _length_delimited(number, entry)
            continue
        for item in given if spec.repeated else [given]:
            if spec.type == MESSAGE:
                assert spec.message is not None
                out += _length_delimited(number, encode(spec.message, item))
            elif spec.type in (STRING, BYTES):
                payload = item.encode() if isinstance(item, str) else bytes(item)
                if payload or spec.repeated:
                    out += _length_delimited(number, payload)
            elif item or spec.repeated:
                out += _put_varint(number << 3 | _VARINT) + _put_varint(int(item))
    return bytes(out)
