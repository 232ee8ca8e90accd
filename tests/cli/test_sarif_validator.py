"""The SARIF output against the SARIF 2.1.0 JSON schema and Microsoft's SARIF validator.

Both come in the npm package @microsoft/sarif-multitool-linux, which scripts/setup test installs under .tools/.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from nvidia_oci_hook.cli import main

PACKAGE = Path(__file__).parents[2] / ".tools/sarif/node_modules/@microsoft/sarif-multitool-linux"
TOOL = PACKAGE / "Sarif.Multitool"
SCHEMA = PACKAGE / "sarif-2.1.0.json"
EXAMPLES = Path(__file__).parents[2] / "examples"


def test_sarif_output_passes_the_sarif_multitool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if not TOOL.exists():
        pytest.fail(f"{TOOL} is missing: run 'sh scripts/setup test'")
    monkeypatch.chdir(EXAMPLES.parent)
    status = main(["lint", "--offline", "--format", "sarif", "examples/stale-driver-root.json",
                   str(EXAMPLES / "privileged-host-dev.json")])  # fmt: skip
    out, _ = capsys.readouterr()
    assert status == 1
    schema = json.loads(SCHEMA.read_text())
    assert schema["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0")
    errors = [error.message for error in jsonschema.Draft202012Validator(schema).iter_errors(json.loads(out))]
    assert errors == []
    log = tmp_path / "log.sarif"
    log.write_text(out)
    report = tmp_path / "validation.sarif"
    proc = subprocess.run(
        [str(TOOL), "validate", str(log), "--output", str(report)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(report.read_text())["runs"][0]["results"]
    problems = [r["message"] for r in results if r.get("level", "warning") in ("error", "warning")
                and r["ruleId"] != "SARIF2005"]  # fmt: skip
    # SARIF2005 asks for an informationUri, which is optional and which this tool does not have.
    assert problems == []
    assert {r["ruleId"] for r in results} <= {"SARIF2005"}
