"""The OCI hook modes: podman's precreate filter (edits) and the prestart/createRuntime guard (checks).

A precreate filter gets the config on stdin and must print the config to use on stdout; podman runs it with an
empty environment. A prestart or createRuntime hook gets the container's state on stdin and can no longer
change the spec (runc and crun never re-read config.json after create), so the guard only checks: it logs what
it finds and fails the container, with one line on stderr, when the policy says so.
"""

from __future__ import annotations

import sys

from nvidia_oci_hook import io, leanos
from nvidia_oci_hook.engine import jsoncodec
from nvidia_oci_hook.runtime import dispatch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from nvidia_oci_hook.config import Settings
    from nvidia_oci_hook.engine.records import EngineFinding

GUARD_STAGES = ("prestart", "createRuntime")
USAGE = "usage: nvidia-oci-hook hook precreate|prestart|createRuntime  (the config or state on stdin)"


def _settings(config_path: Optional[str], state_dir: Optional[str]) -> tuple[Settings, Optional[str]]:
    from nvidia_oci_hook.config import Settings

    try:
        settings, problems = dispatch.load(config_path, state_dir)
    except Exception as exc:  # our own bug: the defaults still let the container start
        return Settings(), f"nvidia-oci-hook: configuration ignored: internal error: {type(exc).__name__}: {exc}"
    return settings, (f"nvidia-oci-hook: configuration ignored: {'; '.join(problems)}" if problems else None)


def _fail(message: str) -> int:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    return 1


def precreate(raw: bytes, settings: Settings) -> tuple[bytes, Optional[str]]:
    """The config to hand back to podman, and the refusal message when the policy refuses the container."""
    from nvidia_oci_hook.engine.pipeline import plan
    from nvidia_oci_hook.host import HostView

    try:
        config = jsoncodec.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, jsoncodec.JSONDecodeError):
        return raw, None  # podman's own runtime reports a config it cannot read
    result = plan(config, HostView("/"), settings)
    if not (result.edits or result.findings):
        return raw, None  # the common case: nothing to hand back but the input, nothing to log
    from nvidia_oci_hook.runtime import logbook, messages

    container_id = None  # the config podman hands a precreate filter names no container
    entry = messages.log_entry(container_id, None, result.edits, result.findings)
    refusals = result.refusals(settings.policy_fail_on)
    if refusals:
        message = messages.refusal(container_id, refusals)
        entry["refused"] = True  # what the metrics count, without reading the words
        logbook.record(settings, "precreate", entry, message, error=True)
        return raw, message
    logbook.record(settings, "precreate", entry, messages.headline(container_id, result))
    return (jsoncodec.dumps(result.config).encode("utf-8") if result.changed else raw), None


class CannotCheck(Exception):
    """The guard could not look at the container at all: like our own failure, it refuses nothing by itself."""


def guard(raw_state: bytes, settings: Settings) -> tuple[list[EngineFinding], Optional[str]]:
    """The problems left in the container's spec, and the refusal message when the policy refuses it.

    Raises CannotCheck when the state or the bundle's config cannot be read.
    """
    from nvidia_oci_hook.engine.pipeline import plan
    from nvidia_oci_hook.engine.records import refusing
    from nvidia_oci_hook.host import HostView

    try:
        state = jsoncodec.loads(raw_state.decode("utf-8"))
    except (UnicodeDecodeError, jsoncodec.JSONDecodeError) as exc:
        raise CannotCheck(f"the state on stdin is not JSON ({exc}); is this run as an OCI hook?") from None
    if not isinstance(state, dict) or not isinstance(state.get("bundle"), str):
        raise CannotCheck("the state on stdin has no bundle; is this run as an OCI hook?")
    container_id = state.get("id") if isinstance(state.get("id"), str) else None
    path = leanos.join(state["bundle"], "config.json")
    try:
        config = jsoncodec.loads(io.read_bounded(path).decode("utf-8"))
    except (io.ReadError, io.TooLarge, UnicodeDecodeError, jsoncodec.JSONDecodeError) as exc:
        raise CannotCheck(f"cannot check {_describe(container_id)}: {path}: {exc}") from None
    result = plan(config, HostView("/"), settings)
    findings = result.unapplied()
    if not findings:
        return [], None
    from nvidia_oci_hook.runtime import logbook, messages

    entry = messages.log_entry(container_id, state["bundle"], [], findings)
    refusals = refusing(findings, settings.policy_fail_on)
    if refusals:
        message = messages.refusal(container_id, refusals)
        entry["refused"] = True
        logbook.record(settings, "prestart", entry, message, error=True)
        return findings, message
    logbook.record(settings, "prestart", entry, f"{_describe(container_id)}: {len(findings)} findings")
    return findings, None


def _describe(container_id: Optional[str]) -> str:
    return f"container {container_id}" if container_id else "the container"


def main(
    args: list[str], config_path: Optional[str] = None, state_dir: Optional[str] = None, read: Optional[str] = None
) -> int:
    """The hook modes. state_dir, given by the sh front, is where the record it reads is kept; read is what the
    front already read from stdin (which then holds nothing more), as the command line decoded its bytes."""
    from nvidia_oci_hook.runtime import codecache

    try:
        return _run(args, config_path, state_dir, read)
    finally:
        codecache.keep()


def _run(args: list[str], config_path: Optional[str], state_dir: Optional[str], read: Optional[str]) -> int:
    if len(args) != 1 or args[0] not in ("precreate", *GUARD_STAGES):
        return _fail(f"nvidia-oci-hook: {USAGE}")
    settings, problem = _settings(config_path, state_dir)
    if problem is not None:
        sys.stderr.write(problem + "\n")
    try:
        raw = io.read_bounded("-") if read is None else leanos.fsencode(read)
    except (io.TooLarge, OSError) as exc:
        return _fail(f"nvidia-oci-hook: cannot read stdin: {exc}")
    try:
        if args[0] == "precreate":
            output, refusal = precreate(raw, settings)
            if refusal is not None:
                return _fail(refusal)
            sys.stdout.buffer.write(output)
            sys.stdout.flush()
            return 0
        _findings, refusal = guard(raw, settings)
    except Exception as exc:  # our own bug must not block a container unless the policy says so
        if isinstance(exc, CannotCheck):
            message = f"nvidia-oci-hook: {exc}"
        else:
            message = f"nvidia-oci-hook: internal error in the {args[0]} hook: {type(exc).__name__}: {exc}"
        if settings.policy_fail_closed:
            return _fail(message + " (policy.fail_closed is set: the container is refused)")
        sys.stderr.write(message + "\n")
        if args[0] == "precreate":
            sys.stdout.buffer.write(raw)
        return 0
    return _fail(refusal) if refusal is not None else 0
