"""`reconcile` and `log` on the command line, and `runtime` reached through `nvidia-oci-hook`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.test_cli import run, write
from tests.engine.support import config, device
from tests.helpers import control_node
from tests.runtime.support import fake_runtime, launchers
from tests.runtime.support import run as run_process


def _needs_work() -> dict[str, object]:
    value = config()
    value["linux"]["devices"] = [device("/dev/nvidia0", 195, 0), device("/dev/nvidia0", 195, 0), control_node()]
    return value


def test_diff_shows_the_change_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, _needs_work())
    before = Path(path).read_bytes()
    status, out, err = run(capsys, "reconcile", "--host-root", str(tmp_path), path, "--diff")
    assert status == 0
    assert out.startswith(f"--- {path} (as given)\n+++ {path} (reconciled)\n@@")
    assert '+          "allow": true,' in out
    assert "edit     DEV001   /linux/devices/1: remove duplicate /dev/nvidia0 (c 195:0), kept /linux/devices/0" in err
    assert err.endswith("3 edits, 0 problems left\n")
    assert Path(path).read_bytes() == before


def test_in_place_keeps_the_style_and_skips_a_clean_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, _needs_work())
    os.chmod(path, 0o600)
    assert run(capsys, "reconcile", "--host-root", str(tmp_path), "--in-place", path)[0] == 0
    text = Path(path).read_text()
    assert text.startswith('{\n  "ociVersion"') and len(json.loads(text)["linux"]["devices"]) == 2
    assert os.stat(path).st_mode & 0o777 == 0o600
    stamp = os.stat(path).st_mtime_ns
    status, _, err = run(capsys, "reconcile", "--host-root", str(tmp_path), "--in-place", path)
    assert status == 0 and err == "0 edits, 0 problems left\n" and os.stat(path).st_mtime_ns == stamp


def test_output_file_and_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, _needs_work())
    out_path = tmp_path / "out.json"
    assert run(capsys, "reconcile", "--host-root", str(tmp_path), path, "-o", str(out_path))[0] == 0
    written = json.loads(out_path.read_text())
    status, out, _ = run(capsys, "reconcile", "--host-root", str(tmp_path), path)
    assert status == 0 and json.loads(out) == written and len(written["linux"]["devices"]) == 2


def test_problems_left_make_the_exit_status_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, config(annotations={"cdi.k8s.io/gpu": "example.com/gpu=0"}))
    status, _, err = run(capsys, "reconcile", "--host-root", str(tmp_path), path, "--diff")
    assert status == 1 and "error    REC001   /annotations/cdi.k8s.io~1gpu: CDI device example.com/gpu=0" in err


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--in-place", "--diff"], "--in-place, -o and --diff exclude each other"),
        (["--driver-root", "relative"], "'relative' is not an absolute path"),
        (["--host-root", "/nonexistent"], "--host-root /nonexistent: not a directory"),
    ],
)
def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], message: str) -> None:
    status, out, err = run(capsys, "reconcile", write(tmp_path, config()), *arguments)
    assert status == 2 and out == "" and message in err.strip().splitlines()[-1]


def test_unreadable_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for content, message in (("{not json", "not a JSON config"), ("[1]", "the top level is not an object")):
        status, _, err = run(capsys, "reconcile", "--host-root", str(tmp_path), write(tmp_path, content))
        assert status == 2 and message in err and err.count("\n") == 1
    status, _, err = run(capsys, "reconcile", str(tmp_path / "missing.json"))
    assert status == 2 and "cannot open" in err


def test_log_shows_the_wrapper_entries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "wrapper.log"
    entry = {
        "time": "t",
        "mode": "runtime",
        "container": "c1",
        "summary": "container c1: 1 edit",
        "edits": [{"code": "DEV003", "pointer": "/p", "edit": "allow x", "why": "no rule"}],
        "findings": [],
    }
    log.write_text(json.dumps(entry) + "\n{cut sho\n" + json.dumps({**entry, "container": "c2"}) + "\n")
    status, out, _ = run(capsys, "log", str(log), "--container", "c1")
    assert status == 0
    assert out == "t  runtime  container c1: 1 edit\n    edit  DEV003  /p: allow x\n          why: no rule\n"
    status, out, _ = run(capsys, "log", str(log), "--last", "1")
    assert out.count("runtime") == 1 and "c2" not in out  # the summary is what is shown
    status, _, err = run(capsys, "log", str(tmp_path / "none.log"))
    assert status == 2 and "cannot read" in err


def test_runtime_through_the_main_command(tmp_path: Path) -> None:
    hook, _ = launchers(tmp_path / "bin")
    record = tmp_path / "record"
    record.mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "RECORD_DIR": str(record),
        "NVIDIA_OCI_HOOK_CONFIG": "/dev/null",
        "NVIDIA_OCI_HOOK_RUNTIME_LOW_LEVEL": str(fake_runtime(tmp_path)),
    }
    result = run_process([str(hook), "runtime", "--", "state", "x"], env=env)
    assert result.returncode == 0 and result.stdout == b'{"status":"created"}\n'
    assert (record / "args").read_text() == "state\nx\n"


def _as_crio_writes(value: dict) -> str:
    """Go's MarshalIndent with a tab, as cri-o writes config.json, <, > and & escaped."""
    text = json.dumps(value, indent="\t")
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def test_a_tab_indented_spec_is_diffed_as_given_and_kept_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    value = _needs_work()
    value["process"]["env"].append("SCRIPT=a<b&c>d")
    path = tmp_path / "config.json"
    path.write_text(_as_crio_writes(value))
    status, out, err = run(capsys, "reconcile", "--host-root", str(tmp_path), str(path), "--diff")
    assert status == 0 and out.startswith(f"--- {path} (as given)\n+++ {path} (reconciled)\n@@"), out
    # The unchanged lines are the file's own, tabs included, and its last line is not shown as changed.
    assert '\n \t\t\t\t"type": "c",\n' in out and out.endswith("\n") and "\n-}\n" not in out
    assert all(line[:1] in " +-@" for line in out.splitlines()), out
    assert err.endswith("3 edits, 0 problems left\n")
    assert run(capsys, "reconcile", "--host-root", str(tmp_path), "--in-place", str(path))[0] == 0
    written = path.read_text()
    assert written.startswith('{\n\t"ociVersion"') and "a\\u003cb\\u0026c\\u003ed" in written
    assert len(json.loads(written)["linux"]["devices"]) == 2


def test_a_compact_spec_is_diffed_indented_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_needs_work(), separators=(",", ":")))
    out = run(capsys, "reconcile", "--host-root", str(tmp_path), str(path), "--diff")[1]
    assert out.startswith(f"--- {path} (as given, indented)\n+++ {path} (reconciled)\n@@"), out
