"""The view every cri-o check works on, and where its findings point.

A rule gets either one file linted on its own (a dict: that file over cri-o's defaults) or a merged configuration
(a CrioCollection); every finding points at the file and line that set the value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.crio.go_values import go_key
from nvidia_oci_hook.kinds.crio.merge import CrioConfig, Origin, split_pointer
from nvidia_oci_hook.kinds.crio.reading import CRIO, CRIO_CONFIG, CrioCollection, single_file_config
from nvidia_oci_hook.rules.base import Check, Context, register

KINDS = (CRIO, CRIO_CONFIG)


@dataclass
class View:
    config: CrioConfig
    collection: Optional[CrioCollection]

    def problem(self, origin: Optional[Origin], message: str, hint: Optional[str] = None) -> Problem:
        if origin is None:
            origin = self.fallback()
        return Problem(origin.pointer, message, hint, origin.path)

    def fallback(self) -> Origin:
        """Where a finding about a default value goes: the main file, else the first file read."""
        if self.collection is None:
            return Origin(None, "")
        for path in self.collection.order:
            return Origin(path, "")
        return Origin(self.collection.main or self.collection.directories[0], "")

    def line(self, origin: Origin) -> Optional[int]:
        if self.collection is None or origin.path is None:
            return None
        document = self.collection.document(origin.path)
        return document.locate(origin.pointer).line if document is not None else None

    def at(self, origin: Optional[Origin]) -> str:
        """A place for a message: 'FILE line N' ('elsewhere in this file' for a file linted alone)."""
        if origin is None:
            return "cri-o's defaults"
        line = self.line(origin)
        if origin.path is None:
            return "elsewhere in this file"
        return f"{origin.path} line {line}" if line else origin.path

    def effective(self) -> Optional[CrioConfig]:
        """The merged config, for checks of what cri-o runs with; None when a file did not parse."""
        return self.config if self.config.complete else None


def view(value: Any, context: Context) -> Optional[View]:
    if isinstance(value, CrioCollection):
        return View(value.config, value)
    if isinstance(value, dict):
        config = context.cached(f"crio:{id(value)}", lambda: single_file_config(value))
        return View(config, None)
    return None


def crio_rule(
    code: str, name: str, severity: Severity, *, needs_host: bool = False, schema_level: bool = False
) -> Callable[[Check], Check]:
    def wrap(check: Check) -> Check:
        register(code, name, severity, KINDS, needs_host=needs_host, schema_level=schema_level, check=check)
        return check

    return wrap


def quote_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def key_at(pointer: str) -> str:
    """An effective pointer as a TOML key path: crio.runtime.hooks_dir."""
    return go_key(split_pointer(pointer))


def strings_at(config: CrioConfig, pointer: str) -> list[str]:
    value = config.get(pointer, [])
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []
