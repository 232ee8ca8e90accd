"""Our OCI schemas give the same verdict as the upstream runtime-spec schema, on every document of the corpus.

Four verdicts must agree for each document: the Debian-packaged upstream schema at runtime-spec v1.3.0 (draft-04,
through jsonschema's Draft4Validator; tests/oci/setup.sh fetches it), schema_problems() finding nothing, the fast
closure check, and our jsonschema validator.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jsonschema
import pytest

from nvidia_oci_hook.kinds.schema import SCHEMA_FILES, fast_check, load_schema, schema_problems, validator_for

from .corpus import base_documents, corpus, targeted, upstream_valid

# What the fast check compiles (schema.py); anything else in a schema makes it raise.
FAST_CHECK_KEYWORDS = frozenset(
    {
        "$ref", "type", "properties", "patternProperties", "additionalProperties", "required", "items",
        "minItems", "maxItems", "minLength", "enum", "const", "pattern", "minimum", "maximum", "allOf",
        "anyOf", "oneOf", "not",
    }
)  # fmt: skip
ANNOTATION_KEYWORDS = frozenset(
    {"$schema", "$id", "$comment", "title", "description", "definitions", "examples", "default"}
)
DRAFT_07 = "http://json-schema.org/draft-07/schema#"


@dataclass(frozen=True)
class Verdicts:
    name: str
    kind: str
    document: Any
    upstream: bool
    problems: tuple[str, ...]
    fast: bool
    ours: bool

    @property
    def agree(self) -> bool:
        return self.upstream == (not self.problems) == self.fast == self.ours

    def describe(self) -> str:
        text = json.dumps(self.document, sort_keys=True)
        if len(text) > 400:
            text = text[:397] + "..."
        problems = list(self.problems[:3]) if self.problems else "none"
        return (
            f"{self.name} [{self.kind}]: upstream={self.upstream} schema_problems={problems} "
            f"fast_check={self.fast} validator_for={self.ours}\n    {text}"
        )


@pytest.fixture(scope="module")
def verdicts() -> list[Verdicts]:
    result = []
    for name, kind, document in corpus():
        problems = tuple(f"{problem.pointer or '/'}: {problem.message}" for problem in schema_problems(kind, document))
        result.append(
            Verdicts(
                name=name,
                kind=kind,
                document=document,
                upstream=upstream_valid(kind, document),
                problems=problems,
                fast=fast_check(kind)(document),
                ours=bool(validator_for(kind).is_valid(document)),
            )
        )
    return result


@pytest.mark.runtime
@pytest.mark.root
def test_every_verdict_agrees_with_upstream(verdicts: list[Verdicts]) -> None:
    disagreements = [verdict for verdict in verdicts if not verdict.agree]
    assert not disagreements, f"{len(disagreements)} of {len(verdicts)} documents disagree:\n" + "\n".join(
        verdict.describe() for verdict in disagreements[:25]
    )


@pytest.mark.runtime
@pytest.mark.root
def test_corpus_is_large_and_balanced(verdicts: list[Verdicts]) -> None:
    valid = sum(1 for verdict in verdicts if verdict.upstream)
    invalid = len(verdicts) - valid
    assert len(verdicts) >= 1000
    assert valid >= 300, f"only {valid} valid documents"
    assert invalid >= 300, f"only {invalid} invalid documents"
    assert {verdict.kind for verdict in verdicts} == {"oci", "oci-state"}
    assert len({verdict.name for verdict in verdicts}) == len(verdicts), "document names must be unique"


@pytest.mark.runtime
@pytest.mark.root
def test_generated_base_documents_are_valid() -> None:
    bases = base_documents()
    assert {"runc-spec", "runc-spec-rootless", "crun-spec", "crun-spec-rootless", "ctr-oci-spec", "podman-init"} <= {
        name for name, _kind, _document in bases
    }
    refused = [
        (name, [problem.message for problem in schema_problems(kind, document)][:3])
        for name, kind, document in bases
        if not (upstream_valid(kind, document) and fast_check(kind)(document))
    ]
    assert not refused, f"generated base documents refused: {refused}"


@pytest.mark.runtime
@pytest.mark.root
def test_targeted_cases_get_the_expected_upstream_verdict(verdicts: list[Verdicts]) -> None:
    upstream = {verdict.name: verdict.upstream for verdict in verdicts}
    wrong = [
        f"{name}: expected {'valid' if expected else 'invalid'}"
        for name, _kind, _document, expected in targeted()
        if upstream[name] != expected
    ]
    assert not wrong, "\n".join(wrong)


def _walk(node: Any, where: str, keywords: set[str], refs: list[tuple[str, str]]) -> None:
    """Collects every keyword and every $ref (with where it sits) of a schema node, recursively."""
    if isinstance(node, bool):
        return
    assert isinstance(node, dict), f"{where}: a schema must be an object"
    keywords.update(node)
    if "$ref" in node:
        refs.append((where, node["$ref"]))
        extra = set(node) - {"$ref"} - ANNOTATION_KEYWORDS
        # jsonschema ignores a $ref's siblings in draft-07 while the fast check would apply them.
        assert not extra, f"{where}: $ref has sibling keywords {sorted(extra)}"
    for keyword in ("properties", "patternProperties", "definitions"):
        for name, sub in node.get(keyword, {}).items():
            _walk(sub, f"{where}/{keyword}/{name}", keywords, refs)
    for keyword in ("items", "additionalProperties", "not"):
        if keyword in node and not isinstance(node[keyword], list):
            _walk(node[keyword], f"{where}/{keyword}", keywords, refs)
    for keyword in ("allOf", "anyOf", "oneOf"):
        for index, sub in enumerate(node.get(keyword, [])):
            _walk(sub, f"{where}/{keyword}/{index}", keywords, refs)
    if isinstance(node.get("items"), list):  # tuple form
        for index, sub in enumerate(node["items"]):
            _walk(sub, f"{where}/items/{index}", keywords, refs)


@pytest.mark.parametrize("kind", sorted(SCHEMA_FILES))
def test_schema_file_is_draft7_and_fast_checkable(kind: str) -> None:
    schema = load_schema(kind)
    assert schema["$schema"] == DRAFT_07
    jsonschema.Draft7Validator.check_schema(schema)
    fast_check(kind)  # compiles, so raises on any keyword it does not support
    keywords: set[str] = set()
    refs: list[tuple[str, str]] = []
    _walk(schema, "#", keywords, refs)
    assert keywords <= FAST_CHECK_KEYWORDS | ANNOTATION_KEYWORDS, sorted(keywords - FAST_CHECK_KEYWORDS)
    definitions = schema.get("definitions", {})
    for where, ref in refs:
        assert ref.startswith("#/definitions/"), f"{where}: only internal references, not {ref!r}"
        assert ref[len("#/definitions/") :] in definitions, f"{where}: {ref!r} does not resolve"
    unused = set(definitions) - {ref[len("#/definitions/") :] for _where, ref in refs}
    assert not unused, f"definitions nothing refers to (the fast check would never compile them): {sorted(unused)}"
