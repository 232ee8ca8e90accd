"""JSON for the runtime path through the json module's C accelerators, without importing json itself.

`import json` costs several milliseconds (it compiles regular expressions and imports re and enum); a runtime
wrapper has about that much to spend in all. The C scanner and encoder are what json uses anyway, so the
results are the same: this module only skips the Python layer around them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

_json: Any
try:
    import _json
except ImportError:  # an interpreter without the accelerators: the json module is all there is
    _json = None


class JSONDecodeError(ValueError):
    """Invalid JSON, with json's own wording and position."""


if _json is not None:

    class _ScannerContext:
        # The attributes json.scanner.make_scanner reads from a JSONDecoder.
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int

        @staticmethod
        def parse_constant(name: str) -> float:
            return {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}[name]

    _scan: Callable[[str, int], tuple[Any, int]] = _json.make_scanner(_ScannerContext())
    _encode: Callable[[Any, int], list[str]] = _json.make_encoder(
        None, None, _json.encode_basestring, None, ":", ",", False, False, True
    )


def _position(text: str, index: int) -> str:
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line} column {column} (char {index})"


def loads(text: str) -> Any:
    if _json is None:
        import json

        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise JSONDecodeError(str(exc)) from None
    index = 0
    length = len(text)
    while index < length and text[index] in " \t\n\r":
        index += 1
    try:
        value, end = _scan(text, index)
    except StopIteration as stop:
        raise JSONDecodeError(f"Expecting value: {_position(text, stop.value)}") from None
    except ValueError as exc:  # the C scanner raises json.JSONDecodeError, a ValueError
        raise JSONDecodeError(str(exc).split(": line ")[0] + ": " + _position(text, getattr(exc, "pos", 0))) from None
    except RecursionError:
        raise JSONDecodeError("nested too deeply") from None
    while end < length and text[end] in " \t\n\r":
        end += 1
    if end != length:
        raise JSONDecodeError(f"Extra data: {_position(text, end)}")
    return value


def dumps(value: Any) -> str:
    """Compact JSON, keys in their order, non-ASCII kept: what the engines write into config.json."""
    if _json is None:
        import json

        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return "".join(_encode(value, 0))
