"""`doctor`: the node's GPU plumbing checked as a whole, each check with its status, evidence and fix.

The checks run in cause-before-consequence order (where the driver is, what the markers say, what sits in /dev,
what NVML would do, then the CDI specs and engine configs built on all that), and the report lists problems
first, so its first lines name the cause. `--fix` performs only repairs that take nothing the node needs:
markers that contradict the evidence (the operator's validator writes them again), stray nodes that are the
same device as the driver root's own, CDI specs moved to the driver root that holds their paths.
"""

from __future__ import annotations

import contextlib
import errno
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.devices import NVIDIA_MAJOR, gpu_index
from nvidia_oci_hook.node.driver import (
    AMBIGUOUS,
    FOUND,
    DriverRootAnswer,
    duplicates_driver_node,
    resolve_driver_root,
    strays_beside,
)
from nvidia_oci_hook.node.markers import boot_time, marker_problems
from nvidia_oci_hook.node.nvml import PARAMS, modify_device_files, read_nvml

OK = "ok"
WARNING = "warning"
ERROR = "error"
UNKNOWN = "unknown"
_ORDER = {ERROR: 0, WARNING: 1, UNKNOWN: 2, OK: 3}
CRIO_COLLISION_ERROR = (
    "privileged container was configured with a device container path that already exists on the host"
)


@dataclass
class Repair:
    description: str
    perform: Callable[[], None]


@dataclass
class Check:
    name: str
    status: str
    summary: str
    evidence: list[str] = field(default_factory=list)
    fix: Optional[str] = None
    repairs: list[Repair] = field(default_factory=list)
    # The numbers behind the verdict, kept apart from the words so that the metrics never parse a summary. A
    # check that could not judge leaves its count out: absent means unknown, never 0.
    counts: dict[str, int] = field(default_factory=dict)
    counts_by_engine: dict[str, dict[str, int]] = field(default_factory=dict)  # count -> engine -> value
    facts: dict[str, str] = field(default_factory=dict)  # what the check found, as labels (the driver root)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "summary": self.summary,
            "evidence": self.evidence,
            "fix": self.fix,
            "repairs": [repair.description for repair in self.repairs],
            "counts": {**self.counts, **self.counts_by_engine},
            "facts": self.facts,
        }


def _dev(root: Optional[str]) -> str:
    return posixpath.join(root or "/", "dev")


def _unlink(host: HostView, path: str) -> Callable[[], None]:
    def perform() -> None:
        with contextlib.suppress(FileNotFoundError):  # gone already: what the repair wanted
            host.unlink(path)

    return perform


def driver_root_check(answer: DriverRootAnswer) -> Check:
    facts = {"root": answer.root or "", "status": answer.status}
    if answer.status == FOUND:
        dev_root = answer.dev_root()
        return Check(
            "driver-root",
            OK,
            f"driver under {answer.root}, device nodes under {_dev(dev_root)}",
            answer.evidence_lines(),
            facts=facts,
        )
    fix = (
        "keep one driver: uninstall the host driver or disable the GPU Operator's driver container"
        if answer.status == AMBIGUOUS
        else "install the driver, or add its root to driver_roots in /etc/nvidia-oci-hook/config.yaml"
    )
    return Check(
        "driver-root", ERROR, f"driver root {answer.status}: {answer.reason}", answer.evidence_lines(), fix, facts=facts
    )


def kernel_module_check(answer: DriverRootAnswer) -> Check:
    if answer.module_loaded:
        return Check("kernel-module", OK, answer.module_version or "the NVIDIA kernel module is loaded")
    status = ERROR if answer.status == FOUND else UNKNOWN
    return Check(
        "kernel-module",
        status,
        "the NVIDIA kernel module is not loaded (/proc/driver/nvidia/version is missing)",
        fix="load it (modprobe nvidia), or let the driver container load it",
    )


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
        return Check("driver-versions", UNKNOWN, "no driver user space found under " + ", ".join(answer.evidence))
    if module.version is None:
        return Check(
            "driver-versions", UNKNOWN, f"not compared: the kernel module's version is unknown ({module.source})",
            evidence,
        )  # fmt: skip
    # A root whose libraries carry no version in their names (copies, not the driver's files and links) says
    # nothing about its version: it is left out of the comparison, and alone it leaves the check unknown.
    unnamed = [space for space in spaces if not space.files and not space.selected_versions()]
    evidence += [f"{space.root}: no library names a driver version: not compared" for space in unnamed]
    spaces = [space for space in spaces if space not in unnamed]
    if not spaces:
        return Check("driver-versions", UNKNOWN, "not compared: no driver library names its version", evidence)
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
        return Check("driver-versions", OK, summary, evidence, counts={"mismatched_roots": 0})
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
        "driver-versions",
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


def markers_check(host: HostView, answer: DriverRootAnswer) -> Check:
    if answer.status != FOUND:
        return Check("validation-markers", UNKNOWN, "not judged: the driver root is not known")
    booted = boot_time(host)
    problems = marker_problems(host, answer, booted)
    note = [] if booted is not None else ["boot time unknown (no /proc/stat btime): staleness not judged"]
    if not problems:
        return Check(
            "validation-markers", OK, "the validation markers agree with the evidence", note, counts={"markers": 0}
        )
    markers = sorted({problem.marker for problem in problems})
    return Check(
        "validation-markers",
        ERROR,
        problems[0].message,
        [f"{p.marker}: {p.kind}" + ("" if p is problems[0] else f": {p.message}") for p in problems] + note,
        f"rm -f {' '.join(markers)}, then delete the nvidia-operator-validator and "
        "device-plugin pods so that they validate again",
        [Repair(f"remove {marker}", _unlink(host, marker)) for marker in markers],
        counts={"markers": len(markers)},
    )


def _cdi_mappings(host: HostView, settings: Settings) -> dict[str, list[str]]:
    """Container path -> the CDI specs that map it from another host path (what a device plugin passes as a CRI
    device with host_path != container_path)."""
    from nvidia_oci_hook.engine.cdi import read_cache

    found: dict[str, list[str]] = {}
    cache = read_cache(host, settings.cdi_spec_dirs)
    for qualified, (spec, name) in cache.devices.items():
        for block in (spec.edits, spec.devices[name]):
            for node in block.get("deviceNodes", []):
                host_path = node.get("hostPath") or node["path"]
                if host_path != node["path"]:
                    found.setdefault(node["path"], []).append(f"{qualified} in {spec.path} (from {host_path})")
    return found


def stray_nodes_check(host: HostView, answer: DriverRootAnswer, settings: Settings) -> Check:
    dev_root = answer.dev_root() if answer.status == FOUND else answer.dev_only_root()
    if dev_root is None:
        return Check("stray-device-nodes", UNKNOWN, "not judged: the driver root is not known")
    strays = strays_beside(host, dev_root)
    if not strays:
        return Check(
            "stray-device-nodes",
            OK,
            f"no NVIDIA nodes in the host's /dev besides {_dev(dev_root)}",
            counts={"stray_nodes": 0},
        )
    # The driver's nodes alone decide the verdict; only a driver root proven by its user space makes removing a
    # host node safe, since a host driver whose libraries lie elsewhere would own the host's nodes.
    proven = answer.status == FOUND
    mappings = _cdi_mappings(host, settings)
    evidence = []
    if not proven:
        evidence.append(
            f"the driver's user space was not found ({answer.reason}), but {_dev(dev_root)} holds the driver's "
            f"nodes ({', '.join(answer.evidence[dev_root].device_nodes)}): whether or not its driver is running, "
            "nothing should create NVIDIA nodes in the host's /dev, and cri-o compares device paths with the host's "
            "/dev alone; --fix leaves them until the driver root is found"
        )
    repairs = []
    for path in strays:
        identity = host.link_identity(path)
        line = f"{path} ({identity.describe() if identity else '?'})"
        if duplicates_driver_node(host, dev_root, path):
            line += f": the same device as {dev_root}{path}"
            if proven:
                repairs.append(Repair(f"remove {path}", _unlink(host, path)))
        else:
            line += f": not the same device as {dev_root}{path}, left alone"
        for mapping in mappings.get(path, []):
            line += f"; CDI device {mapping} trips cri-o's check when given as a CRI device to a privileged container"
        evidence.append(line)
    return Check(
        "stray-device-nodes",
        ERROR,
        f"{len(strays)} NVIDIA node{'s' if len(strays) != 1 else ''} in the host's /dev while the driver's are under "
        f"{_dev(dev_root)}{'' if proven else ' (driver user space not found)'}: cri-o refuses privileged GPU "
        f"containers ('{CRIO_COLLISION_ERROR}')",
        evidence,
        f"rm {' '.join(strays)} with no GPU pod running; stop NVML from creating them "
        "(ModifyDeviceFiles=0, or do not mount the host's /dev into GPU pods)",
        repairs,
        counts={"stray_nodes": len(strays)},
    )


def modify_device_files_check(host: HostView, answer: DriverRootAnswer) -> Check:
    value = modify_device_files(host)
    if value is None:
        return Check("modify-device-files", UNKNOWN, f"no ModifyDeviceFiles in {PARAMS} (module not loaded?)")
    if not value:
        return Check("modify-device-files", OK, "ModifyDeviceFiles: 0 (NVML does not create device nodes)")
    if answer.root in (None, "/"):
        return Check(
            "modify-device-files", OK, "ModifyDeviceFiles: 1 (NVML may create /dev/nvidia*, where the driver's are)"
        )
    return Check(
        "modify-device-files",
        WARNING,
        f"ModifyDeviceFiles: 1 while the driver lives under {answer.root}: NVML called in a pod that mounts the "
        "host's /dev creates /dev/nvidia* on the host",
        [f"{PARAMS}: ModifyDeviceFiles: 1"],
        "load the module with NVreg_ModifyDeviceFiles=0 (the driver container's kernel module parameters), and do "
        "not mount the host's /dev into GPU pods",
    )


def _link(host: HostView, link: str, node: str) -> Callable[[], None]:
    def perform() -> None:
        host.makedirs(posixpath.dirname(link))
        # Relative, as udev makes them: the link stays right when the node's root is seen from elsewhere.
        host.symlink(posixpath.relpath(node, posixpath.dirname(link)), link)

    return perform


def dev_char_check(host: HostView, answer: DriverRootAnswer) -> Check:
    dev_root = answer.dev_root()
    if dev_root is None:
        return Check("dev-char-links", UNKNOWN, "not judged: the driver root is not known")
    directory = posixpath.join(dev_root, "dev")
    missing = []
    repairs = []
    for name in host.list_dir(directory):
        if name != "nvidiactl" and not name.startswith("nvidia-uvm") and gpu_index(f"/dev/{name}") is None:
            continue
        node = posixpath.join(directory, name)
        identity = host.identity(node)
        if identity is None or identity.type != "c":
            continue
        link = f"/dev/char/{identity.major}:{identity.minor}"
        if host.link_identity(link) is None:
            missing.append(f"{link} for {node}")
            if not host.lexists(link):  # a link to something else is not ours to replace
                repairs.append(Repair(f"link {link} to {node}", _link(host, link, node)))
    if not missing:
        return Check("dev-char-links", OK, "every NVIDIA node has its /dev/char link")
    return Check(
        "dev-char-links",
        WARNING,
        f"{len(missing)} NVIDIA node{'s' if len(missing) != 1 else ''} without a /dev/char link: containers lose "
        "their GPUs when systemd reloads their cgroups",
        missing,
        "doctor --fix creates the links; the packages' udev rule keeps them after a reboot or a driver reload",
        repairs,
    )


def nvml_check(host: HostView, answer: DriverRootAnswer, settings: Settings, library: Optional[str]) -> Check:
    # NVML may create /dev/nvidia* here; they are removed again where they do not belong (driver root not /).
    view = read_nvml(host, remove_created=answer.root not in (None, "/"), library=library)
    created = [f"NVML created {path}" for path in view.created_nodes]
    created += [f"removed {path} again" for path in view.removed_nodes]
    if not view.available:
        return Check("nvml", UNKNOWN, f"NVML not read: {view.reason}", created)
    evidence = [
        f"driver {view.driver_version}"
        + (f", CUDA {view.cuda_driver_version} (the cuda requirement's value)" if view.cuda_driver_version else "")
    ]
    for gpu in view.gpus:
        evidence.append(
            f"GPU {gpu.index}: minor {gpu.minor}, {gpu.uuid}, {gpu.name}"
            + (f", brand {gpu.brand}" if gpu.brand else "")
            + (f", compute capability {gpu.arch}" if gpu.arch else "")
            + (f", MIG {'on' if gpu.mig_mode else 'off'}" if gpu.mig_mode is not None else "")
        )
        evidence.extend(f"GPU {gpu.index} MIG device {gpu.index}:{mig.index}: {mig.uuid}" for mig in gpu.mig_devices)
    stale = _stale_cdi_devices(host, settings, {gpu.minor for gpu in view.gpus}, {gpu.uuid for gpu in view.gpus})
    if stale:
        return Check(
            "nvml",
            ERROR,
            f"{len(stale)} CDI {'device names' if len(stale) == 1 else 'devices name'} GPUs NVML does not see: "
            f"{stale[0]}",
            evidence + stale + created,
            "regenerate the CDI spec (nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml)",
        )
    status = WARNING if view.created_nodes and not view.removed_nodes else OK
    summary = f"driver {view.driver_version}, {len(view.gpus)} GPU{'s' if len(view.gpus) != 1 else ''}"
    if view.created_nodes:
        summary += f"; NVML created {len(view.created_nodes)} node(s) in /dev"
    return Check("nvml", status, summary, evidence + created)


def _stale_cdi_devices(host: HostView, settings: Settings, minors: set[int], uuids: set[str]) -> list[str]:
    from nvidia_oci_hook.engine.cdi import read_cache

    stale = []
    cache = read_cache(host, settings.cdi_spec_dirs)
    for qualified, (spec, name) in sorted(cache.devices.items()):
        if name.startswith("GPU-") and name not in uuids:
            stale.append(f"{qualified} ({spec.path}): no GPU has UUID {name}")
            continue
        for node in spec.devices[name].get("deviceNodes", []):
            index = gpu_index(node["path"])
            minor = node.get("minor") if node.get("major") == NVIDIA_MAJOR else index
            if index is not None and minor not in minors:
                stale.append(f"{qualified} ({spec.path}): {node['path']} is minor {minor}, which no GPU has")
    return stale


def cdi_specs_check(host: HostView, settings: Settings) -> Check:
    from nvidia_oci_hook.node.cdi_reconcile.plans import plan_spec_dirs, write_plans

    plans = plan_spec_dirs(host, settings.cdi_spec_dirs, settings.driver_roots)
    changes = [f"{plan.path}: {change}" for plan in plans for change in plan.changes]
    problems = [f"{plan.path}: {problem}" for plan in plans for problem in plan.problems]
    fixable = [plan for plan in plans if plan.new_text is not None]
    counts = {"unreconciled_specs": sum(bool(plan.changes or plan.problems) for plan in plans)}
    if not changes and not problems:
        return Check("cdi-specs", OK, f"{len(plans)} CDI spec file(s) match this node's driver root", counts=counts)
    repairs = [
        Repair(f"rewrite {plan.path} ({len(plan.changes)} change(s))", _writer(host, plan, write_plans))
        for plan in fixable
    ]
    first = (problems or changes)[0]
    return Check(
        "cdi-specs",
        ERROR,
        f"CDI specs name paths this node does not have: {first}",
        changes + problems,
        "nvidia-oci-hook cdi reconcile (or regenerate: nvidia-ctk cdi generate)",
        repairs,
        counts=counts,
    )


def _writer(host: HostView, plan: Any, write_plans: Callable[[HostView, list[Any]], None]) -> Callable[[], None]:
    return lambda: write_plans(host, [plan])


def _allow(host: HostView, cgroup: str, rules: list[str]) -> Callable[[], None]:
    def perform() -> None:
        target = allow_file(host, cgroup)
        # The devices controller takes one rule per write.
        for rule in rules:
            host.write_existing(target, (rule + "\n").encode("ascii"))

    return perform


CGROUP_ROOT = "/sys/fs/cgroup"


class NotACgroup(OSError):
    """A state file names a cgroup that is not a device cgroup under the node's /sys/fs/cgroup: the repair is
    refused, and says why as any failed repair does (its strerror)."""


def allow_file(host: HostView, cgroup: str) -> str:
    """The devices.allow of a container's own device cgroup: the path from its state file, resolved inside the
    host root, must be a directory below /sys/fs/cgroup holding devices.allow, or nothing is written."""
    canonical = host.canonical(cgroup)
    if canonical is None or not canonical.startswith(CGROUP_ROOT + "/") or not host.is_dir(canonical):
        raise NotACgroup(errno.EPERM, f"{cgroup} is not a cgroup directory under {CGROUP_ROOT}")
    target = posixpath.join(canonical, "devices.allow")
    if not host.is_file(target):
        raise NotACgroup(errno.EPERM, f"{canonical} has no devices.allow (not a cgroup v1 device cgroup)")
    return target


def gpu_access_check(host: HostView, restore: bool = False, runtime_roots: tuple[str, ...] = ()) -> Check:
    """Whether every running container can still open the NVIDIA nodes its spec gave it."""
    from nvidia_oci_hook.node.containers import device_access, running_containers, spec_rules_for

    containers = running_containers(host, runtime_roots)
    accesses = device_access(host, containers)
    if not accesses:
        return Check(
            "gpu-access",
            OK,
            f"no running container was given NVIDIA devices ({len(containers)} running)",
            counts={"containers_lost": 0},
        )
    lost = [access for access in accesses if access.lost]
    # The containers judged to have lost access: the unjudged ones are not counted either way.
    counts = {"containers_lost": len(lost)}
    unjudged = [access for access in accesses if not access.judged]
    evidence = [
        f"{access.container.name}: lost {', '.join(map(str, access.lost))}"
        + (f" (running since {access.container.created})" if access.container.created else "")
        + f"; state {access.container.state_path}"
        for access in lost
    ]
    evidence += [f"{access.container.name}: not judged: {access.why}" for access in unjudged]
    if not lost:
        if unjudged:
            return Check(
                "gpu-access",
                UNKNOWN,
                f"{len(unjudged)} GPU container(s) not judged: their device rules cannot be read here",
                evidence,
            )
        return Check("gpu-access", OK, f"{len(accesses)} GPU container(s) can open their NVIDIA devices", counts=counts)
    repairs = []
    for access in lost if restore else []:
        cgroup = access.container.devices_cgroup
        rules = sorted({rule for device in access.lost for rule in spec_rules_for(access.container.spec, device)})
        if cgroup and rules:
            repairs.append(
                Repair(
                    f"re-allow {', '.join(rules)} for {access.container.name} (the spec's own rules)",
                    _allow(host, cgroup, rules),
                )
            )
    names = [access.container.name for access in lost]
    return Check(
        "gpu-access",
        ERROR,
        f"{len(lost)} running container(s) can no longer open their GPUs (Failed to initialize NVML: Unknown "
        f"Error): {names[0]}" + (f" and {len(names) - 1} more" if len(names) > 1 else ""),
        evidence,
        f"restart {', '.join(names)}: {'its' if len(names) == 1 else 'their'} device cgroup lost the NVIDIA rules "
        "(a cgroup re-applied without them); doctor --fix --restore-device-access re-adds the spec's own rules on "
        "cgroup v1",
        repairs,
        counts=counts,
    )


def reload_risk_check(host: HostView, answer: DriverRootAnswer) -> Check:
    """Which engine loses its GPU containers' devices when systemd applies their cgroups again, and why."""
    from nvidia_oci_hook.node.engine_versions import installed_packages
    from nvidia_oci_hook.node.reload_risk import engine_cgroups, link_keeper, node_configs, reload_risk, systemd_version

    found, _ = installed_packages(host)
    packages = {name: version for name, (version, _) in found.items()}
    engines = engine_cgroups(host, node_configs(host, packages), packages)
    if not engines:
        return Check("reload-risk", UNKNOWN, "no cri-o, containerd or podman configured or installed")
    links = dev_char_check(host, answer)
    missing = len(links.evidence) if links.status == WARNING else 0
    systemd = systemd_version(host, packages)
    keeper = link_keeper(host)
    risks = [reload_risk(engine, systemd, missing, keeper) for engine in engines]
    order = {ERROR: 0, WARNING: 1, UNKNOWN: 2, OK: 3}
    worst = min(risks, key=lambda risk: order[risk.status])
    evidence = [risk.line for risk in risks] + [f"udev rule keeping the /dev/char links: {keeper or 'none'}"]
    if systemd:
        evidence.append(f"systemd {systemd}")
    return Check("reload-risk", worst.status, worst.line, evidence)


def engines_check(host: HostView) -> Check:
    """The engines installed and their releases: which CDI library reads each one's specs (lint --node, and the
    engine-configs check below, judge the spec directories with them)."""
    from nvidia_oci_hook.kinds.cdi.releases import ENGINE_NAMES, UnknownRelease, engine_library
    from nvidia_oci_hook.node.engines import engine_releases, handler_list, runtime_handlers
    from nvidia_oci_hook.node.locations import find_locations

    locations = find_locations(host)
    releases, _ = engine_releases(host, locations)
    found = list(releases.values())
    unresolvable = _unresolvable_names(host)
    counts = {"cdi_unresolvable_names": {engine: len(names) for engine, names in unresolvable.items()}}
    if not found:
        return Check(
            "engines",
            UNKNOWN,
            "no containerd, cri-o or podman found (running daemons, binaries, dpkg or rpm database)",
            [_unresolvable_line(engine, names) for engine, names in unresolvable.items() if names],
            counts_by_engine=counts,
        )
    evidence = []
    for chosen in (locations.containerd, locations.crio):
        if chosen is not None and chosen.engine in releases and (chosen.daemon or chosen.distribution):
            evidence.append(f"{releases[chosen.engine].name} reads {chosen.path}: {chosen.source}")
    unknown = []
    for release in found:
        if release.version is None:
            unknown.append(release.name)
            evidence.append(f"{release.name}: release not found ({release.source})")
            continue
        try:
            library = f"CDI library {engine_library(release.engine, release.version).release}"
        except UnknownRelease as exc:
            library = str(exc)
        evidence.append(f"{release.label}: {library} ({release.source})")
    for engine, handlers in runtime_handlers(host).items():
        evidence.append(f"{ENGINE_NAMES[engine]} runtime handlers: {handler_list(handlers)}")
    # The verdict on the specs themselves is engine-configs' (lint --node); here, what each engine is left with.
    evidence += [_unresolvable_line(engine, names) for engine, names in unresolvable.items() if names]
    summary = ", ".join(release.label for release in found)
    if unknown:
        return Check(
            "engines",
            WARNING,
            f"{summary}: the release of {', '.join(unknown)} was not found, so its CDI specs are judged with the "
            "newest CDI library",
            evidence,
            "install the engines from packages, or check that their binaries answer --version",
            counts_by_engine=counts,
        )
    return Check("engines", OK, summary, evidence, counts_by_engine=counts)


def _unresolvable_names(host: HostView) -> dict[str, list[Any]]:
    from nvidia_oci_hook.lint import LintOptions, load_file
    from nvidia_oci_hook.node.cdi_resolve import declared_unresolvable

    options = LintOptions(host_root=host.root)
    return declared_unresolvable(host, lambda path, kind, files: load_file(path, kind, options, files))


def _unresolvable_line(engine: str, names: list[Any]) -> str:
    listed = ", ".join(f"{resolution.name} ({resolution.reason})" for resolution in names)
    plural = "s" if len(names) != 1 else ""
    return f"{engine} cannot resolve {len(names)} CDI device name{plural} its specs declare: {listed}"


def engine_configs_check(host_root: str, settings: Settings) -> Check:
    from nvidia_oci_hook.findings import Severity
    from nvidia_oci_hook.lint import LintOptions, lint_paths

    options = LintOptions(host_root=host_root, driver_roots=settings.driver_roots, node=True, settings=settings)
    run = lint_paths([], options)
    errors = [
        f"{finding.path}{':' + str(finding.line) if finding.line else ''}: {finding.code} {finding.message}"
        for result in run.files
        for finding in result.findings
        if finding.severity >= Severity.ERROR
    ]
    if not errors:
        return Check("engine-configs", OK, f"lint --node: no error in {len(run.files)} document(s)")
    return Check(
        "engine-configs",
        ERROR,
        f"lint --node: {len(errors)} error{'s' if len(errors) != 1 else ''}; first: {errors[0]}",
        errors[:20] + ([f"and {len(errors) - 20} more"] if len(errors) > 20 else []),
        f"nvidia-oci-hook lint --node --host-root {host_root} shows each with its fix",
    )


def run_checks(
    host_root: str,
    settings: Settings,
    nvml: bool = True,
    nvml_library: Optional[str] = None,
    restore_device_access: bool = False,
    runtime_roots: tuple[str, ...] = (),
) -> list[Check]:
    # node/checks/ modules import Check and the statuses from this module: imported here, not at its top.
    from nvidia_oci_hook.node.checks.device_plugins import device_plugins_check

    host = HostView(host_root)
    answer = resolve_driver_root(host, settings.driver_roots)
    checks = [
        driver_root_check(answer),
        kernel_module_check(answer),
        driver_versions_check(host, answer),
        markers_check(host, answer),
        stray_nodes_check(host, answer, settings),
        modify_device_files_check(host, answer),
        dev_char_check(host, answer),
    ]
    if nvml:
        checks.append(nvml_check(host, answer, settings, nvml_library))
    else:
        checks.append(Check("nvml", UNKNOWN, "not read: --host-root is not / (NVML would report this machine)"))
    checks.append(cdi_specs_check(host, settings))
    checks.append(device_plugins_check(host, answer, settings))
    checks.append(gpu_access_check(host, restore_device_access, runtime_roots))
    checks.append(reload_risk_check(host, answer))
    checks.append(engines_check(host))
    # The engines' configs are linted on a fresh view: the repairs above may have changed the node.
    checks.append(engine_configs_check(host_root, settings))
    return checks


def ordered(checks: Sequence[Check]) -> list[Check]:
    return sorted(checks, key=lambda check: _ORDER[check.status])


def overall(checks: Sequence[Check]) -> str:
    statuses = {check.status for check in checks}
    return ERROR if ERROR in statuses else WARNING if WARNING in statuses else OK


def render_text(checks: Sequence[Check], node_root: str = "") -> str:
    """node_root: where the node was read, when not at /; the paths in the checks are the node's own."""
    lines = []
    for check in ordered(checks):
        lines.append(f"[{check.status}] {check.name}: {check.summary}")
        lines.extend(f"    {line}" for line in check.evidence)
        if check.fix and check.status != OK:
            lines.append(f"    fix: {check.fix}")
    counts = {status: sum(check.status == status for check in checks) for status in (ERROR, WARNING, UNKNOWN, OK)}
    lines.append(
        ", ".join(f"{count} {status}" for status, count in counts.items() if count)
        + f" in {len(checks)} checks"
        + (f" (the node read under {node_root}; every path above is the node's own)" if node_root else "")
    )
    return "\n".join(lines) + "\n"


# The checks without which the node cannot be called healthy; the others may be unknown (NVML not installed).
CORE_CHECKS = ("driver-root", "kernel-module", "validation-markers", "stray-device-nodes")
# Every check run_checks makes, in its order.
CHECK_NAMES = (
    *CORE_CHECKS[:2],
    "driver-versions",
    *CORE_CHECKS[2:],
    "modify-device-files",
    "dev-char-links",
    "nvml",
    "cdi-specs",
    "device-plugins",
    "gpu-access",
    "reload-risk",
    "engines",
    "engine-configs",
)


def render_npd(checks: Sequence[Check]) -> tuple[str, int]:
    """node-problem-detector's custom plugin protocol: one line, exit 0 OK, 1 problem, 2 unknown."""
    problems = [check for check in ordered(checks) if check.status in (ERROR, WARNING)]
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return f"{problems[0].name}: {problems[0].summary}{more}", 1
    unknown = [check for check in checks if check.name in CORE_CHECKS and check.status == UNKNOWN]
    if unknown:
        return f"{unknown[0].name}: {unknown[0].summary}", 2
    if len(checks) == 1:  # doctor --check NAME: that check's own word
        return f"{checks[0].name}: {checks[0].summary}", 2 if checks[0].status == UNKNOWN else 0
    return f"GPU node OK: {checks[0].summary}", 0
