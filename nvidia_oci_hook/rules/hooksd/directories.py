"""HKD2xx: what only a whole hooks directory shows: names the engine passes over or cannot read, files that
mask or repeat each other, errors hidden behind a missing program, precreate where cri-o reads."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.hooksd.directories import (
    DOCUMENT,
    HOOKSD_DIRS,
    NOT_JSON,
    UNREADABLE,
    VANISHED,
    Entry,
    HooksCollection,
)
from nvidia_oci_hook.rules.base import Context, register, rule
from nvidia_oci_hook.rules.hooksd.loading import MISSING, UNUSABLE, _program_of, hook_file
from nvidia_oci_hook.rules.hooksd.silent_failures import _never_matches


def _documents(collection: Any) -> Optional[HooksCollection]:
    return collection if isinstance(collection, HooksCollection) else None


FAILS = "fails"  # the loader refuses the file: an error for the directory
SKIPPED = "skipped"  # the program is missing: "no such file or directory", forgiven by the directory reader
LOADS = "loads"


def outcome(entry: Entry, context: Context, crio: bool) -> str:
    """What the loader does with one *.json entry on this host (an unknown program is taken to exist)."""
    if entry.status == UNREADABLE:
        return FAILS
    if entry.status != DOCUMENT or entry.document is None:
        return LOADS  # not read at all: VANISHED and NOT_JSON entries are passed over
    document = entry.document
    if not document.parsed:
        # Go reads any size; this tool stops at its limit and cannot tell.
        return LOADS if any(p.code == "DOC004" for p in document.load_problems) else FAILS
    hook = hook_file(document.value, context)
    if any(not error.after_program_check for error in hook.errors):
        return FAILS
    found = _program_of(document.value, context)
    if found.state == MISSING:
        return SKIPPED
    if found.state == UNUSABLE:
        return FAILS
    if hook.errors or (crio and "precreate" in (hook.stages or [])):
        return FAILS
    return LOADS


def _json_name(name: str) -> str:
    if ".json" in name:
        return name[: name.rindex(".json")] + ".json"
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    return f"{stem}.json"


def _shown(entry: Entry) -> str:
    return entry.path


@rule("HKD201", "hook-file-ignored", Severity.WARNING, [HOOKSD_DIRS])
def hook_file_ignored(value: Any, context: Context) -> Iterator[Problem]:
    """A hooks file in a hooks directory that the engine passes over.

    ## What it checks
    Files whose content is a hooks.d file but whose name does not end in `.json` exactly (`nvidia.json.bak`,
    `oci-nvidia-hook.JSON`, `nvidia-hook.conf`), `*.json` names that are symbolic links to nothing, and, for
    cri-o, a `hooks_dir` entry that is not a directory (cri-o skips it with a warning).

    ## Why it matters
    The loader reads only names ending in `.json` and skips a name whose target does not exist, both without
    a log line in cri-o or podman: a hook installed under such a name never runs.

    ## Example
    `/usr/share/containers/oci/hooks.d/oci-nvidia-hook` (no extension).

    ## Fix
    Rename the file to end in `.json`, or delete it; re-point or remove the dangling link. To disable a hook
    on purpose, a suffix such as `.disabled` is fine: then ignore this finding for the file.
    """
    collection = _documents(value)
    if collection is None:
        return
    for entry in collection.entries:
        if entry.status == NOT_JSON and entry.looks_like_hook:
            yield Problem(
                "",
                f"{entry.name} is a hooks.d file, but the engine reads only names ending in .json: it is ignored",
                f"rename it to {_json_name(entry.name)}, or delete it",
                path=_shown(entry),
            )
        elif entry.status == UNREADABLE and not entry.name and collection.crio:
            yield Problem(
                "",
                f"{entry.path} is in cri-o's hooks_dir but is not a directory: cri-o skips it with a warning "
                "(Skipping invalid hooks directory) and loads no hooks from it",
                "remove it from hooks_dir, or make it a directory",
                path=entry.path,
            )
        elif entry.status == VANISHED:
            yield Problem(
                "",
                f"{entry.name} is {entry.reason}: the engine skips it without a word",
                "point the link at the hooks file, or remove it",
                path=_shown(entry),
            )


@rule("HKD202", "stray-file-in-hooks-dir", Severity.INFO, [HOOKSD_DIRS])
def stray_file_in_hooks_dir(value: Any, context: Context) -> Iterator[Problem]:
    """A file or directory in a hooks directory that is not a hooks file and that the engine ignores.

    ## What it checks
    Entries of a hooks directory whose names do not end in `.json` and that do not hold a hooks.d file:
    READMEs, editor backups, package-manager leftovers (`.rpmsave`, `.dpkg-old`), subdirectories (the loader
    does not descend into them).

    ## Why it matters
    Nothing breaks; but a hook placed in a subdirectory, or a backup someone edits believing it is live, is
    never read.

    ## Example
    `/etc/containers/oci/hooks.d/nvidia/nvidia.json` (one level too deep).

    ## Fix
    Move hooks files to the top of the directory; delete leftovers.
    """
    collection = _documents(value)
    if collection is None:
        return
    for entry in collection.entries:
        if entry.status == NOT_JSON and not entry.looks_like_hook:
            yield Problem(
                "",
                f"{entry.name} is not a *.json file: the engine ignores it (and does not descend into directories)",
                "move hooks files to the top of the directory with a .json name; delete leftovers",
                path=_shown(entry),
            )


@rule("HKD203", "hook-file-masked", Severity.WARNING, [HOOKSD_DIRS])
def hook_file_masked(value: Any, context: Context) -> Iterator[Problem]:
    """A hooks file has no effect: a file of the same name in another directory takes its place.

    ## What it checks
    For each file name present in more than one of the directories, which file the engine keeps: the one in
    the directory read last (`/etc/containers/oci/hooks.d` after `/usr/share/containers/oci/hooks.d` where
    both are configured) among those that load. A file whose program is missing does not load, so it masks
    nothing and the earlier file stays in effect. Names are compared exactly: `Nvidia.json` does not mask
    `nvidia.json`, both run.

    ## Why it matters
    An edit to the masked file changes nothing, which is easy to miss at 3 a.m. The masked file is still read
    and validated, so an error in it still breaks the directory.

    ## Example
    `/usr/share/containers/oci/hooks.d/nvidia.json` and `/etc/containers/oci/hooks.d/nvidia.json`, both read by
    podman with `hooks_dir = ["/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d"]`.

    ## Fix
    Edit the file that is in effect, or delete the one that is not.
    """
    collection = _documents(value)
    if collection is None:
        return
    by_name: dict[str, list[Entry]] = {}
    for entry in collection.entries:
        if entry.status in (DOCUMENT, UNREADABLE) and entry.name:
            by_name.setdefault(entry.name, []).append(entry)
    for entries in by_name.values():
        if len(entries) < 2:
            continue
        loaded = [entry for entry in entries if outcome(entry, context, collection.crio) == LOADS]
        if not loaded:
            continue
        winner = loaded[-1]
        for entry in entries:
            if entry is winner:
                continue
            if entries.index(entry) > entries.index(winner):
                yield Problem(
                    "",
                    f"{entry.path} would replace {winner.path}, but the engine skips it (its program is missing), "
                    f"so {winner.path} is in effect",
                    "install the program this file names, or delete the file",
                    path=entry.path,
                )
            else:
                yield Problem(
                    "",
                    f"{winner.path} replaces this file, which has no effect (the engine still reads it, so its "
                    "errors still count)",
                    f"edit {winner.path} instead, or delete this file",
                    path=entry.path,
                )


@rule("HKD204", "precreate-in-crio-hooks-dir", Severity.ERROR, [HOOKSD_DIRS])
def precreate_in_crio_hooks_dir(value: Any, context: Context) -> Iterator[Problem]:
    """A hooks directory that cri-o reads holds a precreate hook: cri-o refuses to start.

    ## What it checks
    When the directories are linted as cri-o's (`lint --node` on a cri-o node), every file with `precreate` in
    its stages whose program exists.

    ## Why it matters
    cri-o loads hooks without podman's extension stages: at start-up it fails with `unknown stage
    "precreate"` and the node runs no pods; a file added while cri-o runs is logged and skipped. (With the
    program missing, the loader skips the file before it looks at the stages.)

    ## Example
    A podman config-filter hook installed into `/usr/share/containers/oci/hooks.d`, cri-o's default
    `hooks_dir`.

    ## Fix
    Move the file to a directory only podman reads and list it in containers.conf's `hooks_dir`.
    """
    collection = _documents(value)
    if collection is None or not collection.crio:
        return
    for entry in collection.entries:
        if entry.document is None or not entry.document.parsed:
            continue
        hook = hook_file(entry.document.value, context)
        if not hook.decoded or _program_of(entry.document.value, context).state == MISSING:
            continue
        for index, stage in enumerate(hook.stages or []):
            if stage == "precreate":
                yield Problem(
                    hook.stage_pointer(index),
                    'cri-o reads this directory and refuses to start: unknown stage "precreate"',
                    "move the file to a hooks directory only podman reads",
                    path=entry.path,
                )


def hook_file_unreadable(value: Any, context: Context) -> Iterator[Problem]:
    """A *.json name in a hooks directory that the loader cannot read.

    ## What it checks
    `*.json` entries that are directories, FIFOs, sockets or devices, or that cannot be opened (permissions, a
    loop of symbolic links), and, for podman, a configured hooks "directory" that is not a directory.

    ## Why it matters
    The loader reads every `*.json` name and any read error other than "no such file" fails the directory:
    podman refuses every container (`Error: setting up OCI Hooks: read .../nvidia.json: is a directory`,
    `readdirent /etc/containers/oci/hooks.d: not a directory`) and cri-o does not start. A FIFO is worse: the
    read blocks, and so does the engine (measured: `podman run` hangs).

    ## Example
    `mkdir /usr/share/containers/oci/hooks.d/nvidia.json`

    ## Fix
    Remove the entry, or replace it with the hooks file it was meant to be.
    """
    collection = _documents(value)
    if collection is None:
        return
    for entry in collection.entries:
        if entry.status != UNREADABLE or (not entry.name and collection.crio):
            continue  # cri-o skips a hooks_dir entry that is not a directory (HKD201)
        if not entry.name:
            yield Problem(
                "",
                f"the configured hooks directory cannot be read: podman fails every container with '{entry.reason}'",
                "remove it from hooks_dir, or make it a directory",
                path=entry.path,
            )
            continue
        yield Problem(
            "",
            f"the loader cannot read {entry.name} ({entry.reason}) and refuses the whole directory",
            "remove it, or replace it with the hooks file it was meant to be",
            path=entry.path,
        )


register(
    "HKD205",
    "hook-file-unreadable",
    Severity.ERROR,
    [HOOKSD_DIRS],
    schema_level=True,
    doc=hook_file_unreadable.__doc__,
    check=hook_file_unreadable,
)


@rule("HKD206", "hook-error-hidden", Severity.WARNING, [HOOKSD_DIRS], needs_host=True)
def hook_error_hidden(value: Any, context: Context) -> Iterator[Problem]:
    """A broken hooks file that the engine overlooks today, only because an earlier file's program is missing.

    ## What it checks
    Within each directory, in the loader's order (names in byte order), whether the first file the loader
    fails on is one whose program does not exist. The directory reader forgives a directory whose first error
    is "no such file or directory", and with it every later error in that directory.

    ## Why it matters
    The broken file (reported by its own HKD0xx finding) does no harm today, but installing the missing
    program, or deleting its hooks file, suddenly makes podman refuse every container and cri-o refuse to start,
    with an error about a different file. Measured with podman 4.3: `a.json` naming a missing program and
    `b.json` with `"version": "2.0.0"` start containers; swap the names and every container fails.

    ## Example
    `10-old-hook.json` naming an uninstalled `/usr/libexec/oci/hooks.d/oci-systemd-hook`, and
    `20-nvidia.json` with a look-ahead in `when.commands`.

    ## Fix
    Correct the broken file now (its own finding says how), and remove the stale one.
    """
    collection = _documents(value)
    if collection is None or context.host is None:
        return
    for directory in collection.directories:
        first_error: Optional[tuple[Entry, str]] = None
        for entry in collection.entries_in(directory):
            if entry.status not in (DOCUMENT, UNREADABLE):
                continue
            result = outcome(entry, context, collection.crio)
            if result == LOADS:
                continue
            if first_error is None:
                first_error = (entry, result)
                continue
            if result == FAILS and first_error[1] == SKIPPED:
                stale = first_error[0]
                yield Problem(
                    "",
                    f"the engine overlooks this file's error today only because {stale.name}, which sorts before it, "
                    "names a program that does not exist: installing that program, or deleting that file, makes the "
                    "engine fail on this one",
                    f"correct this file now; remove {stale.path} if its program is gone for good",
                    path=entry.path,
                )


@rule("HKD207", "hook-program-twice", Severity.WARNING, [HOOKSD_DIRS])
def hook_program_twice(value: Any, context: Context) -> Iterator[Problem]:
    """Two hooks files in effect inject the same program, with the same arguments, at the same stage.

    ## What it checks
    Among the files the engine keeps (after masking, HKD203) whose conditions can match, pairs with the same
    `hook.path` and `hook.args` and a common stage, counting `prestart` and `createRuntime` as one; for example
    the toolkit's `oci-nvidia-hook.json` left beside a newer `nvidia-container-toolkit.json`, or `Nvidia.json`
    beside `nvidia.json` (names that differ in case do not mask each other).

    ## Why it matters
    Where both match a container the program runs twice on it. Hooks that inject devices, mounts or libraries
    are seldom written to run twice; if the second run fails, so does the container, and if it succeeds the
    work is done twice on every start.

    ## Example
    `/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json` and `.../nvidia-container-toolkit.json`, both
    running `/usr/bin/nvidia-container-toolkit` at prestart.

    ## Fix
    Delete the older file.
    """
    collection = _documents(value)
    if collection is None:
        return
    kept: dict[str, Entry] = {}
    for entry in collection.entries:
        if entry.status == DOCUMENT and outcome(entry, context, collection.crio) == LOADS:
            kept[entry.name] = entry
    seen: dict[tuple[str, str, Optional[tuple[str, ...]]], Entry] = {}
    for name in sorted(kept, key=str.lower):
        entry = kept[name]
        assert entry.document is not None
        hook = hook_file(entry.document.value, context)
        if not hook.path or _never_matches(hook) is not None:
            continue
        stages = hook.stages or []
        for index, stage in enumerate(stages):
            key = (
                posixpath.normpath(hook.path),
                "createRuntime" if stage == "prestart" else stage,
                tuple(hook.args) if hook.args is not None else None,
            )
            other = seen.setdefault(key, entry)
            if other is not entry:
                yield Problem(
                    hook.stage_pointer(index),
                    f"{other.path} already injects {hook.path} at {key[1]}: where both match, the program runs twice",
                    f"delete the older of {other.name} and {entry.name}",
                    path=entry.path,
                )
