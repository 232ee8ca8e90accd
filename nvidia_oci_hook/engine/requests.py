"""Where a config asks for CDI devices: annotations under the configured prefixes, and CDI names in
NVIDIA_VISIBLE_DEVICES. Kept apart from engine/cdi.py so that a container that asks for none pays nothing more.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nvidia_oci_hook.config import Settings

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


class Request:
    __slots__ = ("name", "pointer", "source")

    def __init__(self, name: str, pointer: str, source: str) -> None:
        self.name = name
        self.pointer = pointer
        self.source = source  # "annotation KEY" or VISIBLE_DEVICES


def _pointer_token(text: str) -> str:
    return text.replace("~", "~0").replace("/", "~1")


def annotation_requests(annotations: Any, settings: Settings, base: str = "/annotations") -> list[Request]:
    """The names requested by annotations under the configured prefixes, as written, in order; base is the
    annotations' pointer (a CRI container config may spell the key otherwise)."""
    found: list[Request] = []
    if isinstance(annotations, dict):
        for key, value in annotations.items():
            if isinstance(key, str) and isinstance(value, str) and key.startswith(settings.cdi_annotation_prefixes):
                pointer = f"{base}/{_pointer_token(key)}"
                found.extend(Request(name, pointer, f"annotation {key}") for name in value.split(","))
    return found


def requested_names(config: dict[str, Any], settings: Settings) -> list[Request]:
    """Every requested name as written (not yet checked), in order."""
    found = annotation_requests(config.get("annotations"), settings)
    process = config.get("process")
    env = process.get("env") if isinstance(process, dict) else None
    if settings.cdi_visible_devices_env and isinstance(env, list):
        prefix = VISIBLE_DEVICES + "="
        for index, entry in enumerate(env):
            if not isinstance(entry, str) or not entry.startswith(prefix):
                continue
            for name in entry[len(prefix) :].split(","):
                # Indexes, UUIDs, "all" and "none" are the NVIDIA runtime's business; only CDI names are ours.
                if "=" in name and "/" in name:
                    found.append(Request(name.strip(), f"/process/env/{index}", VISIBLE_DEVICES))
    return found
