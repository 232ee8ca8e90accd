"""The library's specs-go package: the Go types a spec decodes into (config.go) and the structs decoded from
them, the spec versions the library knows and the one each field needs (version.go), and views over a decoded
spec's container edits."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.formats.jsontext import pointer_join

# ---------------------------------------------------------------------------------------------------------------
# Types (specs-go/config.go), as encoding/json decodes into them


@dataclass(frozen=True)
class GoType:
    kind: str  # string, int, uint32, bool, struct, slice, map, ptr
    name: str  # as encoding/json prints it in errors
    elem: Optional[GoType] = None
    fields: tuple[tuple[str, GoType], ...] = ()

    @property
    def target(self) -> GoType:
        """The type a value is decoded into, through pointers."""
        return self.elem.target if self.kind == "ptr" and self.elem is not None else self

    @property
    def short(self) -> str:
        return self.name.rsplit(".", 1)[-1]


STRING = GoType("string", "string")
INT64 = GoType("int", "int64")
INT = GoType("int", "int")
UINT32 = GoType("uint32", "uint32")
FILE_MODE = GoType("uint32", "fs.FileMode")
BOOL = GoType("bool", "bool")
STRINGS = GoType("slice", "[]string", STRING)


def _struct(name: str, *fields: tuple[str, GoType]) -> GoType:
    return GoType("struct", f"specs.{name}", fields=fields)


def _ptr(elem: GoType) -> GoType:
    return GoType("ptr", "*" + elem.name, elem)


def _slice(elem: GoType) -> GoType:
    return GoType("slice", "[]" + elem.name, elem)


DEVICE_NODE = _struct(
    "DeviceNode",
    ("path", STRING),
    ("hostPath", STRING),
    ("type", STRING),
    ("major", INT64),
    ("minor", INT64),
    ("fileMode", _ptr(FILE_MODE)),
    ("permissions", STRING),
    ("uid", _ptr(UINT32)),
    ("gid", _ptr(UINT32)),
)
MOUNT = _struct("Mount", ("hostPath", STRING), ("containerPath", STRING), ("options", STRINGS), ("type", STRING))
HOOK = _struct(
    "Hook", ("hookName", STRING), ("path", STRING), ("args", STRINGS), ("env", STRINGS), ("timeout", _ptr(INT))
)
INTEL_RDT = _struct(
    "IntelRdt",
    ("closID", STRING),
    ("l3CacheSchema", STRING),
    ("memBwSchema", STRING),
    ("enableCMT", BOOL),
    ("enableMBM", BOOL),
)
CONTAINER_EDITS = _struct(
    "ContainerEdits",
    ("env", STRINGS),
    ("deviceNodes", _slice(_ptr(DEVICE_NODE))),
    ("hooks", _slice(_ptr(HOOK))),
    ("mounts", _slice(_ptr(MOUNT))),
    ("intelRdt", _ptr(INTEL_RDT)),
    ("additionalGids", _slice(UINT32)),
)
ANNOTATIONS = GoType("map", "map[string]string", STRING)
DEVICE = _struct("Device", ("name", STRING), ("annotations", ANNOTATIONS), ("containerEdits", CONTAINER_EDITS))
SPEC = _struct(
    "Spec",
    ("cdiVersion", STRING),
    ("kind", STRING),
    ("annotations", ANNOTATIONS),
    ("devices", _slice(DEVICE)),
    ("containerEdits", CONTAINER_EDITS),
)

# Fields that library v1.1.0 added (refused as unknown by v1.0.x) or removed (unknown to v1.1.0).
ADDED_IN_1_1 = {"ContainerEdits": ("netDevices",), "IntelRdt": ("schemata", "enableMonitoring")}
REMOVED_IN_1_1 = {"IntelRdt": ("enableCMT", "enableMBM")}


def _fold_char(char: str) -> str:
    # bytes.EqualFold: ASCII case, plus the two non-ASCII letters whose simple folding reaches ASCII.
    return {"\u212a": "k", "\u017f": "s"}.get(char, char.lower() if char.isascii() else char)


def _fold(key: str) -> str:
    return "".join(_fold_char(char) for char in key)


def match_field(struct_type: GoType, key: str) -> Optional[tuple[str, GoType]]:
    """The field encoding/json decodes key into: the exact name, else one equal without regard to case."""
    folded = None
    for name, field_type in struct_type.fields:
        if name == key:
            return name, field_type
        if folded is None and _fold(name) == _fold(key):
            folded = (name, field_type)
    return folded


@dataclass
class GoStruct:
    """A decoded struct: its fields' Go values and the JSON pointer of the key that set each."""

    type: GoType
    pointer: str
    values: dict[str, Any] = field(default_factory=dict)
    pointers: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        return self.values.get(name)

    def text(self, name: str) -> str:
        value = self.values.get(name)
        return value if isinstance(value, str) else ""

    def integer(self, name: str) -> int:
        value = self.values.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    def items_of(self, name: str) -> list[Any]:
        value = self.values.get(name)
        return value if isinstance(value, list) else []

    def at(self, name: str) -> str:
        return self.pointers.get(name, pointer_join(self.pointer, name))


# ---------------------------------------------------------------------------------------------------------------
# Versions (specs-go/version.go)

# The library release modelled.
LIBRARY_RELEASE = "1.0.1"

# Spec versions each library release knows (specs-go/version.go): release X.Y knows every version up to X.Y.0.
SPEC_VERSIONS = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0")
NEWER_SPEC_VERSIONS = ("1.1.0",)  # known to library v1.1.0, refused as unknown by v1.0.x
EARLIEST_VERSION = "0.3.0"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def known_version(version: str) -> Optional[str]:
    """The canonical version the library takes version for ("v0.5.0" is 0.5.0), or None if it is unknown."""
    canonical = version[1:] if version.startswith("v") else version
    return canonical if canonical in SPEC_VERSIONS else None


@dataclass(frozen=True)
class Feature:
    version: str
    pointer: str
    what: str


def required_features(spec: GoStruct) -> list[Feature]:
    """Every use of a field or name form that needs a spec version above 0.3.0."""
    features: list[Feature] = []
    devices = [device for device in spec.items_of("devices") if isinstance(device, GoStruct)]
    for container_edits in [spec.get("containerEdits")] + [device.get("containerEdits") for device in devices]:
        if not isinstance(container_edits, GoStruct):
            continue
        for mount in container_edits.items_of("mounts"):
            if isinstance(mount, GoStruct) and mount.text("type"):
                features.append(Feature("0.4.0", mount.at("type"), "mounts[].type"))
        for node in container_edits.items_of("deviceNodes"):
            if isinstance(node, GoStruct) and node.text("hostPath"):
                features.append(Feature("0.5.0", node.at("hostPath"), "deviceNodes[].hostPath"))
        if container_edits.get("intelRdt") is not None:
            features.append(Feature("0.7.0", container_edits.at("intelRdt"), "intelRdt"))
        if container_edits.items_of("additionalGids"):
            features.append(Feature("0.7.0", container_edits.at("additionalGids"), "additionalGids"))
    for device in devices:
        name = device.text("name")
        if name[:1].isascii() and name[:1].isdigit():
            features.append(Feature("0.5.0", device.at("name"), f"a device name starting with a digit ({name!r})"))
        if device.get("annotations"):
            features.append(Feature("0.6.0", device.at("annotations"), "device annotations"))
    if spec.get("annotations"):
        features.append(Feature("0.6.0", spec.at("annotations"), "spec annotations"))
    kind = spec.text("kind")
    if "/" in kind and "." in kind.split("/", 1)[1]:
        features.append(Feature("0.6.0", spec.at("kind"), f"a '.' in the class ({kind.split('/', 1)[1]!r})"))
    return features


def minimum_version(spec: GoStruct) -> str:
    """specs-go MinimumRequiredVersion."""
    versions = [EARLIEST_VERSION] + [feature.version for feature in required_features(spec)]
    return max(versions, key=_version_key)


# ---------------------------------------------------------------------------------------------------------------
# Views for the semantic rules


@dataclass(frozen=True)
class EditsView:
    """One container-edits block: the spec's own (device None) or a device's."""

    device: Optional[str]
    pointer: str
    edits: GoStruct

    @property
    def owner(self) -> str:
        return f"device {self.device}" if self.device is not None else "the spec's containerEdits"


def edit_blocks(spec: GoStruct) -> Iterator[EditsView]:
    edits = spec.get("containerEdits")
    if isinstance(edits, GoStruct):
        yield EditsView(None, edits.pointer, edits)
    for device in spec.items_of("devices"):
        if isinstance(device, GoStruct) and isinstance(device.get("containerEdits"), GoStruct):
            yield EditsView(device.text("name"), device.at("containerEdits"), device.get("containerEdits"))


def entries(block: EditsView, name: str) -> Iterator[tuple[str, GoStruct]]:
    """(pointer, entry) for every non-null entry of a deviceNodes, mounts or hooks list."""
    for index, entry in enumerate(block.edits.items_of(name)):
        if isinstance(entry, GoStruct):
            yield f"{block.edits.at(name)}/{index}", entry


def node_host_path(node: GoStruct) -> str:
    """The host node the library stats: hostPath, or path when hostPath is empty (fillMissingInfo)."""
    return node.text("hostPath") or node.text("path")


def fully_specified(node: GoStruct) -> bool:
    """fillMissingInfo's hasMinimalSpecification: the library does not need the host node."""
    node_type = node.text("type")
    return node_type != "" and (node.integer("major") != 0 or node_type == "p")
