"""The CLI on real generated specs and on the schema-agreement corpus (tests/documents/corpus.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvidia_oci_hook.cli import main
from tests.documents.corpus import base_documents, corpus, upstream_valid

pytestmark = [pytest.mark.runtime, pytest.mark.root]


def lint_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, object]]]:
    status = main(["lint", "--format", "json", *args])
    out, err = capsys.readouterr()
    assert err == ""
    return status, json.loads(out)["files"][0]["findings"]


@pytest.mark.parametrize("name", ["runc-spec", "runc-spec-rootless", "crun-spec", "crun-spec-rootless", "ctr-oci-spec"])
def test_generated_spec_has_no_error(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (document,) = [doc for entry_name, _, doc in base_documents() if entry_name == name]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document, indent=4))
    status, findings = lint_json(capsys, str(path))
    assert [f for f in findings if f["severity"] == "error"] == []
    assert status == 0


def test_podman_spec_has_no_error_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # podman's bind sources live in container storage that is gone once the corpus is built: offline only.
    (document,) = [doc for name, _, doc in base_documents() if name == "podman-init"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))
    status, findings = lint_json(capsys, "--offline", str(path))
    assert [f for f in findings if f["severity"] == "error"] == [] and status == 0


def test_schema_only_cli_agrees_with_the_runtime_spec_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "document.json"
    disagreements = []
    invalid = 0
    documents = corpus()
    for name, kind, document in documents:
        path.write_text(json.dumps(document))
        status, findings = lint_json(capsys, "--schema-only", "--kind", kind, str(path))
        ours = not any(f["severity"] == "error" for f in findings)
        reference = upstream_valid(kind, document)
        invalid += not reference
        if ours != reference or status != (0 if ours else 1):
            disagreements.append((name, ours, reference, status))
    assert disagreements == []
    assert len(documents) >= 1000 and invalid >= 300 and len(documents) - invalid >= 300
