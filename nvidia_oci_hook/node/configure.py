"""`configure --runtime crio|containerd|podman`: register the wrapper as a runtime handler, and the hooks
directories, in the engine's own configuration.

Everything goes into a drop-in file of ours, marked as such, so that `--undo` removes exactly it. containerd
reads drop-ins only through `imports` in its main config: when that line is missing it is added, with a marker
comment above it, and nothing else in the file changes. Values the drop-in replaces (cri-o's and podman's
hooks_dir lists) are read from the current configuration and kept, with the missing directories added.
"""

from __future__ import annotations

import difflib
import json
import os
import posixpath
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Optional, TextIO

from nvidia_oci_hook import io
from nvidia_oci_hook.host import HostView

MARKER = "# Written by nvidia-oci-hook configure; nvidia-oci-hook configure --undo removes it."
LINE_MARKER = "# Added by nvidia-oci-hook configure (--undo removes this line and the next)."
# Where the packages install the wrapper, then where a hand-made install puts it.
RUNTIME_CANDIDATES = ("/usr/bin/nvidia-oci-runtime", "/usr/local/bin/nvidia-oci-runtime")
GUARD_FILE = "nvidia-oci-hook-guard.json"
HANDLER = "nvidia"
SHARED_HOOKS = "/usr/share/containers/oci/hooks.d"
ADMIN_HOOKS = "/etc/containers/oci/hooks.d"
PRECREATE_HOOKS = "/usr/share/nvidia-oci-hook/hooks.d"

CRIO_DROP_IN = "/etc/crio/crio.conf.d/99-nvidia-oci-hook.conf"
PODMAN_DROP_IN = "/etc/containers/containers.conf.d/50-nvidia-oci-hook-runtime.conf"
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CONTAINERD_DROP_IN = "/etc/containerd/conf.d/99-nvidia-oci-hook.toml"
DROP_INS = {"crio": CRIO_DROP_IN, "containerd": CONTAINERD_DROP_IN, "podman": PODMAN_DROP_IN}
ENGINES = tuple(DROP_INS)


class ConfigureError(Exception):
    """What stops configure from changing anything: one line for the user."""


@dataclass
class FileChange:
    path: str  # as the node names it
    old: Optional[str]  # None: the file does not exist
    new: Optional[str]  # None: the file is removed


def _read(host: HostView, path: str) -> Optional[str]:
    if not host.exists(path):
        return None
    try:
        return host.read_bytes(path, 1 << 20).decode("utf-8")
    except (io.ReadError, io.TooLarge, UnicodeDecodeError) as exc:
        raise ConfigureError(f"{path}: cannot read: {exc}") from None


def _toml(host: HostView, path: str) -> dict[str, Any]:
    from nvidia_oci_hook.formats.tomltext import parse_toml

    text = _read(host, path)
    if text is None:
        return {}
    parsed = parse_toml(text.encode("utf-8"))
    if not parsed.ok or not isinstance(parsed.value, dict):
        reason = parsed.problems[0].message if parsed.problems else "not a table"
        raise ConfigureError(f"{path}: {reason}; fix it first")
    return parsed.value


def _get(table: dict[str, Any], *keys: str) -> Any:
    node: Any = table
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _toml_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(f'"{value}"' for value in values) + "]"


def _with(existing: Any, default: list[str], wanted: list[str]) -> list[str]:
    current = [v for v in existing if isinstance(v, str)] if isinstance(existing, list) else list(default)
    return current + [path for path in wanted if path not in current]


def _ours(host: HostView, path: str) -> bool:
    text = _read(host, path)
    return text is not None and text.startswith(MARKER)


def _drop_in_files(host: HostView, directory: str, exclude: str) -> list[str]:
    """The drop-ins an engine reads after its main file, ours excluded: lexical order, as cri-o and podman read."""
    names = host.list_dir(directory)
    return [posixpath.join(directory, name) for name in names if posixpath.join(directory, name) != exclude]


def _runtime(host: HostView, engine: str) -> str:
    """The wrapper's path as the engine will run it: one that exists. An engine drops a handler whose runtime
    does not (cri-o: `invalid runtime_path`), and every pod asking for it then fails."""
    for path in RUNTIME_CANDIDATES:
        if host.is_executable(path):
            return path
    found = shutil.which("nvidia-oci-runtime") if not host.rooted else None
    if found is not None:
        return os.path.abspath(found)
    where = ", ".join(RUNTIME_CANDIDATES) + (" or PATH" if not host.rooted else "")
    raise ConfigureError(
        f"no nvidia-oci-runtime in {where}: install the package, or write the launchers with "
        f"python -m nvidia_oci_hook.launcher /usr/local/bin; {engine} would drop a handler whose runtime is missing"
    )


def _check_guard(host: HostView) -> None:
    """The guard's hooks.d file, where the packages put it, must name a program that exists: the engine runs the
    hook as the file says, and a missing program fails every container."""
    path = posixpath.join(SHARED_HOOKS, GUARD_FILE)
    text = _read(host, path)
    if text is None:
        return
    try:
        program = json.loads(text).get("hook", {}).get("path")
    except (ValueError, AttributeError):
        return  # lint reports a broken hooks.d file; configure only adds the directory
    if isinstance(program, str) and program.startswith("/") and not host.exists(program):
        raise ConfigureError(
            f"{path} runs {program}, which does not exist: reinstall the package, or point hook.path "
            "at the installed nvidia-oci-hook"
        )


def _crio(host: HostView) -> list[FileChange]:
    runtime = _runtime(host, "cri-o")
    _check_guard(host)
    hooks: Any = None
    for path in ["/etc/crio/crio.conf", *_drop_in_files(host, "/etc/crio/crio.conf.d", CRIO_DROP_IN)]:
        if host.is_file(path):
            found = _get(_toml(host, path), "crio", "runtime", "hooks_dir")
            hooks = found if found is not None else hooks
    hooks_dir = _with(hooks, [SHARED_HOOKS], [SHARED_HOOKS, ADMIN_HOOKS])
    text = (
        f"{MARKER}\n"
        "# The wrapper as the runtime handler 'nvidia' (RuntimeClass handler: nvidia), and the hooks directories:\n"
        f"# cri-o's default leaves out {ADMIN_HOOKS}, where administrators register hooks.\n"
        "[crio.runtime]\n"
        f"hooks_dir = {_toml_list(hooks_dir)}\n\n"
        f"[crio.runtime.runtimes.{HANDLER}]\n"
        f'runtime_path = "{runtime}"\n'
        'runtime_type = "oci"\n'
        f'runtime_root = "/run/{HANDLER}-oci-runtime"\n'
    )
    return [FileChange(CRIO_DROP_IN, _read(host, CRIO_DROP_IN), text)]


def _podman(host: HostView) -> list[FileChange]:
    runtime = _runtime(host, "podman")
    _check_guard(host)
    hooks: Any = None
    paths = ["/usr/share/containers/containers.conf", "/etc/containers/containers.conf"]
    paths += _drop_in_files(host, "/etc/containers/containers.conf.d", PODMAN_DROP_IN)
    for path in paths:
        if host.is_file(path):
            found = _get(_toml(host, path), "engine", "hooks_dir")
            hooks = found if found is not None else hooks
    hooks_dir = _with(hooks, [SHARED_HOOKS], [SHARED_HOOKS, PRECREATE_HOOKS])
    text = (
        f"{MARKER}\n"
        "# The wrapper as runtime 'nvidia' (podman --runtime nvidia), and the precreate filter's directory, which\n"
        "# only podman reads.\n"
        "[engine]\n"
        f"hooks_dir = {_toml_list(hooks_dir)}\n\n"
        "[engine.runtimes]\n"
        f'{HANDLER} = ["{runtime}"]\n'
    )
    return [FileChange(PODMAN_DROP_IN, _read(host, PODMAN_DROP_IN), text)]


def _containerd(host: HostView) -> list[FileChange]:
    runtime_program = _runtime(host, "containerd")
    main_text = _read(host, CONTAINERD_CONFIG)
    if main_text is None:
        raise ConfigureError(
            f"{CONTAINERD_CONFIG} does not exist: write it first (containerd config default > {CONTAINERD_CONFIG})"
        )
    config = _toml(host, CONTAINERD_CONFIG)
    version = config.get("version", 1)
    if version == 2:
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        runc = _get(config, "plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes", "runc", "options")
    elif version == 3:
        cri = 'plugins."io.containerd.cri.v1.runtime"'
        runc = _get(config, "plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "runc", "options")
    else:
        raise ConfigureError(
            f"{CONTAINERD_CONFIG} is config version {version}: migrate it first (containerd config "
            "migrate), imports need version 2 or 3"
        )
    systemd = _get(runc, "SystemdCgroup") if isinstance(runc, dict) else None
    runtime = f"{cri}.containerd.runtimes.{HANDLER}"
    drop_in = (
        f"{MARKER}\n"
        "# The wrapper as the runtime handler 'nvidia' (RuntimeClass handler: nvidia). CDI annotations are passed\n"
        "# to it, so that it resolves them where containerd does not (1.6 ignores enable_cdi).\n"
        f"version = {version}\n\n"
        f"[{runtime}]\n"
        'runtime_type = "io.containerd.runc.v2"\n'
        'container_annotations = ["cdi.k8s.io/*"]\n\n'
        f"[{runtime}.options]\n"
        f'BinaryName = "{runtime_program}"\n'
        + (f"SystemdCgroup = {'true' if systemd else 'false'}\n" if systemd is not None else "")
    )
    changes = [FileChange(CONTAINERD_DROP_IN, _read(host, CONTAINERD_DROP_IN), drop_in)]
    imports = config.get("imports")
    covered = isinstance(imports, list) and any(
        isinstance(pattern, str)
        and CONTAINERD_DROP_IN in host.glob(posixpath.join(posixpath.dirname(CONTAINERD_CONFIG), pattern))
        for pattern in imports
    )
    if not covered:
        if imports is not None:
            raise ConfigureError(
                f"{CONTAINERD_CONFIG} has imports = {imports!r}, which do not include "
                f"{CONTAINERD_DROP_IN}: add it to that list by hand"
            )
        changes.append(FileChange(CONTAINERD_CONFIG, main_text, _add_imports(main_text)))
    return changes


def _add_imports(text: str) -> str:
    """imports must precede the first table: after the leading comments and the version line, if any."""
    lines = text.splitlines(keepends=True)
    index = 0
    while index < len(lines) and (not lines[index].strip() or lines[index].lstrip().startswith("#")):
        index += 1
    if index < len(lines) and lines[index].split("=")[0].strip() == "version":
        index += 1
    newline = "\r\n" if text.endswith("\r\n") else "\n"
    added = [f"{LINE_MARKER}{newline}", f'imports = ["{posixpath.dirname(CONTAINERD_DROP_IN)}/*.toml"]{newline}']
    return "".join(lines[:index] + added + lines[index:])


def _remove_added_lines(text: str) -> str:
    lines = text.splitlines(keepends=True)
    kept = []
    skip_next = False
    for line in lines:
        if skip_next:
            skip_next = False
            continue
        if line.rstrip("\r\n") == LINE_MARKER:
            skip_next = True
            continue
        kept.append(line)
    return "".join(kept)


def plan(engine: str, host: HostView, undo: bool) -> list[FileChange]:
    """What configure would change; only files whose content changes."""
    if engine not in ENGINES:
        raise ConfigureError(f"unknown engine {engine!r} (crio, containerd, podman)")
    if undo:
        drop_in = DROP_INS[engine]
        changes = [FileChange(drop_in, _read(host, drop_in), None)] if _ours(host, drop_in) else []
        if engine == "containerd":
            text = _read(host, CONTAINERD_CONFIG)
            if text is not None and LINE_MARKER in text:
                changes.append(FileChange(CONTAINERD_CONFIG, text, _remove_added_lines(text)))
        return changes
    changes = {"crio": _crio, "podman": _podman, "containerd": _containerd}[engine](host)
    for change in changes:
        if change.path in DROP_INS.values() and change.old is not None and not change.old.startswith(MARKER):
            raise ConfigureError(f"{change.path} exists and was not written by configure; move it")
    return [change for change in changes if change.old != change.new]


def diff(change: FileChange) -> str:
    before = (change.old or "").splitlines(keepends=True)
    after = (change.new or "").splitlines(keepends=True)
    old_name = change.path if change.old is not None else "/dev/null"
    new_name = change.path if change.new is not None else "/dev/null"
    return "".join(difflib.unified_diff(before, after, old_name, new_name))


def apply(host: HostView, changes: list[FileChange]) -> None:
    for change in changes:
        if change.new is None:
            host.unlink(change.path)
            continue
        host.makedirs(posixpath.dirname(change.path))
        host.write_atomic(change.path, change.new.encode("utf-8"))


def run(engine: str, root: str, dry_run: bool, undo: bool, out: Optional[TextIO] = None) -> int:
    out = out or sys.stdout
    host = HostView(root)
    changes = plan(engine, host, undo)
    if not changes:
        out.write(f"{engine}: nothing to {'undo' if undo else 'change'}\n")
        return 0
    for change in changes:
        if dry_run:
            out.write(diff(change))
    if not dry_run:
        apply(host, changes)
    verb = "would" if dry_run else "did"
    for change in changes:
        action = "remove" if change.new is None else "write" if change.old is None else "edit"
        out.write(f"{engine}: {verb} {action} {change.path}\n")
    if not dry_run and not undo:
        out.write(f"{engine}: restart it to take effect; the runtime handler is '{HANDLER}'\n")
    if host.rooted:
        out.write(f"{engine}: the node read under {root}; every path above is the node's own\n")
    return 0
