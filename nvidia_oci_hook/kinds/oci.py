"""Typed views of an OCI runtime config, tolerant of any shape.

Every accessor skips what is not of the expected type: the schema check reports wrong types once, and the
semantic rules built on these views never see them.

The runtime-facing modes use these views on every container start, so this module imports nothing that costs
start-up time (no dataclasses, typing or functools at run time).
"""

from __future__ import annotations

from nvidia_oci_hook import leanos

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, Optional

HOOK_STAGES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _as_int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _as_str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def normalize_path(path: str) -> str:
    """Container paths as runc resolves them: repeated and trailing slashes and dot segments removed."""
    return leanos.normpath(path) if path else path


class Device:
    __slots__ = ("file_mode", "major", "minor", "path", "pointer", "type")

    def __init__(
        self,
        pointer: str,
        path: str,
        type: Optional[str],
        major: Optional[int],
        minor: Optional[int],
        file_mode: Optional[int] = None,
    ) -> None:
        self.pointer = pointer
        self.path = path
        self.type = type
        self.major = major
        self.minor = minor
        self.file_mode = file_mode

    @property
    def number(self) -> str:
        return f"{self.type} {self.major}:{self.minor}"

    def same_node(self, other: Device) -> bool:
        return (self.type, self.major, self.minor) == (other.type, other.major, other.minor)


class Mount:
    __slots__ = ("destination", "options", "pointer", "source", "type")

    def __init__(
        self, pointer: str, destination: str, source: Optional[str], type: Optional[str], options: tuple[str, ...]
    ) -> None:
        self.pointer = pointer
        self.destination = destination
        self.source = source
        self.type = type
        self.options = options

    @property
    def is_bind(self) -> bool:
        return self.type == "bind" or "bind" in self.options or "rbind" in self.options


class Hook:
    __slots__ = ("env", "path", "pointer", "stage", "timeout")

    def __init__(self, pointer: str, stage: str, path: Optional[str], env: Optional[list[str]], timeout: Any) -> None:
        self.pointer = pointer
        self.stage = stage
        self.path = path
        self.env = env
        self.timeout = timeout


class DeviceRule:
    """One linux.resources.devices entry; None for a wildcard field."""

    __slots__ = ("access", "allow", "major", "minor", "pointer", "type")

    def __init__(
        self, pointer: str, allow: bool, type: Optional[str], major: Optional[int], minor: Optional[int], access: str
    ) -> None:
        self.pointer = pointer
        self.allow = allow
        self.type = type
        self.major = major
        self.minor = minor
        self.access = access

    @property
    def is_allow_all(self) -> bool:
        return (
            self.allow
            and self.type in (None, "a")
            and self.major is None
            and self.minor is None
            and set("rwm") <= set(self.access)
        )

    def matches(self, device_type: Optional[str], major: Optional[int], minor: Optional[int]) -> bool:
        if self.type not in (None, "a") and self.type != device_type:
            return False
        if self.major is not None and self.major != major:
            return False
        return self.minor is None or self.minor == minor


if TYPE_CHECKING:
    from functools import cached_property as _computed_once
else:

    class _computed_once:
        """functools.cached_property without importing functools: the value replaces the descriptor on first use."""

        def __init__(self, compute):
            self.compute = compute
            self.name = compute.__name__

        def __get__(self, instance, owner=None):
            value = self.compute(instance)
            instance.__dict__[self.name] = value
            return value


class OCIConfig:
    """Accessors over a config.json value, each computed once; the value itself is never modified."""

    def __init__(self, value: Any) -> None:
        self.value = _as_dict(value)
        self.linux = _as_dict(self.value.get("linux"))
        self.process = _as_dict(self.value.get("process"))

    @_computed_once
    def devices(self) -> list[Device]:
        return list(self._devices())

    def _devices(self) -> Iterator[Device]:
        for index, entry in enumerate(_as_list(self.linux.get("devices"))):
            if not isinstance(entry, dict):
                continue
            path = _as_str(entry.get("path"))
            if not path:
                continue
            yield Device(
                f"/linux/devices/{index}",
                normalize_path(path),
                _as_str(entry.get("type")),
                _as_int(entry.get("major")),
                _as_int(entry.get("minor")),
                _as_int(entry.get("fileMode")),
            )

    @_computed_once
    def mounts(self) -> list[Mount]:
        return list(self._mounts())

    def _mounts(self) -> Iterator[Mount]:
        for index, entry in enumerate(_as_list(self.value.get("mounts"))):
            if not isinstance(entry, dict):
                continue
            destination = _as_str(entry.get("destination"))
            if not destination:
                continue
            options = tuple(option for option in _as_list(entry.get("options")) if isinstance(option, str))
            yield Mount(
                f"/mounts/{index}",
                normalize_path(destination),
                _as_str(entry.get("source")),
                _as_str(entry.get("type")),
                options,
            )

    @_computed_once
    def hooks(self) -> list[Hook]:
        return list(self._hooks())

    def _hooks(self) -> Iterator[Hook]:
        stages = _as_dict(self.value.get("hooks"))
        for stage in HOOK_STAGES:
            for index, entry in enumerate(_as_list(stages.get(stage))):
                if not isinstance(entry, dict):
                    continue
                env = entry.get("env")
                yield Hook(
                    f"/hooks/{stage}/{index}",
                    stage,
                    _as_str(entry.get("path")),
                    [item for item in env if isinstance(item, str)] if isinstance(env, list) else None,
                    entry.get("timeout"),
                )

    @_computed_once
    def device_rules(self) -> list[DeviceRule]:
        return list(self._device_rules())

    def _device_rules(self) -> Iterator[DeviceRule]:
        resources = _as_dict(self.linux.get("resources"))
        for index, entry in enumerate(_as_list(resources.get("devices"))):
            if not isinstance(entry, dict) or not isinstance(entry.get("allow"), bool):
                continue
            major = _as_int(entry.get("major"))
            minor = _as_int(entry.get("minor"))
            yield DeviceRule(
                f"/linux/resources/devices/{index}",
                entry["allow"],
                _as_str(entry.get("type")),
                None if major is None or major < 0 else major,
                None if minor is None or minor < 0 else minor,
                _as_str(entry.get("access")) or "rwm",
            )

    def env(self) -> dict[str, tuple[int, str]]:
        """process.env as name -> (index, value); the last entry for a name wins, as in execve's lookup."""
        result: dict[str, tuple[int, str]] = {}
        for index, entry in enumerate(_as_list(self.process.get("env"))):
            if isinstance(entry, str) and "=" in entry:
                name, _, value = entry.partition("=")
                result[name] = (index, value)
        return result

    def annotations(self) -> dict[str, Any]:
        return _as_dict(self.value.get("annotations"))

    def bounding_capabilities(self) -> frozenset[str]:
        capabilities = _as_dict(self.process.get("capabilities"))
        return frozenset(c for c in _as_list(capabilities.get("bounding")) if isinstance(c, str))

    def privileged_evidence(self) -> Optional[str]:
        """Why this container counts as privileged (as the NVIDIA stack and the engines see it), or None."""
        if "CAP_SYS_ADMIN" in self.bounding_capabilities():
            return "CAP_SYS_ADMIN is in process.capabilities.bounding"
        for rule in self.device_rules:
            if rule.is_allow_all:
                return f"{rule.pointer} allows every device (a *:* rwm)"
        return None
