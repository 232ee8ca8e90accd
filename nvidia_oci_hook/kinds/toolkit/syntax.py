"""TOML as the toolkit's decoder, pelletier/go-toml v1, reads it where tomllib differs.

go-toml v1 drops a byte-order mark and reads a lone carriage return as a line break (formats/gotoml.py), where
tomllib refuses both: such a text is read again as go-toml v1 reads it, each character at its offset. A text
neither reads is the toolkit's refusal to load (NCT001), not a generic syntax error: every binary of the toolkit
stops on it.
"""

from __future__ import annotations

from dataclasses import replace

from nvidia_oci_hook.formats.gotoml import reread
from nvidia_oci_hook.formats.parsing import LoadProblem
from nvidia_oci_hook.kinds.document import Document

REFUSED = "NCT001"


def _refusal(problem: LoadProblem) -> LoadProblem:
    if problem.code != "DOC001":
        return problem
    where = f"({problem.line}, {problem.column or 1})" if problem.line else "(?, ?)"
    reason = problem.message.removeprefix("invalid TOML: ")
    return replace(
        problem,
        code=REFUSED,
        message=f"the toolkit cannot parse this file ({reason}): its runtime, hook and nvidia-ctk stop with `error "
        f"loading config: failed to load specified config file: {where}: ...`; every GPU container through them "
        "now fails",
    )


def as_toolkit_reads(document: Document) -> Document:
    document = _as_go_toml_reads(document)
    document.load_problems = [_refusal(problem) for problem in document.load_problems]
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
