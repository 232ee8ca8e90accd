"""doctor's `device-plugins`: what the kubelet's device plugins handed this node's pods, against the node.

The kubelet's checkpoint keeps each container's Allocate answer, and the kubelet hands the same answer to the
engine whenever it creates the container again (a restart, a crash loop). So a stale driver root the plugin
picked up (seed 000: `/run/nvidia/driver/dev/nvidiactl` on a node whose driver is on `/`) is visible here, in
every pod it served, before the next container start fails:
- error: a device host path the node does not have. containerd refuses the container (`lstat PATH: no such file
  or directory`, internal/cri/opts/spec_linux_opts.go); cri-o starts it without the device and says nothing;
- error: a CDI name (CRI `cdi_devices`, or a `cdi.k8s.io/` annotation) that no spec on the node resolves, as
  node/cdi_resolve.py judges it for the node's CRI engine;
- warning: a static pod asking for an `nvidia.com/` resource no plugin registered: the kubelet admits it and it
  runs without the GPU (the "manually bound" caveat of pkg/kubelet/lifecycle/predicate.go);
- warning: allocations of pods that are gone (neither a directory under the kubelet's pods nor a running
  container): the kubelet holds those devices until its next allocation frees them;
- warning: a checkpoint, or an entry of it, the kubelet cannot read (it then goes on without it).
Only the pods that are still here are judged by their paths and names: a gone pod's answer is history.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.host import HostView, rewrite_for_existing_root
from nvidia_oci_hook.kinds.kubernetes.deviceplugin import DEVICE_PLUGIN_DIR, KUBELET_SOCKET
from nvidia_oci_hook.node.checks.base import ERROR, OK, UNKNOWN, WARNING, Check
from nvidia_oci_hook.node.device_plugins import (
    Allocation,
    DevicePlugins,
    KubeletPods,
    kubelet_pods,
    plugin_socket,
    read_device_plugins,
)
from nvidia_oci_hook.node.driver import FOUND, DriverRootAnswer

NAME = "device-plugins"
CRIO_SILENT = "cri-o starts it without the device, silently"
PLUGIN_FIX = (
    "for the device paths, point the device plugin at the driver root that exists (GPU Operator: remove the stale "
    "files in /run/nvidia/validations, then delete this node's nvidia-device-plugin-daemonset pod) and recreate "
    "the pods named"
)
REGISTER_FIX = (
    "for the static pods, start the device plugin on this node (GPU Operator: its nvidia-device-plugin-daemonset "
    "pod), then restart them"
)
CHECKPOINT_FIX = (
    "for the checkpoint, restart this node's device plugin pod: its registration makes the kubelet write the "
    "checkpoint afresh"
)
STALE_FIX = (
    "for the pods that are gone, nothing by hand: the kubelet frees their devices when it next allocates devices"
)


@dataclass
class _Finding:
    status: str
    headline: str  # for the summary, when it is the first
    lines: list[str] = field(default_factory=list)
    fix: Optional[str] = None
    names: set[str] = field(default_factory=set)  # what the lines are about, counted once each


def device_plugins_check(host: HostView, answer: DriverRootAnswer, settings: Settings) -> Check:
    plugins = read_device_plugins(host)
    if not plugins.directory_found:
        return Check(
            NAME,
            UNKNOWN,
            f"no kubelet device-plugin directory ({DEVICE_PLUGIN_DIR}): not a Kubernetes node, or its kubelet has "
            "not started",
        )
    pods = kubelet_pods(host)
    counts: dict[str, int] = {}
    notes = _notes(plugins, pods)
    current = [a for a in plugins.allocations if not pods.judged or pods.known(a.pod_uid)]
    found: list[_Finding] = []
    if plugins.checkpoint_problem is None or plugins.allocations:
        counts["allocations"] = len(plugins.allocations)
        counts["undecodable_allocations"] = sum(a.problem is not None for a in plugins.allocations)
        missing = _missing_host_paths(host, answer, settings, current)
        counts["allocations_missing_host_path"] = len(missing.lines)
        cdi = _unresolved_cdi_names(host, settings, current)
        counts["unresolved_cdi_names"] = len(cdi.names)
        found += [missing, cdi]
    found.append(_checkpoint_problems(plugins))
    unregistered = _unregistered(plugins, pods)
    if pods.static_read:
        counts["unregistered_resources"] = len(unregistered.names)
    found.append(unregistered)
    if pods.judged:
        stale = _stale(host, answer, settings, plugins, pods)
        counts["stale_allocations"] = len(stale.lines)
        found.append(stale)
    problems = [finding for finding in found if finding.lines]
    problems.sort(key=lambda finding: finding.status != ERROR)
    evidence = [line for finding in problems for line in finding.lines] + notes
    if not problems:
        return Check(NAME, OK, _healthy_summary(plugins), evidence, counts=counts)
    first = problems[0]
    more = len(problems) - 1
    summary = first.headline + (f" (and {more} more kind{'s' if more != 1 else ''} of problem below)" if more else "")
    fixes = list(dict.fromkeys(finding.fix for finding in problems if finding.fix))
    return Check(NAME, first.status, summary, evidence, "; ".join(fixes), counts=counts)


def _notes(plugins: DevicePlugins, pods: KubeletPods) -> list[str]:
    notes = []
    if not plugins.kubelet_socket:
        notes.append(f"{KUBELET_SOCKET}: absent: no kubelet is taking device-plugin registrations")
    if plugins.old_shape:
        notes.append(
            f"{plugins.checkpoint_path}: DeviceIDs as plain lists, as kubelets 1.19 and older wrote them: kubelets "
            "1.23 to 1.30 read this shape (kubernetes #102882), 1.31 and later do not (#123398) and go on without it"
        )
    if not pods.judged:
        notes.append(
            f"allocations of pods that are gone are not judged: {pods.pods_dir} is absent and no running "
            "container names its pod"
        )
    notes.extend(pods.problems)
    return notes


def _missing_host_paths(
    host: HostView, answer: DriverRootAnswer, settings: Settings, allocations: Sequence[Allocation]
) -> _Finding:
    finding = _Finding(ERROR, "", fix=PLUGIN_FIX)
    first_path = ""
    for allocation in allocations:
        line = _missing_line(host, answer, settings, allocation)
        if line is not None:
            finding.lines.append(line[0])
            first_path = first_path or line[1]
    count = len(finding.lines)
    finding.headline = (
        f"the device plugins hand out device paths this node does not have ({first_path}, to {count} "
        f"container{'s' if count != 1 else ''}): containerd refuses such a container, {CRIO_SILENT}"
    )
    return finding


def _missing_line(
    host: HostView, answer: DriverRootAnswer, settings: Settings, allocation: Allocation
) -> Optional[tuple[str, str]]:
    """(evidence line, first missing path) of an allocation whose devices name host paths the node lacks."""
    if allocation.answer is None:
        return None
    # A plugin answering for several devices may repeat the control node once per device.
    missing = list({
        device.host_path: device
        for device in allocation.answer.devices
        if device.host_path and not (device.host_path.startswith("/") and host.exists(device.host_path))
    }.values())  # fmt: skip
    if not missing:
        return None
    shown = ", ".join(
        f"{device.host_path} (at {device.container_path})" if device.container_path != device.host_path else
        device.host_path
        for device in missing
    )  # fmt: skip
    first = missing[0].host_path
    rewrites = [rewrite_for_existing_root(host, settings.driver_roots, d.host_path) for d in missing]
    found = [rewrite for rewrite in rewrites if rewrite is not None]
    if found:
        hint = (
            f"the node has {', '.join(rewrite.rewritten for rewrite in found)}: the driver is under "
            f"{found[0].existing_root}, not {found[0].missing_root}"
        )
    elif answer.status == FOUND:
        hint = f"the driver root found is {answer.root}, and it does not have them either"
    else:
        hint = "no driver root candidate has them"
    word = "does" if len(missing) == 1 else "do"
    return (
        f"{allocation.label}: device {shown} {word} not exist on this node: containerd refuses the container "
        f"(`lstat {first}: {os.strerror(errno.ENOENT).lower()}`); {CRIO_SILENT}; {hint}",
        first,
    )


def _requested_names(allocation: Allocation, settings: Settings) -> list[str]:
    from nvidia_oci_hook.engine.requests import annotation_requests

    if allocation.answer is None:
        return []
    names = list(allocation.answer.cdi_devices)
    names += [request.name.strip() for request in annotation_requests(dict(allocation.answer.annotations), settings)]
    return list(dict.fromkeys(name for name in names if name))


def _unresolved_cdi_names(host: HostView, settings: Settings, allocations: Sequence[Allocation]) -> _Finding:
    finding = _Finding(ERROR, "")
    asked = [(allocation, _requested_names(allocation, settings)) for allocation in allocations]
    names = sorted({name for _, wanted in asked for name in wanted})
    if not names:
        return finding
    unresolved = _resolve(host, settings, names)
    first = ""
    for allocation, wanted in asked:
        for name in wanted:
            for label, message, engine_error, fix in unresolved.get(name, []):
                first = first or f"{name}: {message}"
                finding.names.add(name)
                finding.fix = finding.fix or fix
                error = f"; the engine: {engine_error}" if engine_error else ""
                finding.lines.append(f"{allocation.label}: CDI device {name}: {label}: {message}{error}")
    count = len(finding.names)
    finding.headline = (
        f"{count} CDI device name{'s' if count != 1 else ''} the device plugins hand out "
        f"do{'es' if count == 1 else ''} not resolve on this node ({first})"
    )
    return finding


def _resolve(host: HostView, settings: Settings, names: list[str]) -> dict[str, list[tuple[str, str, str, str]]]:
    """name -> (who judged, why it does not resolve, the engine's words, the fix) for each unresolvable name, by
    the node's CRI engine (both where it has both), else by the CDI cache of the configured spec directories."""
    from nvidia_oci_hook.kinds.cdi.releases import UnknownRelease
    from nvidia_oci_hook.kinds.cdinames import cdi_name_error
    from nvidia_oci_hook.kinds.loading import load_document
    from nvidia_oci_hook.node.cdi_resolve import NoEngine, resolve
    from nvidia_oci_hook.node.engines import cri_engine_of

    found: dict[str, list[tuple[str, str, str, str]]] = {}
    valid = []
    for name in names:
        problem = cdi_name_error(name)
        if problem is None:
            valid.append(name)
        else:
            found[name] = [("the CDI library", problem, "", "have the device plugin hand out qualified names")]
    if not valid:
        return found
    engine = cri_engine_of(host)
    try:
        results = resolve(host, load_document, valid, engine)
    except (NoEngine, UnknownRelease):
        results = []
    cri = [result for result in results if result.engine in ("containerd", "crio")] or results
    if not cri:
        return _by_cache(host, settings, valid, found)
    for result in cri:
        for resolution in result.names:
            if not resolution.resolved:
                found.setdefault(resolution.name, []).append(
                    (result.label, resolution.message, resolution.engine_error or "", resolution.fix or "")
                )
    return found


def _by_cache(
    host: HostView, settings: Settings, names: list[str], found: dict[str, list[tuple[str, str, str, str]]]
) -> dict[str, list[tuple[str, str, str, str]]]:
    from nvidia_oci_hook.engine.cdi import read_cache
    from nvidia_oci_hook.engine.cdi_reasons import NOT_DEFINED, REASONS, unresolvable_text

    cache = read_cache(host, settings.cdi_spec_dirs)
    label = f"no CRI engine found; the CDI spec directories {', '.join(settings.cdi_spec_dirs)}"
    for name in names:
        if name in cache.devices:
            continue
        if name in cache.conflicts:
            why = f"{' and '.join(cache.conflicts[name])} both define it in one directory: the cache drops it"
        else:
            why = "no spec defines it"
        found.setdefault(name, []).append((label, why, unresolvable_text([name]), REASONS[NOT_DEFINED][1]))
    return found


def _unregistered(plugins: DevicePlugins, pods: KubeletPods) -> _Finding:
    finding = _Finding(WARNING, "", fix=REGISTER_FIX)
    for pod in pods.static_pods:
        for container, resource in pod.requests:
            if plugins.is_registered(resource):
                continue
            finding.lines.append(
                f"static {pod.label} ({pod.path}) container {container} asks for {resource}, and no device plugin "
                f"registered it (no {plugin_socket(resource)} in {DEVICE_PLUGIN_DIR}, not among the checkpoint's "
                "RegisteredDevices): the kubelet admits a static pod anyway and runs it without the GPU "
                "(pkg/kubelet/lifecycle/predicate.go)"
            )
            finding.names.add(resource)
    finding.headline = (
        f"static pods ask for {', '.join(sorted(finding.names))}, which no device plugin registered here: the "
        "kubelet runs them without the GPU"
    )
    return finding


def _stale(
    host: HostView, answer: DriverRootAnswer, settings: Settings, plugins: DevicePlugins, pods: KubeletPods
) -> _Finding:
    finding = _Finding(WARNING, "", fix=STALE_FIX)
    for allocation in plugins.allocations:
        if pods.known(allocation.pod_uid):
            continue
        ids = ", ".join(allocation.device_ids) or "no device ID"
        line = (
            f"{allocation.label}: the checkpoint still gives it {ids}, and the pod is gone (no {pods.pods_dir}/"
            f"{allocation.pod_uid}, no running container): the kubelet holds these devices until its next "
            "allocation frees them"
        )
        missing = _missing_line(host, answer, settings, allocation)
        if missing is not None:
            line += f"; its answer named {missing[1]}, which this node does not have"
        finding.lines.append(line)
    count = len(finding.lines)
    finding.headline = (
        f"the checkpoint still gives devices to {count} container{'s' if count != 1 else ''} of pods that are gone"
    )
    return finding


def _checkpoint_problems(plugins: DevicePlugins) -> _Finding:
    finding = _Finding(WARNING, "", fix=CHECKPOINT_FIX)
    if plugins.checkpoint_problem is not None:
        finding.lines.append(
            f"{plugins.checkpoint_path}: {plugins.checkpoint_problem}: the kubelet cannot read it either, and at its "
            "next start goes on without it, not knowing which devices running pods hold"
        )
        finding.headline = f"the kubelet's device-plugin checkpoint is unusable: {plugins.checkpoint_problem}"
    undecodable = [allocation for allocation in plugins.allocations if allocation.problem is not None]
    for allocation in undecodable:
        finding.lines.append(
            f"{allocation.label}: {allocation.problem}: the kubelet skips this entry when it reads the checkpoint"
        )
    if undecodable and plugins.checkpoint_problem is None:
        finding.headline = (
            f"{len(undecodable)} allocation{'s' if len(undecodable) != 1 else ''} in the kubelet's checkpoint "
            "do not decode"
        )
    return finding


def _healthy_summary(plugins: DevicePlugins) -> str:
    resources = sorted(
        set(plugins.registered) | {allocation.resource for allocation in plugins.allocations}
        | set(_socket_resources(plugins))
    )  # fmt: skip
    if not resources:
        checkpoint = "no checkpoint" if not plugins.checkpoint_found else "an empty checkpoint"
        return f"no device plugin registered, {checkpoint}"
    parts = []
    for resource in resources:
        devices = plugins.registered.get(resource)
        registered = (
            f"plugin registered ({len(devices)} device{'s' if len(devices) != 1 else ''})"
            if devices is not None
            else "plugin socket present"
            if plugin_socket(resource) in plugins.sockets
            else "no plugin registered"
        )
        count = len(plugins.answers_for(resource))
        parts.append(f"{resource}: {registered}, {count} allocation{'s' if count != 1 else ''}")
    return "; ".join(parts) + ", every host path present and every CDI name resolved"


def _socket_resources(plugins: DevicePlugins) -> list[str]:
    return [f"nvidia.com/{socket[len('nvidia-') : -len('.sock')]}" for socket in plugins.sockets
            if socket.startswith("nvidia-") and socket.endswith(".sock")]  # fmt: skip


__all__ = ["NAME", "device_plugins_check"]
