"""NVIDIA's table of CUDA toolkits and their drivers, checked row by row, for order, and at known points."""

from __future__ import annotations

from typing import Optional

import pytest

from nvidia_oci_hook.nvidia.cuda_drivers import (
    CUDA_DRIVERS,
    MINOR_VERSION_COMPATIBILITY,
    CudaRelease,
    max_cuda_for_driver,
    minimum_driver_for_cuda,
    parse_version,
    release_for_driver,
)


def _v(text: str) -> tuple[int, ...]:
    version = parse_version(text)
    assert version is not None, text
    return version


def _just_below(driver: str) -> Optional[str]:
    """The driver version just below: the last component less one, or, where it is 0, the one before it."""
    parts = list(_v(driver))
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] > 0:
            parts[index] -= 1
            return ".".join(str(part) for part in parts)
    return None


def _row_id(release: CudaRelease) -> str:
    return f"{release.label} >= {release.minimum_driver}"


def test_every_row_parses_and_cuda_is_major_minor() -> None:
    assert len(CUDA_DRIVERS) == 64
    for release in CUDA_DRIVERS:
        assert release.label.startswith("CUDA ")
        assert len(_v(release.cuda)) == 2, release
        assert len(_v(release.minimum_driver)) in (2, 3), release
        assert release.label.startswith(f"CUDA {release.cuda}"), release


@pytest.mark.parametrize("release", CUDA_DRIVERS, ids=_row_id)
def test_the_rows_own_minimum_gives_at_least_its_cuda(release: CudaRelease) -> None:
    answer = max_cuda_for_driver(release.minimum_driver)
    assert answer is not None
    assert _v(answer) >= _v(release.cuda)
    decided = release_for_driver(release.minimum_driver)
    assert decided is not None
    assert _v(decided.minimum_driver) == _v(release.minimum_driver)


@pytest.mark.parametrize("release", CUDA_DRIVERS, ids=_row_id)
def test_a_driver_just_below_the_rows_minimum_gives_less(release: CudaRelease) -> None:
    below = _just_below(release.minimum_driver)
    assert below is not None
    answer = max_cuda_for_driver(below)
    same_cuda_lower = [
        other
        for other in CUDA_DRIVERS
        if other.cuda == release.cuda and _v(other.minimum_driver) < _v(release.minimum_driver)
    ]
    if same_cuda_lower:
        assert answer == release.cuda
    else:
        assert answer is None or _v(answer) < _v(release.cuda)
    decided = release_for_driver(below)
    assert decided is None or _v(decided.minimum_driver) < _v(release.minimum_driver)


def test_newest_first_and_newer_cuda_never_needs_an_older_driver() -> None:
    for newer, older in zip(CUDA_DRIVERS, CUDA_DRIVERS[1:]):
        assert _v(newer.cuda) >= _v(older.cuda), (newer, older)
        assert _v(newer.minimum_driver) >= _v(older.minimum_driver), (newer, older)
        if newer.cuda != older.cuda:
            assert _v(newer.minimum_driver) > _v(older.minimum_driver), (newer, older)


def test_the_answer_never_falls_as_the_driver_rises() -> None:
    drivers = sorted(
        {release.minimum_driver for release in CUDA_DRIVERS}
        | {below for release in CUDA_DRIVERS if (below := _just_below(release.minimum_driver))},
        key=_v,
    )
    answers = [max_cuda_for_driver(driver) for driver in drivers]
    keys = [(-1,) if answer is None else _v(answer) for answer in answers]
    assert keys == sorted(keys)


def test_labels_are_unique() -> None:
    labels = [release.label for release in CUDA_DRIVERS]
    assert len(labels) == len(set(labels))


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("550.54.15", "12.4"),
        ("550.54.14", "12.4"),
        ("550.54.13", "12.3"),
        ("550.127.05", "12.4"),
        ("545.23.08", "12.3"),
        ("535.104.05", "12.2"),
        ("535.54.03", "12.2"),
        ("535.54.02", "12.1"),
        ("525.60.13", "12.0"),
        ("520.61.05", "11.8"),
        ("470.82.01", "11.4"),
        ("470.42.01", "11.4"),
        ("460.27.03", "11.2"),
        ("455.23.04", "11.1"),
        ("455.23", "11.1"),
        ("450.80.02", "11.0"),
        ("440.33.01", "10.2"),
        ("418.39", "10.1"),
        ("418.38", "10.0"),
        ("396.26", "9.2"),
        ("346.46", "7.0"),
        ("570.26", "12.8"),
        ("570.124.06", "12.8"),
        ("575.57.08", "12.9"),
        ("580.65.06", "13.0"),
        ("580.95.05", "13.0"),
        ("590.44.01", "13.1"),
        ("595.45.04", "13.2"),
        ("595.71.05", "13.2"),
        ("999.1", CUDA_DRIVERS[0].cuda),
        (" 550.54.15\n", "12.4"),
    ],
)
def test_known_points(driver: str, cuda: str) -> None:
    assert max_cuda_for_driver(driver) == cuda


@pytest.mark.parametrize("driver", ["340.0", "346.45", "346.45.99", "0", "abc", "", "550.54.x", "550..54", "-550.54"])
def test_too_old_or_unparsable_gives_none(driver: str) -> None:
    assert max_cuda_for_driver(driver) is None
    assert release_for_driver(driver) is None


def test_the_deciding_row_is_the_highest_release_of_its_driver() -> None:
    decided = release_for_driver("530.30.02")
    assert decided is not None and decided.label == "CUDA 12.1 Update 1"
    decided = release_for_driver("470.82.01")
    assert decided is not None and decided.label == "CUDA 11.4 Update 4"
    decided = release_for_driver("999.1")
    assert decided == CUDA_DRIVERS[0]


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("550.54.15", (550, 54, 15)),
        ("570.26", (570, 26)),
        ("418", (418,)),
        ("535.104.05", (535, 104, 5)),
        (" 560.35.03\n", (560, 35, 3)),
        ("abc", None),
        ("", None),
        ("550.", None),
        (".550", None),
        ("550..54", None),
        ("+550.54", None),
        ("550.54-1", None),
        ("550 54", None),
        ("5\u00b250", None),
        ("\u0665\u0665\u0660.54", None),
    ],
)
def test_parse_version(text: str, version: Optional[tuple[int, ...]]) -> None:
    assert parse_version(text) == version


@pytest.mark.parametrize(
    ("cuda", "label", "driver"),
    [
        ("12.8", "CUDA 12.8 GA", "570.26"),
        ("12.4", "CUDA 12.4 GA", "550.54.14"),
        ("12.1", "CUDA 12.1 GA", "530.30.02"),
        ("12.0", "CUDA 12.0 GA", "525.60.13"),
        ("12", "CUDA 12.0 GA", "525.60.13"),
        ("12.7", "CUDA 12.8 GA", "570.26"),
        ("12.6.2", "CUDA 12.6 GA", "560.28.03"),
        ("13.0", "CUDA 13.0 GA", "580.65.06"),
        ("11.0", "CUDA 11.0.1 RC", "450.36.06"),
        ("11.4", "CUDA 11.4.0 GA", "470.42.01"),
        ("11.5", "CUDA 11.5 GA", "495.29.05"),
        ("10.1", "CUDA 10.1 (10.1.105 general release, and updates)", "418.39"),
        ("9.2", "CUDA 9.2 (9.2.88)", "396.26"),
        ("8.0", "CUDA 8.0 (8.0.44)", "367.48"),
        ("7.0", "CUDA 7.0 (7.0.28)", "346.46"),
        ("6.5", "CUDA 7.0 (7.0.28)", "346.46"),
    ],
)
def test_minimum_driver_for_cuda(cuda: str, label: str, driver: str) -> None:
    release = minimum_driver_for_cuda(cuda)
    assert release is not None
    assert (release.label, release.minimum_driver) == (label, driver)


@pytest.mark.parametrize("cuda", ["99.0", "abc", "", "12.x"])
def test_minimum_driver_for_cuda_none(cuda: str) -> None:
    assert minimum_driver_for_cuda(cuda) is None


def test_minimum_driver_for_every_cuda_in_the_table_supports_it() -> None:
    for cuda in {release.cuda for release in CUDA_DRIVERS}:
        release = minimum_driver_for_cuda(cuda)
        assert release is not None and release.cuda == cuda
        assert max_cuda_for_driver(release.minimum_driver) == cuda
        below = _just_below(release.minimum_driver)
        assert below is not None
        answer = max_cuda_for_driver(below)
        assert answer is None or _v(answer) < _v(cuda)


def test_minor_version_compatibility() -> None:
    assert dict(MINOR_VERSION_COMPATIBILITY) == {13: "580", 12: "525", 11: "450"}
    for major, branch in MINOR_VERSION_COMPATIBILITY.items():
        # The branch that runs a whole major is never above the first toolkit driver of that major.
        first = minimum_driver_for_cuda(f"{major}.0")
        assert first is not None and first.cuda == f"{major}.0"
        assert _v(branch) <= _v(first.minimum_driver)
