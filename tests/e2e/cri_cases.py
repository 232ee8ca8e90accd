"""GPU-style CRI container configs, and what the real cri-o does with each: refuses it (at which CRI call, in its
own words), or runs it with or without the device it asked for.

The node state is the test's own: a driver root under the daemon's directory holding character devices (made with
the numbers of /dev/urandom, so that opening one is harmless), a regular file and a directory of nodes in their place,
and a GPU's node (NVIDIA's major 195, minor 0), which no driver serves on a machine without NVIDIA's kernel module:
opening it fails (ENXIO), as it does on a GPU node whose driver is not loaded. The verdicts are recorded on such a
machine.
Each config changes one thing from a device a device plugin sends (an existing node, an absolute container path,
`rw`, an unprivileged container): the host path (missing, a regular file, a directory, empty, relative), the
container path (relative, the host path itself, a default device such as /dev/null, twice the same), the
permissions (every shape), privileged or not, and CDI requests against a spec directory.

`python -m tests.e2e.cri_cases` runs every case on cri-o (tests/e2e/crio.py) and on containerd 1.7 and 2.1 through CRI
(tests/e2e/cri.py), and records the verdicts in cri_cases.json beside this file.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from tests.e2e.cri import Sandbox, remove_sandbox, run_pod_container, run_sandbox
from tests.e2e.crio import CrioDaemon, bounded_runc, build_trees

REFUSED, WITHOUT_DEVICE, WITH_DEVICE = "refused", "runs-without-device", "runs-with-device"
# The numbers of the test's device nodes: /dev/urandom's, harmless to open, and other than those of the default
# devices a container always has (/dev/null is 1:3), so that the probe tells the test's node from a default one.
NUMBERS = (1, 9)
GPU_NUMBERS = (195, 0)
PERMISSIONS = ["rw", "r", "w", "m", "rwm", "rwx", "", "rw-", "RW", "wr", "rrw"]


@dataclass(frozen=True)
class Case:
    id: str
    devices: tuple[tuple[str, str, str], ...] = ()
    privileged: bool = False
    cdi_devices: tuple[str, ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    # The container paths the probe looks for (absolute paths only: a relative one is looked up as cri-o made it).
    probes: tuple[str, ...] = field(default=())
    # The numbers a probed path has where the container got the device.
    numbers: tuple[int, int] = NUMBERS


@dataclass(frozen=True)
class Verdict:
    verdict: str
    step: Optional[str] = None
    error: Optional[str] = None


def node_state(root: Path) -> dict[str, str]:
    """Build the node's driver root under root; returns the role -> host path of each thing made."""
    dev = root / "driver/dev"
    (dev / "dir").mkdir(parents=True)
    paths = {
        "present": dev / "nvidia0",
        "ctl": dev / "nvidiactl",
        "in-dir": dev / "dir/nvidia1",
        "regular": dev / "nvidia-regular",
        "dir": dev / "dir",
        "gpu": dev / "nvidia-gpu0",
    }
    for role in ("present", "ctl", "in-dir"):
        os.mknod(paths[role], 0o666 | 0o020000, os.makedev(*NUMBERS))
    os.mknod(paths["gpu"], 0o666 | 0o020000, os.makedev(*GPU_NUMBERS))
    paths["regular"].write_text("")
    return {role: str(path) for role, path in paths.items()} | {"missing": str(dev / "nvidia9")}


def cases(node: dict[str, str]) -> Iterator[Case]:
    present, target = node["present"], "/dev/nvidia-e2e0"
    hosts = {role: node[role] for role in ("present", "missing", "regular", "dir", "in-dir")}
    hosts |= {"relative": "driver/dev/nvidia0", "empty": ""}
    for privileged in (False, True):
        kind = "priv" if privileged else "unpriv"
        for role, host in hosts.items():
            for permissions in ("rw", "rwm", "", "rwx"):
                label = permissions or "empty"
                yield Case(f"{kind}/host={role}/{label}", ((host, target, permissions),), privileged, probes=(target,))
            yield Case(f"{kind}/host={role}/container=relative", ((host, "dev/nvidia-e2e0", "rw"),), privileged,
                       probes=(target,))  # fmt: skip
            yield Case(f"{kind}/host={role}/container=/dev/null", ((host, "/dev/null", "rw"),), privileged,
                       probes=("/dev/null",))  # fmt: skip
            yield Case(f"{kind}/host={role}/container=nested", ((host, "/dev/nvidia-e2e/deep1", "rw"),), privileged,
                       probes=("/dev/nvidia-e2e/deep1",))  # fmt: skip
        for permissions in ("r", "w", "m", "rw-", "RW", "wr", "rrw"):
            yield Case(f"{kind}/permissions={permissions}", ((present, target, permissions),), privileged,
                       probes=(target,))  # fmt: skip
        containers = {"same-as-host": present, "empty": "", "/dev/zero": "/dev/zero", "/dev/tty": "/dev/tty",
                      "/dev/fuse": "/dev/fuse", "existing-on-host": "/dev/full",
                      "nested": "/dev/nvidia-e2e/deep0"}  # fmt: skip
        for label, container in containers.items():
            probes = (container,) if container.startswith("/") else ()
            yield Case(f"{kind}/container={label}", ((present, container, "rw"),), privileged, probes=probes)
        yield Case(f"{kind}/container=twice", ((present, target, "rw"), (node["ctl"], target, "rw")), privileged,
                   probes=(target,))  # fmt: skip
        yield Case(f"{kind}/two-devices", ((present, target, "rw"), (node["ctl"], "/dev/nvidiactl-e2e", "rw")),
                   privileged, probes=(target, "/dev/nvidiactl-e2e"))  # fmt: skip
        one_missing = ((present, target, "rw"), (node["missing"], "/dev/nvidia-e2e9", "rw"))
        yield Case(f"{kind}/two-devices-one-missing", one_missing, privileged, probes=(target, "/dev/nvidia-e2e9"))
        for name in (
            "example.com/gpu=0",
            "example.com/gpu=9",
            "example.com/gpu",
            "gpu=0",
            "example.com/gpu=missing-node",
        ):
            resolves = name == "example.com/gpu=0"
            yield Case(f"{kind}/cdi={name}", (), privileged, (name,), probes=("/dev/nvidia-cdi0",) if resolves else ())
        for name in ("example.com/gpu=0", "example.com/gpu=9", "example.com/gpu=missing-node"):
            yield Case(f"{kind}/cdi-annotation={name}", (), privileged, annotations=(("cdi.k8s.io/gpu", name),),
                       probes=("/dev/nvidia-cdi0",) if name.endswith("=0") else ())  # fmt: skip
        yield Case(f"{kind}/device-and-cdi", ((present, target, "rw"),), privileged, ("example.com/gpu=0",),
                   probes=(target, "/dev/nvidia-cdi0"))  # fmt: skip
        # A GPU's node given the path of a device every container has: runc opens /dev/null while it sets up the
        # container; its own path, and the default devices runc does not open, are the twins.
        for container in (target, "/dev/null", "/dev/zero", "/dev/tty"):
            label = "own" if container == target else container
            yield Case(f"{kind}/gpu/container={label}", ((node["gpu"], container, "rw"),), privileged,
                       probes=(container,), numbers=GPU_NUMBERS)  # fmt: skip


def cdi_spec(node: dict[str, str]) -> dict[str, Any]:
    return {
        "cdiVersion": "0.5.0",
        "kind": "example.com/gpu",
        "devices": [
            {"name": "0",
             "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia-cdi0", "hostPath": node["present"]}]}},
            {"name": "missing-node",
             "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia-cdi9", "hostPath": node["missing"]}]}},
        ],
    }  # fmt: skip


def probe_command(case: Case) -> list[str]:
    """Each probed path: present where it is there with the case's numbers (a directory the engine filled, or a
    node made from one, counts by existence). Nothing is redirected to /dev/null, which may be the case's device."""
    numbers = f"{case.numbers[0]:x}:{case.numbers[1]:x}"
    tests = " ".join(
        f'if [ -d "{path}" ] || [ "$(stat -c %t:%T "{path}")" = "{numbers}" ]; '
        f'then echo "present {path}"; else echo "absent {path}"; fi;'
        for path in case.probes
    )
    return ["sh", "-c", tests + " true"]


def run(daemon: CrioDaemon, case: Case, pods: dict[bool, Sandbox]) -> Verdict:
    """The case's container in the pod of its privilege (pods: privileged -> the pod)."""
    result = run_pod_container(
        daemon,
        sandbox=pods[case.privileged],
        command=probe_command(case),
        privileged=case.privileged,
        devices=list(case.devices),
        cdi_devices=list(case.cdi_devices),
        annotations=dict(case.annotations),
    )
    if not result.ran:
        return Verdict(REFUSED, result.failed_step, result.error)
    found = all(f"present {path}" in result.stdout for path in case.probes)
    return Verdict(WITH_DEVICE if found else WITHOUT_DEVICE)


VERDICTS = Path(__file__).with_name("cri_cases.json")
# The engines the verdicts are recorded for: cri-o from ../shared/peers, containerd 1.7 and 2.1 (tests/containerd).
ENGINES = ("crio", "containerd-1.7", "containerd-2.1")
MAX_RESTARTS = 2
# Cases run against one daemon at a time.
JOBS = 3


def _prepare(workdir: Path) -> tuple[dict[str, str], Path]:
    node = node_state(workdir / "node")
    spec_dir = workdir / "cdi"
    spec_dir.mkdir()
    (spec_dir / "example.json").write_text(json.dumps(cdi_spec(node)))
    return node, spec_dir


def measure(workdir: Path, engine: str, jobs: int = JOBS) -> dict[str, Verdict]:
    """Every case on one engine, against a node state and spec directory made under workdir, jobs at a time."""
    from tests.containerd.real import CANDIDATES
    from tests.e2e.cri import CRIDaemon

    node, spec_dir = _prepare(workdir)
    runc = bounded_runc(workdir)

    def start() -> Any:
        if engine == "crio":
            return CrioDaemon.start(runtimes={"runc": runc}, cdi_spec_dirs=[spec_dir], hidden=build_trees())
        binary = CANDIDATES[1] if engine == "containerd-1.7" else CANDIDATES[2]
        return CRIDaemon.start(
            containerd=binary, binary_name=runc, enable_cdi=True, cdi_spec_dirs=[spec_dir],
            container_annotations=["cdi.k8s.io/*"], private_run=True,
        )  # fmt: skip

    def pods_of(daemon: Any) -> dict[bool, Sandbox]:
        # A case changes only its container: the cases of one privilege share a pod, as a node's containers do
        # (a pod per case was most of the module's time).
        return {privileged: run_sandbox(daemon, privileged=privileged) for privileged in (False, True)}

    verdicts: dict[str, Verdict] = {}
    restarts: list[str] = []
    daemon = start()
    try:
        pods = pods_of(daemon)
        every = list(cases(node))
        # The daemon runs several containers at once, as it does on a node.
        with ThreadPoolExecutor(jobs) as pool:
            first = dict(zip([case.id for case in every], pool.map(lambda case: run(daemon, case, pods), every)))
        # A daemon that died during the pass says nothing about the cases it refused: they are asked again, one
        # at a time, of a fresh one.
        if not daemon.answers():
            restarts.append(f"during the first pass: {daemon.log()[-1500:]}")
            daemon.close()
            daemon = start()
            pods = pods_of(daemon)
            for case in every:
                if first[case.id].verdict == REFUSED:
                    first[case.id] = run(daemon, case, pods)
        for case in every:
            verdict = first[case.id]
            # A daemon that died under a case (seen once in CI: cri-o gone, every later call reset) says nothing
            # about the case: start a fresh one and run the case again, a bounded number of times.
            while verdict.verdict == REFUSED and not daemon.answers():
                restarts.append(f"{case.id}: {verdict.error}: {daemon.log()[-1500:]}")
                if len(restarts) > MAX_RESTARTS:
                    raise RuntimeError(f"{engine} died {len(restarts)} times:\n" + "\n".join(restarts))
                daemon.close()
                daemon = start()
                pods = pods_of(daemon)
                verdict = run(daemon, case, pods)
            verdicts[case.id] = verdict
        for pod in pods.values():
            remove_sandbox(daemon, pod)
    finally:
        daemon.close()
    if restarts:
        sys.stderr.write(f"{engine} restarted {len(restarts)} time(s):\n" + "\n".join(restarts) + "\n")
    return verdicts


def main() -> int:
    import tempfile

    recorded: dict[str, dict[str, str]] = {}
    for engine in ENGINES:
        with tempfile.TemporaryDirectory(prefix="cri-cases-") as directory:
            for case, verdict in measure(Path(directory), engine).items():
                recorded.setdefault(case, {})[engine] = verdict.verdict
    VERDICTS.write_text(json.dumps(recorded, indent=1) + "\n")
    counts = {e: {v: sum(by[e] == v for by in recorded.values()) for v in (REFUSED, WITHOUT_DEVICE, WITH_DEVICE)}
              for e in ENGINES}  # fmt: skip
    sys.stdout.write(f"{len(recorded)} cases; {json.dumps(counts)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
