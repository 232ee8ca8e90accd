"""doctor's `driver-versions`: the loaded kernel module's version against each driver root's user space.

After a driver upgrade without a reboot (or a driver container that replaced its libraries but not the module),
the module in memory is one version and the libraries the loader opens another: NVML refuses every call with
"Driver/library version mismatch", so every GPU container fails at start (NVIDIA's hook) or at its first CUDA
call. What decides is what the loader opens, so the evidence lists each root's versioned files and what its
`.so.1` links and the linker cache select: a leftover of another version that one of them still selects is an
error; one selected by nothing is only noted. A root whose libraries name no version (copies) is left out. The
fix reloads the module with its own libraries (a reboot, or the driver pod's restart); doctor repairs nothing.
"""

from __future__ import annotations

import posixpath
from typing import Any

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.base import ERROR, OK, UNKNOWN, Check
from nvidia_oci_hook.node.driver import DriverRootAnswer

NAME = "driver-versions"
NVML_MISMATCH = "Failed to initialize NVML: Driver/library version mismatch"
CLI_MISMATCH = "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch"


def driver_versions_check(host: HostView, answer: DriverRootAnswer) -> Check:
    """The loaded kernel module against each driver root's user space: the versioned files, and what the .so.1
    links and the linker cache select (a leftover of another version that one of them still selects is what the
    loader opens)."""
    from nvidia_oci_hook.node.driver_facts import module_version, user_space

    module = module_version(host)
    spaces = [space for space in (user_space(host, root) for root in answer.evidence) if space.found]
    evidence = [f"kernel module {module.version} ({module.source})" if module.version else module.source]
    if module.disagreement:
        evidence.append(f"{module.disagreement}: the module in memory is not the one installed")
    for space in spaces:
        for version in space.versions:
            shown = ", ".join(posixpath.basename(path) for path in space.files[version][:4])
            more = len(space.files[version]) - 4
            evidence.append(f"{space.root}: {version}: {shown}" + (f" and {more} more" if more > 0 else ""))
        evidence.extend(_selection_line(selection) for selection in space.selections)
    if not spaces:
        return Check(NAME, UNKNOWN, "no driver user space found under " + ", ".join(answer.evidence))
    if module.version is None:
        return Check(NAME, UNKNOWN, f"not compared: the kernel module's version is unknown ({module.source})", evidence)
    # A root whose libraries carry no version in their names (copies, not the driver's files and links) says
    # nothing about its version: it is left out of the comparison, and alone it leaves the check unknown.
    unnamed = [space for space in spaces if not space.files and not space.selected_versions()]
    evidence += [f"{space.root}: no library names a driver version: not compared" for space in unnamed]
    spaces = [space for space in spaces if space not in unnamed]
    if not spaces:
        return Check(NAME, UNKNOWN, "not compared: no driver library names its version", evidence)
    mismatched = []
    for space in spaces:
        wrong = [s for s in space.selections if s.version is not None and s.version != module.version]
        dangling = [s for s in space.selections if not s.target]
        if wrong or dangling or module.version not in space.files:
            mismatched.append((space, wrong, dangling))
    if not mismatched:
        leftovers = sorted({v for space in spaces for v in space.files if v != module.version})
        summary = f"kernel module and user space are both {module.version}"
        if leftovers:
            summary += f" (files of {', '.join(leftovers)} left over, selected by no link or cache entry)"
        return Check(NAME, OK, summary, evidence, counts={"mismatched_roots": 0})
    space, wrong, dangling = mismatched[0]
    if wrong:
        first = wrong[0]
        found = (
            f"{posixpath.basename(first.name)} selects {first.version} ({first.via}: {first.name} -> {first.target})"
        )
    elif dangling:
        found = f"{dangling[0].name} points to nothing ({dangling[0].via})"
    else:
        found = f"its libraries are {', '.join(space.versions)}, none {module.version}"
    container = space.root != "/"
    fix = (
        "restart the GPU Operator's driver pod on this node (it reloads the module with its own libraries), or "
        "reboot the node"
        if container
        else "reboot the node; or, with no GPU process running (nvidia-smi lists none; stop nvidia-persistenced and "
        "the device plugin), unload and reload the modules: rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia; "
        "modprobe nvidia; in a GPU Operator driver container, restart its pod instead"
    )
    return Check(
        NAME,
        ERROR,
        f"kernel module {module.version} but the user space under {space.root} is not: {found}: every GPU "
        f"container fails with '{NVML_MISMATCH}' (NVIDIA's hook: '{CLI_MISMATCH}')",
        evidence,
        fix,
        counts={"mismatched_roots": len(mismatched)},
    )


def _selection_line(selection: Any) -> str:
    target = selection.target or "nothing"
    version = f" ({selection.version})" if selection.version else ""
    return f"{selection.name} -> {target}{version}" + (" [ld.so.cache]" if selection.via != "link" else "")
