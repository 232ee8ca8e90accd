"""The real containerd binaries the tests hold lint to: Debian 12's 1.6, and 1.7 and 2.x unpacked by setup.sh."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = (
    Path("/usr/bin/containerd"),
    ROOT / ".tools/containerd-trixie/usr/bin/containerd",
    ROOT / ".tools/containerd-sid/usr/bin/containerd",
)
# A daemon's own mount namespace with a tmpfs on /run: its NRI socket and /run/containerd stay out of this machine's
# /run (its root, state and socket are under the test's directory). `start_daemon(..., under=PRIVATE_RUN)`.
PRIVATE_RUN = (
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "--",
    "sh",
    "-c",
    'mount -t tmpfs tmpfs /run && exec "$0" "$@"',
)
_VERSION = re.compile(r"\s(v?\d+\.\d+\.\d+)\S*")
_LOGFMT = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)')


@dataclass(frozen=True)
class Binary:
    path: Path
    version: str  # 1.7.24

    @property
    def series(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def ctr(self) -> Path:
        return self.path.parent / "ctr"

    def __str__(self) -> str:
        return f"containerd {self.version} ({self.path})"


@dataclass(frozen=True)
class Dump:
    """What `containerd --config FILE config dump` did with a file."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def refused(self) -> bool:
        return self.returncode != 0

    def unknown_keys(self) -> list[tuple[Optional[str], str]]:
        """(plugin or None for the top level, space-separated key path) of each "Ignoring unknown key" warning."""
        found = []
        for line in self.stderr.splitlines():
            if "Ignoring unknown key" not in line:
                continue
            fields = {k: v[1:-1].replace('\\"', '"') if v.startswith('"') else v for k, v in _LOGFMT.findall(line)}
            found.append((fields.get("plugin"), fields.get("key", "")))
        return found


def binaries() -> list[Binary]:
    """The three containerd releases; fails (never skips) when one is missing, as CI installs all three."""
    found = []
    missing = [str(path) for path in CANDIDATES if not os.access(path, os.X_OK)]
    if missing:
        pytest.fail(
            f"containerd binaries missing: {', '.join(missing)}; run `sh scripts/setup test` "
            "(Debian's containerd package and tests/containerd/setup.sh) as root"
        )
    for path in CANDIDATES:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
        match = _VERSION.search(out)
        assert match, f"cannot read the version of {path}: {out!r}"
        found.append(Binary(path, match.group(1).lstrip("v")))
    return found


def dump(binary: Binary, config: Path, cwd: Path) -> Dump:
    command = [str(binary.path), "--config", str(config), "config", "dump"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=cwd, env={"PATH": "/usr/bin:/bin"})
    return Dump(result.returncode, result.stdout, result.stderr)


def describe(binary: Binary, config: Path, result: Dump) -> str:
    command = shlex.join([str(binary.path), "--config", str(config), "config", "dump"])
    return f"{command} -> exit {result.returncode}: {result.stderr.strip()[-600:]}"


def start_daemon(
    containerd: Path, config: str, workdir: Path, *, under: Sequence[str] = (), timeout: float = 20
) -> subprocess.Popen[bytes]:
    """Start `containerd` on the `config` text with a root, state, socket (workdir/s) and log (workdir/log) of its own.

    It runs in a session of its own, under the `under` command line if given (a subreaper), with the release's own
    shim first on its PATH. Returns once the socket exists or the process has exited (check `poll()`)."""
    socket = workdir / "s"  # a socket path has 108 bytes at most: callers keep workdir short
    text = f'root = "{workdir}/root"\nstate = "{workdir}/state"\n' + config + f'\n[grpc]\n  address = "{socket}"\n'
    (workdir / "config.toml").write_text(text)
    with (workdir / "log").open("w") as out:
        process = subprocess.Popen(
            [*under, str(containerd), "--config", str(workdir / "config.toml")],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            start_new_session=True,
            env={**os.environ, "PATH": f"{containerd.parent}:/usr/sbin:/usr/bin:/sbin:/bin"},
        )
    deadline = time.monotonic() + timeout
    while process.poll() is None and not socket.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return process


def stop_daemon(process: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM to the daemon's session, SIGKILL when it does not exit in time."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
            return
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=timeout)
