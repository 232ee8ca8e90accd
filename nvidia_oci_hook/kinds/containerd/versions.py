"""The containerd series, which of them read each config version, and the plugin names each version uses.

How a file is read depends on its `version` (cmd/containerd/server/config, plugins/cri/*/plugin.go):

- missing, 0 or 1: plugins are named by their short id (`plugins.cri`). containerd 2.0 to 2.2 rename the
  plugins and then take the file for a version 3 one, so the CRI runtime settings of a version 1 file are lost
  (measured on 2.1.9); 2.3 migrates them.
- 2: plugins are named by URI; the CRI plugin is `plugins."io.containerd.grpc.v1.cri"`. containerd 2.x
  migrates it into `io.containerd.cri.v1.runtime` and `io.containerd.cri.v1.images` on every start.
- 3: containerd 2.0 and later; the CRI runtime settings live in `plugins."io.containerd.cri.v1.runtime"`.
  containerd 1.7.20 and later refuse the file; 1.6 and older 1.7 read it as a version 2 file whose CRI plugin
  sections have names they do not know.
- 4: containerd 2.3 and later (server sections moved into plugins); the CRI plugins are those of version 3.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

SERIES = ("1.6", "1.7", "2.0", "2.1", "2.2", "2.3")
ALL = frozenset(SERIES)
V1X = frozenset({"1.6", "1.7"})
V2X = frozenset({"2.0", "2.1", "2.2", "2.3"})
FROM_17 = ALL - {"1.6"}

# The highest config version each series reads (1.6 checks no upper bound: it reads any version >= 2 as 2).
MAX_CONFIG_VERSION = {"1.6": None, "1.7": 2, "2.0": 3, "2.1": 3, "2.2": 3, "2.3": 4}

# Which containerd series read the CRI settings of a file of each config version as intended.
READERS: dict[int, frozenset[str]] = {1: V1X, 2: ALL, 3: V2X, 4: frozenset({"2.3"})}

# The plugin that holds enable_cdi, cdi_spec_dirs, containerd.runtimes and friends.
CRI_V1 = "cri"
CRI_V2 = "io.containerd.grpc.v1.cri"
CRI_RUNTIME = "io.containerd.cri.v1.runtime"
CRI_IMAGES = "io.containerd.cri.v1.images"

RUNC_TYPES = ("io.containerd.runc.v2", "io.containerd.runc.v1")
DEFAULT_RUNTIME = "runc"
CDI_KEYS = ("enable_cdi", "cdi_spec_dirs")


def describe_series(series: Iterable[str]) -> str:
    """'containerd 1.7 and later', 'containerd 1.6 and 1.7', 'containerd 2.0 to 2.2'."""
    chosen = [s for s in SERIES if s in set(series)]
    if not chosen:
        return "no containerd release"
    first, last = SERIES.index(chosen[0]), SERIES.index(chosen[-1])
    contiguous = len(chosen) == last - first + 1
    if len(chosen) == 1:
        return f"containerd {chosen[0]}"
    if contiguous and last == len(SERIES) - 1:
        return f"containerd {chosen[0]} and later"
    if contiguous and len(chosen) > 2:
        return f"containerd {chosen[0]} to {chosen[-1]}"
    return "containerd " + ", ".join(chosen[:-1]) + f" and {chosen[-1]}"


def series_of(release: str) -> str:
    """The series a containerd release is judged as: "1.6.20" -> "1.6"; a release newer than the series modelled
    is judged as the newest, one older as the oldest (release_note says so)."""
    parts = release.lstrip("v").split(".")
    try:
        key = (int(parts[0]), int(parts[1]) if len(parts) > 1 else 0)
    except ValueError:
        return SERIES[-1]
    modelled = [(int(s.split(".")[0]), int(s.split(".")[1])) for s in SERIES]
    if key in modelled:
        return f"{key[0]}.{key[1]}"
    nearest = max((s for s in modelled if s <= key), default=modelled[0])
    return f"{nearest[0]}.{nearest[1]}"


def release_note(release: str) -> str:
    """What a finding judged as this release says of it: the release, and the series it is judged as where
    that series is not the release's own."""
    series = series_of(release)
    own = ".".join(release.lstrip("v").split(".")[:2])
    if own == series:
        return f"containerd {release}"
    return f"containerd {release} (not modelled: judged as containerd {series}, the nearest series modelled)"


def _release_key(release: str) -> tuple[int, ...]:
    from nvidia_oci_hook.kinds.cdi.releases import version_key

    return version_key(release.lstrip("v"))


def reads_as_version_2(release: str) -> bool:
    """Whether the release reads a file of config version 3 or more as version 2: 1.6, and 1.7 before 1.7.20,
    check no upper bound (their ValidateV2 came with 1.7.20)."""
    series = series_of(release)
    return series == "1.6" or (series == "1.7" and _release_key(release) < (1, 7, 20))


def refuses_version(release: str, version: int) -> Optional[str]:
    """containerd's own words where the release refuses a file of this config version, else None."""
    series = series_of(release)
    if series in V1X:
        if reads_as_version_2(release) or version <= 2:
            return None
        return f"unsupported config version `{version}`"
    newest = MAX_CONFIG_VERSION[series]
    if newest is not None and version > newest:
        return f"expected containerd config version equal to or less than `{newest}`, got `{version}`"
    return None
