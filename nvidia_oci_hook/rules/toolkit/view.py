"""The view every NCT check works on: the file decoded for the release that judges it, and where findings point."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from nvidia_oci_hook.findings import Severity
from nvidia_oci_hook.kinds.toolkit import TOOLKIT
from nvidia_oci_hook.kinds.toolkit.decode import Decoded, decode
from nvidia_oci_hook.kinds.toolkit.releases import ToolkitRelease, newest, release_for
from nvidia_oci_hook.kinds.toolkit.schema import table_for
from nvidia_oci_hook.rules.base import Check, Context, register

KINDS = (TOOLKIT,)
# What a finding that stops the runtime and the hook says happens, once for all of them.
EVERY_GPU_CONTAINER = "every GPU container through nvidia-container-runtime or its hook now fails"


@dataclass
class View:
    release: ToolkitRelease
    decoded: Decoded
    named: bool  # the release was named (--engine) or found on the node, rather than assumed

    @property
    def label(self) -> str:
        return f"toolkit {self.release.version}" + ("" if self.named else " (the newest modelled)")

    def value(self, key: str) -> Any:
        return self.decoded.value(key)

    def mode(self) -> str:
        value = self.value("nvidia-container-runtime.mode")
        return value if isinstance(value, str) else "auto"


def _position(context: Context) -> Callable[[str], str]:
    document = context.document

    def position(pointer: str) -> str:
        if document is None:
            return "(?, ?)"
        location = document.locate(pointer)
        line = document.text.split("\n")[location.line - 1] if location.line else ""
        # go-toml v1 records no position for an inline table: it says (0, 0).
        if re.match(r"\s*[^=#]+=\s*\{", line):
            return "(0, 0)"
        return f"({location.line or '?'}, {location.column or 1})"

    return position


def release_of(context: Context) -> tuple[ToolkitRelease, bool]:
    """The release judging: the one named or found, else the newest (and whether it was named)."""
    if context.toolkit_release:
        return release_for(context.toolkit_release), True
    return newest(), False


def view(value: Any, context: Context) -> View:
    def build() -> View:
        release, named = release_of(context)
        return View(release, decode(value, table_for(release), release.defaults, _position(context)), named)

    return context.cached("toolkit-view", build)  # type: ignore[no-any-return]


def toolkit_rule(code: str, name: str, severity: Severity, *, needs_host: bool = False) -> Callable[[Check], Check]:
    def wrap(check: Check) -> Check:
        register(code, name, severity, KINDS, needs_host=needs_host, check=check)
        return check

    return wrap
