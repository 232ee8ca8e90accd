"""The command line on cri-o configurations: one file, a directory, --kind, hostile input, explain."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.kinds.crio.reading import CRIO, CRIO_CONFIG
from nvidia_oci_hook.rules.base import all_rules
from tests.crio.support import lint_dir, write_tree

CORPUS = Path(__file__).parent / "corpus"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    status = main(["lint", "--offline", "--format", "json", *args])
    return status, json.loads(capsys.readouterr().out)


def test_one_file_is_a_whole_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    path = CORPUS / "bad/misspelt-privileged/crio.conf.d/99-nvidia.toml"
    status, report = run([str(path)], capsys)
    (result,) = report["files"]
    assert status == 0 and result["kind"] == CRIO
    assert [(f["code"], f["line"]) for f in result["findings"]] == [("CRO101", 4)]
    assert "privileged_without_host_devices" in result["findings"][0]["hint"]
    assert main(["lint", "--offline", "--fail-on", "warning", str(path)]) == 1


def test_a_dropin_alone_that_relies_on_another_file_for_its_runtimes_is_not_refused(tmp_path: Path) -> None:
    path = write_tree(tmp_path, {"99.conf": '[crio.runtime]\ndefault_runtime = "nvidia"\n'}) / "99.conf"
    assert main(["lint", "--offline", str(path)]) == 0


def test_kind_crio_on_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_tree(tmp_path / "custom", {"a.conf": '[crio.runtime]\nhooks_dir = "/x"\n'})
    status, report = run(["--kind", "crio", str(root)], capsys)
    assert status == 1
    assert [f["code"] for r in report["files"] for f in r["findings"]] == ["CRO001"]


def test_hostile_dropins_are_findings_not_tracebacks(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {"crio.conf.d/10.conf": '[crio.runtime]\ndefault_runtime = "crun"\n'})
    (root / "crio.conf.d/.10.conf.swp").write_bytes(bytes(range(256)) * 4)
    (root / "crio.conf.d/20-deep.conf").write_text("[crio.x]\na = " + "[" * 200 + "]" * 200 + "\n")
    (root / "crio.conf.d/30-empty.conf").write_text("")
    (root / "crio.conf.d/40-utf16.conf").write_bytes("[crio]\n".encode("utf-16"))
    found = {(f.code, os.path.basename(f.path)) for f in lint_dir(root)}
    assert ("CRO112", ".10.conf.swp") in found
    assert {name for code, name in found if code in ("DOC001", "DOC002")} == {".10.conf.swp", "40-utf16.conf"}
    assert ("CRO101", "20-deep.conf") in found
    assert main(["lint", "--offline", str(root)]) == 1


def test_every_crio_rule_explains_itself(capsys: pytest.CaptureFixture[str]) -> None:
    codes = [rule.code for rule in all_rules() if rule.kinds & {CRIO, CRIO_CONFIG}]
    assert len(codes) >= 17
    for code in codes:
        assert main(["explain", code]) == 0
        text = capsys.readouterr().out
        for section in ("## What it checks", "## Why it matters", "## Example", "## Fix"):
            assert section in text
    schema_level = {rule.code for rule in all_rules() if rule.schema_level and rule.code.startswith("CRO")}
    assert schema_level == {code for code in codes if code.startswith("CRO0")}
