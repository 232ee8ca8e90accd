"""Config versions and plugin names: a version no containerd reads, a file read as version 1, a version only
containerd 2.x reads, plugins not named as the version wants (CTD002, CTD003, CTD104, CTD105, CTD106)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.containerd.config import ContainerdConfig
from nvidia_oci_hook.kinds.containerd.reading import DropIn
from nvidia_oci_hook.kinds.containerd.versions import (
    ALL,
    CRI_IMAGES,
    CRI_RUNTIME,
    CRI_V1,
    CRI_V2,
    MAX_CONFIG_VERSION,
    V1X,
    V2X,
    refuses_version,
    series_of,
)
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.containerd.config_view import KINDS, _config, _first_child, _who, schema_rule


def _reject_version(config: ContainerdConfig) -> Optional[tuple[str, frozenset[str]]]:
    """What is wrong with the config version, and the series that refuse it; None where nothing is."""
    raw = config.declared_version
    if not isinstance(raw, int) or isinstance(raw, bool):
        return None  # a wrong type is CTD001's
    if raw < 0:
        return (
            f"config version {raw} is negative: containerd 2.x crashes at start-up migrating it "
            "(panic: runtime error: index out of range [-1]); 1.6 and 1.7 read it as version 1"
        ), V2X
    newest = max(v for v in MAX_CONFIG_VERSION.values() if v is not None)
    if raw > newest:
        return (
            f"no containerd release reads config version {raw} (the newest is {newest}, containerd 2.3): "
            f'containerd 2.0 to 2.2 refuse it ("expected containerd config version equal to or less than `3`, '
            f'got `{raw}`"), 1.7.20 and later refuse it ("unsupported config version `{raw}`"), and 1.6 reads it as '
            "version 2"
        ), ALL - {"1.6"}
    return None


@schema_rule("CTD002", "unsupported-config-version")
def unsupported_config_version(value: Any, context: Context) -> Iterator[Problem]:
    """The config version is one no containerd release reads.

    ## What it checks
    That `version` is not negative and not above 4, the highest version any containerd release reads
    (1 and 2: containerd 1.x; 3: 2.0 and later; 4: 2.3 and later).

    ## Why it matters
    containerd 2.0 to 2.2 refuse a version above 3 (`expected containerd config version equal to or less
    than `3`, got `5``), 1.7.20 and later refuse a version above 2 (`unsupported config version `5``), and
    containerd 2.x crashes at start-up on a negative version (`panic: runtime error: index out of range [-1]`,
    while `containerd config dump` still succeeds). containerd 1.6 checks no upper bound and reads any version
    from 2 up as version 2, so the same file behaves differently on every node.

    ## Example
    `version = 5`, or `version = -1`.

    ## Fix
    Use `version = 2` for containerd 1.6 and 1.7, `version = 3` for containerd 2.x; `containerd config
    default` prints a file of the version the installed containerd wants.
    """
    config = _config(value, context)
    hint = "set version = 2 (containerd 1.x) or version = 3 (containerd 2.x)"
    rejected = _reject_version(config)
    if rejected:
        message, series = rejected
        yield Problem("/version", message, hint, series=series)
    release, declared = context.containerd_release, config.declared_version
    if release is None or not isinstance(declared, int) or isinstance(declared, bool) or declared < 1:
        return
    said = refuses_version(release, declared)
    judged = series_of(release)
    if said and not (rejected and judged in rejected[1]):
        yield Problem(
            "/version",
            f'containerd {release} refuses config version {declared} ("{said}" at start-up and in `containerd config '
            "dump`)",
            hint,
            series=frozenset({judged}),
        )


def _uri_refused_by_1x(name: str) -> frozenset[str]:
    """The 1.x series that reject a plugin URI in a version 2 file: 1.6 one of fewer than four dotted parts, 1.7
    also one that does not start with io.containerd."""
    if name.count(".") < 3:
        return V1X
    return frozenset() if name.startswith("io.containerd.") else frozenset({"1.7"})


@schema_rule("CTD003", "invalid-plugin-uri")
def invalid_plugin_uri(value: Any, context: Context) -> Iterator[Problem]:
    """A plugin is named by a short id or a malformed URI where containerd requires a full URI.

    ## What it checks
    In a file of config version 2 or later: every key of `plugins` and every entry of `disabled_plugins` and
    `required_plugins` for version 2, which containerd 1.6 and 1.7 require to be a URI of the form
    `io.containerd.<type>.<version>.<id>`; and every entry of `disabled_plugins` and `required_plugins`, which
    containerd 2.x requires to contain a dot.

    ## Why it matters
    containerd refuses to start: `failed to load TOML from /etc/containerd/config.toml: invalid plugin key
    URI "cri" expect io.containerd.x.vx` (or `invalid disabled plugin URI`, `invalid required plugin URI`).
    This is the usual result of copying a version 1 snippet (`[plugins.cri]`) into a version 2 file.

    ## Example
    ```toml
    version = 2
    [plugins.cri.containerd]
      default_runtime_name = "nvidia"
    ```

    ## Fix
    Use the full plugin URI: `[plugins."io.containerd.grpc.v1.cri".containerd]` in a version 2 file,
    `[plugins."io.containerd.cri.v1.runtime".containerd]` in a version 3 file; `disabled_plugins =
    ["io.containerd.grpc.v1.cri"]`.
    """
    config = _config(value, context)
    if config.version < 2 or not config.version_valid:
        return
    if config.version == 2:
        for name in config.plugins:
            refused = _uri_refused_by_1x(name)
            if refused:
                yield Problem(
                    pointer_join("/plugins", name),
                    f'plugin section "{name}" is not named by a plugin URI: {_who(refused, "refuse")} to load this '
                    f'file (`invalid plugin key URI "{name}" expect io.containerd.x.vx`); 2.x ignores it',
                    _uri_hint(name, config),
                    series=refused,
                )
    for key, label in (("disabled_plugins", "disabled"), ("required_plugins", "required")):
        entries = config.value.get(key)
        if not isinstance(entries, list):
            continue
        for index, entry in enumerate(entries):
            if not isinstance(entry, str):
                continue
            refusing: set[str] = set()
            if config.version == 2:
                refusing |= _uri_refused_by_1x(entry)
            if "." not in entry:
                refusing |= V2X & (config.readers or V2X)
            if refusing:
                yield Problem(
                    f"/{key}/{index}",
                    f'{key} entry "{entry}" is not a plugin URI: {_who(refusing, "refuse")} to load this '
                    f'file (`invalid {label} plugin URI "{entry}" expect io.containerd.x.vx`)',
                    _uri_hint(entry, config),
                    series=frozenset(refusing),
                )


_SHORT_IDS = {
    "cri": CRI_V2,
    "cgroups": "io.containerd.monitor.v1.cgroups",
    "scheduler": "io.containerd.gc.v1.scheduler",
    "bolt": "io.containerd.metadata.v1.bolt",
    "overlayfs": "io.containerd.snapshotter.v1.overlayfs",
    "linux": "io.containerd.runtime.v1.linux",
    "opt": "io.containerd.internal.v1.opt",
    "restart": "io.containerd.internal.v1.restart",
}


def _uri_hint(name: str, config: ContainerdConfig) -> str:
    full = _SHORT_IDS.get(name)
    if name == "cri" and config.version >= 3:
        return f'use "{CRI_RUNTIME}" (runtimes, CDI) or "{CRI_IMAGES}" (registry, snapshotter) in a version 3 file'
    if full:
        return f'use the full URI "{full}"'
    return "use the full URI, io.containerd.<type>.<version>.<id>; `containerd config default` lists them"


def _uses_uri_names(config: ContainerdConfig) -> bool:
    return any(name.startswith("io.containerd.") for name in config.plugins)


@rule("CTD104", "missing-config-version", Severity.ERROR, KINDS)
def missing_config_version(value: Any, context: Context) -> Iterator[Problem]:
    """A file without `version = 2` names its plugins by URI, so containerd ignores those sections.

    ## What it checks
    That a file whose `plugins` sections use full URIs (`plugins."io.containerd.grpc.v1.cri"`) declares its
    version. Without a `version` line (or with `version = 0` or `1`), containerd reads the file as version 1.

    ## Why it matters
    In a version 1 file containerd 1.6 and 1.7 look plugins up by their short id (`plugins.cri`), so every
    section named by URI is ignored, silently: no runtimes, no `enable_cdi`, no registry settings. containerd
    2.0 to 2.2 take such a file for a version 3 one, where `io.containerd.grpc.v1.cri` holds only the streaming
    server settings, and ignore its CRI runtime settings (2.x logs `Ignoring unknown key in TOML for plugin`);
    only 2.3 migrates them. A drop-in written by a tool that assumed `version = 2` in the main file fails this way
    when the main file has no version line.

    ## Example
    ```toml
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "nvidia"
    ```

    ## Fix
    Add `version = 2` as the first line (containerd 1.6, 1.7), or write a version 3 file for containerd 2.x.
    """
    config = _config(value, context)
    if config.version > 1 or not _uses_uri_names(config):
        return
    said = "has no version line" if config.declared_version is None else f"declares version {config.declared_version}"
    names = ", ".join(f'"{name}"' for name in config.plugins if name.startswith("io.containerd."))
    yield Problem(
        "/version" if config.declared_version is not None else _first_child("/plugins", config.plugins),
        f"this file {said}, so containerd reads it as version 1: containerd 1.6 and 1.7 ignore the plugin "
        f"sections named by URI ({names}) and 2.0 to 2.2 ignore their CRI runtime settings",
        "add version = 2 at the top of the file (containerd 1.x), or write a version 3 file (containerd 2.x)",
    )


@rule("CTD105", "config-version-1", Severity.WARNING, KINDS)
def config_version_1(value: Any, context: Context) -> Iterator[Problem]:
    """A version 1 file (no `version` line, or `version = 1`) with plugin sections.

    ## What it checks
    A file read as version 1 whose plugin sections use short ids (`plugins.cri`).

    ## Why it matters
    containerd 1.6 and 1.7 read it, with a deprecation warning. containerd 2.0 to 2.2 rename `plugins.cri` to
    `io.containerd.grpc.v1.cri` but then read the file as version 3, in which that plugin holds only the
    streaming server settings: every runtime, `default_runtime_name`, `enable_cdi` and registry setting of the
    file is ignored (measured on containerd 2.1.9, which logs only `Ignoring unknown key in TOML for plugin`),
    so an upgrade silently drops the GPU runtime. containerd 2.3 migrates the file.

    ## Example
    ```toml
    [plugins.cri.containerd]
      default_runtime_name = "nvidia"
    ```

    ## Fix
    Convert the file to version 2 (`version = 2`, and `plugins.cri` becomes `plugins."io.containerd.grpc.v1.cri"`)
    while on containerd 1.x, or run `containerd config migrate` with containerd 2.x and use its output.
    """
    if isinstance(value, DropIn) and (value.root_version or 0) >= 2:
        return  # containerd 2.x migrates it to the root's version; what 1.x does is CTD117's
    config = _config(value, context)
    if config.version > 1 or not config.plugins or _uses_uri_names(config):
        return
    lost = (
        "; containerd 2.0 to 2.2 ignore every CRI runtime setting of plugins.cri in it (2.3 migrates them)"
        if CRI_V1 in config.plugins
        else ""
    )
    said = "has no version line" if config.declared_version is None else f"declares version {config.declared_version}"
    yield Problem(
        "/version" if config.declared_version is not None else _first_child("/plugins", config.plugins),
        f"this file {said}, so containerd reads it as the deprecated version 1{lost}",
        'write version = 2 and name plugins by URI (plugins."io.containerd.grpc.v1.cri")',
    )


@rule("CTD106", "config-version-needs-containerd-2", Severity.INFO, KINDS)
def config_version_needs_containerd_2(value: Any, context: Context) -> Iterator[Problem]:
    """A version 3 or 4 file, which only containerd 2.x reads.

    ## What it checks
    `version = 3` (containerd 2.0 and later) or `version = 4` (containerd 2.3 and later). This tool does not
    know which containerd the node runs, so this is information.

    ## Why it matters
    containerd 1.7.20 and later refuse the file (`unsupported config version `3``). containerd 1.6 and older 1.7
    releases start, but know none of the version 3 plugin names (`io.containerd.cri.v1.runtime`,
    `io.containerd.cri.v1.images`), so every runtime, CDI and registry setting is silently ignored and pods run
    with the built-in `runc` runtime. containerd 2.0 to 2.2 refuse version 4.

    ## Example
    `version = 3` on Debian 12, whose containerd is 1.6.20.

    ## Fix
    Check `containerd --version`; for containerd 1.x, write a version 2 file
    (`plugins."io.containerd.grpc.v1.cri"`).
    """
    config = _config(value, context)
    if config.inherited_version is not None:
        return  # a drop-in read at its root file's version: the root says so
    declared = config.declared_version
    version = declared if isinstance(declared, int) and not isinstance(declared, bool) else config.version
    if version == 3:
        yield Problem(
            "/version",
            "config version 3 is read by containerd 2.0 and later only: containerd 1.7.20 and later refuse the file "
            '("unsupported config version `3`"), 1.6 and older 1.7 releases ignore its CRI plugin sections',
            "on containerd 1.x, write a version 2 file",
            series=V1X,
        )
    elif version == 4:
        yield Problem(
            "/version",
            "config version 4 is read by containerd 2.3 and later only: containerd 2.0 to 2.2 and 1.7.20 and later "
            "refuse the file",
            "on containerd 2.0 to 2.2, write a version 3 file",
            series=ALL - {"2.3"},
        )
