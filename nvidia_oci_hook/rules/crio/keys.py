"""Keys cri-o does not read and so ignores (CRO101), and keys of one table it reads into one setting (CRO111)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.crio.go_values import go_key, go_key_part, table_header
from nvidia_oci_hook.kinds.crio.key_table import (
    CRIO_VERSION,
    REMOVED_KEYS,
    TOP,
    Spec,
    StringMap,
    Table,
    TableMap,
    all_tables,
)
from nvidia_oci_hook.kinds.crio.merge import CrioConfig, Origin, Unknown, split_pointer
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


_MISSING: Any = object()


def _is_table(spec: Spec) -> bool:
    return isinstance(spec, (Table, TableMap, StringMap))


def _homes(key: str, here: Optional[tuple[str, ...]], tables: Optional[bool] = None) -> list[tuple[str, ...]]:
    """The tables where a key of this name is read, other than `here`; `()` is the top level, so None is what
    excludes no table. With `tables`, only those where it names a table (True) or a value (False)."""
    folded = key.casefold()
    return [
        path
        for path, table in all_tables()
        if path != here
        and any(
            name.casefold() == folded and (tables is None or _is_table(spec) == tables)
            for name, spec in table.fields.items()
        )
    ]


def _place(path: Sequence[str]) -> str:
    return table_header(path) if path else "the top level"


def _resolve(path: Sequence[str]) -> Optional[Spec]:
    """What a key path from the top decodes into, names matched as cri-o matches them; None: nothing."""
    spec: Spec = TOP
    for part in path:
        if isinstance(spec, TableMap):
            spec = spec.element  # the part names an entry
            continue
        if not isinstance(spec, Table):
            return None
        found = spec.lookup(part)
        if found is None:
            return None
        spec = found[1]
    return spec


def _fits(datum: Any, spec: Optional[Spec]) -> bool:
    """Whether a value would be decoded, every key of it known, if it sat where `spec` is read. Only known keys
    are followed, so this goes no deeper than the key table, however deep the value."""
    if spec is None:
        return False
    if datum is _MISSING:
        return True
    if isinstance(spec, Table):
        if not isinstance(datum, dict):
            return False
        for name, item in datum.items():
            found = spec.lookup(name)
            if found is None or not _fits(item, found[1]):
                return False
        return True
    if isinstance(spec, TableMap):
        return isinstance(datum, dict) and all(_fits(item, spec.element) for item in datum.values())
    return isinstance(datum, dict) == isinstance(spec, StringMap)


def _datum(config: CrioConfig, origin: Origin) -> Any:
    """The value a file holds at a pointer, as parsed."""
    for file in config.files:
        if file.path != origin.path or not file.parsed:
            continue
        node = file.value
        for part in split_pointer(origin.pointer):
            if not isinstance(node, dict) or part not in node:
                return _MISSING
            node = node[part]
        return node
    return _MISSING


def _table_specs(path: tuple[str, ...]) -> list[tuple[str, Spec]]:
    for candidate, table in all_tables():
        if candidate == path:
            return list(table.fields.items())
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


def _close(key: str, names: Sequence[str], cutoff: float) -> Optional[str]:
    folded = {name.casefold(): name for name in names}
    found = difflib.get_close_matches(key.casefold(), list(folded), n=1, cutoff=cutoff)
    return folded[found[0]] if found else None


def _fields_of_kind(tables: bool) -> list[str]:
    return sorted(
        {name for _, table in all_tables() for name, spec in table.fields.items() if _is_table(spec) == tables}
    )


def _match(datum: Any, spec: Optional[Spec]) -> tuple[bool, float]:
    """How well a value would be read where `spec` is read: whole, else the share of its own keys known there."""
    if _fits(datum, spec):
        return True, 1.0
    if isinstance(datum, dict) and datum:
        if isinstance(spec, Table):
            return False, sum(spec.lookup(name) is not None for name in datum) / len(datum)
        if isinstance(spec, TableMap):
            return False, sum(isinstance(item, dict) for item in datum.values()) / len(datum)
    return False, 0.0


def _best_first(homes: list[tuple[str, ...]], name: str, datum: Any) -> list[tuple[str, ...]]:
    """The homes where more of the value would be read first; ties in the key table's order."""
    return sorted(homes, key=lambda home: _match(datum, _resolve((*home, name))), reverse=True)


def _moved(home: Sequence[str], name: str, rest: Sequence[str]) -> str:
    return "[" + ".".join([*map(go_key_part, home), go_key_part(name), *map(go_key_part, rest)]) + "]"


def unknown_message(unknown: Unknown, datum: Any = _MISSING) -> tuple[str, str]:
    """The message and hint for a key cri-o ignores; `datum` is the value the file gives it, when known."""
    parts = split_pointer(unknown.origin.pointer)
    # Where the finding points: for a table, the innermost table along its first keys, where a header such as
    # [crio.runtime.runtime.nvidia] opens it; hints name that table, the one the user wrote.
    at = split_pointer(unknown.at)
    rest = at[len(parts) :]
    key = go_key_part(unknown.key)
    what = f"table [{go_key(parts)}]" if unknown.is_table else f"key {key}"
    where = f" in [{go_key(parts[:-1])}]" if len(parts) > 1 and not unknown.is_table else ""
    lead = f"cri-o {CRIO_VERSION} ignores {what}{where}, silently"
    removed_key = (*unknown.table, unknown.key)
    if removed_key in REMOVED_KEYS:
        return f"{lead}: {REMOVED_KEYS[removed_key]}", f"delete {key}"
    if "." in unknown.key:
        # "a.b" = 1 is one key named a.b; cri-o's decoder does not split it, however it is spelt.
        unquoted = unknown.key.split(".")
        if _fits(datum, _resolve((*parts[:-1], *unquoted))):
            return f"{lead}: the quotes make {key} one key with a dot in its name, not the path {go_key(unquoted)}", (
                f"write {go_key(unquoted)} without the quotes"
            )
    here = _place(parts[:-1])
    # Two readings compete: a misspelt sibling table (meant) and the same name where another table reads it
    # (homes); the one that would read more of what the file holds wins, the misspelling on a tie.
    meant = meant_table(unknown)
    homes = _best_first(_homes(unknown.key, unknown.table, unknown.is_table), unknown.key, datum)
    if meant is not None and (
        not homes or _match(datum, _resolve(meant[: len(parts)])) >= _match(datum, _resolve((*homes[0], unknown.key)))
    ):
        sibling = meant[len(unknown.table)]
        return f"{lead}: did you mean [{go_key((*unknown.table, sibling))}]?", (
            f"write [{go_key(at)}] as [{go_key(meant)}]"
        )
    if homes:
        listed = " and ".join(_place(home) for home in homes)
        if unknown.is_table:
            message = f"{lead}: {key} is a table of {listed}, not of {here}"
            if len(homes[0]) < len(unknown.table) and tuple(unknown.table[: len(homes[0])]) == homes[0]:
                # The usual cause: a dotted key spelt from the top, as if the table it sits in did not count.
                message += f"; names inside {here} are relative to it, so this is [{go_key(at)}]"
            return message, f"write [{go_key(at)}] as {_moved(homes[0], unknown.key, rest)}"
        return f"{lead}: {key} is read in {listed}, not in {here}", f"move {key} under {_place(homes[0])}"
    if not unknown.table:
        if unknown.key in _CONTAINERD_KEYS:
            return f"{lead}: it reads only the [crio] table, and this looks like containerd's configuration", (
                "move containerd settings to /etc/containerd/config.toml"
            )
        if _close(unknown.key, ["crio"], 0.6):
            return f"{lead}: it reads only the [crio] table", f"rename [{key}] to [crio]"
        return f"{lead}: it reads only the [crio] table", "delete it, or move its settings under [crio]"
    if not unknown.is_table:
        # A table of a close name is meant_table's; a value is only ever the misspelling of a value.
        close = _close(unknown.key, [n for n, s in _table_specs(unknown.table) if not _is_table(s)], 0.75)
        if close:
            return f"{lead}: did you mean {close}?", f"rename {key} to {close}"
    elsewhere = _close(unknown.key, _fields_of_kind(unknown.is_table), 0.8)
    if elsewhere:
        home = _best_first(_homes(elsewhere, None, unknown.is_table), elsewhere, datum)[0]
        if unknown.is_table:
            return f"{lead}: did you mean {go_key_part(elsewhere)}, a table of {_place(home)}?", (
                f"write [{go_key(at)}] as {_moved(home, elsewhere, rest)}"
            )
        return f"{lead}: did you mean {elsewhere}, which is read in {_place(home)}?", (
            f"rename {key} to {elsewhere} and move it under {_place(home)}"
        )
    return f"{lead}: {here} has no such {'table' if unknown.is_table else 'key'}", (
        f"delete {key}, or check its spelling"
    )


@crio_rule("CRO101", "unknown-key", Severity.WARNING)
def unknown_key(value: Any, context: Context) -> Iterator[Problem]:
    """A table or key that cri-o does not read, and therefore ignores without a word.

    ## What it checks
    Every table and key of every file against the keys cri-o 1.37 decodes (its `Config` structs; names are
    matched as cri-o's decoder matches them, exactly or else ignoring case). An unknown one is reported with the
    likely intent: a misspelling of a key of the same table, a key that belongs to another table (`hooks_dir`
    under `[crio]` instead of `[crio.runtime]`), a key removed from cri-o, or a whole table outside `[crio]`.
    A dotted key is read relative to the table it is written in, as TOML says: `crio.image.pause_image = "..."`
    inside `[crio.runtime]` is `[crio.runtime.crio.image]`, which cri-o does not read. A quoted key holding dots
    (`"crio.runtime.log_level"`) is one key of that name, which cri-o's decoder does not split.

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
        message, hint = unknown_message(unknown, _datum(current.config, unknown.origin))
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
