"""NVIDIA_REQUIRE_* as NVIDIA's tools read and check them: which requirements a container carries, and whether a node
meets them, by the rules of each of NVIDIA's two checkers (they differ), with a third value for what the node cannot
tell.

Read at nvidia-container-toolkit v1.20.0-27-gd34b3046 (d34b3046758cb1a5db606b2a39519c731bbf9f56, 2026-08-21):
internal/config/image/cuda_image.go (GetRequirements, HasDisableRequire, IsLegacy, legacyVersion), builder.go,
internal/requirements/requirements.go and constraints/{factory,binary,logical,property}.go, the vendored
github.com/Masterminds/semver/v3 v3.5.0, internal/modifier/{csv,mode,factory}.go,
cmd/nvidia-container-runtime-hook/{main,container_config}.go; and at libnvidia-container src/cli/dsl.c
(5823754b8577d16fabf25a6ef6a1d58f7ff1e5dd), src/cli/configure.c, src/cli/cli.h, src/utils.c.

Who checks (and who does not):
- The legacy hook (nvidia-container-runtime-hook, also what the runtime's "legacy" mode injects) passes each
  requirement to nvidia-container-cli as --require=EXPR; the cli evaluates them (dsl.c) for each visible GPU (a MIG
  device through its parent), or once without a device, and refuses the first one that fails with
  `nvidia-container-cli: requirement error: MESSAGE`. Checker `CLI` here.
- nvidia-container-runtime in csv mode (Tegra) asserts them itself (internal/requirements, from the csv modifier),
  with only cuda and arch set; driver and brand keep their empty defaults there, so a driver term is an error and a
  brand term never holds. Checker `TOOLKIT`. Pass driver="" and brand="" to model that mode exactly.
- The runtime in cdi and jit-cdi mode (the toolkit's default since v1.18) and plain CDI injection check nothing.

What both read (GetRequirements):
- NVIDIA_DISABLE_REQUIRE, when set to a value Go's strconv.ParseBool takes as true (1 t T TRUE true True), turns
  every check off; any other value (0, false, yes, on, " true", "") leaves them on. The hook's config.toml
  `disable-require = true` does the same (hook only).
- Every variable named NVIDIA_REQUIRE_* except NVIDIA_REQUIRE_JETPACK* is one requirement, its value the
  expression; the requirements are ANDed. NVIDIA's order is a Go map's (random): with several failing, which one is
  reported varies from run to run. Here they are in variable-name order.
- Legacy images (CUDA_VERSION non-empty, NVIDIA_REQUIRE_CUDA unset or empty) get one more: `cuda>=MAJOR.MINOR`
  from CUDA_VERSION read as a semantic version (so "12.4.1" gives cuda>=12.4, "12" cuda>=12.0); a CUDA_VERSION that
  does not parse stops the hook (`failed to get requirements failed to get version: invalid CUDA version V: ...`)
  and the csv modifier alike, before any check.

The expression, in both: terms separated by single spaces are ORed, factors separated by commas inside a term are
ANDed, empty terms and factors (doubled separators) are skipped; a tab is no separator. A factor is
PROPERTY OPERATOR VALUE, the property ending at the first of `< > = !`. Beyond that they differ:

nvidia-container-cli (dsl.c):
- Operators: the whole run of `<>=!` characters after the property must be one of = != < <= > >=, or a lone `!`
  (read as !=); "==", "=>", "=<" and the like are invalid. An empty value is invalid.
- The walk over a requirement stops at the first term that holds, and a term at its first factor that fails. A term
  of nothing but commas ends it with the answer so far: ", cuda>=99" holds, "cuda>=99 , cuda>=1" does not.
- The device properties (arch, brand) are those of each visible GPU in turn (a MIG device's parent's): every one
  must meet every requirement.
- Properties cuda, driver, arch, brand, in any letter case; any other name is invalid, like a factor with no
  operator. An invalid factor makes the whole requirement fail with `invalid expression`, but only when the walk
  reaches it ("cuda>=1 foo" holds).
- Versions (cuda, driver, arch): only digits and dots, else invalid; compared number by number (runs of dots
  count as one), the shorter padded with zeros ("12.4" = "12.4.0", "12" < "12.4", "535.104.05" = "535.104.5");
  a value starting with a dot, or a number of 2^64-1 or more, is invalid.
- brand: = and != only (else invalid), ASCII letter case ignored ("tesla" meets the driver's "Tesla").
- An unsatisfied requirement prints `unsatisfied condition: FIRST`, FIRST the expression up to its first space
  (the first term, whichever term failed), followed by `, please update your driver to a newer version, or use an
  earlier cuda container` when FIRST starts with `cuda>=`.
- More than 32 requirements: `input error: too many requirements`, before any check.

nvidia-container-runtime, csv mode (internal/requirements):
- Operators tried in the order != <= >= = < > on the text after the property, the rest being the value: "==1"
  is = with the value "=1"; a lone `!` leaves no operator, an error ("invalid operator ") when evaluated for brand.
- Properties cuda, driver, arch, brand, in that case only; any other name ("CUDA", a tab then "cuda") is skipped;
  a factor without an operator character is an error (`invalid constraint: FACTOR`), whatever its name.
- Versions are semantic versions read leniently (Masterminds semver NewVersion): optional "v", one to three numbers
  (missing ones are 0, leading zeros allowed), optional -prerelease and +metadata, at most 256 bytes; four numbers,
  letters, an empty value are errors (`invalid version string: invalid semantic version`). Prereleases sort before
  the release. Every value is checked before any comparison, so one bad value anywhere fails the requirement.
- brand compares as a Go string, case and all ("tesla" does not meet "Tesla"); < and > compare lexically.
- An unsatisfied factor says `unsatisfied condition: cuda>=12.8 (cuda=12.4)`; a requirement of several terms
  `T1||T2 not met`, a term of several factors written `F1&&F2`.

Three values: a property the node cannot tell (None) makes a factor unknown. A term is then unknown unless another
of its factors fails, terms OR (true if any is true, else unknown if any is), requirements AND likewise; an error
that is reached whatever the unknown value is stays an error. The result is `satisfied=None` with the unknown
properties named. Factors on the same property are taken as independent: "brand=a,brand=b" is unknown, not false.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Optional

CLI = "nvidia-container-cli"
TOOLKIT = "nvidia-container-toolkit"
CHECKERS = (CLI, TOOLKIT)

REQUIRE_PREFIX = "NVIDIA_REQUIRE_"
REQUIRE_JETPACK = "NVIDIA_REQUIRE_JETPACK"
REQUIRE_CUDA = "NVIDIA_REQUIRE_CUDA"
DISABLE_REQUIRE = "NVIDIA_DISABLE_REQUIRE"
CUDA_VERSION = "CUDA_VERSION"

PROPERTIES = ("cuda", "driver", "arch", "brand")
CLI_MAX_REQUIREMENTS = 32  # the size of ctx->reqs in src/cli/cli.h
CLI_CUDA_HINT = ", please update your driver to a newer version, or use an earlier cuda container"
CLI_PROGRAM = "nvidia-container-cli"

_TRUE_WORDS = frozenset({"1", "t", "T", "TRUE", "true", "True"})  # strconv.ParseBool
# unicode.IsSpace, which strings.TrimSpace uses; str.strip() would also take \x1c-\x1f.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
_DIGITS = frozenset("0123456789")
_SEMVER_ID = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")
_CLI_VERSION_CHARS = frozenset("0123456789.")
_OPERATOR_CHARS = "<>=!"
_UINT64_MAX = 2**64 - 1
_UINT32_MAX = 2**32 - 1
_SEMVER_MAX_LEN = 256
UNKNOWN_VALUE = "<unknown>"  # stands for the node's value in messages of factors whose property is unknown

# Outcome kinds of one requirement.
_SAT = "satisfied"
_UNSAT = "unsatisfied"
_ERROR = "error"


class _Record:
    """Immutable, compared and hashed by value, like a frozen dataclass, which costs about half a millisecond to
    define (a NamedTuple about a quarter): the module is to import in under two."""

    # Subclasses list __slots__ in field order, the order of their repr (hence the RUF023 exemptions).
    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def _set(self, **values: object) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Record) and type(other) is type(self) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"


class NodeProperties(_Record):
    """What a checker compares requirements to. None: the node cannot tell (brand, arch without NVML, say).

    cuda: the driver's CUDA version ("12.4"); driver: "550.54.15"; arch: the compute capability ("8.0"); brand: as
    the checker names it (libnvidia-container says "Tesla", "GeForce", "Quadro", "NVS", "GRID", "TITAN", "Unknown").
    """

    __slots__ = ("cuda", "driver", "arch", "brand")  # noqa: RUF023
    cuda: Optional[str]
    driver: Optional[str]
    arch: Optional[str]
    brand: Optional[str]

    def __init__(
        self,
        cuda: Optional[str] = None,
        driver: Optional[str] = None,
        arch: Optional[str] = None,
        brand: Optional[str] = None,
    ) -> None:
        self._set(cuda=cuda, driver=driver, arch=arch, brand=brand)

    def get(self, name: str) -> Optional[str]:
        value: Optional[str] = getattr(self, name)
        return value


class Requirement(_Record):
    """One requirement: variable NVIDIA_REQUIRE_*, or CUDA_VERSION for the legacy rule's cuda>=MAJOR.MINOR; error:
    GetRequirements' own failure (an unreadable CUDA_VERSION), where nothing gets checked."""

    __slots__ = ("variable", "text", "error")  # noqa: RUF023
    variable: str
    text: str
    error: Optional[str]

    def __init__(self, variable: str, text: str, error: Optional[str] = None) -> None:
        self._set(variable=variable, text=text, error=error)


class RequirementError(_Record):
    """A requirement that fails as malformed; message in the checker's words ("invalid expression", ...)."""

    __slots__ = ("variable", "text", "message")  # noqa: RUF023
    variable: str
    text: str
    message: str

    def __init__(self, variable: str, text: str, message: str) -> None:
        self._set(variable=variable, text=text, message=message)


class Verdict(_Record):
    """satisfied: None where a property it needs is unknown (`unknown` names them).
    errors: the requirements that fail as malformed, whatever the unknowns are.
    unsatisfied: the first requirement (in variable order) that fails as unsatisfied; failed_factors: in it, each
    term's failing factor (with unknowns, every factor that may fail).
    message: the checker's error text for the first failing requirement in variable order; messages: every text it
    can report, NVIDIA's order of requirements being random."""

    __slots__ = ("checker", "satisfied", "errors", "unsatisfied", "failed_factors", "unknown", "message", "messages")  # noqa: RUF023
    checker: str
    satisfied: Optional[bool]
    errors: tuple[RequirementError, ...]
    unsatisfied: Optional[Requirement]
    failed_factors: tuple[str, ...]
    unknown: frozenset[str]
    message: Optional[str]
    messages: frozenset[str]

    def __init__(
        self,
        checker: str,
        satisfied: Optional[bool],
        errors: tuple[RequirementError, ...] = (),
        unsatisfied: Optional[Requirement] = None,
        failed_factors: tuple[str, ...] = (),
        unknown: frozenset[str] = frozenset(),
        message: Optional[str] = None,
        messages: frozenset[str] = frozenset(),
    ) -> None:
        self._set(
            checker=checker,
            satisfied=satisfied,
            errors=errors,
            unsatisfied=unsatisfied,
            failed_factors=failed_factors,
            unknown=unknown,
            message=message,
            messages=messages,
        )


def parse_go_bool(value: str) -> bool:
    return value in _TRUE_WORDS


def requirements_from_env(env: Mapping[str, str], disable_require: bool = False) -> list[Requirement]:
    """The requirements NVIDIA's GetRequirements finds; [] when disabled. disable_require: the hook's config.toml
    `disable-require`."""
    if disable_require or parse_go_bool(env.get(DISABLE_REQUIRE, "false")):
        return []
    found = [
        Requirement(name, env[name])
        for name in sorted(env)
        if name.startswith(REQUIRE_PREFIX) and not name.startswith(REQUIRE_JETPACK)
    ]
    cuda_version = env.get(CUDA_VERSION, "")
    if cuda_version and not env.get(REQUIRE_CUDA, ""):
        found.append(_legacy_requirement(cuda_version))
    return found


def _legacy_requirement(cuda_version: str) -> Requirement:
    prefix = f"failed to get version: invalid CUDA version {cuda_version}: "
    try:
        major, minor, _patch, _pre = _semver(cuda_version)
    except _SemverError as error:
        return Requirement(CUDA_VERSION, "", prefix + f"invalid version string: {error}")
    # legacyVersion re-parses both as 32-bit numbers.
    if major > _UINT32_MAX:
        return Requirement(CUDA_VERSION, "", prefix + "invalid major version")
    if minor > _UINT32_MAX:
        return Requirement(CUDA_VERSION, "", prefix + "invalid minor version")
    return Requirement(CUDA_VERSION, f"cuda>={major}.{minor}")


# --- Masterminds semver v3, NewVersion with CoerceNewVersion (its default) -----------------------------------------


class _SemverError(Exception):
    pass


_Semver = tuple[int, int, int, str]


def _parse_uint64(digits: str) -> int:
    value = int(digits)
    if value > _UINT64_MAX:
        raise _SemverError(f'error parsing version segment: strconv.ParseUint: parsing "{digits}": value out of range')
    return value


def _identifiers_ok(text: str) -> bool:
    return all(part and set(part) <= _SEMVER_ID for part in text.split("."))


def _semver(text: str) -> _Semver:
    if len(text.encode("utf-8", "surrogateescape")) > _SEMVER_MAX_LEN:
        raise _SemverError(f"version string is too long (max {_SEMVER_MAX_LEN} bytes)")
    position = 1 if text.startswith("v") else 0
    numbers: list[str] = []
    while len(numbers) < 3:
        start = position + (1 if numbers else 0)
        if numbers and text[position : position + 1] != ".":
            break
        end = start
        while end < len(text) and text[end] in _DIGITS:
            end += 1
        if end == start:
            if not numbers:
                raise _SemverError("invalid semantic version")
            break  # a dot without digits: no match for this group, and nothing else may start with a dot
        numbers.append(text[start:end])
        position = end
    rest = text[position:]
    pre = metadata = ""
    if rest.startswith("-"):
        pre, _, after = rest[1:].partition("+")
        metadata = after if "+" in rest[1:] else ""
        if not _identifiers_ok(pre) or ("+" in rest[1:] and not _identifiers_ok(metadata)):
            raise _SemverError("invalid semantic version")
    elif rest.startswith("+"):
        metadata = rest[1:]
        if not _identifiers_ok(metadata):
            raise _SemverError("invalid semantic version")
    elif rest:
        raise _SemverError("invalid semantic version")
    values = [_parse_uint64(number) for number in numbers] + [0] * (3 - len(numbers))
    for part in pre.split(".") if pre else ():
        if set(part) <= _DIGITS and len(part) > 1 and part[0] == "0":
            raise _SemverError("version segment starts with 0")
    return values[0], values[1], values[2], pre


def _compare_pre_part(s: str, o: str) -> int:
    if s == o:
        return 0
    if s == "":
        return -1
    if o == "":
        return 1
    s_numeric = bool(s) and set(s) <= _DIGITS and int(s) <= _UINT64_MAX
    o_numeric = bool(o) and set(o) <= _DIGITS and int(o) <= _UINT64_MAX
    if not s_numeric and not o_numeric:
        return 1 if s > o else -1
    if not o_numeric:
        return -1
    if not s_numeric:
        return 1
    return 1 if int(s) > int(o) else -1


def _compare_semver(a: _Semver, b: _Semver) -> int:
    for x, y in zip(a[:3], b[:3]):
        if x != y:
            return -1 if x < y else 1
    pre_a, pre_b = a[3], b[3]
    if pre_a == pre_b == "":
        return 0
    if pre_a == "":
        return 1
    if pre_b == "":
        return -1
    parts_a, parts_b = pre_a.split("."), pre_b.split(".")
    for i in range(max(len(parts_a), len(parts_b))):
        d = _compare_pre_part(parts_a[i] if i < len(parts_a) else "", parts_b[i] if i < len(parts_b) else "")
        if d:
            return d
    return 0


# --- libnvidia-container's dsl.c ------------------------------------------------------------------------------------

_CLI_OPERATORS = {"=": "=", "!": "!=", "<": "<", ">": ">", "!=": "!=", "<=": "<=", ">=": ">="}


def _ascii_lower(text: str) -> str:
    # strcasecmp in the C locale folds ASCII letters only.
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def _strtoumax(text: str, start: int) -> tuple[Optional[int], int]:
    end = start
    while end < len(text) and text[end] in _DIGITS:
        end += 1
    if end == start:
        return None, start
    return min(int(text[start:end]), _UINT64_MAX), end


def _skip(text: str, position: int, chars: str) -> int:
    while position < len(text) and text[position] in chars:
        position += 1
    return position


def _cli_compare_version(node: str, operator: str, wanted: str) -> Optional[bool]:
    """dsl_compare_version: None where it returns -1 (an invalid expression)."""
    if not set(node) <= _CLI_VERSION_CHARS or not set(wanted) <= _CLI_VERSION_CHARS:
        return None
    i = j = 0
    while i < len(node) and j < len(wanted):
        n1, end1 = _strtoumax(node, i)
        if n1 is None or n1 == _UINT64_MAX:
            return None
        n2, end2 = _strtoumax(wanted, j)
        if n2 is None or n2 == _UINT64_MAX:
            return None
        if n1 != n2:
            if operator in ("=", "!="):
                return operator == "!="
            return n1 < n2 if operator in ("<", "<=") else n1 > n2
        i, j = _skip(node, end1, "."), _skip(wanted, end2, ".")
    # What is left of the longer one counts only if it holds a non-zero digit.
    left_over1 = _skip(node, i, ".0") < len(node)
    left_over2 = _skip(wanted, j, ".0") < len(wanted)
    if operator == "!=":
        return left_over1 or left_over2
    if operator in ("=", "<=", ">=") and not left_over1 and not left_over2:
        return True
    if operator == "=":
        return False
    if operator in ("<", "<="):
        return not left_over1 and left_over2
    return left_over1 and not left_over2


# A factor's possible results: (value, unknown property or ""), value True, False or _ERROR.
_FactorResults = tuple[tuple[object, str], ...]


def _cli_factor(factor: str, node: NodeProperties) -> _FactorResults:
    end = 0
    while end < len(factor) and factor[end] not in _OPERATOR_CHARS:
        end += 1
    run = _skip(factor, end, _OPERATOR_CHARS)
    operator = _CLI_OPERATORS.get(factor[end:run])
    value = factor[run:]
    name = _ascii_lower(factor[:end])
    if end == 0 or operator is None or not value or name not in PROPERTIES:
        return ((_ERROR, ""),)
    have = node.get(name)
    if name == "brand":
        if operator not in ("=", "!="):
            return ((_ERROR, ""),)
        if have is None:
            return ((True, name), (False, name))
        return (((_ascii_lower(have) == _ascii_lower(value)) == (operator == "="), ""),)
    if have is None:
        # Invalid whatever the node's (non-empty, well-formed) version is.
        if not set(value) <= _CLI_VERSION_CHARS or value.startswith("."):
            return ((_ERROR, ""),)
        return ((True, name), (False, name))
    result = _cli_compare_version(have, operator, value)
    return (((_ERROR if result is None else result), ""),)


class _Outcomes:
    """The possible outcomes of one requirement, each kind with its messages, failing factors, unknowns."""

    __slots__ = ("failed", "messages", "unknown")

    def __init__(self) -> None:
        self.messages: dict[str, set[str]] = {}
        self.failed: list[str] = []
        self.unknown: set[str] = set()

    def add(self, kind: str, message: str, failed: Iterable[str] = (), unknown: Iterable[str] = ()) -> None:
        self.messages.setdefault(kind, set()).add(message)
        for factor in failed:
            if factor not in self.failed:
                self.failed.append(factor)
        self.unknown.update(unknown)


def _cli_unsatisfied_message(predicate: str) -> str:
    first = predicate.split(" ", 1)[0]
    return f"unsatisfied condition: {first}" + (CLI_CUDA_HINT if first.startswith("cuda>=") else "")


def _cli_requirement(predicate: str, node: NodeProperties) -> _Outcomes:
    # dsl_evaluate walks the terms until one holds and each term until a factor fails; an invalid factor it
    # reaches ends it all. Between terms the only state is "ret" (false after a failed term), so paths merge.
    outcomes = _Outcomes()
    unsatisfied = _cli_unsatisfied_message(predicate)
    incoming: dict[bool, tuple[list[str], set[str]]] = {True: ([], set())}
    for term in predicate.split(" "):
        if term == "":
            continue
        following: dict[bool, tuple[list[str], set[str]]] = {}
        # The failing factors so far, each once, in order: a dict, so that adding one costs the same however many
        # terms came before (NVIDIA's images carry requirements of dozens of terms).
        failing: dict[str, None] = {}
        for ret, (failed, unknown) in incoming.items():
            merged = False
            live: dict[bool, set[str]] = {ret: set(unknown)}
            for factor in term.split(","):
                if factor == "" or not live:
                    continue
                after: dict[bool, set[str]] = {}
                for path_unknown in live.values():
                    for value, prop in _cli_factor(factor, node):
                        reached = path_unknown | {prop} if prop else path_unknown
                        if value is _ERROR:
                            outcomes.add(_ERROR, "invalid expression", unknown=reached)
                        elif value:
                            after.setdefault(True, set()).update(reached)
                        else:
                            entry = following.setdefault(False, ([], set()))
                            if not merged:
                                failing.update(dict.fromkeys(failed))
                                merged = True
                            failing[factor] = None
                            entry[1].update(reached)
                live = after
            # A term whose factors all held (or that had none) ends the walk with ret as it stands.
            for value, path_unknown in live.items():
                if value:
                    outcomes.add(_SAT, "", unknown=path_unknown)
                else:
                    outcomes.add(_UNSAT, unsatisfied, failed, path_unknown)
        if False in following:
            following[False] = (list(failing), following[False][1])
        incoming = following
    for ret, (failed, unknown) in incoming.items():
        if ret:
            outcomes.add(_SAT, "", unknown=unknown)
        else:
            outcomes.add(_UNSAT, unsatisfied, failed, unknown)
    return outcomes


# --- nvidia-container-toolkit's internal/requirements ---------------------------------------------------------------

_TOOLKIT_OPERATORS = ("!=", "<=", ">=", "=", "<", ">")


class _Binary:
    __slots__ = ("name", "operator", "value")

    def __init__(self, name: str, operator: str, value: str) -> None:
        self.name, self.operator, self.value = name, operator, value

    def __str__(self) -> str:
        return f"{self.name}{self.operator}{self.value}"


def _toolkit_parse(requirement: str) -> list[list[_Binary]]:
    """constraints.New for one requirement: its terms, each a list of factors; raises ValueError with NVIDIA's
    text on the first malformed factor."""
    terms: list[list[_Binary]] = []
    if requirement.strip(_GO_SPACE) == "":
        return terms
    for term in requirement.split(" "):
        factors: list[_Binary] = []
        for factor in term.split(","):
            if factor.strip(_GO_SPACE) == "":
                continue
            end = next((i for i, c in enumerate(factor) if c in _OPERATOR_CHARS), -1)
            if end == -1:
                raise ValueError(f"invalid constraint: {factor}")
            name, rest = factor[:end], factor[end:]
            if name not in PROPERTIES:
                continue
            operator = next((o for o in _TOOLKIT_OPERATORS if rest.startswith(o)), "")
            value = rest[len(operator) :]
            if name != "brand":
                try:
                    _semver(value)
                except _SemverError as error:
                    raise ValueError(f"invalid version string: {error}") from None
            factors.append(_Binary(name, operator, value))
        if factors:
            terms.append(factors)
    return terms


# A factor's or term's possible results: (value, message, failed factor or "", unknown property or "").
_Results = list[tuple[object, str, str, str]]


def _toolkit_factor(factor: _Binary, node: NodeProperties) -> _Results:
    have = node.get(factor.name)
    shown = UNKNOWN_VALUE if have is None else have
    unsatisfied = f"unsatisfied condition: {factor} ({factor.name}={shown})"
    if factor.name == "brand":
        # CompareTo runs first and cannot fail for a string; an empty operator fails after it.
        if factor.operator == "":
            return [(_ERROR, "invalid operator ", "", "")]
        if have is None:
            return [(True, "", "", "brand"), (False, unsatisfied, str(factor), "brand")]
        compare = (have > factor.value) - (have < factor.value)
    else:
        if have is None:
            return [(True, "", "", factor.name), (False, unsatisfied, str(factor), factor.name)]
        try:
            compare = _compare_semver(_semver(have), _semver(factor.value))
        except _SemverError as error:
            return [(_ERROR, f"invalid value for {factor.name}: {error}", "", "")]
    holds = {
        "=": compare == 0,
        "!=": compare != 0,
        "<": compare < 0,
        "<=": compare <= 0,
        ">": compare > 0,
        ">=": compare >= 0,
    }[factor.operator]
    return [(True, "", "", "")] if holds else [(False, unsatisfied, str(factor), "")]


def _toolkit_term(term: list[_Binary], node: NodeProperties) -> list[tuple[object, str, list[str], set[str]]]:
    # and.Assert: the first factor that does not hold (false or an error) is the term's answer.
    ended: list[tuple[object, str, list[str], set[str]]] = []
    live: list[set[str]] = [set()]
    for factor in term:
        results = _toolkit_factor(factor, node)
        after: set[str] = set()
        holds = False
        for unknown in live:
            for value, message, failed, prop in results:
                reached = unknown | {prop} if prop else unknown
                if value is True:
                    holds = True
                    after |= reached
                else:
                    ended.append((value, message, [failed] if failed else [], reached))
        live = [after] if holds else []
    ended.extend((True, "", [], unknown) for unknown in live)
    return ended


def _toolkit_requirement(terms: list[list[_Binary]], node: NodeProperties) -> _Outcomes:
    outcomes = _Outcomes()
    if not terms:  # OR of nothing: the requirement is dropped
        outcomes.add(_SAT, "")
        return outcomes
    per_term = [_toolkit_term(term, node) for term in terms]
    if len(per_term) == 1:
        for value, message, failed, unknown in per_term[0]:
            kind = _SAT if value is True else _UNSAT if value is False else _ERROR
            outcomes.add(kind, message, failed, unknown)
        return outcomes
    # or.Assert: any term that holds is enough; else one message naming them all, inner errors dropped.
    for results in per_term:
        for value, _message, _failed, unknown in results:
            if value is True:
                outcomes.add(_SAT, "", unknown=unknown)
    if all(any(value is not True for value, *_ in results) for results in per_term):
        text = "||".join("&&".join(str(factor) for factor in term) for term in terms)
        failed = [f for results in per_term for value, _m, fs, _u in results if value is not True for f in fs]
        unknown = {p for results in per_term for value, _m, _f, us in results if value is not True for p in us}
        outcomes.add(_UNSAT, f"{text} not met", failed, unknown)
    return outcomes


# --- both -----------------------------------------------------------------------------------------------------------


def evaluate(requirements: Sequence[Requirement], node: NodeProperties, checker: str = CLI) -> Verdict:
    """Whether `node` meets `requirements` for `checker`: CLI (the legacy hook, nvidia-container-cli) or TOOLKIT
    (nvidia-container-runtime in csv mode)."""
    if checker not in CHECKERS:
        raise ValueError(f"unknown checker {checker!r}: one of {', '.join(CHECKERS)}")
    for requirement in requirements:
        if requirement.error is not None:
            error = RequirementError(requirement.variable, requirement.text, requirement.error)
            return Verdict(checker, False, (error,), message=requirement.error, messages=frozenset({requirement.error}))
    if checker == CLI and len(requirements) > CLI_MAX_REQUIREMENTS:
        error = RequirementError("", "", "too many requirements")
        return Verdict(checker, False, (error,), message=error.message, messages=frozenset({error.message}))

    results: list[tuple[Requirement, _Outcomes]] = []
    malformed: list[tuple[Requirement, str]] = []
    for requirement in requirements:
        if checker == CLI:
            results.append((requirement, _cli_requirement(requirement.text, node)))
            continue
        try:
            terms = _toolkit_parse(requirement.text)
        except ValueError as error:
            malformed.append((requirement, str(error)))
            continue
        results.append((requirement, _toolkit_requirement(terms, node)))

    if malformed:
        # constraints.New reads every requirement before asserting any: the first bad one is the answer.
        errors = tuple(RequirementError(r.variable, r.text, message) for r, message in malformed)
        return Verdict(
            checker, False, errors, message=malformed[0][1], messages=frozenset(message for _r, message in malformed)
        )

    errors_found: list[RequirementError] = []
    unsatisfied: Optional[tuple[Requirement, _Outcomes]] = None
    first_failing: Optional[_Outcomes] = None
    messages: set[str] = set()
    unknown: set[str] = set()
    any_undecided = False
    for requirement, outcomes in results:
        kinds = set(outcomes.messages)
        for kind in kinds - {_SAT}:
            messages.update(outcomes.messages[kind])
        if kinds == {_SAT}:
            continue
        if _SAT in kinds:
            any_undecided = True
            unknown |= outcomes.unknown
            continue
        if first_failing is None:
            first_failing = outcomes
        if kinds == {_ERROR}:
            text = sorted(outcomes.messages[_ERROR])[0]
            errors_found.append(RequirementError(requirement.variable, requirement.text, text))
        elif kinds == {_UNSAT} and unsatisfied is None:
            unsatisfied = (requirement, outcomes)

    if first_failing is None:
        if any_undecided:
            return Verdict(checker, None, unknown=frozenset(unknown), messages=frozenset(messages))
        return Verdict(checker, True)
    first_messages = {text for kind, texts in first_failing.messages.items() if kind != _SAT for text in texts}
    return Verdict(
        checker,
        False,
        tuple(errors_found),
        unsatisfied[0] if unsatisfied else None,
        tuple(unsatisfied[1].failed) if unsatisfied else (),
        message=first_messages.pop() if len(first_messages) == 1 else None,
        messages=frozenset(messages),
    )


def legacy_hook_refusal(verdict: Verdict) -> Optional[str]:
    """What nvidia-container-cli writes to its standard error (through the legacy hook, into the runtime's error)
    when it refuses the container for its requirements; None when it would not refuse or it cannot be told. The text
    for the first failing requirement in variable order: NVIDIA's own order is random."""
    if verdict.checker != CLI:
        raise ValueError("the legacy hook's refusal is nvidia-container-cli's: evaluate with checker=CLI")
    if verdict.satisfied is not False or verdict.message is None:
        return None
    if verdict.errors and verdict.errors[0].variable == CUDA_VERSION and verdict.message.startswith("failed to get"):
        return f"failed to get requirements {verdict.message}"  # the hook's log.Panicln, before the cli runs
    if verdict.message == "too many requirements":
        return f"{CLI_PROGRAM}: input error: too many requirements"
    return f"{CLI_PROGRAM}: requirement error: {verdict.message}"


def cli_refusal_for(text: str) -> str:
    """The line nvidia-container-cli prints when the requirement `text` is unsatisfied (not malformed)."""
    return f"{CLI_PROGRAM}: requirement error: {_cli_unsatisfied_message(text)}"
