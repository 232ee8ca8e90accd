"""HKD: hooks.d files and directories, as podman and cri-o load them (containers/common pkg/hooks).

HKD0xx: what the loader refuses (part of --schema-only). A refused file stops podman from starting any container
(`Error: setting up OCI Hooks: ...`) and cri-o from starting at all when the file is there at start-up; cri-o
only logs one added while it runs. HKD1xx: what the loader accepts without a word although the hook will not
run, or not as written. HKD2xx: what only the whole directory shows.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.host import HostView, rewrite_for_existing_root
from nvidia_oci_hook.kinds.document import Document
from nvidia_oci_hook.kinds.hooksd import hook_file as hooksd
from nvidia_oci_hook.kinds.hooksd.directories import (
    DOCUMENT,
    HOOKSD_DIRS,
    NOT_JSON,
    UNREADABLE,
    VANISHED,
    Entry,
    HooksCollection,
)
from nvidia_oci_hook.kinds.hooksd.go_json import go_quote
from nvidia_oci_hook.kinds.hooksd.hook_file import HOOKSD, HookFile, LoadError
from nvidia_oci_hook.kinds.hooksd.reading import read_hook
from nvidia_oci_hook.rules.base import Check, Context, register, rule

DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def hook_file(value: Any, context: Context) -> HookFile:
    result: HookFile = context.cached(f"hooksd:{id(value)}", lambda: read_hook(value))
    return result


# ---------------------------------------------------------------------------------------------------------------
# The hook program on the host

EXISTS = "exists"
MISSING = "missing"
UNUSABLE = "unusable"  # the lookup fails with an error other than "no such file or directory"
UNKNOWN = "unknown"  # offline, or a relative path (looked up in the engine's working directory)

_NAME_MAX = 255


@dataclass(frozen=True)
class Program:
    state: str
    error: str = ""  # for UNUSABLE: the engine's text


def program(hook: HookFile, host: Optional[HostView]) -> Program:
    """What the loader's existence check on hook.path finds on this host."""
    path = hook.path
    if host is None or not path or not path.startswith("/") or "\x00" in path:
        return Program(UNKNOWN)
    parts = [part for part in path.split("/") if part]
    walked = ""
    for index, part in enumerate(parts):
        if len(part.encode("utf-8", "surrogatepass")) > _NAME_MAX:
            return Program(UNUSABLE, f"stat {path}: file name too long")
        walked = f"{walked}/{part}"
        identity = host.identity(walked)
        if identity is None:
            return Program(MISSING)
        last = index == len(parts) - 1
        if (not last or path.endswith("/")) and identity.type != "directory":
            return Program(UNUSABLE, f"stat {path}: not a directory")
    return Program(EXISTS)


def _program_of(value: Any, context: Context) -> Program:
    """The lookup, where the loader gets that far: a file it fails to decode is refused before any lookup."""

    def look() -> Program:
        hook = hook_file(value, context)
        return program(hook, context.host) if hook.decoded else Program(UNKNOWN)

    result: Program = context.cached(f"hooksd-program:{id(value)}", look)
    return result


# ---------------------------------------------------------------------------------------------------------------
# HKD0xx: what the loader refuses


def _loader_problems(code: str) -> Check:
    def check(value: Any, context: Context) -> Iterator[Problem]:
        hook = hook_file(value, context)
        missing = _program_of(value, context).state == MISSING
        for error in hook.errors:
            # The loader stops at a missing program and the directory reader skips the file: on this host
            # these checks are not reached (HKD101 names what they will find once the program is installed).
            if error.code == code and not (error.after_program_check and missing):
                yield Problem(error.pointer, _refusal(error), error.hint)

    return check


def _refusal(error: LoadError) -> str:
    return f"{error.message}; the loader refuses the file: {_engine_text(error)}"


def _engine_text(error: LoadError) -> str:
    return f'parsing hook "…": {error.engine_text}' if error.parsing else error.engine_text


def _register_loader_rule(code: str, name: str, doc: str, *, needs_host: bool = False, check: Check) -> None:
    register(code, name, Severity.ERROR, [HOOKSD], schema_level=True, needs_host=needs_host, doc=doc, check=check)


_register_loader_rule(
    hooksd.VERSION,
    "unrecognized-hook-version",
    check=_loader_problems(hooksd.VERSION),
    doc="""The file's version is not one the hooks.d loader reads.

    ## What it checks
    `version`, which the loader reads first, on its own: "1.0.0" selects the current reader, "0.1.0", an empty
    string, null or no version at all the legacy one. Anything else is refused before the rest of the file is
    looked at.

    ## Why it matters
    podman refuses every container while the file is in its hooks directory (`Error: setting up OCI Hooks:
    parsing hook "/usr/share/containers/oci/hooks.d/nvidia.json": unrecognized hook version: "2.0.0"`); cri-o
    does not start if the file is there when it starts, and only logs it when it appears later.

    ## Example
    `{"version": "2.0.0", "hook": {"path": "/usr/bin/nvidia-ctk"}, "when": {"always": true}, "stages":
    ["createRuntime"]}`

    ## Fix
    Set `"version": "1.0.0"` and follow that format (oci-hooks(5)).
    """,
)

_register_loader_rule(
    hooksd.WRONG_TYPE,
    "hook-field-wrong-type",
    check=_loader_problems(hooksd.WRONG_TYPE),
    doc="""A field has a JSON type the loader's Go struct cannot hold.

    ## What it checks
    Every field the loader decodes, with Go's encoding/json rules: `version` and `hook.path` strings;
    `hook.args`, `hook.env`, `stages` and `when.commands` arrays of strings; `hook.timeout` a whole number that
    fits in 64 bits (not 1.5, not 1e3); `when.always` and `when.hasBindMounts` true or false; `when.annotations`
    an object of strings; in 0.1.0 files `hook` a string and the condition lists arrays of strings. null is
    accepted anywhere and means "not set". Keys match case-insensitively, as Go matches them. A file without a
    version is read as 0.1.0, so a 1.0.0 file that forgot its version fails here on `hook`.

    ## Why it matters
    Go's decoder stops the file at the first such value and the loader refuses it: podman fails every container
    (`parsing hook "FILE": 1.0.0: json: cannot unmarshal string into Go struct field Hook.stages of type
    []string`) and cri-o does not start. The message names the Go struct, not the line.

    ## Example
    `{"version": "1.0.0", "hook": {"path": "/usr/bin/nvidia-ctk"}, "when": {"always": true}, "stages":
    "createRuntime"}`: `stages` must be an array.

    ## Fix
    Give the field the type the message names (`"stages": ["createRuntime"]`, `"timeout": 30`,
    `"always": true`).
    """,
)

_register_loader_rule(
    hooksd.MISSING,
    "hook-required-field-missing",
    check=_loader_problems(hooksd.MISSING),
    doc="""A field the loader requires is missing: the program, or the stages.

    ## What it checks
    1.0.0 files need a non-empty `hook.path` and a `stages` array (an empty array is allowed, see HKD104);
    0.1.0 files need `hook` and one of `stages` and `stage`.

    ## Why it matters
    The loader refuses the file with `missing required property: hook.path`, `missing required property:
    stages` (1.0.0) or `parsing hook "FILE": 0.1.0: missing required property: hook` (0.1.0); podman then fails
    every container and cri-o does not start. For 1.0.0 the message does not say which file.

    ## Example
    `{"version": "1.0.0", "hook": {"path": "/usr/bin/nvidia-ctk"}, "when": {"always": true}}` (no stages).

    ## Fix
    Add the field: `"stages": ["createRuntime"]`, or the program's absolute path in `hook.path`.
    """,
)

_register_loader_rule(
    hooksd.BOTH_SET,
    "hook-synonyms-both-set",
    check=_loader_problems(hooksd.BOTH_SET),
    doc="""A 0.1.0 file sets a field under both of its names (stage and stages, cmd and cmds, annotation(s)).

    ## What it checks
    The 0.1.0 format accepts `stage`, `cmd` and `annotation` as synonyms of `stages`, `cmds` and `annotations`,
    but not both of a pair (null counts as not set).

    ## Why it matters
    The loader refuses the file: `parsing hook "FILE": 0.1.0: cannot set both 'stage' and 'stages'`, and podman
    fails every container; cri-o does not start.

    ## Example
    `{"hook": "/usr/bin/oci-systemd-hook", "stage": ["prestart"], "stages": ["poststop"]}`

    ## Fix
    Merge the two lists into the plural key and delete the singular one; better, convert the file to
    `"version": "1.0.0"`.
    """,
)

_register_loader_rule(
    hooksd.BAD_REGEX,
    "hook-regex-invalid",
    check=_loader_problems(hooksd.BAD_REGEX),
    doc="""A when condition is not a regular expression that Go compiles.

    ## What it checks
    `when.annotations` keys and values and `when.commands` entries (0.1.0: `cmds`, and `annotations` joined
    with `|` into one expression, as the loader joins them) against Go's regexp syntax (RE2), checked by a
    parser that follows Go's, not Python's: look-around `(?=` `(?!` `(?<=`, back-references `\\1`, possessive
    and stacked quantifiers `a++` `a**`, `\\Z`, `\\G`, `(?P=name)`, `(?#...)`, `(?x)` and conditionals are
    all errors in Go. So are `(?<name>...)` before Go 1.22 and `\\p{...}` with a Unicode 14 or 15 script
    (`Kawi`, `Vithkuqi`, ...) before Go 1.21: podman 4.3 on Debian 12 is built with Go 1.19 and refuses them,
    newer builds accept them, and the message says so.

    ## Why it matters
    The loader refuses the file, quoting Go: `invalid command "(?=x)": error parsing regexp: invalid or
    unsupported Perl syntax: `(?=``. podman fails every container and cri-o does not start; neither names the
    file. The loader checks expressions only after it has found the hook's program: on a host without the
    program the file is skipped instead (HKD101, which then names this error), until the program is installed.

    ## Example
    `"when": {"commands": [".*python(?!3)"]}`

    ## Fix
    Rewrite the expression without the construct Go lacks (`.*python$` instead of a look-ahead, `\\z` for
    `\\Z`); `go doc regexp/syntax` lists the syntax. Remember the expressions are not anchored: `sh` also
    matches `/usr/bin/bash`.
    """,
)

_register_loader_rule(
    hooksd.UNKNOWN_STAGE,
    "hook-stage-unknown",
    check=_loader_problems(hooksd.UNKNOWN_STAGE),
    doc="""A stage is not one of the OCI hook stages.

    ## What it checks
    Each entry of `stages` (0.1.0: `stage`) against `prestart`, `createRuntime`, `createContainer`,
    `startContainer`, `poststart` and `poststop`, spelled exactly so. `precreate`, podman's own stage, is
    HKD109 (and HKD204 where cri-o reads the file).

    ## Why it matters
    The loader refuses the file with `unknown stage "createruntime"`, without naming it: podman fails every
    container and cri-o does not start. The check runs only once the hook's program has been found; on a host
    without the program the file is skipped (HKD101, which then names this error) until it is installed.

    ## Example
    `"stages": ["pre-start"]`

    ## Fix
    Use the stage's exact name; `createRuntime` is the replacement for the deprecated `prestart`.
    """,
)

_register_loader_rule(
    hooksd.BAD_PATH,
    "hook-path-unusable",
    check=_loader_problems(hooksd.BAD_PATH),
    doc="""The hook path cannot name any file: it holds a NUL character or is longer than PATH_MAX.

    ## What it checks
    `hook.path` (0.1.0: `hook`) for a NUL character (`\\u0000`) and for a length of 4096 bytes or more.

    ## Why it matters
    The loader's existence check fails with an error other than "no such file" (`stat PATH: invalid
    argument`, `file name too long`), which the directory reader does not forgive: podman fails every container
    and cri-o does not start.

    ## Example
    `"hook": {"path": "/usr/bin/nvidia-ctk\\u0000"}`

    ## Fix
    Correct the path; whatever generated it wrote garbage.
    """,
)


def hook_path_lookup_fails(value: Any, context: Context) -> Iterator[Problem]:
    """Looking up the hook's program on the host fails with an error other than "no such file or directory".

    ## What it checks
    That no component of the absolute `hook.path` before the last is something other than a directory (a
    regular file, a device), and that no component is longer than 255 bytes, on the host under `--host-root`.

    ## Why it matters
    The loader checks that the program exists. "No such file or directory" makes the directory reader skip the
    file (HKD101), but any other error fails the whole directory: podman refuses every container with `Error:
    setting up OCI Hooks: stat /usr/bin/nvidia-ctk/hook: not a directory` (newer releases say `faccessat`),
    without naming the file, and cri-o does not start.

    ## Example
    `"path": "/usr/bin/nvidia-ctk/hook"` where `/usr/bin/nvidia-ctk` is a program, not a directory.

    ## Fix
    Point `hook.path` at the program itself.
    """
    found = _program_of(value, context)
    if found.state == UNUSABLE:
        hook = hook_file(value, context)
        yield Problem(
            hook.path_pointer,
            f"the hook path {hook.path} cannot be looked up; the loader refuses the file: {found.error}",
            "point the path at the program itself",
        )


_register_loader_rule(
    "HKD008",
    "hook-path-lookup-fails",
    needs_host=True,
    doc=hook_path_lookup_fails.__doc__ or "",
    check=hook_path_lookup_fails,
)


# ---------------------------------------------------------------------------------------------------------------
# HKD1xx: what the loader lets through


@rule("HKD101", "hook-program-missing", Severity.ERROR, [HOOKSD], needs_host=True)
def hook_program_missing(value: Any, context: Context) -> Iterator[Problem]:
    """The hook's program does not exist on the host, so the engine skips the file without a word.

    ## What it checks
    That the absolute `hook.path` (0.1.0: `hook`) exists under `--host-root`, following symbolic links as the
    loader's check does. Where the same path exists under another `--driver-root` candidate, the finding says
    so: the file was written for the wrong driver root.

    ## Why it matters
    The loader drops the file at load time and both cri-o and podman start containers without the hook, logging
    nothing: GPU containers come up without their devices and libraries, far from the cause. The loader also
    stops checking the file there: an invalid expression or stage (HKD005, HKD006) surfaces only once the
    program is installed, and this finding names it; in the same directory the loader then also ignores the
    errors of every file that sorts after this one (HKD206).

    ## Example
    `"hook": {"path": "/usr/bin/nvidia-container-toolkit"}` after the package that installed it was removed,
    or `/run/nvidia/driver/usr/bin/nvidia-ctk` on a node whose driver is on the host.

    ## Fix
    Install the program, or correct the path (the hint names the driver root that has it); remove hooks files
    left behind by uninstalled packages.
    """
    if context.host is None or _program_of(value, context).state != MISSING:
        return
    hook = hook_file(value, context)
    assert hook.path is not None
    rewrite = rewrite_for_existing_root(context.host, context.driver_roots, hook.path)
    if rewrite is not None:
        yield Problem(
            hook.path_pointer,
            f"hook program {hook.path} does not exist under driver root {rewrite.missing_root} but exists under "
            f"{rewrite.existing_root}; the engine skips this file without a word",
            f"use {rewrite.rewritten}",
        )
        return
    later = [error.engine_text for error in hook.errors if error.after_program_check]
    consequence = f"; once it is installed, the loader refuses the file: {later[0]}" if later else ""
    yield Problem(
        hook.path_pointer,
        f"hook program {hook.path} does not exist on the host; cri-o and podman skip this file without a word "
        f"and run containers without the hook{consequence}",
        "install the program or correct the path; delete the file if the program was uninstalled on purpose",
    )


@rule("HKD102", "hook-program-not-executable", Severity.ERROR, [HOOKSD], needs_host=True)
def hook_program_not_executable(value: Any, context: Context) -> Iterator[Problem]:
    """The hook's program exists but is not an executable file.

    ## What it checks
    That the program at the absolute `hook.path` is a regular file with an execute bit (the loader only checks
    that something exists there).

    ## Why it matters
    The loader accepts the file, and every container the hook matches then fails in the runtime: runc 1.1
    prints `error running hook #0: fork/exec PATH: permission denied` and the container does not start, at
    whatever stage the hook runs (measured with podman 4.3 for prestart, createContainer and poststart).

    ## Example
    A program copied into place without its mode (0644), or `hook.path` naming a directory.

    ## Fix
    `chmod 0755 PATH`, or point `hook.path` at the executable.
    """
    if context.host is None or _program_of(value, context).state != EXISTS:
        return
    hook = hook_file(value, context)
    assert hook.path is not None
    if context.host.is_executable(hook.path):
        return
    identity = context.host.identity(hook.path)
    kind = "a file without an execute bit" if identity is None or identity.type == "file" else identity.describe()
    yield Problem(
        hook.path_pointer,
        f"hook program {hook.path} is {kind}: every container the hook matches fails with "
        f"'error running hook #0: fork/exec {hook.path}: permission denied'",
        f"chmod 0755 {hook.path}" if kind.startswith("a file") else "point hook.path at the executable",
    )


def _never_matches(hook: HookFile) -> Optional[tuple[str, str]]:
    """(pointer, reason) when the hook's conditions can never all match a container."""
    when = hook.when
    if when.any_of:
        live = bool(when.commands) or when.annotations is not None or when.has_bind_mounts is True
        if live:
            return None
        if when.has_bind_mounts is False:
            return when.has_bind_mounts_pointer, "hasbindmounts is false and no cmds or annotations are set"
        return "", "the file sets none of cmds, annotations and hasbindmounts"
    if when.always is False:
        return when.always_pointer, "when.always is false, which makes the whole condition false"
    if when.has_bind_mounts is False:
        return (
            when.has_bind_mounts_pointer,
            "when.hasBindMounts is false, which never matches (it is not 'with or without bind mounts')",
        )
    if when.always is None and when.has_bind_mounts is None and not when.annotations and not when.commands:
        empty = [f"when.{name}" for name in ("annotations", "commands") if getattr(when, name) is not None]
        detail = f" ({' and '.join(empty)} empty)" if empty else ""
        return when.pointer, f"when sets no condition{detail}"
    return None


@rule("HKD103", "hook-never-matches", Severity.ERROR, [HOOKSD])
def hook_never_matches(value: Any, context: Context) -> Iterator[Problem]:
    """The hook's when conditions can never match, so the engine never injects it.

    ## What it checks
    1.0.0: a `when` that sets no condition (missing, `{}`, or only an empty `annotations` object or `commands`
    array), `"always": false` or `"hasBindMounts": false`. Every condition that is set must match, and these
    never do: `always: false` and `hasBindMounts: false` are not "regardless" but "never". 0.1.0: a file with no
    `cmds`, no `annotations` and no `hasbindmounts: true`.

    ## Why it matters
    The loader accepts the file and the hook silently never runs; nothing in podman or cri-o logs says why.

    ## Example
    `{"version": "1.0.0", "hook": {"path": "/usr/bin/nvidia-ctk", "args": ["nvidia-ctk", "hook"]}, "stages":
    ["createRuntime"]}` (no `when`).

    ## Fix
    Add the condition you mean, `"when": {"always": true}` for every container or `"when": {"annotations":
    {"^nvidia\\\\.com/gpu$": ".+"}}` for some; to disable a hook, rename the file so that it does not end in
    `.json`.
    """
    hook = hook_file(value, context)
    if not hook.decoded:
        return
    found = _never_matches(hook)
    if found is not None:
        pointer, reason = found
        yield Problem(
            pointer,
            f"{reason}: the engine never injects this hook",
            'add "when": {"always": true} (every container) or the condition you mean',
        )


@rule("HKD104", "hook-stages-empty", Severity.ERROR, [HOOKSD])
def hook_stages_empty(value: Any, context: Context) -> Iterator[Problem]:
    """The stages list is empty, so the hook is never injected.

    ## What it checks
    `"stages": []` (0.1.0: `stage` too). The loader requires the key but not an entry in it.

    ## Why it matters
    The file loads, matches containers, and adds the hook to no stage: it silently never runs.

    ## Example
    `{"version": "1.0.0", "hook": {"path": "/usr/bin/nvidia-ctk"}, "when": {"always": true}, "stages": []}`

    ## Fix
    Name the stage the hook is written for, usually `createRuntime` for device and library injection.
    """
    hook = hook_file(value, context)
    if hook.decoded and hook.stages == []:
        yield Problem(
            hook.stages_pointer, "stages is empty: the hook is never injected", 'use "stages": ["createRuntime"]'
        )


@rule("HKD105", "hook-path-relative", Severity.ERROR, [HOOKSD])
def hook_path_relative(value: Any, context: Context) -> Iterator[Problem]:
    """The hook path is relative.

    ## What it checks
    That `hook.path` (0.1.0: `hook`) starts with `/`.

    ## Why it matters
    The loader looks the path up relative to the engine's own working directory (`/` for cri-o under systemd,
    wherever the user was for podman) and skips the file when nothing is there; if something is, the
    runtime then runs the path relative to the bundle directory, or fails with "executable file not found". The
    runtime-spec requires absolute hook paths.

    ## Example
    `"hook": {"path": "usr/bin/nvidia-ctk"}`

    ## Fix
    Write the absolute path; `command -v PROGRAM` on the node prints it.
    """
    hook = hook_file(value, context)
    if hook.decoded and hook.path and not hook.path.startswith("/"):
        yield Problem(
            hook.path_pointer,
            f"hook path {hook.path!r} is relative: the loader looks it up in the engine's working directory and "
            "the runtime runs it from the bundle directory",
            f"use the absolute path, e.g. /usr/bin/{posixpath.basename(hook.path)}",
        )


@rule("HKD106", "hook-timeout-too-small", Severity.ERROR, [HOOKSD])
def hook_timeout_too_small(value: Any, context: Context) -> Iterator[Problem]:
    """The hook's timeout is less than one second.

    ## What it checks
    `hook.timeout`, when set, is at least 1 (seconds). The loader does not check it.

    ## Why it matters
    runc (1.1, measured under podman 4.3) kills the hook at once and fails every container the hook matches:
    `error running hook #0: hook ran past specified timeout of 0.0s`.

    ## Example
    `"hook": {"path": "/usr/bin/nvidia-ctk", "timeout": 0}`

    ## Fix
    Drop `timeout`, or give the seconds the hook may take (10 to 30 for device setup).
    """
    hook = hook_file(value, context)
    if hook.decoded and hook.timeout is not None and hook.timeout < 1:
        yield Problem(
            hook.timeout_pointer,
            f"hook.timeout is {hook.timeout}: runc fails every matching container with 'error running hook #0: "
            f"hook ran past specified timeout of {float(hook.timeout):.1f}s'",
            "remove timeout or set it to the seconds the hook may take (>= 1)",
        )


@rule("HKD107", "hook-env-without-path", Severity.WARNING, [HOOKSD])
def hook_env_without_path(value: Any, context: Context) -> Iterator[Problem]:
    """The hook's env list has no PATH.

    ## What it checks
    A 1.0.0 `hook.env` that is set but holds no `PATH=` entry.

    ## Why it matters
    A hook with an env list runs with exactly that environment. Without PATH, whatever the hook runs by name
    (`ldconfig`, `nvidia-container-cli`, `modprobe`) is not found, and the failure surfaces as the hook's own
    error in the runtime's message.

    ## Example
    `"hook": {"path": "/usr/bin/nvidia-container-runtime-hook", "env": ["NVIDIA_VISIBLE_DEVICES=all"]}`

    ## Fix
    Add `"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"` to `env`.
    """
    hook = hook_file(value, context)
    if hook.decoded and hook.env is not None and not any(entry.startswith("PATH=") for entry in hook.env):
        yield Problem(
            hook.env_pointer,
            "hook.env sets the hook's whole environment and has no PATH: programs it runs by name are not found",
            f'add "{DEFAULT_PATH}"',
        )


@rule("HKD108", "hook-prestart-stage", Severity.WARNING, [HOOKSD])
def hook_prestart_stage(value: Any, context: Context) -> Iterator[Problem]:
    """The hook uses the deprecated prestart stage.

    ## What it checks
    `prestart` in `stages`.

    ## Why it matters
    cri-o and podman 5 (containers/common 0.58 and later) inject a hooks.d `prestart` hook as `createRuntime`;
    podman 4 injects it as `prestart` (measured with 4.3 on Debian 12), which the runtime-spec deprecates and a
    runtime may drop. The same file thus runs at different stages on different nodes.

    ## Example
    `"stages": ["prestart"]`

    ## Fix
    Use `"stages": ["createRuntime"]`: the same moment, in the runtime's namespace, on every engine.
    """
    hook = hook_file(value, context)
    if not hook.decoded:
        return
    for index, stage in enumerate(hook.stages or []):
        if stage == "prestart":
            yield Problem(
                hook.stage_pointer(index),
                "prestart is deprecated: cri-o and podman 5 run this hook as createRuntime, podman 4 as prestart",
                'use "createRuntime"',
            )


@rule("HKD109", "hook-precreate-stage", Severity.WARNING, [HOOKSD])
def hook_precreate_stage(value: Any, context: Context) -> Iterator[Problem]:
    """The hook uses podman's precreate stage, which cri-o refuses.

    ## What it checks
    `precreate` in `stages`.

    ## Why it matters
    podman runs a precreate hook before it creates the container, with the OCI config on stdin, and uses what
    the hook prints on stdout as the new config (a hook that prints nothing fails every container:
    `unmarshal output from config-filter hook 0: unexpected end of JSON input`). cri-o knows no such stage: a
    hooks directory it reads that holds this file stops it from starting (`unknown stage "precreate"`; HKD204
    when linting the directory as cri-o's).

    ## Example
    `"stages": ["precreate"]` in `/usr/share/containers/oci/hooks.d`, which both engines read by default.

    ## Fix
    Keep precreate hooks in a directory only podman reads (its `hooks_dir` in containers.conf), and make sure the
    program prints the (edited) config on stdout.
    """
    hook = hook_file(value, context)
    if not hook.decoded:
        return
    for index, stage in enumerate(hook.stages or []):
        if stage == "precreate":
            yield Problem(
                hook.stage_pointer(index),
                "precreate is podman's config-filter stage: the program must print the config on stdout, and "
                'cri-o refuses to start with this file in a directory it reads (unknown stage "precreate")',
                "keep this file in a hooks directory only podman reads",
            )


@rule("HKD110", "hook-key-ignored", Severity.WARNING, [HOOKSD])
def hook_key_ignored(value: Any, context: Context) -> Iterator[Problem]:
    """The file holds a key the loader ignores.

    ## What it checks
    Keys that match no field of the format the file is read as (Go's decoder drops them silently, comparing
    case-insensitively): typos (`when.command`), keys of the other format version (`stage`, `cmds` or
    `arguments` in a 1.0.0 file; `args` or `when` in a 0.1.0 file) and keys at the wrong level (`args` beside
    `hook` instead of inside it).

    ## Why it matters
    What the key was meant to say does not happen: a condition written as `when.command` is not a condition, an
    argument list written as `arguments` in a 1.0.0 file is not passed, and nothing reports it.

    ## Example
    `"when": {"command": ["^/usr/bin/python"]}` in a 1.0.0 file.

    ## Fix
    Use the key the hint names, at the level it names.
    """
    hook = hook_file(value, context)
    if hook.version is None:
        return
    for unknown in hook.unknown_keys:
        yield Problem(
            unknown.pointer,
            f"{go_quote(unknown.key)} is not a {hook.version} hooks.d key at {unknown.where}: the loader ignores it",
            f"did you mean {unknown.suggestion}?" if unknown.suggestion else "remove it",
        )


@rule("HKD111", "hook-stage-repeated", Severity.WARNING, [HOOKSD])
def hook_stage_repeated(value: Any, context: Context) -> Iterator[Problem]:
    """The hook names the same stage twice, or both prestart and createRuntime.

    ## What it checks
    Repeated entries in `stages`, counting `prestart` and `createRuntime` as one (cri-o and podman 5 inject both
    as createRuntime).

    ## Why it matters
    The engine injects the hook once per entry, so the program runs twice for each container (measured with
    podman 4.3: `["prestart", "createRuntime", "prestart"]` runs it three times). Hooks that inject devices,
    mounts or libraries are seldom written to run twice; if a second run fails, so does the container.

    ## Example
    `"stages": ["prestart", "createRuntime"]`

    ## Fix
    Keep one entry: `"stages": ["createRuntime"]`.
    """
    hook = hook_file(value, context)
    if not hook.decoded:
        return
    seen: dict[str, str] = {}
    for index, stage in enumerate(hook.stages or []):
        key = "createRuntime" if stage == "prestart" else stage
        if key in seen:
            yield Problem(
                hook.stage_pointer(index),
                f"{stage} repeats {seen[key]}: the hook runs twice in every container it matches",
                f"remove this entry and keep {seen[key]}",
            )
        else:
            seen[key] = stage


# ---------------------------------------------------------------------------------------------------------------
# HKD2xx: directories


def _documents(collection: Any) -> Optional[HooksCollection]:
    return collection if isinstance(collection, HooksCollection) else None


def _hook_of(document: Document, context: Context) -> Optional[HookFile]:
    return hook_file(document.value, context) if document.parsed else None


FAILS = "fails"  # the loader refuses the file: an error for the directory
SKIPPED = "skipped"  # the program is missing: "no such file or directory", forgiven by the directory reader
LOADS = "loads"


def outcome(entry: Entry, context: Context, crio: bool) -> str:
    """What the loader does with one *.json entry on this host (an unknown program is taken to exist)."""
    if entry.status == UNREADABLE:
        return FAILS
    if entry.status != DOCUMENT or entry.document is None:
        return LOADS  # not read at all: VANISHED and NOT_JSON entries are passed over
    document = entry.document
    if not document.parsed:
        # Go reads any size; this tool stops at its limit and cannot tell.
        return LOADS if any(p.code == "DOC004" for p in document.load_problems) else FAILS
    hook = hook_file(document.value, context)
    if any(not error.after_program_check for error in hook.errors):
        return FAILS
    found = _program_of(document.value, context)
    if found.state == MISSING:
        return SKIPPED
    if found.state == UNUSABLE:
        return FAILS
    if hook.errors or (crio and "precreate" in (hook.stages or [])):
        return FAILS
    return LOADS


def _json_name(name: str) -> str:
    if ".json" in name:
        return name[: name.rindex(".json")] + ".json"
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    return f"{stem}.json"


def _shown(entry: Entry) -> str:
    return entry.path


@rule("HKD201", "hook-file-ignored", Severity.WARNING, [HOOKSD_DIRS])
def hook_file_ignored(value: Any, context: Context) -> Iterator[Problem]:
    """A hooks file in a hooks directory that the engine passes over.

    ## What it checks
    Files whose content is a hooks.d file but whose name does not end in `.json` exactly (`nvidia.json.bak`,
    `oci-nvidia-hook.JSON`, `nvidia-hook.conf`), `*.json` names that are symbolic links to nothing, and, for
    cri-o, a `hooks_dir` entry that is not a directory (cri-o skips it with a warning).

    ## Why it matters
    The loader reads only names ending in `.json` and skips a name whose target does not exist, both without
    a log line in cri-o or podman: a hook installed under such a name never runs.

    ## Example
    `/usr/share/containers/oci/hooks.d/oci-nvidia-hook` (no extension).

    ## Fix
    Rename the file to end in `.json`, or delete it; re-point or remove the dangling link. To disable a hook
    on purpose, a suffix such as `.disabled` is fine: then ignore this finding for the file.
    """
    collection = _documents(value)
    if collection is None:
        return
    for entry in collection.entries:
        if entry.status == NOT_JSON and entry.looks_like_hook:
            yield Problem(
                "",
                f"{entry.name} is a hooks.d file, but the engine reads only names ending in .json: it is ignored",
                f"rename it to {_json_name(entry.name)}, or delete it",
                path=_shown(entry),
            )
        elif entry.status == UNREADABLE and not entry.name and collection.crio:
            yield Problem(
                "",
                f"{entry.path} is in cri-o's hooks_dir but is not a directory: cri-o skips it with a warning "
                "(Skipping invalid hooks directory) and loads no hooks from it",
                "remove it from hooks_dir, or make it a directory",
                path=entry.path,
            )
        elif entry.status == VANISHED:
            yield Problem(
                "",
                f"{entry.name} is {entry.reason}: the engine skips it without a word",
                "point the link at the hooks file, or remove it",
                path=_shown(entry),
            )


@rule("HKD202", "stray-file-in-hooks-dir", Severity.INFO, [HOOKSD_DIRS])
def stray_file_in_hooks_dir(value: Any, context: Context) -> Iterator[Problem]:
    """A file or directory in a hooks directory that is not a hooks file and that the engine ignores.

    ## What it checks
    Entries of a hooks directory whose names do not end in `.json` and that do not hold a hooks.d file:
    READMEs, editor backups, package-manager leftovers (`.rpmsave`, `.dpkg-old`), subdirectories (the loader
    does not descend into them).

    ## Why it matters
    Nothing breaks; but a hook placed in a subdirectory, or a backup someone edits believing it is live, is
    never read.

    ## Example
    `/etc/containers/oci/hooks.d/nvidia/nvidia.json` (one level too deep).

    ## Fix
    Move hooks files to the top of the directory; delete leftovers.
    """
    collection = _documents(value)
    if collection is None:
        return
    for entry in collection.entries:
        if entry.status == NOT_JSON and not entry.looks_like_hook:
            yield Problem(
                "",
                f"{entry.name} is not a *.json file: the engine ignores it (and does not descend into directories)",
                "move hooks files to the top of the directory with a .json name; delete leftovers",
                path=_shown(entry),
            )


@rule("HKD203", "hook-file-masked", Severity.WARNING, [HOOKSD_DIRS])
def hook_file_masked(value: Any, context: Context) -> Iterator[Problem]:
    """A hooks file has no effect: a file of the same name in another directory takes its place.

    ## What it checks
    For each file name present in more than one of the directories, which file the engine keeps: the one in
    the directory read last (`/etc/containers/oci/hooks.d` after `/usr/share/containers/oci/hooks.d` where
    both are configured) among those that load. A file whose program is missing does not load, so it masks
    nothing and the earlier file stays in effect. Names are compared exactly: `Nvidia.json` does not mask
    `nvidia.json`, both run.

    ## Why it matters
    An edit to the masked file changes nothing, which is easy to miss at 3 a.m. The masked file is still read
    and validated, so an error in it still breaks the directory.

    ## Example
    `/usr/share/containers/oci/hooks.d/nvidia.json` and `/etc/containers/oci/hooks.d/nvidia.json`, both read by
    podman with `hooks_dir = ["/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d"]`.

    ## Fix
    Edit the file that is in effect, or delete the one that is not.
    """
    collection = _documents(value)
    if collection is None:
        return
    by_name: dict[str, list[Entry]] = {}
    for entry in collection.entries:
        if entry.status in (DOCUMENT, UNREADABLE) and entry.name:
            by_name.setdefault(entry.name, []).append(entry)
    for entries in by_name.values():
        if len(entries) < 2:
            continue
        loaded = [entry for entry in entries if outcome(entry, context, collection.crio) == LOADS]
        if not loaded:
            continue
        winner = loaded[-1]
        for entry in entries:
            if entry is winner:
                continue
            if entries.index(entry) > entries.index(winner):
                yield Problem(
                    "",
                    f"{entry.path} would replace {winner.path}, but the engine skips it (its program is missing), "
                    f"so {winner.path} is in effect",
                    "install the program this file names, or delete the file",
                    path=entry.path,
                )
            else:
                yield Problem(
                    "",
                    f"{winner.path} replaces this file, which has no effect (the engine still reads it, so its "
                    "errors still count)",
                    f"edit {winner.path} instead, or delete this file",
                    path=entry.path,
                )


@rule("HKD204", "precreate-in-crio-hooks-dir", Severity.ERROR, [HOOKSD_DIRS])
def precreate_in_crio_hooks_dir(value: Any, context: Context) -> Iterator[Problem]:
    """A hooks directory that cri-o reads holds a precreate hook: cri-o refuses to start.

    ## What it checks
    When the directories are linted as cri-o's (`lint --node` on a cri-o node), every file with `precreate` in
    its stages whose program exists.

    ## Why it matters
    cri-o loads hooks without podman's extension stages: at start-up it fails with `unknown stage
    "precreate"` and the node runs no pods; a file added while cri-o runs is logged and skipped. (With the
    program missing, the loader skips the file before it looks at the stages.)

    ## Example
    A podman config-filter hook installed into `/usr/share/containers/oci/hooks.d`, cri-o's default
    `hooks_dir`.

    ## Fix
    Move the file to a directory only podman reads and list it in containers.conf's `hooks_dir`.
    """
    collection = _documents(value)
    if collection is None or not collection.crio:
        return
    for entry in collection.entries:
        if entry.document is None or not entry.document.parsed:
            continue
        hook = hook_file(entry.document.value, context)
        if not hook.decoded or _program_of(entry.document.value, context).state == MISSING:
            continue
        for index, stage in enumerate(hook.stages or []):
            if stage == "precreate":
                yield Problem(
                    hook.stage_pointer(index),
                    'cri-o reads this directory and refuses to start: unknown stage "precreate"',
                    "move the file to a hooks directory only podman reads",
                    path=entry.path,
                )


def hook_file_unreadable(value: Any, context: Context) -> Iterator[Problem]:
    """A *.json name in a hooks directory that the loader cannot read.

    ## What it checks
    `*.json` entries that are directories, FIFOs, sockets or devices, or that cannot be opened (permissions, a
    loop of symbolic links), and, for podman, a configured hooks "directory" that is not a directory.

    ## Why it matters
    The loader reads every `*.json` name and any read error other than "no such file" fails the directory:
    podman refuses every container (`Error: setting up OCI Hooks: read .../nvidia.json: is a directory`,
    `readdirent /etc/containers/oci/hooks.d: not a directory`) and cri-o does not start. A FIFO is worse: the
    read blocks, and so does the engine (measured: `podman run` hangs).

    ## Example
    `mkdir /usr/share/containers/oci/hooks.d/nvidia.json`

    ## Fix
    Remove the entry, or replace it with the hooks file it was meant to be.
    """
    collection = _documents(value)
    if collection is None:
        return
    for entry in collection.entries:
        if entry.status != UNREADABLE or (not entry.name and collection.crio):
            continue  # cri-o skips a hooks_dir entry that is not a directory (HKD201)
        if not entry.name:
            yield Problem(
                "",
                f"the configured hooks directory cannot be read: podman fails every container with '{entry.reason}'",
                "remove it from hooks_dir, or make it a directory",
                path=entry.path,
            )
            continue
        yield Problem(
            "",
            f"the loader cannot read {entry.name} ({entry.reason}) and refuses the whole directory",
            "remove it, or replace it with the hooks file it was meant to be",
            path=entry.path,
        )


register(
    "HKD205",
    "hook-file-unreadable",
    Severity.ERROR,
    [HOOKSD_DIRS],
    schema_level=True,
    doc=hook_file_unreadable.__doc__,
    check=hook_file_unreadable,
)


@rule("HKD206", "hook-error-hidden", Severity.WARNING, [HOOKSD_DIRS], needs_host=True)
def hook_error_hidden(value: Any, context: Context) -> Iterator[Problem]:
    """A broken hooks file that the engine overlooks today, only because an earlier file's program is missing.

    ## What it checks
    Within each directory, in the loader's order (names in byte order), whether the first file the loader
    fails on is one whose program does not exist. The directory reader forgives a directory whose first error
    is "no such file or directory", and with it every later error in that directory.

    ## Why it matters
    The broken file (reported by its own HKD0xx finding) does no harm today, but installing the missing
    program, or deleting its hooks file, suddenly makes podman refuse every container and cri-o refuse to start,
    with an error about a different file. Measured with podman 4.3: `a.json` naming a missing program and
    `b.json` with `"version": "2.0.0"` start containers; swap the names and every container fails.

    ## Example
    `10-old-hook.json` naming an uninstalled `/usr/libexec/oci/hooks.d/oci-systemd-hook`, and
    `20-nvidia.json` with a look-ahead in `when.commands`.

    ## Fix
    Correct the broken file now (its own finding says how), and remove the stale one.
    """
    collection = _documents(value)
    if collection is None or context.host is None:
        return
    for directory in collection.directories:
        first_error: Optional[tuple[Entry, str]] = None
        for entry in collection.entries_in(directory):
            if entry.status not in (DOCUMENT, UNREADABLE):
                continue
            result = outcome(entry, context, collection.crio)
            if result == LOADS:
                continue
            if first_error is None:
                first_error = (entry, result)
                continue
            if result == FAILS and first_error[1] == SKIPPED:
                stale = first_error[0]
                yield Problem(
                    "",
                    f"the engine overlooks this file's error today only because {stale.name}, which sorts before it, "
                    "names a program that does not exist: installing that program, or deleting that file, makes the "
                    "engine fail on this one",
                    f"correct this file now; remove {stale.path} if its program is gone for good",
                    path=entry.path,
                )


@rule("HKD207", "hook-program-twice", Severity.WARNING, [HOOKSD_DIRS])
def hook_program_twice(value: Any, context: Context) -> Iterator[Problem]:
    """Two hooks files in effect inject the same program, with the same arguments, at the same stage.

    ## What it checks
    Among the files the engine keeps (after masking, HKD203) whose conditions can match, pairs with the same
    `hook.path` and `hook.args` and a common stage, counting `prestart` and `createRuntime` as one; for example
    the toolkit's `oci-nvidia-hook.json` left beside a newer `nvidia-container-toolkit.json`, or `Nvidia.json`
    beside `nvidia.json` (names that differ in case do not mask each other).

    ## Why it matters
    Where both match a container the program runs twice on it. Hooks that inject devices, mounts or libraries
    are seldom written to run twice; if the second run fails, so does the container, and if it succeeds the
    work is done twice on every start.

    ## Example
    `/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json` and `.../nvidia-container-toolkit.json`, both
    running `/usr/bin/nvidia-container-toolkit` at prestart.

    ## Fix
    Delete the older file.
    """
    collection = _documents(value)
    if collection is None:
        return
    kept: dict[str, Entry] = {}
    for entry in collection.entries:
        if entry.status == DOCUMENT and outcome(entry, context, collection.crio) == LOADS:
            kept[entry.name] = entry
    seen: dict[tuple[str, str, Optional[tuple[str, ...]]], Entry] = {}
    for name in sorted(kept, key=str.lower):
        entry = kept[name]
        assert entry.document is not None
        hook = hook_file(entry.document.value, context)
        if not hook.path or _never_matches(hook) is not None:
            continue
        stages = hook.stages or []
        for index, stage in enumerate(stages):
            key = (
                posixpath.normpath(hook.path),
                "createRuntime" if stage == "prestart" else stage,
                tuple(hook.args) if hook.args is not None else None,
            )
            other = seen.setdefault(key, entry)
            if other is not entry:
                yield Problem(
                    hook.stage_pointer(index),
                    f"{other.path} already injects {hook.path} at {key[1]}: where both match, the program runs twice",
                    f"delete the older of {other.name} and {entry.name}",
                    path=entry.path,
                )
