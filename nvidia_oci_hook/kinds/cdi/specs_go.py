"""The library's specs-go package: the Go types a spec decodes into (config.go) and the structs decoded from
them, the spec versions the library knows and the one each field needs (version.go), and views over a decoded
spec's container edits."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Optional

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.cdi.releases import EARLIEST_SPEC_VERSION, NEWEST, RELEASES, Library

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
_RDT_COMMON = (("closID", STRING), ("l3CacheSchema", STRING), ("memBwSchema", STRING))
INTEL_RDT = _struct("IntelRdt", *_RDT_COMMON, ("enableCMT", BOOL), ("enableMBM", BOOL))
INTEL_RDT_1_1 = _struct("IntelRdt", *_RDT_COMMON, ("schemata", STRINGS), ("enableMonitoring", BOOL))
NET_DEVICE = _struct("LinuxNetDevice", ("hostInterfaceName", STRING), ("name", STRING))
ANNOTATIONS = GoType("map", "map[string]string", STRING)


@dataclass(frozen=True)
class SpecTypes:
    """The specs-go types of one library release."""

    spec: GoType
    device: GoType


def _spec_types(library: Library) -> SpecTypes:
    edits: list[tuple[str, GoType]] = [
        ("env", STRINGS),
        ("deviceNodes", _slice(_ptr(DEVICE_NODE))),
        ("hooks", _slice(_ptr(HOOK))),
        ("mounts", _slice(_ptr(MOUNT))),
    ]
    if library.intel_rdt:
        edits.append(("intelRdt", _ptr(INTEL_RDT_1_1 if library.net_devices else INTEL_RDT)))
        edits.append(("additionalGids", _slice(UINT32)))
    if library.net_devices:
        edits.append(("netDevices", _slice(_ptr(NET_DEVICE))))
    container_edits = _struct("ContainerEdits", *edits)
    annotations = [("annotations", ANNOTATIONS)] if library.annotations else []
    device = _struct("Device", ("name", STRING), *annotations, ("containerEdits", container_edits))
    spec = _struct(
        "Spec",
        ("cdiVersion", STRING),
        ("kind", STRING),
        *annotations,
        ("devices", _slice(device)),
        ("containerEdits", container_edits),
    )
    return SpecTypes(spec, device)


_TYPES = {library.release: _spec_types(library) for library in RELEASES}


def spec_types(library: Library) -> SpecTypes:
    return _TYPES[library.release]


# Where a field entered or left the library: (struct, field) -> ("added" or "removed", release).
FIELD_HISTORY = {
    ("Spec", "annotations"): ("added", "0.6.0"),
    ("Device", "annotations"): ("added", "0.6.0"),
    ("ContainerEdits", "intelRdt"): ("added", "0.7.0"),
    ("ContainerEdits", "additionalGids"): ("added", "0.7.0"),
    ("ContainerEdits", "netDevices"): ("added", "1.1.0"),
    ("IntelRdt", "schemata"): ("added", "1.1.0"),
    ("IntelRdt", "enableMonitoring"): ("added", "1.1.0"),
    ("IntelRdt", "enableCMT"): ("removed", "1.1.0"),
    ("IntelRdt", "enableMBM"): ("removed", "1.1.0"),
}


# bytes.EqualFold: ASCII case, plus the two non-ASCII letters whose simple folding reaches ASCII.
_NON_ASCII_FOLDS = {"\u212a": "k", "\u017f": "s"}


@lru_cache(maxsize=4096)
def _fold(key: str) -> str:
    if key.isascii():
        return key.lower()
    return "".join(_NON_ASCII_FOLDS.get(char, char.lower() if char.isascii() else char) for char in key)


def match_field(struct_type: GoType, key: str) -> Optional[tuple[str, GoType]]:
    """The field encoding/json decodes key into: the exact name, else one equal without regard to case."""
    folded = None
    folded_key = _fold(key)
    for name, field_type in struct_type.fields:
        if name == key:
            return name, field_type
        if folded is None and _fold(name) == folded_key:
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


EARLIEST_VERSION = EARLIEST_SPEC_VERSION

# ---------------------------------------------------------------------------------------------------------------
# Versions (specs-go/version.go; pkg/cdi/version.go before 1.0.0)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def known_version(version: str, library: Library = NEWEST) -> Optional[str]:
    """The canonical version the library takes version for ("v0.5.0" is 0.5.0 from 0.5.4 on), or None if it is
    unknown to that release."""
    canonical = version[1:] if version.startswith("v") and library.v_prefix else version
    return canonical if canonical in library.spec_versions else None


@dataclass(frozen=True)
class Feature:
    version: str
    pointer: str
    what: str


def required_features(spec: GoStruct, library: Library = NEWEST) -> list[Feature]:
    """Every use of a field or name form that needs a spec version above 0.3.0, as the release counts them."""
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
        if container_edits.items_of("netDevices"):
            features.append(Feature("1.1.0", container_edits.at("netDevices"), "netDevices"))
        rdt = container_edits.get("intelRdt")
        if isinstance(rdt, GoStruct):
            if rdt.get("schemata") is not None:
                features.append(Feature("1.1.0", rdt.at("schemata"), "intelRdt.schemata"))
            if rdt.get("enableMonitoring") is True:
                features.append(Feature("1.1.0", rdt.at("enableMonitoring"), "intelRdt.enableMonitoring"))
    for device in devices:
        name = device.text("name")
        first = name[:1]
        if library.name_needs_letter:
            needs = not (first.isascii() and first.isalpha())
            what = f"a device name not starting with a letter ({name!r})"
        else:
            needs = first.isascii() and first.isdigit()
            what = f"a device name starting with a digit ({name!r})"
        if needs:
            features.append(Feature("0.5.0", device.at("name"), what))
        if device.get("annotations"):
            features.append(Feature("0.6.0", device.at("annotations"), "device annotations"))
    if spec.get("annotations"):
        features.append(Feature("0.6.0", spec.at("annotations"), "spec annotations"))
    kind = spec.text("kind")
    if library.annotations and "/" in kind:
        vendor, cls = kind.split("/", 1)
        if "." in cls and ((vendor and cls) or not library.dotted_class_needs_vendor):
            features.append(Feature("0.6.0", spec.at("kind"), f"a '.' in the class ({cls!r})"))
    return features


def minimum_version(spec: GoStruct, library: Library = NEWEST) -> str:
    """MinimumRequiredVersion, as the release computes it."""
    versions = [EARLIEST_VERSION] + [feature.version for feature in required_features(spec, library)]
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
