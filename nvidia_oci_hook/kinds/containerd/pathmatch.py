"""Go's path.Match, which containerd uses for pod_annotations and container_annotations."""

from __future__ import annotations

import re
from typing import Optional


def go_path_match(pattern: str, name: str) -> bool:
    """path.Match(pattern, name): `*` and `?` never match `/`; a malformed pattern matches nothing."""
    regex = _go_pattern(pattern)
    return regex is not None and regex.fullmatch(name) is not None


def _go_pattern(pattern: str) -> Optional[re.Pattern[str]]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "\\":
            if i + 1 >= len(pattern):
                return None
            i += 1
            out.append(re.escape(pattern[i]))
        elif char == "[":
            klass, i = _go_class(pattern, i + 1)
            if klass is None:
                return None
            out.append(klass)
            continue
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _go_class(pattern: str, i: int) -> tuple[Optional[str], int]:
    """A [...] class whose body starts at i: (regex, index after the `]`), or (None, _) when malformed.

    As in Go, a class can match `/`, its first character cannot be `]` or `-`, and a range whose ends are
    reversed matches nothing.
    """
    negate = pattern[i : i + 1] == "^"
    if negate:
        i += 1
    ranges: list[str] = []
    count = 0
    while True:
        if pattern[i : i + 1] == "]" and count > 0:
            body = "".join(ranges)
            if negate:
                return (f"[^{body}]" if body else "."), i + 1
            return (f"[{body}]" if body else "(?!)"), i + 1
        low, i = _class_char(pattern, i)
        if low is None:
            return None, i
        high: Optional[str] = low
        if pattern[i : i + 1] == "-":
            high, i = _class_char(pattern, i + 1)
            if high is None:
                return None, i
        if high is not None and low <= high:
            ranges.append(f"{re.escape(low)}-{re.escape(high)}")
        count += 1


def _class_char(pattern: str, i: int) -> tuple[Optional[str], int]:
    """One (possibly escaped) class character; None when missing, `-`, `]`, or the class never closes."""
    if i >= len(pattern) or pattern[i] in "-]":
        return None, i
    if pattern[i] == "\\":
        i += 1
        if i >= len(pattern):
            return None, i
    char, i = pattern[i], i + 1
    if i >= len(pattern):
        return None, i
    return char, i
