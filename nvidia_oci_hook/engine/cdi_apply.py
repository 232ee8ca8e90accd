"""CDI requests the container engine left unresolved, resolved and applied as the CDI library does.

Requests come from annotations (keys under the configured prefixes, values comma-separated qualified names)
and from qualified names in NVIDIA_VISIBLE_DEVICES. Specs are read from the spec directories the way the
library's cache reads them: only `*.json` and `*.yaml` files directly in each directory, a later directory
overriding an earlier one, and a name two specs of one directory both define dropped altogether.

Applying a device is the library's ContainerEdits.Apply, with its semantics kept: env entries replace the same
name, a device node replaces the entry at its path and gets an allow rule, a mount replaces the one at its
destination (then mounts are ordered by depth), hooks are appended, additional GIDs are added once. Applying is
idempotent here (a hook or rule already present is not added again), so a request the engine did resolve
changes nothing.
"""

from __future__ import annotations

import os
import posixpath
import stat

from nvidia_oci_hook import io
from nvidia_oci_hook.engine import jsoncodec
from nvidia_oci_hook.engine.records import CDI_NOT_APPLIED, Edit, EngineFinding
from nvidia_oci_hook.engine.requests import VISIBLE_DEVICES, Request, requested_names
from nvidia_oci_hook.host import rewrite_for_existing_root
from nvidia_oci_hook.kinds.cdinames import cache_winners, cdi_name_error
from nvidia_oci_hook.kinds.oci import HOOK_STAGES, normalize_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    from nvidia_oci_hook.config import Settings
    from nvidia_oci_hook.host import HostView

SPEC_EXTENSIONS = (".json", ".yaml")
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


class SpecCache:
    """The devices the library's cache resolves, by qualified name, and the files it could not use."""

    def __init__(self) -> None:
        self.devices: dict[str, tuple[Spec, str]] = {}
        self.unusable: list[tuple[str, str]] = []  # (path, reason)


def spec_paths(host: HostView, directory: str) -> list[str]:
    """Spec files the library reads in directory: lexical order, no subdirectories, .json and .yaml only."""
    result = []
    for name in host.list_dir(directory):
        path = posixpath.join(directory, name)
        if name.endswith(SPEC_EXTENSIONS) and host.is_file(path):
            result.append(path)
    return result


def read_cache(host: HostView, directories: tuple[str, ...]) -> SpecCache:
    cache = SpecCache()
    found: list[tuple[str, int, tuple[Spec, str]]] = []
    for priority, directory in enumerate(directories):
        for path in spec_paths(host, directory):
            real = host.real_path(path)
            try:
                if real is None:
                    raise SpecError("cannot be read")
                spec = parse_spec(path, priority, _load(io.read_bounded(real), path))
            except (SpecError, io.ReadError, io.TooLarge) as exc:
                cache.unusable.append((path, str(exc)))
                continue
            found.extend((f"{spec.kind}={name}", priority, (spec, name)) for name in spec.devices)
    cache.devices = cache_winners(found)
    return cache


def requests(config: dict[str, Any], settings: Settings) -> tuple[list[Request], list[EngineFinding]]:
    """The CDI devices the config asks for, in order, each once; and the malformed requests."""
    found: list[Request] = []
    problems: list[EngineFinding] = []
    for request in requested_names(config, settings):
        reason = cdi_name_error(request.name)
        if reason is None:
            found.append(request)
        elif request.source == VISIBLE_DEVICES:
            problems.append(_invalid_request("REC002", request.pointer, request.source, request.name, reason))
        else:
            problems.append(_invalid_request("GPU005", request.pointer, request.source, request.name, reason))
    unique: dict[str, Request] = {}
    for request in found:
        unique.setdefault(request.name, request)
    return list(unique.values()), problems


def _invalid_request(code: str, pointer: str, source: str, name: str, reason: str) -> EngineFinding:
    # A malformed annotation is GPU005, the lint rule for annotations; REC002 is the same for the environment.
    return EngineFinding(
        code,
        "error",
        pointer,
        f"{source}: {name!r}: {reason}; the CDI library refuses the whole request",
        "write each device as vendor/class=name, separated by commas only (nvidia-ctk cdi list shows the names)",
        gpu_unusable=True,
    )


def _unresolved(request: Request, cache: SpecCache, directories: tuple[str, ...]) -> EngineFinding:
    kind = request.name.partition("=")[0]
    known = sorted(name for name in cache.devices if name.startswith(kind + "="))
    if known:
        detail = f"the specs for {kind} define {', '.join(known[:6])}" + (" and more" if len(known) > 6 else "")
    else:
        detail = f"no usable spec in {', '.join(directories)} defines {kind}"
    if cache.unusable:
        path, reason = cache.unusable[0]
        more = f" (and {len(cache.unusable) - 1} more)" if len(cache.unusable) > 1 else ""
        detail += f"; unusable spec {path}: {reason}{more}"
    return EngineFinding(
        "REC001",
        "error",
        request.pointer,
        f"CDI device {request.name} ({request.source}) is not defined on this node: {detail}",
        "generate the spec (nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml) or fix the request",
        gpu_unusable=True,
    )


class _Injection:
    """Applies container edits to a working copy of the config, recording what actually changed."""

    def __init__(self, config: dict[str, Any], host: HostView, roots: tuple[str, ...], request: Request) -> None:
        self.config = config
        self.host = host
        self.roots = roots
        self.request = request
        self.edits: list[Edit] = []
        self.findings: list[EngineFinding] = []

    def _edit(self, pointer: str, message: str) -> None:
        self.edits.append(
            Edit(
                CDI_NOT_APPLIED,
                "error",
                pointer,
                message,
                f"CDI device {self.request.name} ({self.request.source}) is requested but not applied to the spec",
                gpu_unusable=True,
                about=self.request.pointer,
            )
        )

    def _section(self, *keys: str) -> dict[str, Any]:
        node = self.config
        for key in keys:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        return node

    def _list(self, parent: dict[str, Any], key: str) -> list[Any]:
        if not isinstance(parent.get(key), list):
            parent[key] = []
        return parent[key]  # type: ignore[no-any-return]

    def env(self, entries: list[str]) -> None:
        env = self._list(self._section("process"), "env")
        for entry in entries:
            name = entry.partition("=")[0]
            for index, existing in enumerate(env):
                if isinstance(existing, str) and existing.partition("=")[0] == name:
                    if existing != entry:
                        env[index] = entry
                        self._edit(f"/process/env/{index}", f"set {entry}")
                    break
            else:
                env.append(entry)
                self._edit(f"/process/env/{len(env) - 1}", f"add {entry}")

    def _host_node(self, node: dict[str, Any]) -> Optional[dict[str, Any]]:
        """The OCI device for a CDI device node, with fillMissingInfo's lookup of the host node."""
        path = node["path"]
        host_path = node.get("hostPath") or path
        kind = node.get("type") or ""
        major = node.get("major") or 0
        minimal = kind != "" and (major != 0 or kind == "p")
        info = self.host.lstat(host_path)
        if info is None:
            rewrite = rewrite_for_existing_root(self.host, self.roots, host_path)
            if rewrite is not None:
                info = self.host.lstat(rewrite.rewritten)
        found = None
        if info is not None:
            mode = info.st_mode
            found = "c" if stat.S_ISCHR(mode) else "b" if stat.S_ISBLK(mode) else "p" if stat.S_ISFIFO(mode) else None
        if found is None and not minimal:
            why = "does not exist" if info is None else "is not a device node"
            self.findings.append(
                EngineFinding(
                    "REC003",
                    "error",
                    self.request.pointer,
                    f"CDI device {self.request.name}: host device {host_path} {why}, and the spec does not give "
                    f"its type and numbers for {path}",
                    "regenerate the CDI spec for the driver root that exists (nvidia-ctk cdi generate), or give "
                    "type, major and minor in the spec",
                    gpu_unusable=True,
                )
            )
            return None
        device: dict[str, Any] = {"path": path}
        file_mode = node.get("fileMode")
        if file_mode is None and info is not None and found is not None:
            file_mode = stat.S_IMODE(info.st_mode)
        if not minimal and info is not None and found is not None:
            if kind == "":
                kind = found
            if kind != found:
                self.findings.append(
                    EngineFinding(
                        "REC003",
                        "error",
                        self.request.pointer,
                        f"CDI device {self.request.name}: {path} is type {kind!r} in the spec but {host_path} is "
                        f"type {found!r} on the host",
                        "fix the type in the CDI spec",
                        gpu_unusable=True,
                    )
                )
                return None
            if kind != "p" and major == 0:
                major, node = os.major(info.st_rdev), dict(node, minor=os.minor(info.st_rdev))
        device["type"] = kind
        if kind != "p":
            device["major"] = major
            device["minor"] = node.get("minor") or 0
        if file_mode is not None:
            device["fileMode"] = file_mode
        user = self.config.get("process", {}).get("user") if isinstance(self.config.get("process"), dict) else None
        for key in ("uid", "gid"):
            # The library gives a node without its own owner the container user's, unless that is root.
            if node.get(key) is not None:
                device[key] = node[key]
            elif isinstance(user, dict) and isinstance(user.get(key), int) and user[key] > 0:
                device[key] = user[key]
        return device

    def device_nodes(self, nodes: list[dict[str, Any]]) -> None:
        for node in nodes:
            device = self._host_node(node)
            if device is None:
                continue
            devices = self._list(self._section("linux"), "devices")
            path = normalize_path(device["path"])
            same = [
                i for i, d in enumerate(devices) if isinstance(d, dict) and normalize_path(d.get("path", "")) == path
            ]
            if same and devices[same[0]] == device and len(same) == 1:
                pass
            elif same:
                replaced = ", ".join(_describe(devices[index]) for index in same[:2])
                # RemoveDevice drops the first entry at the path; AddDevice then replaces the next one, if any.
                del devices[same[0]]
                if len(same) > 1:
                    at = same[1] - 1
                    devices[at] = device
                else:
                    devices.append(device)
                    at = len(devices) - 1
                self._edit(f"/linux/devices/{at}", f"replace {path} ({replaced}) with {_describe(device)}")
            else:
                devices.append(device)
                self._edit(f"/linux/devices/{len(devices) - 1}", f"add device {path} ({_describe(device)})")
            if device["type"] in ("b", "c"):
                access = node.get("permissions") or "rwm"
                rule = {
                    "allow": True,
                    "type": device["type"],
                    "major": device["major"],
                    "minor": device["minor"],
                    "access": access,
                }
                rules = self._list(self._section("linux", "resources"), "devices")
                if rule not in rules:
                    rules.append(rule)
                    self._edit(
                        f"/linux/resources/devices/{len(rules) - 1}", f"allow {path} ({_describe(device)}, {access})"
                    )

    def mounts(self, mounts: list[dict[str, Any]]) -> None:
        if not mounts:
            return
        existing = self._list(self.config, "mounts")
        changed = False
        for mount in mounts:
            entry: dict[str, Any] = {"destination": mount["containerPath"], "source": mount["hostPath"]}
            if mount.get("options"):
                entry["options"] = list(mount["options"])
            if mount.get("type"):
                entry["type"] = mount["type"]
            if _has_user_namespace(self.config):
                _add_idmap(entry)
            same = [
                i
                for i, m in enumerate(existing)
                if isinstance(m, dict) and m.get("destination") == entry["destination"]
            ]
            if same and existing[same[0]] == entry:
                continue
            if same:
                del existing[same[0]]
            existing.append(entry)
            changed = True
            self._edit("/mounts", f"mount {entry['source']} at {entry['destination']}")
        if changed:
            # The library orders mounts by the depth of their destination, stably.
            existing.sort(key=_mount_depth)

    def hooks(self, hooks: list[dict[str, Any]]) -> None:
        for hook in hooks:
            entry: dict[str, Any] = {"path": hook["path"]}
            for key in ("args", "env", "timeout"):
                if hook.get(key) is not None:
                    entry[key] = hook[key]
            stage = self._list(self._section("hooks"), hook["hookName"])
            if entry not in stage:
                stage.append(entry)
                self._edit(f"/hooks/{hook['hookName']}/{len(stage) - 1}", f"add {hook['hookName']} hook {hook['path']}")

    def additional_gids(self, gids: list[int]) -> None:
        for gid in gids:
            if gid == 0:
                continue
            user = self._section("process", "user")
            listed = self._list(user, "additionalGids")
            if gid not in listed:
                listed.append(gid)
                self._edit("/process/user/additionalGids", f"add supplementary group {gid}")

    def intel_rdt(self, rdt: Optional[dict[str, Any]]) -> None:
        if rdt is not None and self._section("linux").get("intelRdt") != rdt:
            self._section("linux")["intelRdt"] = rdt
            self._edit("/linux/intelRdt", "set intelRdt")

    def apply(self, edits: dict[str, Any]) -> None:
        self.env(edits.get("env", []))
        self.device_nodes(edits.get("deviceNodes", []))
        self.mounts(edits.get("mounts", []))
        self.hooks(edits.get("hooks", []))
        self.intel_rdt(edits.get("intelRdt"))
        self.additional_gids(edits.get("additionalGids", []))


def _describe(device: dict[str, Any]) -> str:
    if device.get("type") == "p":
        return "a FIFO"
    return f"{device.get('type')} {device.get('major')}:{device.get('minor')}"


def _mount_depth(mount: Any) -> int:
    destination = mount.get("destination") if isinstance(mount, dict) else None
    return normalize_path(destination).count("/") if isinstance(destination, str) and destination else 0


def _has_user_namespace(config: dict[str, Any]) -> bool:
    linux = config.get("linux")
    namespaces = linux.get("namespaces") if isinstance(linux, dict) else None
    return isinstance(namespaces, list) and any(isinstance(n, dict) and n.get("type") == "user" for n in namespaces)


def _add_idmap(entry: dict[str, Any]) -> None:
    """Bind mounts into a user namespace get idmap (ridmap for rbind), as the library adds them."""
    options = entry.setdefault("options", [])
    option = "idmap" if entry.get("type") == "bind" else ""
    for existing in options:
        if existing in ("idmap", "ridmap"):
            return
        if existing == "bind":
            option = "idmap"
        elif existing == "rbind":
            option = "ridmap"
    if option:
        options.append(option)


def inject(
    config: dict[str, Any], host: HostView, settings: Settings
) -> tuple[list[Edit], list[EngineFinding], set[str]]:
    """Apply every CDI request to config (a working copy) in place.

    Returns the edits, the findings, and the device paths the requested devices define (their entries win a
    conflict under the "cdi" policy).
    """
    wanted, findings = requests(config, settings)
    if not wanted or findings:
        # The library parses every request before it resolves any: one malformed name, and nothing is injected.
        return [], findings, set()
    cache = read_cache(host, settings.cdi_spec_dirs)
    edits: list[Edit] = []
    cdi_paths: set[str] = set()
    applied_specs: set[str] = set()
    resolved: list[tuple[Request, Spec, str]] = []
    for request in wanted:
        entry = cache.devices.get(request.name)
        if entry is None:
            findings.append(_unresolved(request, cache, settings.cdi_spec_dirs))
            continue
        resolved.append((request, entry[0], entry[1]))
    if len(resolved) < len(wanted):
        # The library injects nothing when one name is unresolvable.
        return edits, findings, cdi_paths
    for request, spec, name in resolved:
        injection = _Injection(config, host, settings.driver_roots, request)
        if spec.path not in applied_specs:
            applied_specs.add(spec.path)
            injection.apply(spec.edits)
        injection.apply(spec.devices[name])
        edits.extend(injection.edits)
        findings.extend(injection.findings)
        for block in (spec.edits, spec.devices[name]):
            cdi_paths.update(normalize_path(node["path"]) for node in block.get("deviceNodes", []))
    return edits, findings, cdi_paths
