"""Values containerd cannot decode or parse: wrong TOML types, TOML that containerd 1.x's parser rejects, bytes
that are not UTF-8, runc options of the wrong type (CTD001, CTD004, CTD006, CTD114)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.containerd.structs import ListOf, MapOf, Scalar
from nvidia_oci_hook.kinds.containerd.versions import ALL, V1X, V2X
from nvidia_oci_hook.kinds.containerd.walk import TypeIssue, describe_value, go_toml_type, iter_tree, toml_key
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.containerd.config_view import KINDS, _config, _quoted, _runc, _walk, _who, schema_rule


def _short(value: Any) -> str:
    """A scalar as shown in a message: strings quoted and cut, booleans in TOML spelling."""
    text = _quoted(value)
    return text if len(text) <= 60 else text[:57] + '..."'


def _go_v1_error(value: Any, expected: Any) -> Optional[str]:
    """The error containerd 1.x (go-toml v1) prints for a scalar of the wrong type, or None."""
    if isinstance(value, (dict, list)):
        return None
    shown = ("true" if value else "false") if isinstance(value, bool) else str(value)
    go = go_toml_type(value)
    if isinstance(expected, Scalar) and expected.go == "uint32" and isinstance(value, int) and go == "int64":
        if value < 0:
            return f"{shown}(int64) is negative so does not fit in uint32"
        return f"{shown}(int64) would overflow uint32"
    if isinstance(expected, ListOf):
        target = f"{expected.go}(slice)"
    elif isinstance(expected, MapOf):
        target = f"{expected.go}(map)"
    else:
        target = expected.go
    return f"Can't convert {shown}({go}) to {target}"


def _type_hint(issue: TypeIssue) -> str:
    key = issue.path[-1] if issue.index is None else f"{issue.path[-1]}[{issue.index}]"
    expected = issue.expected
    value = issue.value
    if isinstance(expected, Scalar):
        if expected.go == "bool":
            return f"write {key} = true or {key} = false, without quotes"
        if expected.go == "string":
            return f'quote the value: {key} = "{value}"' if not isinstance(value, (dict, list)) else "use a string"
        if isinstance(value, int) and not isinstance(value, bool):
            return f"use a whole number in the range of {expected.go}"
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            return f"remove the quotes: {key} = {value.strip()}"
        if isinstance(value, float) and value == value and abs(value) != float("inf"):
            return f"use a whole number: {key} = {int(value)}"
        return f"write a whole number without quotes: {key} = 0"
    if isinstance(expected, ListOf):
        if isinstance(value, str):
            return f'make it an array: {key} = ["{value}"]'
        return f'write an array of strings: {key} = ["..."]'
    return f"make it a table: [{toml_key(issue.path)}]"


@schema_rule("CTD001", "wrong-value-type")
def wrong_value_type(value: Any, context: Context) -> Iterator[Problem]:
    """A setting has a value of the wrong TOML type.

    ## What it checks
    Every key of the top level, of its `grpc`, `ttrpc`, `debug`, `metrics`, `cgroup`, `proxy_plugins`,
    `stream_processors` and `timeouts` tables, and of the CRI plugin sections (`plugins."io.containerd.grpc.v1.cri"`,
    `plugins."io.containerd.cri.v1.runtime"`, `plugins."io.containerd.cri.v1.images"`, `plugins.cri` in a
    version 1 file, with their `containerd`, `runtimes`, `cni` and `registry` tables) against the Go type
    containerd decodes it into: a quoted `"true"` where a boolean belongs, a number where a string belongs, a
    single string where an array belongs, a value where a table belongs. A key counts when any release from 1.6
    to 2.3 that reads the file's config version knows it; keys matched the way containerd matches them (exact,
    or another case). Every `plugins` entry must be a table. Other plugins' own tables are not checked.

    ## Why it matters
    containerd decodes the whole file at start-up and exits on the first mismatch, so the node has no container
    runtime at all. containerd 1.x prints only `containerd: (3, 1): Can't convert yes(string) to bool`, with
    neither the file nor the key; 2.x prints `toml: cannot decode TOML string into struct field
    config.RuntimeConfig.EnableCDI of type bool` (and on a wrong-typed CRI section of a version 2 file, 2.x
    crashes in its config migration instead). `containerd config dump` fails the same way.

    ## Example
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri"]
      enable_cdi = "true"
    ```

    ## Fix
    Write the value in the type the message names: booleans and numbers without quotes, paths in quotes,
    lists as arrays (`cdi_spec_dirs = ["/etc/cdi"]`), sections as tables. Check with
    `containerd --config FILE config dump`.
    """
    for issue in _walk(value, context).types:
        if _out_of_range(issue):
            yield Problem(
                issue.pointer,
                f"{issue.display} = {issue.value} does not fit in Go's 64-bit int: {_who(issue.series, 'refuse')} "
                "to load this file (`toml: decimal number is too large to fit in a 64-bit signed integer` in 2.x, "
                "`value out of range` in 1.x)",
                "use a smaller number",
                series=frozenset(issue.series),
            )
            continue
        shown = f" ({_short(issue.value)})" if not isinstance(issue.value, (dict, list)) else ""
        engine = _go_v1_error(issue.value, issue.expected) if issue.series & V1X else None
        reason = f" (containerd 1.x: `{engine}`)" if engine else ""
        where = (
            "containerd reads a table (1.x decodes every plugins entry as one, 2.x each plugin's that takes a "
            "configuration)"
            if issue.go_type == "toml.Tree"
            else ""
        )
        expected = issue.expected.name
        rest = ALL - issue.series
        accepted = f"; {_who(rest, 'accept')} this value" if rest else ""
        yield Problem(
            issue.pointer,
            f"{issue.display} is {describe_value(issue.value)}{shown} where "
            + (where or f"containerd reads {expected}")
            + f": {_who(issue.series, 'refuse')} to load this file{reason}{accepted}",
            _type_hint(issue),
            series=frozenset(issue.series),
        )


def _out_of_range(issue: TypeIssue) -> bool:
    kind = issue.expected
    number = issue.value
    return isinstance(kind, Scalar) and kind.go == "int" and isinstance(number, int) and not isinstance(number, bool)


INT64 = (-(2**63), 2**63 - 1)


def _unparsable_1x(value: Any) -> Iterator[tuple[str, str]]:
    """(pointer, why) for values go-toml v1 cannot parse: local dates, integers beyond 64 bits."""
    for pointer, _path, node in iter_tree(value):
        if isinstance(node, date) and not isinstance(node, datetime):
            yield (
                pointer,
                (
                    f"{node.isoformat()} is a TOML local date: containerd 1.6 and 1.7 cannot parse one that ends its "
                    'line or is followed by ",", "]" or "}" (`parsing error: incorrect date/time separation character`)'
                ),
            )
        elif isinstance(node, int) and not isinstance(node, bool) and not INT64[0] <= node <= INT64[1]:
            yield (
                pointer,
                (
                    f"{node} does not fit in 64 bits: containerd 1.6 and 1.7 cannot parse it "
                    f'(`strconv.ParseInt: parsing "{node}": value out of range`)'
                ),
            )


@schema_rule("CTD004", "toml-rejected-by-containerd-1")
def toml_rejected_by_containerd_1(value: Any, context: Context) -> Iterator[Problem]:
    """Valid TOML that containerd 1.x's TOML parser rejects: a local date, or an integer beyond 64 bits.

    ## What it checks
    In a file of config version 1 or 2, wherever they are: values that are TOML local dates (`2024-01-31`, a
    date without a time), and integers outside the signed 64-bit range. containerd 1.6 and 1.7 parse TOML with
    go-toml v1: after a local date its lexer expects a time, and it fails when the date is followed by the end
    of the line, a comma, `]` or `}` (it reads the date only when a space or a tab follows: `x = 2024-01-31 #
    note`); and it parses every integer as a 64-bit one. This check sees the parsed value, not what follows it,
    so it reports every local date. (containerd 2.x reads both where it ignores the key, and refuses an
    oversized integer in a known setting, which is CTD001.)

    ## Why it matters
    containerd 1.x refuses to start: `failed to load TOML: /etc/containerd/config.toml: (2, 15): parsing error:
    incorrect date/time separation character:` (`missing comma` inside an array), or `(2, 5):
    strconv.ParseInt: parsing "99999999999999999999": value out of range`, although Python's and other TOML
    libraries accept the file. No containerd setting takes a date, so such a value is a mistake.

    ## Example
    `root = 2024-01-31` (meant as a comment, or a path).

    ## Fix
    Quote the value, or delete it; keep numbers within 64 bits.
    """
    if _config(value, context).version >= 3:
        return  # version 3 and 4 files are for containerd 2.x
    for pointer, why in _unparsable_1x(value):
        yield Problem(
            pointer,
            f"{why}, and refuse to start; containerd 2.x parses it",
            "quote the value, or delete it",
            series=V1X,
        )


def _replaced_bytes(value: Any) -> Iterator[str]:
    """Pointers of keys and strings that hold U+FFFD, which is how the loader reads bytes that are not UTF-8."""
    for pointer, path, node in iter_tree(value):
        if (path and "\ufffd" in path[-1]) or (isinstance(node, str) and "\ufffd" in node):
            yield pointer


@schema_rule("CTD006", "not-utf8-for-containerd-2")
def not_utf8_for_containerd_2(value: Any, context: Context) -> Iterator[Problem]:
    """A string or a key holds bytes that are not UTF-8, which containerd 2.x refuses.

    ## What it checks
    Keys and string values that the loader had to repair because their bytes are not UTF-8 (it reads each bad
    byte as U+FFFD; DOC002 gives the byte's position), and bad bytes outside any key or value (a comment),
    which this code then reports at the byte's position.

    ## Why it matters
    containerd 2.x (go-toml v2) refuses the file: `failed to unmarshal TOML at row 2 column 22: toml: invalid
    UTF-8 character in basic string` (`in comment` for a comment). containerd 1.6 and 1.7 read it, so the
    breakage appears with the upgrade to 2.x. A path written in Latin-1 is the usual cause.

    ## Example
    `root = "/var/lib/donn\\xe9es"` with the byte 0xE9 written raw.

    ## Fix
    Re-encode the file as UTF-8 (`iconv -f LATIN1 -t UTF-8`), or use ASCII paths.
    """
    for pointer in _replaced_bytes(value):
        yield Problem(
            pointer,
            "this key or value holds bytes that are not UTF-8 (shown as U+FFFD): containerd 2.x refuses to load the "
            "file (`toml: invalid UTF-8 character in basic string`); 1.6 and 1.7 read it",
            "re-encode the file as UTF-8: iconv -f LATIN1 -t UTF-8",
            series=V2X,
        )


@rule("CTD114", "runtime-option-invalid", Severity.ERROR, KINDS)
def runtime_option_invalid(value: Any, context: Context) -> Iterator[Problem]:
    """A runc runtime's option has the wrong type, so every pod that uses the runtime fails.

    ## What it checks
    The values in the `options` table of every runc runtime (`runtime_type = "io.containerd.runc.v2"`)
    against the runc shim's options: `BinaryName`, `Root`, `ShimCgroup`, `CriuImagePath`, `CriuWorkPath` are
    strings; `SystemdCgroup`, `NoPivotRoot`, `NoNewKeyring` booleans; `IoUid`, `IoGid` integers from 0 to
    4294967295.

    ## Why it matters
    containerd stores `options` as an untyped table and loads the file without complaint; it decodes the
    options only when a pod starts, and then fails the pod: `failed to generate runtime options: ...` (1.6) or
    `failed to generate sandbox runtime options: ...` (1.7 and 2.x), followed by the TOML decoder's complaint
    (`Can't convert true(string) to bool` in 1.x). Every pod on that runtime class stays in ContainerCreating.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = "true"
    ```

    ## Fix
    Write booleans and numbers without quotes, and paths in quotes: `SystemdCgroup = true`.
    """
    for issue in _runc(value, context).types:
        engine = _go_v1_error(issue.value, issue.expected)
        runtime = issue.path[-3] if len(issue.path) >= 3 else "?"
        shown = f" ({_short(issue.value)})" if not isinstance(issue.value, (dict, list)) else ""
        yield Problem(
            issue.pointer,
            f"{issue.path[-1]} is {describe_value(issue.value)}{shown} where the runc shim reads "
            f'{issue.expected.name}: containerd loads the file, but every pod that uses runtime "{runtime}" fails '
            f"to start (`failed to generate runtime options: ...{engine}`)",
            _type_hint(issue),
        )
