"""JSON text with positions: parse fast, locate lazily.

Parsing uses the C decoder; positions (RFC 6901 pointer -> line, column) come from one iterative pass over the
text that runs only when a finding needs a line. Nothing here recurses, so hostile nesting cannot exhaust the
stack; the decoder's own recursion limit is turned into a finding by the caller.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from nvidia_oci_hook.formats.positions import LineIndex, nearest

# Go's encoding/json (runc, containerd, cri-o) refuses documents nested deeper than this.
GO_MAX_DEPTH = 10000

_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.DOTALL)
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]|[^\s{}\[\]:,"]+', re.DOTALL)


class JSONSyntaxError(ValueError):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


class JSONTooDeep(ValueError):
    def __init__(self, depth: int, offset: int) -> None:
        super().__init__(f"nesting deeper than {depth} levels")
        self.depth = depth
        self.offset = offset


class _DuplicateKeys(Exception):
    pass


def escape_token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def pointer_join(parent: str, key: str | int) -> str:
    return f"{parent}/{escape_token(key) if isinstance(key, str) else key}"


def _reject_constant(name: str) -> Any:
    raise JSONSyntaxError(f"{name} is not valid JSON", -1)


def _pairs_seen_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _DuplicateKeys
    return result


def decode(text: str) -> Any:
    """Parse text as Go's decoder would (no NaN/Infinity).

    Raises JSONSyntaxError (with the offset) or JSONTooDeep.
    """
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise JSONSyntaxError(exc.msg, exc.pos) from None
    except JSONSyntaxError as exc:
        raise JSONSyntaxError(exc.message, _first_token_offset(text, exc.message.split()[0])) from None
    except RecursionError:
        depth, offset = _max_depth(text)
        raise JSONTooDeep(depth, offset) from None


def has_duplicate_keys(text: str) -> bool:
    """Slower second parse, run only where a document is already known to be valid JSON."""
    try:
        json.loads(text, object_pairs_hook=_pairs_seen_twice, parse_constant=_reject_constant)
    except _DuplicateKeys:
        return True
    except (ValueError, RecursionError):
        return False
    return False


def _first_token_offset(text: str, token: str) -> int:
    for match in _TOKEN.finditer(text):
        if match.group() == token:
            return match.start()
    return 0


def _max_depth(text: str) -> tuple[int, int]:
    """Depth reached and the offset where the decoder gave up; counts brackets outside strings."""
    depth = deepest = 0
    deepest_at = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "{[":
            depth += 1
            if depth > deepest:
                deepest, deepest_at = depth, match.start()
        elif token in "}]":
            depth -= 1
    return deepest, deepest_at


class Positions(LineIndex):
    """Line/column lookup for offsets and JSON pointers of one JSON text."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._pointers: Optional[dict[str, int]] = None
        self.duplicate_keys: list[tuple[str, int]] = []

    def offset_of(self, pointer: str) -> Optional[int]:
        """Offset of the value at pointer, or of its nearest existing ancestor."""
        if self._pointers is None:
            self._pointers = self._index()
        return nearest(self._pointers, pointer)

    def locate(self, pointer: str) -> tuple[Optional[int], Optional[int]]:
        offset = self.offset_of(pointer)
        if offset is None:
            return None, None
        return self.line_col(offset)

    def _index(self) -> dict[str, int]:
        """Map every value's pointer to its offset; an object member maps to its key's offset.

        The text is known to be valid JSON, so the walk only tracks structure: commas and colons are not
        even matched. Each frame is [pointer, is_object, next_index, pending_key_pointer, keys_seen].
        """
        index: dict[str, int] = {}
        stack: list[list[Any]] = []
        frame: Optional[list[Any]] = None
        loads = json.loads
        for match in _STRUCTURE.finditer(self.text):
            token = match.group()
            first = token[0]
            if first == "}" or first == "]":
                stack.pop()
                frame = stack[-1] if stack else None
                continue
            start = match.start()
            if frame is None:
                pointer = ""
                index[pointer] = start
            elif frame[1]:
                if frame[3] is None:
                    key = token[1:-1] if "\\" not in token else loads(token)
                    if "~" in key or "/" in key:
                        key = escape_token(key)
                    pointer = frame[0] + "/" + key
                    frame[3] = pointer
                    if pointer in index:
                        self.duplicate_keys.append((pointer, start))
                    else:
                        index[pointer] = start
                    continue
                pointer = frame[3]
                frame[3] = None
            else:
                pointer = frame[0] + "/" + str(frame[2])
                frame[2] += 1
                index[pointer] = start
            if first == "{":
                frame = [pointer, True, 0, None]
                stack.append(frame)
            elif first == "[":
                frame = [pointer, False, 0, None]
                stack.append(frame)
        return index
