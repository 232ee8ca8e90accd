"""The document kind: which TOML files are the toolkit's configuration."""

from __future__ import annotations

from typing import Any

from nvidia_oci_hook.kinds.document import Kind, register_kind
from nvidia_oci_hook.kinds.toolkit import TOOLKIT

# The file's name under every root the toolkit reads it from (api/config/v1/config.go: RelativeFilePath).
RELATIVE_PATH = "nvidia-container-runtime/config.toml"
# Top-level keys no other TOML kind has: the toolkit's tables and its own top-level settings.
_OWN_KEYS = frozenset(
    {
        "nvidia-container-cli",
        "nvidia-container-runtime",
        "nvidia-container-runtime-hook",
        "nvidia-ctk",
        "accept-nvidia-visible-devices-envvar-when-unprivileged",
        "accept-nvidia-visible-devices-as-volume-mounts",
        "disable-require",
        "supported-driver-capabilities",
        "swarm-resource",
    }
)


def is_toolkit_config(path: str, value: Any) -> bool:
    if path.replace("\\", "/").endswith("/" + RELATIVE_PATH):
        return True
    if not isinstance(value, dict) or {"crio", "plugins", "version"} & value.keys():
        return False
    return bool(_OWN_KEYS & value.keys())


def _refine(document: Any) -> Any:
    from nvidia_oci_hook.kinds.toolkit.syntax import as_toolkit_reads

    return as_toolkit_reads(document)


register_kind(
    Kind(
        TOOLKIT,
        "NVIDIA Container Toolkit config.toml",
        ("toml",),
        is_toolkit_config,
        24,
        _refine,
        readers=("nvidia-container-runtime", "nvidia-container-runtime-hook", "nvidia-ctk"),
    )
)
