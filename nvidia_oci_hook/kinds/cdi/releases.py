"""The CDI library's releases, what each one's `cdi.ReadSpec` accepts, and which engine releases vendor which.

Every release decodes a spec strictly and validates it in the same order; they differ in the spec versions they
know, the fields their specs-go types have, the features that need a newer spec version, and a few checks and
texts. Each difference was read at the release's tag (pkg/cdi, pkg/parser, specs-go); a `Library` holds them,
and the decoding and validation of this package ask it wherever releases differ.

The engine table is from each engine release's go.mod (containerd, cri-o, podman: CDI is a direct requirement
in each). Distribution builds against the distribution's own Go packages may vendor another release (Debian's
containerd 1.7.24 is built with library 0.8): `--cdi-library` names the release where that matters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

EARLIEST_SPEC_VERSION = "0.3.0"
_ALL_SPEC_VERSIONS = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")


def version_key(version: str) -> tuple[int, ...]:
    """A dotted version as numbers; a suffix after the numbers ("2.4.0-beta.0", "1.7.24~ds1") is ignored."""
    numbers = []
    for part in version.split("."):
        digits = ""
        for char in part:
            if not char.isdigit():
                break
            digits += char
        if not digits:
            break
        numbers.append(int(digits))
        if len(digits) < len(part):
            break
    return tuple(numbers)


@dataclass(frozen=True)
class Library:
    """One release of tags.cncf.io/container-device-interface (github.com/container-orchestrated-devices/...
    before 0.6.2), as its ReadSpec reads a spec."""

    release: str
    newest_spec_version: str
    # A leading "v" is stripped before the version is looked up (from 0.5.4; 0.5.2 and 0.5.3 take the exact text).
    v_prefix: bool = True
    # MinimumRequiredVersion is checked (from 0.5.4).
    minimum_check: bool = True
    # Spec and device annotations (from 0.6.0).
    annotations: bool = True
    # intelRdt and additionalGids (from 0.7.0).
    intel_rdt: bool = True
    # netDevices, intelRdt.schemata and enableMonitoring, with enableCMT and enableMBM gone (1.1.0).
    net_devices: bool = False
    # Before 1.0.0 a device name needs spec 0.5.0 unless its first byte is an ASCII letter (from 1.0.0: a digit).
    name_needs_letter: bool = False
    # 0.6 to 0.8: a "." in the class needs spec 0.6.0 only where kind has a vendor and a class.
    dotted_class_needs_vendor: bool = False
    # 0.5.x: vendor and class errors of their own wording, "." refused in a class, and "persmissions".
    legacy_texts: bool = False
    # "invalid spec, no devices" (from 1.0.0).
    requires_devices: bool = True
    # closID "/", the root group (1.1.0).
    root_clos: bool = False
    # sigs.k8s.io/yaml before 1.4.0 (library releases before 1.0.1) capitalises "Unsupported map key".
    capital_map_key: bool = False

    @property
    def spec_versions(self) -> tuple[str, ...]:
        """The spec versions this release knows (0.1.0 and 0.2.0 among them, though too old to load)."""
        return _ALL_SPEC_VERSIONS[: _ALL_SPEC_VERSIONS.index(self.newest_spec_version) + 1]

    @property
    def name(self) -> str:
        return f"CDI library {self.release}"


# What every release before 1.0 does differently, then each line of releases' own.
_BEFORE_1_0 = dict(intel_rdt=False, name_needs_letter=True, requires_devices=False, capital_map_key=True)
_V055 = dict(_BEFORE_1_0, v_prefix=False, minimum_check=False, annotations=False, legacy_texts=True)
_V054 = dict(_V055, v_prefix=True, minimum_check=True)
_V06 = dict(_BEFORE_1_0, dotted_class_needs_vendor=True)
_V07 = dict(_V06, intel_rdt=True)

RELEASES = (
    Library("0.5.2", "0.5.0", **_V055),
    Library("0.5.3", "0.5.0", **_V055),
    Library("0.5.4", "0.5.0", **_V054),
    Library("0.6.0", "0.6.0", **_V06),
    Library("0.6.1", "0.6.0", **_V06),
    Library("0.6.2", "0.6.0", **_V06),
    Library("0.7.0", "0.7.0", **_V07),
    Library("0.7.1", "0.7.0", **_V07),
    Library("0.7.2", "0.7.0", **_V07),
    Library("0.8.0", "0.8.0", **_V07),
    Library("0.8.1", "0.8.0", **_V07),
    Library("1.0.0", "1.0.0", capital_map_key=True),
    Library("1.0.1", "1.0.0"),
    Library("1.1.0", "1.1.0", net_devices=True, root_clos=True),
)
NEWEST = RELEASES[-1]
_BY_RELEASE = {library.release: library for library in RELEASES}


class UnknownRelease(ValueError):
    """A library release, or an engine release, this package has no model of."""


class ReadsNoCdi(UnknownRelease):
    """An engine release that reads no CDI specs at all (containerd 1.6, podman before 3.2)."""


def library(text: str) -> Library:
    """The release text names ("1.0.1", "v1.0.1"; "1.0" is that minor's newest patch)."""
    release = text[1:] if text.startswith("v") else text
    if release in _BY_RELEASE:
        return _BY_RELEASE[release]
    patches = [found for found in RELEASES if found.release.startswith(release + ".") and release.count(".") == 1]
    if patches:
        return patches[-1]
    known = ", ".join(found.release for found in RELEASES)
    raise UnknownRelease(f"no CDI library release {text!r} is modelled (known: {known})")


# ---------------------------------------------------------------------------------------------------------------
# Engines

ENGINES = ("containerd", "crio", "podman")
ENGINE_NAMES = {"containerd": "containerd", "crio": "cri-o", "podman": "podman"}
# (first release, library release), in order; a release reads CDI with the library of the last row at or before
# it. None: no CDI support; "<0.5": a library older than the releases modelled.
_VENDORED: dict[str, tuple[tuple[str, Optional[str]], ...]] = {
    "containerd": (
        ("1.6.0", None),
        ("1.7.0", "0.5.4"),
        ("1.7.12", "0.6.1"),
        ("1.7.13", "0.6.2"),
        ("1.7.16", "0.7.2"),
        ("1.7.27", "0.8.1"),
        ("2.0.0", "0.8.0"),
        ("2.0.3", "0.8.1"),
        ("2.0.5", "1.0.0"),
        ("2.1.0", "1.0.1"),
        ("2.2.1", "1.1.0"),
    ),
    "crio": (
        ("1.0.0", None),
        ("1.24.0", "<0.5"),
        ("1.25.0", "<0.5"),  # 0.5.0 and 0.5.1: not modelled
        ("1.25.2", "0.5.2"),
        ("1.25.5", "0.5.3"),
        ("1.27.0", "0.5.4"),
        ("1.28.0", "0.6.0"),
        ("1.29.0", "0.6.2"),
        ("1.30.0", "0.7.2"),
        ("1.31.0", "0.8.0"),
        ("1.32.2", "0.8.1"),
        ("1.33.0", "1.0.1"),
        ("1.35.0", "1.1.0"),
    ),
    "podman": (
        ("1.0.0", None),
        ("3.2.0", "<0.5"),
        ("4.3.0", "0.5.2"),
        ("4.4.0", "0.5.3"),
        ("4.5.0", "0.5.4"),
        ("4.7.0", "0.6.1"),
        ("4.8.0", "0.6.2"),
        ("5.1.0", "0.7.2"),
        ("5.2.0", "0.8.0"),
        ("5.5.0", "1.0.1"),
    ),
}
# The newest release of each engine the table was read at: a later one is taken to vendor the last row's library.
TABLE_READ_AT = {"containerd": "2.3.4", "crio": "1.36.3", "podman": "5.8.2"}


def engine_key(name: str) -> Optional[str]:
    """The engine's key ("crio") for a name a user may write ("cri-o", "CRI-O", "containerd")."""
    folded = name.lower().replace("-", "")
    return folded if folded in ENGINES else None


def engine_library(engine: str, version: str) -> Library:
    """The library the engine release vendors; UnknownRelease where it has no CDI or one too old to model."""
    key = version_key(version)
    if not key:
        raise UnknownRelease(f"{ENGINE_NAMES[engine]} version {version!r} is not a release number")
    found: Optional[str] = None
    for first, release in _VENDORED[engine]:
        if version_key(first) <= key:
            found = release
    label = f"{ENGINE_NAMES[engine]} {version}"
    if found is None:
        raise ReadsNoCdi(f"{label} does not read CDI specs")
    if found == "<0.5":
        raise UnknownRelease(f"{label} vendors a CDI library older than the releases modelled (0.5.2 to 1.1.0)")
    return _BY_RELEASE[found]


def refusing_releases(engine: str, refused: set[str]) -> list[tuple[str, str]]:
    """The spans of the engine's releases whose library is among refused: (first, last) release numbers, the
    last "" where the span is still open (the newest releases)."""
    rows = [(first, release) for first, release in _VENDORED[engine] if release not in (None, "<0.5")]
    spans: list[tuple[str, str]] = []
    for index, (first, release) in enumerate(rows):
        if release not in refused:
            continue
        last = _before(rows[index + 1][0]) if index + 1 < len(rows) else ""
        if spans and spans[-1][1] == _before(first):
            spans[-1] = (spans[-1][0], last)
        else:
            spans.append((first, last))
    return spans


def _before(release: str) -> str:
    """The release just before a first release, as the table's spans are written ("1.7.12" -> "1.7.11";
    "2.1.0" -> "2.0", any 2.0.x)."""
    parts = list(version_key(release))
    if parts[-1] > 0:
        parts[-1] -= 1
        return ".".join(map(str, parts))
    parts = parts[:-1]
    parts[-1] -= 1
    return ".".join(map(str, parts))


# ---------------------------------------------------------------------------------------------------------------
# Who judges a spec


@dataclass(frozen=True)
class Judge:
    """A library release that judges specs, and the engine releases on whose behalf (none: the release itself,
    named with --cdi-library or the newest by default)."""

    library: Library
    engines: tuple[str, ...] = ()  # "containerd 2.1.4"

    @property
    def label(self) -> str:
        if not self.engines:
            return f"CDI library {self.library.release}"
        return f"{joined(list(self.engines))} (CDI library {self.library.release})"


def joined(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def engine_judges(pairs: list[tuple[str, str]]) -> tuple[Judge, ...]:
    """One judge per library among the engine releases (engine key, version) given, in their order; raises
    UnknownRelease for a release with no modelled library."""
    judges: dict[str, Judge] = {}
    for engine, version in pairs:
        found = engine_library(engine, version)
        label = f"{ENGINE_NAMES[engine]} {version}"
        before = judges.get(found.release)
        judges[found.release] = Judge(found, (*before.engines, label) if before else (label,))
    return tuple(judges.values())


def describe_refusers(refused: set[str]) -> str:
    """The engine releases whose library is among refused, as "containerd ≤ 2.2.0, cri-o ≤ 1.34 and
    podman ≤ 5.8"; empty when there are none."""
    parts = []
    for engine in ENGINES:
        rows = [first for first, release in _VENDORED[engine] if release not in (None, "<0.5")]
        for first, last in refusing_releases(engine, refused):
            name = ENGINE_NAMES[engine]
            if not last and _VENDORED[engine][-1][1] != NEWEST.release:
                # Open for now: up to the newest release the table was read at, whose successors may move on.
                last = ".".join(map(str, version_key(TABLE_READ_AT[engine])[:2]))
            short = first[:-2] if first.count(".") == 2 and first.endswith(".0") else first
            if first == rows[0] and last:
                parts.append(f"{name} ≤ {last}")
            elif not last:
                parts.append(f"{name} ≥ {short}")
            elif short == last:
                parts.append(f"{name} {last}")
            else:
                parts.append(f"{name} {short}–{last}")
    return joined(parts) if parts else ""
