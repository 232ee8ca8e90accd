"""Qualified CDI device names (vendor/class=name) as the CDI library's parser accepts them, and how its cache
settles a name that several specs define.

Kept apart from the kinds/cdi package, which models the whole library and is costly to import: the runtime-facing modes
parse requested names on every container start.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Optional, TypeVar

    T = TypeVar("T")


def _part_error(part: str, what: str, extra: str) -> Optional[str]:
    """Why the library refuses one part of a qualified name, in this tool's words, or None."""
    if not part:
        return f"empty {what}"
    first_ok = part[0].isascii() and (part[0].isalpha() or (what == "device name" and part[0].isdigit()))
    if not first_ok:
        return f"{what} {part!r} must start with a letter" + (" or digit" if what == "device name" else "")
    if len(part) == 1 and what != "device name":
        # The library slices name[1:len-1], which panics for a single character.
        return f"{what} {part!r} is a single character, which the CDI library cannot parse"
    for char in part[1:-1]:
        if not (char.isascii() and (char.isalnum() or char in extra)):
            return f"invalid character {char!r} in {what} {part!r}"
    if not (part[-1].isascii() and part[-1].isalnum()):
        return f"{what} {part!r} must end with a letter or digit"
    return None


def cdi_name_error(name: str) -> Optional[str]:
    """Why name is not a qualified CDI device name (vendor/class=name), or None (pkg/parser ParseQualifiedName)."""
    qualifier, equals, device = name.partition("=")
    vendor, slash, cls = qualifier.partition("/")
    if name.startswith("/") or not equals or not qualifier or not device or not slash or not vendor or not cls:
        return f"{name!r} is not a qualified CDI device name (vendor/class=name)"
    return (
        _part_error(vendor, "vendor", "_-.")
        or _part_error(cls, "class", "_-.")
        or _part_error(device, "device name", "_-.:")
    )


def cache_settle(definitions: Iterable[tuple[str, int, T]]) -> tuple[dict[str, T], dict[str, list[T]]]:
    """The CDI cache's rule (Cache.refresh) for a qualified name defined more than once, given (name, directory
    priority, definition) in scan order: a later directory's definition replaces an earlier one, two definitions
    in one directory conflict, and a conflicting name is dropped altogether. Returns the winners, and each
    conflicting name with the definitions that fought over it."""
    winners: dict[str, tuple[int, T]] = {}
    conflicts: dict[str, list[T]] = {}
    for name, priority, definition in definitions:
        earlier = winners.get(name)
        if earlier is not None and earlier[0] == priority:
            fought = conflicts.setdefault(name, [earlier[1]])
            fought.append(definition)
            continue
        winners[name] = (priority, definition)
    return {name: definition for name, (_, definition) in winners.items() if name not in conflicts}, conflicts


def cache_winners(definitions: Iterable[tuple[str, int, T]]) -> dict[str, T]:
    """The definitions the CDI cache resolves, by qualified name (see cache_settle)."""
    return cache_settle(definitions)[0]
