"""HKD0xx: what the hooks.d loader refuses (part of --schema-only).

A refused file stops podman from starting any container (`Error: setting up OCI Hooks: ...`) and cri-o from
starting at all when the file is there at start-up; cri-o only logs one added while it runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.hooksd import hook_file as hooksd  # hooksd.MISSING, apart from the program's MISSING
from nvidia_oci_hook.kinds.hooksd.hook_file import HOOKSD, LoadError
from nvidia_oci_hook.rules.base import Check, Context, register
from nvidia_oci_hook.rules.hooksd.loading import MISSING, UNUSABLE, _program_of, hook_file


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
