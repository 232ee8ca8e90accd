"""What a rule is, and the registry every front-end reads: lint, rules, explain, SARIF, the documentation
site's rule reference (scripts/docs.py).

A rule's documentation is its docstring, in four sections (What it checks / Why it matters / Example / Fix);
the first line is the one-line summary.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.host import DEFAULT_DRIVER_ROOTS, HostView
from nvidia_oci_hook.kinds.cdi.releases import Judge

ANY_KIND = "*"

DOC_SECTIONS = ("What it checks", "Why it matters", "Example", "Fix")

# A rule's family is the letters of its code; each family is about one document or one layer.
FAMILIES = {
    "DOC": "the document's text",
    "SCH": "the runtime-spec schema",
    "CFG": "config.json's own consistency",
    "DEV": "device nodes and their cgroup rules",
    "HOOK": "OCI hooks in config.json",
    "GPU": "GPU requests in config.json",
    "HOST": "config.json against the node",
    "DRV": "what the NVIDIA_* variables ask of the node's driver",
    "STA": "OCI state",
    "REC": "what the reconcile engine cannot do",
    "CRI": "CRI container configs",
    "CDI": "CDI specs and spec directories",
    "HKD": "hooks.d files and directories",
    "CRO": "cri-o's configuration",
    "CTD": "containerd's configuration",
    "NCT": "NVIDIA Container Toolkit's config.toml",
    "K8S": "Kubernetes manifests and pods on the node",
    "NODE": "the node as a whole",
}


@dataclass
class Context:
    """What a check may consult besides the document: the host (None when offline) and shared derived views."""

    host: Optional[HostView] = None
    driver_roots: tuple[str, ...] = DEFAULT_DRIVER_ROOTS
    # The tool's configuration, for the rules that run the reconcile engine; None: the defaults.
    settings: Optional[Settings] = None
    # The CDI library releases that judge a CDI spec (--cdi-library, --engine, the node's engines); none: the
    # newest decides, and the rules say which older engine releases refuse a spec it loads.
    cdi_judges: tuple[Judge, ...] = ()
    # The containerd release a containerd configuration is judged as (--engine containerd=VERSION, the node's);
    # none: every series, each finding naming those it is for.
    containerd_release: Optional[str] = None
    # The engine a CRI container config is judged for ("crio", "containerd"; --engine, the node's); none: both,
    # each finding saying what each one does.
    cri_engine: Optional[str] = None
    # The linted file as named ("-" for standard input): a config.json's root.path is relative to its directory.
    document_path: str = ""
    # Every Kubernetes object of the run (all manifest files and streams given together), for the rules that judge
    # one object by others; None: the document's own.
    manifests: Optional[Any] = None
    # The cluster's Kubernetes release (--kubernetes-version, "1.32"); None: not known, nothing judged by it.
    kubernetes_version: Optional[str] = None
    # With lint --node and manifests: what the node says of the pods it would run (node/pods.py PodNode), and the
    # runtime handler named by --runtime-handler; None: pods are judged as manifests only.
    pod_node: Optional[Any] = None
    runtime_handler: Optional[str] = None
    # The NVIDIA Container Toolkit release its config.toml is judged as (--engine nvidia-container-toolkit=VERSION,
    # the node's); None: the newest modelled.
    toolkit_release: Optional[str] = None
    # The GPU Operator release a ClusterPolicy is rendered as (--gpu-operator-version); None: the stream's, else
    # the newest modelled.
    gpu_operator_version: Optional[str] = None
    # The document being linted, for the rules that quote a position the way its own reader prints it.
    document: Optional[Any] = None
    memo: dict[str, Any] = field(default_factory=dict)

    @property
    def containerd_series(self) -> Optional[str]:
        from nvidia_oci_hook.kinds.containerd.versions import series_of

        return series_of(self.containerd_release) if self.containerd_release else None

    def cached(self, key: str, build: Callable[[], Any]) -> Any:
        if key not in self.memo:
            self.memo[key] = build()
        return self.memo[key]


def judged(problem: Problem, context: Context) -> Optional[Problem]:
    """The problem as the engine and the containerd release judged for see it: None where it is one of the other
    engine's, or of other containerd series only; where the release is not modelled, its message says which
    series judged it."""
    from nvidia_oci_hook.kinds.containerd.versions import release_note

    if context.cri_engine is not None and problem.engines is not None and context.cri_engine not in problem.engines:
        return None
    series, release = context.containerd_series, context.containerd_release
    if series is None or release is None or problem.series is None:
        return problem
    if series not in problem.series:
        return None
    note = release_note(release)
    if note == f"containerd {release}":
        return problem
    return replace(problem, message=f"{problem.message} [{note}]")


Check = Callable[[Any, Context], Iterable[Problem]]


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: Severity
    kinds: frozenset[str]
    summary: str
    sections: dict[str, str]
    check: Optional[Check] = None  # None: reported by the loader or the schema check, not by a check function
    needs_host: bool = False
    schema_level: bool = False  # part of --schema-only: the format's own reference rejects the document
    # Its findings replace the generic schema finding at the same pointer: it says what the runtime really does.
    supersedes_schema: bool = False

    @property
    def family(self) -> str:
        return self.code.rstrip("0123456789")

    def applies_to(self, kind: str) -> bool:
        return kind in self.kinds or ANY_KIND in self.kinds

    @property
    def explanation(self) -> str:
        return "\n\n".join(f"## {title}\n{self.sections[title]}" for title in DOC_SECTIONS)


_REGISTRY: dict[str, Rule] = {}

_SECTION = re.compile(r"^## (.+)$", re.MULTILINE)


def _parse_doc(code: str, doc: Optional[str]) -> tuple[str, dict[str, str]]:
    if not doc:
        raise ValueError(f"rule {code} has no docstring")
    text = inspect.cleandoc(doc)
    summary, _, body = text.partition("\n")
    parts = _SECTION.split(body)
    sections = {parts[i].strip(): parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}
    missing = [title for title in DOC_SECTIONS if not sections.get(title)]
    if missing:
        raise ValueError(f"rule {code} documentation lacks {', '.join(missing)}")
    return summary.strip(), sections


def register(
    code: str,
    name: str,
    severity: Severity,
    kinds: Iterable[str],
    *,
    needs_host: bool = False,
    schema_level: bool = False,
    supersedes_schema: bool = False,
    doc: Optional[str] = None,
    check: Optional[Check] = None,
) -> Rule:
    if code in _REGISTRY:
        raise ValueError(f"rule code {code} registered twice")
    summary, sections = _parse_doc(code, doc if doc is not None else (check.__doc__ if check else None))
    rule = Rule(
        code, name, severity, frozenset(kinds), summary, sections, check, needs_host, schema_level, supersedes_schema
    )
    _REGISTRY[code] = rule
    return rule


def rule(
    code: str,
    name: str,
    severity: Severity,
    kinds: Iterable[str],
    *,
    needs_host: bool = False,
    supersedes_schema: bool = False,
) -> Callable[[Check], Check]:
    """Decorator: the function is the check, its docstring the documentation."""

    def wrap(check: Check) -> Check:
        register(code, name, severity, kinds, needs_host=needs_host, supersedes_schema=supersedes_schema, check=check)
        return check

    return wrap


_ALL_LOADED = False


def all_rules() -> list[Rule]:
    global _ALL_LOADED
    if not _ALL_LOADED:
        _ALL_LOADED = True
        import importlib
        import pkgutil

        from nvidia_oci_hook import rules

        # A family too large for one module is a package of concerns: walk into it.
        for module in pkgutil.walk_packages(rules.__path__, f"{rules.__name__}."):
            importlib.import_module(module.name)
    return sorted(_REGISTRY.values(), key=lambda r: r.code)


def get_rule(code: str) -> Rule:
    all_rules()
    try:
        return _REGISTRY[code.upper()]
    except KeyError:
        raise KeyError(code) from None


def matches_any(code: str, prefixes: Iterable[str]) -> bool:
    return any(code.startswith(prefix.upper()) for prefix in prefixes)


def selected(rules: Iterable[Rule], select: Iterable[str], ignore: Iterable[str]) -> Iterator[Rule]:
    select = list(select)
    ignore = list(ignore)
    for candidate in rules:
        if select and not matches_any(candidate.code, select):
            continue
        if matches_any(candidate.code, ignore):
            continue
        yield candidate
