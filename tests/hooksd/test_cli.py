"""The command line on hooks.d files and directories: detection, exit status, JSON output, explain."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.hooksd.dir_cases import hook

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nvidia_oci_hook", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_directory_is_linted_as_hooks_directory(tmp_path: Path) -> None:
    directory = tmp_path / "hooks.d"
    directory.mkdir()
    (directory / "10-gpu.json").write_text(hook(stages=["pre-start"]))
    (directory / "20-gpu.json.rpmsave").write_text(hook())
    result = run("lint", "--offline", "--format", "json", str(directory))
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    found = {(Path(f["path"]).name, f["kind"], finding["code"]) for f in report["files"] for finding in f["findings"]}
    assert ("10-gpu.json", "hooksd", "HKD006") in found
    assert ("20-gpu.json.rpmsave", "hooksd-dirs", "HKD201") in found
    stage = next(finding for f in report["files"] for finding in f["findings"] if finding["code"] == "HKD006")
    assert stage["pointer"] == "/stages/0" and stage["line"] is not None
    assert 'unknown stage "pre-start"' in stage["message"] and stage["hint"] == "use prestart"


def test_schema_only_passes_a_file_the_loader_accepts(tmp_path: Path) -> None:
    path = tmp_path / "gpu.json"
    path.write_text(hook(stages=["prestart"], when={}))  # never matches, deprecated stage: not the loader's concern
    assert run("lint", "--offline", "--schema-only", str(path)).returncode == 0
    result = run("lint", "--offline", str(path))
    assert result.returncode == 1 and "HKD103" in result.stdout and "HKD108" in result.stdout


def test_hostile_file_is_a_finding_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "gpu.json"
    path.write_text('{"version": "1.0.0", "hook": {"path": "' + "(" * 5000 + '"}, "when": {"commands": ["'
                    + "(" * 100000 + '"]}, "stages": [' + "[" * 200 + "]" * 200 + "]}")  # fmt: skip
    result = run("lint", "--offline", "--kind", "hooksd", str(path))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "HKD005" in result.stdout and "HKD002" in result.stdout


def test_explain_and_rules() -> None:
    explained = run("explain", "HKD206")
    assert explained.returncode == 0
    for section in ("## What it checks", "## Why it matters", "## Example", "## Fix"):
        assert section in explained.stdout
    listed = json.loads(run("rules", "--format", "json").stdout)
    codes = {entry["code"] for entry in (listed["rules"] if isinstance(listed, dict) else listed)}
    assert {f"HKD00{n}" for n in range(1, 9)} <= codes and "HKD207" in codes
