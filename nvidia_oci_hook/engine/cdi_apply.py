"""The devices a CDI request resolved to, applied to a config as the library's ContainerEdits.Apply applies them.

Applying a device is the library's ContainerEdits.Apply, with its semantics kept: env entries replace the same
name, a device node replaces the entry at its path and gets an allow rule, a mount replaces the one at its
destination (then mounts are ordered by depth), hooks are appended, additional GIDs are added once. Applying is
idempotent here (a hook or rule already present is not added again), so a request the engine did resolve
changes nothing.
"""

from __future__ import annotations

import stat

from nvidia_oci_hook import leanos
from nvidia_oci_hook.engine.records import CDI_NOT_APPLIED, Edit, EngineFinding
from nvidia_oci_hook.host import rewrite_for_existing_root
from nvidia_oci_hook.kinds.oci import normalize_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    from nvidia_oci_hook.engine.requests import Request
    from nvidia_oci_hook.host import HostView


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
                major, node = leanos.major(info.st_rdev), dict(node, minor=leanos.minor(info.st_rdev))
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
