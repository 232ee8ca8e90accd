"""CRI container configs: the JSON (or YAML) that `crictl create` takes, as the kubelet sends it.

crictl decodes the file with Go's encoding/json into the CRI API's ContainerConfig, and Go matches keys without
regard to case, so `cdi_devices` reaches the `CDI_devices` field. The views below match keys the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.document import Kind, register_kind

CRI_CONTAINER = "cri"

# Keys that only a CRI ContainerConfig has at its top level (k8s.io/cri-api ContainerConfig).
_CRI_KEYS = frozenset({"metadata", "image", "command", "working_dir", "envs", "devices", "cdi_devices", "log_path"})


def _get(mapping: Any, key: str) -> tuple[Optional[str], Any]:
    """The value for key, matched case-insensitively as Go's decoder does; (actual key, value)."""
    if not isinstance(mapping, dict):
        return None, None
    if key in mapping:
        return key, mapping[key]
    lowered = key.lower()
    for actual, value in mapping.items():
        if isinstance(actual, str) and actual.lower() == lowered:
            return actual, value
    return None, None


@dataclass(frozen=True)
class CRIDevice:
    pointer: str
    container_path: str
    host_path: str
    permissions: str
    has_permissions: bool = True  # whether the entry gives permissions at all


@dataclass(frozen=True)
class CDIRequest:
    pointer: str
    name: str


class CRIContainerConfig:
    def __init__(self, value: Any) -> None:
        self.value = value if isinstance(value, dict) else {}

    def _list(self, key: str) -> tuple[str, list[Any]]:
        actual, items = _get(self.value, key)
        return pointer_join("", actual or key), items if isinstance(items, list) else []

    @property
    def devices(self) -> list[CRIDevice]:
        base, items = self._list("devices")
        result = []
        for index, item in enumerate(items):
            fields = {name: _get(item, name)[1] for name in ("container_path", "host_path", "permissions")}
            if not all(isinstance(v, str) for v in fields.values() if v is not None):
                continue
            result.append(
                CRIDevice(
                    f"{base}/{index}",
                    fields["container_path"] or "",
                    fields["host_path"] or "",
                    fields["permissions"] or "",
                    fields["permissions"] is not None,
                )
            )
        return result

    @property
    def cdi_devices(self) -> list[CDIRequest]:
        base, items = self._list("cdi_devices")
        requests = []
        for index, item in enumerate(items):
            name = _get(item, "name")[1]
            if isinstance(name, str):
                requests.append(CDIRequest(f"{base}/{index}", name))
        return requests

    @property
    def envs(self) -> dict[str, tuple[str, str]]:
        """envs as name -> (pointer of the entry, value); the last entry for a name wins, as NVIDIA's tools read
        the environment the engine builds from it."""
        base, items = self._list("envs")
        result: dict[str, tuple[str, str]] = {}
        for index, item in enumerate(items):
            key, value = _get(item, "key")[1], _get(item, "value")[1]
            if isinstance(key, str) and key:
                result[key] = (f"{base}/{index}", value if isinstance(value, str) else "")
        return result

    @property
    def annotations(self) -> tuple[str, dict[str, Any]]:
        actual, value = _get(self.value, "annotations")
        return pointer_join("", actual or "annotations"), value if isinstance(value, dict) else {}

    @property
    def privileged(self) -> Optional[str]:
        """The pointer of `linux.security_context.privileged` when it is true, else None."""
        linux_key, linux = _get(self.value, "linux")
        context_key, context = _get(linux, "security_context")
        privileged_key, privileged = _get(context, "privileged")
        if privileged is True:
            return "".join(pointer_join("", key or "") for key in (linux_key, context_key, privileged_key))
        return None


def is_cri_container(value: Any) -> bool:
    """Whether a parsed document is a CRI container config rather than an OCI one."""
    return _is_cri_container("", value)


def _is_cri_container(path: str, value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    keys = {key.lower() for key in value if isinstance(key, str)}
    return ("metadata" in keys and bool(keys & (_CRI_KEYS - {"metadata"}))) or "cdi_devices" in keys


# Below CDI (20) so that CDI stays the fallback for an unrecognised YAML file.
register_kind(
    Kind(
        CRI_CONTAINER,
        "CRI container config",
        ("json", "yaml"),
        _is_cri_container,
        order=15,
        readers=("cri-o", "containerd"),
    )
)
