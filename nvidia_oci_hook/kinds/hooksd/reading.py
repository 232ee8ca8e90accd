"""hooks.d files (podman, cri-o): read one the way containers/common's loader does.

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
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.formats import re2
from nvidia_oci_hook.kinds.hooksd.go_json import (
    HOOK_V0,
    HOOK_V1,
    VERSION_STRUCT,
    Decoded,
    TypeError_,
    go_decode,
    go_key_matches,
    go_quote,
)
from nvidia_oci_hook.kinds.hooksd.hook_file import (
    BAD_PATH,
    BAD_REGEX,
    BOTH_SET,
    MISSING,
    UNKNOWN_STAGE,
    VERSION,
    WRONG_TYPE,
    HookFile,
    LoadError,
    Regex,
    UnknownKey,
    When,
)

# The stages 1.0.0's Validate knows, in its own words, and the extension stages each engine adds.
OCI_STAGES = ("createContainer", "createRuntime", "prestart", "poststart", "poststop", "startContainer")
PODMAN_EXTENSION_STAGES = ("precreate", "poststop")
CRIO_EXTENSION_STAGES: tuple[str, ...] = ()

V1 = "1.0.0"
V0 = "0.1.0"


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
