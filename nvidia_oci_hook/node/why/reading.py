r"""An error text as it arrives in practice, made into the views the signatures are matched against.

What a paste holds besides the engine's own words:
- escapes: Go's `%q` and logfmt's `err="..."` write a quote as `\"`, and each layer that quotes again adds
  backslashes (`\\\"` where kubelet's `err="..."` holds containerd's `%q`); `\n` and `\t` for line breaks and tabs;
- line prefixes: klog's `E1202 07:42:08.123456   12345 file.go:123] `, the journal's `Dec 02 07:42:08 node
  unit[pid]: ` (or an ISO timestamp in its place), a bracketed or bare timestamp;
- line wrapping: `kubectl describe` indents the lines of a multi-line message, and a terminal breaks a long line
  anywhere, inside a word or a path.

Two views of the same text: one that joins wrapped lines with a space and one that joins them with nothing (a
path broken across two lines comes whole out of that one). A signature found in either is found.
"""

from __future__ import annotations

import re

_ESCAPE = re.compile(r"\\+([\"'nt])")
_LETTERS = {"n": "\n", "t": "\t"}
_KLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w.-]+:\d+\] ")
_JOURNAL = re.compile(
    r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
    r" [\w.-]+ [\w@.:/-]+(?:\[\d+\])?: "
)
_STAMP = re.compile(r"^\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?\s+")
_CONTROL = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]")
_SPACES = re.compile(r"[ \t]+")
# Far more than any paste: what is beyond it is not read.
TEXT_LIMIT = 4 << 20


def unescaped(text: str) -> str:
    """Every quote, line break and tab written with backslashes before it (however many layers of quoting put
    them there) as the character itself."""
    return _ESCAPE.sub(lambda match: _LETTERS.get(match.group(1), match.group(1)), text)


def _without_prefixes(line: str) -> str:
    for pattern in (_JOURNAL, _KLOG, _STAMP):
        line = pattern.sub("", line, count=1)
    return line


def views(text: str) -> tuple[str, str]:
    """(wrapped lines joined with a space, joined with nothing), each with one space for every run of spaces."""
    text = _CONTROL.sub("", unescaped(text[:TEXT_LIMIT]))
    lines = [
        _without_prefixes(line.strip()).strip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    ]
    lines = [line for line in lines if line]
    spaced = _SPACES.sub(" ", " ".join(lines))
    glued = _SPACES.sub(" ", "".join(lines))
    return spaced, glued
