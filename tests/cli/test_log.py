"""`nvidia-oci-hook log` reads the log and its rotated files (numbered and dateext, gzip or not), oldest first,
with --last and --container over all of them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from nvidia_oci_hook.cli import main


def _lines(*entries: tuple[str, str]) -> bytes:
    return b"".join(
        json.dumps({"time": f"t-{summary}", "mode": "runtime", "container": ctr, "summary": summary}).encode() + b"\n"
        for ctr, summary in entries
    )


def _show(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    status = main(["log", *args])
    out, err = capsys.readouterr()
    assert err == "" or status != 0
    return status, [line.split("  ")[-1] for line in out.splitlines()]


@pytest.fixture
def numbered(tmp_path: Path) -> Path:
    log = tmp_path / "nvidia-oci-hook.log"
    (tmp_path / "nvidia-oci-hook.log.3.gz").write_bytes(gzip.compress(_lines(("a", "s1"), ("b", "s2"))))
    (tmp_path / "nvidia-oci-hook.log.2.gz").write_bytes(gzip.compress(_lines(("a", "s3"))))
    (tmp_path / "nvidia-oci-hook.log.1").write_bytes(_lines(("b", "s4"), ("a", "s5")))  # delaycompress
    log.write_bytes(_lines(("a", "s6"), ("b", "s7")))
    # Not rotations of this log: another log beside it, a backup, an editor's copy.
    (tmp_path / "other.log.1").write_bytes(_lines(("a", "x1")))
    (tmp_path / "nvidia-oci-hook.log.bak").write_bytes(_lines(("a", "x2")))
    (tmp_path / "nvidia-oci-hook.log-old").write_bytes(_lines(("a", "x3")))
    return log


def test_rotated_files_are_read_oldest_first(numbered: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _show(capsys, str(numbered)) == (0, ["s1", "s2", "s3", "s4", "s5", "s6", "s7"])


def test_last_and_container_span_every_file(numbered: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _show(capsys, str(numbered), "--last", "4") == (0, ["s4", "s5", "s6", "s7"])
    assert _show(capsys, str(numbered), "--container", "b") == (0, ["s2", "s4", "s7"])
    assert _show(capsys, str(numbered), "--container", "a", "--last", "3") == (0, ["s3", "s5", "s6"])


def test_more_than_nine_rotations_sort_by_number(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log"
    for number in range(1, 12):
        (tmp_path / f"log.{number}.gz").write_bytes(gzip.compress(_lines(("a", f"r{number}"))))
    assert _show(capsys, str(log))[1] == [f"r{n}" for n in range(11, 0, -1)]


def test_dateext_names_sort_by_date(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "nvidia-oci-hook.log"
    (tmp_path / "nvidia-oci-hook.log-20261124.gz").write_bytes(gzip.compress(_lines(("a", "d1"))))
    (tmp_path / "nvidia-oci-hook.log-20261201-1764547200").write_bytes(_lines(("a", "d3")))
    (tmp_path / "nvidia-oci-hook.log-20261201").write_bytes(_lines(("a", "d2")))
    log.write_bytes(_lines(("a", "d4")))
    assert _show(capsys, str(log)) == (0, ["d1", "d2", "d3", "d4"])


def test_just_rotated_log_shows_the_rotated_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Between a rotation and the next record, FILE itself does not exist (nocreate).
    (tmp_path / "log.1").write_bytes(_lines(("a", "only")))
    assert _show(capsys, str(tmp_path / "log")) == (0, ["only"])


def test_missing_log_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log", str(tmp_path / "log")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_compressed_file_cut_short_keeps_what_precedes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whole = gzip.compress(_lines(*((("a", f"c{i}")) for i in range(200))))
    (tmp_path / "log.1.gz").write_bytes(whole[: len(whole) * 3 // 4])
    (tmp_path / "log").write_bytes(_lines(("a", "after")))
    status, shown = _show(capsys, str(tmp_path / "log"))
    assert status == 0 and shown[-1] == "after"
    assert shown[0] == "c0" and 1 < len(shown) < 201


def test_a_rotated_file_that_is_not_gzip_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "log.2.gz").write_bytes(b"not gzip at all\n")
    (tmp_path / "log").write_bytes(_lines(("a", "x")))
    assert main(["log", str(tmp_path / "log")]) == 2
    assert "log.2.gz: cannot read" in capsys.readouterr().err
