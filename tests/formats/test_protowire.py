"""protowire against google.protobuf: the kubelet's ContainerAllocateResponse, built from a descriptor at test time
(so that no generated module and no copy of api.proto is needed), encoded by one and decoded by the other.

Random values both ways, every truncation of an encoding, and mutated bytes: where google.protobuf parses them
ours decodes the same (or refuses with WireError), and ours never raises anything but WireError."""

from __future__ import annotations

import random
from typing import Any

import pytest

from nvidia_oci_hook.formats.protowire import WireError
from nvidia_oci_hook.kinds.kubernetes.deviceplugin import CONTAINER_ALLOCATE_RESPONSE

PACKAGE = "nvidiaocihooktest.v1beta1"


def allocate_response_class() -> Any:
    """The ContainerAllocateResponse message class of k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto,
    field numbers and types as there."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="nvidiaocihooktest/api.proto", package=PACKAGE, syntax="proto3")

    def message(name: str, *fields: tuple[int, str, int]) -> Any:
        made = proto.message_type.add(name=name)
        for number, field_name, kind in fields:
            made.field.add(name=field_name, number=number, type=kind, label=field.LABEL_OPTIONAL)
        return made

    message("Mount", (1, "container_path", field.TYPE_STRING), (2, "host_path", field.TYPE_STRING),
            (3, "read_only", field.TYPE_BOOL))  # fmt: skip
    message("DeviceSpec", (1, "container_path", field.TYPE_STRING), (2, "host_path", field.TYPE_STRING),
            (3, "permissions", field.TYPE_STRING))  # fmt: skip
    message("CDIDevice", (1, "name", field.TYPE_STRING))
    response = message("ContainerAllocateResponse")
    for number, name in ((1, "envs"), (4, "annotations")):
        entry = response.nested_type.add(name=name.capitalize() + "Entry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
        entry.field.add(name="value", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
        response.field.add(name=name, number=number, type=field.TYPE_MESSAGE, label=field.LABEL_REPEATED,
                           type_name=f".{PACKAGE}.ContainerAllocateResponse.{entry.name}")  # fmt: skip
    for number, name, kind in ((2, "mounts", "Mount"), (3, "devices", "DeviceSpec"), (5, "cdi_devices", "CDIDevice")):
        response.field.add(name=name, number=number, type=field.TYPE_MESSAGE, label=field.LABEL_REPEATED,
                           type_name=f".{PACKAGE}.{kind}")  # fmt: skip
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(proto.SerializeToString())
    descriptor = pool.FindMessageTypeByName(f"{PACKAGE}.ContainerAllocateResponse")
    # GetMessageClass since protobuf 4.21 (3.20 had only the factory's GetPrototype, which 5.x removed).
    get_class = getattr(message_factory, "GetMessageClass", None)
    if get_class is not None:
        return get_class(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)  # pragma: no cover


RESPONSE = allocate_response_class()


def google_encode(value: dict[str, Any]) -> bytes:
    message = RESPONSE()
    message.envs.update(value.get("envs", {}))
    message.annotations.update(value.get("annotations", {}))
    for mount in value.get("mounts", []):
        message.mounts.add(**mount)
    for device in value.get("devices", []):
        message.devices.add(**device)
    for cdi in value.get("cdi_devices", []):
        message.cdi_devices.add(**cdi)
    data: bytes = message.SerializeToString()
    return data


def google_decode(data: bytes) -> dict[str, Any]:
    message = RESPONSE()
    message.ParseFromString(data)
    return {
        "envs": dict(message.envs),
        "mounts": [{"container_path": m.container_path, "host_path": m.host_path, "read_only": m.read_only}
                   for m in message.mounts],
        "devices": [{"container_path": d.container_path, "host_path": d.host_path, "permissions": d.permissions}
                    for d in message.devices],
        "annotations": dict(message.annotations),
        "cdi_devices": [{"name": c.name} for c in message.cdi_devices],
    }  # fmt: skip


def google_parses(data: bytes) -> bool:
    from google.protobuf.message import DecodeError

    try:
        RESPONSE().ParseFromString(data)
    except DecodeError:
        return False
    return True


def google_known(data: bytes) -> Any:
    """What google.protobuf reads, where it reads every field as one it knows; None otherwise. A field of the
    wrong wire type is an unknown field to it (and to Go's protobuf), and implementations differ on a map entry
    holding one (upb drops the entry, Go keeps it with a default key): no oracle there."""
    message = RESPONSE()
    message.ParseFromString(data)
    size = len(message.SerializeToString())
    message.DiscardUnknownFields()
    return google_decode(data) if len(message.SerializeToString()) == size else None


ALPHABET = 'abcXYZ019/._-=: \t\n"\\\x00\x7f' + "é中𝄞"


def _text(rng: random.Random) -> str:
    size = rng.choice([0, 0, 1, 5, 20, 130, 300])  # 130 and 300: lengths of two varint bytes
    return "".join(rng.choice(ALPHABET) for _ in range(size))


def random_value(rng: random.Random) -> dict[str, Any]:
    def some(make: Any) -> list[Any]:
        return [make() for _ in range(rng.choice([0, 1, 2, 7]))]

    return {
        "envs": {_text(rng): _text(rng) for _ in range(rng.choice([0, 1, 3, 40]))},
        "mounts": some(lambda: {"container_path": _text(rng), "host_path": _text(rng),
                                "read_only": rng.random() < 0.5}),
        "devices": some(lambda: {"container_path": _text(rng), "host_path": _text(rng),
                                 "permissions": rng.choice(["", "rw", "rwm", _text(rng)])}),
        "annotations": {_text(rng): _text(rng) for _ in range(rng.choice([0, 1, 3]))},
        "cdi_devices": some(lambda: {"name": rng.choice(["nvidia.com/gpu=0", "nvidia.com/gpu=all", _text(rng)])}),
    }  # fmt: skip


def test_google_s_encoding_decodes_the_same_with_ours() -> None:
    rng = random.Random(20261204)
    for _ in range(400):
        value = random_value(rng)
        assert CONTAINER_ALLOCATE_RESPONSE.decode(google_encode(value)) == google_decode(google_encode(value))
        assert CONTAINER_ALLOCATE_RESPONSE.decode(google_encode(value)) == value


def test_ours_encodes_what_google_parses_back_equal() -> None:
    rng = random.Random(1205)
    for _ in range(400):
        value = random_value(rng)
        assert google_decode(CONTAINER_ALLOCATE_RESPONSE.encode(value)) == value


EMPTY: dict[str, Any] = {"envs": {}, "mounts": [], "devices": [], "annotations": {}, "cdi_devices": []}


def test_the_empty_message_and_defaults() -> None:
    empty = EMPTY
    assert CONTAINER_ALLOCATE_RESPONSE.decode(b"") == empty
    assert CONTAINER_ALLOCATE_RESPONSE.encode(empty) == b"" == google_encode(empty)
    one = {**empty, "mounts": [{"container_path": "", "host_path": "", "read_only": False}]}
    assert CONTAINER_ALLOCATE_RESPONSE.decode(google_encode(one)) == one


def _outcome(data: bytes) -> Any:
    try:
        return CONTAINER_ALLOCATE_RESPONSE.decode(data)
    except WireError:
        return WireError


def test_every_truncation_is_refused_or_read_as_google_reads_it() -> None:
    rng = random.Random(7)
    for _ in range(40):
        data = google_encode(random_value(rng))
        for end in range(len(data)):
            prefix = data[:end]
            ours = _outcome(prefix)
            if google_parses(prefix):
                assert ours == google_known(prefix), (prefix, ours)
            else:
                assert ours is WireError, (prefix, ours)


def test_mutated_and_random_bytes_raise_nothing_but_wire_error() -> None:
    rng = random.Random(99)
    compared = 0
    for round_ in range(3000):
        if round_ % 3 == 0:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        else:
            mutable = bytearray(google_encode(random_value(rng)) or b"\x0a\x00")
            for _ in range(rng.choice([1, 2, 5])):
                mutable[rng.randrange(len(mutable))] = rng.randrange(256)
            data = bytes(mutable)
        ours = _outcome(data)  # anything but WireError escapes and fails the test
        if ours is not WireError and google_parses(data) and google_known(data) is not None:
            assert ours == google_known(data), data
            compared += 1
    assert compared > 200  # the comparison ran, not only the refusals


@pytest.mark.parametrize(
    "data, why",
    [
        (b"\x0a", "truncated varint"),
        (b"\x0a\x05\x0a\x01", "runs past the end"),
        (b"\x00\x00", "field number 0"),
        (b"\x1b", "groups"),
        (b"\x1a\x02\x0a\x05", "runs past the end"),
        (b"\x2a\x03\x0a\x01\xff", "not UTF-8"),
        (b"\x10\x01", "not a message"),
        (b"\x0a\x01\x08", "truncated varint"),
        (b"\x80" * 11, "varint longer than 10 bytes"),
    ],
)
def test_malformed_bytes_say_why(data: bytes, why: str) -> None:
    with pytest.raises(WireError, match=why):
        CONTAINER_ALLOCATE_RESPONSE.decode(data)


def test_a_map_entry_whose_key_is_not_length_delimited_invents_no_key() -> None:
    entry = b"\x08\x05"  # the key as the varint 5
    assert _outcome(b"\x0a\x02" + entry) in (WireError, EMPTY, {**EMPTY, "envs": {"": ""}})
    huge = b"\x08" + b"\xff" * 8 + b"\x3f"  # a varint near 2**63
    assert _outcome(bytes([0x0A, len(huge)]) + huge) in (WireError, EMPTY, {**EMPTY, "envs": {"": ""}})
