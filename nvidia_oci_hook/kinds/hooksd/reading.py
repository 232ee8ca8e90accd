"""hooks.d files (podman, cri-o): read one the way containers/common's loader does, and read hooks directories.

The loader (containers/common `pkg/hooks`, vendored by podman and cri-o) reads a file in two passes with Go's
encoding/json: first `{"version": string}` alone, to choose a reader ("1.0.0", or "0.1.0" for "0.1.0" and for a
missing, empty or null version), then the whole file into that reader's Go struct. Go's decoder matches keys
case-insensitively, ignores unknown keys, treats null as "leave unset", and stops the file at the first value of
the wrong type. The 0.1.0 reader then converts the legacy shape into the 1.0.0 one. Validation follows:
`hook.path` must be set and exist (a missing program makes the directory reader skip the file without a word),
`when.annotations` keys and values and `when.commands` must compile as Go regular expressions, `stages` must be
set and name known stages.

`read_hook` replays all of that on a parsed JSON value and returns a `HookFile`: every reason the loader would
refuse the file (each with the engine's own error text), the hook as the engine would inject it, and the keys it
silently ignores. It does not look at the host: whether the program exists is the rules' business.

`read_hooks_dirs` reads directories the way `hooks.New` does: lowest priority first, only names ending in
`.json`, each directory in byte order of names, the same file name in a later directory replacing the earlier
one only when the later file loads.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from nvidia_oci_hook import io
from nvidia_oci_hook.formats import jsontext, re2
from nvidia_oci_hook.kinds.collection import Collection, DirectoryKind, Loader, register_directory_kind
from nvidia_oci_hook.kinds.document import Document, Kind, register_kind

HOOKSD = "hooksd"
HOOKSD_DIRS = "hooksd-dirs"

# hooks.DefaultDir and hooks.OverrideDir. cri-o and podman read DEFAULT_DIR alone unless configured otherwise;
# configured with both, OVERRIDE_DIR comes later and wins.
DEFAULT_DIR = "/usr/share/containers/oci/hooks.d"
OVERRIDE_DIR = "/etc/containers/oci/hooks.d"

# The stages 1.0.0's Validate knows, in its own words, and the extension stages each engine adds.
OCI_STAGES = ("createContainer", "createRuntime", "prestart", "poststart", "poststop", "startContainer")
PODMAN_EXTENSION_STAGES = ("precreate", "poststop")
CRIO_EXTENSION_STAGES: tuple[str, ...] = ()

V1 = "1.0.0"
V0 = "0.1.0"

# The codes of the loader-level rules (rules/hooksd.py documents them).
VERSION = "HKD001"
WRONG_TYPE = "HKD002"
MISSING = "HKD003"
BOTH_SET = "HKD004"
BAD_REGEX = "HKD005"
UNKNOWN_STAGE = "HKD006"
BAD_PATH = "HKD007"


# ---------------------------------------------------------------------------------------------------------------
# Go's encoding/json, for the few types the loader decodes into


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


# ---------------------------------------------------------------------------------------------------------------
# One file


@dataclass(frozen=True)
class LoadError:
    """One reason the loader refuses the file."""

    code: str  # the HKD0xx rule
    pointer: str
    message: str  # what is wrong, for people
    engine_text: str  # the loader's own error text (after `parsing hook "FILE": ` where parsing is true)
    hint: Optional[str] = None
    # True for the JSON decoding errors, which podman and cri-o print after `parsing hook "FILE": `.
    parsing: bool = False
    # True for checks the loader makes only once the hook program has been found on the host.
    after_program_check: bool = False


@dataclass(frozen=True)
class Regex:
    pointer: str
    pattern: str
    what: str  # "annotation key", "annotation value", "command"
    error: Optional[re2.RegexError]


@dataclass(frozen=True)
class UnknownKey:
    pointer: str
    key: str
    where: str  # "the top level", "hook", "when"
    suggestion: Optional[str]


@dataclass
class When:
    pointer: str  # where "when" is ("" when absent, and for 0.1.0 files, whose conditions sit at the top level)
    any_of: bool  # 0.1.0: any condition suffices; 1.0.0: every condition set must match
    always: Optional[bool] = None
    always_pointer: str = ""
    annotations: Optional[dict[str, str]] = None
    annotations_pointer: str = ""
    commands: Optional[list[str]] = None
    commands_pointer: str = ""
    has_bind_mounts: Optional[bool] = None
    has_bind_mounts_pointer: str = ""


@dataclass
class HookFile:
    """What the loader makes of one parsed hooks.d file."""

    version: Optional[str]  # "1.0.0", "0.1.0", or None when the loader could not choose a reader
    version_pointer: str = ""
    errors: list[LoadError] = field(default_factory=list)
    unknown_keys: list[UnknownKey] = field(default_factory=list)
    regexes: list[Regex] = field(default_factory=list)
    path: Optional[str] = None
    path_pointer: str = ""
    args: Optional[list[str]] = None
    args_pointer: str = ""
    env: Optional[list[str]] = None
    env_pointer: str = ""
    timeout: Optional[int] = None
    timeout_pointer: str = ""
    stages: Optional[list[str]] = None
    stages_pointer: str = ""
    stage_pointers: list[str] = field(default_factory=list)
    when: When = field(default_factory=lambda: When("", False))

    @property
    def decoded(self) -> bool:
        """Whether the JSON decoding passed, so that the fields above are what the engine would use."""
        return self.version is not None and not any(error.parsing for error in self.errors)

    def stage_pointer(self, index: int) -> str:
        return self.stage_pointers[index] if index < len(self.stage_pointers) else self.stages_pointer


def display(path: tuple[Any, ...]) -> str:
    """A decoded field's path as people write it: hook.args[0], when.annotations["nvidia.com/gpu"]."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif text.endswith("annotations"):
            text += f"[{go_quote(part)}]"
        else:
            text += f".{part}" if text else part
    return text or "the document"


def _type_error(error: TypeError_, prefix: str) -> LoadError:
    wanted = {
        "string": "a string",
        "bool": "true or false",
        "int": "a whole number of seconds",
        "[]string": "an array of strings",
        "map[string]string": "an object whose values are strings",
    }.get(error.go_type.name, "an object")
    if error.got.startswith("number "):
        got = f"the number {error.got[7:]}"
        wanted += " (64-bit)" if error.go_type.name == "int" else ""
    else:
        got = ("an " if error.got[0] in "aeiou" else "a ") + error.got
    message = f"{display(error.path)} is {got}; the loader wants {wanted}"
    return LoadError(WRONG_TYPE, error.pointer, message, f"{prefix}{error.text}", parsing=True)


# Keys a hooks file of one version often carries by mistake, from the other version or by near-miss.
_V1_HINTS = {
    "": {
        "stage": "stages",
        "path": "hook.path",
        "args": "hook.args",
        "arguments": "hook.args (with the program's name first)",
        "env": "hook.env",
        "timeout": "hook.timeout",
        "cmds": "when.commands",
        "cmd": "when.commands",
        "commands": "when.commands",
        "annotations": "when.annotations",
        "annotation": "when.annotations",
        "always": "when.always",
        "hasbindmounts": "when.hasBindMounts",
    },
    "hook": {"arguments": "args", "argv": "args", "environment": "env", "stages": "stages (at the top level)"},
    "when": {
        "command": "commands",
        "cmds": "commands",
        "cmd": "commands",
        "annotation": "annotations",
        "hasbindmount": "hasBindMounts",
    },
}
_V0_HINTS = {
    "path": "hook",
    "args": "arguments (without the program's name)",
    "argv": "arguments",
    "command": "cmds",
    "commands": "cmds",
    "when": 'hook conditions (cmds, annotations, hasbindmounts) at the top level, or "version": "1.0.0"',
}


def _unknown_keys(decoded: Decoded, version: str) -> Iterator[UnknownKey]:
    for pointer, key, struct in decoded.unknown_keys:
        if version == V0 and struct is HOOK_V0 and go_key_matches("version", key):
            continue  # read by the version check
        section = {"specs.Hook": "hook", "hook.When": "when"}.get(struct.name, "")
        hints = _V0_HINTS if version == V0 else _V1_HINTS.get(section, {})
        lowered = key.lower()
        suggestion = hints.get(lowered)
        if suggestion is None:
            close = difflib.get_close_matches(lowered, [name.lower() for name, _ in struct.fields], n=1, cutoff=0.75)
            if close:
                suggestion = next(name for name, _ in struct.fields if name.lower() == close[0])
        yield UnknownKey(pointer, key, section or "the top level", suggestion)


def read_hook(value: Any) -> HookFile:
    """Replay the loader on a parsed hooks.d file."""
    checked = go_decode(value, VERSION_STRUCT)
    if checked.type_errors:
        error = checked.type_errors[0]
        got = ("an " if error.got[0] in "aeiou" else "a ") + error.got.split()[0]
        if error.pointer:
            message = f"version is {got}; it must be the string 1.0.0 (or 0.1.0)"
        else:
            message = f"the file holds {got}; a hooks.d file is a JSON object"
        return HookFile(
            None, errors=[LoadError(WRONG_TYPE, error.pointer, message, f"version check: {error.text}", parsing=True)]
        )
    version = checked.value["version"]
    version_pointer = checked.at("version")
    if version not in (V1, V0, ""):
        engine = f"unrecognized hook version: {go_quote(version)}"
        hint = 'use "version": "1.0.0" (the current format)'
        shown = go_quote(version)
        return HookFile(
            None,
            version_pointer,
            errors=[
                LoadError(VERSION, version_pointer, f"version {shown} is not one the loader reads", engine, hint, True)
            ],
        )
    if version == V1:
        return _read_v1(value, version_pointer)
    return _read_v0(value, version, version_pointer)


def _read_v1(value: Any, version_pointer: str) -> HookFile:
    decoded = go_decode(value, HOOK_V1)
    hook = HookFile(V1, version_pointer)
    hook.errors.extend(_type_error(error, "1.0.0: ") for error in decoded.type_errors)
    hook.unknown_keys.extend(_unknown_keys(decoded, V1))
    data = decoded.value
    spec = data["hook"]
    when = data["when"]
    hook.path, hook.path_pointer = spec["path"], decoded.at("hook", "path") or decoded.at("hook")
    hook.args, hook.args_pointer = spec["args"], decoded.at("hook", "args")
    hook.env, hook.env_pointer = spec["env"], decoded.at("hook", "env")
    hook.timeout, hook.timeout_pointer = spec["timeout"], decoded.at("hook", "timeout")
    hook.stages, hook.stages_pointer = data["stages"], decoded.at("stages")
    if hook.stages is not None:
        hook.stage_pointers = [decoded.at("stages", index) for index in range(len(hook.stages))]
    hook.when = When(
        decoded.at("when"),
        False,
        when["always"],
        decoded.at("when", "always"),
        when["annotations"],
        decoded.at("when", "annotations"),
        when["commands"],
        decoded.at("when", "commands"),
        when["hasBindMounts"],
        decoded.at("when", "hasBindMounts"),
    )
    if hook.when.annotations is not None:
        for key, pattern in hook.when.annotations.items():
            pointer = decoded.at("when", "annotations", key)
            hook.regexes.append(Regex(pointer, key, "annotation key", re2.check(key)))
            hook.regexes.append(Regex(pointer, pattern, "annotation value", re2.check(pattern)))
    for index, command in enumerate(hook.when.commands or []):
        hook.regexes.append(Regex(decoded.at("when", "commands", index), command, "command", re2.check(command)))
    _validate(hook, decoded.mistyped)
    return hook


def _read_v0(value: Any, version: str, version_pointer: str) -> HookFile:
    decoded = go_decode(value, HOOK_V0)
    hook = HookFile(V0, version_pointer)
    prefix = f"{version}: "  # an absent version reads as "": the engine prints ": json: ..."
    for error in decoded.type_errors:
        load_error = _type_error(error, prefix)
        if version == "" and error.path == ("hook",) and error.got == "object":
            load_error = LoadError(
                WRONG_TYPE,
                error.pointer,
                "the file has no version, so the loader reads it as 0.1.0, whose hook is a string, but this file "
                "is written in the 1.0.0 format",
                load_error.engine_text,
                'add "version": "1.0.0"',
                parsing=True,
            )
        hook.errors.append(load_error)
    hook.unknown_keys.extend(_unknown_keys(decoded, V0))
    data = decoded.value
    mistyped = decoded.mistyped
    if data["hook"] is None and ("hook",) not in mistyped:
        hook.errors.append(
            LoadError(
                MISSING,
                "",
                "the 0.1.0 format needs hook, the program's absolute path",
                f"{prefix}missing required property: hook",
                '"hook": "/usr/bin/PROGRAM", or write the file in the 1.0.0 format',
                parsing=True,
            )
        )
    stages, stages_key = data["stages"], "stages"
    for plural, singular in (("stages", "stage"), ("cmds", "cmd"), ("annotations", "annotation")):
        if data[plural] is not None and data[singular] is not None:
            hook.errors.append(
                LoadError(
                    BOTH_SET,
                    decoded.at(singular),
                    f"{singular} and {plural} are both set; they are synonyms and the loader takes only one",
                    f"{prefix}cannot set both '{singular}' and '{plural}'",
                    f"merge the two lists into {plural} and delete {singular}",
                    parsing=True,
                )
            )
    if stages is None:
        stages, stages_key = data["stage"], "stage"
    hook.path, hook.path_pointer = data["hook"], decoded.at("hook")
    hook.stages, hook.stages_pointer = stages, decoded.at(stages_key)
    if stages is not None:
        hook.stage_pointers = [decoded.at(stages_key, index) for index in range(len(stages))]
    if data["arguments"] is not None and data["hook"] is not None:
        hook.args, hook.args_pointer = [data["hook"], *data["arguments"]], decoded.at("arguments")
    commands, commands_key = (data["cmds"], "cmds") if data["cmds"] is not None else (data["cmd"], "cmd")
    annotations = data["annotations"] if data["annotations"] is not None else data["annotation"]
    annotations_key = "annotations" if data["annotations"] is not None else "annotation"
    hook.when = When(
        "",
        True,
        commands=commands,
        commands_pointer=decoded.at(commands_key),
        has_bind_mounts=data["hasbindmounts"],
        has_bind_mounts_pointer=decoded.at("hasbindmounts"),
    )
    if annotations is not None:
        # The loader turns the list into one condition: any annotation whose value matches every entry joined
        # with "|".
        joined = "|".join(annotations)
        hook.when.annotations = {".*": joined}
        hook.when.annotations_pointer = decoded.at(annotations_key)
        joined_error = re2.check(joined)
        pointer = hook.when.annotations_pointer
        if joined_error is not None:
            for index, entry in enumerate(annotations):
                if re2.check(entry) is not None:
                    pointer = decoded.at(annotations_key, index)
                    break
        hook.regexes.append(Regex(pointer, joined, "annotation value", joined_error))
    for index, command in enumerate(commands or []):
        hook.regexes.append(Regex(decoded.at(commands_key, index), command, "command", re2.check(command)))
    if stages is None and (stages_key,) not in mistyped:
        hook.errors.append(
            LoadError(
                MISSING,
                "",
                "the file sets neither stages nor stage, so the hook has no stage to run at",
                f"{prefix}missing required property: stages",
                '"stages": ["createRuntime"] (or the stages the hook is written for)',
                parsing=True,
            )
        )
    # The 0.1.0 reader stops at the first of the errors above; validation would follow. Reporting what it
    # would find as well saves a round trip: nothing below depends on a part refused above.
    _validate(hook, mistyped)
    return hook


def _validate(hook: HookFile, mistyped: set[tuple[Any, ...]]) -> None:
    """1.0.0's Validate, in its order: hook.path, (the host check), regexes, stages."""
    # A 0.1.0 file without hook was refused by its reader already; a mistyped path was reported as such.
    if hook.path == "" and not mistyped & {("hook",), ("hook", "path")}:
        key = "hook.path" if hook.version == V1 else "hook"
        hook.errors.append(
            LoadError(
                MISSING,
                hook.path_pointer,
                f"{key} is not set: the hook has no program" if hook.version == V1 else "hook is empty",
                "missing required property: hook.path",
                f"set {key} to the program's absolute path",
            )
        )
    if hook.path and "\x00" in hook.path:
        hook.errors.append(
            LoadError(
                BAD_PATH,
                hook.path_pointer,
                "the hook path holds a NUL character, which no file name can contain",
                f"stat {_escape_nul(hook.path)}: invalid argument",
                "remove the \\u0000 from the path",
            )
        )
    elif hook.path and len(hook.path.encode("utf-8", "surrogatepass")) >= 4096:
        hook.errors.append(
            LoadError(
                BAD_PATH,
                hook.path_pointer,
                "the hook path is longer than the kernel's PATH_MAX (4096 bytes)",
                f"stat {hook.path[:40]}...: file name too long",
                "shorten the path",
            )
        )
    for regex in hook.regexes:
        if regex.error is None:
            continue
        if regex.what == "command":
            engine = f"invalid command {go_quote(regex.pattern)}: {regex.error}"
        else:
            engine = f"invalid {regex.what} {go_quote(regex.pattern)}: {regex.error}"
        message = f"{regex.what} {go_quote(regex.pattern)} is not a Go regular expression"
        if regex.error.newer_go_accepts:
            since = "1.22" if regex.error.expr.startswith("(?<") else "1.21"
            message += (
                f" before Go {since}: engines built with an older Go refuse it (podman 4.3 on Debian 12 is built "
                f"with Go 1.19), newer builds accept it"
            )
        hook.errors.append(
            LoadError(BAD_REGEX, regex.pointer, message, engine, _regex_hint(regex.error), after_program_check=True)
        )
    if hook.stages is None:
        if hook.version == V1 and ("stages",) not in mistyped:
            hook.errors.append(
                LoadError(
                    MISSING,
                    "",
                    "stages is not set, so the hook has no stage to run at",
                    "missing required property: stages",
                    '"stages": ["createRuntime"] (or the stages the hook is written for)',
                    after_program_check=True,
                )
            )
        return
    for index, stage in enumerate(hook.stages):
        if stage in OCI_STAGES or stage in PODMAN_EXTENSION_STAGES:
            continue
        close = difflib.get_close_matches(stage, [*OCI_STAGES, "precreate"], n=1, cutoff=0.6)
        hook.errors.append(
            LoadError(
                UNKNOWN_STAGE,
                hook.stage_pointer(index),
                f"stage {go_quote(stage)} is not an OCI hook stage",
                f"unknown stage {go_quote(stage)}",
                f"use {close[0]}" if close else "use one of " + ", ".join(OCI_STAGES),
                after_program_check=True,
            )
        )


def _escape_nul(path: str) -> str:
    return path.replace("\x00", "\\x00")  # Go prints the byte itself, which a terminal does not show


def _regex_hint(error: re2.RegexError) -> str:
    expr = error.expr
    if error.newer_go_accepts and expr.startswith("(?<"):
        return "write the named group as (?P<name>...), which every Go version accepts"
    if error.newer_go_accepts:
        return "Go 1.21 added this Unicode script; spell the characters as a range [\\x{...}-\\x{...}]"
    if expr.startswith(("(?=", "(?!", "(?<")):
        return "Go's regular expressions have no look-around; match the text itself, e.g. ^nvidia"
    if error.code == re2.INVALID_ESCAPE and expr[1:2].isdigit():
        return "Go has no back-references; repeat the group's pattern instead"
    if error.code == re2.INVALID_ESCAPE:
        return (
            "Go knows \\A, \\z, \\b, \\B, \\d, \\s, \\w, \\pN, \\Q...\\E, \\x.., octal and C escapes; use \\z for end"
        )
    if error.code == re2.INVALID_REPEAT_OP:
        return "Go has no possessive or stacked quantifiers; use a single one (a+ rather than a++)"
    if error.code == re2.MISSING_REPEAT_ARGUMENT:
        return "a * + ? or {n} needs something before it: use .* to match anything"
    return "correct the expression; `go doc regexp/syntax` describes the syntax"


# ---------------------------------------------------------------------------------------------------------------
# The kind


def _sniff(path: str, value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    keys = {key.lower() for key in value if isinstance(key, str)}
    if keys & {"ociversion", "cdiversion", "hooks", "process", "root", "mounts", "linux", "status", "bundle"}:
        return False
    if "hook" in keys:
        return True
    return bool("version" in keys and keys & {"stages", "stage", "when"})


register_kind(Kind(HOOKSD, "OCI hooks.d file (podman, cri-o)", ("json",), _sniff, order=30))


# ---------------------------------------------------------------------------------------------------------------
# Directories

JSON_SUFFIX = ".json"

DOCUMENT = "document"  # a *.json regular file, read
NOT_JSON = "not-json"  # ignored: the name does not end in .json
VANISHED = "vanished"  # ignored: a *.json name whose target does not exist (a dangling link)
UNREADABLE = "unreadable"  # a *.json name the loader fails on: a directory, a FIFO, no permission


@dataclass
class Entry:
    """One name in a hooks directory, and what the engine does with it."""

    directory: str
    name: str
    path: str
    status: str
    reason: str = ""  # for the non-documents: the engine's text or what happens
    document: Optional[Document] = None
    looks_like_hook: bool = False  # for NOT_JSON: the content is a hooks.d file


@dataclass
class HooksCollection(Collection):
    """Hooks directories as one engine reads them (lowest priority first) and every name found in them."""

    crio: bool = False  # cri-o reads these directories: precreate is fatal there
    entries: list[Entry] = field(default_factory=list)
    missing_directories: list[str] = field(default_factory=list)

    def entries_in(self, directory: str) -> list[Entry]:
        return [entry for entry in self.entries if entry.directory == directory]


def _go_sorted(names: list[str]) -> list[str]:
    return sorted(names, key=os.fsencode)


def _looks_like_hook(path: str) -> bool:
    try:
        raw = io.read_bounded(path, 1 << 20)
        return _sniff(path, jsontext.decode(raw.decode("utf-8", errors="replace")))
    except (io.ReadError, io.TooLarge, ValueError, OSError):
        return False


def _entry(directory: str, name: str, loader: Loader) -> Entry:
    path = os.path.join(directory, name)
    if not name.endswith(JSON_SUFFIX):
        try:
            regular = stat.S_ISREG(os.stat(path).st_mode)
        except OSError:
            regular = False
        return Entry(directory, name, path, NOT_JSON, looks_like_hook=regular and _looks_like_hook(path))
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return Entry(directory, name, path, VANISHED, "a link to a file that does not exist")
    except OSError as exc:
        return Entry(directory, name, path, UNREADABLE, f"open {path}: {(exc.strerror or str(exc)).lower()}")
    if stat.S_ISDIR(info.st_mode):
        return Entry(directory, name, path, UNREADABLE, f"read {path}: is a directory")
    if stat.S_ISFIFO(info.st_mode):
        return Entry(directory, name, path, UNREADABLE, "a FIFO: the loader's read blocks, and the engine with it")
    if stat.S_ISSOCK(info.st_mode):
        return Entry(directory, name, path, UNREADABLE, f"open {path}: no such device or address")
    if not stat.S_ISREG(info.st_mode):
        what = "a character device" if stat.S_ISCHR(info.st_mode) else "a block device"
        return Entry(directory, name, path, UNREADABLE, f"{what}, not a hooks.d file")
    try:
        document = loader(path, HOOKSD)
    except io.ReadError as exc:
        return Entry(directory, name, path, UNREADABLE, str(exc))
    return Entry(directory, name, path, DOCUMENT, document=document)


def read_hooks_dirs(directories: Sequence[str], loader: Loader, *, crio_reads: bool = False) -> HooksCollection:
    """Read hooks directories in an engine's order, lowest priority first, as containers/common's hooks.New does.

    For cri-o the order is its `hooks_dir` list (default: DEFAULT_DIR alone); for podman, containers.conf's
    `[engine] hooks_dir` (default: DEFAULT_DIR alone; measured with podman 4.3, which does not read
    OVERRIDE_DIR unless it is listed). Where both default directories are configured, pass
    [DEFAULT_DIR, OVERRIDE_DIR]. `crio_reads` says that cri-o reads these directories, where a precreate stage
    stops the daemon. A directory that does not exist is skipped, as the engines skip it.
    """
    # A directory listed twice is read twice; only its last reading decides what masks what.
    last = {os.path.normpath(directory): index for index, directory in enumerate(directories)}
    ordered = [d for index, d in enumerate(directories) if last[os.path.normpath(d)] == index]
    collection = HooksCollection(HOOKSD_DIRS, ordered, crio=crio_reads)
    for directory in ordered:
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            collection.missing_directories.append(directory)
            continue
        except NotADirectoryError:
            reason = f"readdirent {directory}: not a directory"  # podman 4.3's words
            collection.entries.append(Entry(directory, "", directory, UNREADABLE, reason))
            continue
        except OSError as exc:
            reason = f"open {directory}: {(exc.strerror or str(exc)).lower()}"
            collection.entries.append(Entry(directory, "", directory, UNREADABLE, reason))
            continue
        for name in _go_sorted(names):
            entry = _entry(directory, name, loader)
            collection.entries.append(entry)
            if entry.document is not None:
                collection.documents.append(entry.document)
    return collection


def _claims(directory: str) -> bool:
    """A directory named hooks.d, or one holding a *.json file that is a hooks.d file."""
    if os.path.basename(os.path.normpath(directory)) == "hooks.d":
        return True
    try:
        names = [name for name in os.listdir(directory) if name.endswith(JSON_SUFFIX)]
    except OSError:
        return False
    for name in _go_sorted(names)[:20]:
        path = os.path.join(directory, name)
        try:
            if stat.S_ISREG(os.stat(path).st_mode) and _looks_like_hook(path):
                return True
        except OSError:
            continue
    return False


register_directory_kind(
    DirectoryKind(
        HOOKSD_DIRS,
        HOOKSD,
        "OCI hooks directories (podman, cri-o)",
        _claims,
        lambda directories, loader: read_hooks_dirs(directories, loader),
        order=30,
    )
)
