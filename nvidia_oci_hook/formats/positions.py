"""Line and column lookups shared by every format's locator."""

from __future__ import annotations

from bisect import bisect_right
from typing import Optional, TypeVar

T = TypeVar("T")


def nearest(mapping: dict[str, T], pointer: str) -> Optional[T]:
    """The entry for pointer, or for its nearest ancestor that has one (a finding about a missing key)."""
    while True:
        found = mapping.get(pointer)
        if found is not None:
            return found
        if not pointer:
            return None
        pointer = pointer[: pointer.rfind("/")]


class LineIndex:
    """Offset -> (line, column), both from 1; the line table is built on the first question."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts: Optional[list[int]] = None

    def line_col(self, offset: int) -> tuple[int, int]:
        if self._line_starts is None:
            starts = [0]
            find = self.text.find
            index = find("\n")
            while index != -1:
                starts.append(index + 1)
                index = find("\n", index + 1)
            self._line_starts = starts
        line = bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1


class PositionMap(LineIndex):
    """pointer -> (line, column) given by a parser that knows positions (YAML nodes, TOML lines)."""

    def __init__(self, text: str, positions: Optional[dict[str, tuple[int, int]]] = None) -> None:
        super().__init__(text)
        self.positions: dict[str, tuple[int, int]] = positions if positions is not None else {}

    def locate(self, pointer: str) -> tuple[Optional[int], Optional[int]]:
        return nearest(self.positions, pointer) or (None, None)
