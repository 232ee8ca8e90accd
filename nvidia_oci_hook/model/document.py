"""A document as read from disk: its text, its parsed value, its kind and where each value sits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.model import jsontext

AUTO = "auto"
OCI_CONFIG = "oci"
OCI_STATE = "oci-state"
KINDS = (OCI_CONFIG, OCI_STATE)

KIND_TITLES = {
    OCI_CONFIG: "OCI runtime config",
    OCI_STATE: "OCI runtime state",
}

# Keys only a runtime state carries, and keys only a config carries (runtime-spec runtime.md, config.md).
_STATE_KEYS = frozenset({"status", "bundle", "pid"})
_CONFIG_KEYS = frozenset({"process", "root", "mounts", "linux", "hooks", "hostname", "windows", "vm"})


@dataclass(frozen=True)
class LoadProblem:
    """A problem found while reading the text itself; the rule code is one of the DOC family."""

    code: str
    message: str
    offset: Optional[int] = None
    pointer: str = ""


@dataclass
class Document:
    path: str
    kind: str
    text: str
    value: Any = None
    parsed: bool = False
    load_problems: list[LoadProblem] = field(default_factory=list)
    positions: jsontext.Positions = field(init=False)

    def __post_init__(self) -> None:
        self.positions = jsontext.Positions(self.text)

    def locate(self, pointer: str) -> tuple[Optional[int], Optional[int]]:
        if not self.parsed:
            return None, None
        return self.positions.locate(pointer)


def detect_kind(value: Any, path: str) -> str:
    if isinstance(value, dict):
        keys = value.keys()
        if _STATE_KEYS & keys and not _CONFIG_KEYS & keys:
            return OCI_STATE
        return OCI_CONFIG
    return OCI_STATE if path.endswith("state.json") else OCI_CONFIG


def _decode_utf8(raw: bytes, problems: list[LoadProblem]) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Go's decoder replaces invalid bytes inside strings, so keep going the same way after reporting.
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


def parse_document(path: str, raw: bytes, kind: str = AUTO) -> Document:
    problems: list[LoadProblem] = []
    text = _decode_utf8(raw, problems)
    if not text.strip():
        problems.append(LoadProblem("DOC001", "the file is empty: expected a JSON object", 0))
        return Document(path, OCI_CONFIG if kind == AUTO else kind, text, load_problems=problems)
    try:
        value = jsontext.decode(text)
    except jsontext.JSONSyntaxError as exc:
        problems.append(LoadProblem("DOC001", f"invalid JSON: {exc.message}", max(exc.offset, 0)))
        return Document(path, OCI_CONFIG if kind == AUTO else kind, text, load_problems=problems)
    except jsontext.JSONTooDeep as exc:
        problems.append(
            LoadProblem(
                "DOC003",
                f"JSON nested {exc.depth} levels deep; this tool parses documents up to its interpreter's "
                f"recursion limit and Go's decoder (runc, containerd, cri-o) stops at {jsontext.GO_MAX_DEPTH}",
                exc.offset,
            )
        )
        return Document(path, OCI_CONFIG if kind == AUTO else kind, text, load_problems=problems)
    document = Document(path, detect_kind(value, path) if kind == AUTO else kind, text, value, True, problems)
    if jsontext.has_duplicate_keys(text):
        document.positions.offset_of("")
        for pointer, offset in document.positions.duplicate_keys:
            problems.append(
                LoadProblem(
                    "DOC005",
                    f"key {pointer.rsplit('/', 1)[-1]!r} appears more than once in the same object; "
                    "Go's decoder keeps the last one",
                    offset,
                    pointer,
                )
            )
    return document
