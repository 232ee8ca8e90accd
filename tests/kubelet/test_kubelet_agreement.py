"""lint's verdict for a GPU pod agrees with what a real kubelet 1.32 and its engine did with it: every case of
tests/kubelet/agreement.py (pod manifests on node states: device specs, CDI names and annotations, env alone, no
plugin; privileged or not) run as static pods on cri-o 1.37, containerd 1.7 and 2.1, and containerd 1.7 with CDI
off, each container's observed verdict held to `nvidia-oci-hook pod`'s (judged with the pod's UID, and the same
before the pod was created), where both refuse to the engine's words, and to the verdict and message recorded in
agreement.json (`python -m tests.kubelet.agreement` records it again). The counts per engine (cases, agreed,
observed verdicts) are printed and kept as the test's `agreement` property.

Where lint is known to say otherwise than the engine, KNOWN_DISAGREEMENTS holds the case, the engines, lint's
verdict and why it is wrong; the test fails once lint agrees there, so that the entry goes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from nvidia_oci_hook.node.pods import AS_ASKED, EVERY_GPU, REFUSED, WITHOUT_GPU
from tests.kubelet.agreement import ENGINES, RECORDED, cases, counts, measure
from tests.kubelet.harness import CDI_OFF, KubeletUnavailable, skip_reason

AGREEMENT: dict[str, dict[str, dict[str, str]]] = json.loads(RECORDED.read_text())

KNOWN_DISAGREEMENTS: dict[tuple[str, str], tuple[str, str]] = {}


def _wrong(case: str, engine: str, observed: str, lint: str, detail: str) -> list[str]:
    """What is wrong with lint's verdict for one case: nothing where it agrees, or where it disagrees as known."""
    known = KNOWN_DISAGREEMENTS.get((case, engine))
    if known is None:
        return [] if lint == observed else [f"{case} on {engine}: observed {observed}, lint {lint}: {detail}"]
    if lint == observed:
        return [f"{case} on {engine}: lint agrees now ({lint}): remove its KNOWN_DISAGREEMENTS entry"]
    if lint != known[0]:
        return [f"{case} on {engine}: observed {observed}, lint {lint} (known to say {known[0]}): {detail}"]
    return []


def test_the_recording_covers_every_case_on_every_engine() -> None:
    generated = [case.id for case in cases()]
    assert list(AGREEMENT) == generated
    assert 20 <= len(generated) <= 40
    assert all(sorted(by_engine) == sorted(ENGINES) for by_engine in AGREEMENT.values())
    wrong = [
        line
        for case, by_engine in AGREEMENT.items()
        for engine, entry in by_engine.items()
        for line in _wrong(case, engine, entry["observed"], entry["lint"], entry["message"])
    ]
    assert not wrong, "\n".join(wrong)
    assert {case for case, _ in KNOWN_DISAGREEMENTS} <= set(generated)
    observed = {entry["observed"] for by_engine in AGREEMENT.values() for entry in by_engine.values()}
    assert {WITHOUT_GPU, EVERY_GPU, AS_ASKED} < observed, observed
    for engine in ENGINES:
        print(f"{engine}: {json.dumps(counts(AGREEMENT, engine))}")


@pytest.mark.runtime
@pytest.mark.root
@pytest.mark.parametrize("engine", ENGINES)
def test_lint_agrees_with_the_kubelet_and_the_engine(engine: str, record_property: Any) -> None:
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    try:
        measured = measure(engine)
    except KubeletUnavailable as error:
        pytest.fail(str(error))
    assert sorted(measured.outcomes) == sorted(AGREEMENT)
    assert measured.node["engine"] == ("crio" if engine == "crio" else "containerd"), measured.node
    if engine == CDI_OFF:
        assert measured.node["cdi"].startswith("enable_cdi = false"), measured.node
    else:
        assert measured.node["cdi"] == "on", measured.node
    changed = [
        f"{case}: recorded {AGREEMENT[case][engine]['observed']} ({AGREEMENT[case][engine]['message']}), now "
        f"{outcome.observed} ({outcome.message})"
        for case, outcome in measured.outcomes.items()
        if (outcome.observed, outcome.message)
        != (AGREEMENT[case][engine]["observed"], AGREEMENT[case][engine]["message"])
    ]
    wrong = [
        line
        for case, outcome in measured.outcomes.items()
        for line in _wrong(case, engine, outcome.observed, outcome.lint, f"{outcome.message}; lint: {outcome.reasons}")
    ]
    # Where both refuse, lint says it in the engine's words: its message, or a part of it lint quotes.
    unquoted = [
        f"{case}: the engine said {outcome.message!r}; lint: {outcome.reasons}"
        for case, outcome in measured.outcomes.items()
        if outcome.observed == outcome.lint == REFUSED
        and not any(
            outcome.message.split(": ", 1)[-1] in reason
            or any(quoted in outcome.message for quoted in re.findall(r"`([^`]+)`", reason))
            for reason in outcome.reasons
        )
    ]
    predicted = [
        f"{case}: before the pod {outcome.predicted} {outcome.predicted_reasons}, with its UID {outcome.lint}"
        for case, outcome in measured.outcomes.items()
        if outcome.predicted is not None and outcome.predicted != outcome.lint
    ]
    tally = counts({case: {engine: outcome.recorded()} for case, outcome in measured.outcomes.items()}, engine)
    record_property("agreement", json.dumps(tally))
    print(f"{engine}: {json.dumps(tally)}; {', '.join(f'{k} {v:.1f} s' for k, v in measured.timings.items())}")
    assert sum(outcome.predicted is not None for outcome in measured.outcomes.values()) >= 1
    assert not (changed or wrong or unquoted or predicted), "\n".join(
        [
            *(f"changed: {line}" for line in changed),
            *wrong,
            *(f"not in the engine's words: {line}" for line in unquoted),
            *(f"predicted: {line}" for line in predicted),
        ]
    )
