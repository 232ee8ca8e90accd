"""CDI0xx: what makes the CDI Go library refuse to load a spec (the engine then knows none of its devices).

These are the rules of `--schema-only` for CDI specs: each reports a reason that the container-device-interface
release judging the spec (kinds/cdi/: the newest by default, `--cdi-library`, or the library each engine named
with `--engine` vendors) refuses it, quoting the error text the engine logs. The library stops at the first
reason; these rules report all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Callable

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.cdi import codes
from nvidia_oci_hook.kinds.cdi.codes import CDI
from nvidia_oci_hook.kinds.cdi.decoding import LibraryProblem
from nvidia_oci_hook.kinds.cdi.releases import NEWEST, Judge, joined
from nvidia_oci_hook.kinds.cdi.validation import Analysis, analyse
from nvidia_oci_hook.rules.base import Check, Context, register


def judges(context: Context) -> tuple[Judge, ...]:
    return context.cdi_judges or (Judge(NEWEST),)


def analysis(value: Any, context: Context) -> Analysis:
    """The spec as the semantic rules look at it: as the first judge that loads it reads it, else the first."""
    results = [result for _, result in judged(value, context)]
    return next((result for result in results if result.loads), results[0])


def judged(value: Any, context: Context) -> list[tuple[Judge, Analysis]]:
    return context.cached(  # type: ignore[no-any-return]
        "cdi-analysis", lambda: [(judge, analyse(value, judge.library)) for judge in judges(context)]
    )


def _loader_rule(code: str, name: str) -> Callable[[Check], Check]:
    def wrap(check: Check) -> Check:
        register(code, name, Severity.ERROR, [CDI], schema_level=True, check=check)
        return check

    return wrap


def _problems(value: Any, context: Context, code: str) -> Iterator[Problem]:
    # One finding for what several judges refuse alike, naming them all.
    found: dict[tuple[str, str, str], list[Judge]] = {}
    problems: dict[tuple[str, str, str], LibraryProblem] = {}
    for judge, result in judged(value, context):
        for problem in result.problems:
            if problem.code == code:
                key = (problem.pointer, problem.message, problem.library)
                found.setdefault(key, []).append(judge)
                problems.setdefault(key, problem)
    for key, by in found.items():
        problem = problems[key]
        how = "panics with" if problem.panic else "refuses the spec with"
        if context.cdi_judges:
            engines = [engine for judge in by for engine in judge.engines]
            releases = " and ".join(f"v{judge.library.release}" for judge in by)
            who = f"{joined(engines)} (CDI library {releases})" if engines else f"CDI library {releases}"
            verb = "panic" if problem.panic else "refuse"
            lead = f"{who} {verb}{'' if len(engines) > 1 else 's'} this spec: "
            yield Problem(
                problem.pointer, f"{lead}{problem.message}; the library {how}: {problem.library}", problem.hint
            )
        else:
            message = f"{problem.message}; the CDI library {how}: {problem.library}"
            yield Problem(problem.pointer, message, problem.hint)


register(
    codes.TEXT,
    "spec-text-refused",
    Severity.ERROR,
    [CDI],
    schema_level=True,
    doc="""The CDI library's YAML parser refuses the spec's text.

    ## What it checks
    What goyaml.v2, which the library reads every spec with (`.json` files too), refuses in a text that a JSON
    parser accepts: a key repeated in one object (the library decodes strictly), the JSON escape `\\/` (not a
    YAML escape), a `\\uD800`–`\\uDFFF` escape (half of a UTF-16 surrogate pair), and characters YAML does not
    allow in a stream (DEL, C1 controls, U+FFFE, U+FFFF).

    ## Why it matters
    The engine skips the whole spec and logs `failed to parse CDI Spec "...": failed to unmarshal CDI Spec:
    error converting YAML to JSON: yaml: ...`; every device in it is then unknown and containers that request
    one fail with `unresolvable CDI devices`. JSON tools (jq, python -m json.tool) accept the file, so it
    looks fine.

    ## Example
    `{"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "kind": "nvidia.com/gpu", ...}`: `key "kind"
    already set in map`. A spec written by an encoder that escapes slashes, `"path": "\\/dev\\/nvidia0"`:
    `found unknown escape character`.

    ## Fix
    Delete the repeated key; write `/` unescaped and non-ASCII characters as themselves (UTF-8). Regenerating
    the spec with `nvidia-ctk cdi generate` produces neither.
    """,
)

register(
    codes.JSON_READ_AS_YAML,
    "spec-read-as-yaml",
    Severity.WARNING,
    [CDI],
    doc="""A spec is not what its format says, and the CDI library reads it anyway.

    ## What it checks
    A `.json` spec that is not valid JSON but is valid YAML (a byte-order mark, a `#` comment, a trailing
    comma, single quotes), or a YAML spec that holds more than one document.

    ## Why it matters
    The library parses every spec as YAML and reads only the first document, so the engine loads the spec;
    but `nvidia-ctk cdi list`, jq and other tools that take a `.json` file for JSON fail on it, and the
    documents after the first `---` are silently ignored.

    ## Example
    A `.json` spec saved by an editor with a UTF-8 byte-order mark; a YAML spec with a second document that
    defines more devices.

    ## Fix
    Save the file as plain JSON (no BOM, no comments), or rename it to `.yaml`; merge the YAML documents into
    one spec or split them into one file each.
    """,
)


@_loader_rule(codes.UNKNOWN_FIELD, "unknown-field")
def unknown_field(value: Any, context: Context) -> Iterator[Problem]:
    """A spec holds a field the CDI library does not know.

    ## What it checks
    Every key against the library's types (`specs-go/config.go`): the library decodes with unknown fields
    disallowed, matching keys to fields without regard to case (`HostPath` is `hostPath`). The types differ by
    release: `annotations` came in v0.6, `intelRdt` and `additionalGids` in v0.7, `netDevices`,
    `intelRdt.schemata` and `intelRdt.enableMonitoring` in v1.1, which removed `intelRdt.enableCMT` and
    `intelRdt.enableMBM`; the hint says which release a field needs.

    ## Why it matters
    One unknown key anywhere makes the library refuse the whole spec (`json: unknown field "..."`), so the
    engine knows none of its devices, where a lenient reader would have ignored the key.

    ## Example
    `{"path": "/dev/nvidia0", "hostpath": "/dev/nvidia0", "readOnly": true}`: `readOnly` is not a device-node
    field (`hostpath` is accepted: keys are matched without regard to case).

    ## Fix
    Delete the key or correct its spelling; the hint names the closest field.
    """
    yield from _problems(value, context, codes.UNKNOWN_FIELD)


@_loader_rule(codes.WRONG_TYPE, "wrong-type")
def wrong_type(value: Any, context: Context) -> Iterator[Problem]:
    """A spec's value has a type the CDI library cannot decode.

    ## What it checks
    Every value against its field's Go type as the library decodes it: YAML is first converted to JSON (a number
    or boolean where a string is expected becomes a string; numbers like `1.0` and `1e3` are integers), then
    decoded by encoding/json: integers must fit (`uid`, `gid`, `fileMode` and `additionalGids` are unsigned
    32-bit), objects, arrays and strings must be where the type says. Also a document that is empty or `null`,
    and YAML values JSON cannot hold (`.nan`, `.inf` outside string fields, a `null` mapping key).

    ## Why it matters
    The library refuses the whole spec with `json: cannot unmarshal ... into Go struct field ... of type ...`.

    ## Example
    `{"path": "/dev/nvidia0", "major": "195"}`: `cannot unmarshal string into Go struct field
    DeviceNode.devices.containerEdits.deviceNodes.major of type int64`.

    ## Fix
    Write the value with the type the message names (numbers unquoted, lists as arrays).
    """
    yield from _problems(value, context, codes.WRONG_TYPE)


@_loader_rule(codes.UNKNOWN_VERSION, "unknown-cdi-version")
def unknown_cdi_version(value: Any, context: Context) -> Iterator[Problem]:
    """cdiVersion is not a spec version the CDI library knows.

    ## What it checks
    `cdiVersion` against the versions the judging library release knows: each release knows the versions up
    to its own (`0.1.0` to `0.8.0`, then `1.0.0`, `1.1.0`), optionally written with a leading `v` from v0.5.4
    on. Anything else, an empty or missing version, or `0.5`, is refused; the message says which newer release
    knows a version its release does not.

    ## Why it matters
    The library refuses the spec with `invalid CDI Spec: invalid version "..."`; none of its devices can be
    injected.

    ## Example
    `"cdiVersion": "0.5"` or `"cdiVersion": "1.1.0"`.

    ## Fix
    Set `cdiVersion` to the version the hint names: the lowest version that has every field the spec uses,
    which is what `nvidia-ctk cdi generate` writes and what the most engines accept.
    """
    yield from _problems(value, context, codes.UNKNOWN_VERSION)


@_loader_rule(codes.VERSION_TOO_OLD, "cdi-version-too-old")
def cdi_version_too_old(value: Any, context: Context) -> Iterator[Problem]:
    """cdiVersion is older than the fields the spec uses.

    ## What it checks
    The library's minimum version for the spec's content: `0.3.0` at least; `0.4.0` for a mount `type`;
    `0.5.0` for a device node `hostPath` or a device name starting with a digit; `0.6.0` for annotations
    (spec or device) or a `.` in the class; `0.7.0` for `intelRdt` or `additionalGids`.

    ## Why it matters
    The library refuses the spec with `invalid CDI Spec: the spec version must be at least v0.5.0`. A spec
    edited by hand (a `hostPath` added to an old spec, devices renamed to `0`, `1`) stops loading.

    ## Example
    `"cdiVersion": "0.4.0"` with a device named `0`, or with `"hostPath": "/run/nvidia/driver/dev/nvidia0"`.

    ## Fix
    Raise `cdiVersion` to the version the message names.
    """
    yield from _problems(value, context, codes.VERSION_TOO_OLD)


@_loader_rule(codes.BAD_KIND, "invalid-kind")
def invalid_kind(value: Any, context: Context) -> Iterator[Problem]:
    """The spec's kind is not a valid vendor/class.

    ## What it checks
    `kind` as the library parses it: `vendor/class`, both parts starting with a letter, ending with a letter
    or digit, holding only letters, digits, `_`, `-` and `.`. A one-character vendor or class makes the
    library panic: it slices `name[1:len(name)-1]`, out of range for one character.

    ## Why it matters
    The library refuses the spec (`invalid CDI Spec: invalid vendor. ...` or `invalid class. ...`), or
    panics with `slice bounds out of range [1:0]`, which takes down an engine that does not recover it, on
    every rescan of the spec directories.

    ## Example
    `"kind": "nvidia.com"` (no class), `"kind": "nvidia.com/gpu-"`, `"kind": "x/gpu"` (panic).

    ## Fix
    Use the vendor's domain and a class: `nvidia.com/gpu` for GPUs and MIG devices.
    """
    yield from _problems(value, context, codes.BAD_KIND)


@_loader_rule(codes.BAD_DEVICE_NAME, "invalid-device-name")
def invalid_device_name(value: Any, context: Context) -> Iterator[Problem]:
    """A device's name is not a valid CDI device name.

    ## What it checks
    Each `devices[].name`: not empty, starting and ending with a letter or digit, holding only letters,
    digits, `_`, `-`, `.` and `:`.

    ## Why it matters
    The library refuses the whole spec (`invalid CDI Spec: failed add device "...": ...`), so one badly
    named device makes every device of the spec unknown.

    ## Example
    `"name": "gpu 0"` or `"name": "GPU-0/1"` (a MIG device written with a slash).

    ## Fix
    Rename the device: nvidia-ctk uses the index (`0`), the UUID (`GPU-8f3...`), `0:1` for MIG devices and
    `all`.
    """
    yield from _problems(value, context, codes.BAD_DEVICE_NAME)


@_loader_rule(codes.DUPLICATE_DEVICE, "duplicate-device-name")
def duplicate_device_name(value: Any, context: Context) -> Iterator[Problem]:
    """Two devices in one spec have the same name.

    ## What it checks
    That no two `devices[]` entries of a spec share a name (compared exactly, as written).

    ## Why it matters
    The library refuses the whole spec with `invalid CDI Spec: invalid spec, multiple device "..."`. Specs
    merged by hand, or generated for both index and UUID naming into one file, hit this.

    ## Example
    Two devices named `0`, one from an earlier generation of the spec.

    ## Fix
    Delete one of them, or regenerate the spec (`nvidia-ctk cdi generate --device-name-strategy=...`).
    """
    yield from _problems(value, context, codes.DUPLICATE_DEVICE)


@_loader_rule(codes.NO_DEVICES, "no-devices")
def no_devices(value: Any, context: Context) -> Iterator[Problem]:
    """The spec defines no devices.

    ## What it checks
    That `devices` is present and not empty.

    ## Why it matters
    Library v1.0 and later refuse such a spec with `invalid CDI Spec: invalid spec, no devices`; it is
    usually a spec generated on a node where no GPU was visible (driver not loaded yet).

    ## Example
    `{"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [], "containerEdits": {...}}`.

    ## Fix
    Regenerate the spec once the driver is loaded and `nvidia-smi -L` lists the GPUs, or delete it.
    """
    yield from _problems(value, context, codes.NO_DEVICES)


@_loader_rule(codes.EMPTY_EDITS, "empty-device-edits")
def empty_device_edits(value: Any, context: Context) -> Iterator[Problem]:
    """A device has no container edits.

    ## What it checks
    That each device's `containerEdits` has at least one of `env`, `deviceNodes`, `hooks`, `mounts`,
    `intelRdt` or `additionalGids` (the spec-level edits do not count).

    ## Why it matters
    The library refuses the whole spec with `invalid CDI Spec: failed add device "...": invalid device,
    empty device edits`.

    ## Example
    `{"name": "all", "containerEdits": {}}` in a spec whose nodes are all in the spec-level edits.

    ## Fix
    Give the device the nodes it stands for (for `all`, every GPU node), or remove the device.
    """
    yield from _problems(value, context, codes.EMPTY_EDITS)


@_loader_rule(codes.BAD_ENV, "invalid-env")
def invalid_env(value: Any, context: Context) -> Iterator[Problem]:
    """An env entry of container edits or of a hook is not NAME=VALUE.

    ## What it checks
    Every `env` entry (of container edits and of hooks) has an `=` after a non-empty name.

    ## Why it matters
    The library refuses the whole spec with `invalid environment variable "..."`.

    ## Example
    `"env": ["NVIDIA_VISIBLE_DEVICES"]` or `"env": ["=void"]`.

    ## Fix
    Write `NAME=VALUE` (`NAME=` for an empty value).
    """
    yield from _problems(value, context, codes.BAD_ENV)


@_loader_rule(codes.BAD_DEVICE_NODE, "invalid-device-node")
def invalid_device_node(value: Any, context: Context) -> Iterator[Problem]:
    """A device node has an empty path, an unknown type or invalid permissions.

    ## What it checks
    Each `deviceNodes` entry: `path` not empty; `type` one of `""` (taken from the host node), `c`, `b`,
    `u`, `p`; `permissions` made of `r`, `w` and `m` only.

    ## Why it matters
    The library refuses the whole spec: `invalid (empty) device path`, `device "...": invalid type "..."` or
    `device "...": invalid permissions "..."`.

    ## Example
    `{"path": "/dev/nvidia0", "type": "char"}`, `{"path": "/dev/nvidia0", "permissions": "rw-"}`.

    ## Fix
    Use `c` for character devices (or leave `type` out), and a subset of `rwm` for permissions.
    """
    yield from _problems(value, context, codes.BAD_DEVICE_NODE)


@_loader_rule(codes.BAD_HOOK, "invalid-hook")
def invalid_hook(value: Any, context: Context) -> Iterator[Problem]:
    """A hook has an unknown hookName or an empty path.

    ## What it checks
    Each `hooks` entry: `hookName` one of `prestart`, `createRuntime`, `createContainer`, `startContainer`,
    `poststart`, `poststop` (exact case); `path` not empty.

    ## Why it matters
    The library refuses the whole spec: `invalid hook name "..."` or `invalid hook "..." with empty path`.

    ## Example
    `{"hookName": "create-container", "path": "/usr/bin/nvidia-cdi-hook"}`.

    ## Fix
    Use the OCI stage name; nvidia-ctk writes `createContainer` for `nvidia-cdi-hook`.
    """
    yield from _problems(value, context, codes.BAD_HOOK)


@_loader_rule(codes.BAD_MOUNT, "invalid-mount")
def invalid_mount(value: Any, context: Context) -> Iterator[Problem]:
    """A mount has an empty hostPath or containerPath.

    ## What it checks
    Each `mounts` entry has a non-empty `hostPath` and `containerPath`.

    ## Why it matters
    The library refuses the whole spec: `invalid mount, empty host path` or `invalid mount, empty container
    path`. A generator that found no file for a library it meant to mount writes such entries.

    ## Example
    `{"hostPath": "", "containerPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}`.

    ## Fix
    Remove the entry, or regenerate the spec on a node where the file exists.
    """
    yield from _problems(value, context, codes.BAD_MOUNT)


@_loader_rule(codes.BAD_INTEL_RDT, "invalid-intel-rdt")
def invalid_intel_rdt(value: Any, context: Context) -> Iterator[Problem]:
    """intelRdt.closID is not a valid resctrl group name.

    ## What it checks
    `intelRdt.closID` holds no `/` or newline, is not `.` or `..`, and is shorter than 4096 bytes (library
    v1.1.0 also takes `/`, the root group; v1.0.1 does not).

    ## Why it matters
    The library refuses the whole spec with `invalid ClosID`.

    ## Example
    `"intelRdt": {"closID": "gpu/jobs"}`.

    ## Fix
    Use a plain group name, as it appears under `/sys/fs/resctrl`.
    """
    yield from _problems(value, context, codes.BAD_INTEL_RDT)


@_loader_rule(codes.BAD_NET_DEVICE, "invalid-net-device")
def invalid_net_device(value: Any, context: Context) -> Iterator[Problem]:
    """A netDevices entry without both names, or a name given twice.

    ## What it checks
    Library v1.1.0's checks of `containerEdits.netDevices` (the network interfaces a device moves into the
    container), in each edits block: every entry has a `hostInterfaceName` and a `name`, and neither repeats
    within the block. Releases before v1.1.0 do not know the field at all (CDI002).

    ## Why it matters
    The library refuses the whole spec with `invalid linux net device, empty Name` or `duplicate
    HostInterfaceName "eth1" with names "net1" and "net0"`.

    ## Example
    `"netDevices": [{"hostInterfaceName": "eth1", "name": ""}]`.

    ## Fix
    Name both ends of each interface, and move each host interface into the container once.
    """
    yield from _problems(value, context, codes.BAD_NET_DEVICE)


@_loader_rule(codes.NULL_ENTRY, "null-edit-entry")
def null_edit_entry(value: Any, context: Context) -> Iterator[Problem]:
    """A deviceNodes, hooks or mounts list holds a null entry, on which the CDI library panics.

    ## What it checks
    `null` (or an empty YAML list item) in `deviceNodes`, `hooks` or `mounts`, which the library decodes as a
    nil pointer.

    ## Why it matters
    The library dereferences it while validating the spec and panics with `invalid memory address or nil
    pointer dereference`. An engine that does not recover the panic crashes whenever it (re)reads the spec
    directories; one that does still refuses the spec.

    ## Example
    `"deviceNodes": [{"path": "/dev/nvidia0"}, null]`, or in YAML a `-` with nothing after it.

    ## Fix
    Remove the null entry.
    """
    yield from _problems(value, context, codes.NULL_ENTRY)
