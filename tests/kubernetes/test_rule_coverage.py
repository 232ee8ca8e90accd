"""Every K8S rule has a trigger and a clean twin in one of the test_rules_* modules, and its explanation."""

from __future__ import annotations

import importlib
import pkgutil

import tests.kubernetes
from nvidia_oci_hook.kinds.kubernetes import KUBERNETES
from nvidia_oci_hook.rules.base import all_rules


def _all_cases() -> list:  # type: ignore[type-arg]
    cases = []
    for module in pkgutil.iter_modules(tests.kubernetes.__path__):
        if module.name.startswith("test_rules_"):
            cases.extend(importlib.import_module(f"tests.kubernetes.{module.name}").CASES)
    return cases


def test_every_kubernetes_rule_has_a_case() -> None:
    covered = {case.code for case in _all_cases()}
    rules = {rule.code for rule in all_rules() if KUBERNETES in rule.kinds}
    assert rules, "no rule judges Kubernetes manifests"
    assert rules <= covered, f"rules without a case: {sorted(rules - covered)}"


def test_every_kubernetes_rule_is_k8s_or_judges_other_kinds_too() -> None:
    for rule in all_rules():
        if rule.kinds == frozenset({KUBERNETES}):
            assert rule.code.startswith("K8S"), rule.code
