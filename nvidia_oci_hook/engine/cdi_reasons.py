"""Why a CDI device name is unresolvable: the one reason, in one place, for `cdi resolve`, lint's REC001, the
wrapper's log and the guard's refusal line.

The CDI cache says only `unresolvable CDI devices NAME`. The causes, in the order they are looked for (the first
that holds is the reason):

- cdi-off: the engine resolves no CDI device at all (containerd 1.6; 1.7 with `enable_cdi` unset or false);
- conflict: two specs in one directory define the name, and the cache drops it from every directory;
- spec-not-loaded: the spec that defines it is refused by the library (the engine logs why once, at WARN);
- library-too-old: the same, where only a newer release of the CDI library would load it (its cdiVersion or
  fields are newer than the engine's library);
- directory-not-scanned: the spec that defines it is in a directory this engine does not read;
- not-defined: no spec defines it (the spec holds indices and `all`, the request a UUID).

Standard library only, and imported by the runtime-facing modes only on the path where a request fails.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

CDI_OFF = "cdi-off"
CONFLICT = "conflict"
NOT_LOADED = "spec-not-loaded"
LIBRARY_TOO_OLD = "library-too-old"
NOT_SCANNED = "directory-not-scanned"
NOT_DEFINED = "not-defined"

# code -> (what it means, the usual fix), for the table of docs/commands/cdi.md and `cdi resolve --format json`.
REASONS = {
    CDI_OFF: (
        "CDI is off in this engine: it resolves no CDI device",
        "containerd 1.7: set enable_cdi = true in the CRI plugin table and restart; 1.6: upgrade, or let "
        "nvidia-oci-hook's runtime wrapper resolve the requests (configure --runtime containerd)",
    ),
    CONFLICT: (
        "two specs in one directory define the name, and the cache drops it from every directory",
        "keep one spec per vendor and class in a directory: delete the stale copy or move it out",
    ),
    NOT_LOADED: (
        "the spec that defines the name failed to load",
        "fix the spec as the library's error says (nvidia-oci-hook lint FILE), or regenerate it",
    ),
    LIBRARY_TOO_OLD: (
        "the engine's CDI library does not know the spec's cdiVersion or fields",
        "regenerate the spec with the lowest cdiVersion its content needs, or upgrade the engine",
    ),
    NOT_SCANNED: (
        "the spec that defines the name is in a directory this engine does not read",
        "move the spec into one of the engine's CDI spec directories, or add its directory to them",
    ),
    NOT_DEFINED: (
        "no spec defines the name",
        "request a name the specs define (nvidia-ctk cdi list), or regenerate the spec for this node's GPUs",
    ),
}

# Directories engines read CDI specs from by default or commonly (/var/run/cdi is /run/cdi on most nodes).
WELL_KNOWN_DIRS = ("/etc/cdi", "/var/run/cdi", "/run/cdi")

_HEX = frozenset("0123456789abcdefABCDEF-")


def declared_names(value: Any) -> list[str]:
    """The qualified names a parsed spec declares, read from its text however the library judges it."""
    if not isinstance(value, dict):
        return []
    kind, devices = value.get("kind"), value.get("devices")
    if not isinstance(kind, str) or not isinstance(devices, list):
        return []
    names = [device.get("name") for device in devices if isinstance(device, dict)]
    return [f"{kind}={name}" for name in names if isinstance(name, str)]


def unresolvable_text(names: Iterable[str]) -> str:
    """The error the CDI library returns, as each engine passes it on."""
    return "unresolvable CDI devices " + ", ".join(names)


def name_form(device: str) -> str:
    """How a device name refers to a GPU: uuid, index (0, 0:1 for MIG), all, or other."""
    if device == "all":
        return "all"
    parts = device.split(":")
    if len(parts) <= 2 and all(part.isascii() and part.isdigit() for part in parts):
        return "index"
    bare = device[4:] if device.startswith(("GPU-", "MIG-")) else device
    if bare and set(bare) <= _HEX and (bare != device or bare.count("-") == 4):
        return "uuid"
    return "other"


def nearest(name: str, defined: Iterable[str], limit: int = 8) -> list[str]:
    """The defined qualified names nearest to name: same vendor and class first, then the same form (a UUID for
    a UUID), then by likeness."""
    import difflib

    kind, _, device = name.partition("=")
    form = name_form(device)

    def key(candidate: str) -> tuple[int, int, float, str]:
        other_kind, _, other = candidate.partition("=")
        return (
            other_kind != kind,
            name_form(other) != form,
            -difflib.SequenceMatcher(None, device, other).ratio(),
            candidate,
        )

    return sorted(set(defined), key=key)[:limit]


def listed(names: list[str], total: int) -> str:
    return ", ".join(names) + (f" and {total - len(names)} more" if total > len(names) else "")


def not_defined_detail(name: str, defined: Iterable[str], dropped: Iterable[str] = ()) -> str:
    """What the specs define instead, nearest first, saying when the request and the specs name GPUs by
    different forms. dropped: the names the specs define twice in one directory, which the cache drops."""
    everything = sorted(set(defined))
    conflicting = sorted(set(dropped))
    kind, _, device = name.partition("=")
    same_kind = [candidate for candidate in everything if candidate.partition("=")[0] == kind]
    if not everything and conflicting:
        if len(conflicting) == 1:
            return (
                f"the one device the specs define, {conflicting[0]}, is defined by two specs in one directory, "
                "and the cache drops it"
            )
        return (
            f"the devices the specs define ({listed(conflicting[:8], len(conflicting))}) are each defined by two "
            "specs in one directory, and the cache drops them"
        )
    if conflicting:
        return (
            f"{_defined_instead(name, kind, device, everything, same_kind)}; dropped by the cache, as two specs in "
            f"one directory define them: {listed(conflicting[:8], len(conflicting))}"
        )
    return _defined_instead(name, kind, device, everything, same_kind)


def _defined_instead(name: str, kind: str, device: str, everything: list[str], same_kind: list[str]) -> str:
    if not everything:
        return "no spec defines any device"
    if not same_kind:
        return f"no spec defines {kind} devices; defined: {listed(nearest(name, everything), len(everything))}"
    forms = {name_form(candidate.partition("=")[2]) for candidate in same_kind}
    detail = f"defined: {listed(nearest(name, same_kind), len(same_kind))}"
    form = name_form(device)
    if form not in forms and form != "other":
        named = " and ".join(sorted(f for f in forms if f != "other")) or "other names"
        detail += f" (the request names the GPU by {form}, the specs by {named})"
    return detail
