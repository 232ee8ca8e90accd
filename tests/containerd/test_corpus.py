"""Acceptance: every corpus file produces exactly the findings (code and line) its header lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvidia_oci_hook.findings import Severity
from nvidia_oci_hook.kinds.document import parse_document
from tests.containerd.corpus import Entry, entries, lint_file

ENTRIES = entries()


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_corpus_file_has_exactly_its_expected_findings(entry: Entry, tmp_path: Path) -> None:
    host_root = tmp_path / "empty-host"
    host_root.mkdir()
    findings = lint_file(entry.path, host_root=host_root, offline=not entry.empty_host)
    found = {(f.code, f.line) for f in findings}
    assert found == set(entry.expected), "\n".join(f"{f.code}@{f.line} {f.message}" for f in findings)
    worst = max((f.severity for f in findings), default=Severity.INFO)
    if entry.good:
        assert worst == Severity.INFO, "a good/ file must have no error or warning"
    else:
        assert worst >= Severity.WARNING, "a bad/ file must have an error or a warning"


def test_corpus_is_large_enough_and_covers_both_versions() -> None:
    versions = {entry.path.name.split("-")[0] for entry in ENTRIES}
    assert {"v1", "v2", "v3", "version", "syntax"} <= versions
    assert sum(entry.good for entry in ENTRIES) >= 8 and sum(not entry.good for entry in ENTRIES) >= 50


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.good], ids=lambda e: e.id)
def test_good_files_are_detected_as_containerd_configs(entry: Entry) -> None:
    document = parse_document(str(entry.path), entry.path.read_bytes())
    assert document.kind == "containerd"
