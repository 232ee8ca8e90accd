"""CDI specs: how the CDI Go library reads and validates them, and spec directories as its cache reads them.

The reference is tags.cncf.io/container-device-interface at release 1.0.1 (the release current engines vendor,
and the one Debian packages; tests/cdi builds it and holds this module to its verdict). Reading a spec there is:

1. sigs.k8s.io/yaml.UnmarshalStrict: the text (JSON or YAML, whatever the file name) is parsed as YAML 1.1 by
   goyaml.v2 (duplicate keys refused), converted to JSON (numbers and booleans become strings where the target
   field is a string; map keys are sorted), then decoded by encoding/json with unknown fields refused and keys
   matched to fields without regard to case.
2. Spec.validate: the spec version (known, and at least what the fields used need), vendor and class, the
   spec's own container edits, then each device (name, non-empty edits, edits) and duplicate names; at least one
   device.

Both steps are emulated here on the parsed value; `analyse` lists every reason the library refuses the spec, in
the order the library meets them, each with the library's own error text. Text-level reasons (what goyaml.v2
refuses in a JSON text that Python's JSON parser accepts) need the document's text: `refine_document`.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import struct
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.formats.leanyaml import _BASE_DIGITS as _BASE_DIGITS
from nvidia_oci_hook.formats.leanyaml import _GO_RESOLVE as _GO_RESOLVE
from nvidia_oci_hook.formats.leanyaml import INT64_MAX as INT64_MAX
from nvidia_oci_hook.formats.leanyaml import INT64_MIN as INT64_MIN
from nvidia_oci_hook.formats.leanyaml import UINT64_MAX as UINT64_MAX
from nvidia_oci_hook.formats.leanyaml import _go_parse_int as _go_parse_int
from nvidia_oci_hook.formats.leanyaml import go_resolve_plain as go_resolve_plain
from nvidia_oci_hook.formats.parsing import LoadProblem, Parsed
from nvidia_oci_hook.io import ReadError
from nvidia_oci_hook.kinds.cdinames import cache_winners
from nvidia_oci_hook.kinds.collection import Collection, DirectoryKind, Loader, Skipped, register_directory_kind
from nvidia_oci_hook.kinds.document import Document, Kind, register_kind

CDI = "cdi"
CDI_DIRS = "cdi-dirs"

# The library release modelled.
LIBRARY_RELEASE = "1.0.1"

# The engines' default spec directories, lowest priority first (pkg/cdi/spec-dirs.go DefaultSpecDirs).
DEFAULT_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")

# Spec versions each library release knows (specs-go/version.go): release X.Y knows every version up to X.Y.0.
SPEC_VERSIONS = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0")
NEWER_SPEC_VERSIONS = ("1.1.0",)  # known to library v1.1.0, refused as unknown by v1.0.x
EARLIEST_VERSION = "0.3.0"

# Rule codes the model reports (the rules in rules/cdi.py document them).
TEXT = "CDI001"
UNKNOWN_FIELD = "CDI002"
WRONG_TYPE = "CDI003"
UNKNOWN_VERSION = "CDI004"
VERSION_TOO_OLD = "CDI005"
BAD_KIND = "CDI006"
BAD_DEVICE_NAME = "CDI007"
DUPLICATE_DEVICE = "CDI008"
NO_DEVICES = "CDI009"
EMPTY_EDITS = "CDI010"
BAD_ENV = "CDI011"
BAD_DEVICE_NODE = "CDI012"
BAD_HOOK = "CDI013"
BAD_MOUNT = "CDI014"
BAD_INTEL_RDT = "CDI015"
NULL_ENTRY = "CDI016"
JSON_READ_AS_YAML = "CDI017"

HOOK_NAMES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")
DEVICE_NODE_TYPES = ("", "b", "c", "u", "p")


# ---------------------------------------------------------------------------------------------------------------
# Go's formatting, where the library's messages depend on it


def _go_printable(char: str) -> bool:
    code = ord(char)
    if code < 0x80:
        return 0x20 <= code < 0x7F
    return unicodedata.category(char)[0] in "LMNPS"


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """strconv.Quote, as %q prints a string."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\ufffd")  # a Go string holds no surrogates: the decoder made it U+FFFD
        elif _go_printable(char):
            out.append(char)
        elif char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _shortest_digits(value: float, round_trips: Callable[[float], bool]) -> tuple[str, int]:
    """(digits, decimal point position) of the shortest decimal for which round_trips(candidate) holds."""
    for precision in range(1, 18):
        text = f"{value:.{precision - 1}e}"
        if round_trips(float(text)):
            break
    mantissa, _, exponent = text.partition("e")
    digits = mantissa.replace(".", "").replace("-", "").rstrip("0") or "0"
    return digits, int(exponent) + 1


def _float32(value: float) -> float:
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def go_format_float32(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32): how sigs.k8s.io/yaml turns a YAML float into a string."""
    if math.isnan(value):
        return "NaN"
    single = _float32(value)
    if math.isinf(single):
        return "+Inf" if single > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, single) < 0 else ""
    if single == 0:
        return sign + "0"
    digits, point = _shortest_digits(abs(single), lambda candidate: _float32(candidate) == abs(single))
    exponent = point - 1
    if exponent < -4 or exponent >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    return sign + _fixed(digits, point)


def _fixed(digits: str, point: int) -> str:
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return digits[:point] + "." + digits[point:]


def go_json_float(value: float) -> str:
    """How encoding/json writes a float64 (the number a YAML float becomes before it is decoded)."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    digits, point = _shortest_digits(abs(value), lambda candidate: candidate == abs(value))
    if 1e-6 <= abs(value) < 1e21:
        return sign + _fixed(digits, point)
    exponent = point - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}".replace("e-0", "e-").replace(
        "e+0", "e+"
    )


# ---------------------------------------------------------------------------------------------------------------
# Names (pkg/parser): vendor and class are "vendor/class" in the spec's kind, device names its devices' names


def _is_letter(code: int) -> bool:
    return 0x41 <= code <= 0x5A or 0x61 <= code <= 0x7A


def _is_alnum(code: int) -> bool:
    return _is_letter(code) or 0x30 <= code <= 0x39


def _middle(name: str) -> str:
    """name[1:len(name)-1] as Go slices it: bytes, invalid sequences read as U+FFFD."""
    raw = name.encode("utf-8", "surrogatepass")
    return raw[1:-1].decode("utf-8", "replace")


class NamePanic(Exception):
    """The library would panic on this name (it slices name[1:len-1] of a one-character name)."""


def vendor_or_class_error(name: str) -> Optional[str]:
    """pkg/parser validateVendorOrClassName: the library's error text, or None; raises NamePanic."""
    if not name:
        return "empty name"
    raw = name.encode("utf-8", "surrogatepass")
    if not _is_letter(raw[0]):
        return f"{go_quote(name)}, should start with letter"
    if len(raw) == 1:
        raise NamePanic("runtime error: slice bounds out of range [1:0]")
    for char in _middle(name):
        if not (_is_alnum(ord(char)) or char in "_-."):
            return f"invalid character '{char}' in name {go_quote(name)}"
    if not _is_alnum(raw[-1]):
        return f"{go_quote(name)}, should end with a letter or digit"
    return None


def device_name_error(name: str) -> Optional[str]:
    """pkg/parser ValidateDeviceName: the library's error text, or None."""
    if not name:
        return "invalid (empty) device name"
    raw = name.encode("utf-8", "surrogatepass")
    if not _is_alnum(raw[0]):
        # The library's own text says "class" here.
        return f"invalid class {go_quote(name)}, should start with a letter or digit"
    if len(raw) == 1:
        return None
    for char in _middle(name):
        if not (_is_alnum(ord(char)) or char in "_-.:"):
            return f"invalid character '{char}' in device name {go_quote(name)}"
    if not _is_alnum(raw[-1]):
        return f"invalid name {go_quote(name)}, should end with a letter or digit"
    return None


def parse_qualifier(kind: str) -> tuple[str, str]:
    """pkg/parser ParseQualifier: (vendor, class); vendor is empty when kind is not "vendor/class"."""
    vendor, slash, cls = kind.partition("/")
    if not slash or not vendor or not cls:
        return "", kind
    return vendor, cls


# ---------------------------------------------------------------------------------------------------------------
# Reading as goyaml.v2 does
# (its typing of plain scalars, go_resolve_plain, lives in leanyaml, cheap for the runtime-facing code to import)


def _go_yaml_loader(fast: bool) -> Any:
    import yaml

    # libyaml (when PyYAML has it) is faster, and like goyaml.v2 (a port of it) takes tabs as separation in flow
    # context; PyYAML's own scanner is needed where they part: libyaml skips a U+FEFF anywhere, goyaml.v2 and
    # PyYAML only at the start of the stream.
    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader) if fast else yaml.SafeLoader

    class GoYAMLLoader(base):  # type: ignore[misc]
        """PyYAML with goyaml.v2's scalar resolution: y/n/on/off booleans, Go's number syntax, no timestamps."""

    plain_tag = "tag:nvidia-oci-hook:go-plain"

    def resolve(self: Any, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0]:
            return "tag:yaml.org,2002:merge" if value == "<<" else plain_tag
        return base.resolve(self, kind, value, implicit)

    def construct_plain(loader: Any, node: Any) -> Any:
        return go_resolve_plain(loader.construct_scalar(node))

    GoYAMLLoader.resolve = resolve
    GoYAMLLoader.add_constructor(plain_tag, construct_plain)
    return GoYAMLLoader


_LOADERS: dict[bool, Any] = {}


def go_yaml_load(text: str) -> Any:
    """The first YAML document of text, as goyaml.v2 types its scalars; raises yaml.YAMLError."""
    # goyaml.v2 also skips a U+FEFF at the start of a line while its buffer starts with one (is_bom checks the
    # buffer's start): for a text that starts with several, libyaml's reading is the closer one.
    fast = "\ufeff" not in text.lstrip("\ufeff")
    if fast not in _LOADERS:
        _LOADERS[fast] = _go_yaml_loader(fast)
    loader = _LOADERS[fast](text)
    try:
        return loader.get_data() if loader.check_data() else None
    finally:
        loader.dispose()


# Characters goyaml.v2's reader refuses anywhere in the stream ("control characters are not allowed").
_FORBIDDEN_CHARACTER = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")


def _text_problems(text: str, json_text: bool) -> list[LoadProblem]:
    """What goyaml.v2 refuses in a text that Python's parser accepted."""
    problems = []
    body = text[1:] if text.startswith("\ufeff") else text
    shift = len(text) - len(body)
    bad = _FORBIDDEN_CHARACTER.search(body)
    if bad is not None:
        problems.append(
            LoadProblem(
                TEXT,
                f"character U+{ord(bad.group()):04X} is not allowed in a YAML stream, and the CDI library reads "
                "every spec as YAML: it refuses the spec with `yaml: control characters are not allowed`",
                bad.start() + shift,
            )
        )
    if not json_text:
        return problems
    for string in _JSON_STRING.finditer(text):
        if "\\" not in string.group():
            continue
        for escape in _JSON_ESCAPE.finditer(string.group()):
            sequence = escape.group(1)
            offset = string.start() + escape.start()
            if sequence == "/":
                problems.append(
                    LoadProblem(
                        TEXT,
                        "the JSON escape \\/ is not a YAML escape, and the CDI library reads every spec as YAML: "
                        "it refuses the spec with `found unknown escape character`",
                        offset,
                    )
                )
            elif sequence[0] == "u" and 0xD800 <= int(sequence[1:], 16) <= 0xDFFF:
                problems.append(
                    LoadProblem(
                        TEXT,
                        f"the escape \\{sequence} is half of a UTF-16 surrogate pair, which YAML does not accept "
                        "(the CDI library reads every spec as YAML): it refuses the spec with "
                        "`found invalid Unicode character escape code`",
                        offset,
                    )
                )
                break  # the library stops at the first; one per string is enough
    return problems


def _detab(text: str) -> str:
    """text with tabs outside quoted scalars made spaces (same offsets): PyYAML's pure scanner refuses tabs that
    libyaml and goyaml.v2 take as separation in flow context."""
    out = []
    quote = ""
    escaped = False
    for char in text:
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                quote = ""
        elif char in ('"', "'"):
            quote = char
        elif char == "\t":
            char = " "
        out.append(char)
    return "".join(out)


def _reread(text: str) -> Optional[tuple[Any, Parsed]]:
    """goyaml.v2's value of text and a parse of it for positions, or None when goyaml.v2 refuses the text."""
    import yaml

    from nvidia_oci_hook.formats.positions import PositionMap
    from nvidia_oci_hook.formats.yamltext import parse_yaml

    try:
        value = go_yaml_load(text)
    except (yaml.YAMLError, RecursionError, ValueError):
        return None
    for candidate in (text, _detab(text)):
        parsed = parse_yaml(candidate.encode("utf-8", "surrogatepass"))
        if parsed.ok:
            return value, Parsed(text, value, True, parsed.problems, parsed.locator)
    return value, Parsed(text, value, True, [], PositionMap(text))


def _accept(document: Document, value: Any, parsed: Parsed, problems: list[LoadProblem]) -> None:
    """Take goyaml.v2's reading of a document PyYAML or the JSON parser refused, then refine it again."""
    document.value = value
    document.parsed = True
    document.locator = parsed.locator
    document.load_problems = problems + [problem for problem in parsed.problems if problem.code == "DOC005"]
    refine_document(document)


def refine_document(document: Document) -> None:
    """Make a CDI document's load problems say what the CDI library does with its text.

    The library parses every spec, JSON or YAML, with goyaml.v2: duplicate keys are fatal, `\\/` and surrogate
    escapes are refused, and a JSON syntax error that is still valid YAML (a byte-order mark, a comment, a
    trailing comma) is accepted, as is a YAML stream of several documents (the first is read). YAML values are
    re-read with goyaml.v2's scalar resolution.
    """
    import yaml

    problems = []
    for problem in document.load_problems:
        if problem.code == "DOC005":
            key = problem.pointer.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~")
            problems.append(
                LoadProblem(
                    TEXT,
                    f"key {go_quote(key)} appears twice in one mapping; the CDI library decodes strictly and "
                    f'refuses the spec with `key "{key}" already set in map`',
                    problem.offset,
                    problem.pointer,
                    problem.line,
                    problem.column,
                )
            )
        else:
            problems.append(problem)
    codes = {problem.code for problem in problems}
    syntax = next((problem for problem in problems if problem.code == "DOC001"), None)
    if not document.parsed and syntax is not None and codes == {"DOC001"} and document.text.strip():
        several = document.format == "yaml" and "expected a single document" in syntax.message
        text = document.text
        if several and syntax.line is not None:
            text = "".join(text.splitlines(keepends=True)[: syntax.line - 1])
        reread = _reread(text)
        if reread is not None:
            if document.format == "json":
                reason = syntax.message.removeprefix("invalid JSON: ")
                why = (
                    f"not valid JSON ({reason}), but the CDI library reads every spec as YAML, which accepts it; "
                    "tools that read the .json file as JSON will not"
                )
            elif several:
                why = "the file holds more than one YAML document; the CDI library reads only the first"
            else:
                why = ""  # valid YAML that only PyYAML's stricter scanner refused
            note = [LoadProblem(JSON_READ_AS_YAML, why, syntax.offset, "", syntax.line, syntax.column)] if why else []
            _accept(document, reread[0], reread[1], note)
            return
    elif document.format == "yaml" and document.parsed:
        with contextlib.suppress(yaml.YAMLError, RecursionError, ValueError):  # PyYAML has read it already
            document.value = go_yaml_load(document.text)
    if document.parsed:
        # Idempotent: a document refined twice (by its kind and by a directory reader) is reported once.
        problems.extend(p for p in _text_problems(document.text, document.format == "json") if p not in problems)
    document.load_problems = problems


# ---------------------------------------------------------------------------------------------------------------
# Decoding as sigs.k8s.io/yaml and encoding/json do


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

    def __init__(self) -> None:
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
        if key in ADDED_IN_1_1.get(name, ()):
            self.error(
                UNKNOWN_FIELD,
                where,
                f"{key} is a field of CDI spec 1.1.0 (library v1.1.0); library v1.0.x, which engines vendor "
                f"today, does not know it",
                library,
                "drop the field, or run only engines built with container-device-interface v1.1.0 or later",
            )
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


# ---------------------------------------------------------------------------------------------------------------
# Versions (specs-go/version.go)


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
    def __init__(self) -> None:
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
        if known_version(version) is None:
            newer = version.lstrip("v") in NEWER_SPEC_VERSIONS
            self.add(
                UNKNOWN_VERSION,
                spec.at("cdiVersion"),
                f"cdiVersion {go_quote(version)} is "
                + ("a version only library v1.1.0 knows" if newer else "not a CDI spec version")
                + f"; library v{LIBRARY_RELEASE} accepts {EARLIEST_VERSION} to {SPEC_VERSIONS[-1]}",
                f"{_INVALID}invalid version {go_quote(version)}",
                "set cdiVersion to the version the fields need: " + minimum_version(spec),
            )
            return False
        return True

    def minimum(self, spec: GoStruct) -> None:
        version = known_version(spec.text("cdiVersion"))
        assert version is not None
        features = required_features(spec)
        needed = minimum_version(spec)
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
                error = vendor_or_class_error(part)
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
                message = f"invalid {what}. {error}"
                self.add(
                    BAD_KIND,
                    spec.at("kind"),
                    f"kind {go_quote(kind)}: {message}"
                    + ("" if "/" in kind else " (kind must be vendor/class, e.g. nvidia.com/gpu)"),
                    f"{_INVALID}{message}",
                    "write kind as vendor/class: letters, digits, '_', '-', '.', starting with a letter and "
                    "ending with a letter or digit, e.g. nvidia.com/gpu",
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
            if len(clos.encode("utf-8", "surrogatepass")) >= 4096 or clos in (".", "..") or set(clos) & {"/", "\n"}:
                self.add(
                    BAD_INTEL_RDT,
                    rdt.at("closID"),
                    f"intelRdt.closID {go_quote(clos)} of {device} is not a valid file name (no '/', newline, "
                    "'.' or '..', under 4096 bytes)",
                    f"{wrap}invalid ClosID",
                    "use a plain name for the resctrl group, e.g. gpu-workloads",
                )

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
                f"{wrap}device {go_quote(path)}: invalid permissions {go_quote(permissions)}",
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
                device = GoStruct(DEVICE, f"{spec.at('devices')}/{index}")
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
            if not _has_edits(edits):
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
        if not devices:
            self.add(
                NO_DEVICES,
                spec.at("devices") if "devices" in spec.pointers else "",
                "the spec defines no devices",
                f"{_INVALID}invalid spec, no devices",
                "add at least one device, or delete the spec",
            )


def _has_edits(edits: Any) -> bool:
    """The opposite of ContainerEdits.isEmpty."""
    if not isinstance(edits, GoStruct):
        return False
    lists = ("env", "deviceNodes", "hooks", "mounts", "additionalGids")
    return any(edits.items_of(name) for name in lists) or edits.get("intelRdt") is not None


def analyse(value: Any) -> Analysis:
    """Every reason the CDI library refuses the parsed document value, in the order it meets them."""
    try:
        converted = _convert(value, SPEC, "")
    except _ConversionError as exc:
        problem = LibraryProblem(
            WRONG_TYPE,
            "",
            f"{exc}: the library cannot convert the YAML to JSON",
            f"failed to unmarshal CDI Spec: error converting YAML to JSON: {exc}",
        )
        return Analysis(None, [problem])
    if converted.value is None:
        problem = LibraryProblem(WRONG_TYPE, "", "the document is null: no spec in it", "no Spec data")
        return Analysis(None, [problem])
    decoder = _Decoder()
    spec = decoder.decode(converted, SPEC, None)
    if not isinstance(spec, GoStruct):
        return Analysis(None, decoder.problems)
    validator = _Validator()
    if validator.version(spec):
        validator.requires_panics(spec)
        validator.minimum(spec)
    validator.qualifier(spec)
    validator.edits(spec.get("containerEdits"), _INVALID, None)
    validator.devices(spec)
    return Analysis(spec, decoder.problems + validator.problems)


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


# ---------------------------------------------------------------------------------------------------------------
# The kind


def _is_cdi(path: str, value: Any) -> bool:
    return isinstance(value, dict) and any(isinstance(key, str) and _fold(key) == "cdiversion" for key in value)


def _refined(document: Document) -> Document:
    refine_document(document)
    return document


register_kind(Kind(CDI, "CDI spec", ("json", "yaml"), _is_cdi, order=20, refine=_refined))


# ---------------------------------------------------------------------------------------------------------------
# Spec directories (pkg/cdi/spec-dirs.go, cache.go)

SPEC_EXTENSIONS = (".json", ".yaml")
# Names an operator may take for a spec the library reads; the library skips them.
_LOOKALIKE = re.compile(r"\.(ya?ml|json)$", re.IGNORECASE)
_SNIFF_BYTES = 1 << 16


def _mentions_cdi_version(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError:
        return False
    return b"cdiversion" in head.lower()


def claims_directory(path: str) -> bool:
    """Whether path is a directory holding files that look like CDI specs (a cdiVersion key)."""
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return any(
        _LOOKALIKE.search(name) and _mentions_cdi_version(os.path.join(path, name)) for name in sorted(names)[:256]
    )


@dataclass(frozen=True)
class SpecDirectory:
    path: str
    priority: int
    # Why the library reads nothing in it, or None.
    unread: Optional[str] = None


def spec_files(directory: str) -> tuple[list[str], list[Skipped], Optional[str]]:
    """The files the library's scan reads in directory (lexical order), near-misses it skips, and why it reads
    nothing at all (None if it reads the directory).

    filepath.Walk does not follow a symbolic link given as the root, skips subdirectories, and takes only
    names ending in .json or .yaml.
    """
    try:
        if os.path.islink(directory) and not directory.endswith("/"):
            return [], [], "is a symbolic link, which the library's directory walk does not follow"
        if not os.path.isdir(directory):
            return [], [], None if not os.path.exists(directory) else "is not a directory"
        names = sorted(os.listdir(directory))
    except OSError as exc:
        return [], [], f"cannot be read ({exc.strerror})"
    files: list[str] = []
    skipped: list[Skipped] = []
    for name in names:
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            inside = _lookalikes_below(path)
            if inside:
                listed = ", ".join(inside)
                skipped.append(
                    Skipped(
                        path,
                        f"is a subdirectory holding CDI specs ({listed}), and the library does not descend into "
                        "subdirectories",
                    )
                )
            continue
        extension = name[name.rfind(".") :] if "." in name else ""  # filepath.Ext: ".json" is all extension
        if extension in SPEC_EXTENSIONS:
            files.append(path)
        elif _LOOKALIKE.search(name) and _mentions_cdi_version(path):
            why = f"ends in {extension}, and the library reads only names ending exactly in .json or .yaml"
            skipped.append(Skipped(path, why))
    return files, skipped, None


def _lookalikes_below(directory: str) -> list[str]:
    found = []
    for root, _dirs, names in os.walk(directory):
        for name in sorted(names):
            if _LOOKALIKE.search(name) and _mentions_cdi_version(os.path.join(root, name)):
                found.append(os.path.relpath(os.path.join(root, name), directory))
                if len(found) >= 3:
                    return found
    return found


@dataclass
class SpecCollection(Collection):
    """A cdi-dirs collection that also knows each document's priority and the directories it reads nothing from."""

    priorities: dict[str, int] = field(default_factory=dict)
    unread: dict[str, str] = field(default_factory=dict)

    def priority(self, path: str) -> int:
        return self.priorities.get(path, 0)


def read_spec_dirs(directories: Sequence[str], loader: Loader) -> SpecCollection:
    """Read spec directories as the CDI cache does: lowest priority first (for the engines, /etc/cdi then
    /var/run/cdi); a missing directory is simply empty."""
    collection = SpecCollection(CDI_DIRS, list(directories))
    for priority, directory in enumerate(directories):
        files, skipped, unread = spec_files(directory)
        if unread is not None:
            collection.unread[directory] = unread
            collection.skipped.append(Skipped(directory, unread))
        collection.skipped.extend(skipped)
        for path in files:
            try:
                document = loader(path, CDI)
            except ReadError as exc:
                # The library records "failed to load CDI Spec open ...: ..." for it and goes on.
                reason = str(exc).split(": ", 1)[-1]
                collection.skipped.append(
                    Skipped(path, f"cannot be read ({reason}), so the library loads nothing from it")
                )
                continue
            refine_document(document)
            collection.documents.append(document)
            collection.priorities[document.path] = priority
    return collection


register_directory_kind(DirectoryKind(CDI_DIRS, CDI, "CDI spec directories", claims_directory, read_spec_dirs, 20))


# ---------------------------------------------------------------------------------------------------------------
# What the cache makes of a collection


@dataclass(frozen=True)
class Definition:
    """A device a loaded spec defines: qualified name, file, priority and pointer of its name."""

    name: str
    path: str
    priority: int
    pointer: str


def definitions(collection: SpecCollection) -> list[Definition]:
    """Every device of every spec the library loads, in the order its scan meets them."""
    result = []
    for document in collection.documents:
        if not document.parsed or any(
            problem.code in ("DOC001", "DOC002", "DOC003", "DOC004", TEXT) for problem in document.load_problems
        ):
            continue
        analysis = analyse(document.value)
        if not analysis.loads or analysis.spec is None:
            continue
        vendor, cls = parse_qualifier(analysis.spec.text("kind"))
        for device in analysis.spec.items_of("devices"):
            if isinstance(device, GoStruct):
                qualified = f"{vendor}/{cls}={device.text('name')}"
                result.append(
                    Definition(qualified, document.path, collection.priority(document.path), device.at("name"))
                )
    return result


def cache_devices(collection: SpecCollection) -> dict[str, Definition]:
    """The devices the CDI cache resolves (Cache.refresh)."""
    return cache_winners((d.name, d.priority, d) for d in definitions(collection))
