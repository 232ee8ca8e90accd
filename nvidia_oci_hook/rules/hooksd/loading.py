"""What the loader makes of one hooks.d file on this host, once per lint run: its reading (`hook_file`) and
its existence check on the hook's program (`program`), which the rules of every HKD group consult."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.hooksd.hook_file import HookFile
from nvidia_oci_hook.kinds.hooksd.reading import read_hook
from nvidia_oci_hook.rules.base import Context


def hook_file(value: Any, context: Context) -> HookFile:
    result: HookFile = context.cached(f"hooksd:{id(value)}", lambda: read_hook(value))
    return result


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
