"""HKD1xx: what the hooks.d loader accepts without a word although the hook will not run, or not as written."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.host import rewrite_for_existing_root
from nvidia_oci_hook.kinds.hooksd.go_json import go_quote
from nvidia_oci_hook.kinds.hooksd.hook_file import HOOKSD, HookFile
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.hooksd.loading import EXISTS, MISSING, _program_of, hook_file

DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


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
    runc (1.1, measured under podman 4.3) arms the hook's timer for zero seconds, kills the hook when it fires and
    fails the container: `error running hook #0: hook ran past specified timeout of 0.0s`. Only a hook that exits
    before runc looks at the timer (a `/bin/true`, now and then, on a loaded node) escapes, so a real hook fails
    every container it matches.

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
