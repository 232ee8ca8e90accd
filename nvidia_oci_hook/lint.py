"""Lint: read documents, run the schema and the selected rules, return findings. No printing here."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Callable, Optional

from nvidia_oci_hook import io
from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.findings import Finding, Problem
from nvidia_oci_hook.host import DEFAULT_DRIVER_ROOTS, LOCAL, HostView
from nvidia_oci_hook.kinds.cdi.releases import Judge
from nvidia_oci_hook.kinds.collection import Collection, DirectoryKind, directory_kind_for, follow_imports
from nvidia_oci_hook.kinds.cri import CRI_CONTAINER
from nvidia_oci_hook.kinds.document import AUTO, Document, Location, find_kind
from nvidia_oci_hook.kinds.loading import load_document
from nvidia_oci_hook.kinds.schema import schema_problems
from nvidia_oci_hook.rules.base import Context, Rule, all_rules, judged, selected


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
    node: bool = False
    # The engine's settings (CDI spec directories, annotation prefixes, policy) for the reconcile rules.
    settings: Optional[Settings] = None
    # Who judges CDI specs (--cdi-library, --engine); none: the newest library release.
    cdi_judges: tuple[Judge, ...] = ()
    # The containerd release containerd configurations are judged as (--engine containerd=VERSION); none: the
    # release found on the node with --node, else every series.
    containerd_release: Optional[str] = None
    # The engine CRI container configs are judged for (--engine crio or containerd); none: both.
    cri_engine: Optional[str] = None
    # With node: engine configuration files named by hand, read where they are (--containerd-config,
    # --crio-config, --crio-config-dir); the host checks stay on host_root.
    containerd_config: Optional[str] = None
    crio_config: Optional[str] = None
    crio_config_dir: Optional[str] = None
    # The cluster's Kubernetes release manifests are judged for (--kubernetes-version).
    kubernetes_version: Optional[str] = None
    # With node: the runtime handler a pod's sandbox is asked of (--runtime-handler); None: its RuntimeClass's.
    runtime_handler: Optional[str] = None
    # The NVIDIA Container Toolkit release its config.toml is judged as (--engine nvidia-container-toolkit=VERSION);
    # none: the release found on the node with --node, else the newest modelled.
    toolkit_release: Optional[str] = None
    # The GPU Operator release a ClusterPolicy is rendered as (--gpu-operator-version); none: the stream's, else
    # the newest modelled.
    gpu_operator_version: Optional[str] = None


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
        problem = judged(Problem(load_problem.pointer, load_problem.message, series=load_problem.series), context)
        if load_rule is not None and problem is not None:
            findings.append(_finding(load_rule, document.locate_problem(load_problem), problem))
    if not document.parsed:
        return sorted(findings, key=Finding.sort_key)
    context.document_path = context.document_path or document.path
    context.document = document
    if document.kind == CRI_CONTAINER and context.cri_engine is None and context.host is not None:
        from nvidia_oci_hook.node.engines import cri_engine_of

        # Judged for the node's own engine, where it has one (--engine names another).
        context.cri_engine = cri_engine_of(context.host)
    semantic: list[Finding] = []
    explained: set[str] = set()
    kind = find_kind(document.kind)
    attribute = kind.attribute if kind is not None else None
    for rule in rules.values():
        if rule.check is None or not rule.applies_to(document.kind):
            continue
        for found in rule.check(document.value, context):
            kept = judged(found, context)
            if kept is not None and attribute is not None:
                kept = attribute(document.value, rule.code, kept)
            if kept is None:
                continue
            semantic.append(_finding(rule, document.locate(kept.pointer), kept))
            if rule.supersedes_schema:
                explained.add(kept.pointer)
    if context.pod_node is not None and document.kind == "kubernetes":
        from nvidia_oci_hook.node.pods import document_judgements

        # The CRI configs the kubelet derives on this node, judged by the CRI rules, reported at the manifest.
        for judgement in document_judgements(document.value, context):
            for rule, found in judgement.problems:
                if rule.code not in rules:
                    continue
                kept = attribute(document.value, rule.code, found) if attribute is not None else found
                if kept is not None:
                    semantic.append(_finding(rule, document.locate(kept.pointer), kept))
    schema_rule = rules.get("SCH001")
    if schema_rule is not None:
        for problem in schema_problems(document.kind, document.value):
            if problem.pointer not in explained:
                findings.append(_finding(schema_rule, document.locate(problem.pointer), problem))
    findings.extend(semantic)
    return sorted(findings, key=Finding.sort_key)


def load_file(path: str, kind: str, options: LintOptions, files: HostView = LOCAL) -> Document:
    """Read and parse one file from where it is (files: this machine's as named, or the node's under its host
    root), held to options' size limit; raises io.ReadError when it cannot be read at all."""
    return load_document(path, kind, files, options.max_bytes)


@dataclass
class LintRun:
    files: list[FileResult]
    # With --node: (path, kind or why it was not read) for every place looked at.
    looked_at: list[tuple[str, str]] = field(default_factory=list)
    # With --node and a host root other than /: where the node's paths were read.
    node_root: str = ""


class ResultSet:
    """Findings grouped by file, in the order files were first seen."""

    def __init__(self) -> None:
        self.by_path: dict[str, FileResult] = {}

    def add(self, path: str, kind: str, findings: Sequence[Finding] = ()) -> None:
        result = self.by_path.setdefault(path, FileResult(path, kind))
        result.findings.extend(findings)

    def sorted(self) -> list[FileResult]:
        for result in self.by_path.values():
            result.findings.sort(key=Finding.sort_key)
        return list(self.by_path.values())


def lint_collection(
    collection: Collection, rules: dict[str, Rule], context_for: Callable[[], Context], results: ResultSet
) -> None:
    if collection.cdi_judges:
        plain = context_for

        def context_for() -> Context:
            return dataclasses.replace(plain(), cdi_judges=collection.cdi_judges)

    release = collection.containerd_release
    if release is not None and context_for().containerd_release is None:
        outer = context_for

        def context_for() -> Context:
            return dataclasses.replace(outer(), containerd_release=release)

    toolkit_release = collection.toolkit_release
    if toolkit_release is not None and context_for().toolkit_release is None:
        around = context_for

        def context_for() -> Context:
            return dataclasses.replace(around(), toolkit_release=toolkit_release)

    for member in collection.documents:
        results.add(member.path, member.kind, lint_document(member, rules, context_for()))
    context = context_for()
    for rule in rules.values():
        if rule.check is None or collection.kind not in rule.kinds:
            continue
        for found in rule.check(collection, context):
            problem = judged(found, context)
            if problem is None:
                continue
            path = problem.path or (collection.directories[0] if collection.directories else "")
            document = collection.document(path)
            location = document.locate(problem.pointer) if document else Location(path, None, None)
            results.add(path, document.kind if document else collection.kind, [_finding(rule, location, problem)])
    for part in collection.parts:
        lint_collection(part, rules, context_for, results)


def lint_paths(paths: Sequence[str], options: LintOptions) -> LintRun:
    """Lint every path (a file, '-', or a directory of one kind), and the node's documents with --node.

    Raises io.ReadError for a path that cannot be read at all.
    """
    from nvidia_oci_hook.kinds.kubernetes import run_manifests
    from nvidia_oci_hook.kinds.kubernetes.objects import OperatorChoice

    rules = active_rules(options)
    host = None if options.offline else HostView(options.host_root)

    def context_for() -> Context:
        return Context(
            host=host,
            driver_roots=options.driver_roots,
            settings=options.settings,
            cdi_judges=options.cdi_judges,
            containerd_release=options.containerd_release,
            cri_engine=options.cri_engine,
            kubernetes_version=options.kubernetes_version,
            runtime_handler=options.runtime_handler,
            toolkit_release=options.toolkit_release,
            gpu_operator_version=options.gpu_operator_version,
        )

    def loader(path: str, kind: str) -> Document:
        return load_file(path, kind, options)

    def node_loader(path: str, kind: str, files: HostView) -> Document:
        return load_file(path, kind, options, files)

    results = ResultSet()
    looked_at: list[tuple[str, str]] = []
    node_facts = None
    if options.node:
        from nvidia_oci_hook.node.engines import discover_node, looked_at_in
        from nvidia_oci_hook.node.locations import ByHand

        by_hand = ByHand(options.containerd_config, options.crio_config, options.crio_config_dir)
        node = discover_node(host or HostView(options.host_root), node_loader, by_hand)
        looked_at = looked_at_in(node)
        lint_collection(node, rules, context_for, results)
        node_facts = node.facts
    # Directories of one kind are read together, in the order given, as the engine reads its list of them
    # (later CDI spec directories win, a hooks file masks its namesake in an earlier directory).
    directories: dict[str, tuple[DirectoryKind, list[str]]] = {}
    documents: list[Document] = []
    for path in paths:
        if path != "-" and os.path.isdir(path):
            directory_kind = directory_kind_for(path, None if options.kind == AUTO else options.kind)
            if directory_kind is None:
                raise io.ReadError(f"{path}: is a directory holding no documents of a kind this tool reads")
            directories.setdefault(directory_kind.name, (directory_kind, []))[1].append(path)
            continue
        documents.append(load_file(path, options.kind, options))
    collections = [directory_kind.read(group, loader) for directory_kind, group in directories.values()]
    manifests = run_manifests(
        [*documents, *(member for c in collections for member in c.documents)],
        OperatorChoice(options.gpu_operator_version, options.cri_engine),
    )
    if manifests is not None:
        pod_node = None
        if options.node and host is not None and any(t is not None for t in manifests.templates()):
            from nvidia_oci_hook.node.pods import read_pod_node

            pod_node = read_pod_node(host, node_facts)
        plain_context = context_for

        def context_for() -> Context:
            return dataclasses.replace(plain_context(), manifests=manifests, pod_node=pod_node)

    for document in documents:
        # A file that names others (containerd's imports) is linted with them, as its engine reads them.
        followed = follow_imports(document, loader) if document.path != "<stdin>" else None
        if followed is not None:
            lint_collection(followed, rules, context_for, results)
            continue
        results.add(document.path, document.kind, lint_document(document, rules, context_for()))
    for collection in collections:
        lint_collection(collection, rules, context_for, results)
    node_root = options.host_root if options.node and os.path.abspath(options.host_root) != "/" else ""
    return LintRun(results.sorted(), looked_at, node_root)
