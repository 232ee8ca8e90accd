"""Drop-ins (files named by `imports`) that containerd reads otherwise than they look: a version other than the
root file's, a runtime table without runtime_type, a CDI setting in the other version's plugin (CTD117-CTD119).

These check the collection of a root file and its drop-ins (kinds.containerd.reading); each finding points at the
drop-in's file and line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.containerd.config import ContainerdConfig
from nvidia_oci_hook.kinds.containerd.reading import (
    CONTAINERD_CONFIG,
    ContainerdCollection,
    declared_version,
    effective_config,
)
from nvidia_oci_hook.kinds.containerd.versions import ALL, CDI_KEYS, CRI_RUNTIME, CRI_V2, DEFAULT_RUNTIME, V1X, V2X
from nvidia_oci_hook.kinds.containerd.walk import toml_key
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.containerd.config_view import _first_child, _who
from nvidia_oci_hook.rules.containerd.keys import _find_keys

KINDS = [CONTAINERD_CONFIG]


def _dropins(collection: Any) -> Iterator[tuple[str, Any, ContainerdConfig]]:
    """(path, value, config) of every drop-in that parsed."""
    if not isinstance(collection, ContainerdCollection):
        return
    for document in collection.dropins():
        if document.parsed and isinstance(document.value, dict):
            yield document.path, document.value, ContainerdConfig(document.value)


def _version_1x(collection: ContainerdCollection) -> Optional[int]:
    """The version containerd 1.x reads every file at: the last one any file declares."""
    found = [declared_version(collection.value_of(path)) for path in collection.order]
    return next((v for v in reversed(found) if v is not None), None)


@rule("CTD117", "dropin-version-mismatch", Severity.ERROR, KINDS)
def dropin_version_mismatch(collection: Any, context: Context) -> Iterator[Problem]:
    """A drop-in declares a config version other than the root file's, and containerd breaks on it.

    ## What it checks
    Every file named by the root's `imports` (and theirs) that sets `version`: higher than the root's, or
    `version = 1` under a version 2 root. A drop-in without a `version` line is read at the root's version by
    every release, and is not reported; a lower version under a version 3 root is migrated by containerd 2.x.

    ## Why it matters
    containerd keeps the last version it reads, not the root's. Under a version 2 root, a version 3 drop-in makes
    containerd 1.7 refuse to start (`failed to load TOML from /etc/containerd/conf.d/99-nvidia.toml: unsupported
    config version `3``), containerd 2.3 refuse it (`drop-in config version 3 higher than root config version 2`),
    and containerd 2.0 to 2.2 read the whole configuration as version 3 without migrating the root, so every CRI
    setting of the root's `plugins."io.containerd.grpc.v1.cri"` (its runtimes, `enable_cdi`, registry settings)
    is ignored (`Ignoring unknown key in TOML for plugin`). A `version = 1` drop-in makes containerd 1.6 and 1.7
    read the whole configuration, the root included, as version 1, in which every plugin section named by URI is
    ignored; containerd 2.x migrates that drop-in to the root's version. Measured with `containerd config dump`
    on containerd 1.7.24 and 2.1.9.

    ## Example
    `/etc/containerd/config.toml` with `version = 2` and `imports = ["/etc/containerd/conf.d/*.toml"]`, and
    ```toml
    version = 3
    [plugins."io.containerd.cri.v1.runtime"]
      enable_cdi = true
    ```
    in `/etc/containerd/conf.d/99-nvidia.toml`.

    ## Fix
    Give the drop-in the root's version, with the plugin names of that version (`io.containerd.grpc.v1.cri` in
    version 2), or migrate the root (`containerd config migrate` on containerd 2.x); or drop the drop-in's
    `version` line, which makes it read at the root's version.
    """
    if not isinstance(collection, ContainerdCollection) or collection.root is None:
        return
    root = collection.root_version
    if root is None or root < 2:
        return  # a root without a version is CTD104's and CTD105's
    last = _version_1x(collection)
    last_file = collection.order[-1]
    for path, value, _config in _dropins(collection):
        own = declared_version(value)
        if own is None or own == root or not isinstance(own, int):
            continue
        if own > root:
            effects = []
            if own >= 3 and last is not None and last > 2:
                effects.append(
                    f"containerd 1.7 refuses to start (`failed to load TOML from {last_file}: unsupported config "
                    f"version `{last}``), 1.6 reads the file as version 2"
                )
            if own == 3:
                effects.append(
                    f"containerd 2.0 to 2.2 read the whole configuration as version 3 without migrating the root, "
                    f'so the root\'s CRI settings in [plugins."{CRI_V2}"] (runtimes, enable_cdi, cdi_spec_dirs) are '
                    "ignored (`Ignoring unknown key in TOML for plugin`)"
                )
            else:
                effects.append(
                    "containerd 2.0 to 2.2 refuse it (`expected containerd config version equal to or less than `3``)"
                )
            effects.append(
                f"containerd 2.3 refuses it (`drop-in config version {own} higher than root config version {root}`)"
            )
            message = f"this drop-in declares version {own}, higher than the root file's version {root}: " + "; ".join(
                effects
            )
            series = ALL
        elif own == 1 and root == 2 and last == 1:
            message = (
                "this drop-in declares version 1 under a version 2 root: containerd 1.6 and 1.7 keep the last version "
                "they read and read the whole configuration, the root included, as version 1, ignoring every plugin "
                'section named by URI (such as [plugins."io.containerd.grpc.v1.cri"]); containerd 2.x migrates the '
                "drop-in to version 2 and reads it"
            )
            series = V1X
        else:
            continue
        yield Problem(
            "/version",
            message,
            f"write version = {root} (the root's) with that version's plugin names, or remove the version line",
            path,
            series=series,
        )


def _earlier_type(collection: ContainerdCollection, upto: str, name: str, version: int) -> bool:
    """Whether a file read before `upto` gives runtime `name` a runtime_type, in the CRI plugin of `version`."""
    plugin = CRI_V2 if version <= 2 else CRI_RUNTIME
    for path in collection.order:
        if path == upto:
            return False
        value = collection.value_of(path)
        runtimes = ContainerdConfig(value).plugins.get(plugin) if isinstance(value, dict) else None
        table = runtimes.get("containerd", {}).get("runtimes", {}).get(name) if isinstance(runtimes, dict) else None
        if isinstance(table, dict) and isinstance(table.get("runtime_type"), str):
            return True
    return False


@rule("CTD118", "dropin-runtime-type-missing", Severity.ERROR, KINDS)
def dropin_runtime_type_missing(collection: Any, context: Context) -> Iterator[Problem]:
    """A drop-in's runtime table has no runtime_type, which containerd then leaves empty.

    ## What it checks
    Every `containerd.runtimes.NAME` table of a drop-in's CRI plugin (the plugin of the drop-in's version, or of the
    root's when it has none) without `runtime_type`, unless the only releases that read it are 2.x and an earlier
    file (or, for `runc`, containerd's built-in entry) gives the runtime its type.

    ## Why it matters
    containerd 1.6 and 1.7 replace the root's whole `plugins."io.containerd.grpc.v1.cri"` section with the
    drop-in's: a drop-in meant only to add `options` (`SystemdCgroup`, `BinaryName`) to a runtime leaves it with
    `runtime_type = ""` in `containerd config dump`, and every pod that uses it fails (`container.Runtime.Name must
    be set: invalid argument`); the root's other CRI settings are lost with it. containerd 2.x merges the drop-in's
    table into the earlier one key by key, so the type survives only where an earlier file (or the built-in `runc`
    entry) set it; a runtime that only the drop-in names has an empty type there too. Measured with `containerd
    config dump` on containerd 1.7.24 and 2.1.9.

    ## Example
    ```toml
    version = 2
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
    ```
    as a drop-in of a root that defines the `nvidia` runtime.

    ## Fix
    Add `runtime_type = "io.containerd.runc.v2"` to the drop-in's runtime table; on containerd 1.x, also repeat
    in the drop-in every CRI setting of the root that must stay (or keep them all in one file).
    """
    if not isinstance(collection, ContainerdCollection):
        return
    for path, _value, config in _dropins(collection):
        readers = config.readers
        for runtime in config.runtimes():
            if "runtime_type" in runtime.table:
                continue
            failing = readers & V1X
            kept = runtime.name == DEFAULT_RUNTIME or _earlier_type(collection, path, runtime.name, config.version)
            if not kept:
                failing = readers
            if not failing:
                continue
            why = []
            if failing & V1X:
                why.append(
                    f"{_who(failing & V1X, 'replace')} the root's whole [{toml_key(runtime.path[:2])}] section with "
                    "this file's, so the runtime is left as written here"
                )
            if failing & V2X:
                why.append(f"{_who(failing & V2X, 'find')} no earlier file that gives it a type")
            yield Problem(
                _first_child(runtime.pointer, runtime.table),
                f'runtime "{runtime.name}" has no runtime_type in this drop-in: {"; ".join(why)}; its runtime_type '
                'is empty, and every pod that uses it fails to start ("container.Runtime.Name must be set")',
                f'add runtime_type = "io.containerd.runc.v2" to [{toml_key(runtime.path)}] in this file',
                path,
                series=frozenset(failing),
            )


@rule("CTD119", "dropin-cdi-setting-ignored", Severity.ERROR, KINDS)
def dropin_cdi_setting_ignored(collection: Any, context: Context) -> Iterator[Problem]:
    """A drop-in sets enable_cdi or cdi_spec_dirs in a plugin that containerd does not read them from.

    ## What it checks
    Every `enable_cdi` and `cdi_spec_dirs` key of a drop-in against the CRI plugin of the version containerd reads
    the drop-in at: its own `version`, or the root's when it has none. Version 2:
    `plugins."io.containerd.grpc.v1.cri"`; version 3: `plugins."io.containerd.cri.v1.runtime"`.

    ## Why it matters
    containerd ignores the key anywhere else: a version 3 drop-in (or one without a version under a version 3
    root) that uses the version 2 name leaves CDI on containerd 2.x's defaults (`Ignoring unknown key in TOML for
    plugin`, and `cdi_spec_dirs = ['/etc/cdi', '/var/run/cdi']` in `containerd config dump`); under a version 2
    root, `plugins."io.containerd.cri.v1.runtime"` is read by containerd 2.x only, and 1.7 keeps CDI off. GPU pods
    whose devices are requested through CDI then start without them, or fail with `unresolvable CDI devices`.
    Measured with `containerd config dump` on containerd 1.7.24 and 2.1.9.

    ## Example
    `/etc/containerd/config.toml` with `version = 3`, and a drop-in without a version line:
    ```toml
    [plugins."io.containerd.grpc.v1.cri"]
      cdi_spec_dirs = ["/var/run/cdi"]
    ```

    ## Fix
    Put the key in the plugin of the version the drop-in is read at: `[plugins."io.containerd.cri.v1.runtime"]`
    for version 3, `[plugins."io.containerd.grpc.v1.cri"]` for version 2.
    """
    if not isinstance(collection, ContainerdCollection):
        return
    modern = ContainerdConfig(effective_config(collection, "2.1")).cri or {}
    for path, value, config in _dropins(collection):
        right = pointer_join("/plugins", config.cri_plugin)
        read_at = (
            f"version {config.version} (the root file's: this file has no version line)"
            if config.inherited_version is not None
            else f"version {config.version}"
        )
        for pointer, key_path, key in _find_keys(value, CDI_KEYS):
            parent = pointer[: pointer.rfind("/")]
            if parent == right:
                continue
            name = key.casefold()
            if config.version == 2 and parent == pointer_join("/plugins", CRI_RUNTIME):
                effect = (
                    f"containerd 1.6 and 1.7 ignore it (they have no such plugin); only 2.x reads it there, "
                    f"as {name} = {_shown(modern.get(name))}"
                )
            else:
                effect = "containerd ignores it (2.x logs `Ignoring unknown key in TOML for plugin`)"
            yield Problem(
                pointer,
                f"{toml_key(key_path)} is not where containerd reads {name} in a drop-in read at {read_at}, "
                f"[{toml_key(('plugins', config.cri_plugin))}]: {effect}",
                f"move {name} to [{toml_key(('plugins', config.cri_plugin))}] in this file",
                path,
            )


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    return repr(value)
