"""Keys cri-o does not read and so ignores (CRO101), and keys of one table it reads into one setting (CRO111)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.crio.go_values import go_key, go_key_part, table_header
from nvidia_oci_hook.kinds.crio.key_table import CRIO_VERSION, REMOVED_KEYS, Table, TableMap, all_tables
from nvidia_oci_hook.kinds.crio.merge import Origin, Unknown, split_pointer
from nvidia_oci_hook.rules.base import Context
from nvidia_oci_hook.rules.crio.config_view import crio_rule, view

_CONTAINERD_KEYS = frozenset(
    [
        "version",
        "root",
        "state",
        "plugins",
        "grpc",
        "ttrpc",
        "debug",
        "metrics",
        "cgroup",
        "timeouts",
        "proxy_plugins",
        "stream_processors",
        "imports",
        "disabled_plugins",
        "required_plugins",
        "oom_score",
        "temp",
        "plugin_dir",
    ]
)


def _homes(key: str, here: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The tables where a key of this name is read, other than here."""
    folded = key.casefold()
    return [
        path for path, table in all_tables() if path != here and any(name.casefold() == folded for name in table.fields)
    ]


def _table_fields(path: tuple[str, ...]) -> list[str]:
    for candidate, table in all_tables():
        if candidate == path:
            return list(table.fields)
    return []


def _table_fields_that_are_tables(path: tuple[str, ...]) -> list[str]:
    for candidate, table in all_tables():
        if candidate == path:
            return [name for name, spec in table.fields.items() if isinstance(spec, (Table, TableMap))]
    return []


def meant_table(unknown: Unknown) -> Optional[tuple[str, ...]]:
    """For a table of a misspelt name (`[crio.runtime.runtime.nvidia]`), the one it stands for, by the name of
    a table the same table reads (`[crio.runtime.runtimes.nvidia]`); the innermost table along its first keys."""
    if not unknown.is_table:
        return None
    sibling = _close(unknown.key, _table_fields_that_are_tables(unknown.table), 0.75)
    if sibling is None:
        return None
    inner = split_pointer(unknown.at)
    return (*inner[: len(unknown.table)], sibling, *inner[len(unknown.table) + 1 :])


def _all_fields() -> list[str]:
    return sorted({name for _, table in all_tables() for name in table.fields})


def _close(key: str, names: Sequence[str], cutoff: float) -> Optional[str]:
    folded = {name.casefold(): name for name in names}
    found = difflib.get_close_matches(key.casefold(), list(folded), n=1, cutoff=cutoff)
    return folded[found[0]] if found else None


def unknown_message(unknown: Unknown) -> tuple[str, str]:
    parts = split_pointer(unknown.origin.pointer)
    what = f"table [{go_key(parts)}]" if unknown.is_table else f"key {go_key(parts[-1:])}"
    where = f" in [{go_key(parts[:-1])}]" if len(parts) > 1 and not unknown.is_table else ""
    lead = f"cri-o {CRIO_VERSION} ignores {what}{where}, silently"
    removed_key = (*unknown.table, unknown.key)
    if removed_key in REMOVED_KEYS:
        return f"{lead}: {REMOVED_KEYS[removed_key]}", f"delete {unknown.key}"
    meant = meant_table(unknown)
    if meant is not None:
        sibling = meant[len(unknown.table)]
        return f"{lead}: did you mean [{go_key((*unknown.table, sibling))}]?", (
            f"write [{go_key(split_pointer(unknown.at))}] as [{go_key(meant)}]"
        )
    homes = _homes(unknown.key, unknown.table)
    here = table_header(unknown.table) if unknown.table else "the top level"
    if homes:
        listed = " and ".join(table_header(home) for home in homes)
        if unknown.is_table:
            moved = "[" + ".".join([*map(go_key_part, homes[0]), *map(go_key_part, parts[len(unknown.table) :])]) + "]"
            return f"{lead}: {unknown.key} is a table of {listed}, not of {here}", f"write [{go_key(parts)}] as {moved}"
        return f"{lead}: {unknown.key} is read in {listed}, not in {here}", (
            f"move {unknown.key} under {table_header(homes[0])}"
        )
    if not unknown.table:
        if unknown.key in _CONTAINERD_KEYS:
            return f"{lead}: it reads only the [crio] table, and this looks like containerd's configuration", (
                "move containerd settings to /etc/containerd/config.toml"
            )
        if _close(unknown.key, ["crio"], 0.6):
            return f"{lead}: it reads only the [crio] table", f"rename [{unknown.key}] to [crio]"
        return f"{lead}: it reads only the [crio] table", "delete it, or move its settings under [crio]"
    close = _close(unknown.key, _table_fields(unknown.table), 0.75)
    if close:
        return f"{lead}: did you mean {close}?", f"rename {unknown.key} to {close}"
    elsewhere = _close(unknown.key, _all_fields(), 0.8)
    if elsewhere:
        home = table_header(_homes(elsewhere, ())[0])
        return f"{lead}: did you mean {elsewhere}, which is read in {home}?", (
            f"rename {unknown.key} to {elsewhere} and move it under {home}"
        )
    return f"{lead}: {here} has no such key", f"delete {unknown.key}, or check its spelling"


@crio_rule("CRO101", "unknown-key", Severity.WARNING)
def unknown_key(value: Any, context: Context) -> Iterator[Problem]:
    """A table or key that cri-o does not read, and therefore ignores without a word.

    ## What it checks
    Every table and key of every file against the keys cri-o 1.37 decodes (its `Config` structs; names are
    matched as cri-o's decoder matches them, exactly or else ignoring case). An unknown one is reported with the
    likely intent: a misspelling of a key of the same table, a key that belongs to another table (`hooks_dir`
    under `[crio]` instead of `[crio.runtime]`), a key removed from cri-o, or a whole table outside `[crio]`.

    ## Why it matters
    cri-o discards the decoder's list of undecoded keys: a misspelt or misplaced setting is dropped without a
    log line, and cri-o runs with the default. This is how `privileged_without_host_devices = true` written as
    `privileged_without_host_device`, or `[crio.runtimes.nvidia]` instead of `[crio.runtime.runtimes.nvidia]`,
    leaves a GPU runtime unconfigured while the file looks right.

    ## Example
    ```toml
    [crio.runtime.runtimes.nvidia]
    runtime_path = "/usr/bin/nvidia-container-runtime"
    privileged_without_host_device = true
    ```

    ## Fix
    Rename or move the key as the message says; delete keys that belong to another program or an older cri-o.
    `crio config` prints the configuration cri-o really runs with.
    """
    current = view(value, context)
    if current is None:
        return
    for unknown in current.config.unknown:
        message, hint = unknown_message(unknown)
        yield current.problem(Origin(unknown.origin.path, unknown.at), message, hint)


@crio_rule("CRO111", "case-variant-keys", Severity.WARNING)
def case_variant_keys(value: Any, context: Context) -> Iterator[Problem]:
    """Two keys of one table differ only in case, and cri-o reads both into the same setting.

    ## What it checks
    Keys of the same table that name the same cri-o setting once case is ignored (`hooks_dir` and `Hooks_Dir`).

    ## Why it matters
    cri-o's decoder matches keys to settings without regard to case, and walks a table's keys in Go's random map
    order: which of the two values cri-o runs with can change from one restart to the next.

    ## Example
    ```toml
    [crio.runtime]
    default_runtime = "nvidia"
    Default_Runtime = "crun"
    ```

    ## Fix
    Keep one of the keys, spelt in lower case as cri-o documents it.
    """
    current = view(value, context)
    if current is None:
        return
    for clash in current.config.case_clashes:
        yield current.problem(
            clash.origin,
            f"{clash.keys[1]} and {clash.keys[0]} (at {current.at(clash.other)}) both set {clash.field}; cri-o takes "
            "them in random order, so either value may win at each start",
            f"delete one of them and spell the other {clash.field}",
        )
