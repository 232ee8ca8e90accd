"""The drop-in directory's entries: those cri-o cannot read (CRO005), and leftovers it reads all the same (CRO112)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Sequence
from typing import Any

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.crio.merge import CrioConfig
from nvidia_oci_hook.rules.base import Context
from nvidia_oci_hook.rules.crio.config_view import crio_rule, key_at, view


@crio_rule("CRO005", "unreadable-config-entry", Severity.ERROR, schema_level=True)
def unreadable_config_entry(value: Any, context: Context) -> Iterator[Problem]:
    """An entry cri-o reads as a configuration file cannot be read as one.

    ## What it checks
    Every entry under the drop-in directory, walked as cri-o walks it (Go's `filepath.Walk`: links are not
    followed into directories, each non-directory entry is read with `os.ReadFile`): a symbolic link to a
    directory, a link to nothing, a named pipe, a socket; a drop-in directory that cannot be listed; and a
    drop-in directory that is itself a symbolic link (the walk reads the link as one file).

    ## Why it matters
    cri-o reads every entry whatever its name and stops at the first failure: `update config from path: walk
    path: read /etc/crio/crio.conf.d/old: is a directory`. A named pipe is worse: reading it blocks, and cri-o
    hangs at start-up without a message.

    ## Example
    `/etc/crio/crio.conf.d/backup -> /root/crio-backup` (a link to a directory), or `/etc/crio/crio.conf.d`
    itself a link to a ConfigMap mount.

    ## Fix
    Remove the entry, or replace the link with the file (or directory) it points to. A drop-in directory kept
    elsewhere should be named with cri-o's `--config-dir`, not linked.
    """
    current = view(value, context)
    if current is None or current.collection is None:
        return
    for entry in current.collection.unreadable:
        yield Problem(
            "",
            f"cri-o refuses this configuration: {entry.message} ({entry.detail})",
            "remove it from the drop-in directory, or put a regular file there",
            entry.path,
        )


_CONFIG_SUFFIXES = (".conf", ".toml")


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _is_setting(config: CrioConfig, pointer: str) -> bool:
    """A key holding a value (not a table, not an array element)."""
    parent = config.get(pointer[: pointer.rfind("/")], None)
    return isinstance(parent, dict) and not isinstance(config.get(pointer), dict)


@crio_rule("CRO112", "stray-dropin-file", Severity.WARNING)
def stray_dropin_file(value: Any, context: Context) -> Iterator[Problem]:
    """A file in crio.conf.d that looks like a leftover is read as a drop-in all the same.

    ## What it checks
    Files under the drop-in directory that are hidden, in a subdirectory, or not named `*.conf` or `*.toml`
    (editor and package-manager leftovers such as `99-nvidia.conf.bak`, `.99-nvidia.conf.swp`,
    `crio.conf.rpmnew`, `10-old.conf.disabled`), with the settings each one makes take effect.

    ## Why it matters
    Unlike most `.d` directories, cri-o reads every regular file under `crio.conf.d`, recursively, whatever its
    name, in lexical order, later files winning. A backup copy sorts right after the file it copies and so
    silently reinstates the old settings; a binary swap file stops cri-o with a TOML error.

    ## Example
    `99-nvidia.toml` sets `default_runtime = "nvidia"`; an old `99-nvidia.toml.bak` next to it sets
    `default_runtime = "runc"`, and cri-o runs with runc.

    ## Fix
    Move leftovers out of `crio.conf.d` (a disabled drop-in belongs outside it, not renamed inside it).
    """
    current = view(value, context)
    if current is None or current.collection is None:
        return
    collection = current.collection
    for path in collection.order:
        top = collection.found_under.get(path)
        if top is None:
            continue
        relative = posixpath.relpath(path, top) if path.startswith(top) else posixpath.basename(path)
        name = posixpath.basename(path)
        reasons = []
        if any(part.startswith(".") for part in relative.split("/")):
            reasons.append("hidden")
        if "/" in relative:
            reasons.append(f"in the subdirectory {posixpath.dirname(relative)}")
        if not name.endswith(_CONFIG_SUFFIXES):
            reasons.append("not named *.conf or *.toml")
        if not reasons:
            continue
        leaves = [p for p in current.config.set_by(path) if _is_setting(current.config, p)]
        if leaves:
            shown = ", ".join(key_at(p) for p in leaves[:3]) + (
                f" and {len(leaves) - 3} more" if len(leaves) > 3 else ""
            )
            effect = f"its settings take effect: {shown}"
        else:
            effect = "it sets nothing that takes effect today"
        yield Problem(
            "",
            f"{name} is {_and(reasons)}, but cri-o reads every file under {top} whatever its name: {effect}",
            f"move {path} out of {top}",
            path,
        )
