"""A wrapper killed between writing a bundle's new config.json and renaming it leaves `.config.json.PID.tmp`
behind; the next wrapper that writes in that bundle removes it once that pid is gone, and only then: a create that
writes nothing lists nothing (the common case stays as cheap as it was)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.engine.support import config, device
from tests.helpers import control_node
from tests.runtime.support import fake_runtime, launchers, run, write_config

# Leaves a temporary with its own pid, as a wrapper killed mid-write does, and then waits to be killed.
HALF_WRITER = """
import os, sys
open(os.path.join(sys.argv[1], f".config.json.{os.getpid()}.tmp"), "w").write('{"ociVersion": ')
print("ready", flush=True)
sys.stdin.read()
"""


def _killed_writer(bundle: Path) -> Path:
    writer = subprocess.Popen(
        [sys.executable, "-c", HALF_WRITER, str(bundle)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    writer.send_signal(signal.SIGKILL)
    writer.communicate()
    assert writer.returncode == -signal.SIGKILL
    stale = bundle / f".config.json.{writer.pid}.tmp"
    assert stale.exists()
    return stale


def _bundle(tmp_path: Path, needs_edits: bool) -> Path:
    value = config()
    if needs_edits:  # a duplicate device entry: the wrapper removes it and writes config.json
        value["linux"]["devices"] = [control_node(), device("/dev/nvidia0", 195, 0), device("/dev/nvidia0", 195, 0)]
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(value))
    return bundle


def _create(tmp_path: Path, bundle: Path) -> None:
    _, runtime = launchers(tmp_path / "bin")
    cfg = write_config(tmp_path / "config.yaml", runtime={"low_level": [str(fake_runtime(tmp_path))]}, log={"file": ""})
    record = tmp_path / "record"
    record.mkdir()
    env = {"PATH": "/usr/bin:/bin", "RECORD_DIR": str(record), "NVIDIA_OCI_HOOK_CONFIG": str(cfg)}
    result = run([str(runtime), "create", "--bundle", str(bundle), "c1"], env=env)
    assert result.returncode == 0, result.stderr


def test_the_next_write_in_the_bundle_removes_a_killed_wrappers_temporary(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, needs_edits=True)
    stale = _killed_writer(bundle)
    before = os.stat(bundle / "config.json").st_ino
    _create(tmp_path, bundle)
    assert os.stat(bundle / "config.json").st_ino != before  # it did write
    assert not stale.exists()
    assert sorted(p.name for p in bundle.iterdir()) == ["config.json"]


def test_a_create_that_writes_nothing_leaves_the_bundle_unlisted(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, needs_edits=False)
    stale = _killed_writer(bundle)
    before = os.stat(bundle / "config.json").st_ino
    _create(tmp_path, bundle)
    assert os.stat(bundle / "config.json").st_ino == before
    assert stale.exists()  # removed by the next write, not by a listing of its own
