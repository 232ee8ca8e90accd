"""Lint hooks.d files and directories in memory, and build the host the corpus expects."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from nvidia_oci_hook.findings import Severity
from nvidia_oci_hook.host import DEFAULT_DRIVER_ROOTS, HostView
from nvidia_oci_hook.kinds.document import parse_document
from nvidia_oci_hook.kinds.hooksd.directories import HOOKSD_DIRS, read_hooks_dirs
from nvidia_oci_hook.kinds.hooksd.hook_file import HOOKSD
from nvidia_oci_hook.lint import LintOptions, active_rules, lint_document, load_file
from nvidia_oci_hook.rules.base import Context
from tests.helpers import FakeHost

# The host paths the corpus names, as a Debian 12 machine has them: programs that exist, a file that is not
# executable (and therefore not a directory either), and nothing under /nonexistent.
PROGRAMS = ("/bin/true", "/bin/cat", "/bin/sh")
NOT_EXECUTABLE = "/etc/passwd"


def corpus_host(host: FakeHost) -> FakeHost:
    for program in PROGRAMS:
        host.executable(program)
    return host.file(NOT_EXECUTABLE, 0o644)


@dataclass(frozen=True)
class Hit:
    path: str
    code: str
    severity: Severity
    schema_level: bool
    pointer: str
    message: str
    line: Optional[int] = None


def _options(host_root: Optional[Path], schema_only: bool) -> LintOptions:
    return LintOptions(kind=HOOKSD, host_root=str(host_root or "/"), offline=host_root is None, schema_only=schema_only)


def _context(host_root: Optional[Path], driver_roots: tuple[str, ...]) -> Context:
    return Context(host=HostView(str(host_root)) if host_root is not None else None, driver_roots=driver_roots)


def lint_file(
    source: Union[Path, bytes],
    *,
    host_root: Optional[Path] = None,
    schema_only: bool = False,
    driver_roots: tuple[str, ...] = DEFAULT_DRIVER_ROOTS,
) -> list[Hit]:
    """Lint one hooks.d file (a path, or the bytes of one) as the kind hooksd."""
    options = _options(host_root, schema_only)
    rules = active_rules(options)
    if isinstance(source, bytes):
        document = parse_document("hook.json", source, HOOKSD)
    else:
        document = load_file(str(source), HOOKSD, options)
    findings = lint_document(document, rules, _context(host_root, driver_roots))
    return [Hit(f.path, f.code, f.severity, rules[f.code].schema_level, f.pointer, f.message, f.line) for f in findings]


def lint_dirs(
    directories: Sequence[Path],
    *,
    crio_reads: bool = False,
    host_root: Optional[Path] = None,
    schema_only: bool = False,
    driver_roots: tuple[str, ...] = DEFAULT_DRIVER_ROOTS,
) -> list[Hit]:
    """Lint hooks directories read together in the given order (lowest priority first)."""
    options = _options(host_root, schema_only)
    rules = active_rules(options)
    collection = read_hooks_dirs(
        [str(d) for d in directories], lambda path, kind: load_file(path, kind, options), crio_reads=crio_reads
    )
    hits: list[Hit] = []
    for document in collection.documents:
        for f in lint_document(document, rules, _context(host_root, driver_roots)):
            hits.append(Hit(f.path, f.code, f.severity, rules[f.code].schema_level, f.pointer, f.message, f.line))
    context = _context(host_root, driver_roots)
    for rule in rules.values():
        if rule.check is None or HOOKSD_DIRS not in rule.kinds:
            continue
        for problem in rule.check(collection, context):
            path = problem.path or ""
            member = collection.document(path)
            line = member.locate(problem.pointer).line if member is not None else None
            hits.append(Hit(path, rule.code, rule.severity, rule.schema_level, problem.pointer, problem.message, line))
    return hits


def codes(hits: list[Hit]) -> list[str]:
    return sorted(hit.code for hit in hits)


def refused(hits: list[Hit]) -> bool:
    """Whether the findings say that the loader refuses: an error from a rule of --schema-only."""
    return any(hit.schema_level and hit.severity == Severity.ERROR for hit in hits)
