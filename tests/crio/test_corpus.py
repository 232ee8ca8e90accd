"""The corpus: /etc/crio-like trees, each with the findings (code, file, line) it must produce offline, and
whether cri-o refuses to load it, which must be exactly when --schema-only reports an error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.findings import Severity
from nvidia_oci_hook.rules.base import all_rules
from tests.crio.support import lint_dir, located

CORPUS = Path(__file__).parent / "corpus"
CASES = sorted(p for p in CORPUS.glob("*/*") if p.is_dir())


def expected(case: Path) -> dict[str, Any]:
    return json.loads((case / "expected.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _id(case: Path) -> str:
    return f"{case.parent.name}/{case.name}"


def test_corpus_is_there() -> None:
    assert {p.parent.name for p in CASES} == {"good", "bad"}
    assert all(not expected(p)["findings"] for p in CASES if p.parent.name == "good")
    assert all(expected(p)["findings"] for p in CASES if p.parent.name == "bad")


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_findings_point_at_file_and_line(case: Path) -> None:
    found = sorted((f.code, path, line) for f, (_, path, line) in _pairs(lint_dir(case), case))
    want = sorted((code, path, line) for code, path, line in expected(case)["findings"])
    assert found == want


def _pairs(findings: list[Any], base: Path) -> list[tuple[Any, tuple[str, str, Optional[int]]]]:
    return [(f, next(iter(located([f], base)))) for f in findings]


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_schema_only_errors_exactly_when_cri_o_refuses_to_load(case: Path) -> None:
    findings = lint_dir(case, schema_only=True)
    schema_codes = {rule.code for rule in all_rules() if rule.schema_level}
    assert all(f.code in schema_codes for f in findings)
    assert any(f.severity is Severity.ERROR for f in findings) == expected(case)["refused"]


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_command_line_exit_status_and_json(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["lint", "--offline", "--format", "json", str(case)])
    report = json.loads(capsys.readouterr().out)
    errors = report["summary"]["error"]
    assert status == (1 if errors else 0)
    assert {result["kind"] for result in report["files"]} <= {"crio-part"}
    assert sum(len(result["findings"]) for result in report["files"]) == len(expected(case)["findings"])
