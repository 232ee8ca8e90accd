"""One CDI spec file decoded and checked as the library validates it, into the shape that cdi_apply applies.

A spec the library would refuse raises SpecError, with the reason the cache records for the file.
"""

from __future__ import annotations

from nvidia_oci_hook.engine import jsoncodec
from nvidia_oci_hook.kinds.cdinames import cdi_name_error
from nvidia_oci_hook.kinds.oci import HOOK_STAGES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

# Spec versions the newest library release knows (specs-go/version.go).
KNOWN_VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")

# Field names as the library's structs declare them; encoding/json matches keys without regard to case.
_SPEC_FIELDS = ("cdiVersion", "kind", "annotations", "devices", "containerEdits")
_DEVICE_FIELDS = ("name", "annotations", "containerEdits")
_EDITS_FIELDS = ("env", "deviceNodes", "hooks", "mounts", "intelRdt", "additionalGids", "netDevices")
_NODE_FIELDS = ("path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid")
_HOOK_FIELDS = ("hookName", "path", "args", "env", "timeout")
_MOUNT_FIELDS = ("hostPath", "containerPath", "options", "type")


class SpecError(Exception):
    pass


def _fields(value: Any, names: tuple[str, ...], where: str) -> dict[str, Any]:
    """value's keys mapped to the declared field names; unknown keys are an error, as in the library."""
    if not isinstance(value, dict):
        raise SpecError(f"{where} is not a mapping")
    folded = {name.lower(): name for name in names}
    result: dict[str, Any] = {}
    for key, item in value.items():
        name = folded.get(str(key).lower())
        if name is None:
            raise SpecError(f'{where}: unknown field "{key}"')
        result[name] = item
    return result


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SpecError(f"{where} is not a list of strings")
    return value


def _env(value: Any, where: str) -> list[str]:
    entries = _strings(value, where)
    for entry in entries:
        if entry.find("=") <= 0:
            raise SpecError(f"{where}: invalid environment variable {entry!r}")
    return entries


def _integer(value: Any, where: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where} is not an integer")
    return value


def _edits(value: Any, where: str) -> dict[str, Any]:
    """A containerEdits block, checked as the library validates it, in a normalised shape."""
    if value is None:
        return {}
    edits = _fields(value, _EDITS_FIELDS, where)
    result: dict[str, Any] = {"env": _env(edits.get("env"), f"{where}.env")}
    nodes = []
    for index, raw in enumerate(edits.get("deviceNodes") or []):
        at = f"{where}.deviceNodes[{index}]"
        node = _fields(raw, _NODE_FIELDS, at)
        path = node.get("path")
        if not isinstance(path, str) or not path:
            raise SpecError(f"{at}: invalid (empty) device path")
        if node.get("type", "") not in ("", "b", "c", "u", "p"):
            raise SpecError(f"{at}: invalid type {node.get('type')!r}")
        permissions = node.get("permissions") or ""
        if not isinstance(permissions, str) or permissions.strip("rwm"):
            raise SpecError(f"{at}: invalid permissions {permissions!r}")
        for name in ("major", "minor", "fileMode", "uid", "gid"):
            _integer(node.get(name), f"{at}.{name}")
        nodes.append(node)
    result["deviceNodes"] = nodes
    hooks = []
    for index, raw in enumerate(edits.get("hooks") or []):
        at = f"{where}.hooks[{index}]"
        hook = _fields(raw, _HOOK_FIELDS, at)
        if hook.get("hookName") not in HOOK_STAGES:
            raise SpecError(f"{at}: invalid hook name {hook.get('hookName')!r}")
        if not isinstance(hook.get("path"), str) or not hook["path"]:
            raise SpecError(f"{at}: empty path")
        _strings(hook.get("args"), f"{at}.args")
        _env(hook.get("env"), f"{at}.env")
        _integer(hook.get("timeout"), f"{at}.timeout")
        hooks.append(hook)
    result["hooks"] = hooks
    mounts = []
    for index, raw in enumerate(edits.get("mounts") or []):
        at = f"{where}.mounts[{index}]"
        mount = _fields(raw, _MOUNT_FIELDS, at)
        for name in ("hostPath", "containerPath"):
            if not isinstance(mount.get(name), str) or not mount[name]:
                raise SpecError(f"{at}: empty {name}")
        _strings(mount.get("options"), f"{at}.options")
        mounts.append(mount)
    result["mounts"] = mounts
    gids = edits.get("additionalGids") or []
    if not isinstance(gids, list) or not all(isinstance(g, int) and not isinstance(g, bool) for g in gids):
        raise SpecError(f"{where}.additionalGids is not a list of integers")
    result["additionalGids"] = gids
    if edits.get("intelRdt") is not None:
        if not isinstance(edits["intelRdt"], dict):
            raise SpecError(f"{where}.intelRdt is not a mapping")
        result["intelRdt"] = edits["intelRdt"]
    if edits.get("netDevices"):
        raise SpecError(f"{where}.netDevices: network devices are not applied by this tool")
    return result


class Spec:
    __slots__ = ("devices", "edits", "kind", "path", "priority")

    def __init__(self, path: str, priority: int, kind: str, edits: dict[str, Any], devices: dict[str, Any]) -> None:
        self.path = path
        self.priority = priority
        self.kind = kind
        self.edits = edits
        self.devices = devices  # device name -> normalised edits


def parse_spec(path: str, priority: int, value: Any) -> Spec:
    spec = _fields(value, _SPEC_FIELDS, "spec")
    version = spec.get("cdiVersion")
    if version not in KNOWN_VERSIONS:
        raise SpecError(f"unknown CDI version {version!r}")
    kind = spec.get("kind")
    if not isinstance(kind, str):
        raise SpecError("kind is not a string")
    reason = cdi_name_error(f"{kind}=x")
    if reason is not None:
        raise SpecError(f"invalid kind {kind!r}: {reason}")
    devices: dict[str, Any] = {}
    raw_devices = spec.get("devices")
    if not isinstance(raw_devices, list) or not raw_devices:
        raise SpecError("no devices")
    for index, raw in enumerate(raw_devices):
        device = _fields(raw, _DEVICE_FIELDS, f"devices[{index}]")
        name = device.get("name")
        if not isinstance(name, str) or cdi_name_error(f"{kind}={name}") is not None:
            raise SpecError(f"devices[{index}]: invalid device name {name!r}")
        if name in devices:
            raise SpecError(f"duplicate device name {name!r}")
        edits = _edits(device.get("containerEdits"), f"devices[{index}].containerEdits")
        if not any(edits.values()):
            raise SpecError(f"devices[{index}] ({name}): no container edits")
        devices[name] = edits
    return Spec(path, priority, kind, _edits(spec.get("containerEdits"), "containerEdits"), devices)


def _load(data: bytes, path: str) -> Any:
    text = data.decode("utf-8", "replace")
    if path.endswith(".json"):
        try:
            return jsoncodec.loads(text)
        except jsoncodec.JSONDecodeError:
            pass  # the library reads every spec as YAML, of which JSON is a subset
    from nvidia_oci_hook.formats import leanyaml

    try:
        return leanyaml.loads(text)
    except leanyaml.YAMLSubsetError as exc:
        if not exc.unsupported:
            raise SpecError(str(exc)) from None
    # Rare: YAML beyond the lean reader (anchors, tags). Only then is PyYAML loaded.
    from nvidia_oci_hook.kinds.cdi.goyaml import go_yaml_load

    try:
        return go_yaml_load(text)
    except Exception as exc:  # any PyYAML error: the library skips the file too
        raise SpecError(str(exc).replace("\n", " ")) from None
