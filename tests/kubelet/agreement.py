"""GPU pods on a real kubelet 1.32 and engine (tests/kubelet/harness.py), and what `nvidia-oci-hook pod` says of
each: does lint's verdict for a container agree with what the kubelet and the engine did with it?

A case is a pod manifest (one container asking for one nvidia.com/gpu, privileged or not, with or without env of
its own or a CDI annotation of its own) on a node state: the device nodes of the node (fake ones, made with mknod
in the kubelet's namespace), a CDI spec in /run/cdi, and the device plugin's Allocate answer (or no plugin at all).
The node states:

- no-plugin: the node's GPUs under /dev, no device plugin registered.
- dev: the plugin answers device specs whose host paths are the node's /dev/nvidia* (NVIDIA's plugin on a node
  whose driver is on /); dev-remapped: the host path /dev/nvidia1 goes to the container's /dev/nvidia0.
- driver-root-absent (seed 000): host paths under /run/nvidia/driver/dev, where nothing is; the driver is on /.
- driver-root: host paths under /run/nvidia/driver/dev, where the nodes are; /dev holds none.
- stray (seed 003): as driver-root, with stray /dev/nvidia0 and /dev/nvidia1 on the host.
- cdi, cdi-undefined, cdi-missing-node: the plugin answers CDI names (`cdi_devices`): one the spec defines, one
  it does not, one whose device node is missing on the host.
- cdi-annotation: the plugin answers a `cdi.k8s.io/...` annotation naming the spec's device.
- env: the plugin answers NVIDIA_VISIBLE_DEVICES alone (no hook or NVIDIA runtime is configured here).

Each runs on cri-o 1.37, containerd 1.7 and 2.1 (CDI on), and containerd 1.7 with CDI off (harness.CDI_OFF).

What happened (`observed`): `refused` where the container waits with an engine's error (the kubelet's reason and
message), else from what the container lists in its /dev (each char device with its major:minor):
`runs-with-every-gpu` where it is privileged and sees the node's /dev/nvidia* beyond what it was given,
`runs-without-gpu` where a device node it was promised (by the plugin's device specs, or the CDI spec's device
nodes for the CDI names it was given) is missing or not the host's, or, promised none by name, it sees no
/dev/nvidia<N> at all; `runs-as-asked` otherwise.

What lint says (`lint`): `nvidia-oci-hook pod --host-root <the kubelet's namespace> --format json` on the case's
manifest with the static pod's UID in `metadata.uid`, once the kubelet has allocated (the pod's own allocation in
the real checkpoint, as `kubectl get pod -o yaml` would give it); and (`predicted`) the same manifest without a
UID before the pod is created, judged with the plugin's answer to the state's first pod.

`python -m tests.kubelet.agreement [ENGINE...]` runs every case and records agreement.json beside this file:
{case: {engine: {"observed", "message", "lint"}}}, and prints the counts per engine.

Measured here (2 CPUs): a state's pods take 1 s from the first one's manifest to the last one taken away, an
engine's 25 cases 12 to 13 s with its kubelet's start and close, the four engines 50 s.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from nvidia_oci_hook.node.pods import AS_ASKED, EVERY_GPU, REFUSED, WITHOUT_GPU
from tests.kubelet import harness
from tests.kubelet.harness import Kubelet, Pod, container_status, pod_manifest, waiting

ENGINES = (*harness.ENGINES, harness.CDI_OFF)
OBSERVED = (REFUSED, WITHOUT_GPU, EVERY_GPU, AS_ASKED)
RECORDED = Path(__file__).with_name("agreement.json")
DRIVER_DEV = "/run/nvidia/driver/dev"
# The fake nodes' numbers, NVIDIA's own: nothing opens them, the probe only reads them.
NUMBERS = {"nvidia0": (195, 0), "nvidia1": (195, 1), "nvidiactl": (195, 255)}
GPUS_ON_ROOT = ("/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl")
GPUS_IN_DRIVER_ROOT = tuple(f"{DRIVER_DEV}/{name}" for name in NUMBERS)
CDI_KIND = "example.com/gpu"
CDI_SPEC: dict[str, Any] = {
    "cdiVersion": "0.5.0",
    "kind": CDI_KIND,
    "devices": [
        {"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}, {"path": "/dev/nvidiactl"}]}},
        {
            "name": "driver",
            "containerEdits": {
                "deviceNodes": [
                    {"path": "/dev/nvidia0", "hostPath": f"{DRIVER_DEV}/nvidia0"},
                    {"path": "/dev/nvidiactl", "hostPath": f"{DRIVER_DEV}/nvidiactl"},
                ]
            },
        },
    ],
}
# What a container waits with once the engine refused it; ContainerCreating and the like are on the way.
ON_THE_WAY = ("", "ContainerCreating", "PodInitializing")
END = "probe-done"
# Each char device of the container's /dev with its numbers (busybox's stat: hex), then the env the plugin and the
# pod set; then it stays until it is taken away (a SIGTERM ends it at once): a pod that ended no longer counts as
# active, and the kubelet drops its allocation from the checkpoint at the next pod's.
PROBE = (
    'for f in /dev/* /dev/*/*; do [ -c "$f" ] && echo "dev $f $(stat -c %t:%T "$f")"; done; '
    'echo "env NVIDIA_VISIBLE_DEVICES=${NVIDIA_VISIBLE_DEVICES-unset}"; '
    f"echo {END}; trap 'exit 0' TERM; sleep 3600 & wait"
)


def device(container_path: str, host_path: str) -> dict[str, str]:
    return {"container_path": container_path, "host_path": host_path, "permissions": "rw"}


@dataclass
class NodeState:
    name: str
    nodes: tuple[str, ...]  # the node's char devices, each with NUMBERS[its name]
    answer: Optional[dict[str, Any]]  # the plugin's Allocate answer to every device; None: no plugin
    promised: tuple[tuple[str, str], ...] = ()  # (container path, host path) the container is to get
    variants: tuple[str, ...] = ("plain", "privileged")


def _cdi_promised(name: str) -> tuple[tuple[str, str], ...]:
    for entry in CDI_SPEC["devices"]:
        if f"{CDI_KIND}={entry['name']}" == name:
            return tuple((n["path"], n.get("hostPath", n["path"])) for n in entry["containerEdits"]["deviceNodes"])
    return ()


def _devices(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"devices": [device(container, host) for container, host in pairs]}


ON_ROOT = (("/dev/nvidia0", "/dev/nvidia0"), ("/dev/nvidiactl", "/dev/nvidiactl"))
IN_DRIVER_ROOT = (("/dev/nvidia0", f"{DRIVER_DEV}/nvidia0"), ("/dev/nvidiactl", f"{DRIVER_DEV}/nvidiactl"))
REMAPPED = (("/dev/nvidia0", "/dev/nvidia1"), ("/dev/nvidiactl", "/dev/nvidiactl"))
ENV = {"NVIDIA_VISIBLE_DEVICES": "GPU-fake0"}

STATES = (
    # First: once a plugin registered, the kubelet keeps its resource.
    NodeState("no-plugin", GPUS_ON_ROOT, None),
    NodeState(
        "dev",
        GPUS_ON_ROOT,
        {**_devices(*ON_ROOT), "envs": ENV},
        ON_ROOT,
        ("plain", "privileged", "env-override"),
    ),
    NodeState("dev-remapped", GPUS_ON_ROOT, _devices(*REMAPPED), REMAPPED),
    NodeState("driver-root-absent", GPUS_ON_ROOT, _devices(*IN_DRIVER_ROOT), IN_DRIVER_ROOT),
    NodeState("driver-root", GPUS_IN_DRIVER_ROOT, _devices(*IN_DRIVER_ROOT), IN_DRIVER_ROOT),
    NodeState(
        "stray", (*GPUS_IN_DRIVER_ROOT, "/dev/nvidia0", "/dev/nvidia1"), _devices(*IN_DRIVER_ROOT), IN_DRIVER_ROOT
    ),
    NodeState("cdi", GPUS_ON_ROOT, {"cdi_devices": [{"name": f"{CDI_KIND}=0"}]}, _cdi_promised(f"{CDI_KIND}=0")),
    NodeState("cdi-undefined", GPUS_ON_ROOT, {"cdi_devices": [{"name": f"{CDI_KIND}=9"}]}),
    NodeState(
        "cdi-missing-node",
        GPUS_ON_ROOT,
        {"cdi_devices": [{"name": f"{CDI_KIND}=driver"}]},
        _cdi_promised(f"{CDI_KIND}=driver"),
    ),
    NodeState(
        "cdi-annotation",
        GPUS_ON_ROOT,
        {"annotations": {"cdi.k8s.io/nvoh-test_gpu": f"{CDI_KIND}=0"}},
        _cdi_promised(f"{CDI_KIND}=0"),
    ),
    NodeState("env", GPUS_ON_ROOT, {"envs": ENV}, (), ("plain", "privileged", "env-override", "pod-cdi-annotation")),
)


@dataclass
class Case:
    id: str  # "state/variant"
    state: NodeState
    privileged: bool = False
    env: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def pod(self) -> str:
        return self.id.replace("/", "--")

    def manifest(self, uid: Optional[str] = None) -> dict[str, Any]:
        manifest = pod_manifest(
            self.pod,
            ["sh", "-c", PROBE],
            gpus=1,
            privileged=self.privileged,
            env=self.env or None,
            annotations=self.annotations or None,
        )
        if uid is not None:
            manifest["metadata"]["uid"] = uid
        return manifest


def cases() -> Iterator[Case]:
    for state in STATES:
        for variant in state.variants:
            case = Case(f"{state.name}/{variant}", state)
            if variant == "privileged":
                case.privileged = True
            elif variant == "env-override":
                case.env = {"NVIDIA_VISIBLE_DEVICES": "all"}
            elif variant == "pod-cdi-annotation":
                case.annotations = {"cdi.k8s.io/pod": f"{CDI_KIND}=0"}
            yield case


@dataclass
class Outcome:
    observed: str
    message: str
    lint: str = ""
    reasons: list[str] = field(default_factory=list)
    predicted: Optional[str] = None  # lint's verdict before the pod was created
    predicted_reasons: list[str] = field(default_factory=list)

    def recorded(self) -> dict[str, str]:
        return {"observed": self.observed, "message": self.message, "lint": self.lint}


def _normalized(message: str) -> str:
    """An engine's message without what differs between runs: container and sandbox IDs, directories."""
    message = re.sub(r"\b[0-9a-f]{64}\b", "ID", message)
    return re.sub(r"/tmp/[A-Za-z0-9_.-]+", "/tmp/DIR", message)


def set_node(kubelet: Kubelet, state: NodeState) -> None:
    """The node's GPU device nodes, driver root and CDI spec as the state has them, and nothing else of the kind."""
    root = kubelet.host_root
    for path in [*(root / "dev").glob("nvidia*"), root / "run/nvidia"]:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    for node in state.nodes:
        target = kubelet.node_path(node)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.mknod(target, 0o666 | 0o020000, os.makedev(*NUMBERS[target.name]))
    (root / "run/cdi").mkdir(parents=True, exist_ok=True)
    (root / "run/cdi/example.json").write_text(json.dumps(CDI_SPEC))


def _numbers(kubelet: Kubelet, path: str) -> Optional[str]:
    try:
        found = kubelet.node_path(path).stat()
    except OSError:
        return None
    return f"{os.major(found.st_rdev)}:{os.minor(found.st_rdev)}"


def observe(kubelet: Kubelet, case: Case, pod: Pod, output: str) -> tuple[str, str]:
    reason, message = waiting(pod)
    if reason:
        return REFUSED, f"{reason}: {_normalized(message)}"
    terminated = container_status(pod).get("state", {}).get("terminated")
    if terminated is not None and END not in output:
        return REFUSED, f"terminated {terminated.get('reason')}: {_normalized(terminated.get('message', ''))}"
    seen = {}
    for line in output.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "dev" and os.path.basename(words[1]).startswith("nvidia"):
            major, _, minor = words[2].partition(":")
            seen[words[1]] = f"{int(major, 16)}:{int(minor, 16)}"
    given = {(path, _numbers(kubelet, host)) for path, host in case.state.promised}
    beyond = sorted(path for path, numbers in seen.items() if (path, numbers) not in given)
    missing = sorted(path for path, numbers in given if numbers is None or seen.get(path) != numbers)
    said = f"sees {', '.join(f'{path} {numbers}' for path, numbers in sorted(seen.items())) or 'no nvidia device'}"
    if case.privileged and beyond:
        return EVERY_GPU, f"{said}; beyond what it was given: {', '.join(beyond)}"
    if missing:
        return WITHOUT_GPU, f"{said}; missing: {', '.join(missing)}"
    if not given and not any(re.fullmatch(r"/dev/nvidia[0-9]+", path) for path in seen):
        return WITHOUT_GPU, f"{said}; promised no node by name"
    return AS_ASKED, said


def _cli(*arguments: str) -> str:
    from nvidia_oci_hook.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(list(arguments))
    return out.getvalue()


class OtherEngine(RuntimeError):
    """lint took the node's engine for another than the kubelet's: the namespace shares the machine's PIDs, so
    lint, reading /proc through the host root, sees every engine daemon of the machine, and another test's runs."""


def _engine_daemons() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if entry.name.isdigit() and os.path.basename(argv[0]).decode(errors="replace") in ("crio", "containerd"):
                found.append(f"{entry.name}: {b' '.join(argv).decode(errors='replace').strip()}")
    return found


def lint_verdicts(kubelet: Kubelet, manifests: Mapping[str, Mapping[str, Any]], directory: Path) -> dict[str, Any]:
    """`pod --host-root --format json` on every manifest at once: case id -> its container's JSON (verdict,
    reasons), and "node" -> the node as lint read it. Raises OtherEngine where lint took the node's engine for
    another."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for case_id, manifest in manifests.items():
        path = directory / f"{case_id.replace('/', '--')}.json"
        path.write_text(json.dumps(manifest))
        paths[str(path)] = case_id
    report = json.loads(_cli("pod", "--host-root", str(kubelet.host_root), "--format", "json", *paths))
    expected = "crio" if kubelet.engine_name == "crio" else "containerd"
    if report["node"]["engine"] != expected:
        raise OtherEngine(
            f"lint took the node's engine for {report['node']['engine']!r}, not {expected!r}: the engine daemons "
            "running on this machine are\n" + "\n".join(_engine_daemons())
        )
    found: dict[str, Any] = {paths[pod["path"]]: pod for pod in report["pods"]}
    found["node"] = report["node"]
    return found


def _settled(kubelet: Kubelet, pod: Optional[Pod]) -> Optional[str]:
    """The container's output once the pod is settled (the engine refused it, or the probe has run), else None."""
    if pod is None:
        return None
    reason, _ = waiting(pod)
    if reason and reason not in ON_THE_WAY:
        return ""
    state = container_status(pod).get("state", {})
    if "running" in state or "terminated" in state:
        output = kubelet.container_log(pod["metadata"]["name"])
        if END in output or "terminated" in state:
            return output
    return None


def _wait_all(kubelet: Kubelet, names: Sequence[str], timeout: float = 60) -> dict[str, tuple[Pod, str]]:
    deadline = time.monotonic() + timeout
    done: dict[str, tuple[Pod, str]] = {}
    while True:
        listed = {pod["metadata"]["name"]: pod for pod in kubelet.pods()}
        for name in names:
            if name not in done:
                output = _settled(kubelet, listed.get(name))
                if output is not None:
                    done[name] = (listed[name], output)
        if len(done) == len(names):
            return done
        if time.monotonic() > deadline:
            late = {name: (listed.get(name) or {}).get("status") for name in names if name not in done}
            raise TimeoutError(f"not settled after {timeout} s: {json.dumps(late)}\n{kubelet.log()[-3000:]}")
        time.sleep(0.1)


def _wait_allocated(kubelet: Kubelet, name: str, timeout: float = 30) -> str:
    """The pod's UID once the kubelet lists it and (with a plugin) the checkpoint holds its allocation, and its
    alone: the pods of earlier states are gone from it."""
    deadline = time.monotonic() + timeout
    while True:
        pod = kubelet.pod(name)
        if pod is not None:
            uid: str = pod["metadata"]["uid"]
            entries = kubelet.checkpoint().get("Data", {}).get("PodDeviceEntries") or []
            if kubelet.plugin is None or [entry["PodUID"] for entry in entries] == [uid]:
                return uid
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: no allocation of its own after {timeout} s: {kubelet.checkpoint()}")
        time.sleep(0.05)


def _remove_all(kubelet: Kubelet, names: Sequence[str], timeout: float = 60) -> None:
    for name in names:
        (kubelet.manifests / f"{name[: -len(kubelet.node_name) - 1]}.yaml").unlink(missing_ok=True)
    deadline = time.monotonic() + timeout
    while {pod["metadata"]["name"] for pod in kubelet.pods()} & set(names):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the kubelet still lists some of {names} after {timeout} s")
        time.sleep(0.1)


def run_state(
    kubelet: Kubelet, state: NodeState, group: Sequence[Case], directory: Path
) -> tuple[dict[str, Outcome], dict[str, Any]]:
    """The state's cases at once: the first alone until the kubelet has allocated it, the others judged by lint
    before they are created, then created; each observed and judged by lint with its UID; then all taken away.
    And the node as lint read it."""
    set_node(kubelet, state)
    if state.answer is not None:
        if kubelet.plugin is None:
            kubelet.start_plugin({"*": state.answer})
        else:
            kubelet.set_plugin_answer({"*": state.answer})
    first, rest = group[0], group[1:]
    names = {first.id: kubelet.add_static_pod(first.manifest())}
    try:
        _wait_allocated(kubelet, names[first.id])
        before = (
            lint_verdicts(kubelet, {case.id: case.manifest() for case in rest}, directory / "before") if rest else {}
        )
        for case in rest:
            names[case.id] = kubelet.add_static_pod(case.manifest())
        settled = _wait_all(kubelet, list(names.values()))
        uids = {case.id: settled[names[case.id]][0]["metadata"]["uid"] for case in group}
        after = lint_verdicts(kubelet, {case.id: case.manifest(uids[case.id]) for case in group}, directory / "after")
    finally:
        _remove_all(kubelet, list(names.values()))
    outcomes = {}
    for case in group:
        pod, output = settled[names[case.id]]
        observed, message = observe(kubelet, case, pod, output)
        judged = after[case.id]
        outcome = Outcome(observed, message, judged["verdict"], judged["reasons"])
        if case.id in before:
            outcome.predicted = before[case.id]["verdict"]
            outcome.predicted_reasons = before[case.id]["reasons"]
        outcomes[case.id] = outcome
    return outcomes, after["node"]


@dataclass
class Measured:
    engine: str
    outcomes: dict[str, Outcome]
    node: dict[str, Any]  # the node as lint read it (its engine, label, CDI)
    timings: dict[str, float]


def measure(engine: str, selected: Optional[Sequence[Case]] = None) -> Measured:
    """Every case (or those selected) on one kubelet of the engine, state after state."""
    chosen = list(selected if selected is not None else cases())
    outcomes: dict[str, Outcome] = {}
    timings: dict[str, float] = {}
    node: dict[str, Any] = {}
    began = time.monotonic()
    directory = Path(tempfile.mkdtemp(prefix="agreement-", dir="/tmp"))
    kubelet = Kubelet.start(engine)
    timings["start"] = time.monotonic() - began
    try:
        for state in STATES:
            group = [case for case in chosen if case.state.name == state.name]
            if not group:
                continue
            stamp = time.monotonic()
            found, node = run_state(kubelet, state, group, directory / state.name)
            outcomes.update(found)
            timings[state.name] = time.monotonic() - stamp
    finally:
        kubelet.close()
        shutil.rmtree(directory, ignore_errors=True)
    timings["total"] = time.monotonic() - began
    return Measured(engine, outcomes, node, timings)


def counts(by_case: Mapping[str, Mapping[str, Mapping[str, str]]], engine: str) -> dict[str, Any]:
    """For one engine: cases, how many lint agrees on, and how many of each observed verdict."""
    entries = [by_engine[engine] for by_engine in by_case.values() if engine in by_engine]
    observed = {verdict: sum(entry["observed"] == verdict for entry in entries) for verdict in OBSERVED}
    agreed = sum(entry["observed"] == entry["lint"] for entry in entries)
    return {"cases": len(entries), "agreed": agreed, "observed": observed}


def main(argv: Optional[Sequence[str]] = None) -> int:
    engines = list(argv if argv is not None else sys.argv[1:]) or list(ENGINES)
    recorded: dict[str, dict[str, dict[str, str]]] = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    generated = [case.id for case in cases()]
    recorded = {case: recorded.get(case, {}) for case in generated}
    for engine in engines:
        measured = measure(engine)
        for case_id, outcome in measured.outcomes.items():
            recorded[case_id][engine] = outcome.recorded()
            if outcome.predicted is not None and outcome.predicted != outcome.lint:
                sys.stdout.write(f"{engine} {case_id}: predicted {outcome.predicted}, after {outcome.lint}\n")
            if outcome.observed != outcome.lint:
                sys.stdout.write(
                    f"{engine} {case_id}: observed {outcome.observed} ({outcome.message}); lint {outcome.lint}: "
                    f"{outcome.reasons}\n"
                )
        timings = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in measured.timings.items())
        sys.stdout.write(
            f"{engine}: {json.dumps(counts(recorded, engine))}; node {measured.node['label']}; {timings}\n"
        )
    ordered = {case: {e: by[e] for e in ENGINES if e in by} for case, by in recorded.items()}
    RECORDED.write_text(json.dumps(ordered, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
