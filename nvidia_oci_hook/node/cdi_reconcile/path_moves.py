"""The values of a spec that change: host paths moved to the resolved driver root, device nodes given a hostPath,
driver libraries named with another driver's version repointed to the loaded one's.

The driver root is decided by evidence (nvidia_oci_hook.node.driver), never by marker files; a host path is moved
only when the whole path, relative to its root, exists under that root. A library is repointed only when the
loaded module's version is known and the file of that version exists beside the one named; a spec written for an
older driver is stale even where the old files are still there, since NVML refuses a user space that is not the
module's.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Optional

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.host import DeviceIdentity, HostView, owning_root
from nvidia_oci_hook.kinds.cdi.specs_go import GoStruct, edit_blocks, entries, fully_specified
from nvidia_oci_hook.node.driver import FOUND, DriverRootAnswer
from nvidia_oci_hook.node.driver_facts import (
    HOST_DRIVER_VERSION,
    host_driver_version,
    libraries_named,
    library_version,
)

# deviceNodes[].hostPath exists from this spec version on: adding one to an older spec makes the library refuse it.
HOST_PATH_VERSION = (0, 5, 0)
UNSET = "(unset)"


@dataclass(frozen=True)
class _Edit:
    """One value to set (pointer names it) or a hostPath to add to the device node at `node`."""

    pointer: str
    old: Optional[str]  # None: the key is added
    new: str
    node: str = ""  # for an addition: the device node's pointer

    def describe(self) -> str:
        return f"{self.pointer}: {UNSET if self.old is None else self.old} -> {self.new}"


def _version(text: str) -> Optional[tuple[int, ...]]:
    parts = text.split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return None
    return tuple(int(part) for part in parts)


def _spec_identity(node: GoStruct) -> Optional[DeviceIdentity]:
    """The device a fully specified node describes itself, in the host's terms; None where it cannot say."""
    node_type = node.text("type")
    if node_type in ("c", "b") and node.integer("major") != 0:
        return DeviceIdentity(node_type, node.integer("major"), node.integer("minor"))
    if node_type == "p":
        return DeviceIdentity("p")
    return None


class _Planner:
    def __init__(
        self, host: HostView, roots: tuple[str, ...], answer: DriverRootAnswer, driver: Optional[str] = None
    ) -> None:
        """driver: the loaded kernel module's version; None when it is unknown (no library is repointed)."""
        self.host = host
        self.roots = roots
        self.answer = answer
        self.root = answer.root if answer.status == FOUND else None
        self.driver = driver

    def other_version(self, path: str) -> Optional[tuple[str, str]]:
        """(the version path names, the same library of the loaded driver's version beside it) for a driver
        library of another version than the module's."""
        if self.driver is None:
            return None
        directory, name = posixpath.split(path)
        parsed = library_version(name)
        if parsed is None or parsed[1] == self.driver:
            return None
        return parsed[1], posixpath.join(directory, f"{parsed[0]}.so.{self.driver}")

    def repoint(self, entry: GoStruct, key: str, what: str, edits: list[_Edit], problems: list[str]) -> Optional[str]:
        """Repoint a library of another driver version; returns the new path, or "" when the path was a library
        of another version that cannot be repointed (a problem says so), or None when it is not one."""
        path = entry.text(key)
        found = self.other_version(path) if path.startswith("/") else None
        if found is None:
            return None
        version, candidate = found
        target = candidate if self.host.exists(candidate) else self.moved(candidate, None)
        if target is None:
            problems.append(
                f"{entry.at(key)}: {what} {path} is driver {version}'s, the loaded kernel module is {self.driver}, and "
                f"{candidate} does not exist: regenerate the spec (nvidia-ctk cdi generate)"
            )
            return ""
        edits.append(_Edit(entry.at(key), path, target))
        return target

    def moved(self, path: str, device: Optional[GoStruct]) -> Optional[str]:
        """path under the resolved root, when path sits under another candidate root and the resolved root has
        the whole relative path (for a device node the library stats: a device node of the spec's type)."""
        if self.root is None:
            return None
        path = posixpath.normpath(path)
        root, relative = owning_root(self.roots, path)
        if root.rstrip("/") == self.root.rstrip("/"):
            return None
        candidate = posixpath.normpath(posixpath.join(self.root, relative)) if relative else self.root
        if device is None or fully_specified(device):
            return candidate if self.host.exists(candidate) else None
        identity = self.host.link_identity(candidate)
        if identity is None or identity.type not in ("c", "b", "p"):
            return None
        wanted = device.text("type")
        if wanted and wanted != identity.type:
            return None
        return candidate

    def under_resolved_root(self, path: str) -> bool:
        assert self.root is not None
        root, _ = owning_root(self.roots, posixpath.normpath(path))
        return root.rstrip("/") == self.root.rstrip("/")

    def plan(self, spec: GoStruct) -> tuple[list[_Edit], list[str]]:
        edits: list[_Edit] = []
        problems: list[str] = []
        version = spec.text("cdiVersion")
        parsed = _version(version)
        host_path_allowed = parsed is not None and parsed >= HOST_PATH_VERSION
        for block in edit_blocks(spec):
            for pointer, node in entries(block, "deviceNodes"):
                self.device_node(pointer, node, version if not host_path_allowed else None, edits, problems)
            renamed: dict[str, str] = {}
            for _pointer, mount in entries(block, "mounts"):
                what = f"mount source (for {mount.text('containerPath')})"
                old = mount.text("hostPath")
                new = self.repoint(mount, "hostPath", what, edits, problems)
                if new is None:
                    self.host_path(mount, "hostPath", what, edits, problems)
                    continue
                if not new:
                    continue
                renamed[posixpath.basename(old)] = posixpath.basename(new)
                # NVIDIA's generator names the library by its versioned path on both sides.
                if mount.text("containerPath") == old:
                    edits.append(
                        _Edit(
                            mount.at("containerPath"),
                            old,
                            posixpath.join(posixpath.dirname(old), posixpath.basename(new)),
                        )
                    )
            for _pointer, hook in entries(block, "hooks"):
                self.host_path(hook, "path", f"{hook.text('hookName')} hook program", edits, problems)
                self.hook_arguments(hook, renamed, edits, problems)
        return edits, problems

    def hook_arguments(self, hook: GoStruct, renamed: dict[str, str], edits: list[_Edit], problems: list[str]) -> None:
        """The create-symlinks links (`libcuda.so.545.23.08::/usr/lib/…/libcuda.so.1`) follow the libraries their
        block's mounts were repointed to; one naming another version that no mount repointed is a problem."""
        for index, argument in enumerate(hook.items_of("args")):
            if not isinstance(argument, str):
                continue
            stated = host_driver_version(argument)
            if stated is not None and self.driver is not None and stated != self.driver:
                # enable-cuda-compat decides against this version: the loaded driver's is the one it means.
                edits.append(_Edit(f"{hook.at('args')}/{index}", argument, f"{HOST_DRIVER_VERSION}{self.driver}"))
                continue
            new = argument
            for name, version in libraries_named(argument):
                if self.driver is None or version == self.driver:
                    continue
                if name in renamed:
                    new = new.replace(name, renamed[name])
                else:
                    problems.append(
                        f"{hook.at('args')}/{index}: {hook.text('hookName')} hook argument {argument!r} names driver "
                        f"{version}'s {name}, the loaded kernel module is {self.driver}: regenerate the spec "
                        "(nvidia-ctk cdi generate)"
                    )
            if new != argument:
                edits.append(_Edit(f"{hook.at('args')}/{index}", argument, new))

    def missing_reason(self, path: str) -> str:
        if self.root is None:
            return (
                f"{path} does not exist on the host, and the driver root is {self.answer.status} ({self.answer.reason})"
            )
        return f"{path} does not exist on the host, nor under the driver root {self.root}"

    def host_path(self, entry: GoStruct, key: str, what: str, edits: list[_Edit], problems: list[str]) -> None:
        path = entry.text(key)
        if not path.startswith("/") or self.host.exists(path):
            return
        target = self.moved(path, None)
        if target is None:
            problems.append(f"{entry.at(key)}: {what} {self.missing_reason(path)}")
            return
        edits.append(_Edit(entry.at(key), path, target))

    def device_node(
        self, pointer: str, node: GoStruct, too_old: Optional[str], edits: list[_Edit], problems: list[str]
    ) -> None:
        """too_old: the spec's version when it is too old for a hostPath to be added."""
        host_path_allowed = too_old is None
        path = node.text("path")
        host_path = node.text("hostPath")
        effective = host_path or path
        fully = fully_specified(node)
        # The library needs the host node only when the entry does not give its type and numbers.
        needed = not fully
        new_host_path = host_path
        if effective.startswith("/") and self.host.link_identity(effective) is None:
            target = self.moved(effective, node)
            if target is None:
                if needed:
                    problems.append(f"{node.at('hostPath' if host_path else 'path')}: {self.missing_reason(effective)}")
                    return
            elif host_path or host_path_allowed:
                # An empty hostPath means path, which is also where the container sees the node: the host side
                # moves by giving the entry a hostPath, and the container keeps its path.
                new_host_path = target
            elif needed:
                problems.append(
                    f"{node.at('path')}: {effective} does not exist on the host; the driver root has it as {target}, "
                    f"but naming that needs a hostPath, which cdiVersion {too_old!r} does not have"
                )
                return
        if self.root is not None and path.startswith("/") and new_host_path != path:
            same = self.same_device_at_path(node, new_host_path, path, fully)
            if same and (new_host_path or host_path_allowed):
                new_host_path = path
        if new_host_path != host_path:
            if node.get("hostPath") is not None or "hostPath" in node.pointers:
                edits.append(_Edit(node.at("hostPath"), host_path, new_host_path))
            else:
                edits.append(_Edit(pointer_join(node.pointer, "hostPath"), None, new_host_path, node.pointer))

    def same_device_at_path(self, node: GoStruct, host_path: str, path: str, fully: bool) -> bool:
        """Whether the entry's host node may be path itself: path is on the host the very device the entry
        names, and the entry names no node of the resolved root (or none at all)."""
        reference: Optional[DeviceIdentity]
        if host_path:
            if self.host.link_identity(host_path) is not None and self.under_resolved_root(host_path):
                return False
            reference = _spec_identity(node) if fully else self.host.link_identity(host_path)
        else:
            # Without a hostPath a node the library stats is already path; one it does not stat gains a host node
            # that the host really has.
            if not fully:
                return False
            reference = _spec_identity(node)
        if reference is None or reference.type not in ("c", "b", "p"):
            return False
        return self.host.link_identity(path) == reference
