"""The containerd daemon itself, for what `config dump` cannot show: whether the CRI plugin loads, and the
start-up failures that only the daemon has.

Each config runs in a throwaway daemon (its own root, state and socket under /tmp), asked with `ctr plugins ls`
which plugins loaded. CTD110 and CTD115 name the releases whose CRI plugin fails to load; the daemon of each
release must agree, on every corpus file those rules report and on good files as controls.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from nvidia_oci_hook.formats.tomltext import parse_toml
from nvidia_oci_hook.rules.containerd.cri_plugin import cri_plugin_failures
from tests.containerd.corpus import CORPUS, entries, lint_file
from tests.containerd.real import PRIVATE_RUN, Binary, binaries, dump, start_daemon, stop_daemon
from tests.containerd.test_real_containerd import reading_series
from tests.helpers import FakeHost


def lint_toml_text(text: str, host_root: Path) -> set[str]:
    config = host_root.parent / "lint-config.toml"
    config.write_text(text)
    return {f.code for f in lint_file(config, host_root=host_root, offline=False)}


pytestmark = [pytest.mark.runtime, pytest.mark.root]

# Good files without root, state or grpc of their own (the daemon gets throwaway ones).
CONTROLS = ("good/v2-minimal.toml", "good/v2-nvidia-cdi.toml", "good/v3-nvidia.toml", "good/v3-snapshotter-proxy.toml")
CRI_PLUGINS = {
    ("io.containerd.grpc.v1", "cri"),
    ("io.containerd.cri.v1", "runtime"),
    ("io.containerd.cri.v1", "images"),
}


@dataclass
class Daemon:
    exit_code: Optional[int]  # None: it was running, and was stopped
    log: str
    plugins: dict[tuple[str, str], str]  # (type, id) -> status

    def cri_loaded(self) -> bool:
        found = {key: status for key, status in self.plugins.items() if key in CRI_PLUGINS}
        return bool(found) and all(status == "ok" for status in found.values())


def run_daemon(
    binary: Binary, config: Path, settle: float = 0.3, then: Optional[Callable[[Path, list[str]], Any]] = None
) -> Daemon:
    """Start containerd on `config` (with root, state and socket of its own), list its plugins, call
    `then(socket, enter)` if given (enter: the command prefix that runs a program in the daemon's mount
    namespace), stop it. The release's own shim comes first on the daemon's PATH."""
    workdir = Path(tempfile.mkdtemp(prefix="ctd", dir="/tmp"))
    socket = workdir / "s"
    log = workdir / "log"
    try:
        process = start_daemon(binary.path, config.read_text(), workdir, under=PRIVATE_RUN)
        if process.poll() is not None:
            return Daemon(process.returncode, log.read_text(), {})
        time.sleep(settle)
        listed = subprocess.run(
            [str(binary.ctr), "--address", str(socket), "plugins", "ls"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        plugins = {}
        for line in listed.stdout.splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 3:
                plugins[(fields[0], fields[1])] = fields[-1]
        if then is not None:
            # A client that makes fifos under /run (ctr run) must see the daemon's own /run.
            then(socket, ["nsenter", "--target", str(process.pid), "--mount", "--"])
        stop_daemon(process)
        return Daemon(None, log.read_text(), plugins)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def releases() -> list[Binary]:
    return binaries()


def _claimed() -> list[str]:
    """Corpus files on which lint says the CRI plugin fails to load (CTD110, CTD115, CTD120), and the controls."""
    names = [e.id for e in entries() if {f.code for f in lint_file(e.path)} & {"CTD110", "CTD115", "CTD120"}]
    return sorted(set(names) | set(CONTROLS))


@pytest.mark.parametrize("name", _claimed())
def test_cri_plugin_loads_exactly_where_lint_says(name: str, releases: list[Binary], as_root: None) -> None:
    config = CORPUS / name
    parsed = parse_toml(config.read_bytes())
    assert parsed.ok
    failing = cri_plugin_failures(parsed.value)
    if name in CONTROLS:
        assert not failing, f"lint claims a CRI failure on the control {name}"
    entry = next(e for e in entries() if e.id == name)
    checked = 0
    for binary in releases:
        if binary.series not in reading_series(entry) or dump(binary, config, Path("/tmp")).refused:
            continue  # not a file for this release, or one it refuses outright (test_real_containerd)
        daemon = run_daemon(binary, config)
        assert daemon.exit_code is None, f"containerd {binary.version} exited {daemon.exit_code}: {daemon.log[-800:]}"
        expected = binary.series not in failing
        assert daemon.cri_loaded() == expected, (
            f"containerd {binary.version} on {name}: CRI plugins {daemon.plugins}, lint says it fails on "
            f"{sorted(failing)}\n{daemon.log[-1500:]}"
        )
        checked += 1
    assert checked, f"no release ran {name}"


def test_a_snapshotter_the_node_skips_leaves_containerd_without_cri(releases: list[Binary], as_root: None) -> None:
    """CTD121: a built-in snapshotter that loads only on some nodes. Where this machine's daemon skips it, the CRI
    plugin fails to load with containerd's words; where it loads, CRI does too."""
    config = CORPUS / "bad/v2-snapshotter-skipped.toml"
    (finding,) = [f for f in lint_file(config) if f.code == "CTD121"]
    checked = 0
    for binary in releases:
        if binary.series not in ("1.6", "1.7"):
            continue  # 2.x ignores a version 2 file's containerd.snapshotter (CTD120's message says so)
        daemon = run_daemon(binary, config)
        loaded = daemon.plugins.get(("io.containerd.snapshotter.v1", "btrfs")) == "ok"
        assert daemon.cri_loaded() == loaded, (binary.version, daemon.plugins, daemon.log[-1500:])
        if not loaded:
            assert 'failed to find snapshotter \\"btrfs\\"' in daemon.log, daemon.log[-1500:]
            assert 'failed to find snapshotter "btrfs"' in finding.message
        checked += 1
    assert checked == 2


def test_negative_version_crashes_containerd_2(releases: list[Binary], as_root: None) -> None:
    """CTD002: `config dump` accepts version = -1, the 2.x daemon panics at start-up."""
    config = CORPUS / "bad/version-negative.toml"
    assert "CTD002" in {f.code for f in lint_file(config)}
    modern = releases[2]
    assert not dump(modern, config, Path("/tmp")).refused
    daemon = run_daemon(modern, config)
    assert daemon.exit_code not in (None, 0) and "panic" in daemon.log, daemon.log[-800:]


def test_missing_import_stops_every_daemon(releases: list[Binary], as_root: None) -> None:
    """CTD005: a missing import stops containerd, although 2.x's `config dump` skips it."""
    config = CORPUS / "bad/v2-import-missing.toml"
    imported = "/etc/containerd/conf.d/99-nvidia.toml"
    assert imported in config.read_text() and not os.path.exists(imported), f"{imported} exists on this machine"
    assert "CTD005" in {f.code for f in lint_file(config, offline=False)}
    for binary in releases:
        daemon = run_daemon(binary, config)
        assert daemon.exit_code not in (None, 0), f"containerd {binary.version} started: {daemon.log[-800:]}"
        assert "no such file or directory" in daemon.log


def test_missing_binary_name_fails_every_container(
    releases: list[Binary], as_root: None, tmp_path: Path, fake_host: FakeHost
) -> None:
    """CTD111: the runc shim of every release fails a container whose BinaryName is missing or not executable
    (`ctr run --runc-binary` sets the same runc option that a CRI runtime's options.BinaryName sets)."""
    rootfs = tmp_path / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    shutil.copy("/bin/busybox", rootfs / "bin/busybox")
    (rootfs / "bin/true").symlink_to("busybox")
    not_executable = tmp_path / "runc-copy"
    not_executable.write_text("")
    cases = {
        "/usr/bin/nvidia-container-runtime": "fork/exec /usr/bin/nvidia-container-runtime: no such file or directory",
        "nvidia-container-runtime": 'exec: "nvidia-container-runtime": executable file not found in $PATH',
        str(not_executable): f"fork/exec {not_executable}: permission denied",
    }
    for binary_name in cases:
        config = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
        found = lint_toml_text(config + f'BinaryName = "{binary_name}"\n', fake_host.root)
        assert "CTD111" in found, binary_name
    config = tmp_path / "config.toml"
    config.write_text("version = 2\n")
    for binary in releases:
        outcomes: dict[str, subprocess.CompletedProcess[str]] = {}

        def run_containers(
            socket: Path, enter: list[str], binary: Binary = binary, outcomes: dict[str, Any] = outcomes
        ) -> None:
            for index, runc in enumerate([*cases, "runc"]):
                command = [*enter, str(binary.ctr), "--address", str(socket), "run", "--rm", "--rootfs"]
                command += ["--runc-binary", runc, str(rootfs), f"t{index}", "/bin/true"]
                outcomes[runc] = subprocess.run(command, capture_output=True, text=True, timeout=60)

        daemon = run_daemon(binary, config, then=run_containers)
        assert daemon.exit_code is None, daemon.log[-800:]
        assert outcomes["runc"].returncode == 0, f"control container failed: {outcomes['runc'].stderr}"
        for runc, text in cases.items():
            result = outcomes[runc]
            assert result.returncode != 0 and text in result.stderr, f"{binary}: {runc}: {result.stderr}"
