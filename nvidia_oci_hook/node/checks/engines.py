"""doctor's `engines`: the container engines installed (containerd, cri-o, podman), their releases, the CDI
library each one's release vendors, their runtime handlers, and the CDI names each cannot resolve.

Whether a CDI spec loads, and which device names it yields, depends on the engine's own CDI library: the same
spec is accepted by one release and refused by another. So the releases are read where they are decided (a
running daemon's binary over the package databases) and named with their library; an engine whose release was
not found is a warning, since its specs are then judged with the newest library. The names the engines' specs
declare but the engine cannot resolve are counted per engine; the verdict on the specs themselves is
`engine-configs`'. The fix installs the engines from packages; doctor repairs nothing here.
"""

from __future__ import annotations

from typing import Any

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.base import OK, UNKNOWN, WARNING, Check

NAME = "engines"


def engines_check(host: HostView) -> Check:
    """The engines installed and their releases: which CDI library reads each one's specs (lint --node, and the
    engine-configs check below, judge the spec directories with them)."""
    from nvidia_oci_hook.kinds.cdi.releases import ENGINE_NAMES, UnknownRelease, engine_library
    from nvidia_oci_hook.kinds.loading import load_document
    from nvidia_oci_hook.node.cdi_resolve import declared_unresolvable
    from nvidia_oci_hook.node.engines import engine_releases, handler_list, runtime_handlers
    from nvidia_oci_hook.node.locations import find_locations

    locations = find_locations(host)
    releases, _ = engine_releases(host, locations)
    found = list(releases.values())
    unresolvable = declared_unresolvable(host, load_document)
    counts = {"cdi_unresolvable_names": {engine: len(names) for engine, names in unresolvable.items()}}
    if not found:
        return Check(
            NAME,
            UNKNOWN,
            "no containerd, cri-o or podman found (running daemons, binaries, dpkg or rpm database)",
            [_unresolvable_line(engine, names) for engine, names in unresolvable.items() if names],
            counts_by_engine=counts,
        )
    evidence = []
    for chosen in (locations.containerd, locations.crio):
        if chosen is not None and chosen.engine in releases and (chosen.daemon or chosen.distribution):
            evidence.append(f"{releases[chosen.engine].name} reads {chosen.path}: {chosen.source}")
    unknown = []
    for release in found:
        if release.version is None:
            unknown.append(release.name)
            evidence.append(f"{release.name}: release not found ({release.source})")
            continue
        try:
            library = f"CDI library {engine_library(release.engine, release.version).release}"
        except UnknownRelease as exc:
            library = str(exc)
        evidence.append(f"{release.label}: {library} ({release.source})")
    for engine, handlers in runtime_handlers(host).items():
        evidence.append(f"{ENGINE_NAMES[engine]} runtime handlers: {handler_list(handlers)}")
    # The verdict on the specs themselves is engine-configs' (lint --node); here, what each engine is left with.
    evidence += [_unresolvable_line(engine, names) for engine, names in unresolvable.items() if names]
    summary = ", ".join(release.label for release in found)
    if unknown:
        return Check(
            NAME,
            WARNING,
            f"{summary}: the release of {', '.join(unknown)} was not found, so its CDI specs are judged with the "
            "newest CDI library",
            evidence,
            "install the engines from packages, or check that their binaries answer --version",
            counts_by_engine=counts,
        )
    return Check(NAME, OK, summary, evidence, counts_by_engine=counts)


def _unresolvable_line(engine: str, names: list[Any]) -> str:
    listed = ", ".join(f"{resolution.name} ({resolution.reason})" for resolution in names)
    plural = "s" if len(names) != 1 else ""
    return f"{engine} cannot resolve {len(names)} CDI device name{plural} its specs declare: {listed}"
