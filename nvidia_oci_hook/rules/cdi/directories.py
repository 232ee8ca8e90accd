"""CDI2xx: spec directories as the CDI cache reads them (priority, conflicts, files it never reads)."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.cdi.codes import CDI_DIRS
from nvidia_oci_hook.kinds.cdi.directories import Definition, SpecCollection, definitions
from nvidia_oci_hook.kinds.cdi.goformat import go_quote
from nvidia_oci_hook.kinds.collection import Collection
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.cdi.loader import judges


def _collection(value: Any) -> SpecCollection:
    """The collection as read_spec_dirs builds it; another cdi-dirs collection is taken as one directory."""
    if isinstance(value, SpecCollection):
        return value
    if isinstance(value, Collection):
        return SpecCollection(CDI_DIRS, value.directories, value.documents, value.skipped, value.parts)
    return SpecCollection(CDI_DIRS, [])


def _by_name(collection: SpecCollection, context: Context) -> dict[str, list[Definition]]:
    named: dict[str, list[Definition]] = defaultdict(list)
    for definition in definitions(collection, judges(context)[0].library):
        named[definition.name].append(definition)
    return named


def _conflicted(found: list[Definition]) -> bool:
    priorities = [definition.priority for definition in found]
    return len(priorities) != len(set(priorities))


@rule("CDI201", "conflicting-device", Severity.ERROR, [CDI_DIRS])
def conflicting_device(value: Any, context: Context) -> Iterator[Problem]:
    """Two spec files in one directory define the same device, and the CDI cache drops it.

    ## What it checks
    Qualified device names (`vendor/class=name`) defined by two or more loadable specs in the same spec
    directory.

    ## Why it matters
    The cache cannot choose between specs of equal priority: it records `conflicting device
    "nvidia.com/gpu=0" (specs "...", "...")` and removes the device altogether, even where a later directory
    defines it too. Containers that request it fail with `unresolvable CDI devices nvidia.com/gpu=0`. Two
    generators writing the same vendor and class (the GPU Operator and a hand-run `nvidia-ctk cdi generate`),
    or a spec copied to a backup name ending in `.json`, cause it.

    ## Example
    `/etc/cdi/nvidia.yaml` and `/etc/cdi/nvidia-old.json` both define `nvidia.com/gpu=0`.

    ## Fix
    Keep one spec per vendor and class in a directory: delete the stale copy, or move backups out of the spec
    directory (or at least to a name ending in `.bak`, which the library does not read).
    """
    collection = _collection(value)
    for name, found in _by_name(collection, context).items():
        if not _conflicted(found):
            continue
        count: dict[int, int] = defaultdict(int)
        for definition in found:
            count[definition.priority] += 1
        for definition in found:
            others = [other.path for other in found if other is not definition]
            if count[definition.priority] > 1:
                rivals = [o for o in found if o.priority == definition.priority and o is not definition]
                # The cache compares each later spec with the first one it kept, and names the later first.
                first = next(o for o in found if o.priority == definition.priority)
                later, earlier = (definition, first) if definition is not first else (rivals[0], first)
                message = (
                    f"{name} is also defined by {', '.join(o.path for o in rivals)} in the same directory: the CDI "
                    f"cache records conflicting device {go_quote(name)} (specs {go_quote(later.path)}, "
                    f"{go_quote(earlier.path)}) and drops the device, so requests for it fail with unresolvable "
                    f"CDI devices {name}"
                )
            else:
                message = (
                    f"{name} is defined here, but specs of one directory conflict over it "
                    f"({', '.join(others)}), and the CDI cache then drops it from every directory"
                )
            yield Problem(definition.pointer, message, "keep one spec per device in a directory", definition.path)


@rule("CDI202", "overridden-device", Severity.INFO, [CDI_DIRS])
def overridden_device(value: Any, context: Context) -> Iterator[Problem]:
    """A device is defined again in a later spec directory, whose definition wins.

    ## What it checks
    Qualified device names defined in two spec directories (and not in conflict within one): the CDI cache
    uses the definition from the later directory in the engine's list (for cri-o and containerd,
    `/var/run/cdi` over `/etc/cdi`).

    ## Why it matters
    Editing the overridden spec changes nothing, which is confusing at 3 a.m.; and when the later spec is
    removed (`/var/run` is cleared at boot), the earlier definition silently comes back.

    ## Example
    `/etc/cdi/nvidia.yaml` (written once by hand) and `/var/run/cdi/nvidia.yaml` (regenerated by the GPU
    Operator) both define `nvidia.com/gpu=all`.

    ## Fix
    Keep each device in one directory; delete the stale static spec if a generator owns the dynamic one.
    """
    collection = _collection(value)
    for name, found in _by_name(collection, context).items():
        if len(found) < 2 or _conflicted(found):
            continue
        winner = max(found, key=lambda definition: definition.priority)
        for definition in found:
            if definition is not winner:
                yield Problem(
                    definition.pointer,
                    f"{name} is overridden by {winner.path}, from a later spec directory: the engine uses that one",
                    f"remove {name} from one of the two specs",
                    definition.path,
                )


@rule("CDI203", "spec-file-not-read", Severity.WARNING, [CDI_DIRS])
def spec_file_not_read(value: Any, context: Context) -> Iterator[Problem]:
    """A CDI spec sits in a spec directory, but the CDI library never reads it.

    ## What it checks
    Files in a spec directory that hold a `cdiVersion` but whose names do not end exactly in `.json` or
    `.yaml` (`.yml`, `.JSON`), subdirectories holding such files (the library's scan reads only
    `*.json` and `*.yaml` directly in the directory), and `*.json` or `*.yaml` entries that cannot be read
    (a dangling symbolic link, no read permission).

    ## Why it matters
    The operator thinks the devices are defined; the engine has never heard of them and fails requests with
    `unresolvable CDI devices`. For an unreadable file the engine logs only `failed to load CDI Spec`.

    ## Example
    `/etc/cdi/nvidia.yml`, `/etc/cdi/nvidia/gpus.yaml`, or `/etc/cdi/nvidia.yaml` linking to a file that was
    removed.

    ## Fix
    Rename the file to `.yaml` (or `.json`) and put it directly in the spec directory; repair or remove a
    dangling link; if a file is meant to be ignored, move it out of the spec directory.
    """
    collection = _collection(value)
    for skipped in collection.skipped:
        if skipped.path in collection.unread:
            continue
        if skipped.reason.startswith("is a subdirectory"):
            hint = "move the specs up into the spec directory, or the subdirectory out of it"
        elif skipped.reason.startswith("cannot be read"):
            hint = "repair the file (or the link to it), or remove it"
        else:
            hint = "rename it to end in .yaml or .json"
        yield Problem(
            "",
            f"{os.path.basename(skipped.path)} {skipped.reason}: the engine never loads the devices it defines",
            hint,
            skipped.path,
        )


@rule("CDI204", "spec-directory-not-read", Severity.WARNING, [CDI_DIRS])
def spec_directory_not_read(value: Any, context: Context) -> Iterator[Problem]:
    """A spec directory is one the CDI library reads nothing from.

    ## What it checks
    Each spec directory: a symbolic link (the library walks it with filepath.Walk, which does not follow a
    link given as the root), something that is not a directory, or one that cannot be read.

    ## Why it matters
    Every spec in it is ignored without a word in the engine's log; a node where `/etc/cdi` was made a link to
    `/var/lib/cdi` has no CDI devices at all.

    ## Example
    `/etc/cdi -> /run/nvidia/cdi`.

    ## Fix
    Configure the engine with the real directory (`cdi_spec_dirs` in cri-o and containerd), or make the
    directory real and link the files instead.
    """
    collection = _collection(value)
    for directory, reason in collection.unread.items():
        target = collection.files.canonical(directory) or directory
        yield Problem(
            "",
            f"spec directory {directory} {reason}: the CDI library loads no spec from it",
            f"list {target} in the engine's cdi_spec_dirs instead"
            if target != directory
            else "make it a readable directory",
            directory,
        )
