"""Where the node's NVIDIA Container Toolkit reads its config.toml, and which toolkit release reads it.

The toolkit's binaries read `$NVIDIA_CTK_CONFIG_FILE_PATH`, else `$XDG_CONFIG_HOME/nvidia-container-runtime/
config.toml`, else `/etc/nvidia-container-runtime/config.toml` (api/config/v1/config.go). Packages install the
binaries bare, so they read `/etc/...`. The GPU Operator's toolkit container installs each binary behind a shell
wrapper under its install directory (`/usr/local/nvidia/toolkit` by default) that sets the variable to its own
`.config/nvidia-container-runtime/config.toml` (`NVIDIA_CTK_CONFIG_FILE_PATH` from 1.17's installer,
`XDG_CONFIG_HOME` before), and points the engine's runtime handler at the wrapper. So the file in effect is found
by following the engines' NVIDIA handlers to their programs and reading the variables the wrappers set.
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from nvidia_oci_hook.formats.parsing import LoadProblem
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.toolkit.kind import RELATIVE_PATH
from nvidia_oci_hook.node.engine_versions import BINARY_DIRS, installed_packages, upstream_version

DEFAULT_CONFIG = "/etc/" + RELATIVE_PATH
OPERATOR_TOOLKIT_DIR = "/usr/local/nvidia/toolkit"
OPERATOR_CONFIG = f"{OPERATOR_TOOLKIT_DIR}/.config/{RELATIVE_PATH}"
PACKAGES = ("nvidia-container-toolkit-base", "nvidia-container-toolkit")
RUNTIME = "nvidia-container-runtime"
HOOK = "nvidia-container-runtime-hook"
# Where the toolkit looks for a program named without a slash: $PATH, then these (pkg/lookup/path.go).
SEARCH_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
ACCEPT_ENVVAR = "accept-nvidia-visible-devices-envvar-when-unprivileged"
ACCEPT_MOUNTS = "accept-nvidia-visible-devices-as-volume-mounts"
_WRAPPER_ENV = re.compile(r"^\s*(?:export\s+)?(NVIDIA_CTK_CONFIG_FILE_PATH|XDG_CONFIG_HOME)=(\"[^\"]*\"|'[^']*'|\S+)")
_VERSION = re.compile(r"version\s+v?(\d+\.\d+\.\d+)")


@dataclass(frozen=True)
class ConfigPlace:
    """A config.toml some toolkit binary on the node reads: where, and which binary reads it, and why there."""

    path: str
    why: str
    readers: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolkitRelease:
    version: Optional[str]
    source: str


def is_nvidia_program(program: str) -> bool:
    """A runtime handler's program that is NVIDIA's runtime (`nvidia-container-runtime`, its `.cdi`/`.legacy`
    variants, or the GPU Operator's wrapper of either): the only handler that turns a container's
    NVIDIA_VISIBLE_DEVICES into driver files."""
    return posixpath.basename(program).startswith(RUNTIME)


def executable(host: HostView, path: str) -> bool:
    return host.is_file(path) and host.is_executable(path)


def locate(host: HostView, program: str) -> Optional[str]:
    """Where the toolkit finds a program (pkg/lookup): a path with a slash as it is, a name in the search
    directories; an executable file either way, else None."""
    if "/" in program:
        return program if executable(host, program) else None
    return next((path for d in SEARCH_DIRS if executable(host, path := posixpath.join(d, program))), None)


def wrapper_config(host: HostView, program: str) -> Optional[tuple[str, str]]:
    """(config path, the assignment that names it) of a shell wrapper that sets the toolkit's config variable;
    None for a binary, or a script that sets neither."""
    head = host.read_prefix(program, 4096)
    if head is None or not head.startswith(b"#!"):
        return None
    text = host.read_text(program, limit=64 << 10) or ""
    found: dict[str, str] = {}
    for line in text.splitlines():
        match = _WRAPPER_ENV.match(line)
        if match:
            found.setdefault(match.group(1), match.group(2).strip("\"'"))
    if "NVIDIA_CTK_CONFIG_FILE_PATH" in found:
        value = found["NVIDIA_CTK_CONFIG_FILE_PATH"]
        return value, f"NVIDIA_CTK_CONFIG_FILE_PATH={value}"
    if "XDG_CONFIG_HOME" in found:
        value = found["XDG_CONFIG_HOME"]
        return posixpath.join(value, RELATIVE_PATH), f"XDG_CONFIG_HOME={value}"
    return None


def config_places(host: HostView, handler_programs: dict[str, dict[str, str]]) -> list[ConfigPlace]:
    """Every toolkit config.toml in effect on the node: the ones the engines' NVIDIA handlers' wrappers name,
    then /etc's (what bare binaries read), then the GPU Operator's where it exists though no handler names it."""
    readers: dict[str, list[str]] = {}
    why: dict[str, str] = {}
    for engine, handlers in sorted(handler_programs.items()):
        for name, program in sorted(handlers.items()):
            if not is_nvidia_program(program):
                continue
            resolved = locate(host, program)
            wrapped = wrapper_config(host, resolved) if resolved else None
            path, reason = (
                (wrapped[0], f"{resolved} sets {wrapped[1]}") if wrapped else (DEFAULT_CONFIG, "the toolkit's default")
            )
            readers.setdefault(path, []).append(f"{engine} handler {name} ({program})")
            why.setdefault(path, reason)
    places = [ConfigPlace(path, why[path], tuple(found)) for path, found in readers.items()]
    named = {place.path for place in places}
    if DEFAULT_CONFIG not in named and host.exists(DEFAULT_CONFIG):
        places.append(ConfigPlace(DEFAULT_CONFIG, "the toolkit's default, read by its binaries run bare"))
    if OPERATOR_CONFIG not in named and host.exists(OPERATOR_CONFIG):
        places.append(ConfigPlace(OPERATOR_CONFIG, "the GPU Operator's toolkit installs it for its wrappers"))
    return places


def toolkit_release(host: HostView) -> Optional[ToolkitRelease]:
    """The toolkit release on the node: its runtime's `--version` on the node itself, else the package
    databases' entry; None where neither names one."""
    if not host.rooted:
        for directory in (OPERATOR_TOOLKIT_DIR, *BINARY_DIRS):
            for name in (RUNTIME + ".real", RUNTIME):
                path = os.path.join(directory, name)
                if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                    continue
                try:
                    result = subprocess.run(
                        [path, "--version"], capture_output=True, text=True, timeout=5.0, check=False
                    )
                except (OSError, subprocess.TimeoutExpired):
                    continue
                match = _VERSION.search(result.stdout)
                if match:
                    return ToolkitRelease(match.group(1), path)
    packages, _ = installed_packages(host)
    for package in PACKAGES:
        if package in packages:
            version, source = packages[package]
            return ToolkitRelease(upstream_version(version), f"{source} ({package})")
    return None


@dataclass
class ToolkitReading:
    """The toolkit's configuration files in effect on the node, loaded, with the release that reads them, and the
    places looked at ((path, what)) or found absent ((path, why))."""

    release: Optional[ToolkitRelease]
    documents: list[Any] = field(default_factory=list)
    looked: list[tuple[str, str]] = field(default_factory=list)
    missing: list[tuple[str, str]] = field(default_factory=list)


def _loaded(load: Callable[[str, str], Any], path: str) -> Any:
    """The file loaded as the toolkit kind; one that cannot be read (a directory, no permission) is the toolkit's
    refusal too: its binaries stop on it as on a file that does not parse."""
    from nvidia_oci_hook.io import ReadError
    from nvidia_oci_hook.kinds.document import Document
    from nvidia_oci_hook.kinds.toolkit import TOOLKIT
    from nvidia_oci_hook.kinds.toolkit.syntax import REFUSED

    try:
        return load(path, TOOLKIT)
    except ReadError as exc:
        said = str(exc).removeprefix(f"{path}: ")
        problem = LoadProblem(
            REFUSED,
            f"the toolkit cannot read this file ({said}): its runtime, hook and nvidia-ctk stop with `error loading "
            "config: failed to load specified config file: ...`; every GPU container through them now fails",
        )
        return Document(path, TOOLKIT, "", None, False, [problem], "toml")


def read_toolkit(
    host: HostView, load: Callable[[str, str], Any], handler_programs: dict[str, dict[str, str]]
) -> ToolkitReading:
    """Every config.toml in effect, loaded as the toolkit kind; where the toolkit's runtime is installed with no
    file at all, its defaults, as an empty document at the path it would read (so that they are judged too)."""
    from nvidia_oci_hook.formats.tomltext import LineLocator
    from nvidia_oci_hook.kinds.document import Document
    from nvidia_oci_hook.kinds.toolkit import TOOLKIT

    places = config_places(host, handler_programs)
    reading = ToolkitReading(toolkit_release(host))
    if reading.release is not None:
        label = reading.release.version or "(release not found)"
        reading.looked.append((reading.release.source, f"NVIDIA Container Toolkit {label}"))
    for place in places:
        if host.exists(place.path):
            reading.looked.append((place.path, f"NVIDIA Container Toolkit configuration: {place.why}"))
            reading.documents.append(_loaded(load, place.path))
        else:
            reading.missing.append((place.path, f"not present ({place.why}): the toolkit runs on its defaults"))
    if not reading.documents and (places or locate(host, RUNTIME) is not None):
        path = places[0].path if places else DEFAULT_CONFIG
        if not places:
            reading.missing.append((path, "not present: the toolkit's runtime is installed and runs on its defaults"))
        reading.documents.append(Document(path, TOOLKIT, "", {}, True, [], "toml", LineLocator("")))
    return reading
