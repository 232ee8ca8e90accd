"""Go's formatting, where the library's messages depend on it: strconv.Quote (%q), and the shortest float texts
strconv.FormatFloat and encoding/json write."""

from __future__ import annotations

import math
import struct
import unicodedata
from typing import Callable


def _go_printable(char: str) -> bool:
    code = ord(char)
    if code < 0x80:
        return 0x20 <= code < 0x7F
    return unicodedata.category(char)[0] in "LMNPS"


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """strconv.Quote, as %q prints a string."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\ufffd")  # a Go string holds no surrogates: the decoder made it U+FFFD
        elif _go_printable(char):
            out.append(char)
        elif char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _shortest_digits(value: float, round_trips: Callable[[float], bool]) -> tuple[str, int]:
    """(digits, decimal point position) of the shortest decimal for which round_trips(candidate) holds."""
    for precision in range(1, 18):
        text = f"{value:.{precision - 1}e}"
        if round_trips(float(text)):
            break
    mantissa, _, exponent = text.partition("e")
    digits = mantissa.replace(".", "").replace("-", "").rstrip("0") or "0"
    return digits, int(exponent) + 1


def _float32(value: float) -> float:
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def go_format_float32(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32): how sigs.k8s.io/yaml turns a YAML float into a string."""
    if math.isnan(value):
        return "NaN"
    single = _float32(value)
    if math.isinf(single):
        return "+Inf" if single > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, single) < 0 else ""
    if single == 0:
        return sign + "0"
    digits, point = _shortest_digits(abs(single), lambda candidate: _float32(candidate) == abs(single))
    exponent = point - 1
    if exponent < -4 or exponent >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    return sign + _fixed(digits, point)


def _fixed(digits: str, point: int) -> str:
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return digits[:point] + "." + digits[point:]


def go_json_float(value: float) -> str:
    """How encoding/json writes a float64 (the number a YAML float becomes before it is decoded)."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    digits, point = _shortest_digits(abs(value), lambda candidate: candidate == abs(value))
    if 1e-6 <= abs(value) < 1e21:
        return sign + _fixed(digits, point)
    exponent = point - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}".replace("e-0", "e-").replace(
        "e+0", "e+"
    )
