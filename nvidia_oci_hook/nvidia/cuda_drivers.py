"""The highest CUDA version a driver supports, from NVIDIA's table, without NVML.

Source: the CUDA Toolkit Release Notes, section "CUDA Driver", Table 3 "CUDA Toolkit and Corresponding Driver
Versions" (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html), column "Linux x86_64 Driver
Version", as published in the notes of CUDA 13.2 Update 2
(https://docs.nvidia.com/cuda/archive/13.2.2/cuda-toolkit-release-notes/index.html; the copy read carries no date;
the notes of 13.2 Update 1 are dated 2026-04-12). Read on 2026-12-02. Every row from CUDA 7.0 to 13.2 Update 2 is
here, with the label NVIDIA gives it, cross-checked against the same table in the notes of 13.2 and of 13.1
(https://docs.nvidia.com/cuda/archive/13.1.0/cuda-toolkit-release-notes/index.html); the rows agree, except that
13.1 labels its own row "CUDA 13.1" where later notes say "CUDA 13.1 GA" (the later label is kept).

Newer notes exist (13.3, 13.3 Update 1, 13.4, 13.4 Update 1, 13.5), but their copies of the table could not be
read, so their rows are left out: a driver of those branches (610 and up) answers 13.2 here, lower than the
13.3 or later its `cuDriverGetVersion` reports. Add the rows, newest first, once read from the published notes.

The rule: a driver supports the CUDA of the highest toolkit release whose minimum driver is at most the driver,
versions compared component by component as integers ("570.26" < "570.26.1" < "570.124.06"). The driver branches
rise with the CUDA releases, so the answer never falls as the driver rises; the tests hold the table to that, and
to known points where the answer matches what `cuDriverGetVersion` reports (550.54.15 -> 12.4, 545.23.08 -> 12.3).

`MINOR_VERSION_COMPATIBILITY` is a different table of the same notes (Table 2, "CUDA Toolkit and Minimum Required
Driver Version for CUDA Minor Version Compatibility"): the driver branch that runs every toolkit of a major under
minor version compatibility, with its limits (no PTX JIT of newer code, for one). It does not say which CUDA a
driver reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

SOURCE = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"
NOTES_VERSION = "13.2 Update 2"
# The copy of the 13.2 Update 2 notes that was read carries no date; 13.2 Update 1's notes are dated 2026-04-12.
NOTES_DATE: Optional[str] = None
READ_ON = "2026-12-02"


@dataclass(frozen=True)
class CudaRelease:
    label: str  # as NVIDIA writes the row: "CUDA 12.4 Update 1", "CUDA 10.0.130"
    cuda: str  # major.minor, as cuDriverGetVersion reports it: "12.4"
    minimum_driver: str  # the Linux x86_64 toolkit driver, without NVIDIA's ">="


# Table 3, Linux x86_64, newest first, as NVIDIA lists it.
CUDA_DRIVERS: tuple[CudaRelease, ...] = (
    CudaRelease("CUDA 13.2 Update 2", "13.2", "595.71.05"),
    CudaRelease("CUDA 13.2 Update 1", "13.2", "595.58.03"),
    CudaRelease("CUDA 13.2 GA", "13.2", "595.45.04"),
    CudaRelease("CUDA 13.1 Update 1", "13.1", "590.48.01"),
    CudaRelease("CUDA 13.1 GA", "13.1", "590.44.01"),
    CudaRelease("CUDA 13.0 Update 2", "13.0", "580.95.05"),
    CudaRelease("CUDA 13.0 Update 1", "13.0", "580.82.07"),
    CudaRelease("CUDA 13.0 GA", "13.0", "580.65.06"),
    CudaRelease("CUDA 12.9 Update 1", "12.9", "575.57.08"),
    CudaRelease("CUDA 12.9 GA", "12.9", "575.51.03"),
    CudaRelease("CUDA 12.8 Update 1", "12.8", "570.124.06"),
    CudaRelease("CUDA 12.8 GA", "12.8", "570.26"),
    CudaRelease("CUDA 12.6 Update 3", "12.6", "560.35.05"),
    CudaRelease("CUDA 12.6 Update 2", "12.6", "560.35.03"),
    CudaRelease("CUDA 12.6 Update 1", "12.6", "560.35.03"),
    CudaRelease("CUDA 12.6 GA", "12.6", "560.28.03"),
    CudaRelease("CUDA 12.5 Update 1", "12.5", "555.42.06"),
    CudaRelease("CUDA 12.5 GA", "12.5", "555.42.02"),
    CudaRelease("CUDA 12.4 Update 1", "12.4", "550.54.15"),
    CudaRelease("CUDA 12.4 GA", "12.4", "550.54.14"),
    CudaRelease("CUDA 12.3 Update 1", "12.3", "545.23.08"),
    CudaRelease("CUDA 12.3 GA", "12.3", "545.23.06"),
    CudaRelease("CUDA 12.2 Update 2", "12.2", "535.104.05"),
    CudaRelease("CUDA 12.2 Update 1", "12.2", "535.86.09"),
    CudaRelease("CUDA 12.2 GA", "12.2", "535.54.03"),
    CudaRelease("CUDA 12.1 Update 1", "12.1", "530.30.02"),
    CudaRelease("CUDA 12.1 GA", "12.1", "530.30.02"),
    CudaRelease("CUDA 12.0 Update 1", "12.0", "525.85.12"),
    CudaRelease("CUDA 12.0 GA", "12.0", "525.60.13"),
    CudaRelease("CUDA 11.8 GA", "11.8", "520.61.05"),
    CudaRelease("CUDA 11.7 Update 1", "11.7", "515.48.07"),
    CudaRelease("CUDA 11.7 GA", "11.7", "515.43.04"),
    CudaRelease("CUDA 11.6 Update 2", "11.6", "510.47.03"),
    CudaRelease("CUDA 11.6 Update 1", "11.6", "510.47.03"),
    CudaRelease("CUDA 11.6 GA", "11.6", "510.39.01"),
    CudaRelease("CUDA 11.5 Update 2", "11.5", "495.29.05"),
    CudaRelease("CUDA 11.5 Update 1", "11.5", "495.29.05"),
    CudaRelease("CUDA 11.5 GA", "11.5", "495.29.05"),
    CudaRelease("CUDA 11.4 Update 4", "11.4", "470.82.01"),
    CudaRelease("CUDA 11.4 Update 3", "11.4", "470.82.01"),
    CudaRelease("CUDA 11.4 Update 2", "11.4", "470.57.02"),
    CudaRelease("CUDA 11.4 Update 1", "11.4", "470.57.02"),
    CudaRelease("CUDA 11.4.0 GA", "11.4", "470.42.01"),
    CudaRelease("CUDA 11.3.1 Update 1", "11.3", "465.19.01"),
    CudaRelease("CUDA 11.3.0 GA", "11.3", "465.19.01"),
    CudaRelease("CUDA 11.2.2 Update 2", "11.2", "460.32.03"),
    CudaRelease("CUDA 11.2.1 Update 1", "11.2", "460.32.03"),
    CudaRelease("CUDA 11.2.0 GA", "11.2", "460.27.03"),
    CudaRelease("CUDA 11.1.1 Update 1", "11.1", "455.32"),
    CudaRelease("CUDA 11.1 GA", "11.1", "455.23"),
    CudaRelease("CUDA 11.0.3 Update 1", "11.0", "450.51.06"),
    CudaRelease("CUDA 11.0.2 GA", "11.0", "450.51.05"),
    CudaRelease("CUDA 11.0.1 RC", "11.0", "450.36.06"),
    CudaRelease("CUDA 10.2.89", "10.2", "440.33"),
    CudaRelease("CUDA 10.1 (10.1.105 general release, and updates)", "10.1", "418.39"),
    CudaRelease("CUDA 10.0.130", "10.0", "410.48"),
    CudaRelease("CUDA 9.2 (9.2.148 Update 1)", "9.2", "396.37"),
    CudaRelease("CUDA 9.2 (9.2.88)", "9.2", "396.26"),
    CudaRelease("CUDA 9.1 (9.1.85)", "9.1", "390.46"),
    CudaRelease("CUDA 9.0 (9.0.76)", "9.0", "384.81"),
    CudaRelease("CUDA 8.0 (8.0.61 GA2)", "8.0", "375.26"),
    CudaRelease("CUDA 8.0 (8.0.44)", "8.0", "367.48"),
    CudaRelease("CUDA 7.5 (7.5.16)", "7.5", "352.31"),
    CudaRelease("CUDA 7.0 (7.0.28)", "7.0", "346.46"),
)

# Table 2, the minimum driver branch for minor version compatibility across a CUDA major (Linux and Windows alike).
# NVIDIA also gives a maximum: 12.x below 580 and 11.x below 525 (a newer branch runs them natively); 13.x none.
MINOR_VERSION_COMPATIBILITY: Mapping[int, str] = {
    13: "580",
    12: "525",
    11: "450",
}

_DIGITS = frozenset("0123456789")


def parse_version(text: str) -> Optional[tuple[int, ...]]:
    """A dotted version of decimal integers ("550.54.15", "570.26", " 535.104.05\\n"), or None for anything else:
    an empty component, a sign, a letter, a non-ASCII digit."""
    parts = text.strip().split(".")
    if not all(part and set(part) <= _DIGITS for part in parts):
        return None
    return tuple(int(part) for part in parts)


def release_for_driver(driver: str) -> Optional[CudaRelease]:
    """The row that decides what the driver supports: the highest toolkit release whose minimum driver is at most
    the driver. None for a driver older than every row, or one that does not parse."""
    version = parse_version(driver)
    if version is None:
        return None
    for release in CUDA_DRIVERS:
        minimum = parse_version(release.minimum_driver)
        if minimum is not None and minimum <= version:
            return release
    return None


def max_cuda_for_driver(driver: str) -> Optional[str]:
    """The highest CUDA (major.minor) the driver supports, as `cuDriverGetVersion` reports it: "12.4" for
    550.54.15. None for a driver older than every row, or one that does not parse."""
    release = release_for_driver(driver)
    return release.cuda if release is not None else None


def minimum_driver_for_cuda(cuda: str) -> Optional[CudaRelease]:
    """The first release that supports CUDA X.Y ("12.8", or "12.8.1", read as 12.8; "12" reads as 12.0): of the
    rows whose CUDA is X.Y, the one with the smallest minimum driver (the oldest row on a tie); where no row is X.Y,
    the same for the lowest CUDA above it. None past the newest row, or for a version that does not parse."""
    version = parse_version(cuda)
    if version is None:
        return None
    wanted = (version[0], version[1] if len(version) > 1 else 0)
    best: Optional[CudaRelease] = None
    best_key: Optional[tuple[tuple[int, ...], tuple[int, ...]]] = None
    for release in CUDA_DRIVERS:
        release_cuda = parse_version(release.cuda)
        minimum = parse_version(release.minimum_driver)
        if release_cuda is None or minimum is None or release_cuda < wanted:
            continue
        key = (release_cuda, minimum)
        # Newest first, so on a tie the later row, the older release, wins.
        if best_key is None or key <= best_key:
            best, best_key = release, key
    return best


def beyond_table(driver: str) -> bool:
    """Whether the driver is of a branch newer than the newest row's: the table then says only that it supports
    at least the newest row's CUDA, not which CUDA it reports."""
    version = parse_version(driver)
    newest = parse_version(CUDA_DRIVERS[0].minimum_driver)
    return version is not None and newest is not None and version[0] > newest[0]
