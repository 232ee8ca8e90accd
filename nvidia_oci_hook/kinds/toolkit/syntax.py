"""TOML as the toolkit's decoder, pelletier/go-toml v1, reads it where tomllib differs.

go-toml v1 drops a byte-order mark and reads a lone carriage return as a line break (formats/gotoml.py), where
tomllib refuses both: such a text is read again as go-toml v1 reads it, each character at its offset. A text
neither reads is the toolkit's refusal to load (NCT001), not a generic syntax error: every binary of the toolkit
stops on it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Optional

from nvidia_oci_hook.formats.gotoml import reread
from nvidia_oci_hook.formats.parsing import LoadProblem
from nvidia_oci_hook.kinds.document import Document

REFUSED = "NCT001"


_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]")


def _table_at(lines: list[str], index: int) -> str:
    """The [table] the line at index is in ("" at the top level)."""
    for line in reversed(lines[:index]):
        match = _HEADER.match(line)
        if match:
            return match.group(1)
    return ""


def _shown(char: str) -> str:
    return char if char.isprintable() else f"\\x{ord(char):02x}"


def go_toml_words(text: str, problem: LoadProblem) -> Optional[tuple[int, int, str]]:
    """(line, column, words) of go-toml v1's lexer or parser for the error tomllib found, for the errors a
    configuration file meets (a key written twice, a table declared twice, a string left open or with a bad
    escape, an inline table left open, a template line); None where its words are not known here."""
    reason = problem.message.removeprefix("invalid TOML: ")
    lines = text.split("\n")
    if reason.startswith("Unclosed inline table"):
        # go-toml reaches the end of the text first (tomli, before 3.11, gives no line there).
        return len(lines), 1, "unterminated inline table"
    if problem.line is None:
        return None
    index, column = problem.line - 1, problem.column or 1
    here = lines[index] if index < len(lines) else ""
    start = len(here) - len(here.lstrip())
    if reason.startswith("Cannot overwrite a value"):
        table, key = _table_at(lines, index), here.split("=", 1)[0].strip()
        return problem.line, start + 1, f"The following key was defined twice: {table + '.' if table else ''}{key}"
    if reason.startswith("Cannot declare") and here.lstrip().startswith("["):
        return problem.line, start + 2, "duplicated tables"
    quote = here.find('"')
    if quote >= 0 and column - 1 > quote:
        # go-toml places a string's errors at its first character.
        if reason.startswith("Unescaped '\\' in a string") and column >= 2:
            return problem.line, quote + 2, f"invalid escape sequence: \\{here[column - 2]}"
        if reason.startswith("Illegal character"):
            found = here[column - 1] if column - 1 < len(here) else "\n"
            return problem.line, quote + 2, f"unescaped control character U+{ord(found):04X}"
    if reason.startswith("Expected '=' after a key") and "=" not in here[column - 1 :]:
        return problem.line, column, "was expecting token =, but got keys cannot contain new lines instead"
    if reason.startswith("Invalid statement") and start < len(here) and not here[start].isalnum():
        return problem.line, start + 1, f"parsing error: keys cannot contain {_shown(here[start])} character"
    return None


def _refusal(problem: LoadProblem, text: str) -> LoadProblem:
    if problem.code != "DOC001":
        return problem
    words = go_toml_words(text, problem)
    if words is None:
        where = f"({problem.line}, {problem.column or 1})" if problem.line else "(?, ?)"
        said = f"{where}: ... (TOML: {problem.message.removeprefix('invalid TOML: ')})"
    else:
        said = f"({words[0]}, {words[1]}): {words[2]}"
    return replace(
        problem,
        code=REFUSED,
        message="the toolkit cannot parse this file: its runtime, hook and nvidia-ctk stop with `error loading "
        f"config: failed to load specified config file: {said}` (1.20; earlier releases say it without `failed to "
        "load specified config file: `); every GPU container through them now fails",
    )


def as_toolkit_reads(document: Document) -> Document:
    document = _as_go_toml_reads(document)
    document.load_problems = [_refusal(problem, document.text) for problem in document.load_problems]
    return document


def _as_go_toml_reads(document: Document) -> Document:
    """The document as go-toml v1 reads it where tomllib refused a byte-order mark or a lone carriage return; any
    other document, and one go-toml v1 refuses too, as it is."""
    if document.parsed or not any(p.code == "DOC001" for p in document.load_problems):
        return document
    again = reread(document.text)
    if again is None or not again.parsed.ok:
        return document
    problems = [p for p in document.load_problems if p.code not in ("DOC001", "DOC002")]
    problems += [p for p in again.parsed.problems if p.code != "DOC002"]
    locator = again.locator()
    return Document(document.path, document.kind, document.text, again.value, True, problems, document.format, locator)
