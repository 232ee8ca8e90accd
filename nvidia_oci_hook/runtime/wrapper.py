"""The runtime wrapper: reconcile <bundle>/config.json on `create`, then exec the real runc or crun.

cri-o (`runtime_path`), containerd (the runc shim's `BinaryName`) and podman (`--runtime`) run it exactly as
they would run runc. Every subcommand other than `create` goes straight to the real runtime, whose process this
becomes (same pid, file descriptors and signals); stdout is left to the runtime alone, since cri-o parses what
`state` prints. Our own failures are written as runc writes its errors: to the `--log` file in the
`--log-format` asked for, and to stderr.

Installed, the wrapper is reached through a POSIX-sh dispatcher (`nvidia_oci_hook.launcher`) that execs the
low-level runtime itself for every call but `create`, and for a `create` whose config it can prove the plan would
leave alone. It reads what it needs from the record that `runtime.dispatch` keeps in the state directory.
"""

from __future__ import annotations

import sys
import time

from nvidia_oci_hook import leanos
from nvidia_oci_hook.runtime import dispatch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from nvidia_oci_hook.config import Settings

# Global options of runc and crun that take a value (runc parses with Go's flag package: -x, --x, -x=v, --x v).
GLOBAL_VALUE_OPTIONS = frozenset(("root", "log", "log-format", "log-level", "criu", "rootless", "cgroup-manager"))
# create's options that take a value.
CREATE_VALUE_OPTIONS = frozenset(("bundle", "b", "console-socket", "pid-file", "preserve-fds", "config", "f"))
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Invocation:
    """What the engine's argv says: the subcommand, and for create the bundle and container id."""

    __slots__ = ("bundle", "container_id", "log_file", "log_format", "subcommand")

    def __init__(self) -> None:
        self.subcommand: Optional[str] = None
        self.bundle: Optional[str] = None
        self.container_id: Optional[str] = None
        self.log_file: Optional[str] = None
        self.log_format = "text"


def _option(arg: str) -> tuple[str, Optional[str]]:
    """("name", value or None) for -name, --name, -name=value and --name=value."""
    name, equals, value = arg.lstrip("-").partition("=")
    return name, value if equals else None


def parse_invocation(args: list[str]) -> Invocation:
    invocation = Invocation()
    index = 0
    # Global options, up to the subcommand.
    while index < len(args):
        arg = args[index]
        if arg == "--":
            index += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        name, value = _option(arg)
        if name in GLOBAL_VALUE_OPTIONS and value is None:
            index += 1
            value = args[index] if index < len(args) else None
        if name == "log":
            invocation.log_file = value
        elif name == "log-format" and value:
            invocation.log_format = value
        index += 1
    if index >= len(args):
        return invocation
    invocation.subcommand = args[index]
    if invocation.subcommand != "create":
        return invocation
    index += 1
    positional_only = False
    while index < len(args):
        arg = args[index]
        if positional_only or not arg.startswith("-") or arg == "-":
            if invocation.container_id is None:
                invocation.container_id = arg
        elif arg == "--":
            positional_only = True
        else:
            name, value = _option(arg)
            if name in CREATE_VALUE_OPTIONS and value is None:
                index += 1
                value = args[index] if index < len(args) else None
            if name in ("bundle", "b") and value is not None:
                invocation.bundle = value
        index += 1
    return invocation


def _same_file(path: str, other: str) -> bool:
    try:
        return leanos.samefile(path, other)
    except OSError:
        return False


def find_runtime(names: tuple[str, ...], environ: dict[str, str]) -> Optional[str]:
    """The first of names that is an executable (a name is looked up in PATH), never this wrapper itself."""
    this = sys.argv[0] if sys.argv and sys.argv[0] else None
    directories = (environ.get("PATH") or _DEFAULT_PATH).split(":")
    for name in names:
        candidates = [name] if "/" in name else [leanos.join(d or ".", name) for d in directories]
        for candidate in candidates:
            if leanos.isfile(candidate) and leanos.access(candidate, leanos.X_OK):
                if this is not None and _same_file(candidate, this):
                    continue
                return candidate
    return None


def _runc_style(message: str, log_format: str) -> str:
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e9):09d}Z"
    if log_format == "json":
        from nvidia_oci_hook.engine import jsoncodec

        return jsoncodec.dumps({"level": "error", "msg": message, "time": stamp})
    quoted = message.replace("\\", "\\\\").replace('"', '\\"')
    return f'time="{stamp}" level=error msg="{quoted}"'


def report_failure(invocation: Invocation, message: str) -> None:
    line = _runc_style(message, invocation.log_format) + "\n"
    if invocation.log_file:
        try:
            fd = leanos.open(
                invocation.log_file, leanos.O_WRONLY | leanos.O_APPEND | leanos.O_CREAT | leanos.O_CLOEXEC, 0o644
            )
            try:
                leanos.write(fd, line.encode("utf-8", "replace"))
            finally:
                leanos.close(fd)
        except OSError:
            pass
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except OSError:
        pass


def reconcile_bundle(invocation: Invocation, settings: Settings) -> Optional[str]:
    """Reconcile the bundle's config.json in place; the refusal message when the policy refuses the container."""
    from nvidia_oci_hook import io
    from nvidia_oci_hook.engine import jsoncodec
    from nvidia_oci_hook.engine.pipeline import plan
    from nvidia_oci_hook.host import HostView

    bundle = leanos.abspath(invocation.bundle or ".")
    path = leanos.join(bundle, "config.json")
    try:
        config = jsoncodec.loads(io.read_bounded(path).decode("utf-8"))
    except (io.ReadError, io.TooLarge, UnicodeDecodeError, jsoncodec.JSONDecodeError):
        return None  # runc refuses it in its own words
    result = plan(config, HostView("/"), settings)
    if not (result.edits or result.findings):
        return None  # the common case: nothing to write, nothing to log
    from nvidia_oci_hook.runtime import logbook, messages

    refusals = result.refusals(settings.policy_fail_on)
    entry = messages.log_entry(invocation.container_id, bundle, result.edits, result.findings)
    if refusals:
        message = messages.refusal(invocation.container_id, refusals)
        entry["refused"] = True  # what the metrics count, without reading the words
        logbook.record(settings, "runtime", entry, message, error=True)
        return message
    if result.changed:
        io.write_atomic(path, jsoncodec.dumps(result.config).encode("utf-8"))
    logbook.record(settings, "runtime", entry, messages.headline(invocation.container_id, result))
    return None


def main(args: list[str], config_path: Optional[str] = None, state_dir: Optional[str] = None) -> int:
    """Run as runc would be run; returns only when the real runtime could not be exec'd.

    state_dir, given by the dispatcher, is where what it reads is recorded for it.
    """
    if args and args[0] == "--":
        args = args[1:]
    from nvidia_oci_hook.config import Settings

    invocation = parse_invocation(args)
    problem = None
    try:
        settings, problems = dispatch.load(config_path, state_dir)
        if problems:
            problem = f"nvidia-oci-hook: configuration ignored: {'; '.join(problems)}"
    except Exception as exc:  # our own bug: the defaults still let the container start
        settings = Settings()
        problem = f"nvidia-oci-hook: configuration ignored: internal error: {type(exc).__name__}: {exc}"
    environ = dict(leanos.environ())
    runtime = find_runtime(settings.runtime_low_level, environ)
    if runtime is None:
        report_failure(
            invocation,
            f"nvidia-oci-hook: none of {', '.join(settings.runtime_low_level)} found in PATH "
            f"({environ.get('PATH') or _DEFAULT_PATH}); set runtime.low_level in the configuration",
        )
        return 1
    if invocation.subcommand == "create":
        if problem is not None:
            report_failure(invocation, problem + "; the container's spec is not reconciled")
        try:
            refusal = reconcile_bundle(invocation, settings)
        except Exception as exc:  # our own bug must not block a container unless the policy says so
            reason = f"nvidia-oci-hook: internal error while reconciling the spec: {type(exc).__name__}: {exc}"
            if settings.policy_fail_closed:
                report_failure(invocation, reason + " (policy.fail_closed is set: the container is refused)")
                return 1
            report_failure(invocation, reason + " (the container starts with its spec unchanged)")
            refusal = None
        if refusal is not None:
            report_failure(invocation, refusal)
            return 1
    from nvidia_oci_hook.runtime import codecache

    codecache.keep()
    try:
        leanos.execv(runtime, [runtime, *args])
    except OSError as exc:
        report_failure(invocation, f"nvidia-oci-hook: cannot run {runtime}: {exc.strerror}")
        return 1
    return 1  # not reached: execv replaced this process


def run(config_path: Optional[str] = None, state_dir: Optional[str] = None) -> None:
    """`nvidia-oci-runtime`: the wrapper under a name engines can be given as a runtime path."""
    sys.exit(main(sys.argv[1:], config_path, state_dir))
