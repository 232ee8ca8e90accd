"""lint judged as each containerd release, against what that release does (tests/containerd/variants.py): on
every variant of a production GPU node's configuration, an error where the release refuses the file or runs
without CRI, and no error under --schema-only where it runs. The releases are the ones Debian carries: 1.6.20
(bookworm), 1.7.24 (trixie) and 2.1.9 (sid and forky); Debian has no 2.0, 2.2 or 2.3, whose verdicts are not
recorded.

The verdicts are test data (variants.json, written by `python -m tests.containerd.variants`);
tests/containerd/test_release_daemons.py runs every variant on the real daemons again and requires the same
verdicts, so that the data is what the releases do.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from nvidia_oci_hook.findings import Severity
from tests.containerd.corpus import lint_file
from tests.containerd.variants import NO_CRI, REFUSES, RUNS, VERDICTS, variants

RECORDED: dict[str, dict[str, str]] = json.loads(VERDICTS.read_text())
TEXTS = dict(variants())


def errors(text: str, release: str, tmp_path: Path, schema_only: bool) -> list[str]:
    config = tmp_path / "config.toml"
    config.write_text(text)
    found = lint_file(config, schema_only=schema_only, release=release)
    return [f"{f.code} {f.message}" for f in found if f.severity == Severity.ERROR]


def disagreements(tmp_path: Path) -> tuple[list[str], Counter[str]]:
    wrong: list[str] = []
    agreed: Counter[str] = Counter()
    for variant, by_release in RECORDED.items():
        for release, verdict in by_release.items():
            if verdict == RUNS:
                found = errors(TEXTS[variant], release, tmp_path, schema_only=True)
                if found:
                    wrong.append(f"{variant}: containerd {release} runs it, lint --schema-only says {found}")
                    continue
            else:
                if not errors(TEXTS[variant], release, tmp_path, schema_only=False):
                    wrong.append(f"{variant}: containerd {release} {verdict}, lint says nothing")
                    continue
            agreed[release] += 1
    return wrong, agreed


def test_the_variants_are_the_ones_recorded() -> None:
    assert sorted(RECORDED) == sorted(TEXTS)
    assert len(TEXTS) >= 200
    verdicts = Counter(v for by in RECORDED.values() for v in by.values())
    # Each kind of verdict is well represented, and the releases disagree on a good number of files.
    assert verdicts[REFUSES] >= 50 and verdicts[NO_CRI] >= 20 and verdicts[RUNS] >= 200, verdicts
    split = sum(1 for by in RECORDED.values() if len(set(by.values())) > 1)
    assert split >= 40, split


def test_lint_judged_as_each_release_agrees_with_it(tmp_path: Path) -> None:
    wrong, agreed = disagreements(tmp_path)
    assert not wrong, f"{len(wrong)} disagreements:\n" + "\n".join(wrong)
    assert set(agreed) == {release for by in RECORDED.values() for release in by}
