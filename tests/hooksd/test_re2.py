"""nvidia_oci_hook.formats.re2 against Go's regexp.Compile, as recorded by tests/hooksd/regex_corpus.py."""

from __future__ import annotations

import re
import time

import pytest

from nvidia_oci_hook.formats import re2
from tests.hooksd.regex_corpus import HANDWRITTEN, recorded

VERDICTS = recorded()


def test_the_recording_covers_the_corpus() -> None:
    patterns = [pattern for pattern, _, _ in VERDICTS]
    assert len(patterns) > 2500 and set(HANDWRITTEN) <= set(patterns)
    assert sum(old is not None for _, old, _ in VERDICTS) > 1000  # both verdicts are well represented
    assert sum(old is None for _, old, _ in VERDICTS) > 400
    assert any(old is not None and new is None for _, old, new in VERDICTS)


def test_same_verdict_and_message_as_go() -> None:
    """Go 1.19's exact error text for every pattern, and whether the newer Go accepts it."""
    wrong = []
    for pattern, old, new in VERDICTS:
        error = re2.check(pattern)
        mine = None if error is None else str(error)
        newer_accepts = error is None or error.newer_go_accepts
        if mine != old or newer_accepts != (new is None):
            wrong.append((pattern[:80], old, new, mine))
    assert not wrong, wrong[:20]


@pytest.mark.parametrize(
    "pattern",
    ["(?=x)", "(?!x)", "(?<=x)", "(?<!x)", "(a)\\1", "x\\Z", "(?P<n>a)(?P=n)", "(?#c)", "(?x)a", "(a)(?(1)b|c)"],
)
def test_python_compiles_what_go_refuses(pattern: str) -> None:
    re.compile(pattern)
    assert re2.check(pattern) is not None


@pytest.mark.parametrize("pattern", ["^*", "a(?i)*", "(?)", "x{,2}", "a{01}", "[[:word:]]", "\\pL", "(?P<a>x)(?P<a>y)"])
def test_go_compiles_what_python_may_not(pattern: str) -> None:
    assert re2.check(pattern) is None


HOSTILE = {
    "parens": lambda n: "(" * n + ")" * n,
    "groups": lambda n: "(?:" * n + "a" + ")" * n,
    "classes": lambda n: "[[:" * n,
    "quotes": lambda n: "\\Q" * n,
    "alternation": lambda n: "a|" * n,
    "repeats": lambda n: "(?:a{2}){2}" * (n // 5),
    "unicode": lambda n: "\\p{" * n,
}


def _cpu_seconds(pattern: str) -> float:
    # CPU time of the best of three: wall time on a loaded CI machine says more about its neighbours than about us
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        re2.check(pattern)
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_patterns_neither_recurse_nor_go_quadratic(name: str) -> None:
    build = HOSTILE[name]
    re2.check(build(50000))  # nesting this deep would exhaust any recursive parser's stack
    small, large = _cpu_seconds(build(5000)), _cpu_seconds(build(40000))
    # eight times the input: about eight times the work when linear, 64 when quadratic; a loaded machine's caches
    # stretch the larger run by up to half as much again
    assert large < 0.02 or large / small < 24, (small, large)
