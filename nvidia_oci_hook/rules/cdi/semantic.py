"""CDI1xx: specs the CDI library loads, but whose devices fail, or do the wrong thing, when they are injected."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.host import rewrite_for_existing_root
from nvidia_oci_hook.kinds.cdi.codes import CDI, UNKNOWN_VERSION
from nvidia_oci_hook.kinds.cdi.goformat import go_quote
from nvidia_oci_hook.kinds.cdi.names import parse_qualifier
from nvidia_oci_hook.kinds.cdi.releases import RELEASES, describe_refusers, version_key
from nvidia_oci_hook.kinds.cdi.specs_go import (
    EditsView,
    GoStruct,
    edit_blocks,
    entries,
    fully_specified,
    known_version,
    minimum_version,
    node_host_path,
)
from nvidia_oci_hook.kinds.cdi.validation import analyse
from nvidia_oci_hook.kinds.devices import NVIDIACTL, gpu_index
from nvidia_oci_hook.node.driver_facts import host_driver_version, libraries_named, library_version
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.cdi.loader import analysis, judges
from nvidia_oci_hook.rules.host import stale_root_problem


def _spec(value: Any, context: Context) -> Optional[GoStruct]:
    """The decoded spec, or None when the library would not load it (the CDI0xx rules say why)."""
    result = analysis(value, context)
    return result.spec if result.loads else None


def _qualified(spec: GoStruct, block: EditsView) -> str:
    vendor, cls = parse_qualifier(spec.text("kind"))
    if block.device is None:
        return f"any device of {vendor}/{cls}"
    return f"{vendor}/{cls}={block.device}"


def _injection_failure(spec: GoStruct, block: EditsView) -> str:
    return f"injecting {_qualified(spec, block)} fails"


@rule("CDI101", "device-node-missing", Severity.ERROR, [CDI], needs_host=True)
def device_node_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A device node the CDI library must read from the host does not exist there.

    ## What it checks
    Each `deviceNodes` entry whose `type` and `major` are not both set (`type: p` needs no major): the library
    then reads the node's type and numbers from the host, at `hostPath`, or at `path` when `hostPath` is
    empty, with lstat. The rule reports the ones missing under `--host-root` and not explained by a stale
    driver root (CDI102).

    ## Why it matters
    The spec loads, but injecting the device fails: the engine refuses the container with `failed to inject
    devices: failed to stat CDI host device "/dev/nvidia3": no such file or directory`. A node in the
    spec-level `containerEdits` breaks every device of the spec. Specs outlive the GPUs they were generated
    for (a GPU removed, a MIG layout changed, the driver not loaded yet at boot).

    ## Example
    `{"path": "/dev/nvidia3"}` in a spec generated before GPU 3 was taken out of the node.

    ## Fix
    Regenerate the spec for the node as it is now (`nvidia-ctk cdi generate`, or restart whatever generates
    it); load the driver before the engine starts containers.
    """
    spec = _spec(value, context)
    if spec is None or context.host is None:
        return
    for block in edit_blocks(spec):
        for pointer, node in entries(block, "deviceNodes"):
            host_path = node_host_path(node)
            # The library lstats the node: a dangling link is "not a device node" (CDI103), not missing.
            if fully_specified(node) or not host_path.startswith("/") or context.host.link_identity(host_path):
                continue
            if rewrite_for_existing_root(context.host, context.driver_roots, host_path) is not None:
                continue
            yield Problem(
                pointer,
                f"{host_path} does not exist on the host and the entry gives no type and major, so "
                f"{_injection_failure(spec, block)}: failed to stat CDI host device {go_quote(host_path)}: "
                "no such file or directory",
                "regenerate the spec for the GPUs the node has now, or give the entry its type, major and minor",
            )


def _stale_paths(spec: GoStruct) -> Iterator[tuple[str, str, str]]:
    """(pointer, host path, what its absence does) for every host path whose absence breaks the container."""
    for block in edit_blocks(spec):
        for _pointer, node in entries(block, "deviceNodes"):
            if not fully_specified(node):
                where = "hostPath" if node.text("hostPath") else "path"
                path = node_host_path(node)
                yield (
                    node.at(where),
                    path,
                    f"{_injection_failure(spec, block)}: failed to stat CDI host device {go_quote(path)}: "
                    "no such file or directory",
                )
        for _pointer, mount in entries(block, "mounts"):
            yield (
                mount.at("hostPath"),
                mount.text("hostPath"),
                f"the runtime cannot mount it, and fails every container that requests {_qualified(spec, block)}",
            )
        for _pointer, hook in entries(block, "hooks"):
            yield (
                hook.at("path"),
                hook.text("path"),
                f"the {hook.text('hookName')} hook cannot run, and the runtime fails every container that requests "
                f"{_qualified(spec, block)}",
            )


@rule("CDI102", "stale-driver-root", Severity.ERROR, [CDI], needs_host=True)
def stale_driver_root(value: Any, context: Context) -> Iterator[Problem]:
    """A spec's host path sits under a driver root that does not hold it, while another driver root does.

    ## What it checks
    Device-node host paths the library reads from the host (see CDI101), mount `hostPath`s and hook `path`s
    that do not exist under `--host-root`, against the driver-root candidates (`--driver-root`, default `/`
    and `/run/nvidia/driver`): if the same path relative to its root exists under another candidate, the spec
    was generated for the wrong driver root. The hint is the rewritten path; nothing is reported on a guess.

    ## Why it matters
    This is the GPU Operator failure where a spec generated for `/run/nvidia/driver` (containerized driver)
    is used on a node whose driver is installed on the host, or the other way round: device injection fails
    with `failed to stat CDI host device "/run/nvidia/driver/dev/nvidiactl": no such file or directory`, or
    runc fails to mount the libraries or to run `nvidia-cdi-hook`.

    ## Example
    `{"path": "/dev/nvidiactl", "hostPath": "/run/nvidia/driver/dev/nvidiactl"}` on a node where only
    `/dev/nvidiactl` exists.

    ## Fix
    Regenerate the spec with the right `--driver-root`, or rewrite its root
    (`nvidia-ctk cdi transform root --from /run/nvidia/driver --to /`); for the GPU Operator, remove stale
    markers under `/run/nvidia/validations` and restart the toolkit and device-plugin pods.
    """
    spec = _spec(value, context)
    if spec is None:
        return
    for pointer, path, consequence in _stale_paths(spec):
        problem = stale_root_problem(context, pointer, path, path, consequence) if path.startswith("/") else None
        if problem is not None:
            yield problem


@rule("CDI103", "host-node-mismatch", Severity.ERROR, [CDI], needs_host=True)
def host_node_mismatch(value: Any, context: Context) -> Iterator[Problem]:
    """A device node's host path is not a device node of the type the spec says.

    ## What it checks
    Each `deviceNodes` entry the library completes from the host (type and major not both set): the host path
    must be a character device, block device or FIFO, and when `type` is set it must be that type (the host
    reports character devices as `c`, so `u` needs an explicit major).

    ## Why it matters
    Injecting the device fails: `failed to stat CDI host device "...": not a device node` when the path is a
    file or directory (a node copied as a regular file, a driver root holding an empty `dev` tree), or
    `CDI device ("/dev/nvidia0", "/dev/nvidia0"), host type mismatch (b, c)`.

    ## Example
    `{"path": "/dev/nvidia0", "type": "b"}` where `/dev/nvidia0` is the character device 195:0.

    ## Fix
    Leave `type` out (the library takes it from the host) or set the type and numbers the node has
    (`ls -l` shows `c` and `195, 0`); point `hostPath` at the real node.
    """
    spec = _spec(value, context)
    if spec is None or context.host is None:
        return
    for block in edit_blocks(spec):
        for pointer, node in entries(block, "deviceNodes"):
            host_path = node_host_path(node)
            if fully_specified(node) or not host_path.startswith("/"):
                continue
            identity = context.host.link_identity(host_path)
            if identity is None:
                continue
            node_type = node.text("type")
            if identity.type not in ("c", "b", "p"):
                yield Problem(
                    pointer,
                    f"{host_path} is {identity.describe()} on the host, not a device node: "
                    f"{_injection_failure(spec, block)}: failed to stat CDI host device {go_quote(host_path)}: "
                    "not a device node",
                    "point the entry at the real device node, or give it its type, major and minor",
                )
            elif node_type and node_type != identity.type:
                yield Problem(
                    node.at("type"),
                    f"type {node_type!r} but {host_path} is {identity.describe()} on the host: "
                    f"{_injection_failure(spec, block)}: CDI device ({go_quote(node.text('path'))}, "
                    f"{go_quote(host_path)}), host type mismatch ({node_type}, {identity.type})",
                    f'set "type": "{identity.type}", or leave type out',
                )


@rule("CDI104", "host-path-missing", Severity.ERROR, [CDI], needs_host=True)
def host_path_missing(value: Any, context: Context) -> Iterator[Problem]:
    """A mount's hostPath or a hook's program does not exist on the host.

    ## What it checks
    Each absolute mount `hostPath` and hook `path` of the spec, under `--host-root`, unless a stale driver
    root explains it (CDI102).

    ## Why it matters
    The library injects them without looking; the runtime then fails the container: runc cannot mount a
    missing source (`no such file or directory`), and a missing hook program fails the `createContainer`
    stage. A driver upgrade that changed library versions (`libcuda.so.550.54.14` to `.550.90.07`) leaves
    every old spec pointing at files that are gone.

    ## Example
    `{"hostPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14", "containerPath": "..."}` after the driver
    was upgraded.

    ## Fix
    Regenerate the spec after every driver upgrade (the GPU Operator and `nvidia-ctk cdi generate` as a
    systemd unit do this), or install the missing program (`nvidia-container-toolkit-base` provides
    `nvidia-cdi-hook`).
    """
    spec = _spec(value, context)
    if spec is None or context.host is None:
        return
    for block in edit_blocks(spec):
        for _pointer, mount in entries(block, "mounts"):
            source = mount.text("hostPath")
            if _missing(context, source) and _other_driver_version(context, source) is None:
                yield Problem(
                    mount.at("hostPath"),
                    f"mount source {source} (for {mount.text('containerPath')}) does not exist on the host: the "
                    f"runtime fails every container that requests {_qualified(spec, block)}",
                    "regenerate the spec for the installed driver, or remove the mount",
                )
        for _pointer, hook in entries(block, "hooks"):
            program = hook.text("path")
            if _missing(context, program):
                yield Problem(
                    hook.at("path"),
                    f"{hook.text('hookName')} hook program {program} does not exist on the host: the runtime fails "
                    f"every container that requests {_qualified(spec, block)}",
                    "install the program (nvidia-cdi-hook comes with nvidia-container-toolkit-base), or "
                    "regenerate the spec",
                )


def _loaded_driver(context: Context) -> Optional[str]:
    from nvidia_oci_hook.node.driver_facts import module_version

    assert context.host is not None
    host = context.host
    return context.cached("module-version", lambda: module_version(host).version)  # type: ignore[no-any-return]


def _other_driver_version(context: Context, path: str) -> Optional[tuple[str, str]]:
    """(the driver version a library path names, the loaded module's) when they differ."""

    parsed = library_version(path.rpartition("/")[2])
    loaded = _loaded_driver(context) if parsed is not None else None
    if parsed is None or loaded is None or parsed[1] == loaded:
        return None
    return parsed[1], loaded


@rule("CDI110", "other-driver-version", Severity.ERROR, [CDI], needs_host=True)
def other_driver_version(value: Any, context: Context) -> Iterator[Problem]:
    """The spec mounts driver libraries of another version than the loaded kernel module's.

    ## What it checks
    Each mount `hostPath` (and each `create-symlinks` hook argument) that names a driver library with its
    version (`libcuda.so.545.23.08`, `libnvidia-ml.so.545.23.08`), and the `enable-cuda-compat` hook's
    `--host-driver-version=`, against the version of the loaded kernel module (`/proc/driver/nvidia/version`
    under `--host-root`), whether or not the old files are still there.

    ## Why it matters
    `nvidia-ctk cdi generate` writes the driver's version into every library path. After a driver upgrade
    the spec still injects the old libraries where they remain (a package left them, or the driver container's
    root was not cleaned), and NVML in the container refuses them: `Failed to initialize NVML: Driver/library
    version mismatch`. Where they are gone, the runtime fails the mount instead.

    ## Example
    `{"hostPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.545.23.08", ...}` on a node whose module is 550.54.15.

    ## Fix
    `nvidia-oci-hook cdi reconcile` repoints each library to the loaded version's file when it exists beside
    the old one; otherwise regenerate the spec (`nvidia-ctk cdi generate`), and make that run after every
    driver upgrade.
    """
    spec = _spec(value, context)
    if spec is None or context.host is None:
        return
    host = context.host
    for block in edit_blocks(spec):
        for _pointer, mount in entries(block, "mounts"):
            source = mount.text("hostPath")
            versions = _other_driver_version(context, source) if source.startswith("/") else None
            if versions is None:
                continue
            named, loaded = versions
            directory, _, name = source.rpartition("/")
            current = f"{directory}/{name[: -len(named)]}{loaded}"
            gone = "" if host.exists(source) else " (and the file is gone)"
            yield Problem(
                mount.at("hostPath"),
                f"mount source {source} is driver {named}'s library{gone}, but the loaded kernel module is {loaded}: "
                f"NVML fails in every container that requests {_qualified(spec, block)} ('Failed to initialize "
                "NVML: Driver/library version mismatch')",
                f"nvidia-oci-hook cdi reconcile repoints it to {current}"
                if host.exists(current)
                else f"regenerate the spec for driver {loaded} (nvidia-ctk cdi generate): {current} does not exist",
            )
        for _pointer, hook in entries(block, "hooks"):
            for index, argument in enumerate(hook.items_of("args")):
                if not isinstance(argument, str):
                    continue
                stated, module = host_driver_version(argument), _loaded_driver(context)
                if stated is not None and module is not None and stated != module:
                    yield Problem(
                        f"{hook.at('args')}/{index}",
                        f"{hook.text('hookName')} hook argument {argument!r}: the spec was generated for driver "
                        f"{stated}, the loaded kernel module is {module}: NVIDIA's enable-cuda-compat hook judges the "
                        "image's forward-compatibility libraries against the wrong driver",
                        "nvidia-oci-hook cdi reconcile, or regenerate the spec (nvidia-ctk cdi generate)",
                    )
                    continue
                others = [version for _name, version in libraries_named(argument) if version != module]
                if others and module is not None:
                    yield Problem(
                        f"{hook.at('args')}/{index}",
                        f"{hook.text('hookName')} hook argument {argument!r} names driver {others[0]}'s library, but "
                        f"the loaded kernel module is {module}",
                        "nvidia-oci-hook cdi reconcile, or regenerate the spec (nvidia-ctk cdi generate)",
                    )


def _missing(context: Context, path: str) -> bool:
    assert context.host is not None
    if not path.startswith("/") or context.host.exists(path):
        return False
    return rewrite_for_existing_root(context.host, context.driver_roots, path) is None


def _node_identity(node: GoStruct) -> tuple[str, str, int, int]:
    return (node_host_path(node), node.text("type"), node.integer("major"), node.integer("minor"))


def _same_node(one: tuple[str, str, int, int], other: tuple[str, str, int, int]) -> bool:
    """The same host path, and the same numbers where both entries give them."""
    if one[0] != other[0]:
        return False
    return not (one[1] and other[1] and one[2] and other[2]) or one[1:] == other[1:]


@rule("CDI105", "conflicting-container-path", Severity.WARNING, [CDI])
def conflicting_container_path(value: Any, context: Context) -> Iterator[Problem]:
    """Two devices of one spec put different things at the same container path.

    ## What it checks
    Device nodes with the same `path` but a different host node (hostPath, type, major or minor), and mounts
    with the same `containerPath` but a different `hostPath`, in different devices' edits (or a device's and
    the spec's).

    ## Why it matters
    When a container requests both devices, the library removes the earlier entry for the path and adds the
    later one, silently: the container gets one of the two nodes, which one depending on the order of the
    request. For `/dev/nvidia0` that is the wrong GPU.

    ## Example
    Device `0` maps `/dev/nvidia0` to `/dev/nvidia0` and device `1` maps `/dev/nvidia0` to `/dev/nvidia1`.

    ## Fix
    Give each device its own container path (`/dev/nvidia1` for GPU 1); regenerate the spec rather than
    copying device entries by hand.
    """
    spec = _spec(value, context)
    if spec is None:
        return
    seen_nodes: dict[str, tuple[tuple[str, str, int, int], str, EditsView]] = {}
    seen_mounts: dict[str, tuple[str, str, EditsView]] = {}
    for block in edit_blocks(spec):
        for pointer, node in entries(block, "deviceNodes"):
            path = node.text("path")
            identity = _node_identity(node)
            earlier = seen_nodes.setdefault(path, (identity, pointer, block))
            if earlier[2].device != block.device and not _same_node(earlier[0], identity):
                yield Problem(
                    pointer,
                    f"{block.owner} puts {identity[0]} at {path}, {earlier[2].owner} puts {earlier[0][0]} there "
                    f"({earlier[1]}); a container that requests both gets only one of them",
                    f"give {path} one meaning in this spec",
                )
        for pointer, mount in entries(block, "mounts"):
            target, source = mount.text("containerPath"), mount.text("hostPath")
            earlier_mount = seen_mounts.setdefault(target, (source, pointer, block))
            if earlier_mount[2].device != block.device and earlier_mount[0] != source:
                yield Problem(
                    pointer,
                    f"{block.owner} mounts {source} at {target}, {earlier_mount[2].owner} mounts "
                    f"{earlier_mount[0]} there ({earlier_mount[1]}); a container that requests both gets only "
                    "one of them",
                    f"mount one source at {target}",
                )


@rule("CDI106", "gpu-node-without-nvidiactl", Severity.ERROR, [CDI])
def gpu_node_without_nvidiactl(value: Any, context: Context) -> Iterator[Problem]:
    """A device injects a GPU node without /dev/nvidiactl.

    ## What it checks
    For each device, its own device nodes together with the spec-level ones (what the library injects when
    that device alone is requested): a `/dev/nvidiaN` node without a `/dev/nvidiactl` node.

    ## Why it matters
    Every CUDA and NVML call opens the control node first; a container that requests only this device gets a
    GPU node it cannot use ("no CUDA-capable device is detected", NVML "Driver Not Loaded"). nvidia-ctk puts
    `/dev/nvidiactl` in the spec-level edits; hand-made or trimmed specs lose it.

    ## Example
    A spec whose device `0` has `{"path": "/dev/nvidia0"}` and whose spec-level `containerEdits` has no
    device nodes.

    ## Fix
    Add `{"path": "/dev/nvidiactl"}` to the spec-level `containerEdits.deviceNodes` (with `/dev/nvidia-uvm`,
    `/dev/nvidia-uvm-tools` and `/dev/nvidia-modeset`, as nvidia-ctk does).
    """
    spec = _spec(value, context)
    if spec is None:
        return
    blocks = list(edit_blocks(spec))
    common = {
        node.text("path") for block in blocks if block.device is None for _, node in entries(block, "deviceNodes")
    }
    for block in blocks:
        if block.device is None:
            continue
        own = [(pointer, node.text("path")) for pointer, node in entries(block, "deviceNodes")]
        if NVIDIACTL in common or NVIDIACTL in {path for _, path in own}:
            continue
        gpu = next(((pointer, path) for pointer, path in own if gpu_index(path) is not None), None)
        if gpu is not None:
            yield Problem(
                gpu[0],
                f"device {block.device} injects {gpu[1]} but neither it nor the spec-level edits inject "
                f"{NVIDIACTL}: CUDA and NVML cannot use the GPU",
                f'add {{"path": "{NVIDIACTL}"}} to the spec-level containerEdits.deviceNodes',
            )


def _refused_by(value: Any, context: Context, newer: bool) -> Optional[tuple[str, str, str]]:
    """For a spec the deciding release loads, the engine releases whose library refuses it (those with a newer
    library, or an older one): (who, why, hint) for the newest of the refusing releases; None when there are
    none, or when engines were named (their releases decide alone)."""
    if context.cdi_judges and any(judge.engines for judge in context.cdi_judges):
        return None
    if not analysis(value, context).loads:
        return None  # the loader rules say why it does not load at all
    deciding = judges(context)[0].library
    others = [found for found in RELEASES if (version_key(found.release) > version_key(deciding.release)) == newer]
    refusing = [(found, analyse(value, found)) for found in others if found != deciding]
    refusing = [(found, result) for found, result in refusing if not result.loads]
    if not refusing:
        return None
    who = describe_refusers({found.release for found, _ in refusing})
    if not who:
        return None
    # The verdict of the refusing release nearest the deciding one.
    _, result = refusing[-1] if not newer else refusing[0]
    problem = result.problems[0]
    if problem.code == UNKNOWN_VERSION:
        spec = result.spec
        version = spec.text("cdiVersion") if spec is not None else ""
        needed = minimum_version(spec, deciding) if spec is not None else version
        why = f"cdiVersion {version}"
        hint = (
            f'set "cdiVersion": "{needed}", which the content needs'
            if version_key(needed) < version_key(version.lstrip("v"))
            else "upgrade those engines, or keep a spec of a version they know for them"
        )
        return who, why, hint
    return who, f"this spec ({problem.library})", problem.hint or "drop what they do not know"


@rule("CDI107", "refused-by-newer-library", Severity.WARNING, [CDI])
def refused_by_newer_library(value: Any, context: Context) -> Iterator[Problem]:
    """A spec the deciding CDI library loads, and engine releases with a newer library refuse.

    ## What it checks
    With `--cdi-library` naming a release older than the newest, each newer release's verdict on the spec:
    library v1.1.0 removed `intelRdt.enableCMT` and `intelRdt.enableMBM` (it has `enableMonitoring` instead)
    and refuses a spec that uses them. Not reported when `--engine` names the node's engines.

    ## Why it matters
    Engines decode specs strictly: when the engine is upgraded to a release built with the newer library, the
    spec stops loading with `json: unknown field "enableCMT"`, and every device in it is unknown.

    ## Example
    `"intelRdt": {"closID": "gpu", "enableCMT": true}` judged with `--cdi-library 1.0.1`: containerd ≥ 2.2.1
    and cri-o ≥ 1.35 refuse it.

    ## Fix
    Drop the field (cache monitoring is `enableMonitoring` from CDI 1.1.0 on, once every engine on the node
    understands it).
    """
    refused = _refused_by(value, context, newer=True)
    if refused is not None:
        who, why, hint = refused
        yield Problem("", f"{who} refuse {why}", hint)


@rule("CDI109", "refused-by-older-engines", Severity.WARNING, [CDI])
def refused_by_older_engines(value: Any, context: Context) -> Iterator[Problem]:
    """A spec the deciding CDI library loads, and engine releases with an older library refuse.

    ## What it checks
    Each older library release's verdict on a spec the deciding one (the newest, or `--cdi-library`) loads,
    and the engine releases that vendor the releases that refuse it (the table in `kinds/cdi/releases.py`, from
    each engine release's go.mod). Not reported when `--engine` names the node's engines: their libraries
    decide alone.

    ## Why it matters
    Every library release knows only the spec versions up to its own, and only its own fields. A node whose
    engine is older than the spec fails with `unresolvable CDI devices` while `nvidia-ctk cdi list` and newer
    engines see the devices: a `0.7.0` spec on podman 5.0, a `1.1.0` spec on containerd 2.1.

    ## Example
    `"cdiVersion": "1.1.0"`: containerd ≤ 2.2.0, cri-o ≤ 1.34 and podman ≤ 5.8 refuse cdiVersion 1.1.0.

    ## Fix
    Write the lowest version the spec's content needs (the hint names it; `nvidia-ctk cdi generate` does this),
    or upgrade the engines the message names. `lint --node` judges each spec directory with the engines
    really installed.
    """
    refused = _refused_by(value, context, newer=False)
    if refused is not None:
        who, why, hint = refused
        yield Problem(
            spec_pointer(value, "cdiVersion") if why.startswith("cdiVersion") else "", f"{who} refuse {why}", hint
        )


def spec_pointer(value: Any, key: str) -> str:
    return f"/{key}" if isinstance(value, dict) and key in value else ""


_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.0$")


@rule("CDI108", "version-newer-than-needed", Severity.INFO, [CDI])
def version_newer_than_needed(value: Any, context: Context) -> Iterator[Problem]:
    """cdiVersion is newer than the spec's content needs, which shuts out engines with older CDI libraries.

    ## What it checks
    A known `cdiVersion` above `0.5.0` and above the minimum version the spec's fields require (the version
    `nvidia-ctk cdi generate` writes), where CDI109 does not already name the engine releases it shuts out (with
    `--engine`, or a version every modelled engine release knows). Versions up to `0.5.0` are not reported:
    every engine with CDI support has a library that knows them.

    ## Why it matters
    Each library release knows only the spec versions up to its own: an engine built with library v0.6 refuses
    a `0.7.0` spec with `invalid version "0.7.0"` even when nothing in it is newer than 0.5.0. Nodes often run
    engines of different ages (containerd, cri-o, podman, the toolkit's own runtime).

    ## Example
    `"cdiVersion": "1.0.0"` on a spec whose newest feature is a `hostPath` (0.5.0).

    ## Fix
    Set `cdiVersion` to the minimum the message names.
    """
    spec = _spec(value, context)
    if spec is None:
        return
    deciding = judges(context)[0].library
    version = known_version(spec.text("cdiVersion"), deciding)
    if version is None or any(known_version(spec.text("cdiVersion"), j.library) is None for j in judges(context)):
        return  # a judge that does not know the version says so (CDI004)
    needed = minimum_version(spec, deciding)
    # Engines with CDI support vendor library v0.5 at the oldest, so only versions above 0.5.0 shut any out.
    if version_key(version) > max(version_key(needed), version_key("0.5.0")):
        if _refused_by(value, context, newer=False) is not None:
            return  # CDI109 names the engine releases
        match = _VERSION.match(version)
        release = f"v{match.group(1)}.{match.group(2)}" if match else version
        yield Problem(
            spec.at("cdiVersion"),
            f"cdiVersion {version} is newer than the {needed} the spec needs: engines whose CDI library is older "
            f"than {release} refuse it with invalid version {go_quote(spec.text('cdiVersion'))}",
            f'set "cdiVersion": "{needed}"',
        )
