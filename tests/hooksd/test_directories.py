"""Hooks directories: lint's view of each case in dir_cases, and podman 4.3's behaviour on the same trees."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import pytest

from nvidia_oci_hook.kinds.collection import directory_kind_for
from nvidia_oci_hook.kinds.document import Document, parse_document
from nvidia_oci_hook.kinds.hooksd.directories import (
    DOCUMENT,
    HOOKSD_DIRS,
    NOT_JSON,
    UNREADABLE,
    VANISHED,
    read_hooks_dirs,
)
from tests.helpers import FakeHost
from tests.hooksd.dir_cases import CASES, DirCase, build, hook
from tests.hooksd.helpers import Hit, corpus_host, lint_dirs
from tests.podman_env import HOOKS_SETUP_ERROR, run_isolated


def _by_file(hits: list[Hit], root: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for hit in hits:
        found[os.path.relpath(hit.path, root)].append(hit.code)
    return {path: sorted(codes) for path, codes in found.items()}


def _hidden(hits: list[Hit]) -> set[str]:
    return {hit.path for hit in hits if hit.code == "HKD206"}


def lint_case(case: DirCase, root: Path, host: FakeHost) -> list[Hit]:
    directories = build(case, root, root / "marker")
    return lint_dirs(directories, crio_reads=case.crio_reads, host_root=corpus_host(host).root)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_directory_case(case: DirCase, tmp_path: Path, fake_host: FakeHost) -> None:
    root = tmp_path / "tree"
    hits = lint_case(case, root, fake_host)
    assert _by_file(hits, root) == case.expected, [(hit.path, hit.code, hit.message) for hit in hits]
    assert all(hit.path for hit in hits)


def test_every_directory_rule_is_exercised_by_a_case() -> None:
    from nvidia_oci_hook.rules.base import all_rules

    directory_rules = {rule.code for rule in all_rules() if HOOKSD_DIRS in rule.kinds}
    exercised = {code for case in CASES for codes in case.expected.values() for code in codes}
    assert directory_rules <= exercised


def _loader(path: str, kind: str) -> Document:
    return parse_document(path, Path(path).read_bytes(), kind)


def test_read_order_and_entries(tmp_path: Path) -> None:
    usr, etc = tmp_path / "usr", tmp_path / "etc"
    usr.mkdir()
    etc.mkdir()
    for name in ("b.json", "A.json", "a.json", "\u00e9.json", "_.json", "notes.txt"):
        (usr / name).write_text(hook())
    (etc / "a.json").write_text(hook())
    (etc / "dir.json").mkdir()
    (etc / "gone.json").symlink_to(tmp_path / "nothing")
    collection = read_hooks_dirs([str(usr), str(etc), str(tmp_path / "absent")], _loader, crio_reads=True)
    assert collection.kind == HOOKSD_DIRS and collection.crio
    assert collection.directories == [str(usr), str(etc), str(tmp_path / "absent")]
    assert collection.missing_directories == [str(tmp_path / "absent")]
    # Byte order within a directory, as Go's os.ReadDir gives it: upper case, then '_', lower case, UTF-8.
    assert [(Path(e.directory).name, e.name, e.status) for e in collection.entries] == [
        ("usr", "A.json", DOCUMENT),
        ("usr", "_.json", DOCUMENT),
        ("usr", "a.json", DOCUMENT),
        ("usr", "b.json", DOCUMENT),
        ("usr", "notes.txt", NOT_JSON),
        ("usr", "\u00e9.json", DOCUMENT),
        ("etc", "a.json", DOCUMENT),
        ("etc", "dir.json", UNREADABLE),
        ("etc", "gone.json", VANISHED),
    ]
    assert [document.path for document in collection.documents] == [
        str(usr / "A.json"),
        str(usr / "_.json"),
        str(usr / "a.json"),
        str(usr / "b.json"),
        str(usr / "\u00e9.json"),
        str(etc / "a.json"),
    ]
    assert all(document.kind == "hooksd" for document in collection.documents)
    assert "is a directory" in collection.entries[7].reason


def test_directory_kind_claims_hooks_directories(tmp_path: Path) -> None:
    named = tmp_path / "hooks.d"
    named.mkdir()
    assert directory_kind_for(str(named), None).name == HOOKSD_DIRS  # type: ignore[union-attr]
    other = tmp_path / "custom-hooks"
    other.mkdir()
    (other / "10-nvidia.json").write_text(hook())
    assert directory_kind_for(str(other), None).name == HOOKSD_DIRS  # type: ignore[union-attr]
    assert directory_kind_for(str(other), "hooksd").name == HOOKSD_DIRS  # type: ignore[union-attr]


@pytest.mark.root
@pytest.mark.runtime
def test_podman_reads_directories_as_lint_says(tmp_path: Path, as_root: None) -> None:
    """Masking, ignored names, hidden errors: podman 4.3's outcome on each tree against lint's findings."""
    runnable = [case for case in CASES if case.podman_refuses is not None]
    cases = []
    trees = []
    for index, case in enumerate(runnable):
        root = tmp_path / f"case-{index}"
        marker = root / "marker"
        directories = build(case, root, marker)
        trees.append(root)
        cases.append({"hooks_dirs": [str(d) for d in directories], "marker": str(marker)})
    results = run_isolated("hooks", cases)
    problems: list[tuple[object, ...]] = []
    for case, root, result in zip(runnable, trees, results):
        output = result["output"]
        refused = HOOKS_SETUP_ERROR in output and "config-filter hook" not in output
        words = sorted((result["marker"] or "").split())
        if refused != case.podman_refuses or (not refused and words != case.words):
            problems.append((case.id, "podman", refused, words, output))
            continue
        # lint on the real host: the loader refuses the directories exactly when a file has a --schema-only
        # error that no earlier missing program hides (HKD206).
        hits = lint_dirs([root / d for d in case.dirs], host_root=Path("/"))
        errors = {hit.path for hit in hits if hit.schema_level and hit.severity.label == "error"}
        if bool(errors - _hidden(hits)) != refused:
            problems.append((case.id, "lint", sorted(errors), [(h.path, h.code) for h in hits]))
    assert not problems, problems


def test_directory_listed_twice_counts_where_it_is_read_last(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for directory in (first, second):
        directory.mkdir()
        (directory / "gpu.json").write_text(hook())
    collection = read_hooks_dirs([str(first), str(second), f"{first}/"], _loader)
    assert collection.directories == [str(second), f"{first}/"]
    assert [entry.path for entry in collection.entries] == [str(second / "gpu.json"), f"{first}/gpu.json"]
