"""Lint: read documents, run the schema and the selected rules, return findings. No printing here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nvidia_oci_hook import io
from nvidia_oci_hook.findings import Finding, Problem
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.model.document import AUTO, OCI_CONFIG, Document, LoadProblem, Location, parse_document
from nvidia_oci_hook.model.schema import schema_problems
from nvidia_oci_hook.rules.base import DEFAULT_DRIVER_ROOTS, Context, Rule, all_rules, selected


@dataclass(frozen=True)
class LintOptions:
    kind: str = AUTO
    host_root: str = "/"
    driver_roots: tuple[str, ...] = DEFAULT_DRIVER_ROOTS
    offline: bool = False
    schema_only: bool = False
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    max_bytes: int = io.DEFAULT_MAX_BYTES


@dataclass
class FileResult:
    path: str
    kind: str
    findings: list[Finding] = field(default_factory=list)


def active_rules(options: LintOptions) -> dict[str, Rule]:
    rules = selected(all_rules(), options.select, options.ignore)
    return {
        r.code: r
        for r in rules
        if not (options.schema_only and not r.schema_level) and not (options.offline and r.needs_host)
    }


def _finding(rule: Rule, location: Location, problem: Problem) -> Finding:
    return Finding(
        rule.code,
        rule.name,
        rule.severity,
        location.path,
        problem.pointer,
        problem.message,
        location.line,
        location.column,
        problem.hint,
    )


def lint_document(document: Document, rules: dict[str, Rule], context: Context) -> list[Finding]:
    findings: list[Finding] = []
    for load_problem in document.load_problems:
        load_rule = rules.get(load_problem.code)
        if load_rule is not None:
            problem = Problem(load_problem.pointer, load_problem.message)
            findings.append(_finding(load_rule, document.locate_problem(load_problem), problem))
    if not document.parsed:
        return sorted(findings, key=Finding.sort_key)
    semantic: list[Finding] = []
    explained: set[str] = set()
    for rule in rules.values():
        if rule.check is None or not rule.applies_to(document.kind):
            continue
        for problem in rule.check(document.value, context):
            semantic.append(_finding(rule, document.locate(problem.pointer), problem))
            if rule.supersedes_schema:
                explained.add(problem.pointer)
    schema_rule = rules.get("SCH001")
    if schema_rule is not None:
        for problem in schema_problems(document.kind, document.value):
            if problem.pointer not in explained:
                findings.append(_finding(schema_rule, document.locate(problem.pointer), problem))
    findings.extend(semantic)
    return sorted(findings, key=Finding.sort_key)


def lint_paths(paths: Sequence[str], options: LintOptions) -> list[FileResult]:
    """Lint every path; raises io.ReadError for a path that cannot be read at all."""
    rules = active_rules(options)
    host = None if options.offline else HostView(options.host_root)
    results = []
    for path in paths:
        display = "<stdin>" if path == "-" else path
        try:
            raw = io.read_bounded(path, options.max_bytes)
        except io.TooLarge as exc:
            kind = OCI_CONFIG if options.kind == AUTO else options.kind
            document = Document(display, kind, "", load_problems=[LoadProblem("DOC004", str(exc))])
        else:
            document = parse_document(display, raw, options.kind)
        context = Context(host=host, driver_roots=options.driver_roots)
        results.append(FileResult(display, document.kind, lint_document(document, rules, context)))
    return results
