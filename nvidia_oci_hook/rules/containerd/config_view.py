"""What every CTD rule shares: the kind, the schema-level decorator, the config and its walks made once per
document, and how a message names the releases and the place it is about.

CTD0xx: containerd refuses to load the file (schema level). CTD1xx: containerd loads it, but ignores part of it,
or the CRI plugin or the pods that use a runtime fail later.

No rule knows which containerd runs on the node (rules never run programs): a finding names the releases it
applies to ("containerd 1.6 ignores ...", "containerd 1.7 and later refuse ..."), and `containerd --version`
on the node says which one matters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Callable

from nvidia_oci_hook.findings import Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.containerd.config import ContainerdConfig, cached_config
from nvidia_oci_hook.kinds.containerd.kind import CONTAINERD
from nvidia_oci_hook.kinds.containerd.structs import RUNC_OPTIONS
from nvidia_oci_hook.kinds.containerd.versions import ALL, describe_series, reads_as_version_2
from nvidia_oci_hook.kinds.containerd.walk import Walk, walk_table
from nvidia_oci_hook.rules.base import Check, Context, register

KINDS = [CONTAINERD]


def schema_rule(code: str, name: str) -> Callable[[Check], Check]:
    """A rule of --schema-only: an error means containerd refuses to load the file."""

    def wrap(check: Check) -> Check:
        register(code, name, Severity.ERROR, KINDS, schema_level=True, check=check)
        return check

    return wrap


def _config(value: Any, context: Context) -> ContainerdConfig:
    """The config as the release judged as reads it: 1.6 (and 1.7 before 1.7.20) read a version 3 or 4 file as a
    version 2 one, so every rule judges it as such there."""
    config = cached_config(value, context.memo)
    release = context.containerd_release
    if release is not None and config.version >= 3 and reads_as_version_2(release):
        read: ContainerdConfig = context.cached("containerd-read-as-2", lambda: ContainerdConfig(value, read_as=2))
        return read
    return config


def _walk(value: Any, context: Context) -> Walk:
    return context.cached("containerd-walk", lambda: _config(value, context).walk())  # type: ignore[no-any-return]


def _who(series: Iterable[str], verb: str) -> str:
    """'containerd 2.0 ignores', 'containerd 1.6 and 1.7 ignore': the releases and a verb that agrees."""
    phrase = describe_series(series)
    return f"{phrase} {verb if ' ' in phrase.removeprefix('containerd ') else verb + 's'}"


def _first_child(pointer: str, table: Mapping[str, Any]) -> str:
    """A pointer that has a line of its own: a table's first key when the table has no header line."""
    for key in table:
        return pointer_join(pointer, key)
    return pointer


def _quoted(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _runc_walk(config: ContainerdConfig) -> Walk:
    out = Walk()
    readers = config.readers or ALL
    for runtime in config.runtimes():
        options = runtime.options
        if runtime.is_runc and options is not None:
            walk_table(options, RUNC_OPTIONS, f"{runtime.pointer}/options", (*runtime.path, "options"), readers, out)
    return out


def _runc(value: Any, context: Context) -> Walk:
    return context.cached("containerd-runc", lambda: _runc_walk(_config(value, context)))  # type: ignore[no-any-return]
