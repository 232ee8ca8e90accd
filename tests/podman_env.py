"""A throw-away podman for tests: its own storage, configuration and busybox image, nothing shared with the host.

Everything podman writes goes under one temporary directory: containers.conf (cgroupfs, file events, no network,
runc, hooks_dir as the test asks), storage.conf (overlay under the directory), and a local image imported from a
busybox-static root filesystem (FACTS.md section 7). `podman run` leaves conmon processes behind that PID 1 on
these machines never reaps, so the runs happen in a child process that makes itself a child subreaper
(`run_isolated`) and reaps them before it exits.

Usage from a test: `run_isolated("hooks", cases)` runs `python -m tests.podman_env hooks IN OUT` in such a child,
which runs one `podman run` per case (a list of hooks directories per case) and returns what each did.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

IMAGE = "localhost/nvidia-oci-hook-test:latest"
APPLETS = ("sh", "true", "cat", "echo", "sleep")
# An error podman prints for a hooks.d file or directory its loader refuses (libpod setupOCIHooks).
HOOKS_SETUP_ERROR = "Error: setting up OCI Hooks: "


def become_subreaper() -> None:
    """Adopt orphaned descendants (the conmon that podman leaves behind) so that reap_children can wait for them."""
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def unmount_below(directory: Path) -> None:
    prefix = str(directory.resolve()) + "/"
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        points = [line.split()[4] for line in mountinfo]
    for point in reversed(points):
        if (point + "/").startswith(prefix):
            subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)


def reap_children(deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


class PodmanUnavailable(RuntimeError):
    """podman, busybox or root is missing: the runtime tests cannot run here."""


def need(binary: str) -> str:
    found = shutil.which(binary)
    if found is None:
        raise PodmanUnavailable(f"{binary!r} is not installed (Debian packages podman, runc, busybox-static)")
    return found


def busybox_rootfs(rootfs: Path, applets: Optional[Sequence[str]] = APPLETS) -> Path:
    """A root filesystem of busybox-static and its applets (None: every applet busybox lists) under /bin."""
    busybox = Path("/bin/busybox") if Path("/bin/busybox").is_file() else Path(need("busybox"))
    (rootfs / "bin").mkdir(parents=True)
    shutil.copy2(busybox, rootfs / "bin" / "busybox")
    if applets is None:
        listed = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True).stdout
        applets = [name for name in listed.split() if name != "busybox"]
    for applet in applets:
        (rootfs / "bin" / applet).symlink_to("busybox")
    return rootfs


class PodmanEnv:
    """podman with configuration and storage under directory; hooks_dirs change per run."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.podman = need("podman")
        need("runc")
        (directory / "storage.conf").write_text(
            f'[storage]\ndriver = "overlay"\nrunroot = "{directory}/runroot"\ngraphroot = "{directory}/graphroot"\n'
        )
        self.configure([])

    def configure(self, hooks_dirs: Sequence[str]) -> None:
        directory = self.directory
        listed = ", ".join(json.dumps(str(path)) for path in hooks_dirs)
        (directory / "containers.conf").write_text(
            "[containers]\n"
            'netns = "none"\n'
            'default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
            "[engine]\n"
            'cgroup_manager = "cgroupfs"\n'
            'events_logger = "file"\n'
            f'events_logfile_path = "{directory}/events.log"\n'
            'runtime = "runc"\n'
            f"hooks_dir = [{listed}]\n"
            f'tmp_dir = "{directory}/tmp"\n'
            f'volume_path = "{directory}/volumes"\n'
            "[network]\n"
            f'network_config_dir = "{directory}/net"\n'
        )

    @property
    def env(self) -> dict[str, str]:
        return dict(
            os.environ,
            CONTAINERS_CONF=str(self.directory / "containers.conf"),
            CONTAINERS_STORAGE_CONF=str(self.directory / "storage.conf"),
        )

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.podman, *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def import_busybox(self) -> None:
        rootfs = busybox_rootfs(self.directory / "rootfs")
        tarball = self.directory / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True, capture_output=True)
        result = self.run("import", "--change", 'CMD ["/bin/sh"]', str(tarball), IMAGE)
        if result.returncode != 0:
            raise PodmanUnavailable(f"podman import failed:\n{result.stdout}{result.stderr}")

    def close(self) -> None:
        self.run("rm", "--all", "--force")
        self.run("system", "reset", "--force")
        unmount_below(self.directory)


def run_hooks_cases(cases: list[dict[str, Any]], directory: Path) -> list[dict[str, Any]]:
    """For each case ({"hooks_dirs": [...], "marker": path or None, "args": podman arguments or None}), one
    podman command: by default `podman run --rm IMAGE /bin/true`."""
    env = PodmanEnv(directory)
    results = []
    try:
        env.import_busybox()
        for case in cases:
            env.configure(case["hooks_dirs"])
            marker = case.get("marker")
            if marker:
                Path(marker).unlink(missing_ok=True)
            result = env.run(*(case.get("args") or ["run", "--rm", "--pull=never", IMAGE, "/bin/true"]))
            results.append(
                {
                    "status": result.returncode,
                    "output": result.stdout + result.stderr,
                    "stdout": result.stdout,
                    "marker": Path(marker).read_text() if marker and Path(marker).exists() else None,
                }
            )
    finally:
        env.close()
    return results


CLONE_NEWNS = 0x00020000
SPEC_DIRS = ("/etc/cdi", "/run/cdi")  # /var/run is /run


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def run_cdi_cases(cases: list[dict[str, Any]], directory: Path) -> list[dict[str, Any]]:
    """For each case ({"reason", "etc_cdi", "run_cdi", "name"}), with the two directories bound over /etc/cdi and
    /var/run/cdi in this process's own mount namespace: `podman run --device NAME`, and `cdi resolve` of the
    same name as podman, both seeing exactly those specs."""
    if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNS) != 0:
        raise PodmanUnavailable(f"unshare(CLONE_NEWNS): errno {ctypes.get_errno()}")
    _mount("--make-rprivate", "/")
    created = [path for path in SPEC_DIRS if not os.path.isdir(path)]
    for path in created:
        os.makedirs(path)
    env = PodmanEnv(directory)
    results = []
    try:
        env.import_busybox()
        env.configure([])
        for case in cases:
            _mount("--bind", case["etc_cdi"], "/etc/cdi")
            _mount("--bind", case["run_cdi"], "/run/cdi")
            try:
                ran = env.run(
                    "run", "--rm", "--pull=never", "--device", case["name"], IMAGE, "sh", "-c", "echo env=$GPU_FROM_CDI"
                )
                resolved = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "nvidia_oci_hook",
                        "cdi",
                        "resolve",
                        "--engine",
                        "podman",
                        "--format",
                        "json",
                        case["name"],
                    ],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
            finally:
                subprocess.run(["umount", "/etc/cdi", "/run/cdi"], check=False, capture_output=True)
            results.append(
                {
                    "reason": case["reason"],
                    "status": ran.returncode,
                    "output": ran.stdout + ran.stderr,
                    "stdout": ran.stdout,
                    "resolve_status": resolved.returncode,
                    "resolve": json.loads(resolved.stdout) if resolved.returncode in (0, 1) else resolved.stderr,
                }
            )
    finally:
        env.close()
        for path in created:
            os.rmdir(path)
    return results


def run_image_cases(cases: list[dict[str, Any]], directory: Path) -> list[dict[str, Any]]:
    """For each case, load an image and run it as a DaemonSet would, then stop it: {"archive": a docker-archive,
    "tag", "run": podman run arguments after the image is named (mounts, security options), "image_args": the
    container's command, "wait_for": a file the container writes, "timeout"}. Returns the load's and the run's
    output, the time until wait_for appeared, and the container's exit status after `podman stop`."""
    env = PodmanEnv(directory)
    results = []
    try:
        env.configure([])
        for case in cases:
            loaded = env.run("load", "--input", case["archive"], timeout=300)
            result: dict[str, Any] = {
                "load": loaded.returncode if case["tag"] in loaded.stdout else f"{loaded.returncode}, no {case['tag']}",
                "load_output": (loaded.stdout + loaded.stderr)[-4000:],
            }
            if result["load"] == 0:
                started = env.run("run", "-d", "--name", "doctor", *case["run"], case["tag"], *case["image_args"])
                result["run"] = started.returncode
                result["run_output"] = started.stdout + started.stderr
                deadline = time.monotonic() + case["timeout"]
                began = time.monotonic()
                while started.returncode == 0 and not Path(case["wait_for"]).exists() and time.monotonic() < deadline:
                    time.sleep(0.1)
                result["appeared_after"] = time.monotonic() - began if Path(case["wait_for"]).exists() else None
                stopped = time.monotonic()
                env.run("stop", "-t", "10", "doctor", timeout=60)
                result["stop_seconds"] = time.monotonic() - stopped
                inspected = env.run("inspect", "--format", "{{.State.ExitCode}}", "doctor")
                result["exit_code"] = inspected.stdout.strip()
                result["logs"] = env.run("logs", "doctor").stderr[-2000:]
                env.run("rm", "--force", "doctor")
            results.append(result)
    finally:
        env.close()
    return results


MODES = {"hooks": run_hooks_cases, "cdi": run_cdi_cases, "image": run_image_cases}


def run_isolated(mode: str, cases: list[dict[str, Any]], timeout: float = 300) -> list[dict[str, Any]]:
    """Run a mode of this module in a child subreaper process; raises PodmanUnavailable when it cannot run."""
    if os.geteuid() != 0:
        raise PodmanUnavailable("podman tests need root (overlay storage, cgroupfs)")
    need("podman")
    with tempfile.TemporaryDirectory(prefix="podman-env-") as directory:
        request = Path(directory) / "cases.json"
        response = Path(directory) / "results.json"
        request.write_text(json.dumps(cases))
        root = Path(__file__).resolve().parents[1]
        result = subprocess.run(
            [sys.executable, "-m", "tests.podman_env", mode, str(request), str(response)],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0 or not response.exists():
            raise PodmanUnavailable(f"tests.podman_env {mode} failed:\n{result.stdout}\n{result.stderr}")
        results: list[dict[str, Any]] = json.loads(response.read_text())
        return results


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[1] not in MODES:
        print(f"usage: {argv[0]} {'|'.join(MODES)} CASES.json RESULTS.json", file=sys.stderr)
        return 2
    become_subreaper()
    cases = json.loads(Path(argv[2]).read_text())
    with tempfile.TemporaryDirectory(prefix="podman-env-") as directory:
        try:
            results = MODES[argv[1]](cases, Path(directory))
        finally:
            reap_children(deadline=time.monotonic() + 10)
    Path(argv[3]).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
