"""Names (pkg/parser): vendor and class are "vendor/class" in the spec's kind, device names its devices' names.

The library's checks with its own error texts; kinds/cdinames.py checks requested qualified names on the runtime
path, where this package is too costly to import.
"""

from __future__ import annotations

from typing import Optional

from nvidia_oci_hook.kinds.cdi.goformat import go_quote


def _is_letter(code: int) -> bool:
    return 0x41 <= code <= 0x5A or 0x61 <= code <= 0x7A


def _is_alnum(code: int) -> bool:
    return _is_letter(code) or 0x30 <= code <= 0x39


def _middle(name: str) -> str:
    """name[1:len(name)-1] as Go slices it: bytes, invalid sequences read as U+FFFD."""
    raw = name.encode("utf-8", "surrogatepass")
    return raw[1:-1].decode("utf-8", "replace")


class NamePanic(Exception):
    """The library would panic on this name (it slices name[1:len-1] of a one-character name)."""


def vendor_or_class_error(name: str) -> Optional[str]:
    """pkg/parser validateVendorOrClassName: the library's error text, or None; raises NamePanic."""
    if not name:
        return "empty name"
    raw = name.encode("utf-8", "surrogatepass")
    if not _is_letter(raw[0]):
        return f"{go_quote(name)}, should start with letter"
    if len(raw) == 1:
        raise NamePanic("runtime error: slice bounds out of range [1:0]")
    for char in _middle(name):
        if not (_is_alnum(ord(char)) or char in "_-."):
            return f"invalid character '{char}' in name {go_quote(name)}"
    if not _is_alnum(raw[-1]):
        return f"{go_quote(name)}, should end with a letter or digit"
    return None


def legacy_vendor_or_class_error(name: str, what: str) -> Optional[str]:
    """The same check in library 0.5.x (pkg/cdi/qualified-device.go), whole texts of its own, what "vendor" or
    "class"; a class there may not hold '.'. Raises NamePanic."""
    noun = "vendor name" if what == "vendor" else "device class"
    if not name:
        return f"invalid (empty) {noun}"
    raw = name.encode("utf-8", "surrogatepass")
    if not _is_letter(raw[0]):
        return f"invalid {what} {go_quote(name)}, should start with letter"
    if len(raw) == 1:
        raise NamePanic("runtime error: slice bounds out of range [1:0]")
    allowed = "_-." if what == "vendor" else "_-"
    for char in _middle(name):
        if not (_is_alnum(ord(char)) or char in allowed):
            return f"invalid character '{char}' in {noun} {go_quote(name)}"
    if not _is_alnum(raw[-1]):
        return f"invalid {what} {go_quote(name)}, should end with a letter or digit"
    return None


def device_name_error(name: str) -> Optional[str]:
    """pkg/parser ValidateDeviceName: the library's error text, or None."""
    if not name:
        return "invalid (empty) device name"
    raw = name.encode("utf-8", "surrogatepass")
    if not _is_alnum(raw[0]):
        # The library's own text says "class" here.
        return f"invalid class {go_quote(name)}, should start with a letter or digit"
    if len(raw) == 1:
        return None
    for char in _middle(name):
        if not (_is_alnum(ord(char)) or char in "_-.:"):
            return f"invalid character '{char}' in device name {go_quote(name)}"
    if not _is_alnum(raw[-1]):
        return f"invalid name {go_quote(name)}, should end with a letter or digit"
    return None


def parse_qualifier(kind: str) -> tuple[str, str]:
    """pkg/parser ParseQualifier: (vendor, class); vendor is empty when kind is not "vendor/class"."""
    vendor, slash, cls = kind.partition("/")
    if not slash or not vendor or not cls:
        return "", kind
    return vendor, cls
