"""The tool's own configuration file (/etc/nvidia-oci-hook/config.yaml): read, checked, never guessed."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

from nvidia_oci_hook import io
from nvidia_oci_hook.host import DEFAULT_DRIVER_ROOTS

DEFAULT_CONFIG_PATH = "/etc/nvidia-oci-hook/config.yaml"
CONFIG_ENV = "NVIDIA_OCI_HOOK_CONFIG"

_LINT_KEYS = {"select", "ignore", "fail_on"}
_TOP_KEYS = {"driver_roots", "lint"}


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class Settings:
    driver_roots: tuple[str, ...] = DEFAULT_DRIVER_ROOTS
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    fail_on: str = "error"


def _strings(path: str, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ConfigError(f"{path}: {key} must be a list of non-empty strings")
    return tuple(value)


def load_settings(path: Optional[str]) -> Settings:
    """Settings from path; the default path may be absent, an explicit one may not."""
    explicit = path is not None or CONFIG_ENV in os.environ
    path = path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_PATH
    if not explicit and not os.path.exists(path):
        return Settings()
    import yaml

    try:
        raw = io.read_bounded(path, 1024 * 1024)
        data = yaml.safe_load(raw.decode("utf-8")) if raw.strip() else {}
    except io.ReadError as exc:
        raise ConfigError(str(exc)) from None
    except io.TooLarge as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        reason = str(exc).replace("\n", " ")
        raise ConfigError(f"{path}: not valid YAML: {reason}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    unknown = sorted(set(map(str, data)) - _TOP_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_TOP_KEYS))})")
    settings: dict[str, Any] = {}
    if "driver_roots" in data:
        roots = _strings(path, "driver_roots", data["driver_roots"])
        for root in roots:
            if not root.startswith("/"):
                raise ConfigError(f"{path}: driver_roots entry {root!r} is not an absolute path")
        settings["driver_roots"] = roots
    lint = data.get("lint", {})
    if not isinstance(lint, dict):
        raise ConfigError(f"{path}: lint must be a mapping")
    unknown = sorted(set(map(str, lint)) - _LINT_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key 'lint.{unknown[0]}' (known: {', '.join(sorted(_LINT_KEYS))})")
    for key in ("select", "ignore"):
        if key in lint:
            settings[key] = _strings(path, f"lint.{key}", lint[key])
    if "fail_on" in lint:
        if lint["fail_on"] not in ("error", "warning"):
            raise ConfigError(f"{path}: lint.fail_on must be 'error' or 'warning'")
        settings["fail_on"] = lint["fail_on"]
    return Settings(**settings)
