"""What the release makes of the file itself: refused (NCT001), keys dropped (NCT002), a mode it does not have
(NCT003), a value the hook refuses (NCT004), a value that falls back without a word (NCT005), no way left for an
unprivileged container to ask for GPUs (NCT006)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.toolkit.decode import Refusal
from nvidia_oci_hook.kinds.toolkit.releases import newest
from nvidia_oci_hook.node.toolkit import ACCEPT_ENVVAR, ACCEPT_MOUNTS
from nvidia_oci_hook.rules.base import Context
from nvidia_oci_hook.rules.toolkit.view import EVERY_GPU_CONTAINER, toolkit_rule, view

LOAD_PREFIX = "error loading config: "
UNMARSHAL_PREFIX = "failed to unmarshal config: "
LDCONFIG = "nvidia-container-cli.ldconfig"
ALLOW_LDCONFIG = "features.allow-ldconfig-from-container"
# The driver capabilities the hook accepts in supported-driver-capabilities (internal/config/image/capabilities.go).
DRIVER_CAPABILITIES = frozenset({"compute", "compat32", "graphics", "utility", "video", "display", "ngx"})
_KNOWN_NEWEST = frozenset(newest().keys)


@toolkit_rule("NCT001", "toolkit-config-refused", Severity.ERROR)
def config_refused(value: Any, context: Context) -> Iterator[Problem]:
    """The toolkit refuses to load its config.toml, so every GPU container through it fails.

    ## What it checks
    What the release judging the file stops at while it loads it: TOML its decoder (pelletier/go-toml v1) does
    not parse, a value of another type than the release's field (go-toml converts strictly: `"true"` is no
    bool, `1` is no string), and the values the release validates at load (from 1.17.3, an
    `nvidia-container-cli.ldconfig` path without the `@` that marks it as the host's, unless
    `features.allow-ldconfig-from-container = true`).

    ## Why it matters
    `nvidia-container-runtime`, `nvidia-container-runtime-hook` and `nvidia-ctk` load the file before anything
    else and stop on the first error: the runtime says `error loading config: failed to unmarshal config: (4, 1):
    Can't convert true(string) to bool` and exits, so the engine's create fails for every container whose
    handler is NVIDIA's runtime, GPU or not; under the legacy hook every GPU container fails at its prestart hook.
    A k3s or containerd template given as the toolkit's file (`keys cannot contain { character`) is the
    commonest form.

    ## Example
    ```toml
    accept-nvidia-visible-devices-envvar-when-unprivileged = "false"
    ```

    ## Fix
    Write the value with its type (`= false`), the ldconfig path as `@/sbin/ldconfig`, or regenerate the file:
    `nvidia-ctk config default --output=/etc/nvidia-container-runtime/config.toml`.
    """
    current = view(value, context)
    refusals = list(current.decoded.refusals)
    ldconfig = current.value(LDCONFIG)
    if isinstance(ldconfig, str):
        refused = current.release.loading.ldconfig_refusal(ldconfig, current.value(ALLOW_LDCONFIG) is True)
        if refused is not None:
            # errors.Join's two lines, as one line of a finding.
            refusals.append(Refusal(current.decoded.pointer(LDCONFIG), refused.replace("\n", "\\n")))
    for index, refusal in enumerate(refusals):
        said = f"`{LOAD_PREFIX}{UNMARSHAL_PREFIX if 'convert' in refusal.text else ''}{refusal.text}`"
        order = "" if index == 0 else " once the errors before it are fixed"
        yield Problem(
            refusal.pointer,
            f"{current.label} refuses to load this file{order}: {said}; {EVERY_GPU_CONTAINER}",
            "write the value the release's field takes (see `nvidia-ctk config default` for each key's form)",
        )


@toolkit_rule("NCT002", "toolkit-key-ignored", Severity.WARNING)
def key_ignored(value: Any, context: Context) -> Iterator[Problem]:
    """A key the toolkit release does not read: its decoder drops it without a word.

    ## What it checks
    Every key and table of the file that no field of the release's configuration names (go-toml v1 matches the
    key as written, or all in capitals), with the known key it most resembles; keys a later release added
    (`[nvidia-container-runtime.modes.jit-cdi]` before 1.18) are named with the release that reads them.

    ## Why it matters
    The toolkit never says it ignored a key: the setting stays at its default. A misspelt
    `accept-nvidia-visible-devices-envvar-when-unprivileged` leaves every GPU on the node to any pod that sets
    `NVIDIA_VISIBLE_DEVICES=all`; a `spec-dir` leaves CDI mode reading `/etc/cdi` and `/var/run/cdi`.

    ## Example
    ```toml
    [nvidia-container-runtime.modes.cdi]
    spec-dir = ["/opt/cdi"]
    ```

    ## Fix
    Spell the key as the release reads it (`spec-dirs`), in its table, or delete it.
    """
    current = view(value, context)
    for unknown in current.decoded.unknown:
        default = ""
        if unknown.nearest is not None:
            fallback = current.release.defaults.get(unknown.nearest)
            default = f"; {unknown.nearest} stays at its default" + (f" ({fallback!r})" if fallback is not None else "")
        later = "" if unknown.key not in _KNOWN_NEWEST else f" (toolkit {current.release.version} predates it)"
        hint = (
            f"did you mean {unknown.nearest}?"
            if unknown.nearest
            else "delete it, or move it to the table that reads it"
        )
        yield Problem(
            unknown.pointer,
            f"{unknown.key} is not a key {current.label} reads{later}: it is dropped without a word{default}",
            hint,
        )


@toolkit_rule("NCT003", "toolkit-mode-invalid", Severity.ERROR)
def mode_invalid(value: Any, context: Context) -> Iterator[Problem]:
    """`nvidia-container-runtime.mode` is a mode the release does not have.

    ## What it checks
    The mode against the release's own: `auto`, `legacy`, `csv`, `cdi`, and from 1.18.0 `jit-cdi`.

    ## Why it matters
    The runtime loads the file, then fails every container it is asked to create: `failed to create NVIDIA
    Container Runtime: failed to construct OCI spec modifier: invalid mode "cdi2"` (an empty mode: `a mode must be
    specified`). `jit-cdi` written for a node still on 1.17 is the usual cause after a GPU Operator values change.

    ## Example
    ```toml
    [nvidia-container-runtime]
    mode = "jit-cdi"   # on toolkit 1.17
    ```

    ## Fix
    Use a mode the release has (`auto` lets it choose), or upgrade the toolkit.
    """
    current = view(value, context)
    mode = current.value("nvidia-container-runtime.mode")
    if not isinstance(mode, str) or mode == "auto" or mode in current.release.modes:
        return
    said = current.release.invalid_mode_text(mode)
    yield Problem(
        current.decoded.pointer("nvidia-container-runtime.mode"),
        f"{current.label} has no mode {mode!r} (it has auto, {', '.join(sorted(current.release.modes))}): the "
        f"runtime fails every container it creates: `{said}`",
        'set mode = "auto", or one of the release\'s modes',
    )


@toolkit_rule("NCT004", "toolkit-hook-capabilities-invalid", Severity.ERROR)
def hook_capabilities_invalid(value: Any, context: Context) -> Iterator[Problem]:
    """`supported-driver-capabilities` names a capability the hook does not know, and the hook panics.

    ## What it checks
    Each comma-separated word of `supported-driver-capabilities` against the driver capabilities the toolkit
    has (`compute`, `compat32`, `graphics`, `utility`, `video`, `display`, `ngx`), or `all`.

    ## Why it matters
    The runtime loads the file, but the legacy hook, which it adds to every GPU container in legacy mode, checks
    the value and panics (`Invalid value for config option 'supported-driver-capabilities'`): the container's
    prestart hook fails and the container does not start.

    ## Example
    `supported-driver-capabilities = "compute,utility,gpu"`

    ## Fix
    List only capabilities the toolkit has, or delete the key (the default is all of them).
    """
    current = view(value, context)
    text = current.value("supported-driver-capabilities")
    if not isinstance(text, str) or text == "all":
        return
    unknown = [word for word in text.split(",") if word.strip() and word.strip() not in DRIVER_CAPABILITIES]
    if unknown:
        yield Problem(
            current.decoded.pointer("supported-driver-capabilities"),
            f"{', '.join(unknown)} is not a driver capability: the legacy hook panics on this value (`Invalid value "
            "for config option 'supported-driver-capabilities'`), and every GPU container it serves fails",
            f"keep only {', '.join(sorted(DRIVER_CAPABILITIES))}, or delete the key",
        )


@toolkit_rule("NCT005", "toolkit-value-falls-back", Severity.WARNING)
def value_falls_back(value: Any, context: Context) -> Iterator[Problem]:
    """A value the toolkit does not take, replaced by its default without an error.

    ## What it checks
    `nvidia-container-runtime.log-level` that is not a logrus level (the runtime logs at `info` and only warns in
    its own log), `nvidia-container-runtime.modes.legacy.cuda-compat-mode` that is not `ldconfig`, `mount`,
    `hook` or `disabled` (the hook treats it as unset).

    ## Why it matters
    Nothing fails where the value is written: the node just runs with something other than what was meant, and
    the difference shows up much later (debug logs that never come, forward-compatible CUDA libraries not used).

    ## Example
    `log-level = "verbose"`

    ## Fix
    Use one of the values listed, or delete the key.
    """
    current = view(value, context)
    level = current.value("nvidia-container-runtime.log-level")
    levels = ("panic", "fatal", "error", "warn", "warning", "info", "debug", "trace")
    if isinstance(level, str) and level.lower() not in levels:
        yield Problem(
            current.decoded.pointer("nvidia-container-runtime.log-level"),
            f"log-level {level!r} is not a level: the runtime logs at info (`invalid log-level '{level}'` in its "
            "own log only)",
            f"use one of {', '.join(levels)}",
        )
    compat = current.value("nvidia-container-runtime.modes.legacy.cuda-compat-mode")
    if isinstance(compat, str) and compat and compat not in ("ldconfig", "mount", "hook", "disabled"):
        yield Problem(
            current.decoded.pointer("nvidia-container-runtime.modes.legacy.cuda-compat-mode"),
            f"cuda-compat-mode {compat!r} is not a mode: the hook treats it as unset, and unless "
            "features.allow-cuda-compat-libs-from-container is true it disables CUDA forward compatibility",
            "use ldconfig, mount, hook or disabled",
        )


@toolkit_rule("NCT006", "toolkit-unprivileged-requests-ignored", Severity.ERROR)
def unprivileged_requests_ignored(value: Any, context: Context) -> Iterator[Problem]:
    """Unprivileged containers can ask for GPUs neither by variable nor by volume mounts.

    ## What it checks
    `accept-nvidia-visible-devices-envvar-when-unprivileged = false` with
    `accept-nvidia-visible-devices-as-volume-mounts` false (its default).

    ## Why it matters
    The toolkit then ignores `NVIDIA_VISIBLE_DEVICES` in every unprivileged container and has no other list to
    read: the container starts without its GPUs, and only the runtime's log says so (`Ignoring devices requested
    by environment variable(s) in unprivileged container: [NVIDIA_VISIBLE_DEVICES]`). The device plugin's default
    strategy (`envvar`) and `docker run -e NVIDIA_VISIBLE_DEVICES` both ask that way; only privileged containers,
    and devices the engine injects itself from CDI names, still get GPUs.

    ## Example
    ```toml
    accept-nvidia-visible-devices-envvar-when-unprivileged = false
    ```

    ## Fix
    Also set `accept-nvidia-visible-devices-as-volume-mounts = true` and run the device plugin with
    `--device-list-strategy=volume-mounts`, or hand GPUs out as CDI names (`cdi-cri`); ignore this code where GPUs
    reach containers only as CDI devices.
    """
    current = view(value, context)
    if current.value(ACCEPT_ENVVAR) is False and current.value(ACCEPT_MOUNTS) is not True:
        yield Problem(
            current.decoded.pointer(ACCEPT_ENVVAR),
            f"{ACCEPT_ENVVAR} = false and {ACCEPT_MOUNTS} is not true: every unprivileged container asking for GPUs "
            "with NVIDIA_VISIBLE_DEVICES starts without them (`Ignoring devices requested by environment variable(s) "
            "in unprivileged container`)",
            f"{ACCEPT_MOUNTS} = true, with the device plugin's --device-list-strategy=volume-mounts",
        )
