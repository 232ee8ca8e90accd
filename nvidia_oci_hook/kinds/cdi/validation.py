"""CDI specs: every reason the CDI Go library refuses one, in the order it meets them (`analyse`).

The model is tags.cncf.io/container-device-interface at each release in releases.py; `analyse` takes the release
(the newest by default). Release 1.0.1 is the one Debian packages: tests/cdi builds it and holds this package to
its verdict. Reading a spec is, in every release:

1. sigs.k8s.io/yaml.UnmarshalStrict: the text (JSON or YAML, whatever the file name) is parsed as YAML 1.1 by
   goyaml.v2 (duplicate keys refused), converted to JSON (numbers and booleans become strings where the target
   field is a string; map keys are sorted), then decoded by encoding/json with unknown fields refused and keys
   matched to fields without regard to case.
2. Spec.validate: the spec version (known, and at least what the fields used need), vendor and class, the
   spec's own container edits, then each device (name, non-empty edits, edits) and duplicate names; at least one
   device.

Both steps are emulated on the parsed value (the decoding in decoding.py, the validation here); `analyse` lists
every reason the library refuses the spec, in the order the library meets them, each with the library's own
error text. Text-level reasons (what goyaml.v2 refuses in a JSON text that Python's JSON parser accepts) need
the document's text: `refine_document` in goyaml.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from nvidia_oci_hook.kinds.cdi.codes import (
    BAD_DEVICE_NAME,
    BAD_DEVICE_NODE,
    BAD_ENV,
    BAD_HOOK,
    BAD_INTEL_RDT,
    BAD_KIND,
    BAD_MOUNT,
    BAD_NET_DEVICE,
    DUPLICATE_DEVICE,
    EMPTY_EDITS,
    NO_DEVICES,
    NULL_ENTRY,
    UNKNOWN_VERSION,
    VERSION_TOO_OLD,
    WRONG_TYPE,
)
from nvidia_oci_hook.kinds.cdi.decoding import LibraryProblem, _closest, _ConversionError, _convert, _Decoder
from nvidia_oci_hook.kinds.cdi.goformat import go_quote
from nvidia_oci_hook.kinds.cdi.names import (
    NamePanic,
    device_name_error,
    legacy_vendor_or_class_error,
    parse_qualifier,
    vendor_or_class_error,
)
from nvidia_oci_hook.kinds.cdi.releases import NEWEST, RELEASES, Library
from nvidia_oci_hook.kinds.cdi.specs_go import (
    EARLIEST_VERSION,
    GoStruct,
    _version_key,
    known_version,
    minimum_version,
    required_features,
    spec_types,
)

HOOK_NAMES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")
DEVICE_NODE_TYPES = ("", "b", "c", "u", "p")


# ---------------------------------------------------------------------------------------------------------------
# Validation (pkg/cdi/spec.go, device.go, container-edits.go)


@dataclass
class Analysis:
    """A spec as the library reads it: the decoded value (None if nothing decoded) and every problem."""

    spec: Optional[GoStruct]
    problems: list[LibraryProblem]

    @property
    def loads(self) -> bool:
        return not self.problems

    @property
    def library_error(self) -> Optional[str]:
        """What the library reports: the first problem's text, or None when it loads the spec."""
        return self.problems[0].library if self.problems else None


_INVALID = "invalid CDI Spec: "


class _Validator:
    def __init__(self, library: Library) -> None:
        self.library = library
        self.problems: list[LibraryProblem] = []
        self.null_entries: set[str] = set()

    def add(
        self,
        code: str,
        pointer: str,
        message: str,
        library: str,
        hint: Optional[str] = None,
        panic: bool = False,
    ) -> None:
        self.problems.append(LibraryProblem(code, pointer, message, library, hint, panic))

    def version(self, spec: GoStruct) -> bool:
        version = spec.text("cdiVersion")
        library = self.library
        if known_version(version, library) is None:
            newer = [found for found in RELEASES if known_version(version, found) is not None]
            self.add(
                UNKNOWN_VERSION,
                spec.at("cdiVersion"),
                f"cdiVersion {go_quote(version)} is "
                + (f"a version only library v{newer[0].release} and later know" if newer else "not a CDI spec version")
                + f"; library v{library.release} accepts {EARLIEST_VERSION} to {library.newest_spec_version}",
                f"{_INVALID}invalid version {go_quote(version)}",
                "set cdiVersion to the version the fields need: " + minimum_version(spec, library),
            )
            return False
        return True

    def minimum(self, spec: GoStruct) -> None:
        version = known_version(spec.text("cdiVersion"), self.library)
        assert version is not None
        features = required_features(spec, self.library)
        needed = minimum_version(spec, self.library)
        if _version_key(needed) <= _version_key(version):
            return
        uses = [feature for feature in features if feature.version == needed]
        if uses:
            why = (
                f"cdiVersion {version} is too old for {uses[0].what} (at {uses[0].pointer}"
                + (f", and {len(uses) - 1} more" if len(uses) > 1 else "")
                + f"), which needs {needed}"
            )
        else:
            why = f"cdiVersion {version} is older than {EARLIEST_VERSION}, the earliest version the library reads"
        self.add(
            VERSION_TOO_OLD,
            spec.at("cdiVersion"),
            why,
            f"{_INVALID}the spec version must be at least v{needed}",
            f'set "cdiVersion": "{needed}"',
        )

    def requires_panics(self, spec: GoStruct) -> None:
        """MinimumRequiredVersion's requiresV040 walks every mount until one has a type, and requiresV050 (unless
        a device name starts with a digit) every device node until one has a hostPath: a null entry met on the
        way is dereferenced, and panics."""
        devices = [device for device in spec.items_of("devices") if isinstance(device, GoStruct)]
        edits = [device.get("containerEdits") for device in devices] + [spec.get("containerEdits")]
        blocks = [block for block in edits if isinstance(block, GoStruct)]
        if self.library.name_needs_letter:
            digit_name = any(
                not (device.text("name")[:1].isascii() and device.text("name")[:1].isalpha()) for device in devices
            )
        else:
            digit_name = any(device.text("name")[:1] in tuple("0123456789") for device in devices)
        walks = [("mounts", "type")] if digit_name else [("mounts", "type"), ("deviceNodes", "hostPath")]
        for list_name, field_name in walks:
            for block in blocks:
                entries = block.items_of(list_name)
                for index, entry in enumerate(entries):
                    if entry is None:
                        self.null_entry(f"{block.at(list_name)}/{index}", list_name)
                        break
                    if entry.text(field_name):
                        break
                else:
                    continue
                break

    def null_entry(self, pointer: str, list_name: str) -> None:
        if pointer in self.null_entries:
            return
        self.null_entries.add(pointer)
        self.add(
            NULL_ENTRY,
            pointer,
            f"a null entry in {list_name}: the CDI library dereferences it and panics (nil pointer "
            "dereference); an engine that loads this spec crashes unless it recovers the panic",
            "runtime error: invalid memory address or nil pointer dereference",
            f"remove the null entry from {list_name}",
            panic=True,
        )

    def qualifier(self, spec: GoStruct) -> None:
        kind = spec.text("kind")
        vendor, cls = parse_qualifier(kind)
        for part, what in ((vendor, "vendor"), (cls, "class")):
            try:
                if self.library.legacy_texts:
                    error = legacy_vendor_or_class_error(part, what)
                    message = error
                else:
                    error = vendor_or_class_error(part)
                    message = f"invalid {what}. {error}"
            except NamePanic as panic:
                self.add(
                    BAD_KIND,
                    spec.at("kind"),
                    f"kind {go_quote(kind)}: the {what} {go_quote(part)} is a single character, on which the CDI "
                    "library panics (it slices name[1:len-1]); an engine that loads this spec crashes unless it "
                    "recovers the panic",
                    str(panic),
                    f"use a {what} of at least two characters, e.g. nvidia.com/gpu",
                    panic=True,
                )
                return
            if error is not None:
                self.add(
                    BAD_KIND,
                    spec.at("kind"),
                    f"kind {go_quote(kind)}: {message}"
                    + ("" if "/" in kind else " (kind must be vendor/class, e.g. nvidia.com/gpu)"),
                    f"{_INVALID}{message}",
                    "write kind as vendor/class: letters, digits, '_', '-', '.', starting with a letter and "
                    "ending with a letter or digit, e.g. nvidia.com/gpu"
                    + (" (library 0.5 takes no '.' in the class)" if self.library.legacy_texts else ""),
                )
                return

    def edits(self, edits: Any, wrap: str, name: Optional[str]) -> None:
        """ContainerEdits.Validate; wrap is the prefix the library puts before an edit's error."""
        if not isinstance(edits, GoStruct):
            return
        device = f"device {go_quote(name)}" if name is not None else "the spec's containerEdits"
        for index, variable in enumerate(edits.items_of("env")):
            if isinstance(variable, str) and variable.find("=") <= 0:
                self.add(
                    BAD_ENV,
                    f"{edits.at('env')}/{index}",
                    f"env entry {go_quote(variable)} of {device} is not NAME=VALUE with a non-empty NAME",
                    f"{wrap}invalid container edits: invalid environment variable {go_quote(variable)}",
                    "write it as NAME=VALUE",
                )
        for index, node in enumerate(edits.items_of("deviceNodes")):
            pointer = f"{edits.at('deviceNodes')}/{index}"
            if node is None:
                self.null_entry(pointer, "deviceNodes")
                continue
            self.device_node(node, pointer, wrap, device)
        for index, hook in enumerate(edits.items_of("hooks")):
            pointer = f"{edits.at('hooks')}/{index}"
            if hook is None:
                self.null_entry(pointer, "hooks")
                continue
            self.hook(hook, wrap, device)
        for index, mount in enumerate(edits.items_of("mounts")):
            pointer = f"{edits.at('mounts')}/{index}"
            if mount is None:
                self.null_entry(pointer, "mounts")
                continue
            for key, what in (("hostPath", "host path"), ("containerPath", "container path")):
                if not mount.text(key):
                    self.add(
                        BAD_MOUNT,
                        mount.at(key) if key in mount.pointers else mount.pointer,
                        f"a mount of {device} has an empty {key}",
                        f"{wrap}invalid mount, empty {what}",
                        f"give the mount its {key}",
                    )
                    break
        rdt = edits.get("intelRdt")
        if isinstance(rdt, GoStruct):
            clos = rdt.text("closID")
            root = clos == "/" and self.library.root_clos
            bad = len(clos.encode("utf-8", "surrogatepass")) >= 4096 or clos in (".", "..") or set(clos) & {"/", "\n"}
            if bad and not root:
                self.add(
                    BAD_INTEL_RDT,
                    rdt.at("closID"),
                    f"intelRdt.closID {go_quote(clos)} of {device} is not a valid file name (no '/', newline, "
                    "'.' or '..', under 4096 bytes)",
                    f"{wrap}invalid ClosID",
                    "use a plain name for the resctrl group, e.g. gpu-workloads"
                    + (", or / for the root group" if self.library.root_clos else ""),
                )
        self.net_devices(edits, wrap, device)

    def net_devices(self, edits: GoStruct, wrap: str, device: str) -> None:
        """Library 1.1.0's ValidateNetDevices: every entry named on both sides, no name twice."""
        by_host: dict[str, str] = {}
        by_name: dict[str, str] = {}
        for index, entry in enumerate(edits.items_of("netDevices")):
            pointer = f"{edits.at('netDevices')}/{index}"
            if entry is None:
                self.null_entry(pointer, "netDevices")
                return
            host, name = entry.text("hostInterfaceName"), entry.text("name")
            for key, value, field_name in (("hostInterfaceName", host, "HostInterfaceName"), ("name", name, "Name")):
                if not value:
                    self.add(
                        BAD_NET_DEVICE,
                        entry.at(key) if key in entry.pointers else pointer,
                        f"a netDevices entry of {device} has an empty {key}",
                        f"{wrap}invalid linux net device, empty {field_name}",
                        f"give the entry its {key}",
                    )
                    return
            if host in by_host:
                self.add(
                    BAD_NET_DEVICE,
                    entry.at("hostInterfaceName"),
                    f"netDevices of {device} move host interface {go_quote(host)} twice",
                    f"{wrap}invalid linux net device, duplicate HostInterfaceName {go_quote(host)} with names "
                    f"{go_quote(name)} and {go_quote(by_host[host])}",
                    "move each host interface into the container once",
                )
                return
            if name in by_name:
                self.add(
                    BAD_NET_DEVICE,
                    entry.at("name"),
                    f"netDevices of {device} name two interfaces {go_quote(name)} in the container",
                    f"{wrap}invalid linux net device, duplicate Name {go_quote(name)} with HostInterfaceName "
                    f"{go_quote(host)} and {go_quote(by_name[name])}",
                    "give each interface its own name in the container",
                )
                return
            by_host[host] = name
            by_name[name] = host

    def device_node(self, node: GoStruct, pointer: str, wrap: str, device: str) -> None:
        path = node.text("path")
        if not path:
            self.add(
                BAD_DEVICE_NODE,
                node.at("path") if "path" in node.pointers else pointer,
                f"a device node of {device} has an empty path",
                f"{wrap}invalid (empty) device path",
                "set path to the node's path in the container, e.g. /dev/nvidia0",
            )
            return
        node_type = node.text("type")
        if node_type not in DEVICE_NODE_TYPES:
            self.add(
                BAD_DEVICE_NODE,
                node.at("type"),
                f"device node {path} of {device} has type {go_quote(node_type)}; the library takes "
                '"" (from the host node), "c", "b", "u" or "p"',
                f"{wrap}device {go_quote(path)}: invalid type {go_quote(node_type)}",
                'use "c" for a character device, or leave type out to take it from the host node',
            )
            return
        permissions = node.text("permissions")
        bad = [char for char in permissions if char not in "rwm"]
        if bad:
            self.add(
                BAD_DEVICE_NODE,
                node.at("permissions"),
                f"device node {path} of {device} has permissions {go_quote(permissions)}; only r, w and m are allowed",
                f"{wrap}device {go_quote(path)}: invalid "
                + ("persmissions" if self.library.legacy_texts else "permissions")
                + f" {go_quote(permissions)}",
                'use a subset of "rwm" (empty means rwm)',
            )

    def hook(self, hook: GoStruct, wrap: str, device: str) -> None:
        name = hook.text("hookName")
        if name not in HOOK_NAMES:
            close = _closest(name, HOOK_NAMES)
            self.add(
                BAD_HOOK,
                hook.at("hookName"),
                f"a hook of {device} has hookName {go_quote(name)}; the library takes {', '.join(HOOK_NAMES)}",
                f"{wrap}invalid hook name {go_quote(name)}",
                f"did you mean {close!r}?" if close else "use createContainer for nvidia-cdi-hook",
            )
            return
        if not hook.text("path"):
            self.add(
                BAD_HOOK,
                hook.at("path") if "path" in hook.pointers else hook.pointer,
                f"the {name} hook of {device} has an empty path",
                f"{wrap}invalid hook {go_quote(name)} with empty path",
                "set path to the hook program's absolute path on the host",
            )
            return
        for index, variable in enumerate(hook.items_of("env")):
            if isinstance(variable, str) and variable.find("=") <= 0:
                self.add(
                    BAD_ENV,
                    f"{hook.at('env')}/{index}",
                    f"env entry {go_quote(variable)} of the {name} hook of {device} is not NAME=VALUE",
                    f"{wrap}invalid hook {go_quote(name)}: invalid environment variable {go_quote(variable)}",
                    "write it as NAME=VALUE",
                )
                return

    def devices(self, spec: GoStruct) -> None:
        seen: dict[str, str] = {}
        devices = spec.items_of("devices")
        for index, device in enumerate(devices):
            if not isinstance(device, GoStruct):
                device = GoStruct(spec_types(self.library).device, f"{spec.at('devices')}/{index}")
            name = device.text("name")
            wrap = f"{_INVALID}failed add device {go_quote(name)}: "
            before = len(self.problems)
            error = device_name_error(name)
            if error is not None:
                self.add(
                    BAD_DEVICE_NAME,
                    device.at("name") if "name" in device.pointers else device.pointer,
                    f"device name {go_quote(name)}: {error}",
                    wrap + error,
                    "device names hold letters, digits, '_', '-', '.' and ':', and start and end with a letter "
                    "or digit (nvidia-ctk uses 0, 1, ..., all, and GPU UUIDs)",
                )
            edits = device.get("containerEdits")
            if not _has_edits(edits, self.library):
                self.add(
                    EMPTY_EDITS,
                    device.at("containerEdits") if "containerEdits" in device.pointers else device.pointer,
                    f"device {go_quote(name)} has no container edits: nothing to inject",
                    wrap + "invalid device, empty device edits",
                    "give the device its deviceNodes (and mounts, hooks, env), or remove it",
                )
            self.edits(edits, f"{wrap}invalid device {go_quote(name)}: ", name)
            if len(self.problems) == before and name in seen:
                self.add(
                    DUPLICATE_DEVICE,
                    device.at("name"),
                    f"device name {go_quote(name)} is defined twice in this spec (first at {seen[name]})",
                    f"{_INVALID}invalid spec, multiple device {go_quote(name)}",
                    "give each device its own name, or merge the two definitions",
                )
            seen.setdefault(name, device.at("name"))
        if not devices and self.library.requires_devices:
            self.add(
                NO_DEVICES,
                spec.at("devices") if "devices" in spec.pointers else "",
                "the spec defines no devices",
                f"{_INVALID}invalid spec, no devices",
                "add at least one device, or delete the spec",
            )


def _has_edits(edits: Any, library: Library) -> bool:
    """The opposite of ContainerEdits.isEmpty, over the fields the release has."""
    if not isinstance(edits, GoStruct):
        return False
    lists = ["env", "deviceNodes", "hooks", "mounts"]
    if library.intel_rdt:
        lists.append("additionalGids")
    if library.net_devices:
        lists.append("netDevices")
    return any(edits.items_of(name) for name in lists) or (library.intel_rdt and edits.get("intelRdt") is not None)


def analyse(value: Any, library: Library = NEWEST) -> Analysis:
    """Every reason the release of the CDI library refuses the parsed document value, in the order it meets them."""
    spec_type = spec_types(library).spec
    try:
        converted = _convert(value, spec_type, "")
    except _ConversionError as exc:
        text = str(exc)
        if library.capital_map_key and text.startswith("unsupported map key"):
            text = "U" + text[1:]
        problem = LibraryProblem(
            WRONG_TYPE,
            "",
            f"{text}: the library cannot convert the YAML to JSON",
            f"failed to unmarshal CDI Spec: error converting YAML to JSON: {text}",
        )
        return Analysis(None, [problem])
    if converted.value is None:
        problem = LibraryProblem(WRONG_TYPE, "", "the document is null: no spec in it", "no Spec data")
        return Analysis(None, [problem])
    decoder = _Decoder(library)
    spec = decoder.decode(converted, spec_type, None)
    if not isinstance(spec, GoStruct):
        return Analysis(None, decoder.problems)
    validator = _Validator(library)
    if validator.version(spec) and library.minimum_check:
        validator.requires_panics(spec)
        validator.minimum(spec)
    validator.qualifier(spec)
    validator.edits(spec.get("containerEdits"), _INVALID, None)
    validator.devices(spec)
    return Analysis(spec, decoder.problems + validator.problems)
