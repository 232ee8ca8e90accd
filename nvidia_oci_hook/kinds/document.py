"""A document as read from disk: its text, its parsed value, its kind and where each value sits.

Formats (JSON, YAML, TOML: `nvidia_oci_hook.formats`) know how to parse and locate; kinds (OCI config, CDI spec,
hooks.d file, ...) know which format they are written in and how to recognise themselves in a parsed value.
Kinds are registered here, beside the OCI kinds, so that every front-end shares one detection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from nvidia_oci_hook.findings import Problem
from nvidia_oci_hook.formats import jsontext
from nvidia_oci_hook.formats.parsing import EXTENSIONS, LoadProblem, Locator, Parsed, looks_like_toml, parser_for

AUTO = "auto"
# Who reads a config.json and acts on it, and who hands a hook the state of a container.
OCI_RUNTIMES = ("runc", "crun")
OCI_HOOK_READERS = ("runc", "crun", "OCI hooks")
OCI_CONFIG = "oci"
OCI_STATE = "oci-state"


@dataclass(frozen=True)
class Location:
    path: str
    line: Optional[int]
    column: Optional[int]


@dataclass
class Document:
    path: str
    kind: str
    text: str
    value: Any = None
    parsed: bool = False
    load_problems: list[LoadProblem] = field(default_factory=list)
    format: str = "json"
    locator: Optional[Locator] = None

    def __post_init__(self) -> None:
        if self.locator is None:
            self.locator = jsontext.Positions(self.text)

    def locate(self, pointer: str) -> Location:
        if not self.parsed or self.locator is None:
            return Location(self.path, None, None)
        return Location(self.path, *self.locator.locate(pointer))

    def locate_problem(self, problem: LoadProblem) -> Location:
        if problem.line is not None:
            return Location(self.path, problem.line, problem.column)
        if problem.offset is not None and self.locator is not None:
            return Location(self.path, *self.locator.line_col(problem.offset))
        return self.locate(problem.pointer) if problem.pointer else Location(self.path, None, None)


@dataclass(frozen=True)
class Kind:
    name: str
    title: str
    # The formats this kind is written in; the first is assumed when the file name says nothing.
    formats: tuple[str, ...]
    # Whether a parsed value (with its file name) is of this kind; None means "never guessed".
    sniff: Optional[Callable[[str, Any], bool]] = None
    # Among kinds whose sniff accepts a value, the lowest order wins; the fallback kind of a format has the highest.
    order: int = 50
    # Adjusts a parsed document to what this kind's own reader does with the text (a Go decoder that accepts a
    # byte-order mark, or refuses what Python's parser takes); returns the document to lint.
    refine: Optional[Callable[[Document], Document]] = None
    # A kind that reads its text itself (a stream of documents, in YAML or JSON): its reader, and whether raw text
    # with its file name is of the kind, asked before any format's parser runs.
    reader: Optional[Callable[[bytes], Parsed]] = None
    recognise: Optional[Callable[[str, bytes], bool]] = None
    # Names the part of the document a rule's problem is about (the object of a manifest stream) in its
    # message, or drops it where the document silences the rule's code there.
    attribute: Optional[Callable[[Any, str, Problem], Optional[Problem]]] = None
    # The programs that read documents of this kind and act on them: the engines and tools a rule of the kind
    # speaks for (the rule reference lists them).
    readers: tuple[str, ...] = ()


_KINDS: dict[str, Kind] = {}


def register_kind(kind: Kind) -> Kind:
    _KINDS[kind.name] = kind
    return kind


def kinds() -> list[Kind]:
    load_all_kinds()
    return sorted(_KINDS.values(), key=lambda k: (k.order, k.name))


def kind_names() -> tuple[str, ...]:
    return tuple(kind.name for kind in kinds())


def get_kind(name: str) -> Kind:
    load_all_kinds()
    return _KINDS[name]


def find_kind(name: str) -> Optional[Kind]:
    """The kind registered as name; None for the kinds of a collection's parts (a cri-o drop-in)."""
    load_all_kinds()
    return _KINDS.get(name)


_LOADED = False


def load_all_kinds() -> None:
    """Import every module of the formats and kinds packages: they register themselves on import."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import importlib
    import pkgutil

    from nvidia_oci_hook import formats, kinds

    for package in (formats, kinds):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(module.name)


def format_for(path: str, kind: Optional[Kind]) -> str:
    lowered = path.lower()
    for extension, name in EXTENSIONS.items():
        if lowered.endswith(extension) and (kind is None or name in kind.formats):
            return name
    if kind is not None:
        return kind.formats[0]
    return "json"


def detect(path: str, value: Any, candidates: Sequence[Kind]) -> Optional[Kind]:
    for candidate in candidates:
        if candidate.sniff is not None and candidate.sniff(path, value):
            return candidate
    return None


def parse_document(path: str, raw: bytes, kind: str = AUTO) -> Document:
    """Parse raw bytes as the given kind, or detect the kind from the file name and the content."""
    load_all_kinds()
    forced = None if kind == AUTO else get_kind(kind)
    reading = forced
    if forced is None:
        reading = next((k for k in kinds() if k.recognise is not None and k.recognise(path, raw)), None)
    if reading is not None and reading.reader is not None:
        read = reading.reader(raw)
        return Document(
            path, reading.name, read.text, read.value, read.ok, list(read.problems), reading.formats[0], read.locator
        )
    format_name = format_for(path, forced)
    if forced is None and format_name == "json" and looks_like_toml(raw):
        format_name = "toml"
    parsed = parser_for(format_name)(raw)
    chosen = forced
    if chosen is None:
        candidates = [k for k in kinds() if format_name in k.formats]
        # A file that does not parse can still be named like its kind (crio.conf, a crio.conf.d drop-in), and
        # its kind's reader may accept what Python's parser refused.
        chosen = detect(path, parsed.value if parsed.ok else None, candidates)
        if chosen is None:
            chosen = candidates[-1] if candidates else get_kind(OCI_CONFIG)
    document = Document(
        path,
        chosen.name,
        parsed.text,
        parsed.value,
        parsed.ok,
        list(parsed.problems),
        format_name,
        parsed.locator,
    )
    return chosen.refine(document) if chosen.refine is not None else document


# ---------------------------------------------------------------------------------------------------------------
# The OCI kinds

# Keys only a runtime state carries, and keys only a config carries (runtime-spec runtime.md, config.md).
_STATE_KEYS = frozenset({"status", "bundle", "pid"})
_CONFIG_KEYS = frozenset({"process", "root", "mounts", "linux", "hooks", "hostname", "windows", "vm"})


def _is_oci_state(path: str, value: Any) -> bool:
    if isinstance(value, dict):
        keys = value.keys()
        return bool(_STATE_KEYS & keys) and not _CONFIG_KEYS & keys
    return path.endswith("state.json")


register_kind(Kind(OCI_STATE, "OCI runtime state", ("json",), _is_oci_state, order=40, readers=OCI_HOOK_READERS))
# The fallback for JSON: anything not recognised as another kind is linted as a config.json.
register_kind(
    Kind(OCI_CONFIG, "OCI runtime config", ("json",), lambda path, value: True, order=90, readers=OCI_RUNTIMES)
)
