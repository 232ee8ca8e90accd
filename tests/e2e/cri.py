"""A throwaway containerd with its CRI plugin, and a CRI v1 client that runs one Kubernetes-style container in it.

`CRIDaemon.start(...)` runs containerd (Debian 12's 1.6 unless told otherwise) with its root, state, socket, runc
state, images and logs under one short directory in /tmp, configured the way FACTS.md section 7 says works on these
machines: cgroupfs, `restrict_oom_score_adj`, no CNI (pods use the host network), one runtime `runc` whose
`options.BinaryName` can name a wrapper. Two local images are imported with `ctr` from an OCI archive written here
(no registry): a pause image (catatonit) and busybox with every applet.

`run_pod_container(daemon, ...)` goes through the CRI calls kubelet makes for a one-container pod and returns what
happened as a `CRIResult`, whatever step fails. `SpecRecorder` is a runtime wrapper that keeps a copy of each OCI
spec it is handed on `create`, to see what containerd really asked runc for.

containerd runs under catatonit, which makes itself a child subreaper: the shims that containerd starts daemonize,
and would otherwise be children of PID 1, which on these machines reaps only now and then (seconds to minutes
later). `close()` removes the pods, kills what is left (shims, and every process in the pods' cgroup parent), waits
until catatonit has reaped them, stops the daemon and unmounts everything under the directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, TypeVar, Union

from tests.containerd.real import PRIVATE_RUN, start_daemon, stop_daemon
from tests.podman_env import busybox_rootfs, unmount_below

# gRPC's fork handlers restart its poller in each forked child; once a channel has existed, the child can abort
# on `epoll_wait: Bad file descriptor` before it execs (grpc/grpc#43055, grpcio >= 1.80). Seen here on Python 3.9:
# later subprocess modules use vfork where they can, which runs no fork handlers. The harness starts containerd, ctr
# and umount and never uses gRPC in a child. gRPC reads the variable when it loads, hence before the import.
if "grpc" in sys.modules and "GRPC_ENABLE_FORK_SUPPORT" not in os.environ:
    raise ImportError("gRPC was loaded before tests.e2e.cri: import cri_api (the `cri` messages) from this module")
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import grpc
from cri_api.v1 import api_pb2 as cri  # the CRI v1 messages, for callers that build requests of their own
from cri_api.v1 import api_pb2_grpc as cri_grpc

CONTAINERD = Path("/usr/bin/containerd")
PAUSE_IMAGE = "localhost/nvoh-e2e/pause:1"
BUSYBOX_IMAGE = "localhost/nvoh-e2e/busybox:1"
K8S_NAMESPACE = "k8s.io"  # the containerd namespace the CRI plugin keeps its images and containers in
CALL_TIMEOUT = 30.0

StrPath = Union[str, Path]


class CRIUnavailable(RuntimeError):
    """The daemon, its CRI plugin or the images could not be set up; the message carries the daemon's log."""


@dataclass(frozen=True)
class CRIResult:
    """What one pod with one container did. `failed_step` is the CRI call (or "wait") that failed, None when the
    container ran to its exit; `error` is then the gRPC error's text (the daemon's message)."""

    failed_step: Optional[str]
    error: Optional[str]
    error_code: Optional[str]  # grpc.StatusCode name, e.g. "UNKNOWN"
    exit_code: Optional[int]
    # From the CRI log, without its line prefixes. containerd copies the two streams in parallel: their order in
    # `output` is the order lines reached the log, not necessarily the order the container wrote them.
    output: str
    stdout: str
    stderr: str
    reason: str  # ContainerStatus.reason, e.g. "Completed", "Error", "StartError"
    message: str  # ContainerStatus.message
    pod_id: Optional[str]
    container_id: Optional[str]
    cleanup_errors: tuple[str, ...] = ()
    container_config: Optional[Any] = field(default=None, repr=False)  # the cri.ContainerConfig sent

    @property
    def ran(self) -> bool:
        return self.failed_step is None


def _go_arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"}.get(
        machine, machine
    )


def _blob(data: bytes) -> tuple[str, int]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), len(data)


def _layer(rootfs: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for child in sorted(rootfs.iterdir()):
            tar.add(child, arcname=child.name)
    return buffer.getvalue()


def write_images_archive(directory: Path) -> Path:
    """An OCI image-layout archive holding PAUSE_IMAGE and BUSYBOX_IMAGE, built from the host's static binaries."""
    catatonit = shutil.which("catatonit", path="/usr/bin:/usr/sbin:/bin:/sbin")
    if catatonit is None:
        raise CRIUnavailable("catatonit is not installed (Debian package catatonit)")
    pause = directory / "pause-rootfs"
    pause.mkdir(parents=True)
    shutil.copy2(catatonit, pause / "catatonit")
    busybox = busybox_rootfs(directory / "busybox-rootfs", applets=None)
    # runc creates missing mount points, but a shell in the container expects a writable /tmp.
    for name in ("dev", "proc", "sys", "etc", "tmp", "root"):
        (busybox / name).mkdir(exist_ok=True)
    (busybox / "tmp").chmod(0o1777)

    blobs: dict[str, bytes] = {}
    manifests = []
    images = ((PAUSE_IMAGE, pause, ["/catatonit", "-P"]), (BUSYBOX_IMAGE, busybox, ["/bin/sh"]))
    for name, rootfs, cmd in images:
        layer = _layer(rootfs)
        layer_digest, layer_size = _blob(layer)
        config = json.dumps(
            {
                "architecture": _go_arch(),
                "os": "linux",
                "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": cmd},
                "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
            }
        ).encode()
        config_digest, config_size = _blob(config)
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": config_digest,
                    "size": config_size,
                },
                "layers": [
                    {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer_size}
                ],
            }
        ).encode()
        manifest_digest, manifest_size = _blob(manifest)
        blobs.update({layer_digest: layer, config_digest: config, manifest_digest: manifest})
        manifests.append(
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": manifest_size,
                "platform": {"architecture": _go_arch(), "os": "linux"},
                # ctr names an imported image after this annotation; the OCI one is only a tag.
                "annotations": {
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                },
            }
        )
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests}
    files = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(index).encode(),
        **{f"blobs/sha256/{digest.split(':', 1)[1]}": data for digest, data in blobs.items()},
    }
    archive = directory / "images.tar"
    with tarfile.open(archive, "w") as tar:
        for directory_name in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(directory_name)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    shutil.rmtree(pause)
    shutil.rmtree(busybox)
    return archive


def _toml_list(values: Sequence[StrPath]) -> str:
    return "[" + ", ".join(json.dumps(str(value)) for value in values) + "]"


def cri_config(
    workdir: Path,
    *,
    binary_name: Optional[StrPath],
    container_annotations: Sequence[str],
    enable_cdi: bool,
    cdi_spec_dirs: Optional[Sequence[StrPath]],
) -> str:
    """The config (version 2) without root, state and grpc, which start_daemon adds."""
    cri_table = 'plugins."io.containerd.grpc.v1.cri"'
    runtime = f"{cri_table}.containerd.runtimes.runc"
    lines = [
        "version = 2",
        "",
        '[plugins."io.containerd.internal.v1.opt"]',
        f'  path = "{workdir}/opt"',
        "",
        f"[{cri_table}]",
        f'  sandbox_image = "{PAUSE_IMAGE}"',
        # containerd runs without CAP_SYS_RESOURCE here: containers must not get a lower OOM score than it has.
        "  restrict_oom_score_adj = true",
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"',
        f"  enable_cdi = {'true' if enable_cdi else 'false'}",
    ]
    if cdi_spec_dirs is not None:
        lines.append(f"  cdi_spec_dirs = {_toml_list(cdi_spec_dirs)}")
    lines += [
        "",
        # Empty directories: no CNI network is configured, so only host-network pods can start, and the host's
        # /etc/cni/net.d (podman's bridge) is not read.
        f"[{cri_table}.cni]",
        f'  bin_dir = "{workdir}/cni/bin"',
        f'  conf_dir = "{workdir}/cni/net.d"',
        "",
        f"[{cri_table}.containerd]",
        '  default_runtime_name = "runc"',
        '  snapshotter = "overlayfs"',
        "",
        f"[{runtime}]",
        '  runtime_type = "io.containerd.runc.v2"',
        f"  container_annotations = {_toml_list(container_annotations)}",
        "",
        f"[{runtime}.options]",
        f'  BinaryName = "{binary_name or ""}"',
        f'  Root = "{workdir}/runc"',
        "  SystemdCgroup = false",
        "",
    ]
    return "\n".join(lines)


class CRIClient:
    """A throwaway daemon's CRI v1 client: what run_pod_container drives, and what containerd's CRIDaemon and cri-o's
    CrioDaemon (tests/e2e/crio.py) share. Each starts its daemon, calls connect() once the socket is there, and in
    close() removes its pods, kills what remains and calls disconnect()."""

    # The pod's and its container's namespaces: the network is always the host's (no CNI is configured).
    namespace_options: Any = cri.NamespaceOption(network=cri.NODE)
    unavailable: type[CRIUnavailable] = CRIUnavailable

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.socket = workdir / "s"
        self.cgroup_parent = f"/nvoh-e2e-{workdir.name}"
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.channel: Optional[grpc.Channel] = None
        self._runtime: Optional[cri_grpc.RuntimeServiceStub] = None
        self._images: Optional[cri_grpc.ImageServiceStub] = None
        # next() of a count is one step under the GIL: pods started from several threads get distinct names.
        self._pod_numbers = itertools.count(1)

    def connect(self) -> None:
        self.channel = grpc.insecure_channel(f"unix://{self.socket}")
        self._runtime = cri_grpc.RuntimeServiceStub(self.channel)
        self._images = cri_grpc.ImageServiceStub(self.channel)

    @property
    def runtime(self) -> cri_grpc.RuntimeServiceStub:
        if self._runtime is None:
            raise self.unavailable("the daemon is not running")
        return self._runtime

    @property
    def images(self) -> cri_grpc.ImageServiceStub:
        if self._images is None:
            raise self.unavailable("the daemon is not running")
        return self._images

    def log(self) -> str:
        path = self.workdir / "log"
        return path.read_text(errors="replace") if path.exists() else ""

    def answers(self) -> bool:
        """Whether the daemon still answers CRI: a daemon that died leaves its parent running a while, and every
        call then fails to connect."""
        if self.process is None or self.process.poll() is not None or self._runtime is None:
            return False
        try:
            self.runtime.Version(cri.VersionRequest(), timeout=10)
        except grpc.RpcError as error:
            return bool(error.code() != grpc.StatusCode.UNAVAILABLE)
        return True

    def next_pod_name(self) -> str:
        return f"pod{next(self._pod_numbers)}"

    def __enter__(self: _Client) -> _Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError

    def remove_pods(self) -> None:
        """Stop and remove every pod the running daemon lists."""
        if self.process is None or self.process.poll() is not None or self._runtime is None:
            return
        # Whatever goes wrong here (an RpcError, a closed channel), the caller's kills still clean up.
        with contextlib.suppress(Exception):
            for pod in self.runtime.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=5).items:
                with contextlib.suppress(grpc.RpcError):
                    self.runtime.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=pod.id), timeout=10)
                    self.runtime.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=pod.id), timeout=10)

    def disconnect(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = self._runtime = self._images = None


_Client = TypeVar("_Client", bound=CRIClient)


class CRIDaemon(CRIClient):
    """A running containerd and a CRI v1 client connected to it; use as a context manager or call close()."""

    def __init__(self, workdir: Path, containerd: Path) -> None:
        super().__init__(workdir)
        self.containerd = containerd
        self.ctr = containerd.parent / "ctr"

    @classmethod
    def start(
        cls,
        *,
        binary_name: Optional[StrPath] = None,
        container_annotations: Sequence[str] = (),
        enable_cdi: bool = False,
        cdi_spec_dirs: Optional[Sequence[StrPath]] = None,
        containerd: Path = CONTAINERD,
        private_run: bool = False,
        timeout: float = 30,
    ) -> CRIDaemon:
        """Start containerd with its CRI plugin and the two images; raises CRIUnavailable (after cleaning up).
        private_run: in a mount namespace with a /run of its own (containerd 2.x makes its NRI socket there), for
        callers that look at nothing the daemon writes under /run."""
        if os.geteuid() != 0:
            raise CRIUnavailable("the CRI daemon needs root (mounts, cgroups)")
        catatonit = shutil.which("catatonit", path="/usr/bin:/usr/sbin:/bin:/sbin")
        if catatonit is None or not os.access(containerd, os.X_OK):
            raise CRIUnavailable(f"needs {containerd} and catatonit (Debian packages containerd, catatonit)")
        daemon = cls(Path(tempfile.mkdtemp(prefix="cri", dir="/tmp")), containerd)  # short: socket paths
        try:
            under = [*PRIVATE_RUN, catatonit, "--"] if private_run else [catatonit, "--"]
            daemon._start(
                under,
                cri_config(
                    daemon.workdir,
                    binary_name=binary_name,
                    container_annotations=container_annotations,
                    enable_cdi=enable_cdi,
                    cdi_spec_dirs=cdi_spec_dirs,
                ),
                timeout,
            )
        except BaseException:
            daemon.close()
            raise
        return daemon

    def _start(self, under: list[str], config: str, timeout: float) -> None:
        for name in ("cni/bin", "cni/net.d", "logs"):
            (self.workdir / name).mkdir(parents=True)
        archive = write_images_archive(self.workdir / "images")
        deadline = time.monotonic() + timeout
        self.process = start_daemon(self.containerd, config, self.workdir, under=under, timeout=timeout)
        if self.process.poll() is not None or not self.socket.exists():
            raise CRIUnavailable(f"containerd did not start (exit {self.process.poll()}):\n{self.log()[-2000:]}")
        self.connect()
        self._until(deadline, "the CRI plugin to answer", lambda: self.runtime.Version(cri.VersionRequest(), timeout=2))
        imported = subprocess.run(
            [str(self.ctr), "--address", str(self.socket), "-n", K8S_NAMESPACE, "images", "import", str(archive)],
            capture_output=True,
            text=True,
            timeout=max(1.0, deadline - time.monotonic()),
            check=False,
        )
        if imported.returncode != 0:
            raise CRIUnavailable(f"ctr images import failed: {imported.stdout}{imported.stderr}\n{self.log()[-2000:]}")
        archive.unlink()
        for image in (PAUSE_IMAGE, BUSYBOX_IMAGE):
            # The CRI plugin learns of images that ctr imports from containerd's events, a moment later.
            self._until(deadline, f"the CRI plugin to list {image}", lambda image=image: self._has_image(image))

    def _has_image(self, image: str) -> bool:
        status = self.images.ImageStatus(cri.ImageStatusRequest(image=cri.ImageSpec(image=image)), timeout=5)
        return bool(status.image.id)

    def _until(self, deadline: float, what: str, probe: Any) -> None:
        last: object = None
        while True:
            try:
                if probe() is not False:
                    return
            except grpc.RpcError as error:
                last = error
            if time.monotonic() > deadline or (self.process is not None and self.process.poll() is not None):
                raise CRIUnavailable(f"timed out waiting for {what} ({last}):\n{self.log()[-2000:]}")
            time.sleep(0.05)

    def close(self) -> None:
        """Remove every pod, kill what remains of them, stop the daemon, unmount and delete the directory."""
        self.remove_pods()
        # Before the daemon stops: catatonit reaps what dies only while it runs, so it must outlive every process
        # killed here; once it has gone they are PID 1's, and linger as zombies until PID 1 gets round to them.
        killed = []
        for pid in self.shims():
            # A shim listens outside the state directory (/run/containerd/s) and removes its socket only when it
            # exits by itself.
            sockets = listening_sockets(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            for path in sockets:
                if path.startswith(("/run/containerd/s/", f"{self.workdir}/")):
                    Path(path).unlink(missing_ok=True)
        killed += _kill_cgroup(self.cgroup_parent)
        if self.process is not None and self.process.poll() is None:
            _wait_gone(killed)
        self.disconnect()
        if self.process is not None:
            stop_daemon(self.process)
        unmount_below(self.workdir)
        _remove_cgroup(self.cgroup_parent)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def shims(self) -> list[int]:
        """The shims this daemon started: containerd passes its own socket to each as `-address`."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"containerd-shim" in argv[0] and b"-address" in argv:
                position = argv.index(b"-address")
                if position + 1 < len(argv) and argv[position + 1] == str(self.socket).encode():
                    found.append(int(entry.name))
        return found


def listening_sockets(pid: int) -> list[str]:
    """The paths of the unix sockets that pid holds open, from its fds and its network namespace's socket table."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
    paths = []
    with contextlib.suppress(OSError), open(f"/proc/{pid}/net/unix", encoding="utf-8") as table:
        for line in table:
            fields = line.split()
            # Num RefCount Protocol Flags Type St Inode Path; abstract sockets start with "@".
            if len(fields) >= 8 and fields[6] in inodes and fields[7].startswith("/"):
                paths.append(fields[7])
    return paths


def cgroup_dirs(parent: str) -> list[Path]:
    """parent's directory in every mounted cgroup hierarchy (v1 controllers and the v2 one), where it exists."""
    dirs = []
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        for line in mountinfo:
            fields = line.split()
            separator = fields.index("-")
            if fields[separator + 1] in ("cgroup", "cgroup2"):
                candidate = Path(fields[4]) / parent.lstrip("/")
                if candidate.is_dir():
                    dirs.append(candidate)
    return dirs


def _walk_bottom_up(top: Path) -> Iterator[Path]:
    for current, _dirs, _files in os.walk(top, topdown=False):
        yield Path(current)


def _kill_cgroup(parent: str) -> list[int]:
    killed = []
    for top in cgroup_dirs(parent):
        for directory in _walk_bottom_up(top):
            with contextlib.suppress(OSError):
                for pid in (directory / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
                        killed.append(int(pid))
    return killed


def _wait_gone(pids: Sequence[int], timeout: float = 10) -> None:
    """Until each pid has been reaped (a zombie still has its /proc entry)."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.01)


def _remove_cgroup(parent: str, timeout: float = 5) -> None:
    # A killed process leaves its cgroup a moment after the signal: rmdir fails with EBUSY until then.
    deadline = time.monotonic() + timeout
    for top in cgroup_dirs(parent):
        for directory in _walk_bottom_up(top):
            while True:
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)


def parse_cri_log(text: str, stream: Optional[str] = None) -> str:
    """The content of a CRI container log, of one stream ("stdout", "stderr") or both. Each line of the log is
    `TIME STREAM TAGS CONTENT`; TAGS "P" marks a line the runtime split (it continues on the stream's next log line),
    "F" one that ends there."""
    output = []
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) < 3 or (stream is not None and parts[1] != stream):
            continue
        content = parts[3] if len(parts) == 4 else ""
        output.append(content if "P" in parts[2].split(":") else content + "\n")
    return "".join(output)


@dataclass
class _Run:
    pod_id: Optional[str] = None
    container_id: Optional[str] = None
    failed_step: Optional[str] = None
    error: Optional[str] = None
    error_code: Optional[str] = None
    cleanup_errors: list[str] = field(default_factory=list)
    container_config: Optional[Any] = None

    def fail(self, step: str, error: Union[grpc.RpcError, str]) -> None:
        self.failed_step = step
        if isinstance(error, grpc.RpcError):
            self.error = error.details()
            self.error_code = error.code().name
        else:
            self.error = error


@dataclass(frozen=True)
class Sandbox:
    """A pod that several run_pod_container calls share, as a node's pod holds several containers: each call
    then adds a container of its own name to it and removes only that."""

    pod_id: str
    config: Any  # the cri.PodSandboxConfig it was made with
    log_directory: Path


def _pod_config(
    daemon: CRIClient, name: str, log_directory: Path, privileged: bool, pod_annotations: Optional[Mapping[str, str]]
) -> Any:
    return cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name=name, uid=str(uuid.uuid4()), namespace="e2e", attempt=0),
        log_directory=str(log_directory),
        annotations=dict(pod_annotations or {}),
        linux=cri.LinuxPodSandboxConfig(
            cgroup_parent=daemon.cgroup_parent,
            security_context=cri.LinuxSandboxSecurityContext(
                namespace_options=daemon.namespace_options, privileged=privileged
            ),
        ),
    )


def run_sandbox(
    daemon: CRIClient,
    *,
    privileged: bool = False,
    pod_annotations: Optional[Mapping[str, str]] = None,
    runtime_handler: str = "",
) -> Sandbox:
    """A host-network pod for run_pod_container(sandbox=...); remove_sandbox stops and removes it."""
    name = daemon.next_pod_name()
    log_directory = daemon.workdir / "logs" / name
    log_directory.mkdir(parents=True)
    config = _pod_config(daemon, name, log_directory, privileged, pod_annotations)
    pod_id = daemon.runtime.RunPodSandbox(
        cri.RunPodSandboxRequest(config=config, runtime_handler=runtime_handler), timeout=CALL_TIMEOUT
    ).pod_sandbox_id
    return Sandbox(pod_id, config, log_directory)


def remove_sandbox(daemon: CRIClient, sandbox: Sandbox) -> list[str]:
    """Stop and remove the pod; the errors of those calls, if any."""
    run = _Run(pod_id=sandbox.pod_id)
    _remove(daemon, run)
    return run.cleanup_errors


def run_pod_container(
    daemon: CRIClient,
    *,
    command: Sequence[str],
    annotations: Optional[Mapping[str, str]] = None,
    pod_annotations: Optional[Mapping[str, str]] = None,
    privileged: bool = False,
    envs: Optional[Mapping[str, str]] = None,
    devices: Sequence[tuple[str, str, str]] = (),
    cdi_devices: Sequence[str] = (),
    runtime_handler: str = "",
    timeout: float = 30,
    sandbox: Optional[Sandbox] = None,
) -> CRIResult:
    """Run `command` in a busybox container of a new host-network pod, as kubelet would, and remove both again.

    annotations and envs go on the ContainerConfig, pod_annotations on the PodSandboxConfig; devices are (host_path,
    container_path, permissions) CRI Devices, as a device plugin sends them; cdi_devices are qualified CDI names
    for the ContainerConfig's CDI_devices, which kubelet fills from a device plugin's or DRA driver's answer;
    runtime_handler is the pod's RuntimeClass handler ("": the daemon's default); privileged applies to the pod and
    the container (containerd refuses a privileged container in an unprivileged pod).

    With a sandbox (run_sandbox), the container is added to that pod instead, under a name of its own, and only
    the container is removed; the pod's settings (pod_annotations, runtime_handler, the pod's privilege) are the
    sandbox's."""
    run = _Run()
    name = daemon.next_pod_name()
    if sandbox is None:
        log_directory = daemon.workdir / "logs" / name
        log_directory.mkdir(parents=True)
        pod_config = _pod_config(daemon, name, log_directory, privileged, pod_annotations)
        container_name = "main"
    else:
        log_directory, pod_config, container_name = sandbox.log_directory, sandbox.config, name
        run.pod_id = sandbox.pod_id
    image = cri.ImageSpec(image=BUSYBOX_IMAGE)
    # cri-o verifies the image's signature against the name the user gave, which kubelet sends; the CRI API of
    # the cri_api releases for Python 3.9 has no such field (and no CDI_devices), nor does containerd 1.6 read it.
    if "user_specified_image" in cri.ImageSpec.DESCRIPTOR.fields_by_name:
        image.user_specified_image = BUSYBOX_IMAGE
    log_name = f"{container_name}.log"
    container_config = cri.ContainerConfig(
        metadata=cri.ContainerMetadata(name=container_name, attempt=0),
        image=image,
        command=list(command),
        envs=[cri.KeyValue(key=key, value=value) for key, value in (envs or {}).items()],
        annotations=dict(annotations or {}),
        devices=[cri.Device(host_path=h, container_path=c, permissions=p) for h, c, p in devices],
        log_path=log_name,
        linux=cri.LinuxContainerConfig(
            security_context=cri.LinuxContainerSecurityContext(
                privileged=privileged, namespace_options=daemon.namespace_options
            )
        ),
    )
    if cdi_devices:
        container_config.CDI_devices.extend(cri.CDIDevice(name=device) for device in cdi_devices)
    run.container_config = container_config
    status: Optional[Any] = None
    runtime = daemon.runtime
    log = log_directory / log_name
    try:
        if sandbox is None:
            try:
                run.pod_id = runtime.RunPodSandbox(
                    cri.RunPodSandboxRequest(config=pod_config, runtime_handler=runtime_handler),
                    timeout=CALL_TIMEOUT,
                ).pod_sandbox_id
            except grpc.RpcError as error:
                run.fail("RunPodSandbox", error)
                return _result(run, None, log)
        try:
            request = cri.CreateContainerRequest(
                pod_sandbox_id=run.pod_id, config=container_config, sandbox_config=pod_config
            )
            run.container_id = runtime.CreateContainer(request, timeout=CALL_TIMEOUT).container_id
        except grpc.RpcError as error:
            run.fail("CreateContainer", error)
            return _result(run, None, log)
        try:
            runtime.StartContainer(cri.StartContainerRequest(container_id=run.container_id), timeout=CALL_TIMEOUT)
        except grpc.RpcError as error:
            run.fail("StartContainer", error)
        deadline = time.monotonic() + timeout
        while True:
            try:
                status = runtime.ContainerStatus(
                    cri.ContainerStatusRequest(container_id=run.container_id), timeout=CALL_TIMEOUT
                ).status
            except grpc.RpcError as error:
                if run.failed_step is None:
                    run.fail("ContainerStatus", error)
                break
            if status.state == cri.CONTAINER_EXITED or run.failed_step is not None:
                break
            if time.monotonic() > deadline:
                state = cri.ContainerState.Name(status.state)
                run.fail("wait", f"the container is still {state} after {timeout} s")
                break
            time.sleep(0.02)
        return _result(run, status, log)
    finally:
        _remove(daemon, run, keep_pod=sandbox is not None)


def _result(run: _Run, status: Optional[Any], log: Path) -> CRIResult:
    text = log.read_text(errors="replace") if log.exists() else ""
    return CRIResult(
        failed_step=run.failed_step,
        error=run.error,
        error_code=run.error_code,
        exit_code=status.exit_code if status is not None and status.state == cri.CONTAINER_EXITED else None,
        output=parse_cri_log(text),
        stdout=parse_cri_log(text, "stdout"),
        stderr=parse_cri_log(text, "stderr"),
        reason=status.reason if status is not None else "",
        message=status.message if status is not None else "",
        pod_id=run.pod_id,
        container_id=run.container_id,
        cleanup_errors=tuple(run.cleanup_errors),
        container_config=run.container_config,
    )


def _remove(daemon: CRIClient, run: _Run, keep_pod: bool = False) -> None:
    steps: list[tuple[str, Any]] = []
    if run.container_id:
        steps.append(("StopContainer", cri.StopContainerRequest(container_id=run.container_id, timeout=0)))
        steps.append(("RemoveContainer", cri.RemoveContainerRequest(container_id=run.container_id)))
    if run.pod_id and not keep_pod:
        steps.append(("StopPodSandbox", cri.StopPodSandboxRequest(pod_sandbox_id=run.pod_id)))
        steps.append(("RemovePodSandbox", cri.RemovePodSandboxRequest(pod_sandbox_id=run.pod_id)))
    for step, request in steps:
        try:
            getattr(daemon.runtime, step)(request, timeout=CALL_TIMEOUT)
        except grpc.RpcError as error:
            run.cleanup_errors.append(f"{step}: {error.details()}")


@dataclass(frozen=True)
class SpecRecorder:
    """A runtime to name as BinaryName (or as a cri-o handler's runtime_path): on `create` it keeps a copy of the
    bundle's config.json (the OCI spec the engine wrote) as specs/<container id>.json, then it execs runc with the
    same arguments."""

    path: Path
    specs: Path

    @classmethod
    def write(cls, directory: Path, runc: Optional[str] = None) -> SpecRecorder:
        runc = runc or shutil.which("runc", path="/usr/sbin:/usr/bin:/sbin:/bin")
        if runc is None:
            raise CRIUnavailable("runc is not installed")
        specs = directory / "specs"
        specs.mkdir(parents=True, exist_ok=True)
        path = directory / "record-runtime"
        # The shim runs `BINARY --root R --log L --log-format json create --bundle B --pid-file P ID` with the
        # bundle as its working directory, conmon `BINARY --root=R create --bundle B --pid-file P ID` (cri-o's
        # bundle is .../ID/userdata): the id comes last. No option value is ever the bare word "create".
        path.write_text(
            "#!/bin/sh\n"
            'bundle=$PWD create="" previous=""\n'
            'for argument in "$@"; do\n'
            "    case $previous in --bundle | -b) bundle=$argument ;; esac\n"
            "    case $argument in create) create=1 ;; --bundle=*) bundle=${argument#--bundle=} ;; esac\n"
            "    previous=$argument\n"
            "done\n"
            'if [ -n "$create" ]; then\n'
            f'    cp "$bundle/config.json" "{specs}/.partial.$$"\n'
            f'    mv "{specs}/.partial.$$" "{specs}/$previous.json"\n'
            "fi\n"
            f'exec "{runc}" "$@"\n'
        )
        path.chmod(0o755)
        return cls(path, specs)

    def spec(self, container_id: str) -> Optional[dict[str, Any]]:
        """The OCI spec runc was given to create container_id, or None if the runtime never created it."""
        path = self.specs / f"{container_id}.json"
        if not path.exists():
            return None
        spec: dict[str, Any] = json.loads(path.read_text())
        return spec
