"""Engine-level benchmark: a container's whole start and end in containerd and cri-o (through CRI) and in podman,
runc as the baseline, the wrapper (or the guard, or NVIDIA's runtime) in the path. Run through bench_runtime.py
(`--only engines` for all three, `--only containerd|podman|crio` for one).

- containerd 1.7 (.tools/containerd-trixie, unpacked by `sh scripts/setup test`) with its CRI plugin, driven by
  the tests' CRI v1 client (tests/e2e/cri.py): one daemon, started once, with two runtime handlers that differ
  only in BinaryName: `runc` (empty: runc) and `nvidia` (the wrapper). One host-network pod per handler is kept
  for all runs; a run times CreateContainer, StartContainer, ContainerStatus until the busybox `true` has
  exited, and RemoveContainer. Target: wrapper / runc <= 1.10.
- podman 4.3 `run --rm` of busybox `true`, with storage and configuration of its own (tests/podman_env.py):
  runc, `--runtime` the wrapper, and runc with the project's guard (hooks/nvidia-oci-hook-guard.json, its path
  pointed at the launcher) in a `--hooks-dir`. The container has no GPU content, so neither finds anything to
  do. Targets: x1.10 for the wrapper, x1.05 for the guard.
- cri-o 1.37 from ../shared/peers/bin (tests/e2e/crio.py; left out, saying why, where it cannot run): one
  daemon with the handlers `runc`, `nvidia` (the wrapper as runtime_path, as `configure crio` writes it) and
  `nvidia-toolkit` (NVIDIA's nvidia-container-runtime, its configuration named in the handler's monitor_env:
  benchmarks/peers.py; left out where the peers lack it). The guard's hooks.d file, as for podman, is renamed
  into cri-o's hooks_dir before each of its runs and out of it before every other run: cri-o watches the
  directory and reads its hooks again on every change, so one daemon serves both. So is a hooks.d file of the
  same stage whose hook is /bin/true: what runc's running any hook costs, the floor of the guard's. One
  host-network pod per handler, runs timed as containerd's, 30 per case by default, and in the same
  interleaved run one `state` of a created container through each handler's runtime, with the root and
  environment cri-o gives it. Each is reported by its median against the runc handler's and by the median of
  its ratios to the runc handler's run of the same round. Targets: the `nvidia` handler x1.05, the guard x1.04
  paired per round.

All keep their state on tmpfs, as /run is on a node (cri-o's directory is moved onto one before it starts).
Before the timed runs each handler that should hold a tool is shown to: the wrapper's log gains an entry, the
guard refuses, NVIDIA's runtime logs the mode it resolved. containerd and podman get a container with a CDI
request (neither engine applies CDI itself here), which the guard refuses unapplied; cri-o resolves CDI requests
itself, so it gets one whose CRI device is /dev/nvidia0 alone (a character device with its numbers, made in the
daemon's directory), which both refuse (GPU001); with the guard's file out of hooks_dir the same container runs.
cri-o's probes run again after the timed runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
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

from peers import CRIO, TOOLKIT_RUNTIME, Toolkit, missing, toolkit  # noqa: E402
from timing import (  # noqa: E402
    SETTLE,
    Case,
    Row,
    Section,
    Timing,
    delta_row,
    interleaved_medians,
    interleaved_times,
    interrupt_once,
    paired_row,
    ratio_row,
    subreaper,
    summary,
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
    "cri-o": [str(CRIO), "--version"],
    "nvidia-container-runtime": [str(TOOLKIT_RUNTIME), "--version"],
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

    def guard_file(self) -> str:
        """The guard's hooks.d file as the package installs it, its path pointed at the launcher, and the
        configuration in its env."""
        hook = json.loads(GUARD.read_text())
        hook["hook"]["path"] = self.hook
        hook["hook"]["env"] = [f"{CONFIG_ENV}={self.settings}"]
        return json.dumps(hook)

    def runtime_entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        entries = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [entry for entry in entries if entry.get("mode") == "runtime"]


ENGINES = ("containerd", "podman", "crio")


def measure(
    runs: int,
    wrapper: str,
    hook: str,
    settings: Path,
    log: Path,
    cdi_request: tuple[str, str],
    engines: Sequence[str] = ENGINES,
) -> Iterator[Section]:
    tool = Tool(wrapper, hook, settings, log, cdi_request)
    if "containerd" in engines:
        yield measure_containerd(runs, tool)
    if "podman" in engines:
        yield measure_podman(runs, tool)
    if "crio" in engines:
        yield from measure_crio(runs, tool)


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
    engine: str  # for messages
    namespaces: Any  # cri.NamespaceOption, which each container repeats
    attempts: int = 0


def start_pod(daemon: Any, handler: str, engine: str = "containerd", namespaces: Any = None) -> Pod:
    """A pod on the host's network, namespaces None: the rest of them the pod's own (cri-o's harness says
    which it can start)."""
    from tests.e2e.cri import CALL_TIMEOUT, cri

    name = daemon.next_pod_name()
    logs = daemon.workdir / "logs" / name
    logs.mkdir(parents=True)
    namespaces = namespaces or cri.NamespaceOption(network=cri.NODE)
    config = cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name=name, uid=str(uuid.uuid4()), namespace="bench", attempt=0),
        log_directory=str(logs),
        linux=cri.LinuxPodSandboxConfig(
            cgroup_parent=daemon.cgroup_parent,  # where close() finds what is left to kill
            security_context=cri.LinuxSandboxSecurityContext(namespace_options=namespaces),
        ),
    )
    request = cri.RunPodSandboxRequest(config=config, runtime_handler=handler)
    return Pod(daemon.runtime.RunPodSandbox(request, timeout=CALL_TIMEOUT).pod_sandbox_id, config, engine, namespaces)


def create_container(
    daemon: Any,
    pod: Pod,
    annotations: Optional[Mapping[str, str]] = None,
    devices: Sequence[tuple[str, str, str]] = (),
) -> str:
    """CreateContainer of busybox `true` in pod, as kubelet asks for it; devices are CRI Devices (host path,
    container path, permissions)."""
    from tests.e2e.cri import BUSYBOX_IMAGE, CALL_TIMEOUT, cri

    pod.attempts += 1
    config = cri.ContainerConfig(
        metadata=cri.ContainerMetadata(name="main", attempt=pod.attempts),
        image=cri.ImageSpec(image=BUSYBOX_IMAGE, user_specified_image=BUSYBOX_IMAGE),
        command=["/bin/true"],
        annotations=dict(annotations or {}),
        devices=[cri.Device(host_path=host, container_path=path, permissions=mode) for host, path, mode in devices],
        log_path=f"main-{pod.attempts}.log",
        linux=cri.LinuxContainerConfig(
            security_context=cri.LinuxContainerSecurityContext(namespace_options=pod.namespaces)
        ),
    )
    request = cri.CreateContainerRequest(pod_sandbox_id=pod.id, config=config, sandbox_config=pod.config)
    return str(daemon.runtime.CreateContainer(request, timeout=CALL_TIMEOUT).container_id)


def run_container(
    daemon: Any,
    pod: Pod,
    annotations: Optional[Mapping[str, str]] = None,
    devices: Sequence[tuple[str, str, str]] = (),
) -> str:
    """What kubelet asks for a container that runs to its exit: create, start, status until exited, remove."""
    from tests.e2e.cri import CALL_TIMEOUT, cri

    container = create_container(daemon, pod, annotations, devices)
    runtime = daemon.runtime
    runtime.StartContainer(cri.StartContainerRequest(container_id=container), timeout=CALL_TIMEOUT)
    deadline = time.monotonic() + CALL_TIMEOUT
    while True:
        status = runtime.ContainerStatus(cri.ContainerStatusRequest(container_id=container), timeout=CALL_TIMEOUT)
        if status.status.state == cri.CONTAINER_EXITED:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{pod.engine}: container {container} has not exited after {CALL_TIMEOUT} s")
        time.sleep(POLL)
    if status.status.exit_code != 0:
        raise RuntimeError(f"{pod.engine}: container {container} exited {status.status.exit_code}")
    runtime.RemoveContainer(cri.RemoveContainerRequest(container_id=container), timeout=CALL_TIMEOUT)
    return container


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
            (guard / GUARD.name).write_text(tool.guard_file())
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


# cri-o

CRIO_WRAPPER_BOUND = 1.05
CRIO_GUARD_BOUND = 1.04  # paired per round
TOOLKIT_HANDLER = "nvidia-toolkit"
# monitor_env's default, which a handler that sets monitor_env repeats.
MONITOR_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
GPU_NODE = (195, 0)  # /dev/nvidia0's numbers
NULL_HOOK = "null-hook.json"


@dataclass
class CrioBench:
    """The daemon, its handlers' runtimes and state roots, NVIDIA's runtime's configuration (None where the
    peers lack it), and the hooks.d files a case puts in cri-o's hooks_dir (the rest wait beside it): the guard's,
    and one whose hook is /bin/true, what any prestart-stage hook costs before it does anything."""

    daemon: Any  # tests.e2e.crio.CrioDaemon
    runtimes: dict[str, str]  # handler -> runtime_path
    nvidia: Optional[Toolkit]
    hooks_on: Path
    hooks_off: Path
    gpu_device: Path  # a character device with /dev/nvidia0's numbers, for the probes

    def hook(self, name: Optional[str]) -> None:
        """Only the hooks.d file name (GUARD.name or NULL_HOOK) in cri-o's hooks_dir, or none, by rename: cri-o
        watches the directory and reads its hooks again on every change."""
        for file in (GUARD.name, NULL_HOOK):
            source, target = (self.hooks_off, self.hooks_on) if file == name else (self.hooks_on, self.hooks_off)
            if (source / file).exists():
                os.replace(source / file, target / file)

    def env(self, handler: str) -> dict[str, str]:
        """The environment cri-o runs handler's runtime with (internal/oci/runtime_oci.go, prepareEnv): the
        handler's monitor_env, a marker that keeps the daemon's own environment out, and the daemon's PATH,
        which wins over monitor_env's."""
        extra = self.nvidia.env if handler == TOOLKIT_HANDLER and self.nvidia is not None else {}
        environ = Path(f"/proc/{self.daemon.pid}/environ").read_bytes().split(b"\0")
        path = next((entry[5:].decode() for entry in environ if entry.startswith(b"PATH=")), MONITOR_PATH)
        return {**extra, "CRI_O_EXTERNAL": "1", "PATH": path}


def runtime_root(workdir: Path, handler: str) -> Path:
    """Where tests/e2e/crio.py keeps a handler's runtime state."""
    return workdir / "runtimes" / handler


def on_tmpfs(directory: Path) -> None:
    """directory's files moved onto a tmpfs mounted over it, as a node keeps /run and as the other engines' state
    is kept here; the daemon's close() unmounts it with the rest."""
    staging = Path(tempfile.mkdtemp(prefix=f"{directory.name}-", dir=directory.parent))
    try:
        subprocess.run(["cp", "-a", f"{directory}/.", str(staging)], check=True, capture_output=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512m", "bench-crio", str(directory)], check=True)
        subprocess.run(["cp", "-a", f"{staging}/.", str(directory)], check=True, capture_output=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def crio_daemon(tool: Tool, with_toolkit: bool) -> Iterator[CrioBench]:
    """cri-o 1.37 (tests/e2e/crio.py) with the handlers `runc`, `nvidia` (the wrapper, as `configure crio` names
    it) and, with_toolkit, `nvidia-toolkit` (NVIDIA's runtime, its configuration in monitor_env); its state on a
    tmpfs; stopped and removed however this ends."""
    from tests.e2e import crio as harness

    daemon = None
    try:
        handlers = {HANDLER: tool.wrapper}
        daemon = harness.CrioDaemon.prepare(runtimes=handlers)
        workdir = Path(daemon.workdir)
        on_tmpfs(workdir)
        runtimes = {"runc": str(harness.RUNC), **handlers}
        nvidia = None
        if with_toolkit:
            nvidia = toolkit(workdir, str(harness.RUNC))
            runtimes[TOOLKIT_HANDLER] = nvidia.runtime
            monitor_env = [f"PATH={MONITOR_PATH}", *(f"{key}={value}" for key, value in nvidia.env.items())]
            (Path(daemon.config_dir) / f"50-{TOOLKIT_HANDLER}.conf").write_text(
                f"[crio.runtime.runtimes.{TOOLKIT_HANDLER}]\n"
                f"runtime_path = {json.dumps(nvidia.runtime)}\n"
                'runtime_type = "oci"\n'
                f"runtime_root = {json.dumps(str(runtime_root(workdir, TOOLKIT_HANDLER)))}\n"
                f"monitor_env = {json.dumps(monitor_env)}\n"
            )
        hooks_off = workdir / "hooks-off"
        hooks_off.mkdir()
        (hooks_off / GUARD.name).write_text(tool.guard_file())
        null_hook = json.loads(tool.guard_file())
        null_hook["hook"] = {"path": "/bin/true", "args": ["true"]}
        (hooks_off / NULL_HOOK).write_text(json.dumps(null_hook))
        gpu_device = workdir / "devices/nvidia0"
        gpu_device.parent.mkdir()
        os.mknod(gpu_device, stat.S_IFCHR | 0o666, os.makedev(*GPU_NODE))
        daemon.run(timeout=60)
        yield CrioBench(daemon, runtimes, nvidia, workdir / "hooks", hooks_off, gpu_device)
    finally:
        if daemon is not None:
            daemon.close()


def crio_probes(bench: CrioBench, pods: dict[str, Pod], tool: Tool) -> str:
    """Each tool shown in its path, or RuntimeError. A container whose one device is /dev/nvidia0 (GPU001, which
    cri-o does not check) must add an entry to the wrapper's log through `nvidia`, be refused through `runc` with
    the guard's file in hooks_dir and run once the file has left; a plain one through `nvidia-toolkit` must make
    NVIDIA's runtime log the mode it resolved "auto" to, which is returned ("" without that handler)."""
    from tests.e2e.cri import grpc

    device = [(str(bench.gpu_device), "/dev/nvidia0", "rw")]

    def refusal(pod: Pod) -> str:
        try:
            run_container(bench.daemon, pod, devices=device)
        except grpc.RpcError as error:
            return str(error.details())
        return ""

    before = len(tool.runtime_entries())
    refusal(pods["wrapped"])
    if len(tool.runtime_entries()) == before:
        raise RuntimeError(f"cri-o: the `{HANDLER}` handler did not reach the wrapper ({tool.log} is silent)")
    bench.hook(GUARD.name)
    time.sleep(SETTLE)
    refused = refusal(pods["runc"])
    if REFUSAL not in refused:
        raise RuntimeError(f"cri-o: the guard in hooks_dir did not refuse /dev/nvidia0 alone: {refused or 'it ran'}")
    bench.hook(None)
    time.sleep(SETTLE)
    refused = refusal(pods["runc"])
    if refused:
        raise RuntimeError(f"cri-o: with the guard's file out of hooks_dir, /dev/nvidia0 alone failed: {refused}")
    if bench.nvidia is None:
        return ""
    before = len(bench.nvidia.modes())
    run_container(bench.daemon, pods["toolkit"])
    modes = bench.nvidia.modes()[before:]
    if not modes:
        raise RuntimeError(f"cri-o: `{TOOLKIT_HANDLER}` did not reach NVIDIA's runtime ({bench.nvidia.log} is silent)")
    return modes[-1]


def measure_crio(runs: int, tool: Tool) -> Iterator[Section]:
    from tests.e2e import crio as harness
    from tests.e2e.cri import CALL_TIMEOUT, cri

    absent = harness.skip_reason()
    if absent is not None:
        print(f"cri-o: left out: {absent}", file=sys.stderr, flush=True)
        return
    toolkit_absent = missing(TOOLKIT_RUNTIME)
    if toolkit_absent is not None:
        print(f"cri-o: NVIDIA's runtime left out: {toolkit_absent}", file=sys.stderr, flush=True)
    print("cri-o: starting the daemon and its pods", file=sys.stderr, flush=True)
    with crio_daemon(tool, toolkit_absent is None) as bench:
        daemon = bench.daemon
        namespaces = daemon.namespace_options
        handlers = {"runc": "runc", "wrapped": HANDLER}
        if bench.nvidia is not None:
            handlers["toolkit"] = TOOLKIT_HANDLER
        pods = {name: start_pod(daemon, handler, "cri-o", namespaces) for name, handler in handlers.items()}
        for pod in pods.values():
            run_container(daemon, pod)  # warm: the image's layers, each runtime's first container
        mode = crio_probes(bench, pods, tool)
        cases = {
            "runc": Case(partial(run_container, daemon, pods["runc"]), setup=partial(bench.hook, None)),
            "guard": Case(partial(run_container, daemon, pods["runc"]), setup=partial(bench.hook, GUARD.name)),
            "null hook": Case(partial(run_container, daemon, pods["runc"]), setup=partial(bench.hook, NULL_HOOK)),
            "wrapped": Case(partial(run_container, daemon, pods["wrapped"]), setup=partial(bench.hook, None)),
        }
        if "toolkit" in pods:
            cases["toolkit"] = Case(partial(run_container, daemon, pods["toolkit"]), setup=partial(bench.hook, None))
        # One `state` of a created container per runtime, as cri-o calls it.
        created = {name: create_container(daemon, pod) for name, pod in pods.items()}
        for name, container in created.items():
            handler = handlers[name]
            root = runtime_root(Path(daemon.workdir), handler)
            command = [bench.runtimes[handler], "--root", str(root), "state", container]
            cases[f"state {name}"] = Case(
                partial(subprocess.run, command, env=bench.env(handler), check=True, stdout=subprocess.DEVNULL),
                settle=SETTLE / 5,
            )
        print(f"cri-o: {runs} runs of {len(cases)} cases", file=sys.stderr, flush=True)
        times = interleaved_times(runs, cases)
        for container in created.values():
            daemon.runtime.RemoveContainer(cri.RemoveContainerRequest(container_id=container), timeout=CALL_TIMEOUT)
        crio_probes(bench, pods, tool)  # the guard's file still came and went with each run
        version = daemon.runtime.Version(cri.VersionRequest(), timeout=5)
    timing = {name: summary(values) for name, values in times.items()}
    runc = timing["runc"]
    rows = [
        Row("runc handler", runc),
        ratio_row(f"`{HANDLER}` handler: the wrapper", timing["wrapped"], runc, CRIO_WRAPPER_BOUND),
        paired_row(f"`{HANDLER}` handler, per round", times["wrapped"], times["runc"]),
    ]
    if "toolkit" in times:
        rows += [
            ratio_row(
                f"`{TOOLKIT_HANDLER}` handler: NVIDIA's runtime",
                timing["toolkit"],
                runc,
                note=f"mode auto as {mode}: no device requested",
            ),
            paired_row(f"`{TOOLKIT_HANDLER}` handler, per round", times["toolkit"], times["runc"]),
        ]
    rows += [
        ratio_row("runc handler, guard in hooks_dir", timing["guard"], runc, note="no GPU content"),
        paired_row("runc handler, guard in hooks_dir, per round", times["guard"], times["runc"], CRIO_GUARD_BOUND),
        # The part of the guard's cost that is the hook's mere existence: runc forks, execs and waits for it.
        paired_row(
            "runc handler, /bin/true as the hook, per round",
            times["null hook"],
            times["runc"],
            note="the floor of any hook",
        ),
        paired_row("guard against /bin/true as the hook, per round", times["guard"], times["null hook"]),
    ]
    name = f"{version.runtime_name} {version.runtime_version}"
    yield Section(
        f"{name} through CRI, a host-network pod's busybox true from CreateContainer to RemoveContainer, "
        f"median of {runs}",
        rows,
    )
    state = timing["state runc"]
    yield Section(
        f"{name}'s handlers' runtimes: one `state` of a created container, as cri-o calls it, median of {runs}",
        [Row("runc", state)]
        + [
            delta_row(label, timing[f"state {case}"], state)
            for case, label in (("wrapped", f"the wrapper (`{HANDLER}`)"), ("toolkit", "NVIDIA's runtime"))
            if f"state {case}" in timing
        ],
    )


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
