"""Which engine on the node loses its GPU containers' devices when systemd applies their cgroups again.

Under the systemd cgroup driver, systemd owns a container's device rules: runc hands them over as DeviceAllow=
entries that name `/dev/char/MAJOR:MINOR`, and runc 1.1.3 to 1.1.6 leave out a rule whose link does not exist.
The rules in force stay right until systemd applies the unit again (a `systemctl daemon-reload`, a unit change),
which then drops the NVIDIA nodes: the container gets EPERM on `/dev/nvidiactl`, and NVML `Unknown Error`. The
NVIDIA driver makes its nodes without udev, so the links exist only where something makes them (a udev rule,
`doctor --fix`). With the cgroupfs driver nothing re-applies the rules behind the runtime's back.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any, Optional

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.cdi.releases import version_key
from nvidia_oci_hook.kinds.loading import read_toml

# runc releases whose systemd driver skips a device rule without its /dev/char link.
SKIPPING_RUNC = ((1, 1, 3), (1, 1, 6))
UDEV_RULE_DIRS = ("/etc/udev/rules.d", "/run/udev/rules.d", "/lib/udev/rules.d", "/usr/lib/udev/rules.d")
# What a rule that keeps the links runs: this package's doctor, or NVIDIA's own command for it.
LINK_KEEPERS = ("dev-char-links", "create-dev-char-symlinks")


@dataclass(frozen=True)
class EngineCgroups:
    """How one engine has its containers' cgroups made."""

    engine: str  # "cri-o", "containerd", "podman"
    driver: Optional[str]  # "systemd", "cgroupfs", None: not found
    runtime: str  # "runc" or "crun"
    runtime_version: Optional[str]


@dataclass(frozen=True)
class Risk:
    status: str  # "ok", "warning", "error", "unknown"
    line: str


def reload_risk(
    cgroups: EngineCgroups, systemd_version: Optional[str], missing_links: int, link_keeper: Optional[str]
) -> Risk:
    """The verdict for one engine: whether a reload takes its GPU containers' devices away, and the fix."""
    who = f"{cgroups.engine} ({cgroups.driver or 'cgroup driver unknown'} cgroup driver, {cgroups.runtime}"
    who += f" {cgroups.runtime_version})" if cgroups.runtime_version else ", release unknown)"
    if cgroups.driver == "cgroupfs":
        return Risk("ok", f"{who}: the runtime alone writes the device rules; a systemd reload does not touch them")
    if cgroups.driver is None:
        return Risk("unknown", f"{who}: which cgroup driver it uses was not found")
    systemd = f"systemd {systemd_version}" if systemd_version else "systemd"
    if cgroups.runtime != "runc":
        return Risk("ok", f"{who}: {cgroups.runtime} gives {systemd} every device rule, links or not")
    if cgroups.runtime_version is None:
        if missing_links:
            return Risk(
                "warning",
                f"{who}: {missing_links} NVIDIA node(s) have no /dev/char link, and runc 1.1.3 to 1.1.6 then lose "
                f"the GPUs on a {systemd} reload; fix: nvidia-oci-hook doctor --fix creates the links",
            )
        return Risk("unknown", f"{who}: runc's release was not found")
    version = version_key(cgroups.runtime_version)[:3]
    skipping = SKIPPING_RUNC[0] <= version <= SKIPPING_RUNC[1]
    if not skipping:
        return Risk("ok", f"{who}: runc {cgroups.runtime_version} gives {systemd} the device rules without links")
    if missing_links:
        return Risk(
            "error",
            f"{who}: {missing_links} NVIDIA node(s) have no /dev/char link, which runc {cgroups.runtime_version} "
            f"needs: the next {systemd} reload takes the GPUs from every running GPU container; fix: "
            "nvidia-oci-hook doctor --fix creates the links (and upgrade runc to 1.1.7 or later)",
        )
    if link_keeper is None:
        return Risk(
            "warning",
            f"{who}: runc {cgroups.runtime_version} needs the /dev/char links, and nothing makes them again after "
            "a reboot or a driver reload; fix: install the package's udev rule (71-nvidia-oci-hook.rules), or "
            "upgrade runc to 1.1.7 or later",
        )
    return Risk(
        "ok", f"{who}: the /dev/char links runc {cgroups.runtime_version} needs are there, kept by {link_keeper}"
    )


# ---------------------------------------------------------------------------------------------------------------
# What the node says


def _command_version(host: HostView, command: list[str], pattern: str) -> Optional[str]:
    if host.rooted:
        return None
    try:
        output = subprocess.run(command, capture_output=True, text=True, timeout=5, check=False).stdout
    except OSError:
        return None
    match = re.search(pattern, output)
    return match.group(1) if match else None


def runtime_version(host: HostView, runtime: str, packages: dict[str, str]) -> Optional[str]:
    """The runtime's release: its --version on the node itself, else the package database's."""
    from nvidia_oci_hook.node.engine_versions import BINARY_DIRS, upstream_version

    for directory in BINARY_DIRS:
        path = os.path.join(directory, runtime)
        if not host.rooted and host.is_executable(path):
            found = _command_version(host, [path, "--version"], rf"{runtime} version (\d+\.\d+\.\d+)")
            if found:
                return found
    package = packages.get(runtime)
    return upstream_version(package) if package else None


def systemd_version(host: HostView, packages: dict[str, str]) -> Optional[str]:
    found = _command_version(host, ["systemctl", "--version"], r"systemd (\d+)")
    if found:
        return found
    package = packages.get("systemd")
    return package.split(".")[0].split("-")[0].split(":")[-1] if package else None


def link_keeper(host: HostView) -> Optional[str]:
    """The udev rule that makes the NVIDIA nodes' /dev/char links, if one is installed."""
    for directory in UDEV_RULE_DIRS:
        for name in host.list_dir(directory):
            if not name.endswith(".rules"):
                continue
            text = host.read_text(os.path.join(directory, name)) or ""
            if any(keeper in text for keeper in LINK_KEEPERS):
                return os.path.join(directory, name)
    return None


def engine_cgroups(host: HostView, node_configs: dict[str, Any], packages: dict[str, str]) -> list[EngineCgroups]:
    """The cgroup driver and runtime of each engine configured on the node: cri-o's cgroup_manager (default
    systemd), the SystemdCgroup option of containerd's runc handlers (default false), podman's cgroup_manager
    (default systemd)."""
    found = []

    def managed(name: str, config: dict[str, Any], runtime_key: str) -> EngineCgroups:
        program = _program(config.get(runtime_key) or "crun")
        driver = config.get("cgroup_manager") or "systemd"
        return EngineCgroups(name, driver, program, runtime_version(host, program, packages))

    if node_configs.get("crio") is not None:
        found.append(managed("cri-o", node_configs["crio"], "default_runtime"))
    containerd = node_configs.get("containerd")
    if containerd is not None:
        driver = "systemd" if containerd.get("systemd_cgroup") else "cgroupfs"
        found.append(EngineCgroups("containerd", driver, "runc", runtime_version(host, "runc", packages)))
    if node_configs.get("podman") is not None:
        found.append(managed("podman", node_configs["podman"], "runtime"))
    return found


def _program(runtime: str) -> str:
    return "runc" if "runc" in runtime else "crun"


def node_configs(host: HostView, packages: dict[str, str]) -> dict[str, dict[str, Any]]:
    """What each engine's configuration says of its cgroups (the settings engine_cgroups reads), for the engines
    configured or installed on the node; later cri-o drop-ins win, as cri-o reads them."""
    from nvidia_oci_hook.kinds.containerd.config import ContainerdConfig
    from nvidia_oci_hook.node.engines import CONTAINERS_CONF, containerd_in_effect, crio_files, dig

    found: dict[str, dict[str, Any]] = {}
    crio: dict[str, Any] = {}
    present = False
    for path in crio_files(host):
        value = read_toml(host, path)
        if value is None:
            continue
        present = True
        runtime = dig(value, "crio", "runtime")
        for key in ("cgroup_manager", "default_runtime"):
            if isinstance(dig(runtime, key), str):
                crio[key] = runtime[key]
    if present or "cri-o" in packages:
        found["crio"] = crio
    containerd = containerd_in_effect(host)
    if containerd is not None or "containerd" in packages or "containerd.io" in packages:
        config = ContainerdConfig(containerd or {})
        default = dig(config.cri_containerd(), "default_runtime_name") or "runc"
        systemd = any(
            runtime.name == default and runtime.is_runc and runtime.option("SystemdCgroup")[1] is True
            for runtime in config.runtimes()
        )
        found["containerd"] = {"systemd_cgroup": systemd}
    podman = read_toml(host, CONTAINERS_CONF)
    if podman is not None or "podman" in packages:
        engine = dig(podman, "engine") or {}
        found["podman"] = {
            key: engine[key] for key in ("cgroup_manager", "runtime") if isinstance(engine.get(key), str)
        }
    return found
