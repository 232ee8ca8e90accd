"""lint --schema-only against real containerd: `containerd --config FILE config dump` on every corpus file.

`config dump` decodes the file, its imports and every plugin's section the way the daemon does at start-up,
without starting anything. For each binary (Debian 12's 1.6, 1.7 from trixie, 2.x from sid):

- every file a release refuses has an error from lint --schema-only, unless the file's config version is not
  for that release (version 3 on 1.x), in which case lint must say so (CTD106);
- every file that all the releases its version is for load has no error from lint --schema-only (one documented
  exception, checked against the daemon in test_daemon.py);
- the default config each release prints (`containerd config default`) has no error or warning;
- containerd 2.x's "Ignoring unknown key" warnings on version 3 files are exactly the keys this tool's model
  says containerd 2.1 ignores.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Optional

import pytest

from nvidia_oci_hook.findings import Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.formats.tomltext import parse_toml
from nvidia_oci_hook.kinds.containerd.config import ContainerdConfig
from nvidia_oci_hook.kinds.containerd.structs import plugin_tables
from nvidia_oci_hook.kinds.containerd.versions import ALL, READERS
from tests.containerd.corpus import Entry, entries, lint_file
from tests.containerd.real import Binary, Dump, binaries, describe, dump

pytestmark = pytest.mark.runtime

ENTRIES = entries()
# containerd 2.x's `config dump` accepts a negative version, and its daemon then panics at start-up
# (test_daemon.py checks that): lint reports it (CTD002) although every `config dump` loads the file.
LOADED_BUT_REFUSED_BY_THE_DAEMON = {"bad/version-negative.toml"}
VERSION_FINDINGS = {"CTD104", "CTD105", "CTD106"}


def _value(entry: Entry) -> Any:
    parsed = parse_toml(entry.path.read_bytes())
    return parsed.value if parsed.ok else None


def reading_series(entry: Entry) -> frozenset[str]:
    """The containerd series a file is meant for: every one, except for config versions 3 and 4."""
    value = _value(entry)
    version = value.get("version") if isinstance(value, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version in (3, 4):
        return READERS[version]
    return ALL


@pytest.fixture(scope="module")
def releases() -> list[Binary]:
    found = binaries()
    assert [b.series for b in found][:2] == ["1.6", "1.7"] and found[2].series.startswith("2."), found
    return found


@pytest.fixture(scope="module")
def dumps(releases: list[Binary], tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Dump]:
    cwd = tmp_path_factory.mktemp("containerd-cwd")
    return {(b.version, e.id): dump(b, e.path, cwd) for b in releases for e in ENTRIES}


@pytest.fixture(scope="module")
def schema_errors() -> dict[str, list[str]]:
    """lint --schema-only, against this machine (the same one containerd resolves imports on)."""
    return {
        e.id: [
            f"{f.code}@{f.line} {f.message}"
            for f in lint_file(e.path, offline=False, schema_only=True)
            if f.severity == Severity.ERROR
        ]
        for e in ENTRIES
    }


def test_every_file_a_release_refuses_is_an_error_for_lint(
    releases: list[Binary], dumps: dict[tuple[str, str], Dump], schema_errors: dict[str, list[str]]
) -> None:
    missed = []
    for binary in releases:
        for entry in ENTRIES:
            result = dumps[(binary.version, entry.id)]
            if not result.refused:
                continue
            if binary.series not in reading_series(entry):
                codes = {f.code for f in lint_file(entry.path)}
                if not codes & VERSION_FINDINGS:
                    why = describe(binary, entry.path, result)
                    missed.append(f"{entry.id}: not for {binary}, and lint does not say so; {why}")
            elif not schema_errors[entry.id]:
                missed.append(f"{entry.id}: no schema-level error, but {describe(binary, entry.path, result)}")
    assert not missed, "\n".join(missed)


def test_files_every_release_loads_have_no_schema_error(
    releases: list[Binary], dumps: dict[tuple[str, str], Dump], schema_errors: dict[str, list[str]]
) -> None:
    wrong = []
    for entry in ENTRIES:
        readers = [b for b in releases if b.series in reading_series(entry)]
        if any(dumps[(b.version, entry.id)].refused for b in readers):
            continue
        if schema_errors[entry.id] and entry.id not in LOADED_BUT_REFUSED_BY_THE_DAEMON:
            loaded = ", ".join(b.version for b in readers)
            wrong.append(f"{entry.id}: loaded by {loaded}, yet {schema_errors[entry.id]}")
    assert not wrong, "\n".join(wrong)
    for entry_id in LOADED_BUT_REFUSED_BY_THE_DAEMON:
        assert all(not dumps[(b.version, entry_id)].refused for b in releases), f"{entry_id} is no exception now"


def _model_ignored(value: Any, series: str) -> set[str]:
    """Pointers of the keys the model says containerd `series` ignores, in the tables it models.

    Plugin names are left out (containerd ignores an unknown plugin without a warning), and so are runc
    options (containerd decodes them per pod, not at start-up).
    """
    issues = ContainerdConfig(value).walk().keys
    plugin_names = {i.pointer for i in issues if i.path[:1] == ("plugins",) and len(i.path) == 2}
    return {i.pointer for i in issues if series in i.ignored_by} - plugin_names


def _warning_pointer(plugin: Optional[str], key: str) -> str:
    pointer = pointer_join("/plugins", plugin) if plugin else ""
    for part in key.split(" "):
        pointer = pointer_join(pointer, part)
    return pointer


def test_unknown_keys_are_those_containerd_2_warns_about(
    releases: list[Binary], dumps: dict[tuple[str, str], Dump]
) -> None:
    modern = releases[2]
    compared = 0
    for entry in ENTRIES:
        value = _value(entry)
        if not isinstance(value, dict) or value.get("version") != 3 or dumps[(modern.version, entry.id)].refused:
            continue
        warned = {_warning_pointer(plugin, key) for plugin, key in dumps[(modern.version, entry.id)].unknown_keys()}
        # containerd warns about unknown keys inside plugins this tool does not model, and about plugin names
        # it does not know only by ignoring them silently: compare the top level and the CRI plugins.
        modelled = set(plugin_tables(3))
        warned = {p for p in warned if not p.startswith("/plugins/") or p.split("/")[2] in modelled}
        # containerd names every table level below an unknown key; the model names the unknown key itself.
        warned = {p for p in warned if not any(p.startswith(other + "/") for other in warned)}
        expected = _model_ignored(value, modern.series)
        assert warned == expected, f"{entry.id}: containerd {modern.version} warns {warned}, the model says {expected}"
        compared += 1
    assert compared >= 8


def test_each_release_s_default_config_is_clean(releases: list[Binary], tmp_path: Path) -> None:
    """`containerd config default` of each release names every key it knows: none may be unknown or wrong."""
    for binary in releases:
        result = subprocess.run([str(binary.path), "config", "default"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        config = tmp_path / f"default-{binary.version}.toml"
        config.write_text(result.stdout)
        findings = lint_file(config)
        assert len(result.stdout) > 1000
        loud = [f"{f.code}@{f.line} {f.message}" for f in findings if f.severity >= Severity.WARNING]
        assert not loud, f"containerd {binary.version} config default:\n" + "\n".join(loud)


def test_agreement_counts(
    releases: list[Binary], dumps: dict[tuple[str, str], Dump], schema_errors: dict[str, list[str]]
) -> None:
    """Print what each release did with the corpus; the corpus must keep telling the releases apart."""
    lines = [f"corpus: {len(ENTRIES)} files"]
    refusals: Counter[str] = Counter()
    for binary in releases:
        meant = [e for e in ENTRIES if binary.series in reading_series(e)]
        other = [e for e in ENTRIES if binary.series not in reading_series(e)]
        refused = [e for e in meant if dumps[(binary.version, e.id)].refused]
        loaded = [e for e in meant if not dumps[(binary.version, e.id)].refused]
        refused_other = [e for e in other if dumps[(binary.version, e.id)].refused]
        for entry in refused + refused_other:
            refusals[entry.id] += 1
        lines.append(
            f"containerd {binary.version}: {len(meant)} files of its config versions: refused {len(refused)} "
            f"({sum(bool(schema_errors[e.id]) for e in refused)} with a --schema-only error), loaded {len(loaded)} "
            f"({sum(bool(schema_errors[e.id]) for e in loaded)} with an error, refused by another release or its "
            f"daemon); {len(other)} version 3/4 files: refused {len(refused_other)}, loaded "
            f"{len(other) - len(refused_other)}"
        )
        assert len(refused) >= 15, f"{binary} refuses too few corpus files to mean anything"
    split = sum(1 for n in refusals.values() if 0 < n < len(releases))
    everyone = sum(1 for n in refusals.values() if n == len(releases))
    lines.append(f"refused by all three: {everyone}; by one or two: {split}")
    assert split >= 8 and everyone >= 10
    sys.stdout.write("\n" + "\n".join(lines) + "\n")
