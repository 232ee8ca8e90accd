"""REC: what the reconcile engine (the runtime wrapper, the precreate filter) cannot fix, or would have to.

These rules run the engine's own plan on the config, so `lint` says exactly what the wrapper would do or refuse.
The edits the engine makes for problems other rules already name (DEV001, DEV002, DEV003, HOST001) are left to
those rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.engine.pipeline import plan
from nvidia_oci_hook.engine.records import Plan
from nvidia_oci_hook.findings import OUTCOME_REFUSED, Problem, Severity
from nvidia_oci_hook.kinds.cdinames import cdi_name_error
from nvidia_oci_hook.kinds.cri import CRI_CONTAINER, CRIContainerConfig, is_cri_container
from nvidia_oci_hook.kinds.document import OCI_CONFIG
from nvidia_oci_hook.rules.base import Context, rule


def _plan(value: Any, context: Context) -> Plan:
    def build() -> Plan:
        settings = (context.settings or Settings()).replace(driver_roots=context.driver_roots)
        assert context.host is not None
        return plan(value, context.host, settings)

    return context.cached("reconcile-plan", build)  # type: ignore[no-any-return]


def _findings(code: str, value: Any, context: Context) -> Iterator[Problem]:
    for finding in _plan(value, context).unapplied():
        if finding.code == code:
            yield Problem(finding.pointer, finding.message, finding.hint)


@rule("REC001", "unresolved-cdi-device", Severity.ERROR, [OCI_CONFIG, CRI_CONTAINER], needs_host=True)
def unresolved_cdi_device(value: Any, context: Context) -> Iterator[Problem]:
    """A requested CDI device is not defined by any usable spec on this node.

    ## What it checks
    Every CDI device the config requests (a `cdi.k8s.io/` annotation, or a qualified name in
    `NVIDIA_VISIBLE_DEVICES`; in a CRI container config, `cdi_devices` and the annotations) against the spec
    directories (`cdi.spec_dirs`, default `/etc/cdi` and
    `/var/run/cdi`), read as the CDI library's cache reads them: a later directory overrides an earlier one, and a
    name two specs of one directory both define is dropped.

    ## Why it matters
    The CDI library refuses the whole injection when one name is unresolvable (`unresolvable CDI devices`), so
    the container is refused, or, where nothing resolves CDI requests, it starts without its GPU.

    ## Example
    `"cdi.k8s.io/gpu": "nvidia.com/gpu=3"` on a node whose `/var/run/cdi/nvidia.yaml` defines GPUs 0 and 1.

    ## Fix
    Request a device the node has (`nvidia-ctk cdi list`), or regenerate the spec
    (`nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`). The message gives the one reason, as
    `nvidia-oci-hook cdi resolve` does: a conflict, the spec that defines it not loaded, a directory not read, or
    the names defined, nearest first.
    """
    if is_cri_container(value):
        yield from _cri_unresolved(value, context)
        return
    yield from _findings("REC001", value, context)


def _cri_unresolved(value: Any, context: Context) -> Iterator[Problem]:
    """A CRI container config's CDI requests, resolved as the engine resolves them (engine/cdi.py)."""
    from nvidia_oci_hook.engine.cdi import unresolved_reason

    assert context.host is not None
    settings = context.settings or Settings()
    wanted, cache = _cri_requests_and_cache(value, context)
    for pointer, name in wanted:
        if cdi_name_error(name) is not None or name in cache.devices:
            continue  # CRI004 and GPU005 name a malformed request
        reason, detail, fix = unresolved_reason(name, cache, settings.cdi_spec_dirs, context.host)
        yield Problem(
            pointer,
            f"CDI device {name} is unresolvable ({reason}): {detail}; cri-o and containerd refuse the container "
            f"(`CDI device injection failed: unresolvable CDI devices {name}`)",
            fix,
            outcome=OUTCOME_REFUSED,
        )


@rule("REC002", "invalid-cdi-request", Severity.ERROR, [OCI_CONFIG], needs_host=True)
def invalid_cdi_request(value: Any, context: Context) -> Iterator[Problem]:
    """A CDI name in NVIDIA_VISIBLE_DEVICES is not a qualified device name.

    ## What it checks
    The entries of `NVIDIA_VISIBLE_DEVICES` that look like CDI names (holding `/` and `=`): each must be
    `vendor/class=name` as the CDI library parses it. (For CDI annotations this is GPU005.)

    ## Why it matters
    The library refuses the request (`invalid CDI device name`), so the container is refused, or starts without
    its GPU where nothing resolves CDI requests.

    ## Example
    `NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=0,nvidia.com/gpu= 1`.

    ## Fix
    Write each device as `vendor/class=name`, separated by commas only.
    """
    return _findings("REC002", value, context)


@rule("REC003", "cdi-device-node-unavailable", Severity.ERROR, [OCI_CONFIG, CRI_CONTAINER], needs_host=True)
def cdi_device_node_unavailable(value: Any, context: Context) -> Iterator[Problem]:
    """A requested CDI device's node cannot be found on the host.

    ## What it checks
    For each device node of a requested CDI device: the host node (`hostPath`, else `path`) must exist and be a
    device node of the spec's type, unless the spec gives type and numbers itself (what the library calls fully
    specified). A host path under a stale driver root counts as found when the same node exists under the
    driver root that holds the driver.

    ## Why it matters
    The library stats the host node to fill in type and numbers; when it is missing, injection fails with
    `failed to stat CDI host device`, and the container is refused.

    ## Example
    `{"path": "/dev/nvidia0", "hostPath": "/run/nvidia/driver/dev/nvidia0"}` on a node with no driver container.

    In a CRI container config, the engine's own library does the stat, with no driver root to fall back on:
    cri-o 1.37 and containerd 1.7.24 and 2.1.9 refuse the container (`CDI device injection failed: failed to
    inject devices: failed to stat CDI host device "PATH": no such file or directory`, measured).

    ## Fix
    Regenerate the CDI spec for the driver root that exists, or give `type`, `major` and `minor` in the spec.
    """
    if is_cri_container(value):
        return _cri_missing_nodes(value, context)
    return _findings("REC003", value, context)


def _cri_requests_and_cache(value: Any, context: Context) -> tuple[list[tuple[str, str]], Any]:
    """(pointer, qualified name) of each CDI device a CRI container config asks for (cdi_devices, then the
    annotations under the configured prefixes), and the spec directories' cache they resolve against (None
    when nothing is asked)."""
    from nvidia_oci_hook.engine.cdi import read_cache
    from nvidia_oci_hook.engine.requests import annotation_requests

    assert context.host is not None
    settings = context.settings or Settings()
    config = CRIContainerConfig(value)
    wanted = [(request.pointer, request.name) for request in config.cdi_devices]
    base, annotations = config.annotations
    wanted.extend((request.pointer, request.name) for request in annotation_requests(annotations, settings, base))
    return wanted, read_cache(context.host, settings.cdi_spec_dirs) if wanted else None


def _cri_missing_nodes(value: Any, context: Context) -> Iterator[Problem]:
    """The host nodes of the CDI devices a CRI config asks for that the engine's library cannot stat."""
    import stat

    assert context.host is not None
    wanted, cache = _cri_requests_and_cache(value, context)
    for pointer, name in wanted:
        if name not in cache.devices:
            continue  # REC001's
        spec, device = cache.devices[name]
        nodes = [*spec.edits.get("deviceNodes", []), *spec.devices[device].get("deviceNodes", [])]
        for node in nodes:
            if not isinstance(node, dict) or not isinstance(node.get("path"), str):
                continue
            host_path = node.get("hostPath") or node["path"]
            kind, major = node.get("type") or "", node.get("major") or 0
            if kind and (major or kind == "p"):
                continue  # fully specified: the library does not stat the host
            info = context.host.lstat(host_path)
            if info is None:
                yield Problem(
                    pointer,
                    f"CDI device {name}: the engine refuses the container (`CDI device injection failed: failed to "
                    f'inject devices: failed to stat CDI host device "{host_path}": no such file or directory`), '
                    f"from {spec.path}",
                    "regenerate the CDI spec for the driver root that exists (nvidia-ctk cdi generate), or give "
                    "type, major and minor in the spec",
                    outcome=OUTCOME_REFUSED,
                )
            elif not (stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
                yield Problem(
                    pointer,
                    f"CDI device {name}: its host node {host_path} is not a device node, from {spec.path}",
                    "regenerate the CDI spec, or give type, major and minor in the spec",
                )


@rule("REC004", "device-conflict-refused", Severity.ERROR, [OCI_CONFIG], needs_host=True)
def device_conflict_refused(value: Any, context: Context) -> Iterator[Problem]:
    """Two different device nodes for one path, and the policy refuses to choose.

    ## What it checks
    With `policy.device_conflict: refuse`, every path `linux.devices` lists as two different nodes. Under the
    default policy (`cdi`) the engine keeps the entry a CDI request defines, or the first, and reports the edit
    instead (DEV002).

    ## Why it matters
    runc and crun create the first entry and ignore the rest, so the container may get another GPU than the one
    it asked for.

    ## Example
    `/dev/nvidia0` as c 195:0 from the engine's host devices and as c 195:1 from a device plugin.

    ## Fix
    Find which source adds the wrong entry and stop it, or let the engine choose (`policy.device_conflict: cdi`).
    """
    return _findings("REC004", value, context)


@rule("REC005", "driver-root-path-missing", Severity.ERROR, [OCI_CONFIG], needs_host=True)
def driver_root_path_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A mount source or hook under a driver root exists under no driver root.

    ## What it checks
    Bind-mount sources and hook programs under a driver-root candidate other than `/` that do not exist, and
    whose path relative to that root exists under no other candidate either, so the engine cannot move them.

    ## Why it matters
    runc fails the mount (`no such file or directory`) or the hook, and the container does not start. The driver
    is not where the spec was generated for, and not anywhere else this tool knows of.

    ## Example
    A mount source `/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.1` on a node with no driver
    container and a host driver of another version.

    ## Fix
    Find where the driver is (`nvidia-oci-hook lint --node`), add that root to `driver_roots`, or regenerate the
    spec.
    """
    return _findings("REC005", value, context)


@rule("REC006", "cdi-request-not-applied", Severity.ERROR, [OCI_CONFIG], needs_host=True)
def cdi_request_not_applied(value: Any, context: Context) -> Iterator[Problem]:
    """A requested CDI device's edits are missing from the spec.

    ## What it checks
    For every CDI device the config requests and the node's specs define: whether its container edits (env,
    device nodes and their allow rules, mounts, hooks, groups) are already in the spec.

    ## Why it matters
    Containerd 1.6 ignores `enable_cdi`, and a CRI annotation reaches the spec untouched: the container starts
    without its GPU. A prestart hook can no longer add it, since runc never re-reads config.json after create.

    ## Example
    `"cdi.k8s.io/gpu": "nvidia.com/gpu=0"` in a spec with no `/dev/nvidia0` entry.

    ## Fix
    Run the container through the wrapper (`nvidia-oci-runtime` as the runtime's binary), or enable CDI in an
    engine that supports it (containerd 1.7 or later, cri-o, podman with `--device nvidia.com/gpu=0`).
    """
    return _findings("REC006", value, context)
