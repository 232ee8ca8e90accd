"""The model against the CDI Go library itself (tests/cdi/reference, built by tests/cdi/setup.sh).

`lint --schema-only` must report an error for exactly the specs the library refuses, and the model's first
problem must carry the library's own error text; the model's cache must resolve the devices the library's
cache resolves.
"""

from __future__ import annotations

import copy
import json
import os
import random
from pathlib import Path
from typing import Any, Callable

import pytest

from nvidia_oci_hook.kinds.cdi.codes import TEXT
from nvidia_oci_hook.kinds.cdi.directories import cache_devices, read_spec_dirs
from nvidia_oci_hook.kinds.cdi.goyaml import refine_document
from nvidia_oci_hook.kinds.cdi.releases import Judge, Library, library
from nvidia_oci_hook.kinds.cdi.validation import analyse
from nvidia_oci_hook.kinds.document import Document
from nvidia_oci_hook.lint import LintOptions, ResultSet, active_rules, lint_collection, lint_document, load_file
from nvidia_oci_hook.rules.base import Context
from tests.cdi.corpus import base_specs, dump, mutated_specs, nvidia_spec, text_mutants, write_specs
from tests.cdi.support import REFERENCES, library_error_text, reference_dirs, reference_files, reference_version

pytestmark = pytest.mark.runtime

CORPUS = Path(__file__).parent / "corpus"
MUTANTS = 500
TEXT_MUTANTS = 250


@pytest.fixture(scope="module", params=sorted(REFERENCES))
def release(request: pytest.FixtureRequest) -> Library:
    """Each release tests/cdi/setup.sh builds the reference against."""
    return library(request.param)


def _options(release: Library, **values: Any) -> LintOptions:
    return LintOptions(kind="cdi", offline=True, cdi_judges=(Judge(release),), **values)


def _context_for(release: Library) -> Callable[[], Context]:
    return lambda: Context(cdi_judges=(Judge(release),))


def test_reference_is_the_modelled_library_release(release: Library) -> None:
    assert reference_version(release.release).startswith(f"{release.release}-")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Hand-written specs, NVIDIA-style specs and their seeded mutants, in one spec directory."""
    directory = tmp_path_factory.mktemp("agreement") / "specs"
    specs = mutated_specs(MUTANTS) + text_mutants(TEXT_MUTANTS)
    specs += [
        (f"base-{name}.{ext}", dump(value, ext == "yaml")) for name, value in base_specs() for ext in ("json", "yaml")
    ]
    specs += [
        (f"corpus-{path.parent.name}-{path.name}", path.read_bytes())
        for path in sorted(CORPUS.rglob("*"))
        if path.suffix in (".json", ".yaml") and path.name != "expected.json"
    ]
    return write_specs(directory, specs)


@pytest.fixture(scope="module")
def verdicts(corpus: list[Path], release: Library) -> dict[str, dict[str, Any]]:
    return reference_files(corpus, release.release)


@pytest.fixture(scope="module")
def documents(corpus: list[Path]) -> dict[str, tuple[Document, Document]]:
    """Each spec as `lint FILE` parses it, and as the spec-directory reader refines it."""
    parsed = {}
    for path in corpus:
        plain = load_file(str(path), "cdi", LintOptions(kind="cdi", offline=True, schema_only=True))
        refined = copy.copy(plain)
        refine_document(refined)
        parsed[str(path)] = (plain, refined)
    return parsed


def test_schema_only_errors_exactly_where_the_library_refuses(
    corpus: list[Path], verdicts: dict[str, dict[str, Any]], release: Library
) -> None:
    options = _options(release, schema_only=True)
    collection = read_spec_dirs([str(corpus[0].parent)], lambda path, kind: load_file(path, kind, options))
    results = ResultSet()
    lint_collection(collection, active_rules(options), _context_for(release), results)
    errors = {result.path: [f for f in result.findings if f.severity.label == "error"] for result in results.sorted()}
    disagreements = [
        (path.name, verdicts[str(path)], [(f.code, f.message) for f in errors.get(str(path), [])][:2])
        for path in corpus
        if bool(errors.get(str(path))) == verdicts[str(path)]["ok"]
    ]
    assert disagreements == []
    refused = [path for path in corpus if not verdicts[str(path)]["ok"]]
    # The corpus reaches every kind of refusal, panics included, and many specs that load.
    assert 0.3 * len(corpus) < len(refused) < 0.9 * len(corpus)
    assert sum(1 for path in refused if "panic" in verdicts[str(path)]) >= 10
    # Every kind of refusal the release has: 0.5.2 checks no minimum version, takes no intelRdt (an unknown
    # field there) and loads a spec without devices.
    absent = {"CDI005", "CDI009", "CDI015"} if release.legacy_texts and not release.minimum_check else set()
    expected = {f"CDI0{n:02d}" for n in range(1, 17)} - absent
    assert {f.code for path in refused for f in errors[str(path)]} >= expected


def test_first_problem_quotes_the_library_error(
    corpus: list[Path],
    verdicts: dict[str, dict[str, Any]],
    documents: dict[str, tuple[Document, Document]],
    release: Library,
) -> None:
    compared = 0
    for path in corpus:
        verdict = verdicts[str(path)]
        document = documents[str(path)][1]
        if verdict["ok"] or not document.parsed or any(p.code in (TEXT, "DOC002") for p in document.load_problems):
            continue  # text-level refusals: goyaml.v2's messages carry its own line numbers
        assert analyse(document.value, release).library_error == library_error_text(verdict, path), path.name
        compared += 1
    assert compared > 300


def test_single_files_agree_too_where_nothing_needs_the_text(
    corpus: list[Path],
    verdicts: dict[str, dict[str, Any]],
    documents: dict[str, tuple[Document, Document]],
    release: Library,
) -> None:
    """`lint --kind cdi FILE` does not yet re-read the text as goyaml.v2 does (see kinds/cdi/goyaml.refine_document);
    for every spec whose text holds nothing goyaml.v2 reads differently, its verdict must already agree."""
    rules = active_rules(_options(release, schema_only=True))
    checked = 0
    for path in corpus:
        plain, refined = documents[str(path)]
        if plain.load_problems != refined.load_problems or plain.value != refined.value:
            continue
        findings = lint_document(plain, rules, _context_for(release)())
        assert any(f.severity.label == "error" for f in findings) != verdicts[str(path)]["ok"], path.name
        checked += 1
    assert checked > 0.5 * len(corpus)


def _random_directories(root: Path, rng: random.Random) -> list[Path]:
    """Two or three spec directories whose specs define overlapping devices of two vendors and classes."""
    directories = [root / f"d{n}" for n in range(rng.choice([2, 3]))]
    for directory in directories:
        directory.mkdir(parents=True)
        for index in range(rng.randrange(4)):
            spec = nvidia_spec(1, compact=True)
            spec["kind"] = rng.choice(["nvidia.com/gpu", "nvidia.com/gpu", "example.com/net"])
            names = rng.sample(["0", "1", "2", "all"], rng.randrange(1, 4))
            spec["devices"] = [{"name": n, "containerEdits": {"env": [f"N={n}"]}} for n in names]
            if rng.random() < 0.1:
                spec["cdiVersion"] = "9.9.9"  # a spec the library refuses takes no part in conflicts
            extension = rng.choice([".json", ".yaml", ".yaml", ".yml"])
            (directory / f"s{index}{extension}").write_bytes(dump(spec, extension != ".json"))
    return directories


def test_spec_directories_resolve_as_the_cache_does(tmp_path: Path, release: Library) -> None:
    rng = random.Random(7)
    scenarios = [[CORPUS / "dirs" / "etc", CORPUS / "dirs" / "run"]]
    scenarios += [_random_directories(tmp_path / f"s{n}", rng) for n in range(40)]
    linked = tmp_path / "linked"
    os.symlink(scenarios[1][0], linked)
    scenarios.append([linked, scenarios[1][1]])
    conflicts_seen = 0
    options = _options(release)

    def loader(path: str, kind: str) -> Document:
        return load_file(path, kind, options)

    for directories in scenarios:
        reference = reference_dirs(directories, release.release)
        collection = read_spec_dirs([str(d) for d in directories], loader)
        resolved = {name: definition.path for name, definition in cache_devices(collection, release).items()}
        assert resolved == reference["devices"], directories
        conflicted = {path for path, errors in reference["errors"].items() if any("conflicting" in e for e in errors)}
        results = ResultSet()
        lint_collection(collection, active_rules(options), _context_for(release), results)
        flagged = {f.path for result in results.sorted() for f in result.findings if f.code == "CDI201"}
        flagged_same_dir = {
            path for path in flagged if any(json.dumps(path) in e for es in reference["errors"].values() for e in es)
        }
        assert flagged_same_dir == conflicted, directories
        conflicts_seen += len(conflicted)
    assert conflicts_seen >= 10
