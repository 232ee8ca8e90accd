"""One hooks.d file: the document kind, what the loader makes of a file (`HookFile`, built by
`reading.read_hook`), and the codes of the loader's refusals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.formats import re2
from nvidia_oci_hook.kinds.document import Kind, register_kind

HOOKSD = "hooksd"

# The codes of the loader-level rules (rules/hooksd/refusals.py documents them).
VERSION = "HKD001"
WRONG_TYPE = "HKD002"
MISSING = "HKD003"
BOTH_SET = "HKD004"
BAD_REGEX = "HKD005"
UNKNOWN_STAGE = "HKD006"
BAD_PATH = "HKD007"


@dataclass(frozen=True)
class LoadError:
    """One reason the loader refuses the file."""

    code: str  # the HKD0xx rule
    pointer: str
    message: str  # what is wrong, for people
    engine_text: str  # the loader's own error text (after `parsing hook "FILE": ` where parsing is true)
    hint: Optional[str] = None
    # True for the JSON decoding errors, which podman and cri-o print after `parsing hook "FILE": `.
    parsing: bool = False
    # True for checks the loader makes only once the hook program has been found on the host.
    after_program_check: bool = False


@dataclass(frozen=True)
class Regex:
    pointer: str
    pattern: str
    what: str  # "annotation key", "annotation value", "command"
    error: Optional[re2.RegexError]


@dataclass(frozen=True)
class UnknownKey:
    pointer: str
    key: str
    where: str  # "the top level", "hook", "when"
    suggestion: Optional[str]


@dataclass
class When:
    pointer: str  # where "when" is ("" when absent, and for 0.1.0 files, whose conditions sit at the top level)
    any_of: bool  # 0.1.0: any condition suffices; 1.0.0: every condition set must match
    always: Optional[bool] = None
    always_pointer: str = ""
    annotations: Optional[dict[str, str]] = None
    annotations_pointer: str = ""
    commands: Optional[list[str]] = None
    commands_pointer: str = ""
    has_bind_mounts: Optional[bool] = None
    has_bind_mounts_pointer: str = ""


@dataclass
class HookFile:
    """What the loader makes of one parsed hooks.d file."""

    version: Optional[str]  # "1.0.0", "0.1.0", or None when the loader could not choose a reader
    version_pointer: str = ""
    errors: list[LoadError] = field(default_factory=list)
    unknown_keys: list[UnknownKey] = field(default_factory=list)
    regexes: list[Regex] = field(default_factory=list)
    path: Optional[str] = None
    path_pointer: str = ""
    args: Optional[list[str]] = None
    args_pointer: str = ""
    env: Optional[list[str]] = None
    env_pointer: str = ""
    timeout: Optional[int] = None
    timeout_pointer: str = ""
    stages: Optional[list[str]] = None
    stages_pointer: str = ""
    stage_pointers: list[str] = field(default_factory=list)
    when: When = field(default_factory=lambda: When("", False))

    @property
    def decoded(self) -> bool:
        """Whether the JSON decoding passed, so that the fields above are what the engine would use."""
        return self.version is not None and not any(error.parsing for error in self.errors)

    def stage_pointer(self, index: int) -> str:
        return self.stage_pointers[index] if index < len(self.stage_pointers) else self.stages_pointer


def _sniff(path: str, value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    keys = {key.lower() for key in value if isinstance(key, str)}
    if keys & {"ociversion", "cdiversion", "hooks", "process", "root", "mounts", "linux", "status", "bundle"}:
        return False
    if "hook" in keys:
        return True
    return bool("version" in keys and keys & {"stages", "stage", "when"})


register_kind(
    Kind(HOOKSD, "OCI hooks.d file (podman, cri-o)", ("json",), _sniff, order=30, readers=("cri-o", "podman"))
)
