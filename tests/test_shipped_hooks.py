"""The hooks.d files the project ships: the engines' loader accepts them, and they run the modes they name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import run

HOOKS = Path(__file__).resolve().parents[1] / "hooks"


def test_lint_accepts_the_shipped_hooks_files(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(path) for path in HOOKS.glob("*.json"))
    assert len(files) == 2
    status, out, _ = run(capsys, "lint", "--offline", "--format", "json", *files)
    report = json.loads(out)
    assert status == 0 and [f["kind"] for f in report["files"]] == ["hooksd", "hooksd"]
    assert report["summary"]["error"] == 0, out
    # The one warning left says what the README says: the precreate file must stay out of cri-o's directories.
    warnings = [f["code"] for file in report["files"] for f in file["findings"]]
    assert warnings == ["HKD109"], out


@pytest.mark.parametrize(("name", "stage"), [("guard", "createRuntime"), ("precreate", "precreate")])
def test_each_file_runs_its_mode(name: str, stage: str) -> None:
    hook = json.loads((HOOKS / f"nvidia-oci-hook-{name}.json").read_text())
    assert hook["stages"] == [stage] and hook["hook"]["args"][-2:] == ["hook", stage]
    assert hook["hook"]["path"] == "/usr/bin/nvidia-oci-hook" and hook["when"] == {"always": True}
