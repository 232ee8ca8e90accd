"""A document as read from disk: its text, its parsed value, its kind and where each value sits.

Formats (JSON, YAML, TOML) know how to parse and locate; kinds (OCI config, CDI spec, hooks.d file, ...) know
which format they are written in and how to recognise themselves in a parsed value. Both are registered here so
that every front-end shares one detection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from nvidia_oci_hook.model import jsontext

AUTO = "auto"
OCI_CONFIG = "oci"
OCI_STATE = "oci-state"


class Locator(Protocol):
    def locate(self, pointer: str) -> tuple[Optional[int], Optional[int]]: ...

    def line_col(self, offset: int) -> tuple[int, int]: ...


@dataclass(frozen=True)
class LoadProblem:
    """A problem found while reading the text itself; the rule code is one of the DOC family.

    `offset` is a character offset into the text; `line`/`column` may be given instead where the parser
    reports them directly (YAML, TOML).
    """

    code: str
    message: str
    offset: Optional[int] = None
    pointer: str = ""
    line: Optional[int] = None
    column: Optional[int] = None


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
class Parsed:
    """What a format parser returns: the parsed value (None if it failed), problems, and a locator."""

    text: str
    value: Any
    ok: bool
    problems: list[LoadProblem]
    locator: Optional[Locator] = None


FormatParser = Callable[[bytes], Parsed]


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


_FORMATS: dict[str, FormatParser] = {}
_KINDS: dict[str, Kind] = {}
_EXTENSIONS = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".conf": "toml"}


def register_format(name: str, parser: FormatParser) -> None:
    _FORMATS[name] = parser


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


_LOADED = False


def load_all_kinds() -> None:
    """Import every module of the model package: kind and format modules register themselves on import."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import importlib
    import pkgutil

    from nvidia_oci_hook import model

    for module in pkgutil.iter_modules(model.__path__):
        importlib.import_module(f"{model.__name__}.{module.name}")


def format_for(path: str, kind: Optional[Kind]) -> str:
    lowered = path.lower()
    for extension, name in _EXTENSIONS.items():
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
    format_name = format_for(path, forced)
    if forced is None and format_name == "json" and _looks_like_toml(raw):
        format_name = "toml"
    parsed = _FORMATS[format_name](raw)
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


_TOML_LINE = re.compile(rb"^(\[\[?\s*[A-Za-z0-9_.\"' -]+\s*\]\]?|[A-Za-z0-9_.\"'-]+\s*=.*)\s*(#.*)?$")


def _looks_like_toml(raw: bytes) -> bool:
    """A file without a telling name: TOML if its first meaningful line is a table header or a key = value."""
    for line in raw.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(b"#"):
            return True  # JSON has no comments
        return _TOML_LINE.match(stripped) is not None
    return False


# ---------------------------------------------------------------------------------------------------------------
# JSON


def decode_utf8(raw: bytes, problems: list[LoadProblem]) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Go's decoders replace invalid bytes inside strings, so keep going the same way after reporting.
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        # The bytes before the first bad one decode cleanly, so their length is the offset in the text.
        problems.append(
            LoadProblem(
                "DOC002",
                f"byte 0x{raw[exc.start]:02x} at line {line}, column {column} (offset {exc.start}) is not valid UTF-8",
                len(raw[: exc.start].decode("utf-8")),
            )
        )
        return raw.decode("utf-8", errors="replace")


def parse_json(raw: bytes) -> Parsed:
    problems: list[LoadProblem] = []
    text = decode_utf8(raw, problems)
    locator = jsontext.Positions(text)
    if not text.strip():
        problems.append(LoadProblem("DOC001", "the file is empty: expected a JSON object", 0))
        return Parsed(text, None, False, problems, locator)
    try:
        value = jsontext.decode(text)
    except jsontext.JSONSyntaxError as exc:
        problems.append(LoadProblem("DOC001", f"invalid JSON: {exc.message}", max(exc.offset, 0)))
        return Parsed(text, None, False, problems, locator)
    except jsontext.JSONTooDeep as exc:
        problems.append(
            LoadProblem(
                "DOC003",
                f"JSON nested {exc.depth} levels deep; this tool parses documents up to its interpreter's "
                f"recursion limit and Go's decoder (runc, containerd, cri-o) stops at {jsontext.GO_MAX_DEPTH}",
                exc.offset,
            )
        )
        return Parsed(text, None, False, problems, locator)
    if jsontext.has_duplicate_keys(text):
        locator.offset_of("")
        for pointer, offset in locator.duplicate_keys:
            problems.append(
                LoadProblem(
                    "DOC005",
                    f"key {pointer.rsplit('/', 1)[-1]!r} appears more than once in the same object; "
                    "Go's decoder keeps the last one",
                    offset,
                    pointer,
                )
            )
    return Parsed(text, value, True, problems, locator)


register_format("json", parse_json)


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


register_kind(Kind(OCI_STATE, "OCI runtime state", ("json",), _is_oci_state, order=40))
# The fallback for JSON: anything not recognised as another kind is linted as a config.json.
register_kind(Kind(OCI_CONFIG, "OCI runtime config", ("json",), lambda path, value: True, order=90))
