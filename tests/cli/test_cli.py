"""The command-line contract: exit statuses, output formats, selection, configuration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.rules.base import all_rules

CONFLICT = {
    "ociVersion": "1.0.2",
    "linux": {
        "devices": [
            {"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255},
            {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0},
            {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 1},
        ],
        "resources": {"devices": [{"allow": True, "access": "rwm"}]},
    },
}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def write(tmp_path: Path, value: Any, name: str = "config.json") -> str:
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value, indent=2))
    return str(path)


def test_clean_config_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "lint", "--offline", write(tmp_path, {"ociVersion": "1.0.2"}))
    assert status == 0
    assert out == "no problems in 1 file\n"


def test_findings_exit_one_with_location_and_hint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, CONFLICT)
    status, out, _ = run(capsys, "lint", "--offline", path)
    assert status == 1
    first = out.splitlines()[0]
    assert first.startswith(f"{path}:17:7: error DEV002 conflicting-device: /dev/nvidia0 is c 195:1 here")
    assert first.endswith("[/linux/devices/2]")
    assert out.splitlines()[1].startswith("    fix: remove one of /linux/devices/1 and /linux/devices/2")


def test_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, CONFLICT)
    status, out, _ = run(capsys, "lint", "--offline", "--format", "json", path)
    payload = json.loads(out)
    assert status == 1
    assert set(payload) == {"version", "files", "summary"}
    assert payload["version"] == 1
    assert payload["summary"] == {"error": 1, "warning": 0, "info": 0}
    (file_entry,) = payload["files"]
    assert file_entry["path"] == path and file_entry["kind"] == "oci"
    (finding,) = file_entry["findings"]
    assert set(finding) == {"code", "severity", "pointer", "line", "message", "hint"}
    assert finding["code"] == "DEV002" and finding["severity"] == "error"
    assert finding["pointer"] == "/linux/devices/2" and finding["line"] == 17


def test_sarif_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "lint", "--offline", "--format", "sarif", write(tmp_path, CONFLICT))
    sarif = json.loads(out)
    assert status == 1
    assert sarif["version"] == "2.1.0"
    (sarif_run,) = sarif["runs"]
    rules = sarif_run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in all_rules()]
    assert all("helpUri" not in r and "## Fix" in r["help"]["text"] for r in rules)
    (result,) = sarif_run["results"]
    assert rules[result["ruleIndex"]]["id"] == result["ruleId"] == "DEV002"
    assert result["level"] == "error"
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": 17, "startColumn": 7}


def test_select_and_ignore_take_prefixes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    value = json.loads(json.dumps(CONFLICT))
    value["linux"]["devices"].append({"path": "/dev/nvidia-uvm", "type": "c", "major": 195, "minor": 0})
    path = write(tmp_path, value)
    _, out, _ = run(capsys, "lint", "--offline", "--format", "json", path)
    found = {f["code"] for f in json.loads(out)["files"][0]["findings"]}
    assert found == {"DEV002", "GPU003"}
    _, out, _ = run(capsys, "lint", "--offline", "--format", "json", "--select", "gpu", path)
    assert {f["code"] for f in json.loads(out)["files"][0]["findings"]} == {"GPU003"}
    status, out, _ = run(capsys, "lint", "--offline", "--format", "json", "--ignore", "DEV,GPU003", path)
    assert json.loads(out)["files"][0]["findings"] == [] and status == 0


def test_unknown_selector_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "lint", "--select", "NOPE", write(tmp_path, CONFLICT))
    assert status == 2
    assert "'NOPE' is no rule code or prefix" in err


def test_fail_on_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    value = {"ociVersion": "1.0.2", "hooks": {"prestart": [{"path": "/bin/true"}]}}
    path = write(tmp_path, value)
    assert run(capsys, "lint", "--offline", path)[0] == 0
    assert run(capsys, "lint", "--offline", "--fail-on", "warning", path)[0] == 1


def test_schema_only_keeps_only_reference_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    value = json.loads(json.dumps(CONFLICT))
    value["linux"]["devices"][0]["major"] = "195"
    _, out, _ = run(capsys, "lint", "--schema-only", "--format", "json", write(tmp_path, value))
    assert [f["code"] for f in json.loads(out)["files"][0]["findings"]] == ["SCH001"]


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(CONFLICT).encode())))
    status, out, _ = run(capsys, "lint", "--offline", "-")
    assert status == 1 and out.startswith("<stdin>:1:")


def test_rules_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "rules", "--format", "json")
    listed = json.loads(out)
    assert status == 0 and [r["code"] for r in listed] == [r.code for r in all_rules()]
    status, out, _ = run(capsys, "explain", "host001")
    assert status == 0
    for section in ("## What it checks", "## Why it matters", "## Example", "## Fix"):
        assert section in out
    status, _, err = run(capsys, "explain", "XYZ999")
    assert status == 2 and err == "nvidia-oci-hook: unknown rule code 'XYZ999' (see 'nvidia-oci-hook rules')\n"


def test_config_file_sets_defaults_and_bad_keys_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, CONFLICT)
    config = tmp_path / "config.yaml"
    config.write_text("lint:\n  ignore: [DEV002]\n")
    assert run(capsys, "--config", str(config), "lint", "--offline", path)[0] == 0
    config.write_text("lint:\n  ignroe: [DEV002]\n")
    status, _, err = run(capsys, "--config", str(config), "lint", "--offline", path)
    assert status == 2
    assert err == f"nvidia-oci-hook: {config}: unknown key 'lint.ignroe' (known: fail_on, ignore, select)\n"
    status, _, err = run(capsys, "--config", str(tmp_path / "absent.yaml"), "lint", path)
    assert status == 2 and "cannot open" in err


def test_console_script_runs_as_a_program(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nvidia_oci_hook", "lint", "--offline", write(tmp_path, CONFLICT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert "DEV002" in proc.stdout and proc.stderr == ""
