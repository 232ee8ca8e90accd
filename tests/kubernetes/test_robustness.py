"""Manifests of the wrong shape (a list where the API has a map, a number where it has a string, null anywhere)
never make a K8S rule fail: each case's trigger, with every value in turn replaced by one of another type, is
linted without an exception."""

from __future__ import annotations

import copy
import random
from typing import Any

import yaml

from nvidia_oci_hook.kinds.document import parse_document
from nvidia_oci_hook.kinds.kubernetes import run_manifests
from nvidia_oci_hook.lint import LintOptions, active_rules, lint_document
from nvidia_oci_hook.rules.base import Context
from tests.kubernetes.cases import manifest
from tests.kubernetes.test_rule_coverage import _all_cases

ODD_VALUES: list[Any] = [None, 0, 1.5, True, "", "x", [], {}, ["x"], {"x": 1}, [None], -1, 2**70]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _replaced(documents: list[Any], path: tuple[Any, ...], odd: Any) -> list[Any]:
    changed = copy.deepcopy(documents)
    node = changed
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = odd
    return changed


def _lint(documents: list[Any]) -> None:
    text = yaml.safe_dump_all(documents).encode()
    document = parse_document("odd.yaml", text, "kubernetes")
    context = Context(kubernetes_version="1.33", manifests=run_manifests([document]))
    lint_document(document, active_rules(LintOptions(offline=True)), context)


def test_no_rule_fails_on_values_of_the_wrong_type() -> None:
    rng = random.Random(31)
    linted = 0
    for case in _all_cases():
        if not isinstance(case.trigger, str):
            continue  # a node rule's trigger is a node state: tests/kubernetes/test_rules_on_node.py's own
        documents = [d for d in yaml.safe_load_all(manifest(case.trigger)) if d is not None]
        for path in _paths(documents)[1:]:
            _lint(_replaced(documents, path, rng.choice(ODD_VALUES)))
            linted += 1
    assert linted > 500
