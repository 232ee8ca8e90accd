"""Engine-level benchmark: a container's whole start and end in containerd (through CRI) and in podman, runc as
the baseline, the wrapper (or the guard) in the path. Run through bench_runtime.py (`--only engines`).

- containerd 1.7 (.tools/containerd-trixie, unpacked by `sh scripts/setup test`) with its CRI plugin, driven by
  the tests' CRI v1 client (tests/e2e/cri.py): one daemon, started once, with two runtime handlers that differ
  only in BinaryName: `runc` (empty: runc) and `nvidia` (the wrapper). One host-network pod per handler is kept
  for all runs; a run times CreateContainer, StartContainer, ContainerStatus until the busybox `true` has
  exited, and RemoveContainer. Target: wrapper / runc <= 1.10.
- podman 4.3 `run --rm` of busybox `true`, with storage and configuration of its own (tests/podman_env.py):
  runc, `--runtime` the wrapper, and runc with the project's guard (hooks/nvidia-oci-hook-guard.json, its path
  pointed at the launcher) in a `--hooks-dir`. The container has no GPU content, so neither finds anything to
  do. Targets: x1.10 for the wrapper, x1.05 for the guard.

Both keep their state on tmpfs, as /run is on a node. Before the timed runs, a container with a CDI request
goes through each handler that should hold the tool (neither engine applies CDI itself here), and the run stops
unless the tool shows it acted: the wrapper's log gains an entry, the guard refuses the unapplied request.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Optional

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from timing import (  # noqa: E402
    Case,
    Row,
    Section,
    Timing,
    interleaved_medians,
    interrupt_once,
    ratio_row,
    subreaper,
    tmpfs,
    unmount_below,
    wait_orphans,
)

CONTAINERD = REPOSITORY / ".tools/containerd-trixie/usr/bin/containerd"
GUARD = REPOSITORY / "hooks/nvidia-oci-hook-guard.json"
PROGRAMS: dict[str, Sequence[str]] = {
    "runc": ["runc", "--version"],
    "containerd": [str(CONTAINERD), "--version"],
    "podman": ["podman", "--version"],
}
CONFIG_ENV = "NVIDIA_OCI_HOOK_CONFIG"
HANDLER = "nvidia"
POLL = 0.005  # seconds between ContainerStatus calls: small against a container's life, cheap for the daemon
WRAPPER_BOUND = 1.10
GUARD_BOUND = 1.05
REFUSAL = "nvidia-oci-hook: refusing container"


@dataclass(frozen=True)
class Tool:
    """The launchers as installed, the configuration the wrapper reads where it was installed to read it (the
    guard gets it through its hooks.d file's env), and the log it names."""

    wrapper: str
    hook: str
    settings: Path
    log: Path
    cdi_request: tuple[str, str]

    def runtime_entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        entries = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [entry for entry in entries if entry.get("mode") == "runtime"]


def measure(
    runs: int, wrapper: str, hook: str, settings: Path, log: Path, cdi_request: tuple[str, str]
) -> Iterator[Section]:
    tool = Tool(wrapper, hook, settings, log, cdi_request)
    yield measure_containerd(runs, tool)
    yield measure_podman(runs, tool)


# containerd


@contextlib.contextmanager
def containerd_daemon(tool: Tool) -> Iterator[Any]:
    """containerd 1.7 with the `runc` and `nvidia` handlers, on a tmpfs; stopped and removed however this ends."""
    from tests.e2e import cri as harness

    if not os.access(CONTAINERD, os.X_OK):
        raise RuntimeError(f"{CONTAINERD} is missing: run `sh scripts/setup test` as root")
    catatonit = shutil.which("catatonit", path="/usr/bin:/usr/sbin:/bin:/sbin")
    if catatonit is None:
        raise RuntimeError("catatonit is not installed (Debian package catatonit)")
    workdir = Path(tempfile.mkdtemp(prefix="cri", dir="/tmp"))  # short: the socket's path has 108 bytes at most
    daemon = harness.CRIDaemon(workdir, CONTAINERD)
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512m", "bench-cri", str(workdir)], check=True)
        base = harness.cri_config(
            workdir,
            binary_name=None,
            container_annotations=[tool.cdi_request[0]],
            enable_cdi=False,  # the CDI probe must be the wrapper's doing
            cdi_spec_dirs=None,
        )
        table = 'plugins."io.containerd.grpc.v1.cri".containerd.runtimes.' + HANDLER
        handler = (
            f"\n[{table}]\n"
            '  runtime_type = "io.containerd.runc.v2"\n'
            f"  container_annotations = {json.dumps([tool.cdi_request[0]])}\n"
            f"[{table}.options]\n"
            f"  BinaryName = {json.dumps(tool.wrapper)}\n"
            f'  Root = "{workdir}/runc"\n'
            "  SystemdCgroup = false\n"
        )
        # CRIDaemon.start knows one handler; the config here has two, the rest (images, clean-up) is the harness's.
        daemon._start(catatonit, base + handler, 60)
        yield daemon
    finally:
        if daemon.process is None:
            stop_unheld_daemon(workdir)
        daemon.close()
        unmount_below(workdir)
        subprocess.run(["umount", "--lazy", str(workdir)], capture_output=True, check=False)
        shutil.rmtree(workdir, ignore_errors=True)


def stop_unheld_daemon(workdir: Path, timeout: float = 15) -> None:
    """The daemon of a start that was interrupted before the harness held its process, found by its config's path:
    its session (catatonit, containerd) gets SIGTERM, then SIGKILL; catatonit, a child of this process, is reaped."""
    marker = f"{workdir}/config.toml".encode()
    leaders = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes().split(b"\0"):
                pid = int(entry.name)
                if os.getsid(pid) == pid:
                    leaders.append(pid)
    for pid in leaders:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(pid, os.WNOHANG)[0] == 0:
                if time.monotonic() > deadline:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.02)


@dataclass
class Pod:
    id: str
    config: Any  # cri.PodSandboxConfig
    attempts: int = 0


def start_pod(daemon: Any, handler: str) -> Pod:
    from tests.e2e.cri import CALL_TIMEOUT, cri

    name = daemon.next_pod_name()
    logs = daemon.workdir / "logs" / name
    logs.mkdir(parents=True)
    host_network = cri.NamespaceOption(network=cri.NODE)
    config = cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name=name, uid=str(uuid.uuid4()), namespace="bench", attempt=0),
        log_directory=str(logs),
        linux=cri.LinuxPodSandboxConfig(
            cgroup_parent=daemon.cgroup_parent,  # where close() finds what is left to kill
            security_context=cri.LinuxSandboxSecurityContext(namespace_options=host_network),
        ),
    )
    request = cri.RunPodSandboxRequest(config=config, runtime_handler=handler)
    return Pod(daemon.runtime.RunPodSandbox(request, timeout=CALL_TIMEOUT).pod_sandbox_id, config)


def run_container(daemon: Any, pod: Pod, annotations: Optional[Mapping[str, str]] = None) -> str:
    """What kubelet asks for a container that runs to its exit: create, start, status until exited, remove."""
    from tests.e2e.cri import BUSYBOX_IMAGE, CALL_TIMEOUT, cri

    pod.attempts += 1
    config = cri.ContainerConfig(
        metadata=cri.ContainerMetadata(name="main", attempt=pod.attempts),
        image=cri.ImageSpec(image=BUSYBOX_IMAGE),
        command=["/bin/true"],
        annotations=dict(annotations or {}),
        log_path=f"main-{pod.attempts}.log",
        linux=cri.LinuxContainerConfig(
            security_context=cri.LinuxContainerSecurityContext(namespace_options=cri.NamespaceOption(network=cri.NODE))
        ),
    )
    runtime = daemon.runtime
    request = cri.CreateContainerRequest(pod_sandbox_id=pod.id, config=config, sandbox_config=pod.config)
    container = runtime.CreateContainer(request, timeout=CALL_TIMEOUT).container_id
    runtime.StartContainer(cri.StartContainerRequest(container_id=container), timeout=CALL_TIMEOUT)
    deadline = time.monotonic() + CALL_TIMEOUT
    while True:
        status = runtime.ContainerStatus(cri.ContainerStatusRequest(container_id=container), timeout=CALL_TIMEOUT)
        if status.status.state == cri.CONTAINER_EXITED:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"containerd: container {container} has not exited after {CALL_TIMEOUT} s")
        time.sleep(POLL)
    if status.status.exit_code != 0:
        raise RuntimeError(f"containerd: container {container} exited {status.status.exit_code}")
    runtime.RemoveContainer(cri.RemoveContainerRequest(container_id=container), timeout=CALL_TIMEOUT)
    return str(container)


def measure_containerd(runs: int, tool: Tool) -> Section:
    from tests.e2e.cri import cri

    print("containerd: starting the daemon and its two pods", file=sys.stderr, flush=True)
    with containerd_daemon(tool) as daemon:
        pods = {"runc": start_pod(daemon, "runc"), "wrapped": start_pod(daemon, HANDLER)}
        for pod in pods.values():
            run_container(daemon, pod)  # warm: the image's snapshot, the shim's first container
        before = len(tool.runtime_entries())
        probe = run_container(daemon, pods["wrapped"], dict([tool.cdi_request]))
        if not any(entry.get("container") == probe for entry in tool.runtime_entries()[before:]):
            raise RuntimeError(f"containerd: the `{HANDLER}` handler did not reach the wrapper ({tool.log} is silent)")
        print(f"containerd: {runs} runs of {len(pods)} cases", file=sys.stderr, flush=True)
        times = interleaved_medians(
            runs, {name: Case(partial(run_container, daemon, pod)) for name, pod in pods.items()}
        )
        version = daemon.runtime.Version(cri.VersionRequest(), timeout=5)
    name = f"{version.runtime_name} {version.runtime_version}"
    return Section(
        f"{name} through CRI, a pod's busybox true from CreateContainer to RemoveContainer, median of {runs}",
        [
            Row("runc handler", times["runc"], note="BinaryName empty: runc"),
            ratio_row("wrapper as BinaryName", times["wrapped"], times["runc"], WRAPPER_BOUND),
        ],
    )


# podman


def measure_podman(runs: int, tool: Tool) -> Section:
    """The runs happen in a child that adopts what podman leaves behind (conmon, its cleanup process) and waits
    for it after each run, so that no run's leftovers land in the next one's time."""
    print("podman: importing the image", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-podman-io-") as exchange:
        request, response = Path(exchange) / "request.json", Path(exchange) / "response.json"
        request.write_text(
            json.dumps(
                {
                    "runs": runs,
                    "wrapper": tool.wrapper,
                    "hook": tool.hook,
                    "settings": str(tool.settings),
                    "log": str(tool.log),
                    "cdi_request": list(tool.cdi_request),
                }
            )
        )
        # A session of its own: a Ctrl-C reaches it only through this process, which then waits for its clean-up.
        child = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "podman", str(request), str(response)],
            cwd=REPOSITORY,
            start_new_session=True,
        )
        try:
            child.wait()
        except KeyboardInterrupt:
            child.send_signal(signal.SIGINT)
            child.wait()
            raise
        if child.returncode != 0 or not response.exists():
            raise RuntimeError(f"podman: the benchmark's child failed (exit {child.returncode})")
        times = {name: Timing(*values) for name, values in json.loads(response.read_text()).items()}
    return Section(
        f"podman run --rm, busybox true, median of {runs}",
        [
            Row("runc", times["runc"]),
            ratio_row("--runtime wrapper", times["wrapper"], times["runc"], WRAPPER_BOUND),
            ratio_row("runc, guard in --hooks-dir", times["guard"], times["runc"], GUARD_BOUND, "no GPU content"),
        ],
    )


def podman_child(request: dict[str, Any]) -> dict[str, list[float]]:
    from tests.podman_env import IMAGE, PodmanEnv

    key, value = request["cdi_request"]
    tool = Tool(request["wrapper"], request["hook"], Path(request["settings"]), Path(request["log"]), (key, value))
    subreaper(True)
    with tmpfs("bench-podman-") as directory:
        env = PodmanEnv(directory)
        try:
            none = directory / "hooks-none"  # not podman's default directories, whatever this host has there
            none.mkdir()
            env.configure([str(none)])
            guard = directory / "hooks-guard"
            guard.mkdir()
            hook = json.loads(GUARD.read_text())
            hook["hook"]["path"] = tool.hook
            hook["hook"]["env"] = [f"{CONFIG_ENV}={tool.settings}"]
            (guard / GUARD.name).write_text(json.dumps(hook))
            env.import_busybox()

            def podman(*args: str, expect_success: bool = True) -> str:
                result = env.run(*args)
                if (result.returncode == 0) != expect_success:
                    raise RuntimeError(
                        f"podman {' '.join(args)}: exit {result.returncode}\n{result.stdout}{result.stderr}"
                    )
                return result.stdout + result.stderr

            run = ["run", "--rm", "--pull=never"]
            commands = {
                "runc": [*run, IMAGE, "/bin/true"],
                "wrapper": [*run, "--runtime", tool.wrapper, IMAGE, "/bin/true"],
                "guard": ["--hooks-dir", str(guard), *run, IMAGE, "/bin/true"],
            }
            for command in commands.values():
                podman(*command)  # warm
                wait_orphans()
            annotation = ["--annotation", "=".join(tool.cdi_request)]
            before = len(tool.runtime_entries())
            podman(*run, "--runtime", tool.wrapper, *annotation, IMAGE, "/bin/true")
            wait_orphans()
            if len(tool.runtime_entries()) == before:
                raise RuntimeError(f"podman: --runtime did not reach the wrapper ({tool.log} is silent)")
            refused = podman("--hooks-dir", str(guard), *run, *annotation, IMAGE, "/bin/true", expect_success=False)
            wait_orphans()
            if REFUSAL not in refused:
                raise RuntimeError(f"podman: the guard did not run (no refusal of an unapplied request):\n{refused}")
            print(f"podman: {request['runs']} runs of {len(commands)} cases", file=sys.stderr, flush=True)
            times = interleaved_medians(
                request["runs"],
                {
                    # What podman leaves running after it returns (conmon, its cleanup) ends before the next run.
                    name: Case(partial(podman, *command), teardown=wait_orphans)
                    for name, command in commands.items()
                },
            )
        finally:
            env.close()
            wait_orphans()
    return {name: [t.median, t.low, t.high, t.runs] for name, t in times.items()}


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[1] != "podman":
        print(f"usage: {argv[0]} podman REQUEST.json RESPONSE.json  (run by bench_runtime.py)", file=sys.stderr)
        return 2
    interrupt_once()
    try:
        results = podman_child(json.loads(Path(argv[2]).read_text()))
    except KeyboardInterrupt:
        return 130
    Path(argv[3]).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
