"""CTD: containerd config.toml (config versions 1 to 4) that containerd refuses, or reads otherwise than it looks.

CTD0xx: containerd refuses to load the file (schema level). CTD1xx: containerd loads it, but ignores part of it,
or the CRI plugin or the pods that use a runtime fail later.

No rule knows which containerd runs on the node (rules never run programs): a finding names the releases it
applies to ("containerd 1.6 ignores ...", "containerd 1.7 and later refuse ..."), and `containerd --version`
on the node says which one matters.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Callable, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.containerd.config import (
    SERVICE_PATH,
    ContainerdConfig,
    Runtime,
    cached_config,
    program_candidates,
)
from nvidia_oci_hook.kinds.containerd.kind import CONTAINERD
from nvidia_oci_hook.kinds.containerd.pathmatch import go_path_match
from nvidia_oci_hook.kinds.containerd.structs import RUNC_OPTIONS, ListOf, MapOf, Scalar, Table, plugin_tables
from nvidia_oci_hook.kinds.containerd.versions import (
    ALL,
    CDI_KEYS,
    CRI_IMAGES,
    CRI_RUNTIME,
    CRI_V1,
    CRI_V2,
    DEFAULT_RUNTIME,
    MAX_CONFIG_VERSION,
    V1X,
    V2X,
    describe_series,
)
from nvidia_oci_hook.kinds.containerd.walk import (
    KeyIssue,
    TypeIssue,
    Walk,
    describe_value,
    go_toml_type,
    iter_tree,
    toml_key,
    walk_table,
)
from nvidia_oci_hook.rules.base import Check, Context, register, rule

KINDS = [CONTAINERD]


def schema_rule(code: str, name: str) -> Callable[[Check], Check]:
    """A rule of --schema-only: an error means containerd refuses to load the file."""

    def wrap(check: Check) -> Check:
        register(code, name, Severity.ERROR, KINDS, schema_level=True, check=check)
        return check

    return wrap


LINUX_V1 = "io.containerd.runtime.v1.linux"
UNKNOWN_SERVICE = "the kubelet then fails with `unknown service runtime.v1.RuntimeService`"


def _config(value: Any, context: Context) -> ContainerdConfig:
    return cached_config(value, context.memo)


def _walk(value: Any, context: Context) -> Walk:
    return context.cached("containerd-walk", lambda: _config(value, context).walk())  # type: ignore[no-any-return]


def _who(series: Iterable[str], verb: str) -> str:
    """'containerd 2.0 ignores', 'containerd 1.6 and 1.7 ignore': the releases and a verb that agrees."""
    phrase = describe_series(series)
    return f"{phrase} {verb if ' ' in phrase.removeprefix('containerd ') else verb + 's'}"


def _first_child(pointer: str, table: Mapping[str, Any]) -> str:
    """A pointer that has a line of its own: a table's first key when the table has no header line."""
    for key in table:
        return pointer_join(pointer, key)
    return pointer


def _quoted(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


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


# ---------------------------------------------------------------------------------------------------------------
# CTD0xx: containerd refuses the file


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
            )
            continue
        shown = f" ({_short(issue.value)})" if not isinstance(issue.value, (dict, list)) else ""
        engine = _go_v1_error(issue.value, issue.expected) if issue.series & V1X else None
        reason = f" (containerd 1.x: `{engine}`)" if engine else ""
        where = "containerd 1.x decodes every plugins entry as a table" if issue.go_type == "toml.Tree" else ""
        expected = issue.expected.name
        yield Problem(
            issue.pointer,
            f"{issue.display} is {describe_value(issue.value)}{shown} where "
            + (where or f"containerd reads {expected}")
            + f": {_who(issue.series, 'refuse')} to load this file{reason}",
            _type_hint(issue),
        )


def _out_of_range(issue: TypeIssue) -> bool:
    kind = issue.expected
    number = issue.value
    return isinstance(kind, Scalar) and kind.go == "int" and isinstance(number, int) and not isinstance(number, bool)


def _reject_version(config: ContainerdConfig) -> Optional[str]:
    raw = config.declared_version
    if not isinstance(raw, int) or isinstance(raw, bool):
        return None  # a wrong type is CTD001's
    if raw < 0:
        return (
            f"config version {raw} is negative: containerd 2.x crashes at start-up migrating it "
            "(panic: runtime error: index out of range [-1]); 1.6 and 1.7 read it as version 1"
        )
    newest = max(v for v in MAX_CONFIG_VERSION.values() if v is not None)
    if raw > newest:
        return (
            f"no containerd release reads config version {raw} (the newest is {newest}, containerd 2.3): "
            f'containerd 2.0 to 2.2 refuse it ("expected containerd config version equal to or less than `3`, '
            f'got `{raw}`"), 1.7.20 and later refuse it ("unsupported config version `{raw}`"), and 1.6 reads it as '
            "version 2"
        )
    return None


@schema_rule("CTD002", "unsupported-config-version")
def unsupported_config_version(value: Any, context: Context) -> Iterator[Problem]:
    """The config version is one no containerd release reads.

    ## What it checks
    That `version` is not negative and not above 4, the highest version any containerd release reads
    (1 and 2: containerd 1.x; 3: 2.0 and later; 4: 2.3 and later).

    ## Why it matters
    containerd 2.0 to 2.2 refuse a version above 3 (`expected containerd config version equal to or less
    than `3`, got `5``), 1.7.20 and later refuse a version above 2 (`unsupported config version `5``), and
    containerd 2.x crashes at start-up on a negative version (`panic: runtime error: index out of range [-1]`,
    while `containerd config dump` still succeeds). containerd 1.6 checks no upper bound and reads any version
    from 2 up as version 2, so the same file behaves differently on every node.

    ## Example
    `version = 5`, or `version = -1`.

    ## Fix
    Use `version = 2` for containerd 1.6 and 1.7, `version = 3` for containerd 2.x; `containerd config
    default` prints a file of the version the installed containerd wants.
    """
    message = _reject_version(_config(value, context))
    if message:
        yield Problem("/version", message, "set version = 2 (containerd 1.x) or version = 3 (containerd 2.x)")


def _uri_refused_by_1x(name: str) -> frozenset[str]:
    """The 1.x series that reject a plugin URI in a version 2 file: 1.6 one of fewer than four dotted parts, 1.7
    also one that does not start with io.containerd."""
    if name.count(".") < 3:
        return V1X
    return frozenset() if name.startswith("io.containerd.") else frozenset({"1.7"})


@schema_rule("CTD003", "invalid-plugin-uri")
def invalid_plugin_uri(value: Any, context: Context) -> Iterator[Problem]:
    """A plugin is named by a short id or a malformed URI where containerd requires a full URI.

    ## What it checks
    In a file of config version 2 or later: every key of `plugins` and every entry of `disabled_plugins` and
    `required_plugins` for version 2, which containerd 1.6 and 1.7 require to be a URI of the form
    `io.containerd.<type>.<version>.<id>`; and every entry of `disabled_plugins` and `required_plugins`, which
    containerd 2.x requires to contain a dot.

    ## Why it matters
    containerd refuses to start: `failed to load TOML from /etc/containerd/config.toml: invalid plugin key
    URI "cri" expect io.containerd.x.vx` (or `invalid disabled plugin URI`, `invalid required plugin URI`).
    This is the usual result of copying a version 1 snippet (`[plugins.cri]`) into a version 2 file.

    ## Example
    ```toml
    version = 2
    [plugins.cri.containerd]
      default_runtime_name = "nvidia"
    ```

    ## Fix
    Use the full plugin URI: `[plugins."io.containerd.grpc.v1.cri".containerd]` in a version 2 file,
    `[plugins."io.containerd.cri.v1.runtime".containerd]` in a version 3 file; `disabled_plugins =
    ["io.containerd.grpc.v1.cri"]`.
    """
    config = _config(value, context)
    if config.version < 2 or not config.version_valid:
        return
    if config.version == 2:
        for name in config.plugins:
            refused = _uri_refused_by_1x(name)
            if refused:
                yield Problem(
                    pointer_join("/plugins", name),
                    f'plugin section "{name}" is not named by a plugin URI: {_who(refused, "refuse")} to load this '
                    f'file (`invalid plugin key URI "{name}" expect io.containerd.x.vx`); 2.x ignores it',
                    _uri_hint(name, config),
                )
    for key, label in (("disabled_plugins", "disabled"), ("required_plugins", "required")):
        entries = config.value.get(key)
        if not isinstance(entries, list):
            continue
        for index, entry in enumerate(entries):
            if not isinstance(entry, str):
                continue
            refusing: set[str] = set()
            if config.version == 2:
                refusing |= _uri_refused_by_1x(entry)
            if "." not in entry:
                refusing |= V2X & (config.readers or V2X)
            if refusing:
                yield Problem(
                    f"/{key}/{index}",
                    f'{key} entry "{entry}" is not a plugin URI: {_who(refusing, "refuse")} to load this '
                    f'file (`invalid {label} plugin URI "{entry}" expect io.containerd.x.vx`)',
                    _uri_hint(entry, config),
                )


_SHORT_IDS = {
    "cri": CRI_V2,
    "cgroups": "io.containerd.monitor.v1.cgroups",
    "scheduler": "io.containerd.gc.v1.scheduler",
    "bolt": "io.containerd.metadata.v1.bolt",
    "overlayfs": "io.containerd.snapshotter.v1.overlayfs",
    "linux": "io.containerd.runtime.v1.linux",
    "opt": "io.containerd.internal.v1.opt",
    "restart": "io.containerd.internal.v1.restart",
}


def _uri_hint(name: str, config: ContainerdConfig) -> str:
    full = _SHORT_IDS.get(name)
    if name == "cri" and config.version >= 3:
        return f'use "{CRI_RUNTIME}" (runtimes, CDI) or "{CRI_IMAGES}" (registry, snapshotter) in a version 3 file'
    if full:
        return f'use the full URI "{full}"'
    return "use the full URI, io.containerd.<type>.<version>.<id>; `containerd config default` lists them"


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
        yield Problem(pointer, f"{why}, and refuse to start; containerd 2.x parses it", "quote the value, or delete it")


def _import_missing(value: Any, context: Context) -> Iterator[Problem]:
    host = context.host
    imports = _config(value, context).value.get("imports")
    if host is None or not isinstance(imports, list):
        return
    for index, entry in enumerate(imports):
        if not isinstance(entry, str) or "*" in entry or not entry.startswith("/"):
            continue  # globs may match nothing; relative paths are relative to the file, which a rule cannot see
        identity = host.identity(entry)
        if identity is not None and identity.type == "file":
            continue
        what = "does not exist on this node" if identity is None else f"is {identity.describe()}, not a file"
        engine = f"open {entry}: no such file or directory" if identity is None else "read ...: is a directory"
        yield Problem(
            f"/imports/{index}",
            f'imports entry "{entry}" {what}: containerd refuses to start (`{engine}`); containerd 2.x\'s '
            "`config dump` skips it, its daemon does not",
            "create the file, or remove the entry (a glob such as /etc/containerd/conf.d/*.toml may match nothing)",
        )


register(
    "CTD005",
    "import-missing",
    Severity.ERROR,
    KINDS,
    needs_host=True,
    schema_level=True,
    check=_import_missing,
    doc="""A file named in `imports` does not exist on the node.

    ## What it checks
    Every absolute entry of `imports` without a `*`: it must be a file under `--host-root`. Entries with a `*`
    are globs, which may match nothing; relative entries are resolved against the directory of the file, which
    this check does not see.

    ## Why it matters
    containerd reads every imported file at start-up and refuses to start when one is missing: containerd 1.x
    says `failed to load TOML: /etc/containerd/conf.d/99-nvidia.toml: open ...: no such file or directory`,
    containerd 2.x `open ...: no such file or directory` (its `containerd config dump` silently skips the file,
    so a check with it passes). A drop-in deleted by a package removal takes the whole runtime down at the next
    restart.

    ## Example
    `imports = ["/etc/containerd/conf.d/99-nvidia.toml"]` after the NVIDIA Container Toolkit was removed.

    ## Fix
    Restore the file or remove the entry; prefer a glob (`/etc/containerd/conf.d/*.toml`), which tolerates an
    empty directory.
    """,
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
        )


# ---------------------------------------------------------------------------------------------------------------
# CTD1xx: containerd loads the file but ignores part of it, or fails later


def _cdi_locations(config: ContainerdConfig) -> dict[str, str]:
    """pointer of each place a CDI key is read -> which releases read it there."""
    if config.version <= 1:
        return {pointer_join("/plugins", CRI_V1): "containerd 1.7"}
    if config.version == 2:
        return {pointer_join("/plugins", CRI_V2): "containerd 1.7 and later"}
    return {pointer_join("/plugins", CRI_RUNTIME): "containerd 2.0 and later"}


def _find_keys(value: Any, names: tuple[str, ...]) -> Iterator[tuple[str, tuple[str, ...], str]]:
    """(pointer, path, key) of every table key whose name, in any case, is one of `names`."""
    for pointer, path, _node in iter_tree(value):
        if path and path[-1].casefold() in names:  # array indices are digits, never one of the names
            yield pointer, path, path[-1]


def _right_place(config: ContainerdConfig) -> str:
    return f"[{toml_key(('plugins', config.cri_plugin))}]"


@rule("CTD101", "cdi-setting-ignored", Severity.ERROR, KINDS)
def cdi_setting_ignored(value: Any, context: Context) -> Iterator[Problem]:
    """enable_cdi or cdi_spec_dirs sits where containerd does not read it.

    ## What it checks
    Every `enable_cdi` and `cdi_spec_dirs` key, anywhere in the file, against the one table that the file's
    config version reads them from: `plugins.cri` (version 1), `plugins."io.containerd.grpc.v1.cri"`
    (version 2), `plugins."io.containerd.cri.v1.runtime"` (version 3 and 4). In a version 2 file,
    `plugins."io.containerd.cri.v1.runtime"` is reported too: only containerd 2.x reads it there.

    ## Why it matters
    containerd ignores the key in any other table without a word (2.x logs `Ignoring unknown key in TOML for
    plugin` at warning level), so CDI stays off (containerd 1.7's default), or reads the default directories
    (`/etc/cdi`, `/var/run/cdi`). Pods whose GPUs are requested as CDI devices (the device plugin's
    `cdi.k8s.io/...` annotations, DRA) start without them, or fail with `unresolvable CDI devices`. The usual
    causes: a version 3 file that kept the version 2 plugin name, a version 2 snippet pasted into a version 3
    file, or the key put under `containerd` or a runtime.

    ## Example
    ```toml
    version = 3
    [plugins."io.containerd.grpc.v1.cri"]
      enable_cdi = true
    ```

    ## Fix
    Move the key into the table the message names: for version 3,
    `[plugins."io.containerd.cri.v1.runtime"]` with `enable_cdi = true`; for version 2,
    `[plugins."io.containerd.grpc.v1.cri"]`. `containerd config dump` shows the value containerd uses.
    """
    config = _config(value, context)
    right = _cdi_locations(config)
    for pointer, path, key in _find_keys(config.value, CDI_KEYS):
        parent = pointer[: pointer.rfind("/")]
        if parent in right:
            continue  # the right table (another spelling is CTD103's)
        canonical = key.casefold()
        if config.version == 2 and parent == pointer_join("/plugins", CRI_RUNTIME):
            why = (
                f"in a version 2 file only containerd 2.x reads {toml_key(path[:-1])}; containerd 1.6 and 1.7 "
                "do not have that plugin and ignore it"
            )
        else:
            why = (
                f"containerd reads {canonical} only from {_right_place(config)} in a config of version "
                f"{config.version}{' (no version line means 1)' if config.declared_version is None else ''}, "
                "so this one is ignored"
            )
        yield Problem(pointer, f"{toml_key(path)} is ignored: {why}", f"move {canonical} to {_right_place(config)}")


_DID_YOU_MEAN_CUTOFF = 0.75


def _other_tables(config: ContainerdConfig) -> list[tuple[tuple[str, ...], Table]]:
    """The CRI tables of this version, by TOML path, for 'belongs in ...' hints."""
    out: list[tuple[tuple[str, ...], Table]] = []
    for name, (table, _readers) in plugin_tables(config.version).items():
        base = ("plugins", name)
        out.append((base, table))
        for key, entry in table.fields.items():
            if isinstance(entry.type, Table):
                out.append(((*base, key), entry.type))
    return out


def _unknown_hint(issue: KeyIssue, config: ContainerdConfig) -> str:
    key = issue.key
    parent = issue.path[:-1]
    if (
        len(parent) >= 2
        and parent[-2] == "runtimes"
        and any(k.casefold() == key.casefold() for k in RUNC_OPTIONS.fields)
    ):
        return f"runc options go in [{toml_key((*parent, 'options'))}]"
    for path, table in _other_tables(config):
        if path != parent and any(k.casefold() == key.casefold() for k in table.fields):
            return f"containerd reads {key} from [{toml_key(path)}] in a version {config.version} file"
    if key == "sandbox_image" and config.version >= 3:
        pinned = toml_key(("plugins", CRI_IMAGES, "pinned_images"))
        return f"in a version 3 file the sandbox image is sandbox in [{pinned}]"
    close = difflib.get_close_matches(key, list(issue.table.fields), n=1, cutoff=_DID_YOU_MEAN_CUTOFF)
    if close:
        return f"did you mean {close[0]}?"
    if parent == ("plugins",):
        return _uri_hint(key, config)
    return "delete it, or check the key against `containerd config default`"


def _runc_walk(config: ContainerdConfig) -> Walk:
    out = Walk()
    readers = config.readers or ALL
    for runtime in config.runtimes():
        options = runtime.options
        if runtime.is_runc and options is not None:
            walk_table(options, RUNC_OPTIONS, f"{runtime.pointer}/options", (*runtime.path, "options"), readers, out)
    return out


def _runc(value: Any, context: Context) -> Walk:
    return context.cached("containerd-runc", lambda: _runc_walk(_config(value, context)))  # type: ignore[no-any-return]


def _key_issues(value: Any, context: Context) -> Iterator[KeyIssue]:
    yield from _walk(value, context).keys
    yield from _runc(value, context).keys


@rule("CTD102", "unknown-key", Severity.WARNING, KINDS)
def unknown_key(value: Any, context: Context) -> Iterator[Problem]:
    """A key that no containerd release reads there.

    ## What it checks
    Keys of the tables whose key set is containerd's own Go structs: the top level and its `grpc`, `ttrpc`,
    `debug`, `metrics`, `cgroup`, `proxy_plugins.*` and `stream_processors.*` tables; the CRI plugin sections
    of the file's config version, with `containerd`, `containerd.runtimes.*`, `cni`, `registry` and their
    sub-tables; and the `options` of a runc runtime (`runtime_type = "io.containerd.runc.v2"`), which are the
    runc shim's `BinaryName`, `SystemdCgroup`, `Root`, `NoPivotRoot` and the rest. A key is unknown when no
    release from 1.6 to 2.3 that reads this config version knows it, in any spelling containerd accepts. In a
    version 3 file, a `plugins` section that is not a plugin URI is reported too. Other plugins' tables, and the
    options of non-runc runtimes (passed whole to the runtime), are not checked. `enable_cdi` and
    `cdi_spec_dirs` in the wrong place are CTD101.

    ## Why it matters
    containerd 1.x ignores unknown keys silently and 2.x logs `Ignoring unknown key in TOML` at warning level,
    so a misspelt key (`SystemdCgroups`), a key in the wrong table (`BinaryName` next to `runtime_type`
    instead of under `options`) or a version 2 table in a version 3 file has no effect and nothing fails.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      BinaryName = "/usr/bin/nvidia-container-runtime"
    ```
    runs plain runc: `BinaryName` belongs in `[...runtimes.nvidia.options]`.

    ## Fix
    Follow the hint (the key it probably means, or the table containerd reads it from); `containerd config
    dump` shows the configuration containerd really uses.
    """
    config = _config(value, context)
    for issue in _key_issues(value, context):
        if issue.ignored_by != issue.readers or issue.key.casefold() in CDI_KEYS:
            continue
        where = toml_key(issue.path[:-1]) or "the top level"
        if issue.path[:-1] == ("plugins",):
            message = (
                f'plugin section "{issue.key}" is not a plugin URI: containerd {", ".join(sorted(V2X))} find no '
                "plugin by that name and ignore the section"
            )
        else:
            message = f"{issue.key} is not a key of {where}: {_who(issue.readers, 'ignore')} it"
        yield Problem(issue.pointer, message, _unknown_hint(issue, config))


_REPLACEMENTS = {
    "systemd_cgroup": "set SystemdCgroup = true in the options of each runc runtime instead",
    "no_pivot": "set NoPivotRoot = true in the runc runtime's options instead",
    "runtime_engine": "set BinaryName in the runc runtime's options instead",
    "runtime_root": "set Root in the runc runtime's options instead",
    "default_runtime": "define the runtime under containerd.runtimes and name it in default_runtime_name",
    "untrusted_workload_runtime": "define it as containerd.runtimes.untrusted",
    "disable_cgroup": "nothing replaces it in containerd 2.x",
    "tls": "configure registry TLS in hosts.toml files under registry.config_path",
    "CriuPath": "put criu on containerd's PATH instead",
    "plugin_dir": "containerd 2.1 and later load no dynamic plugins",
}


@rule("CTD103", "ignored-by-some-versions", Severity.INFO, KINDS)
def ignored_by_some_versions(value: Any, context: Context) -> Iterator[Problem]:
    """A key that only some containerd releases read.

    ## What it checks
    Keys known to some, but not all, of the containerd releases (1.6 to 2.3) that read the file's config
    version, in the tables CTD102 checks: keys added later (`enable_cdi`, `cdi_spec_dirs`,
    `privileged_without_host_devices_all_devices_allowed` are unknown to containerd 1.6), keys that containerd
    2.0 removed (`systemd_cgroup`, `no_pivot`, `runtime_engine`, `runtime_root`, `default_runtime`,
    `untrusted_workload_runtime`, `disable_cgroup`, `registry.configs.*.tls`), and keys spelt in a case that
    only containerd 2.x matches. This tool does not know which containerd the node runs, so this is
    information: `containerd --version` says whether it applies.

    ## Why it matters
    The key silently does nothing on the releases that do not know it. The one that costs GPU nodes most:
    Debian 12 ships containerd 1.6, which has no CDI support and ignores `enable_cdi = true`, so CDI device
    requests are never resolved by containerd (CDI needs containerd 1.7 or later). Keys removed in 2.0 stop
    working on the upgrade from 1.7, with only a warning in containerd's log.

    ## Example
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri"]
      enable_cdi = true
    ```
    on Debian 12's containerd 1.6.20.

    ## Fix
    Check `containerd --version`. For CDI, use containerd 1.7 or later (Debian 13 ships 1.7.24), or let a
    CDI-aware runtime such as nvidia-container-runtime in `cdi` mode inject the devices. For keys removed in
    2.0, use the replacement the message names.
    """
    config = _config(value, context)
    for issue in _key_issues(value, context):
        if issue.ignored_by == issue.readers:
            continue
        key = issue.canonical or issue.key
        reading = describe_series(issue.readers - issue.ignored_by)
        if issue.canonical:
            message = (
                f"{issue.key} is read as {issue.canonical} by {reading} only; {_who(issue.ignored_by, 'ignore')} "
                "this spelling"
            )
            hint = f"spell it {issue.canonical}"
        elif key in CDI_KEYS and issue.ignored_by == {"1.6"}:
            message = (
                f"{key} is ignored by containerd 1.6 (Debian 12's containerd), which has no CDI support; "
                f"{_who(issue.readers - issue.ignored_by, 'read')} it"
            )
            hint = "run containerd 1.7 or later for CDI (`containerd --version` shows the node's release)"
        else:
            message = f"{key} is read by {reading} only; {_who(issue.ignored_by, 'ignore')} it"
            hint = _REPLACEMENTS.get(key) or "check `containerd --version` on the node"
            if not issue.ignored_by & V1X and config.version == 2:
                log = "Ignoring unknown key in TOML" + (" for plugin" if issue.path[0] == "plugins" else "")
                message += f" (containerd 2.x logs `{log}`)"
        yield Problem(issue.pointer, message, hint)


def _uses_uri_names(config: ContainerdConfig) -> bool:
    return any(name.startswith("io.containerd.") for name in config.plugins)


@rule("CTD104", "missing-config-version", Severity.ERROR, KINDS)
def missing_config_version(value: Any, context: Context) -> Iterator[Problem]:
    """A file without `version = 2` names its plugins by URI, so containerd ignores those sections.

    ## What it checks
    That a file whose `plugins` sections use full URIs (`plugins."io.containerd.grpc.v1.cri"`) declares its
    version. Without a `version` line (or with `version = 0` or `1`), containerd reads the file as version 1.

    ## Why it matters
    In a version 1 file containerd 1.6 and 1.7 look plugins up by their short id (`plugins.cri`), so every
    section named by URI is ignored, silently: no runtimes, no `enable_cdi`, no registry settings. containerd
    2.0 to 2.2 take such a file for a version 3 one, where `io.containerd.grpc.v1.cri` holds only the streaming
    server settings, and ignore its CRI runtime settings (2.x logs `Ignoring unknown key in TOML for plugin`);
    only 2.3 migrates them. A drop-in written by a tool that assumed `version = 2` in the main file fails this way
    when the main file has no version line.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "nvidia"
    ```

    ## Fix
    Add `version = 2` as the first line (containerd 1.6, 1.7), or write a version 3 file for containerd 2.x.
    """
    config = _config(value, context)
    if config.version > 1 or not _uses_uri_names(config):
        return
    said = "has no version line" if config.declared_version is None else f"declares version {config.declared_version}"
    names = ", ".join(f'"{name}"' for name in config.plugins if name.startswith("io.containerd."))
    yield Problem(
        "/version" if config.declared_version is not None else _first_child("/plugins", config.plugins),
        f"this file {said}, so containerd reads it as version 1: containerd 1.6 and 1.7 ignore the plugin "
        f"sections named by URI ({names}) and 2.0 to 2.2 ignore their CRI runtime settings",
        "add version = 2 at the top of the file (containerd 1.x), or write a version 3 file (containerd 2.x)",
    )


@rule("CTD105", "config-version-1", Severity.WARNING, KINDS)
def config_version_1(value: Any, context: Context) -> Iterator[Problem]:
    """A version 1 file (no `version` line, or `version = 1`) with plugin sections.

    ## What it checks
    A file read as version 1 whose plugin sections use short ids (`plugins.cri`).

    ## Why it matters
    containerd 1.6 and 1.7 read it, with a deprecation warning. containerd 2.0 to 2.2 rename `plugins.cri` to
    `io.containerd.grpc.v1.cri` but then read the file as version 3, in which that plugin holds only the
    streaming server settings: every runtime, `default_runtime_name`, `enable_cdi` and registry setting of the
    file is ignored (measured on containerd 2.1.9, which logs only `Ignoring unknown key in TOML for plugin`),
    so an upgrade silently drops the GPU runtime. containerd 2.3 migrates the file.

    ## Example
    ```toml
    [plugins.cri.containerd]
      default_runtime_name = "nvidia"
    ```

    ## Fix
    Convert the file to version 2 (`version = 2`, and `plugins.cri` becomes `plugins."io.containerd.grpc.v1.cri"`)
    while on containerd 1.x, or run `containerd config migrate` with containerd 2.x and use its output.
    """
    config = _config(value, context)
    if config.version > 1 or not config.plugins or _uses_uri_names(config):
        return
    lost = (
        "; containerd 2.0 to 2.2 ignore every CRI runtime setting of plugins.cri in it (2.3 migrates them)"
        if CRI_V1 in config.plugins
        else ""
    )
    said = "has no version line" if config.declared_version is None else f"declares version {config.declared_version}"
    yield Problem(
        "/version" if config.declared_version is not None else _first_child("/plugins", config.plugins),
        f"this file {said}, so containerd reads it as the deprecated version 1{lost}",
        'write version = 2 and name plugins by URI (plugins."io.containerd.grpc.v1.cri")',
    )


@rule("CTD106", "config-version-needs-containerd-2", Severity.INFO, KINDS)
def config_version_needs_containerd_2(value: Any, context: Context) -> Iterator[Problem]:
    """A version 3 or 4 file, which only containerd 2.x reads.

    ## What it checks
    `version = 3` (containerd 2.0 and later) or `version = 4` (containerd 2.3 and later). This tool does not
    know which containerd the node runs, so this is information.

    ## Why it matters
    containerd 1.7.20 and later refuse the file (`unsupported config version `3``). containerd 1.6 and older 1.7
    releases start, but know none of the version 3 plugin names (`io.containerd.cri.v1.runtime`,
    `io.containerd.cri.v1.images`), so every runtime, CDI and registry setting is silently ignored and pods run
    with the built-in `runc` runtime. containerd 2.0 to 2.2 refuse version 4.

    ## Example
    `version = 3` on Debian 12, whose containerd is 1.6.20.

    ## Fix
    Check `containerd --version`; for containerd 1.x, write a version 2 file
    (`plugins."io.containerd.grpc.v1.cri"`).
    """
    config = _config(value, context)
    if config.version == 3:
        yield Problem(
            "/version",
            "config version 3 is read by containerd 2.0 and later only: containerd 1.7.20 and later refuse the file "
            '("unsupported config version `3`"), 1.6 and older 1.7 releases ignore its CRI plugin sections',
            "on containerd 1.x, write a version 2 file",
        )
    elif config.version == 4:
        yield Problem(
            "/version",
            "config version 4 is read by containerd 2.3 and later only: containerd 2.0 to 2.2 and 1.7.20 and later "
            "refuse the file",
            "on containerd 2.0 to 2.2, write a version 3 file",
        )


# --- runtimes ---


def _effective_runtimes(config: ContainerdConfig, series: frozenset[str]) -> set[str]:
    """The runtime names containerd has: 1.x replaces its built-in list with the file's, 2.x merges them."""
    names = {runtime.name for runtime in config.runtimes()}
    if config.runtimes_table() is not None and series <= V1X:
        return names
    return names | {DEFAULT_RUNTIME}


def _legacy_default(config: ContainerdConfig) -> bool:
    """containerd 1.x's deprecated default_runtime table with a type: it becomes the runtime named 'default'."""
    legacy = (config.cri_containerd() or {}).get("default_runtime")
    return isinstance(legacy, dict) and bool(legacy.get("runtime_type"))


@rule("CTD110", "default-runtime-undefined", Severity.ERROR, KINDS)
def default_runtime_undefined(value: Any, context: Context) -> Iterator[Problem]:
    """default_runtime_name names a runtime that containerd does not have.

    ## What it checks
    That the CRI plugin's `containerd.default_runtime_name` (default `"runc"`) is not empty and names an entry
    of `containerd.runtimes`, as containerd will have them: containerd 1.6 and 1.7 replace their built-in
    `runc` entry with the file's `runtimes` table when the file has one, containerd 2.x adds the file's
    entries to it.

    ## Why it matters
    The CRI plugin fails to load; containerd logs, at warning level, `failed to load plugin
    io.containerd.grpc.v1.cri` with the error "invalid plugin config: no corresponding runtime configured in
    `containerd.runtimes` for `containerd` `default_runtime_name = "runc"`" (or "`default_runtime_name` is
    empty"). containerd itself keeps running, so the service looks healthy, but `ctr plugins ls` shows the CRI
    plugin in state `error`, the kubelet gets `unknown service runtime.v1.RuntimeService` and the node goes
    NotReady. A common trigger on 1.x: a file that defines only `runtimes.nvidia` and leaves
    `default_runtime_name` unset.

    ## Example
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
    ```
    (containerd 1.6 and 1.7: no `runc` runtime any more, and `default_runtime_name` is still `"runc"`.)

    ## Fix
    Set `default_runtime_name` to one of the runtimes the file defines, or define the runtime it names
    (`[...containerd.runtimes.runc]` with `runtime_type = "io.containerd.runc.v2"`).
    """
    for failure in _default_runtime_failures(_config(value, context)):
        yield Problem(failure.pointer, failure.message, failure.hint)


@dataclass(frozen=True)
class CriFailure:
    """A setting that makes the CRI plugin fail to load, and the containerd series it fails on."""

    pointer: str
    message: str
    hint: str
    series: frozenset[str]


def _default_runtime_failures(config: ContainerdConfig) -> Iterator[CriFailure]:
    readers = config.readers
    cri = config.cri
    if not readers or cri is None:
        return
    containerd = config.cri_containerd() or {}
    explicit = "default_runtime_name" in containerd
    name = containerd.get("default_runtime_name", DEFAULT_RUNTIME)
    if not isinstance(name, str):
        return
    base = f"{config.cri_pointer}/containerd"
    runtimes = config.runtimes()
    if explicit:
        pointer = f"{base}/default_runtime_name"
    else:
        pointer = runtimes[0].pointer if runtimes else _first_child(config.cri_pointer, cri)
    if name == "":
        yield CriFailure(
            pointer,
            f"default_runtime_name is empty: the CRI plugin of {describe_series(readers)} fails to load "
            f'("`default_runtime_name` is empty") and {UNKNOWN_SERVICE}',
            "name one of the runtimes under containerd.runtimes",
            readers,
        )
        return
    failing: set[str] = set()
    for group in (readers & V1X, readers & V2X):
        if not group or (group <= V1X and _legacy_default(config)):
            continue
        if name not in _effective_runtimes(config, group):
            failing |= group
    if not failing:
        return
    defined = sorted(runtime.name for runtime in runtimes)
    have = ", ".join(defined) if defined else "none"
    if explicit:
        subject = f'default_runtime_name is "{name}", but containerd.runtimes has no entry {name} (it has: {have})'
    else:
        subject = (
            f'default_runtime_name is not set, so containerd uses "{name}", but this file\'s containerd.runtimes '
            f"(which replaces the built-in list in containerd 1.6 and 1.7) has no {name} entry (it has: {have})"
        )
    yield CriFailure(
        pointer,
        f'{subject}: the CRI plugin of {describe_series(failing)} fails to load ("no corresponding runtime '
        f'configured in `containerd.runtimes` for `containerd` `default_runtime_name = "{name}"") and '
        f"{UNKNOWN_SERVICE}",
        f"set default_runtime_name to one of: {have}"
        if defined
        else f"define [{toml_key((*config.runtimes_path, name))}]",
        frozenset(failing),
    )


def _binary_problem(context: Context, name: str) -> Optional[tuple[str, str]]:
    """(why the program `name` cannot be run on the host, what the runc shim then says), or None if it can."""
    host = context.host
    if host is None:
        return None
    candidates = program_candidates(name)
    if not candidates:
        return (
            f"{name} is a relative path, which the runc shim resolves against its own working directory",
            f"fork/exec {name}: no such file or directory",
        )
    for candidate in candidates:
        if host.is_executable(candidate):
            return None
    existing = [candidate for candidate in candidates if host.exists(candidate)]
    if existing:
        identity = host.identity(existing[0])
        what = "a file without an execute bit" if identity is not None and identity.type == "file" else "not a file"
        shown = name if name.startswith("/") else f'"{name}"'
        return f"{existing[0]} is {what}", f"fork/exec {shown}: permission denied"
    if name.startswith("/"):
        return f"{name} does not exist on this node", f"fork/exec {name}: no such file or directory"
    return (
        f"{name} is not in any directory of containerd's PATH ({':'.join(SERVICE_PATH)})",
        f'exec: "{name}": executable file not found in $PATH',
    )


@rule("CTD111", "runtime-binary-missing", Severity.ERROR, KINDS, needs_host=True)
def runtime_binary_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A runtime's program (options.BinaryName, runtime_path) is missing or not executable on the node.

    ## What it checks
    For every runtime of the CRI plugin that the file's version reads: the runc shim's
    `options.BinaryName` (for `runtime_type = "io.containerd.runc.v2"`), and `runtime_path` (the shim binary,
    where set). An absolute path must be an executable file under `--host-root`; a bare name must be one in a
    directory of containerd's usual PATH (`/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`).

    ## Why it matters
    containerd loads the file without checking either path. Every pod that uses the runtime then fails at
    sandbox creation, and stays in ContainerCreating: the runc shim cannot start the runtime (measured with
    containerd 1.6, 1.7 and 2.1: `failed to create shim task: OCI runtime create failed: unable to retrieve OCI
    runtime error (open .../log.json: no such file or directory): fork/exec /usr/bin/nvidia-container-runtime:
    no such file or directory: unknown`; `exec: "nvidia-container-runtime": executable file not found in $PATH`
    for a bare name; `permission denied` for a file without an execute bit). Typical after removing or moving
    the NVIDIA Container Toolkit while containerd still points at `/usr/bin/nvidia-container-runtime`.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
    ```
    on a node where the toolkit lives in `/usr/bin`.

    ## Fix
    Install the program, or correct the path (`command -v nvidia-container-runtime`), then restart containerd.
    """
    if context.host is None:
        return
    config = _config(value, context)
    for runtime in config.runtimes():
        checks: list[tuple[str, str, Any]] = []
        if runtime.is_runc:
            key, binary = runtime.option("BinaryName")
            if key is not None:
                checks.append((f"{runtime.pointer}/options/{key}", "options.BinaryName", binary))
        path = runtime.table.get("runtime_path")
        checks.append((f"{runtime.pointer}/runtime_path", "runtime_path", path))
        for pointer, label, program in checks:
            if not isinstance(program, str) or not program:
                continue
            problem = _binary_problem(context, program)
            if problem is None:
                continue
            why, engine = problem
            effect = (
                f"the runc shim cannot run it, so every pod that uses this runtime fails to start (`{engine}`)"
                if label == "options.BinaryName"
                else "containerd cannot start this runtime's shim, so every pod that uses it fails to start"
            )
            yield Problem(
                pointer,
                f'runtime "{runtime.name}" {label} = "{program}": {why}; {effect}',
                f"install it, or set the path that `command -v {posixpath.basename(program)}` prints on the node",
            )


CDI_SAMPLE_KEYS = ("cdi.k8s.io/nvidia-device-plugin_GPU-0", "cdi.k8s.io/gpu")


def _containerd_injects_cdi(config: ContainerdConfig) -> bool:
    """Whether containerd itself resolves CDI devices for this file (so the runtime does not have to)."""
    cri = config.cri or {}
    enabled = cri.get("enable_cdi")
    if config.version >= 3:
        return enabled is not False  # containerd 2.x enables CDI by default
    return enabled is True


def _nvidia_runtime(runtime: Runtime) -> Optional[str]:
    """The NVIDIA wrapper a runtime runs (BinaryName basename starting with nvidia), or None."""
    if not runtime.is_runc:
        return None
    _key, binary = runtime.option("BinaryName")
    if isinstance(binary, str) and posixpath.basename(binary).startswith("nvidia"):
        return binary
    return None


@rule("CTD112", "cdi-annotations-not-forwarded", Severity.WARNING, KINDS)
def cdi_annotations_not_forwarded(value: Any, context: Context) -> Iterator[Problem]:
    """An NVIDIA runtime does not receive the pod's cdi.k8s.io/ annotations.

    ## What it checks
    For a runtime whose `options.BinaryName` is an NVIDIA wrapper (its file name starts with `nvidia`, as
    `nvidia-container-runtime` does), when containerd does not resolve CDI devices itself (`enable_cdi` is not
    true in a version 1 or 2 file; false in a version 3 file): that `container_annotations` holds a pattern that
    matches `cdi.k8s.io/` keys. containerd copies a CRI container annotation into the OCI spec only if a
    pattern matches it, with Go's `path.Match`, in which `*` does not cross a `/`: `cdi.k8s.io/*` matches,
    `cdi.k8s.io*` and `*` do not.

    ## Why it matters
    In CDI mode, nvidia-container-runtime finds the devices to inject in the spec's `cdi.k8s.io/...`
    annotations, which the device plugin sets on the container. If containerd does not forward them the
    wrapper sees no request, and the container starts without the GPUs it was allocated.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Add `container_annotations = ["cdi.k8s.io/*"]` to the runtime (what `nvidia-ctk runtime configure
    --cdi.enabled` writes), or enable CDI in containerd itself (containerd 1.7 and later).
    """
    config = _config(value, context)
    if _containerd_injects_cdi(config):
        return
    for runtime in config.runtimes():
        binary = _nvidia_runtime(runtime)
        if binary is None:
            continue
        patterns = runtime.table.get("container_annotations")
        if patterns is not None and not isinstance(patterns, list):
            continue  # a wrong type is CTD001's
        strings = [p for p in patterns or [] if isinstance(p, str)]
        missing = [key for key in CDI_SAMPLE_KEYS if not any(go_path_match(p, key) for p in strings)]
        if not missing:
            continue
        why = (
            "containerd 1.6 and 1.7 do not inject them themselves, since enable_cdi is not true "
            "(containerd 2.x enables CDI by default)"
            if config.version <= 2
            else "containerd does not inject them itself, since enable_cdi = false"
        )
        if strings:
            listed = ", ".join(_quoted(p) for p in strings)
            forwarded = f"no pattern of container_annotations = [{listed}] matches {missing[0]}"
        else:
            forwarded = "it has no container_annotations"
        yield Problem(
            f"{runtime.pointer}/container_annotations" if patterns is not None else runtime.pointer,
            f'runtime "{runtime.name}" runs {binary}, which injects the CDI devices named in cdi.k8s.io/ '
            f"annotations, but {forwarded}, so containerd leaves those annotations out of the OCI spec: GPUs that "
            f"the device plugin requests by annotation (cdi-annotations strategy) are not injected, and {why}",
            'add "cdi.k8s.io/*" to container_annotations',
        )


def _systemd(runtime: Runtime) -> tuple[Optional[bool], Optional[str]]:
    key, setting = runtime.option("SystemdCgroup")
    if key is None:
        return False, None
    return (setting if isinstance(setting, bool) else None), key


@rule("CTD113", "systemd-cgroup-mismatch", Severity.WARNING, KINDS)
def systemd_cgroup_mismatch(value: Any, context: Context) -> Iterator[Problem]:
    """runc runtimes disagree on SystemdCgroup.

    ## What it checks
    That every runc runtime (`runtime_type = "io.containerd.runc.v2"`) of the CRI plugin has the same
    `options.SystemdCgroup` (absent means false) as the default runtime (`default_runtime_name`); in a version 3
    file that does not define `runc`, containerd 2.x's built-in `runc` (SystemdCgroup false) is the default;
    otherwise, when the default runtime is not a runc runtime of the file, the first runc runtime.

    ## Why it matters
    The kubelet has one cgroup driver and sends every pod's cgroup parent in that driver's format. A runtime
    whose runc uses the other driver fails every pod: with `SystemdCgroup = true` and the kubelet on cgroupfs,
    runc says `expected cgroupsPath to be of format "slice:prefix:name" for systemd cgroups, got
    "/kubepods/..." instead`; the other way round, the containers land outside the pod's cgroup and its limits.
    The GPU runtime is usually added later than `runc`, by a tool that writes its own default, so GPU pods
    fail while all others run.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
    ```

    ## Fix
    Set `SystemdCgroup` the same in every runc runtime, to match the kubelet's `cgroupDriver` (`systemd` on
    systemd hosts with cgroup v2).
    """
    config = _config(value, context)
    runc = [runtime for runtime in config.runtimes() if runtime.is_runc]
    containerd = config.cri_containerd() or {}
    default_name = containerd.get("default_runtime_name", DEFAULT_RUNTIME)
    reference = next((r for r in runc if r.name == default_name), None)
    if reference is not None:
        expected, expected_key = _systemd(reference)
        role = f'the default runtime "{reference.name}"'
    elif default_name == DEFAULT_RUNTIME and config.version >= 3 and runc:
        # containerd 2.x keeps its built-in runc entry, with SystemdCgroup = false, next to the file's runtimes.
        expected, expected_key = False, None
        role = 'the default runtime "runc" (built in, SystemdCgroup = false)'
    elif len(runc) >= 2:
        reference = runc[0]
        expected, expected_key = _systemd(reference)
        role = f'runtime "{reference.name}"'
    else:
        return
    if expected is None:
        return
    if reference is not None:
        role += " uses " + _driver(expected, expected_key)
    for runtime in runc:
        if runtime is reference:
            continue
        actual, key = _systemd(runtime)
        if actual is None or actual == expected:
            continue
        yield Problem(
            f"{runtime.pointer}/options/{key}" if key else runtime.pointer,
            f'runtime "{runtime.name}" runs runc with the {_driver(actual, key)} cgroup driver, but {role}: the '
            "kubelet has one cgroup driver, so the pods of one of them fail to start or run outside their pod's cgroup",
            f"set SystemdCgroup = {'true' if expected else 'false'} in [{toml_key((*runtime.path, 'options'))}], "
            "to match the kubelet's cgroupDriver",
        )


def _driver(systemd: bool, key: Optional[str]) -> str:
    if systemd:
        return "systemd (SystemdCgroup = true)"
    return "cgroupfs (SystemdCgroup = false)" if key else "cgroupfs (SystemdCgroup not set)"


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


_GO_DURATION = re.compile(r"[-+]?(?:0|(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)")


def _duration_problems(config: ContainerdConfig) -> Iterator[tuple[str, str, frozenset[str]]]:
    cri = config.cri or {}
    checks: list[tuple[str, Mapping[str, Any], str, str, frozenset[str]]] = []
    if config.version <= 2:
        checks.append((config.cri_pointer, cri, "stream_idle_timeout", "invalid stream idle timeout", config.readers))
    else:
        server = config.plugins.get(CRI_V2)
        if isinstance(server, dict):
            checks.append(
                (
                    pointer_join("/plugins", CRI_V2),
                    server,
                    "stream_idle_timeout",
                    "invalid stream idle timeout",
                    config.readers,
                )
            )
    readers = config.readers - ({"1.6"} if config.version <= 2 else set())
    checks.append(
        (
            config.cri_pointer,
            cri,
            "drain_exec_sync_io_timeout",
            "invalid `drain_exec_sync_io_timeout`",
            frozenset(readers),
        )
    )
    for base, table, key, text, series in checks:
        setting = table.get(key)
        if isinstance(setting, str) and setting and not _GO_DURATION.fullmatch(setting):
            yield (
                f"{base}/{key}",
                f'{key} = "{setting}" is not a Go duration (such as "4h0m0s" or "30s"): the CRI plugin of '
                f'{describe_series(series)} fails to load ("{text}: time: invalid duration ...")',
                series,
            )


def _cri_validation(config: ContainerdConfig) -> Iterator[CriFailure]:
    """Settings other than default_runtime_name that make the CRI plugin's validation fail."""
    readers = config.readers
    cri = config.cri
    if not readers or cri is None:
        return
    containerd = config.cri_containerd() or {}
    runtimes = {runtime.name: runtime for runtime in config.runtimes()}
    default_name = containerd.get("default_runtime_name", DEFAULT_RUNTIME)
    if not isinstance(default_name, str):
        default_name = DEFAULT_RUNTIME  # a wrong type is CTD001's
    default_type = runtimes[default_name].type if default_name in runtimes else "io.containerd.runc.v2"
    old = readers & V1X
    if old:
        for key in ("systemd_cgroup", "no_pivot"):
            table, base = (
                (cri, config.cri_pointer)
                if key == "systemd_cgroup"
                else (containerd, f"{config.cri_pointer}/containerd")
            )
            if table.get(key) is True and default_type != LINUX_V1:
                yield CriFailure(
                    f"{base}/{key}",
                    f"{key} = true only works with the legacy runtime {LINUX_V1}, and the default runtime "
                    f'"{default_name}" is {default_type}: the CRI plugin of {describe_series(old)} fails to load '
                    f'("`{key}` only works for runtime {LINUX_V1}")',
                    _REPLACEMENTS[key],
                    old,
                )
        for runtime in runtimes.values():
            for key in ("runtime_engine", "runtime_root"):
                setting = runtime.table.get(key)
                if isinstance(setting, str) and setting and runtime.type != LINUX_V1:
                    yield CriFailure(
                        f"{runtime.pointer}/{key}",
                        f'runtime "{runtime.name}" sets {key}, which only works with {LINUX_V1}: the CRI plugin of '
                        f'{describe_series(old)} fails to load ("`{key}` only works for runtime {LINUX_V1}")',
                        _REPLACEMENTS[key],
                        old,
                    )
        untrusted = containerd.get("untrusted_workload_runtime")
        if isinstance(untrusted, dict) and untrusted.get("runtime_type") and "untrusted" in runtimes:
            yield CriFailure(
                f"{config.cri_pointer}/containerd/untrusted_workload_runtime",
                "both untrusted_workload_runtime and runtimes.untrusted are defined: the CRI plugin of "
                f'{describe_series(old)} fails to load ("conflicting definitions: configuration includes both '
                '`untrusted_workload_runtime` and `runtimes["untrusted"]`")',
                "delete untrusted_workload_runtime",
                old,
            )
    for runtime in runtimes.values():
        all_allowed = runtime.table.get("privileged_without_host_devices_all_devices_allowed") is True
        if all_allowed and runtime.table.get("privileged_without_host_devices") is not True:
            series = readers - {"1.6"}
            yield CriFailure(
                f"{runtime.pointer}/privileged_without_host_devices_all_devices_allowed",
                f'runtime "{runtime.name}" sets privileged_without_host_devices_all_devices_allowed without '
                f"privileged_without_host_devices = true: the CRI plugin of {describe_series(series)} fails to load "
                '("`privileged_without_host_devices_all_devices_allowed` requires `privileged_without_host_devices` '
                'to be enabled")',
                "set privileged_without_host_devices = true as well, or delete the key",
                frozenset(series),
            )
        io_type = runtime.table.get("io_type")
        if isinstance(io_type, str) and io_type not in ("", "fifo", "streaming") and readers & V2X:
            yield CriFailure(
                f"{runtime.pointer}/io_type",
                f'runtime "{runtime.name}" has io_type = "{io_type}": the CRI plugin of '
                f'{describe_series(readers & V2X)} fails to load ("`io_type` can only be `streaming` or '
                '`named_pipe`")',
                'use io_type = "fifo" (the default) or "streaming"',
                readers & V2X,
            )
    images = config.plugins.get(CRI_IMAGES) if isinstance(config.plugins.get(CRI_IMAGES), dict) else None
    registry = cri.get("registry") if config.version <= 2 else (images or {}).get("registry")
    if isinstance(registry, dict) and registry.get("config_path") and registry.get("mirrors"):
        base = (
            f"{config.cri_pointer}/registry"
            if config.version <= 2
            else pointer_join("/plugins", CRI_IMAGES) + "/registry"
        )
        yield CriFailure(
            f"{base}/mirrors",
            "registry.mirrors is set together with registry.config_path: the CRI plugin of "
            f'{describe_series(readers)} fails to load ("`mirrors` cannot be set when `config_path` is provided")',
            "move the mirrors to hosts.toml files under config_path, and delete registry.mirrors",
            readers,
        )
    for pointer, message, series in _duration_problems(config):
        yield CriFailure(pointer, message, 'use a Go duration such as "4h" or "30s"', series)


def cri_plugin_failures(value: Any) -> frozenset[str]:
    """The containerd series whose CRI plugin fails to load with this config, by CTD110 and CTD115."""
    config = ContainerdConfig(value)
    failing: set[str] = set()
    for failure in (*_default_runtime_failures(config), *_cri_validation(config)):
        failing |= failure.series
    return frozenset(failing)


@rule("CTD115", "cri-plugin-config-invalid", Severity.ERROR, KINDS)
def cri_plugin_config_invalid(value: Any, context: Context) -> Iterator[Problem]:
    """A CRI setting fails the CRI plugin's own validation, so containerd runs without CRI.

    ## What it checks
    The checks the CRI plugin makes when it starts, other than `default_runtime_name` (CTD110):
    `systemd_cgroup = true` or `no_pivot = true` while the default runtime is not the legacy
    `io.containerd.runtime.v1.linux`, and `runtime_engine` or `runtime_root` on any other runtime (containerd
    1.6, 1.7); `privileged_without_host_devices_all_devices_allowed` without `privileged_without_host_devices`
    (1.7 and later); an `io_type` other than `fifo` or `streaming` (2.x); `untrusted_workload_runtime` together
    with `runtimes.untrusted`; `registry.mirrors` together with `registry.config_path`; and
    `stream_idle_timeout` or `drain_exec_sync_io_timeout` values that are not Go durations.

    ## Why it matters
    containerd loads the file (`containerd config dump` succeeds) and starts, but logs `failed to load plugin
    io.containerd.grpc.v1.cri ... invalid plugin config: ...` and serves no CRI: the kubelet gets `unknown
    service runtime.v1.RuntimeService` and the node goes NotReady. `systemd_cgroup = true` is a frequent
    leftover from containerd 1.2-era guides that looks like the cgroup driver setting.

    ## Example
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri"]
      systemd_cgroup = true
    ```

    ## Fix
    Follow the hint: for the cgroup driver, delete `systemd_cgroup` and set `SystemdCgroup = true` in the
    runc runtime's `options`.
    """
    for failure in _cri_validation(_config(value, context)):
        yield Problem(failure.pointer, failure.message, failure.hint)


@rule("CTD116", "runtime-type-missing", Severity.ERROR, KINDS)
def runtime_type_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A runtime entry has no runtime_type.

    ## What it checks
    That every `containerd.runtimes` entry of the CRI plugin sets `runtime_type`. containerd 2.x keeps the
    built-in type of an entry named `runc`, so only other names are reported for a file that only 2.x reads.

    ## Why it matters
    containerd 1.6 and 1.7 replace their built-in runtimes with the file's entries as written, so an entry
    without `runtime_type` has an empty type (even one named `runc`, when the file only meant to set its
    `options`): containerd loads the file, and every pod that uses the runtime fails (`container.Runtime.Name
    must be set: invalid argument`); and since the runc options are decoded by type, `SystemdCgroup` and
    `BinaryName` are not applied to it either.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
    ```
    (`runtime_type` of `runc` is now empty on containerd 1.6 and 1.7.)

    ## Fix
    Add `runtime_type = "io.containerd.runc.v2"` to the entry (or the type of the shim it is meant for).
    """
    config = _config(value, context)
    readers = config.readers
    for runtime in config.runtimes():
        if "runtime_type" in runtime.table:
            continue
        failing = readers & V1X
        if runtime.name != DEFAULT_RUNTIME:
            failing = readers
        if not failing:
            continue
        yield Problem(
            _first_child(runtime.pointer, runtime.table),
            f'runtime "{runtime.name}" has no runtime_type: {_who(failing, "give")} it an empty type, so '
            'every pod that uses it fails to start ("container.Runtime.Name must be set") and its runc options '
            "are not applied",
            f'add runtime_type = "io.containerd.runc.v2" to [{toml_key(runtime.path)}]',
        )
