"""A throwaway cri-o, the real one from ../shared/peers/bin, driven through CRI like tests/e2e/cri.py's containerd.

`CrioDaemon.start(...)` writes a configuration that keeps everything cri-o writes under one short directory in
/tmp (storage, run root, logs, version and shutdown files, socket, exits, attach sockets, namespaces, each
handler's runtime root, CNI directory, a signature policy that accepts everything), as ../shared/peers/README.md
says cri-o runs on these machines: cgroupfs, `conmon_cgroup = "pod"`, no metrics, no NRI, runc as the default
handler. busybox (every applet) is imported into the same containers/storage with podman, under the name
tests/e2e/cri.py's run_pod_container asks for; it is also the pause image, which cri-o starts only for a pod-level
PID namespace (this harness's pods never ask for one: the infra container fails here).

cri-o runs in a mount namespace of its own (a slave of the host's): the overlay mounts of its containers never
reach the host's table, and leave with the namespace. With `node_root`, that namespace also shows the fake node's
files at the node's paths (its usr/local/bin, usr/share/containers, etc/containers, run laid over the host's,
writes going into the directory), and the configuration sits where a node keeps it (node_root/etc/crio/crio.conf,
crio.conf.d beside it): what `nvidia-oci-hook configure --host-root` and `lint --node --host-root` read is what the
daemon reads. catatonit is its parent and a child subreaper, so the conmons that daemonize are reaped at once.

`close()` removes the pods, kills the conmons (found by the directory their arguments name: with no infra
container they stay in cri-o's own cgroup) and every process in the pods' cgroup parent, lets runc delete
what remains in each handler's root, stops the daemon (SIGTERM to its session, then SIGKILL), unmounts what is
left under the directory, removes the cgroups and the directory.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from tests.containerd.real import stop_daemon
from tests.e2e.cri import (
    BUSYBOX_IMAGE,
    CRIClient,
    CRIUnavailable,
    StrPath,
    _kill_cgroup,
    _remove_cgroup,
    _toml_list,
    _wait_gone,
    cri,
    grpc,
)
from tests.podman_env import busybox_rootfs, unmount_below

REPOSITORY = Path(__file__).resolve().parents[2]
PEERS = REPOSITORY.parent / "shared/peers/bin"
CRIO = PEERS / "crio"
PINNS = PEERS / "pinns"
RUNC = Path("/usr/sbin/runc")
CONMON = Path("/usr/bin/conmon")
HOST_TOOLS = "/usr/bin:/usr/sbin:/bin:/sbin"
# The node's directories a node root can add files to, as the daemon sees them (each exists on a Debian host
# with podman installed; /run takes the handlers' runtime roots that configure names).
NODE_OVERLAYS = ("usr/local/bin", "usr/share/containers", "etc/containers", "run")
# Capability numbers, as the kernel's /proc/PID/status CapBnd bits count them (linux/capability.h).
CAPABILITIES = (  # noqa: SIM905 (the kernel's order, 0 to 40, reads best as one run of names)
    "CAP_CHOWN CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH CAP_FOWNER CAP_FSETID CAP_KILL CAP_SETGID CAP_SETUID CAP_SETPCAP "
    "CAP_LINUX_IMMUTABLE CAP_NET_BIND_SERVICE CAP_NET_BROADCAST CAP_NET_ADMIN CAP_NET_RAW CAP_IPC_LOCK CAP_IPC_OWNER "
    "CAP_SYS_MODULE CAP_SYS_RAWIO CAP_SYS_CHROOT CAP_SYS_PTRACE CAP_SYS_PACCT CAP_SYS_ADMIN CAP_SYS_BOOT CAP_SYS_NICE "
    "CAP_SYS_RESOURCE CAP_SYS_TIME CAP_SYS_TTY_CONFIG CAP_MKNOD CAP_LEASE CAP_AUDIT_WRITE CAP_AUDIT_CONTROL "
    "CAP_SETFCAP CAP_MAC_OVERRIDE CAP_MAC_ADMIN CAP_SYSLOG CAP_WAKE_ALARM CAP_BLOCK_SUSPEND CAP_AUDIT_READ "
    "CAP_PERFMON CAP_BPF CAP_CHECKPOINT_RESTORE"
).split()


class CrioUnavailable(CRIUnavailable):
    """cri-o could not be started or did not come up; `log` is what it wrote, `returncode` its exit status when it
    exited (None when it timed out or never ran)."""

    def __init__(self, message: str, log: str = "", returncode: Optional[int] = None) -> None:
        super().__init__(message + (f":\n{log[-3000:]}" if log else ""))
        self.log = log
        self.returncode = returncode


def skip_reason() -> Optional[str]:
    """Why the cri-o tests cannot run here at all, in one line; None when they can."""
    if not CRIO.is_file():
        return f"no cri-o at {CRIO} (../shared/peers is absent)"
    if os.geteuid() != 0:
        return "cri-o needs root (mounts, cgroups)"
    return None


def _missing_tool() -> Optional[str]:
    for tool in ("conmon", "runc", "podman", "catatonit", "unshare"):
        if shutil.which(tool, path=HOST_TOOLS) is None:
            return f"{tool} is not installed (scripts/setup test installs it)"
    return None


def missing_capabilities() -> list[str]:
    """The capabilities cri-o grants a privileged container that this machine's bounding set lacks."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapBnd:"):
            bounding = int(line.split()[1], 16)
            return [name for number, name in enumerate(CAPABILITIES) if not bounding >> number & 1]
    return []


def bounded_runc(directory: Path, runc: StrPath = RUNC) -> Path:
    """A runtime that execs runc after taking out of config.json, on `create`, the capabilities this machine's
    bounding set lacks: cri-o grants a privileged container every capability, and runc refuses ("unable to apply
    caps") the ones the sandbox it runs in cannot give. Nothing else changes."""
    path = directory / "bounded-runc"
    missing = missing_capabilities()
    edit = (
        "import json, sys\n"
        "path = sys.argv[1]\n"
        "with open(path) as f: spec = json.load(f)\n"
        f"missing = set({missing!r})\n"
        "caps = spec.get('process', {}).get('capabilities', {})\n"
        "for key, names in caps.items(): caps[key] = [name for name in names if name not in missing]\n"
        "with open(path, 'w') as f: json.dump(spec, f, indent='\\t')\n"
    )
    directory.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        'bundle=$PWD create="" previous=""\n'
        'for argument in "$@"; do\n'
        "    case $previous in --bundle | -b) bundle=$argument ;; esac\n"
        "    case $argument in create) create=1 ;; --bundle=*) bundle=${argument#--bundle=} ;; esac\n"
        "    previous=$argument\n"
        "done\n"
        + (f'[ -z "$create" ] || /usr/bin/python3 -I -c "{edit}" "$bundle/config.json" || exit 1\n' if missing else "")
        + f'exec "{runc}" "$@"\n'
    )
    path.chmod(0o755)
    return path


def crio_config(
    workdir: Path,
    *,
    runtimes: Mapping[str, StrPath],
    hooks_dirs: Optional[Sequence[StrPath]],
    cdi_spec_dirs: Optional[Sequence[StrPath]],
) -> str:
    """cri-o's main configuration: every path it writes under workdir. hooks_dirs and cdi_spec_dirs None leave
    cri-o's defaults (/usr/share/containers/oci/hooks.d; /etc/cdi, /var/run/cdi)."""
    lines = [
        "[crio]",
        f'root = "{workdir}/root"',
        f'runroot = "{workdir}/runroot"',
        'storage_driver = "overlay"',
        f'log_dir = "{workdir}/pods"',
        f'version_file = "{workdir}/version"',
        f'version_file_persist = "{workdir}/version-persist"',
        f'clean_shutdown_file = "{workdir}/clean.shutdown"',
        "",
        "[crio.api]",
        f'listen = "{workdir}/s"',
        "",
        "[crio.runtime]",
        'default_runtime = "runc"',
        'cgroup_manager = "cgroupfs"',
        'conmon_cgroup = "pod"',
        f'conmon = "{CONMON}"',
        f'pinns_path = "{PINNS}"',
        f'container_exits_dir = "{workdir}/exits"',
        f'container_attach_socket_dir = "{workdir}/attach"',
        f'namespaces_dir = "{workdir}/ns"',
    ]
    if hooks_dirs is not None:
        lines.append(f"hooks_dir = {_toml_list(hooks_dirs)}")
    if cdi_spec_dirs is not None:
        lines.append(f"cdi_spec_dirs = {_toml_list(cdi_spec_dirs)}")
    for name, path in {"runc": RUNC, **runtimes}.items():
        lines += [
            "",
            f"[crio.runtime.runtimes.{name}]",
            f'runtime_path = "{path}"',
            'runtime_type = "oci"',
            f'runtime_root = "{workdir}/runtimes/{name}"',
        ]
    lines += [
        "",
        "[crio.image]",
        f'pause_image = "{BUSYBOX_IMAGE}"',
        'pause_command = "/bin/sleep"',
        f'signature_policy = "{workdir}/policy.json"',
        "",
        # An empty CNI directory: only host-network pods start (a pod network hangs in RunPodSandbox).
        "[crio.network]",
        f'network_dir = "{workdir}/cni/net.d"',
        f'plugin_dirs = ["{workdir}/cni/bin"]',
        "",
        "[crio.metrics]",
        "enable_metrics = false",
        "",
        "[crio.nri]",
        "enable_nri = false",
        "",
    ]
    return "\n".join(lines)


def build_trees() -> list[str]:
    """Directories of this machine that hold no device node and nothing cri-o runs or reads: the home directory
    (pyenv's interpreters, caches), the repository's virtual environments, tools and git store, and pytest's
    temporary directories (the Debian roots and daemon states of every test running beside it; a caller keeps
    what cri-o needs elsewhere). cri-o walks the whole filesystem for a device whose host path is empty (it joins
    "" to /); with these out of its view the walk is that of a node's filesystem, not of a build machine's hundreds
    of thousands of files."""
    home = Path.home()
    trees = [home] if CRIO.resolve().parts[: len(home.parts)] != home.parts else []
    trees += [REPOSITORY / name for name in (".git", ".tools", ".venv", ".venv-py39", ".venv-newest")]
    trees.append(Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}")
    return [str(tree) for tree in trees if tree.is_dir() and not tree.is_symlink()]


class CrioDaemon(CRIClient):
    """A running cri-o and a CRI v1 client connected to it; use as a context manager or call close()."""

    # A pod-level PID namespace would make cri-o start an infra container, which this machine refuses (cri-o
    # gives it oomScoreAdj -998, which needs CAP_SYS_RESOURCE).
    namespace_options = cri.NamespaceOption(network=cri.NODE, pid=cri.CONTAINER)
    unavailable = CrioUnavailable

    def __init__(self, workdir: Path, node_root: Optional[Path], hidden: Sequence[str] = ()) -> None:
        super().__init__(workdir)
        self.node_root = node_root
        self.hidden = hidden
        etc = node_root / "etc/crio" if node_root is not None else workdir
        self.config = etc / "crio.conf"
        self.config_dir = etc / "crio.conf.d"

    @classmethod
    def prepare(
        cls,
        *,
        runtimes: Optional[Mapping[str, StrPath]] = None,
        hooks_dirs: Optional[Sequence[StrPath]] = (),
        cdi_spec_dirs: Optional[Sequence[StrPath]] = (),
        node_root: Optional[Path] = None,
        hidden: Sequence[str] = (),
    ) -> CrioDaemon:
        """The directory, configuration and image, without starting cri-o: a caller may add drop-ins to
        `config_dir` (or run `configure --host-root node_root`) before `run()`. runtimes: handler name -> the
        runtime's path (runc's own entry can be replaced); empty hooks_dirs and cdi_spec_dirs are empty
        directories of the daemon's, None cri-o's defaults. hidden: directories cri-o sees empty (see
        `build_trees`)."""
        reason = skip_reason() or _missing_tool()
        if reason is not None:
            raise CrioUnavailable(reason)
        daemon = cls(Path(tempfile.mkdtemp(prefix="crio", dir="/tmp")), node_root, hidden)  # short: socket paths
        try:
            workdir = daemon.workdir
            for name in ("pods", "cni/net.d", "cni/bin", "logs"):
                (workdir / name).mkdir(parents=True)
            if hooks_dirs is not None and not hooks_dirs:
                hooks_dirs = [workdir / "hooks"]
                (workdir / "hooks").mkdir()
            if cdi_spec_dirs is not None and not cdi_spec_dirs:
                cdi_spec_dirs = [workdir / "cdi"]
                (workdir / "cdi").mkdir()
            (workdir / "policy.json").write_text('{"default": [{"type": "insecureAcceptAnything"}]}\n')
            daemon.config_dir.mkdir(parents=True, exist_ok=True)
            daemon.config.write_text(
                crio_config(workdir, runtimes=runtimes or {}, hooks_dirs=hooks_dirs, cdi_spec_dirs=cdi_spec_dirs)
            )
            daemon._import_busybox()
        except BaseException:
            daemon.close()
            raise
        return daemon

    @classmethod
    def start(cls, *, timeout: float = 30, **options: Any) -> CrioDaemon:
        """prepare(**options), then run(); raises CrioUnavailable (after cleaning up)."""
        daemon = cls.prepare(**options)
        try:
            daemon.run(timeout)
        except BaseException:
            daemon.close()
            raise
        return daemon

    def _import_busybox(self) -> None:
        rootfs = busybox_rootfs(self.workdir / "busybox", applets=None)
        # runc creates missing mount points, but a shell in the container expects a writable /tmp.
        for name in ("dev", "proc", "sys", "etc", "tmp", "root"):
            (rootfs / name).mkdir(exist_ok=True)
        (rootfs / "tmp").chmod(0o1777)
        tarball = self.workdir / "busybox.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True, capture_output=True)
        storage = ["--root", str(self.workdir / "root"), "--runroot", str(self.workdir / "runroot")]
        options = ["--storage-driver", "overlay", "--events-backend", "none", "--tmpdir", str(self.workdir / "podman")]
        imported = subprocess.run(
            ["podman", *storage, *options, "import", "--change", 'CMD ["/bin/sh"]', str(tarball), BUSYBOX_IMAGE],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if imported.returncode != 0:
            raise CrioUnavailable(f"podman import failed: {imported.stdout}{imported.stderr}")
        tarball.unlink()
        shutil.rmtree(rootfs)

    def _namespace_script(self) -> str:
        """The shell that sets up cri-o's mount namespace, then execs its arguments."""
        lines = ["set -e"]
        lines += [f"mount -t tmpfs -o ro,size=4k,mode=0755 tmpfs {shlex.quote(path)}" for path in self.hidden]
        if self.node_root is not None:
            for relative in NODE_OVERLAYS:
                lower, upper = self.node_root / relative, self.workdir / "node-upper" / relative
                work = self.workdir / "node-work" / relative
                for directory in (lower, upper, work):
                    directory.mkdir(parents=True, exist_ok=True)
                lines.append(
                    f"mount -t overlay overlay -o lowerdir={lower}:/{relative},upperdir={upper},workdir={work} "
                    f"/{relative}"
                )
        return "\n".join([*lines, 'exec "$@"'])

    def run(self, timeout: float = 30) -> None:
        """Start cri-o and wait until it answers and lists the image; raises CrioUnavailable when it exits
        first (its log and exit status in the exception) or does not answer in time."""
        catatonit = shutil.which("catatonit", path=HOST_TOOLS)
        assert catatonit is not None
        command = ["unshare", "--mount", "--propagation", "slave", "/bin/sh", "-c", self._namespace_script(), "sh"]
        command += [catatonit, "--", str(CRIO), "--config", str(self.config), "--config-dir", str(self.config_dir)]
        deadline = time.monotonic() + timeout
        with (self.workdir / "log").open("w") as out:
            self.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
                env={**os.environ, "PATH": f"{HOST_TOOLS}:/usr/local/sbin:/usr/local/bin"},
            )
        while self.process.poll() is None and not self.socket.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self.socket.exists():
            returncode = self.process.poll()
            said = "did not start" if returncode is None else f"exited with status {returncode}"
            raise CrioUnavailable(f"cri-o {said}", self.log(), returncode)
        self.connect()
        last: object = None
        while True:
            try:
                status = self.images.ImageStatus(
                    cri.ImageStatusRequest(image=cri.ImageSpec(image=BUSYBOX_IMAGE)), timeout=5
                )
                if status.image.id:
                    return
                last = f"{BUSYBOX_IMAGE} is not listed"
            except grpc.RpcError as error:
                last = error
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise CrioUnavailable(f"cri-o did not answer ({last})", self.log(), self.process.poll())
            time.sleep(0.05)

    @property
    def pid(self) -> Optional[int]:
        """cri-o's own pid (catatonit's child), while it runs."""
        if self.process is None or self.process.poll() is not None:
            return None
        with contextlib.suppress(OSError):
            children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
            return int(children[0]) if children else None
        return None

    def conmons(self) -> list[int]:
        """The conmons this daemon started: each is given a path under the directory (its exit directory)."""
        found = []
        marker = f"{self.workdir}/".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[0].endswith(b"conmon") and any(marker in argument for argument in argv):
                found.append(int(entry.name))
        return found

    def runtime_roots(self) -> list[Path]:
        """Each handler's runc state root: the daemon's own, and those under the node root's /run."""
        roots = [path for path in (self.workdir / "runtimes").glob("*") if path.is_dir()]
        return roots + [path for path in (self.workdir / "node-upper/run").glob("*") if path.is_dir()]

    def close(self) -> None:
        """Remove every pod, kill what remains of them, stop the daemon, unmount and delete the directory."""
        self.remove_pods()
        # While catatonit runs: it reaps what is killed here (the conmons daemonized into its care).
        killed = []
        for pid in self.conmons():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        killed += _kill_cgroup(self.cgroup_parent)
        _wait_gone(killed)
        for root in self.runtime_roots():
            for state in root.iterdir():
                subprocess.run(
                    [str(RUNC), "--root", str(root), "delete", "--force", state.name],
                    capture_output=True,
                    timeout=30,
                    check=False,
                )
        self.disconnect()
        if self.process is not None:
            stop_daemon(self.process)
        unmount_below(self.workdir)
        _remove_cgroup(self.cgroup_parent)
        shutil.rmtree(self.workdir, ignore_errors=True)
