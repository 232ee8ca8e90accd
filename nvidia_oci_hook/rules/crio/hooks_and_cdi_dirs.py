"""The directories cri-o reads OCI hooks (CRO102) and CDI specs (CRO104) from."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.crio.key_table import HOOKS_DIR_DEFAULT
from nvidia_oci_hook.rules.base import Context
from nvidia_oci_hook.rules.crio.config_view import crio_rule, quote_list, strings_at, view

# Where the packages install the guard's hooks.d file (hooks/ in the source tree).
PROJECT_HOOKS_DIR = "/usr/share/containers/oci/hooks.d"
PROJECT_HOOK_FILE = "nvidia-oci-hook-guard.json"


def _normal(path: str) -> str:
    return posixpath.normpath(path) if path.startswith("/") else path


@crio_rule("CRO102", "hooks-dir-misses-hook", Severity.WARNING)
def hooks_dir_misses_hook(value: Any, context: Context) -> Iterator[Problem]:
    """hooks_dir leaves out the directory where nvidia-oci-hook installs its hook.

    ## What it checks
    That the effective `hooks_dir` contains `/usr/share/containers/oci/hooks.d`, where this project's packages
    install `nvidia-oci-hook-guard.json`. cri-o's default `hooks_dir` is that directory alone.

    ## Why it matters
    cri-o reads hooks only from the directories listed in `hooks_dir`; a configuration that sets it to another
    list (often just `/etc/containers/oci/hooks.d`, which cri-o does not read by default, or an empty list)
    leaves the hook out of every container, without any message, and the devices it would have checked or fixed
    reach runc unchecked.

    ## Example
    `hooks_dir = ["/etc/containers/oci/hooks.d"]` in a drop-in.

    ## Fix
    Add the directory: `hooks_dir = ["/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d"]` (a
    later directory's file of the same name wins), then restart cri-o; or install the hook into a directory
    that is listed.
    """
    current = view(value, context)
    config = current.effective() if current else None
    if current is None or config is None:
        return
    pointer = "/crio/runtime/hooks_dir"
    if not config.is_set(pointer):
        return
    directories = strings_at(config, pointer)
    if PROJECT_HOOKS_DIR in {_normal(d) for d in directories}:
        return
    listed = quote_list(directories) if directories else "empty"
    yield current.problem(
        config.origin(pointer),
        f"hooks_dir is {listed}: cri-o does not read {PROJECT_HOOKS_DIR}, where {PROJECT_HOOK_FILE} is installed, "
        f"so the hook never runs in cri-o's containers (cri-o's default is {quote_list(HOOKS_DIR_DEFAULT)})",
        f"add {PROJECT_HOOKS_DIR} to hooks_dir: hooks_dir = {quote_list([PROJECT_HOOKS_DIR, *directories])}",
    )


@crio_rule("CRO104", "cdi-spec-dir-missing", Severity.WARNING, needs_host=True)
def cdi_spec_dir_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A cdi_spec_dirs entry does not exist on the node, or is not a directory.

    ## What it checks
    Each directory the files set in `cdi_spec_dirs` (cri-o's default is `/etc/cdi` and `/var/run/cdi`) must exist
    on the node and be a directory; an empty `cdi_spec_dirs` is reported too.

    ## Why it matters
    cri-o resolves every CDI device a pod asks for (`nvidia.com/gpu=0`) from the specs in these directories
    only. A missing directory is accepted silently (the CDI library watches for it to appear), so a misspelt
    path shows up only as pods failing with `unresolvable CDI devices nvidia.com/gpu=0` while the spec sits in
    the directory that was meant.

    ## Example
    `cdi_spec_dirs = ["/etc/cdi", "/run/cdi.d"]` while `nvidia-ctk cdi generate` writes to `/var/run/cdi`.

    ## Fix
    List the directories the CDI specs are written to (`nvidia-ctk cdi list` shows what it finds), or create the
    directory if specs will be generated there later.
    """
    current = view(value, context)
    config = current.effective() if current else None
    host = context.host
    pointer = "/crio/runtime/cdi_spec_dirs"
    if current is None or config is None or host is None or not config.is_set(pointer):
        return
    directories = strings_at(config, pointer)
    if not directories:
        yield current.problem(
            config.origin(pointer),
            "cdi_spec_dirs is empty: cri-o can resolve no CDI device, and every pod that asks for one fails with "
            "unresolvable CDI devices",
            'list the spec directories: cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]',
        )
        return
    for index, directory in enumerate(directories):
        identity = host.identity(directory) if directory.startswith("/") else None
        if identity is not None and identity.type == "directory":
            continue
        state = "does not exist on the node" if identity is None else f"is {identity.describe()}, not a directory"
        yield current.problem(
            config.origin(pointer_join(pointer, index)),
            f"CDI spec directory {directory} {state}: cri-o accepts it silently, and CDI devices whose specs are "
            "meant to be there fail as unresolvable",
            "correct the path, or create the directory where the CDI specs will be written",
        )
