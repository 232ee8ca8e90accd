"""A spec's text as goyaml.v2 reads it (the library reads every spec, `.json` too, with it), and the cdi document
kind, whose documents are refined so: `refine_document`."""

from __future__ import annotations

import contextlib
import re
from typing import Any, Optional

from nvidia_oci_hook.formats.leanyaml import go_resolve_plain
from nvidia_oci_hook.formats.parsing import LoadProblem, Parsed
from nvidia_oci_hook.kinds.cdi.codes import CDI, JSON_READ_AS_YAML, TEXT
from nvidia_oci_hook.kinds.cdi.goformat import go_quote
from nvidia_oci_hook.kinds.cdi.specs_go import _fold
from nvidia_oci_hook.kinds.document import Document, Kind, register_kind

# ---------------------------------------------------------------------------------------------------------------
# Reading as goyaml.v2 does
# (its typing of plain scalars, go_resolve_plain, lives in leanyaml, cheap for the runtime-facing code to import)


def _go_yaml_loader(fast: bool) -> Any:
    import yaml

    # libyaml (when PyYAML has it) is faster, and like goyaml.v2 (a port of it) takes tabs as separation in flow
    # context; PyYAML's own scanner is needed where they part: libyaml skips a U+FEFF anywhere, goyaml.v2 and
    # PyYAML only at the start of the stream.
    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader) if fast else yaml.SafeLoader

    class GoYAMLLoader(base):  # type: ignore[misc]
        """PyYAML with goyaml.v2's scalar resolution: y/n/on/off booleans, Go's number syntax, no timestamps."""

    plain_tag = "tag:nvidia-oci-hook:go-plain"

    def resolve(self: Any, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0]:
            return "tag:yaml.org,2002:merge" if value == "<<" else plain_tag
        return base.resolve(self, kind, value, implicit)

    def construct_plain(loader: Any, node: Any) -> Any:
        return go_resolve_plain(loader.construct_scalar(node))

    GoYAMLLoader.resolve = resolve
    GoYAMLLoader.add_constructor(plain_tag, construct_plain)
    return GoYAMLLoader


_LOADERS: dict[bool, Any] = {}


def go_yaml_load(text: str) -> Any:
    """The first YAML document of text, as goyaml.v2 types its scalars; raises yaml.YAMLError."""
    # goyaml.v2 also skips a U+FEFF at the start of a line while its buffer starts with one (is_bom checks the
    # buffer's start): for a text that starts with several, libyaml's reading is the closer one.
    fast = "\ufeff" not in text.lstrip("\ufeff")
    if fast not in _LOADERS:
        _LOADERS[fast] = _go_yaml_loader(fast)
    loader = _LOADERS[fast](text)
    try:
        return loader.get_data() if loader.check_data() else None
    finally:
        loader.dispose()


# Characters goyaml.v2's reader refuses anywhere in the stream ("control characters are not allowed").
_FORBIDDEN_CHARACTER = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")


def _text_problems(text: str, json_text: bool) -> list[LoadProblem]:
    """What goyaml.v2 refuses in a text that Python's parser accepted."""
    problems = []
    body = text[1:] if text.startswith("\ufeff") else text
    shift = len(text) - len(body)
    bad = _FORBIDDEN_CHARACTER.search(body)
    if bad is not None:
        problems.append(
            LoadProblem(
                TEXT,
                f"character U+{ord(bad.group()):04X} is not allowed in a YAML stream, and the CDI library reads "
                "every spec as YAML: it refuses the spec with `yaml: control characters are not allowed`",
                bad.start() + shift,
            )
        )
    if not json_text:
        return problems
    for string in _JSON_STRING.finditer(text):
        if "\\" not in string.group():
            continue
        for escape in _JSON_ESCAPE.finditer(string.group()):
            sequence = escape.group(1)
            offset = string.start() + escape.start()
            if sequence == "/":
                problems.append(
                    LoadProblem(
                        TEXT,
                        "the JSON escape \\/ is not a YAML escape, and the CDI library reads every spec as YAML: "
                        "it refuses the spec with `found unknown escape character`",
                        offset,
                    )
                )
            elif sequence[0] == "u" and 0xD800 <= int(sequence[1:], 16) <= 0xDFFF:
                problems.append(
                    LoadProblem(
                        TEXT,
                        f"the escape \\{sequence} is half of a UTF-16 surrogate pair, which YAML does not accept "
                        "(the CDI library reads every spec as YAML): it refuses the spec with "
                        "`found invalid Unicode character escape code`",
                        offset,
                    )
                )
                break  # the library stops at the first; one per string is enough
    return problems


def _detab(text: str) -> str:
    """text with tabs outside quoted scalars made spaces (same offsets): PyYAML's pure scanner refuses tabs that
    libyaml and goyaml.v2 take as separation in flow context."""
    out = []
    quote = ""
    escaped = False
    for char in text:
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                quote = ""
        elif char in ('"', "'"):
            quote = char
        elif char == "\t":
            char = " "
        out.append(char)
    return "".join(out)


def _reread(text: str) -> Optional[tuple[Any, Parsed]]:
    """goyaml.v2's value of text and a parse of it for positions, or None when goyaml.v2 refuses the text."""
    import yaml

    from nvidia_oci_hook.formats.positions import PositionMap
    from nvidia_oci_hook.formats.yamltext import parse_yaml

    try:
        value = go_yaml_load(text)
    except (yaml.YAMLError, RecursionError, ValueError):
        return None
    for candidate in (text, _detab(text)):
        parsed = parse_yaml(candidate.encode("utf-8", "surrogatepass"))
        if parsed.ok:
            return value, Parsed(text, value, True, parsed.problems, parsed.locator)
    return value, Parsed(text, value, True, [], PositionMap(text))


def _accept(document: Document, value: Any, parsed: Parsed, problems: list[LoadProblem]) -> None:
    """Take goyaml.v2's reading of a document PyYAML or the JSON parser refused, then refine it again."""
    document.value = value
    document.parsed = True
    document.locator = parsed.locator
    document.load_problems = problems + [problem for problem in parsed.problems if problem.code == "DOC005"]
    refine_document(document)


def refine_document(document: Document) -> None:
    """Make a CDI document's load problems say what the CDI library does with its text.

    The library parses every spec, JSON or YAML, with goyaml.v2: duplicate keys are fatal, `\\/` and surrogate
    escapes are refused, and a JSON syntax error that is still valid YAML (a byte-order mark, a comment, a
    trailing comma) is accepted, as is a YAML stream of several documents (the first is read). YAML values are
    re-read with goyaml.v2's scalar resolution.
    """
    import yaml

    problems = []
    for problem in document.load_problems:
        if problem.code == "DOC005":
            key = problem.pointer.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~")
            problems.append(
                LoadProblem(
                    TEXT,
                    f"key {go_quote(key)} appears twice in one mapping; the CDI library decodes strictly and "
                    f'refuses the spec with `key "{key}" already set in map`',
                    problem.offset,
                    problem.pointer,
                    problem.line,
                    problem.column,
                )
            )
        else:
            problems.append(problem)
    codes = {problem.code for problem in problems}
    syntax = next((problem for problem in problems if problem.code == "DOC001"), None)
    if not document.parsed and syntax is not None and codes == {"DOC001"} and document.text.strip():
        several = document.format == "yaml" and "expected a single document" in syntax.message
        text = document.text
        if several and syntax.line is not None:
            text = "".join(text.splitlines(keepends=True)[: syntax.line - 1])
        reread = _reread(text)
        if reread is not None:
            if document.format == "json":
                reason = syntax.message.removeprefix("invalid JSON: ")
                why = (
                    f"not valid JSON ({reason}), but the CDI library reads every spec as YAML, which accepts it; "
                    "tools that read the .json file as JSON will not"
                )
            elif several:
                why = "the file holds more than one YAML document; the CDI library reads only the first"
            else:
                why = ""  # valid YAML that only PyYAML's stricter scanner refused
            note = [LoadProblem(JSON_READ_AS_YAML, why, syntax.offset, "", syntax.line, syntax.column)] if why else []
            _accept(document, reread[0], reread[1], note)
            return
    elif document.format == "yaml" and document.parsed:
        with contextlib.suppress(yaml.YAMLError, RecursionError, ValueError):  # PyYAML has read it already
            document.value = go_yaml_load(document.text)
    if document.parsed:
        # Idempotent: a document refined twice (by its kind and by a directory reader) is reported once.
        problems.extend(p for p in _text_problems(document.text, document.format == "json") if p not in problems)
    document.load_problems = problems


# ---------------------------------------------------------------------------------------------------------------
# The kind


def _is_cdi(path: str, value: Any) -> bool:
    return isinstance(value, dict) and any(isinstance(key, str) and _fold(key) == "cdiversion" for key in value)


def _refined(document: Document) -> Document:
    refine_document(document)
    return document


register_kind(
    Kind(
        CDI,
        "CDI spec",
        ("json", "yaml"),
        _is_cdi,
        order=20,
        refine=_refined,
        readers=("cri-o", "containerd", "podman", "NVIDIA Container Toolkit"),
    )
)
