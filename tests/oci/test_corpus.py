"""OCI configs and states: good and bad documents with their expected codes (offline checks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvidia_oci_hook.cli import main

CORPUS = Path(__file__).parent / "corpus"
EXPECTED = json.loads((CORPUS / "expected.json").read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_document_gets_exactly_its_expected_codes(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["lint", "--offline", "--format", "json", str(CORPUS / name)])
    (result,) = json.loads(capsys.readouterr().out)["files"]
    want = EXPECTED[name]
    assert result["kind"] == want["kind"]
    assert sorted(f["code"] for f in result["findings"]) == sorted(want["codes"])
    assert all(isinstance(f["line"], int) for f in result["findings"])
    errors = any(f["severity"] == "error" for f in result["findings"])
    assert status == (1 if errors else 0)


def test_corpus_is_listed_whole() -> None:
    assert {path.name for path in CORPUS.glob("*.json")} - {"expected.json"} == set(EXPECTED)
