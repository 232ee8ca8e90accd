"""The config as containerd reads it: its version, its CRI plugin and runtimes; where a program it names is found."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.containerd.structs import PLUGIN_TREE, PLUGINS, plugin_tables, server_table
from nvidia_oci_hook.kinds.containerd.versions import (
    CRI_RUNTIME,
    CRI_V1,
    CRI_V2,
    DEFAULT_RUNTIME,
    READERS,
    RUNC_TYPES,
    V1X,
    V2X,
)
from nvidia_oci_hook.kinds.containerd.walk import KeyIssue, TypeIssue, Walk, walk_table


@dataclass(frozen=True)
class Runtime:
    """One containerd.runtimes entry of the CRI plugin this config's version reads."""

    name: str
    pointer: str
    path: tuple[str, ...]
    table: Mapping[str, Any]

    @property
    def type(self) -> Optional[str]:
        value = self.table.get("runtime_type")
        return value if isinstance(value, str) else None

    @property
    def is_runc(self) -> bool:
        """Whether containerd decodes its options as the runc shim's (a missing type counts for `runc`)."""
        return self.type in RUNC_TYPES or (self.type is None and self.name == DEFAULT_RUNTIME)

    @property
    def options(self) -> Optional[Mapping[str, Any]]:
        value = self.table.get("options")
        return value if isinstance(value, dict) else None

    def option(self, name: str) -> tuple[Optional[str], Any]:
        """(the key as spelled in the file, its value) for a runc option, matched as containerd matches it."""
        options = self.options or {}
        if name in options:
            return name, options[name]
        for key, value in options.items():
            if key.casefold() == name.casefold():
                return key, value
        return None, None


# The plugins of containerd 2.x that take a configuration: the tables `containerd config default` prints
# (measured on 2.1.9).
CONFIGURED_PLUGINS_2X = frozenset(
    {
        "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime", "io.containerd.differ.v1.erofs",
        "io.containerd.gc.v1.scheduler", "io.containerd.grpc.v1.cri", "io.containerd.image-verifier.v1.bindir",
        "io.containerd.internal.v1.opt", "io.containerd.internal.v1.tracing", "io.containerd.metadata.v1.bolt",
        "io.containerd.monitor.container.v1.restart", "io.containerd.monitor.task.v1.cgroups",
        "io.containerd.nri.v1.nri", "io.containerd.runtime.v2.task", "io.containerd.service.v1.diff-service",
        "io.containerd.service.v1.tasks-service", "io.containerd.shim.v1.manager",
        "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.btrfs",
        "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs",
        "io.containerd.snapshotter.v1.native", "io.containerd.snapshotter.v1.overlayfs",
        "io.containerd.tracing.processor.v1.otlp", "io.containerd.transfer.v1.local",
    }
)  # fmt: skip


class ContainerdConfig:
    def __init__(self, value: Any, read_as: Optional[int] = None) -> None:
        """read_as: the config version a release reads the file at where it is not the declared one (containerd
        1.6 reads a version 3 file as version 2)."""
        self.value: Mapping[str, Any] = value if isinstance(value, dict) else {}
        raw = self.value.get("version")
        self.declared_version: Any = raw
        # A drop-in (reading.DropIn) without a version of its own is read at its root file's.
        self.inherited_version: Optional[int] = (
            getattr(value, "root_version", None) if raw is None or (type(raw) is int and raw == 0) else None
        )
        if self.inherited_version is not None:
            raw = self.inherited_version
        # containerd treats a missing version, and 0, as version 1.
        self.version: int = raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 1
        if read_as is not None:
            self.version = read_as
        self.version_valid = raw is None or (isinstance(raw, int) and not isinstance(raw, bool))
        plugins = self.value.get("plugins")
        self.plugins: Mapping[str, Any] = plugins if isinstance(plugins, dict) else {}

    @property
    def readers(self) -> frozenset[str]:
        return READERS.get(self.version, frozenset())

    @property
    def cri_plugin(self) -> str:
        """The plugin whose table holds enable_cdi, cdi_spec_dirs and containerd.runtimes for this version."""
        if self.version <= 1:
            return CRI_V1
        if self.version == 2:
            return CRI_V2
        return CRI_RUNTIME

    @property
    def cri_pointer(self) -> str:
        return pointer_join("/plugins", self.cri_plugin)

    @property
    def cri(self) -> Optional[Mapping[str, Any]]:
        table = self.plugins.get(self.cri_plugin)
        return table if isinstance(table, dict) else None

    def cri_containerd(self) -> Optional[Mapping[str, Any]]:
        cri = self.cri or {}
        table = cri.get("containerd")
        return table if isinstance(table, dict) else None

    def runtimes_table(self) -> Optional[Mapping[str, Any]]:
        table = (self.cri_containerd() or {}).get("runtimes")
        return table if isinstance(table, dict) else None

    @property
    def runtimes_path(self) -> tuple[str, ...]:
        return ("plugins", self.cri_plugin, "containerd", "runtimes")

    def runtimes(self) -> list[Runtime]:
        base = f"{self.cri_pointer}/containerd/runtimes"
        path = self.runtimes_path
        return [
            Runtime(name, pointer_join(base, name), (*path, name), table)
            for name, table in (self.runtimes_table() or {}).items()
            if isinstance(table, dict)
        ]

    def walk(self) -> Walk:
        """Wrong types and unknown keys in the top level and in the CRI plugin sections."""
        out = Walk()
        table, readers = server_table(self.version)
        walk_table(self.value, table, "", (), readers, out)
        for name, (schema, plugin_readers) in plugin_tables(self.version).items():
            section = self.plugins.get(name)
            if section is None:
                continue
            pointer, path = pointer_join("/plugins", name), ("plugins", name)
            if not isinstance(section, dict):
                out.types.append(TypeIssue(pointer, path, section, schema, schema.go, plugin_readers))
                continue
            walk_table(section, schema, pointer, path, plugin_readers, out)
        if self.version >= 3:
            # containerd 2.x looks plugins up by URI; a name without a dot matches none.
            for name in self.plugins:
                if "." not in name:
                    pointer, path = pointer_join("/plugins", name), ("plugins", name)
                    out.keys.append(KeyIssue(pointer, path, name, PLUGINS, readers, readers))
        # containerd 1.x decodes every plugins entry into a TOML tree before it knows which plugins exist; 2.x
        # re-encodes the entry of each plugin that takes a configuration, which fails for anything but a table.
        known = plugin_tables(self.version)
        for name, section in self.plugins.items():
            if name in known or isinstance(section, dict):
                continue
            series = (V1X if self.version <= 2 else frozenset()) | (
                V2X if name in CONFIGURED_PLUGINS_2X else frozenset()
            )
            if series:
                pointer, path = pointer_join("/plugins", name), ("plugins", name)
                out.types.append(TypeIssue(pointer, path, section, PLUGIN_TREE, "toml.Tree", frozenset(series)))
        return out


def cdi_spec_dirs(value: Any) -> Optional[tuple[str, ...]]:
    """The cdi_spec_dirs containerd reads from this config (in the plugin its version uses), or None if unset."""
    table = ContainerdConfig(value).cri or {}
    dirs = table.get("cdi_spec_dirs")
    if isinstance(dirs, list) and all(isinstance(item, str) for item in dirs):
        return tuple(dirs)
    return None


def cached_config(value: Any, memo: dict[str, Any]) -> ContainerdConfig:
    if "containerd-config" not in memo:
        memo["containerd-config"] = ContainerdConfig(value)
    config: ContainerdConfig = memo["containerd-config"]
    return config


# ---------------------------------------------------------------------------------------------------------------
# Where a program named by the config is looked up

# containerd's PATH under systemd (and Debian's containerd.service), which the runc shim inherits.
SERVICE_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def program_candidates(name: str) -> list[str]:
    if "/" in name:
        return [posixpath.normpath(name)] if name.startswith("/") else []
    return [posixpath.join(directory, name) for directory in SERVICE_PATH]
