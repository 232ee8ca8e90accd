"""A pod on this node, before it is created: what the kubelet will hand this node's engine, and what the engine
does with it.

Each container of a pod template goes through the kubelet's translation (kinds/kubernetes/kubelet.py) with what
the node says its device plugins answer (the kubelet's checkpoint: this pod's own allocation where the pod is
already here, else the plugin's answer to another pod of the node), and the CRI config that comes out is judged
by the CRI, device and driver-layer rules for the engine on this node. The verdict says what the engine does:
refuses the container (with the engine's words), runs it without its GPU, runs it with every GPU, or runs it
with what it asked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.findings import OUTCOME_REFUSED, OUTCOME_WITHOUT_DEVICE, Problem, Severity
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.cri import CRI_CONTAINER
from nvidia_oci_hook.kinds.kubernetes.kubelet import DerivedConfig, PluginAnswer, derive, handler_of
from nvidia_oci_hook.kinds.kubernetes.objects import RUNTIME_CLASS, Container, Manifests, PodTemplate
from nvidia_oci_hook.node.device_plugins import DevicePlugins, read_device_plugins
from nvidia_oci_hook.node.dra_state import claim_cdi_devices, read_dra_state
from nvidia_oci_hook.rules.base import Context, Rule, judged

REFUSED = "refused"
WITHOUT_GPU = "runs-without-gpu"
EVERY_GPU = "runs-with-every-gpu"
AS_ASKED = "runs-as-asked"
UNKNOWN = "unknown"
NO_GPU = "no-gpu-asked"
VERDICTS = (REFUSED, WITHOUT_GPU, EVERY_GPU, AS_ASKED, UNKNOWN, NO_GPU)
_WORDS = {
    REFUSED: "refused",
    WITHOUT_GPU: "runs WITHOUT its GPU",
    EVERY_GPU: "runs with every GPU of the node",
    AS_ASKED: "runs with what it asked",
    UNKNOWN: "cannot be decided here",
    NO_GPU: "asks for no GPU",
}
CRIO_HANDLER_ERROR = "failed to find runtime handler {handler} from runtime list"
CONTAINERD_HANDLER_ERROR = 'failed to get sandbox runtime: no runtime for "{handler}" is configured'


@dataclass
class PodNode:
    """What this node says about the pods it would run: its CRI engine, its handlers, its device plugins."""

    engine: Optional[str]  # "crio", "containerd"; None where the node has neither, or both
    label: str  # "cri-o 1.37.0"
    cdi_off: Optional[str]  # why the engine resolves no CDI name, or None
    cdi_dirs: tuple[str, ...]
    handlers: Optional[dict[str, str]]  # the engine's runtime handlers, None where its configuration is not read
    plugins: DevicePlugins
    gpu_nodes: list[str] = field(default_factory=list)  # the host's /dev/nvidia* nodes
    default_handler: Optional[str] = None  # the handler of a pod without a RuntimeClass
    # NVIDIA's hooks registered in the engine's hooks directories (cri-o's): they turn NVIDIA_VISIBLE_DEVICES into
    # device nodes whatever the handler.
    nvidia_hooks: list[str] = field(default_factory=list)
    # What the kubelet's DRA manager prepared (node/dra_state.py DraState), for the claims' CDI names.
    dra: Optional[Any] = None


def read_pod_node(host: HostView, facts: Optional[Any] = None) -> PodNode:
    """facts: lint --node's NodeFacts where it has read them already."""
    from nvidia_oci_hook.node.engines import cri_engine_of, default_handlers, runtime_handlers

    if facts is None:
        from nvidia_oci_hook.kinds.loading import load_document
        from nvidia_oci_hook.node.engines import discover_node

        facts = discover_node(host, load_document).facts
    engine = cri_engine_of(host)
    release = facts.releases.get(engine) if engine else None
    label = (
        release.label if release is not None else {"crio": "cri-o", "containerd": "containerd"}.get(engine or "", "")
    )
    handlers = runtime_handlers(host).get(engine) if engine else None
    gpu_nodes = sorted(f"/dev/{name}" for name in host.list_dir("/dev") if name.startswith("nvidia"))
    return PodNode(
        engine,
        label or "no CRI engine found",
        facts.cdi_off.get(engine) if engine else None,
        tuple(facts.cdi_dirs.get(engine, ())) if engine else (),
        handlers,
        read_device_plugins(host),
        [path for path in gpu_nodes if host.identity(path) is not None],
        default_handlers(host).get(engine) if engine else None,
        nvidia_hook_files(host, facts.hooks_dirs.get("cri-o", ())) if engine == "crio" else [],
        read_dra_state(host),
    )


# The programs of NVIDIA's toolkit that inject GPUs from NVIDIA_VISIBLE_DEVICES: its runtime (any handler whose
# program it is) and its legacy hook.
NVIDIA_INJECTORS = ("nvidia-container-runtime", "nvidia-container-runtime-hook", "nvidia-container-toolkit")


def _injects(program: str) -> bool:
    name = program.rsplit("/", 1)[-1]
    return name in NVIDIA_INJECTORS or name.startswith("nvidia-container-runtime.")


def nvidia_hook_files(host: HostView, directories: Sequence[str]) -> list[str]:
    import json

    found = []
    for directory in directories:
        for name in sorted(host.list_dir(directory)):
            text = host.read_text(f"{directory}/{name}") if name.endswith(".json") else None
            try:
                hook = json.loads(text).get("hook") if text else None
            except (ValueError, AttributeError):
                continue
            path = hook.get("path") if isinstance(hook, dict) else None
            if isinstance(path, str) and _injects(path):
                found.append(f"{directory}/{name}")
    return found


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def _answer(allocation: Any, source: str) -> Optional[PluginAnswer]:
    answer = allocation.answer
    if answer is None:
        return None
    return PluginAnswer(
        allocation.resource,
        tuple((d.container_path, d.host_path, d.permissions) for d in answer.devices),
        tuple((m.container_path, m.host_path, m.read_only) for m in answer.mounts),
        dict(answer.envs),
        dict(answer.annotations),
        tuple(answer.cdi_devices),
        source,
    )


@dataclass
class Judgement:
    """One container of one pod template on this node."""

    container: Container
    derived: DerivedConfig
    verdict: str
    reasons: list[str]  # why, each with what the engine does, in words
    problems: list[tuple[Rule, Problem]]  # the CRI and driver-layer rules' findings, at the manifest's pointers
    node_problems: list[tuple[str, Problem]]  # (code, problem) of what only the node decides (K8S1xx)

    @property
    def words(self) -> str:
        return _WORDS[self.verdict]


def answers_for(container: Container, node: PodNode) -> tuple[list[PluginAnswer], list[str], list[str]]:
    """The device plugins' answers for the container's GPU resources; the resources no plugin registered; the
    resources whose plugin registered but answered no pod here (what it gives is not known)."""
    uid = str(container.template.metadata.get("uid") or "")
    answers, unregistered, unanswered = [], [], []
    own = {a.resource: a for a in node.plugins.for_pod(uid) if a.container == container.name} if uid else {}
    for resource in container.gpu_resources():
        allocation = own.get(resource)
        if allocation is not None:
            found = _answer(allocation, f"the kubelet's checkpoint: its allocation to this pod, {uid}")
        else:
            others = [a for a in node.plugins.answers_for(resource) if a.answer is not None]
            if not node.plugins.is_registered(resource) and not others:
                unregistered.append(resource)
                continue
            if not others:
                unanswered.append(resource)
                continue
            last = others[-1]
            found = _answer(
                last, f"its answer to pod {last.pod_uid}, container {last.container}, in the kubelet's checkpoint"
            )
        if found is not None:
            answers.append(found)
    return answers, unregistered, unanswered


def _as_engine_reads(config: dict[str, Any], node: PodNode) -> dict[str, Any]:
    """The config as the engine uses it: one whose CDI is off drops the CDI names (K8S102 says so), so nothing
    about them can refuse the container."""
    if node.cdi_off is None:
        return config
    annotations = {key: value for key, value in config["annotations"].items() if not key.startswith("cdi.k8s.io/")}
    return {**config, "CDI_devices": [], "annotations": annotations}


def _cri_problems(
    derived: DerivedConfig, config: dict[str, Any], rules: dict[str, Rule], context: Context
) -> list[tuple[Rule, Problem]]:
    found = []
    for rule in rules.values():
        if rule.check is None or not rule.applies_to(CRI_CONTAINER) or rule.code.startswith(("SCH", "DOC")):
            continue
        for problem in rule.check(config, context):
            kept = judged(problem, context)
            if kept is None:
                continue
            origin = derived.origin_of(kept.pointer)
            message = f"{kept.message} [{origin.source}]"
            found.append((rule, dataclasses.replace(kept, pointer=origin.pointer, message=message)))
    return found


def judge_template(
    template: PodTemplate,
    node: PodNode,
    rules: dict[str, Rule],
    context: Context,
    manifests: Optional[Manifests] = None,
    runtime_handler: Optional[str] = None,
) -> list[Judgement]:
    runtime_classes = manifests.named(RUNTIME_CLASS) if manifests is not None else {}
    cri_context = dataclasses.replace(context, cri_engine=node.engine or context.cri_engine, memo={})
    if node.cdi_dirs:
        # The engine's own spec directories resolve the container's CDI names.
        cri_context.settings = (cri_context.settings or Settings()).replace(cdi_spec_dirs=node.cdi_dirs)
    judgements = []
    claim_devices: dict[str, list[str]] = {}
    uid = str(template.metadata.get("uid") or "")
    claims = template.resource_claims()
    if uid and claims and node.dra is not None:
        pod_claims = {
            name: (_text(claim.get("resourceClaimName")), _text(claim.get("resourceClaimTemplateName")))
            for name, (_, claim) in claims.items()
        }
        namespace = _text(template.owner.namespace) or None
        claim_devices = dict(claim_cdi_devices(node.dra, uid, pod_claims, namespace=namespace).devices)
    for container in template.containers(("initContainers", "containers")):
        answers, unregistered, unanswered = answers_for(container, node)
        derived = derive(container, answers, claim_devices)
        cri_context.memo = {}
        problems = _cri_problems(derived, _as_engine_reads(derived.config, node), rules, cri_context)
        node_problems = list(
            _node_problems(container, derived, node, unregistered, unanswered, runtime_classes, runtime_handler)
        )
        verdict, reasons = _verdict(container, derived, node, problems, node_problems)
        judgements.append(Judgement(container, derived, verdict, reasons, problems, node_problems))
    return judgements


def _node_problems(
    container: Container,
    derived: DerivedConfig,
    node: PodNode,
    unregistered: list[str],
    unanswered: list[str],
    runtime_classes: dict[str, Any],
    runtime_handler: Optional[str],
) -> Iterator[tuple[str, Problem]]:
    requested = container.resources("limits") | container.resources("requests")
    for resource in unregistered:
        pointer = requested[resource][0]
        yield (
            "K8S101",
            Problem(
                pointer,
                f"no device plugin for {resource} is registered on this node: the kubelet runs a static pod "
                f"without the GPU and says nothing (pkg/kubelet/lifecycle/predicate.go); through the API server "
                f"the scheduler does not place the pod here (0 {resource} allocatable)",
                "start the device plugin on this node (for the GPU Operator, its nvidia-device-plugin-daemonset "
                "pod), then restart the pod",
            ),
        )
    for resource in unanswered:
        yield (
            "K8S105",
            Problem(
                requested[resource][0],
                f"the device plugin for {resource} is registered here but has answered no pod yet: what it gives "
                "the container is not known, so its devices are not judged",
            ),
        )
    if node.cdi_off is not None:
        cdi = derived.config["CDI_devices"]
        annotated = [key for key in derived.config["annotations"] if key.startswith("cdi.k8s.io/")]
        if cdi or annotated:
            names = [entry["name"] for entry in cdi] + [derived.config["annotations"][key] for key in annotated]
            pointer = derived.origin_of("/CDI_devices/0" if cdi else "/annotations").pointer
            yield (
                "K8S102",
                Problem(
                    pointer,
                    f"the container asks for CDI devices ({', '.join(names)}) and {node.label} on this node "
                    f"resolves none ({node.cdi_off}): it drops them without a word and the container runs "
                    "without its GPU",
                    "turn CDI on in the engine (containerd 1.7: enable_cdi = true; 1.6: upgrade), or set the "
                    "device plugin's deviceListStrategy to envvar",
                ),
            )
    chosen = handler_of(container, runtime_classes, runtime_handler)
    if container.gpu_resources() and not unregistered and not unanswered:
        found = _env_only(derived, node, chosen)
        if found is not None:
            yield (
                "K8S104",
                Problem(
                    next(iter(container.gpu_resources().values()))[0],
                    found,
                    "run the pod with NVIDIA's runtime (runtimeClassName: nvidia, after `nvidia-ctk runtime "
                    "configure`), or set the device plugin's deviceListStrategy to cdi-cri (with CDI on in the engine) "
                    "or its device specs on (PASS_DEVICE_SPECS=true)",
                ),
            )
    if chosen is not None and node.handlers is not None:
        handler, pointer, source = chosen
        if handler not in node.handlers:
            text = (CRIO_HANDLER_ERROR if node.engine == "crio" else CONTAINERD_HANDLER_ERROR).format(handler=handler)
            known = ", ".join(sorted(node.handlers)) or "none"
            yield (
                "K8S103",
                Problem(
                    pointer,
                    f"{node.label} on this node has no runtime handler {handler} ({source}); it refuses the "
                    f"pod's sandbox: `{text}`. Its handlers: {known}",
                    "run `nvidia-ctk runtime configure` for the engine (or `nvidia-oci-hook configure`) and "
                    "restart it, or name one of its handlers",
                ),
            )


def _env_only(derived: DerivedConfig, node: PodNode, chosen: Optional[tuple[str, str, str]]) -> Optional[str]:
    """What is wrong where the container's GPUs rest on NVIDIA_VISIBLE_DEVICES alone (the device plugin's envvar
    strategy) and nothing on the node turns it into device nodes; None otherwise."""
    config = _as_engine_reads(derived.config, node)
    annotated = any(key.startswith("cdi.k8s.io/") for key in config["annotations"])
    if config["devices"] or config["CDI_devices"] or annotated or node.handlers is None:
        return None
    handler = chosen[0] if chosen is not None else node.default_handler
    program = node.handlers.get(handler or "", "")
    if _injects(program) or node.nvidia_hooks:
        return None
    visible = [env["value"] for env in config["envs"] if env["key"] == "NVIDIA_VISIBLE_DEVICES"]
    asked = f"only NVIDIA_VISIBLE_DEVICES={visible[-1]}" if visible else "no device, no CDI name, no variable"
    return (
        f"the device plugin's answer gives the container {asked}, and on this node nothing turns that into "
        f"device nodes: the runtime handler {handler} runs {program or 'an unknown program'}, not NVIDIA's "
        f"runtime, and no NVIDIA hook is registered with {node.label}: the container runs without its GPU"
    )


def _asks_gpu(container: Container, derived: DerivedConfig) -> bool:
    return bool(container.gpu_resources() or container.claims() or derived.config["CDI_devices"])


def _verdict(
    container: Container,
    derived: DerivedConfig,
    node: PodNode,
    problems: list[tuple[Rule, Problem]],
    node_problems: list[tuple[str, Problem]],
) -> tuple[str, list[str]]:
    refused = [p.message for r, p in problems if p.outcome == OUTCOME_REFUSED and r.severity >= Severity.ERROR]
    refused += [p.message for code, p in node_problems if code == "K8S103"]
    if refused:
        return REFUSED, refused
    # A privileged container gets every device of the host whatever it was promised.
    privileged = derived.config["linux"]["security_context"].get("privileged") is True
    if privileged and node.gpu_nodes:
        return EVERY_GPU, [
            f"privileged: {node.label} gives the container every device of the host, {', '.join(node.gpu_nodes)}"
        ]
    without = [p.message for r, p in problems if p.outcome == OUTCOME_WITHOUT_DEVICE]
    without += [p.message for code, p in node_problems if code in ("K8S101", "K8S102", "K8S104")]
    if without:
        return WITHOUT_GPU, without
    if not _asks_gpu(container, derived):
        return NO_GPU, []
    if any(code == "K8S105" for code, _ in node_problems):
        return UNKNOWN, [p.message for code, p in node_problems if code == "K8S105"]
    if container.claims() and not derived.config["CDI_devices"]:
        return UNKNOWN, ["its DRA claims' devices are known to the API server only"]
    given = [d["host_path"] for d in derived.config["devices"]] + [c["name"] for c in derived.config["CDI_devices"]]
    return AS_ASKED, [f"{node.label} gives it {', '.join(given)}" if given else f"{node.label} runs it"]


def document_judgements(value: Any, context: Context) -> list[Judgement]:
    """Every container of the document's pod templates judged on the node of context.pod_node (lint --node), by
    every CRI rule; lint keeps the findings of the rules selected."""
    from nvidia_oci_hook.rules.base import all_rules
    from nvidia_oci_hook.rules.kubernetes.common import document_templates, run_manifests

    node = context.pod_node
    assert node is not None

    def build() -> list[Judgement]:
        rules = {r.code: r for r in all_rules() if r.applies_to(CRI_CONTAINER)}
        manifests = run_manifests(value, context)
        return [
            judgement
            for template in document_templates(value, context)
            for judgement in judge_template(template, node, rules, context, manifests, context.runtime_handler)
        ]

    return context.cached("pod-judgements", build)  # type: ignore[no-any-return]


@dataclass
class PodReport:
    node: PodNode
    # (file as named, object, judgements, the document: its lines)
    judged: list[tuple[str, Any, list[Judgement], Any]]


def judge_paths(paths: Sequence[str], options: Any) -> PodReport:
    """The pods of the manifest files given (lint's LintOptions: host root, driver roots, settings, runtime
    handler), each container judged on the node. Raises io.ReadError for a path that cannot be read, and
    ValueError for a file that is not Kubernetes manifests."""
    from nvidia_oci_hook.kinds.kubernetes import KUBERNETES, run_manifests
    from nvidia_oci_hook.kinds.loading import load_document

    host = HostView(options.host_root)
    documents = []
    for path in paths:
        document = load_document(path, KUBERNETES, max_bytes=options.max_bytes)
        if document.load_problems or not document.parsed:
            # A pod judged without one of its documents would be judged wrong: the file is fixed first.
            problem = document.load_problems[0] if document.load_problems else None
            where = document.locate_problem(problem).line if problem is not None else None
            said = problem.message if problem is not None else "not Kubernetes manifests"
            raise ValueError(f"{document.path}{f':{where}' if where else ''}: {said}")
        documents.append(document)
    manifests = run_manifests(documents) or Manifests()
    node = read_pod_node(host)
    context = Context(
        host=host,
        driver_roots=options.driver_roots,
        settings=options.settings,
        manifests=manifests,
        pod_node=node,
        runtime_handler=options.runtime_handler,
    )
    judged = []
    for document in documents:
        document_context = dataclasses.replace(context, document_path=document.path, memo={})
        by_object: dict[str, list[Judgement]] = {}
        for judgement in document_judgements(document.value, document_context):
            by_object.setdefault(judgement.container.template.owner.pointer, []).append(judgement)
        for obj in manifests.in_file(document.path) or []:
            if obj.pointer in by_object:
                judged.append((document.path, obj, by_object[obj.pointer], document))
    return PodReport(node, judged)


def _line(document: Any, pointer: str) -> Optional[int]:
    return document.locate(pointer).line  # type: ignore[no-any-return]


def report_json(report: PodReport) -> dict[str, Any]:
    node = report.node
    pods = []
    for path, obj, judgements, document in report.judged:
        for judgement in judgements:
            container = judgement.container
            pods.append(
                {
                    "path": path,
                    "object": obj.label,
                    "container": container.name,
                    "init": container.init,
                    "line": _line(document, container.pointer),
                    "verdict": judgement.verdict,
                    "reasons": judgement.reasons,
                    "findings": [
                        {
                            "code": rule.code,
                            "pointer": p.pointer,
                            "line": _line(document, p.pointer),
                            "message": p.message,
                        }
                        for rule, p in judgement.problems
                    ]
                    + [
                        {"code": code, "pointer": p.pointer, "line": _line(document, p.pointer), "message": p.message}
                        for code, p in judgement.node_problems
                    ],
                    "cri_config": judgement.derived.config,
                    "origins": {
                        pointer: {
                            "pointer": origin.pointer,
                            "line": _line(document, origin.pointer),
                            "source": origin.source,
                        }
                        for pointer, origin in judgement.derived.origins.items()
                    },
                }
            )
    return {
        "version": 1,
        "node": {
            "engine": node.engine,
            "label": node.label,
            "cdi": node.cdi_off or "on",
            "cdi_spec_dirs": list(node.cdi_dirs),
            "runtime_handlers": sorted(node.handlers) if node.handlers is not None else None,
            "device_plugins": {
                "sockets": list(node.plugins.sockets),
                "registered": {name: list(ids) for name, ids in node.plugins.registered.items()},
                "allocations": len(node.plugins.allocations),
            },
        },
        "pods": pods,
    }


def render_text(report: PodReport) -> str:
    node = report.node
    plugins = node.plugins
    registered = ", ".join(f"{name} ({len(ids)})" for name, ids in sorted(plugins.registered.items())) or "none"
    lines = [
        f"node: {node.label}; CDI {'off: ' + node.cdi_off if node.cdi_off else 'on'}; runtime handlers: "
        + (", ".join(sorted(node.handlers)) if node.handlers is not None else "not read")
        + f"; device plugins registered: {registered}, {len(plugins.allocations)} allocation(s) in the checkpoint",
    ]
    for path, obj, judgements, document in report.judged:
        for judgement in judgements:
            container = judgement.container
            where = f"{path}:{_line(document, container.pointer) or '?'}"
            lines.append(f"{obj.label}, {container.label} ({where}): {judgement.words}")
            lines.extend(f"    {reason}" for reason in judgement.reasons)
            if judgement.verdict in (REFUSED, WITHOUT_GPU):
                hints = [p.hint for _, p in judgement.problems if p.outcome and p.hint]
                hints += [p.hint for _, p in judgement.node_problems if p.hint]
                lines.extend(f"    fix: {hint}" for hint in dict.fromkeys(hints))
            config = judgement.derived.config
            for index, device in enumerate(config["devices"]):
                origin = judgement.derived.origin_of(f"/devices/{index}")
                lines.append(
                    f"    device {device['host_path']} -> {device['container_path']} ({device['permissions']}): "
                    f"{origin.source}"
                )
            for index, cdi in enumerate(config["CDI_devices"]):
                lines.append(f"    CDI {cdi['name']}: {judgement.derived.origin_of(f'/CDI_devices/{index}').source}")
            for index, env in enumerate(config["envs"]):
                if env["key"].startswith("NVIDIA_"):
                    origin = judgement.derived.origin_of(f"/envs/{index}")
                    lines.append(f"    env {env['key']}={env['value']}: {origin.source}")
    counts = {verdict: 0 for verdict in VERDICTS}
    for _, _, judgements, _ in report.judged:
        for judgement in judgements:
            counts[judgement.verdict] += 1
    lines.append(
        ", ".join(f"{count} {_WORDS[verdict]}" for verdict, count in counts.items() if count)
        or "no pod template in the input"
    )
    return "\n".join(lines) + "\n"


def failed(report: PodReport) -> bool:
    return any(j.verdict in (REFUSED, WITHOUT_GPU) for _, _, judgements, _ in report.judged for j in judgements)
