"""The CDI corpus: every file with its expected codes (corpus/expected.json), and the command line on it."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.kinds.cdi.directories import cache_devices, read_spec_dirs
from nvidia_oci_hook.lint import LintOptions, load_file
from tests.cdi.support import HOSTS, lint_dirs
from tests.helpers import FakeHost

CORPUS = Path(__file__).parent / "corpus"
MANIFEST: dict[str, Any] = json.loads((CORPUS / "expected.json").read_text())


def test_every_corpus_spec_is_in_the_manifest() -> None:
    on_disk = {
        str(path.relative_to(CORPUS))
        for path in CORPUS.rglob("*")
        if path.is_file() and path.name != "expected.json" and path.parts[len(CORPUS.parts)] != "dirs"
    }
    assert on_disk == set(MANIFEST["files"])


@pytest.mark.root
@pytest.mark.parametrize("name", sorted(MANIFEST["files"]))
def test_corpus_spec_has_its_expected_codes(name: str, tmp_path: Path, as_root: None) -> None:
    want = MANIFEST["files"][name]
    directory = tmp_path / "cdi"
    directory.mkdir()
    shutil.copy(CORPUS / name, directory)
    host = FakeHost(tmp_path / "host")
    host.root.mkdir()
    HOSTS[want["host"]](host)
    findings = lint_dirs([directory], host_root=host.root)
    assert sorted(f.code for f in findings) == want["codes"]
    assert all(f.line is not None for f in findings if f.pointer), [(f.code, f.pointer) for f in findings]
    assert all(f.message and f.path == str(directory / Path(name).name) for f in findings)


def test_spec_directories_have_their_expected_codes() -> None:
    scenario = MANIFEST["dirs"]
    findings = lint_dirs([CORPUS / d for d in scenario["directories"]])
    found: dict[str, list[str]] = defaultdict(list)
    for finding in findings:
        found[str(Path(finding.path).relative_to(CORPUS))].append(finding.code)
    assert {path: sorted(codes) for path, codes in found.items()} == scenario["codes"]


def test_spec_directories_resolve_the_devices_the_cache_resolves() -> None:
    scenario = MANIFEST["dirs"]
    options = LintOptions(kind="cdi", offline=True)
    collection = read_spec_dirs(
        [str(CORPUS / d) for d in scenario["directories"]], lambda path, kind: load_file(path, kind, options)
    )
    resolved = {name: str(Path(d.path).relative_to(CORPUS)) for name, d in cache_devices(collection).items()}
    assert resolved == scenario["devices"]


def _json_lint(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    status = main(["lint", "--format", "json", *args])
    return status, json.loads(capsys.readouterr().out)


def test_cli_reports_code_pointer_line_and_library_text(capsys: pytest.CaptureFixture[str]) -> None:
    status, report = _json_lint(capsys, "--offline", str(CORPUS / "bad" / "device-node.json"))
    (result,) = report["files"]
    assert status == 1 and result["kind"] == "cdi"
    first = result["findings"][0]
    assert first["code"] == "CDI012" and first["pointer"] == "/devices/0/containerEdits/deviceNodes/0/type"
    assert first["line"] == 5
    assert (
        'invalid CDI Spec: failed add device "0": invalid device "0": device "/dev/nvidia0": invalid type "char"'
        in (first["message"])
    )


def test_cli_reads_a_spec_directory_as_the_cdi_cache_does(capsys: pytest.CaptureFixture[str]) -> None:
    status, report = _json_lint(capsys, "--offline", str(CORPUS / "dirs" / "etc"))
    by_path = {Path(result["path"]).name: [f["code"] for f in result["findings"]] for result in report["files"]}
    assert status == 1
    assert by_path["nvidia-backup.json"] == ["CDI201"] and by_path["vfio.yml"] == ["CDI203"]
    assert "README" not in by_path


def test_schema_only_keeps_only_what_the_library_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    status, report = _json_lint(capsys, "--offline", "--schema-only", str(CORPUS / "bad" / "without-nvidiactl.json"))
    assert status == 0 and report["files"][0]["findings"] == []
    status, report = _json_lint(capsys, "--offline", "--schema-only", str(CORPUS / "bad" / "version-too-old.json"))
    assert status == 1 and [f["code"] for f in report["files"][0]["findings"]] == ["CDI005"]


def test_explain_prints_every_section_for_a_cdi_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "CDI016"]) == 0
    text = capsys.readouterr().out
    for section in ("What it checks", "Why it matters", "Example", "Fix"):
        assert section in text
    assert "invalid memory address" in text
