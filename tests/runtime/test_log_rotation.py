"""The wrapper's log under the real logrotate with the packages' configuration: rotated while writers append,
no record is lost or torn, and `nvidia-oci-hook log` reads every file back in the order it was written."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.runtime.logbook import log_files, read_all_entries

REPOSITORY = Path(__file__).resolve().parents[2]
CONFIG = REPOSITORY / "packaging/logrotate/nvidia-oci-hook"

# One writer process: the real record() of the wrapper and the hooks, in a loop until the stop file appears, each
# entry as large as a container with many edits makes (a few kilobytes: more than one page, so that a torn write
# would show). It prints how many it wrote.
WRITER = """
import os, sys, time
from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.runtime import logbook
path, name, stop = sys.argv[1], sys.argv[2], sys.argv[3]
settings = Settings(log_file=path, log_syslog=False)
edits = [{"code": "DEV001", "pointer": f"/linux/devices/{i}", "edit": "removed", "why": "w" * 40} for i in range(40)]
print("ready", flush=True)
sys.stdin.readline()
seq = 0
while not os.path.exists(stop):
    logbook.record(settings, "runtime", {"container": name, "seq": seq, "edits": edits}, f"{name} {seq}")
    seq += 1
    time.sleep(0.0005)  # a few thousand records a second in all: busier than any node, and quick to check
print(seq, flush=True)
"""
WRITERS = 6
ROTATIONS = 6


def _logrotate() -> str:
    found = shutil.which("logrotate") or shutil.which("logrotate", path="/usr/sbin:/sbin")
    assert found, "logrotate is missing: scripts/setup test installs Debian's"
    return found


def test_the_packaged_configuration_names_the_default_log() -> None:
    stanza = [line for line in CONFIG.read_text().splitlines() if line.endswith("{")]
    assert stanza == [f"{Settings().log_file} {{"]


def _raw_lines(path: str) -> list[bytes]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as handle:
        return handle.read().split(b"\n")


def test_rotation_while_writers_append_loses_and_tears_nothing(tmp_path: Path) -> None:
    log = tmp_path / "nvidia-oci-hook.log"
    config = tmp_path / "logrotate.conf"
    config.write_text(CONFIG.read_text().replace(f"{Settings().log_file} {{", f"{log} {{"))
    state = tmp_path / "state"
    stop = tmp_path.parent / f"{tmp_path.name}.stop"  # outside the log's directory, which is counted below
    env = dict(os.environ, PYTHONPATH=str(REPOSITORY))
    names = [f"writer{i}" for i in range(WRITERS)]
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(log), name, str(stop)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        for name in names
    ]
    written = {}
    try:
        for writer in writers:
            assert writer.stdout is not None and writer.stdout.readline() == b"ready\n"
        for writer in writers:  # all start together
            assert writer.stdin is not None
            writer.stdin.write(b"go\n")
            writer.stdin.flush()
        for _ in range(ROTATIONS):
            time.sleep(0.05)
            result = subprocess.run([_logrotate(), "-f", "-s", str(state), str(config)], capture_output=True, text=True)
            assert result.returncode == 0, result.stderr
            assert all(writer.poll() is None for writer in writers), "a writer stopped during the rotations"
        stop.touch()
        for name, writer in zip(names, writers):
            out, _ = writer.communicate(timeout=60)
            assert writer.returncode == 0
            written[name] = int(out)
    finally:
        stop.unlink(missing_ok=True)
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
                writer.communicate()
    assert min(written.values()) > 0

    files = log_files(str(log))
    names_on_disk = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(log.name))
    assert sorted(os.path.basename(f) for f in files) == names_on_disk
    assert any(f.endswith(".gz") for f in files), "delaycompress left nothing compressed"
    assert len(files) >= 3
    # Torn: a line that is not one whole record. Every line in every file, compressed or not, must parse.
    total = 0
    for path in files:
        lines = _raw_lines(path)
        assert lines[-1] == b"", f"{path} ends inside a record"
        for line in lines[:-1]:
            record = json.loads(line)
            assert record["summary"] == f"{record['container']} {record['seq']}"
            total += 1
    assert total == sum(written.values()), f"{sum(written.values()) - total} records lost"
    # Read back oldest first: each writer's records come in the order it wrote them, none twice.
    entries = read_all_entries(str(log))
    for name in names:
        assert [e["seq"] for e in entries if e["container"] == name] == list(range(written[name]))


@pytest.mark.parametrize("directive", ["copytruncate", "create"])
def test_the_configuration_rotates_by_rename_and_leaves_creation_to_the_writer(directive: str) -> None:
    # copytruncate loses what is written between its copy and its truncate; create races the writer's O_CREAT
    # (logrotate then moves the writer's new file aside as .backup). See the comments in the file.
    directives = [line.split()[0] for line in CONFIG.read_text().splitlines() if line.startswith("    ")]
    assert directive not in directives
    assert {"nocreate", "delaycompress", "compress"} <= set(directives)
