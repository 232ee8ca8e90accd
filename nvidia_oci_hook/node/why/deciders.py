"""Each signature's causes, decided on the node from what the error names (a path, a device, a condition)."""

from __future__ import annotations

import re
from typing import Callable, Optional

from nvidia_oci_hook.node.why.causes import Cause, Node, from_check, from_rule, path_missing
from nvidia_oci_hook.node.why.kubernetes import runtime_class_side


def device_path_exists(node: Node, groups: dict[str, str]) -> list[Cause]:
    return [from_check(node, "stray-device-nodes"), from_rule(node, "NODE002")]


def device_path_exists_undecided(groups: dict[str, str]) -> list[str]:
    return [
        "which of the pod's devices collides: the pod's CRI ContainerConfig (its devices, as the device plugin or "
        "DRA driver sent them) decides it: nvidia-oci-hook lint --kind cri CONFIG.json gives CRI001 for each",
    ]


def _driver_root_elsewhere(node: Node, path: str) -> Cause:
    """The path is under a driver root the driver is not in (the root a stale marker chose)."""
    from nvidia_oci_hook.node.driver import FOUND, resolve_driver_root

    code = "driver-root"
    answer = resolve_driver_root(node.host, node.settings.driver_roots)
    if answer.status != FOUND or answer.root is None:
        return from_check(node, code)
    root = answer.root.rstrip("/")
    others = [other.rstrip("/") for other in node.settings.driver_roots if other.rstrip("/") not in ("", root)]
    named = next((other for other in others if path.startswith(other + "/")), None)
    if named is None:
        inside = path.startswith(root + "/") if root else True
        where = f"under {answer.root}" if inside else "under no driver root"
        return Cause(code, False, f"{path} is {where}, where this node's driver is: not a wrong driver root")
    return Cause(
        code,
        True,
        f"{path} is under {named}, but this node's driver is under {answer.root}",
        [answer.reason],
        f"point whatever chose {named} at {answer.root}: the device plugin's NVIDIA_DRIVER_ROOT (from the "
        "validation markers) or the CDI spec (nvidia-ctk cdi generate --driver-root), then recreate the pod",
    )


def plugin_handed(node: Node, path: str, side: str = "host_path") -> Optional[Cause]:
    """Whether a device plugin handed the path out (the kubelet's checkpoint): who asked for it, decided; None on
    a node without a kubelet's checkpoint, where there is nothing to say."""
    from nvidia_oci_hook.node.device_plugins import read_device_plugins

    code = "device-plugins"
    plugins = read_device_plugins(node.host)
    if not plugins.checkpoint_found:
        return None
    handed = []
    for allocation in plugins.allocations:
        answer = allocation.answer
        if answer is None:
            continue
        paths = [getattr(device, side) for device in answer.devices]
        if path in paths:
            handed.append(allocation)
    if not handed:
        return Cause(code, False, f"no device plugin's answer in the kubelet's checkpoint names {path}")
    resources = sorted({allocation.resource for allocation in handed})
    return Cause(
        code,
        True,
        f"the device plugin for {', '.join(resources)} hands out {path}: {len(handed)} allocation(s) in the "
        "kubelet's checkpoint name it",
        [f"{allocation.label}: {path}" for allocation in handed[:10]],
        "fix the plugin's driver root (nvidia-oci-hook doctor --check device-plugins names it), then restart the "
        "plugin and recreate the pods",
    )


def host_path_missing(code: str, what: str) -> Callable[[Node, dict[str, str]], list[Cause]]:
    def decide(node: Node, groups: dict[str, str]) -> list[Cause]:
        path = groups["path"]
        causes = [
            path_missing(node, code, path, what),
            from_check(node, "validation-markers"),
            _driver_root_elsewhere(node, path),
        ]
        handed = plugin_handed(node, path)
        return causes if handed is None else [*causes, handed]

    return decide


def host_path_missing_undecided(groups: dict[str, str]) -> list[str]:
    return [
        f"who asked for {groups['path']} where no device plugin's answer in the kubelet's checkpoint names it: a CDI "
        "spec (nvidia-oci-hook lint --node gives CDI104) or a CRI ContainerConfig made by hand (nvidia-oci-hook lint "
        "--kind cri CONFIG.json gives CRI002); nvidia-oci-hook pod POD.yaml shows what the kubelet sends",
    ]


# cdi resolve's reasons, each with the rule that reports it in a document.
CDI_REASON_CODES = {
    "cdi-off": "CTD101",
    "conflict": "CDI201",
    "spec-not-loaded": "CDI203",
    "library-too-old": "CDI109",
    "directory-not-scanned": "CDI204",
    "not-defined": "REC001",
}


def _engine_named_by_hand(node: Node) -> Optional[str]:
    """Both engines wrap the CDI error alike: the engine whose configuration the user named is the one asked."""
    crio = bool(node.by_hand.crio_config or node.by_hand.crio_config_dir)
    containerd = bool(node.by_hand.containerd_config)
    return "crio" if crio and not containerd else "containerd" if containerd and not crio else None


def cdi_unresolvable(node: Node, groups: dict[str, str]) -> list[Cause]:
    from nvidia_oci_hook.engine.cdi_reasons import REASONS
    from nvidia_oci_hook.node import cdi_resolve

    names = [name.strip() for name in groups["names"].split(",") if name.strip()]
    try:
        engine = "containerd" if "containerd" in groups else _engine_named_by_hand(node)
        results = cdi_resolve.resolve(node.host, node.load(), names, engine, by_hand=node.by_hand)
    except (cdi_resolve.NoEngine, cdi_resolve.UnknownRelease) as exc:
        return [Cause(code, None, f"{REASONS[reason][0]}: {exc}") for reason, code in CDI_REASON_CODES.items()]
    found: dict[str, list[str]] = {}
    fixes: dict[str, str] = {}
    resolved: list[str] = []
    for result in results:
        for resolution in result.names:
            if resolution.resolved:
                resolved.append(f"{result.label}: {resolution.name} resolves from {resolution.spec}")
            elif resolution.reason is not None:
                found.setdefault(resolution.reason, []).append(f"{result.label}: {resolution.message}")
                found[resolution.reason].extend(f"  {path}" for path in resolution.files)
                if resolution.fix:
                    fixes.setdefault(resolution.reason, resolution.fix)
    causes = []
    for reason, code in CDI_REASON_CODES.items():
        meaning = REASONS[reason][0]
        if reason in found:
            causes.append(
                Cause(code, True, f"{reason}: {meaning}", found[reason], fixes.get(reason, REASONS[reason][1]))
            )
        else:
            checked = ", ".join(result.label for result in results)
            causes.append(Cause(code, False, f"{reason}: not so for {', '.join(names)} on {checked}", resolved))
    return causes


def lost_device_access(node: Node, groups: dict[str, str]) -> list[Cause]:
    return [from_check(node, "gpu-access"), from_check(node, "dev-char-links")]


def lost_device_access_undecided(groups: dict[str, str]) -> list[str]:
    return [
        "whether the container that printed it is one of those: nvidia-oci-hook doctor --check gpu-access lists "
        "each running GPU container and the device rules it lost",
    ]


def driver_mismatch(node: Node, groups: dict[str, str]) -> list[Cause]:
    return [from_check(node, "driver-versions")]


def _node_properties(node: Node) -> tuple[object, list[str]]:
    from nvidia_oci_hook.nvidia.requirements import NodeProperties

    driver = node.driver()
    evidence = [f"the loaded module: {driver.driver or 'version unknown'}", driver.cuda_basis]
    return NodeProperties(cuda=driver.cuda, driver=driver.driver), evidence


def requirement_unsatisfied(node: Node, groups: dict[str, str]) -> list[Cause]:
    from nvidia_oci_hook.nvidia.requirements import Requirement, evaluate

    condition = groups["condition"].strip()
    properties, evidence = _node_properties(node)
    verdict = evaluate([Requirement("NVIDIA_REQUIRE_CUDA", condition)], properties)  # type: ignore[arg-type]
    if verdict.satisfied is None:
        unknown = ", ".join(sorted(verdict.unknown)) or "a property"
        return [Cause("DRV001", None, f"{condition}: this node cannot tell its {unknown}", evidence)]
    if verdict.satisfied:
        return [Cause("DRV001", False, f"this node's driver meets {condition} now", evidence)]
    return [
        Cause(
            "DRV001",
            True,
            f"this node's driver does not meet {condition}",
            evidence,
            "run the pod on a node whose driver supports it, upgrade the driver, or use an image built for an older "
            "CUDA (NVIDIA_DISABLE_REQUIRE=true only hides the check: the CUDA calls still fail)",
        )
    ]


def cuda_insufficient(node: Node, groups: dict[str, str]) -> list[Cause]:
    driver_check = from_check(node, "driver-versions")
    _properties, evidence = _node_properties(node)
    cuda = node.driver().cuda
    summary = f"this node's driver supports CUDA {cuda} at most" if cuda else "this node's driver's CUDA is unknown"
    return [driver_check, Cause("DRV001", None, f"{summary}; the image's CUDA runtime is not in the error", evidence)]


def cuda_insufficient_undecided(groups: dict[str, str]) -> list[str]:
    return [
        "the image's CUDA version: nvidia-oci-hook lint config.json compares its NVIDIA_REQUIRE_CUDA and CUDA_VERSION "
        "with the node's driver (DRV001, DRV009)",
    ]


def unknown_device(node: Node, groups: dict[str, str]) -> list[Cause]:
    device = groups["device"]
    gpus = node.driver().visible_gpus()
    if gpus is None:
        return [Cause("DRV004", None, "the kernel module lists no GPUs on this node (not loaded?)")]
    listed = [f"{index}: {gpu.uuid or '?'} {gpu.bus_id}" for index, gpu in enumerate(gpus)]
    known = (
        {str(index) for index in range(len(gpus))}
        | {(gpu.uuid or "").lower() for gpu in gpus}
        | {gpu.bus_id.lower() for gpu in gpus}
    )
    if device.lower() in known or device == "all":
        return [Cause("DRV004", False, f"{device} is one of this node's {len(gpus)} GPUs", listed)]
    return [
        Cause(
            "DRV004",
            True,
            f"{device} is none of this node's {len(gpus)} GPUs",
            listed,
            "set NVIDIA_VISIBLE_DEVICES to an index, UUID or bus id this node has (or let the device plugin choose)",
        )
    ]


def unsupported_capabilities(node: Node, groups: dict[str, str]) -> list[Cause]:
    from nvidia_oci_hook.nvidia.env import CAPABILITY_WORDS, SUPPORTED_CAPABILITIES

    requested = [name.strip() for name in groups["requested"].split(",") if name.strip()]
    unknown = [name for name in requested if name not in CAPABILITY_WORDS]
    if not unknown:
        return [Cause("DRV005", False, f"every capability in '{groups['requested']}' is one NVIDIA's hook knows")]
    return [
        Cause(
            "DRV005",
            True,
            f"NVIDIA_DRIVER_CAPABILITIES names {', '.join(unknown)}, which NVIDIA's hook does not know",
            [f"known: {', '.join(SUPPORTED_CAPABILITIES)}, all, none"],
            f"drop {', '.join(unknown)} from NVIDIA_DRIVER_CAPABILITIES",
        )
    ]


def from_rule_decider(*codes: str) -> Callable[[Node, dict[str, str]], list[Cause]]:
    def decide(node: Node, groups: dict[str, str]) -> list[Cause]:
        return [from_rule(node, code) for code in codes]

    return decide


# What registers a handler, and what else makes an engine lose one it was given.
_HANDLER_FIX = {
    "crio": "add a [crio.runtime.runtimes.{name}] table to cri-o's configuration (nvidia-oci-hook configure crio "
    "registers 'nvidia') and restart cri-o, or set the RuntimeClass's handler to one of: {known}",
    "containerd": 'add a [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{name}] table to containerd\'s '
    "configuration (nvidia-oci-hook configure containerd registers 'nvidia') and restart containerd, or set the "
    "RuntimeClass's handler to one of: {known}",
}


def runtime_handler_missing(engine: str) -> Callable[[Node, dict[str, str]], list[Cause]]:
    """The pod's RuntimeClass names a handler the engine does not have: not in its configuration, or dropped."""

    def decide(node: Node, groups: dict[str, str]) -> list[Cause]:
        from nvidia_oci_hook.kinds.cdi.releases import ENGINE_NAMES
        from nvidia_oci_hook.node.engines import handler_list, runtime_handlers

        name, label = groups["handler"], ENGINE_NAMES[engine]
        handlers = runtime_handlers(node.host, node.by_hand).get(engine)
        if handlers is None:
            listed = Cause("engines", None, f"no {label} configuration on this node: its runtime handlers are unknown")
        else:
            known = ", ".join(handlers)
            evidence = [f"{label} runtime handlers: {handler_list(handlers)}"]
            if name in handlers:
                listed = Cause("engines", False, f"{label}'s configuration defines {name} ({handlers[name]})", evidence)
            else:
                fix = _HANDLER_FIX[engine].format(name=name, known=known)
                summary = f"{label}'s configuration defines no runtime handler {name}"
                listed = Cause("engines", True, summary, evidence, fix)
        manifest = runtime_class_side(node, engine, name)
        if engine == "crio":
            # cri-o drops a handler whose program is missing or whose table it refuses, with a warning in its log.
            return [listed, manifest] + [from_rule(node, code, f'runtime "{name}"') for code in ("CRO103", "CRO109")]
        # A version 3 drop-in under a version 2 root makes containerd 2.0 to 2.2 ignore the root's runtimes.
        return [listed, manifest, from_rule(node, "CTD117")]

    return decide


def runtime_handler_undecided(groups: dict[str, str]) -> list[str]:
    return [
        "whether the engine was restarted since the handler was added: cri-o and containerd read their runtime "
        "handlers only at start (systemctl restart crio, or containerd)",
        f"which RuntimeClass has handler {groups['handler']} and which pods name it: kubectl get runtimeclass -o "
        "custom-columns=NAME:.metadata.name,HANDLER:.handler, and the pod's .spec.runtimeClassName",
    ]


def program_missing(node: Node, groups: dict[str, str]) -> list[Cause]:
    name = groups["name"]
    about = name.rsplit("/", 1)[-1]
    # HKD107: a hook whose env has no PATH finds nothing it runs by name (NVIDIA's hook: nvidia-container-cli).
    return [from_rule(node, code, about) for code in ("CRO103", "CTD111", "HKD101")] + [from_rule(node, "HKD107")]


def program_missing_undecided(groups: dict[str, str]) -> list[str]:
    name = groups["name"]
    return [
        f"whether {name} is installed where its caller looks: `command -v {name}` on the node, in the caller's "
        "environment (NVIDIA's hook runs nvidia-container-cli, from libnvidia-container-tools, by name)",
    ]


_OUR_REASON = re.compile(
    r"\[(?P<code>[A-Z]{2,4}\d{3})\] (?P<message>.*?)(?:; fix: (?P<fix>.*?))?(?: \(and \d+ more\))?$"
)


def our_refusal(node: Node, groups: dict[str, str]) -> list[Cause]:
    reasons = groups["reasons"].strip()
    match = _OUR_REASON.match(reasons)
    if match is None:
        return [Cause("nvidia-oci-hook", True, reasons)]
    fix: Optional[str] = match.group("fix")
    return [
        Cause(
            match.group("code"),
            True,
            match.group("message"),
            [
                "decided by nvidia-oci-hook when the container was created; nvidia-oci-hook explain "
                f"{match.group('code')} says more"
            ],
            fix,
        )
    ]
