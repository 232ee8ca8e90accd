"""The containerd config corpus: good/ and bad/ files whose first comment lines say what lint must report.

Header lines (comments at the top of a file):
    # expect: CTD101@5 CTD106@1     every finding, as CODE@LINE (LINE "?" when the finding has no line)
    # host: empty                   lint against an empty host root instead of offline
A file without an expect line must produce no finding at all. good/ files have no error or warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from nvidia_oci_hook.findings import Finding
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.containerd.kind import CONTAINERD
from nvidia_oci_hook.lint import LintOptions, active_rules, lint_document, load_file
from nvidia_oci_hook.rules.base import Context

CORPUS = Path(__file__).parent / "corpus"
_EXPECT = re.compile(r"^#\s*expect:(.*)$")
_HOST = re.compile(r"^#\s*host:\s*empty\s*$")


@dataclass(frozen=True)
class Entry:
    path: Path
    expected: frozenset[tuple[str, Optional[int]]]
    empty_host: bool

    @property
    def id(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"

    @property
    def good(self) -> bool:
        return self.path.parent.name == "good"


def _header(path: Path) -> tuple[frozenset[tuple[str, Optional[int]]], bool]:
    expected: set[tuple[str, Optional[int]]] = set()
    empty_host = False
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.startswith("#"):
            break
        match = _EXPECT.match(line)
        if match:
            for token in match.group(1).split():
                code, _, at = token.partition("@")
                expected.add((code, None if at == "?" else int(at)))
        elif _HOST.match(line):
            empty_host = True
    return frozenset(expected), empty_host


def entries() -> list[Entry]:
    found = []
    for path in sorted(CORPUS.glob("*/*.toml")):
        expected, empty_host = _header(path)
        found.append(Entry(path, expected, empty_host))
    return found


def lint_file(
    path: Path,
    *,
    host_root: Optional[Path] = None,
    offline: bool = True,
    schema_only: bool = False,
    release: Optional[str] = None,
) -> list[Finding]:
    """lint of one containerd file; release: judged as that containerd release (--engine containerd=VERSION)."""
    options = LintOptions(kind=CONTAINERD, offline=offline, schema_only=schema_only)
    document = load_file(str(path), CONTAINERD, options)
    host = None if offline else HostView(str(host_root) if host_root is not None else "/")
    return lint_document(document, active_rules(options), Context(host=host, containerd_release=release))
