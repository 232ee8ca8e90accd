"""Dotted and quoted keys in cri-o files: what CRO101 says of each shape, and no shape makes a rule raise.

TOML reads a dotted key relative to the table it is written in (`crio.image.pause_image` inside [crio.runtime]
is crio.runtime.crio.image.pause_image) and a quoted key as one name, dots included; cri-o's decoder (BurntSushi)
matches neither to a setting and drops it, as it drops every undecoded key.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.findings import Finding
from nvidia_oci_hook.formats.tomltext import parse_toml
from nvidia_oci_hook.kinds.crio.key_table import all_tables
from nvidia_oci_hook.kinds.crio.reading import CRIO, CRIO_CONFIG
from nvidia_oci_hook.kinds.document import parse_document
from nvidia_oci_hook.lint import LintOptions, active_rules, lint_document
from nvidia_oci_hook.rules.base import Context, all_rules
from tests.crio.key_mutations import assert_written_back_and_linted, mutations, to_toml
from tests.crio.support import lint_dir, write_tree

CORPUS = Path(__file__).parent / "corpus"
LEAD = "cri-o 1.37 ignores"


def lint_text(text: str) -> list[Finding]:
    document = parse_document("crio.conf", text.encode(), CRIO)
    return lint_document(document, active_rules(LintOptions(kind=CRIO, offline=True)), Context())


def said(findings: list[Finding]) -> list[tuple[str, int, str, str]]:
    return [(f.code, f.line or 0, f.message, f.hint or "") for f in findings]


SHAPES = [
    pytest.param(
        '[crio.runtime]\nlocrio.runtime.g_level = "info"\n',
        2,
        f"{LEAD} table [crio.runtime.locrio], silently: did you mean crio, a table of the top level?",
        "write [crio.runtime.locrio.runtime] as [crio.runtime]",
        id="spliced-name-of-a-top-level-table",
    ),
    pytest.param(
        "[crio.runtime]\nlocrio = 1\ncro = 1\n",
        2,
        f"{LEAD} key locrio in [crio.runtime], silently: [crio.runtime] has no such key",
        "delete locrio, or check its spelling",
        id="value-named-like-a-table",
    ),
    pytest.param(
        '[crio.runtime]\ncrio.image.pause_image = "registry.k8s.io/pause:3.10"\n',
        2,
        f"{LEAD} table [crio.runtime.crio], silently: crio is a table of the top level, not of [crio.runtime]; "
        "names inside [crio.runtime] are relative to it, so this is [crio.runtime.crio.image]",
        "write [crio.runtime.crio.image] as [crio.image]",
        id="another-tables-path-from-the-top",
    ),
    pytest.param(
        '[crio.runtime]\ncrio.runtime.log_level = "info"\n',
        2,
        f"{LEAD} table [crio.runtime.crio], silently: crio is a table of the top level, not of [crio.runtime]; "
        "names inside [crio.runtime] are relative to it, so this is [crio.runtime.crio.runtime]",
        "write [crio.runtime.crio.runtime] as [crio.runtime]",
        id="own-path-repeated",
    ),
    pytest.param(
        '[crio.runtime]\nruntime.log_level = "info"\n',
        2,
        f"{LEAD} table [crio.runtime.runtime], silently: runtime is a table of [crio], not of [crio.runtime]; "
        "names inside [crio.runtime] are relative to it, so this is [crio.runtime.runtime]",
        "write [crio.runtime.runtime] as [crio.runtime]",
        id="own-name-repeated-not-runtimes",
    ),
    pytest.param(
        '[crio.runtime]\nimage.pause_image = "registry.k8s.io/pause:3.10"\n',
        2,
        f"{LEAD} table [crio.runtime.image], silently: image is a table of [crio], not of [crio.runtime]; "
        "names inside [crio.runtime] are relative to it, so this is [crio.runtime.image]",
        "write [crio.runtime.image] as [crio.image]",
        id="sibling-tables-path",
    ),
    pytest.param(
        '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n'
        'crio.runtime.runtimes.nvidia.runtime_type = "oci"\n',
        3,
        f"{LEAD} table [crio.runtime.runtimes.nvidia.crio], silently: crio is a table of the top level, not of "
        "[crio.runtime.runtimes.nvidia]; names inside [crio.runtime.runtimes.nvidia] are relative to it, so this "
        "is [crio.runtime.runtimes.nvidia.crio.runtime.runtimes.nvidia]",
        "write [crio.runtime.runtimes.nvidia.crio.runtime.runtimes.nvidia] as [crio.runtime.runtimes.nvidia]",
        id="inside-a-runtime-entry",
    ),
    pytest.param(
        "[crio.nosuch]\nfoo.bar = 1\n",
        2,
        f"{LEAD} table [crio.nosuch], silently: [crio] has no such table",
        "delete nosuch, or check its spelling",
        id="under-a-table-that-does-not-exist",
    ),
    pytest.param(
        "[crio.runtime.nosuch.deeper]\nx.y = 1\n",
        2,
        f"{LEAD} table [crio.runtime.nosuch], silently: [crio.runtime] has no such table",
        "delete nosuch, or check its spelling",
        id="deeper-under-a-table-that-does-not-exist",
    ),
    pytest.param(
        "[crio.runtime]\nlog_levl.x = 1\n",
        2,
        f"{LEAD} table [crio.runtime.log_levl], silently: [crio.runtime] has no such table",
        "delete log_levl, or check its spelling",
        id="table-not-renamed-to-a-value",
    ),
    pytest.param(
        '[crio.runtime]\n"a.b" = 1\n',
        2,
        f'{LEAD} key "a.b" in [crio.runtime], silently: [crio.runtime] has no such key',
        'delete "a.b", or check its spelling',
        id="quoted-dotted-key",
    ),
    pytest.param(
        '[crio.runtime]\n"log.level" = "info"\n',
        2,
        f'{LEAD} key "log.level" in [crio.runtime], silently: did you mean log_level?',
        'rename "log.level" to log_level',
        id="quoted-dotted-misspelling",
    ),
    pytest.param(
        '[crio.runtime]\n"runtimes.nvidia.runtime_path" = "/usr/bin/nvidia-container-runtime"\n',
        2,
        f'{LEAD} key "runtimes.nvidia.runtime_path" in [crio.runtime], silently: the quotes make '
        '"runtimes.nvidia.runtime_path" one key with a dot in its name, not the path runtimes.nvidia.runtime_path',
        "write runtimes.nvidia.runtime_path without the quotes",
        id="quoted-path-of-a-setting",
    ),
    pytest.param(
        '"crio.runtime.log_level" = "info"\n',
        1,
        f'{LEAD} key "crio.runtime.log_level", silently: the quotes make "crio.runtime.log_level" one key with a '
        "dot in its name, not the path crio.runtime.log_level",
        "write crio.runtime.log_level without the quotes",
        id="quoted-path-at-top-level",
    ),
    pytest.param(
        '"crio.runtime".log_level = "info"\n',
        1,
        f'{LEAD} table ["crio.runtime"], silently: the quotes make "crio.runtime" one key with a dot in its name, '
        "not the path crio.runtime",
        "write crio.runtime without the quotes",
        id="quoted-table-path-at-top-level",
    ),
    pytest.param(
        '"crio.runtime" = "info"\n',
        1,
        f'{LEAD} key "crio.runtime", silently: it reads only the [crio] table',
        "delete it, or move its settings under [crio]",
        id="quoted-path-of-a-table-holding-a-value",
    ),
    pytest.param(
        '[crio.runtime]\n"" = 1\n',
        2,
        f'{LEAD} key "" in [crio.runtime], silently: [crio.runtime] has no such key',
        'delete "", or check its spelling',
        id="empty-key",
    ),
    pytest.param(
        'crio.runtime.lg_level = "info"\n',
        1,
        f"{LEAD} key lg_level in [crio.runtime], silently: did you mean log_level?",
        "rename lg_level to log_level",
        id="dotted-at-top-level",
    ),
    pytest.param(
        'runtime.log_level = "info"\n',
        1,
        f"{LEAD} table [runtime], silently: runtime is a table of [crio], not of the top level",
        "write [runtime] as [crio.runtime]",
        id="dotted-at-top-level-without-crio",
    ),
    pytest.param(
        "foo.bar = 1\n",
        1,
        f"{LEAD} table [foo], silently: it reads only the [crio] table",
        "delete it, or move its settings under [crio]",
        id="unknown-dotted-at-top-level",
    ),
    pytest.param(
        '[crio]\nruntime.runtimes.nvidia.runtime_pth = "/usr/bin/nvidia-container-runtime"\n',
        2,
        f"{LEAD} key runtime_pth in [crio.runtime.runtimes.nvidia], silently: did you mean runtime_path?",
        "rename runtime_pth to runtime_path",
        id="dotted-into-a-runtime-entry",
    ),
]


@pytest.mark.parametrize(("text", "line", "message", "hint"), SHAPES)
def test_each_shape_of_key_gets_one_finding(text: str, line: int, message: str, hint: str, tmp_path: Path) -> None:
    assert said(lint_text(text))[:1] == [("CRO101", line, message, hint)]
    # Read as a drop-in, the same file and the same words.
    root = write_tree(tmp_path, {"crio.conf.d/99-nvidia.conf": text})
    assert said(lint_dir(root))[:1] == [("CRO101", line, message, hint)]


def test_dotted_keys_that_are_right_are_read() -> None:
    text = (
        '[crio]\nruntime.log_level = "info"\n'
        'runtime.runtimes.nvidia.runtime_path = "/usr/bin/nvidia-container-runtime"\n'
        '[crio.image]\npause_image = "registry.k8s.io/pause:3.10"\n'
    )
    assert said(lint_text(text)) == []


def test_the_reported_file_exits_zero_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "crio.conf"
    path.write_text('[crio.runtime]\nlocrio.runtime.g_level = "info"\n')
    assert main(["lint", "--kind", "crio", "--offline", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert f"{path}:2:1: warning CRO101 unknown-key: {LEAD} table [crio.runtime.locrio]" in out
    assert main(["lint", "--kind", "crio", "--offline", "--fail-on", "warning", str(path)]) == 1


def test_a_dotted_key_thousands_deep_is_a_finding() -> None:
    findings = lint_text("[crio.runtime]\n" + ".".join(["a"] * 3000) + " = 1\n")
    # Python 3.11's tomllib reads it, and the key is unknown; tomli, the parser of 3.9 and 3.10, recurses once
    # per part, and the tool says the file is nested deeper than it parses. Either is a finding, never a crash.
    expected = "CRO101" if sys.version_info >= (3, 11) else "DOC003"
    assert [f.code for f in findings] == [expected]


# --- no key shape makes a rule raise: keys of every corpus file moved, quoted, spliced and re-nested ---

_TABLES = [tuple("nvidia" if part == "NAME" else part for part in path) for path, _ in all_tables()]


def _corpus_documents() -> list[tuple[str, dict[str, Any]]]:
    documents = []
    for path in sorted(CORPUS.glob("*/*/**/*")):
        if path.is_file() and path.name != "expected.json":
            parsed = parse_toml(path.read_bytes())
            if parsed.ok and isinstance(parsed.value, dict) and parsed.value:
                documents.append((str(path.relative_to(CORPUS)), parsed.value))
    return documents


def _check(value: Any) -> None:
    rules = [rule for rule in all_rules() if rule.kinds & {CRIO, CRIO_CONFIG} and rule.check is not None]
    context = Context()
    for rule in rules:
        assert rule.check is not None
        for problem in rule.check(value, context):
            assert problem.message, (rule.code, problem)
            assert problem.hint or rule.code != "CRO101", problem


def test_no_rule_raises_on_moved_quoted_or_dotted_keys() -> None:
    documents = _corpus_documents()
    assert len(documents) > 20
    rng = random.Random(20260407)
    checked = 0
    for name, document in documents:
        for label, mutated in mutations(name, document, _TABLES, 40):
            _check(mutated)
            assert_written_back_and_linted(rng, label, mutated, lint_text)
            checked += 1
    assert checked == 40 * len(documents)


def test_no_rule_raises_on_mutated_drop_ins(tmp_path: Path) -> None:
    rng = random.Random(7)
    documents = _corpus_documents()
    for index, (name, document) in enumerate(documents):
        files = {"crio.conf": to_toml(rng, document)}
        for number, (_, mutated) in enumerate(mutations(f"tree/{name}", document, _TABLES, 5)):
            files[f"crio.conf.d/{number}0.conf"] = to_toml(rng, mutated)
        root = write_tree(tmp_path / str(index), files)
        for finding in lint_dir(root):
            assert finding.message and finding.path, finding
