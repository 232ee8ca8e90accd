"""The hooks.d corpus: every file with its expected codes, and podman 4.3's own verdict on each.

corpus/ holds good files, files the loader accepts although they are wrong ("silent-"), and files it refuses
("bad-"); corpus_expected.json gives, for each, the codes a full lint reports against a host like a Debian 12
machine (corpus_host), what the loader does with it (accepts, skips because the program is missing, refuses)
and, where it accepts, whether the container then runs. The podman test puts each file alone in a hooks
directory, runs a container, and holds podman's verdict to `lint --schema-only` on this machine.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FakeHost
from tests.hooksd.helpers import Hit, codes, corpus_host, lint_file, refused
from tests.podman_env import HOOKS_SETUP_ERROR, run_isolated

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
EXPECTED: dict[str, dict[str, Any]] = json.loads((HERE / "corpus_expected.json").read_text("utf-8"))
FILES = sorted(path.name for path in CORPUS.iterdir())
REFUSES = "the loader refuses the file: "


def test_every_corpus_file_has_expectations() -> None:
    assert sorted(EXPECTED) == FILES
    assert {entry["loader"] for entry in EXPECTED.values()} == {"accepts", "skips", "refuses"}
    for name, entry in EXPECTED.items():
        assert name.startswith(("good-", "silent-", "bad-")), name
        assert (entry["loader"] == "refuses") == name.startswith("bad-"), name


def _schema_verdict_agrees(name: str, hits: list[Hit]) -> None:
    """What --schema-only says against the loader's verdict on the same host."""
    entry = EXPECTED[name]
    if "divergence" in entry:
        assert entry["loader"] == "accepts" and refused(hits), (name, entry["divergence"])
    else:
        assert refused(hits) == (entry["loader"] == "refuses"), (name, hits)


@pytest.mark.parametrize("name", FILES)
def test_corpus_file(name: str, fake_host: FakeHost) -> None:
    hits = lint_file(CORPUS / name, host_root=corpus_host(fake_host).root)
    assert codes(hits) == EXPECTED[name]["codes"], [(hit.code, hit.pointer, hit.message) for hit in hits]
    assert all(hit.line is not None for hit in hits), hits
    _schema_verdict_agrees(name, lint_file(CORPUS / name, host_root=fake_host.root, schema_only=True))


@pytest.mark.parametrize("name", FILES)
def test_corpus_file_offline_keeps_the_loader_verdict(name: str) -> None:
    """Without the host, only the host checks go, and what a missing program hid comes back."""
    hits = lint_file(CORPUS / name)
    host_codes = {"HKD008", "HKD101", "HKD102"}
    expected = EXPECTED[name].get("offline", [code for code in EXPECTED[name]["codes"] if code not in host_codes])
    assert codes(hits) == expected


def _normalise(text: str) -> str:
    # Go prints a number as written (1e3), Python's parser keeps only its value (1000.0); a NUL is shown escaped.
    text = text.replace("\x00", "\\x00")
    return re.sub(r"cannot unmarshal number \S+ into", "cannot unmarshal number N into", text)


def _engine_text(message: str) -> str:
    """The engine's words in a loader finding: after "the loader refuses the file: ", without our prefix."""
    return _normalise(message.split(REFUSES, 1)[-1].replace('parsing hook "…": ', "", 1))


@pytest.mark.root
@pytest.mark.runtime
def test_podman_agrees_with_schema_only(tmp_path: Path, as_root: None) -> None:
    cases = []
    for index, name in enumerate(FILES):
        directory = tmp_path / f"hooks-{index}"
        directory.mkdir()
        shutil.copyfile(CORPUS / name, directory / name)
        cases.append({"hooks_dirs": [str(directory)]})
    results = run_isolated("hooks", cases)
    disagreements: list[tuple[object, ...]] = []
    tally = {"refused": 0, "accepted": 0}
    for name, result in zip(FILES, results):
        entry = EXPECTED[name]
        output = result["output"]
        podman_refused = HOOKS_SETUP_ERROR in output and "config-filter hook" not in output
        tally["refused" if podman_refused else "accepted"] += 1
        hits = lint_file(CORPUS / name, host_root=Path("/"), schema_only=True)
        if podman_refused != (entry["loader"] == "refuses"):
            disagreements.append((name, "podman", output))
            continue
        try:
            _schema_verdict_agrees(name, hits)
        except AssertionError as exc:
            disagreements.append((name, "lint", str(exc)))
            continue
        if podman_refused and not name.startswith("bad-json"):
            # Every refusal quotes the engine's text, which podman prints (for one of the errors, if several);
            # Go's JSON syntax errors alone are worded differently from Python's.
            quoted = [_engine_text(hit.message) for hit in hits]
            if not any(text in _normalise(output) for text in quoted):
                disagreements.append((name, "message", output, quoted))
        if entry["loader"] == "accepts":
            runs = result["status"] == 0
            if runs != (entry["container"] == "runs"):
                disagreements.append((name, "container", output))
    assert not disagreements, disagreements
    assert tally["refused"] == sum(entry["loader"] == "refuses" for entry in EXPECTED.values())
