"""Node benchmark: `lint --node` and `doctor` on a node root, this tree against another revision of it.

Usage: python benchmarks/bench_node.py [--runs N] [--against REV] [--host-root DIR]

Every case is a separate process started as the launchers start the tool's interpreter (`python3 -I -S`, the
package found through PYTHONPATH), timed wall-clock and interleaved run by run with the others. The floor is
that interpreter doing nothing. The node is built once in a temporary directory, laid out as a GPU node whose
driver runs in the GPU Operator's container (seed 003's state): cri-o and containerd configurations with
drop-ins, CDI specs, hooks directories, validation markers, stray device nodes where mknod is allowed, and a
dpkg database. `--host-root /` times this machine as the node.
REV (default HEAD) is exported with `git archive` into a temporary directory and run from there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_runtime import cdi_spec_yaml, driver_root, gpu_config
from timing import Case, Section, interleaved_medians, ratio_row, render_text

REPO = Path(__file__).resolve().parent.parent
PYTHON = "/usr/bin/python3"

CRIO_CONF = """\
[crio.runtime]
default_runtime = "runc"
hooks_dir = ["/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d"]

[crio.runtime.runtimes.runc]
runtime_path = "/usr/bin/runc"
runtime_root = "/run/runc"
"""
CRIO_DROP_IN = """\
[crio.runtime.runtimes.nvidia]
runtime_path = "/usr/bin/nvidia-container-runtime"
runtime_type = "oci"
"""
CONTAINERD = """\
version = 2
imports = ["/etc/containerd/conf.d/*.toml"]

[plugins."io.containerd.grpc.v1.cri"]
enable_cdi = true
cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
"""
CONTAINERD_DROP_IN = """\
version = 2

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
BinaryName = "/usr/bin/nvidia-container-runtime"
"""
HOOK = """\
{"version": "1.0.0", "hook": {"path": "/usr/bin/nvidia-container-toolkit", "args": ["nvidia-container-toolkit",
"prestart"]}, "when": {"always": true}, "stages": ["prestart"]}
"""
LIB = "/usr/lib/x86_64-linux-gnu"
DRIVER = "/run/nvidia/driver"


def cdi_spec(gpus: int) -> str:
    devices = "".join(
        f'  - name: "{index}"\n    containerEdits:\n      deviceNodes:\n'
        f"        - path: /dev/nvidia{index}\n          hostPath: {DRIVER}/dev/nvidia{index}\n"
        for index in range(gpus)
    )
    return (
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n" + devices + "containerEdits:\n  deviceNodes:\n"
        f"    - path: /dev/nvidiactl\n      hostPath: {DRIVER}/dev/nvidiactl\n  mounts:\n"
        f"    - hostPath: {DRIVER}{LIB}/libcuda.so.1\n      containerPath: {LIB}/libcuda.so.1\n"
        "      options: [ro, nosuid, nodev, bind]\n"
    )


def build_node(root: Path, gpus: int = 8) -> None:
    def write(path: str, text: str = "", mode: int = 0o644) -> None:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)

    def device(path: str, minor: int) -> None:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(PermissionError):  # without root: the node simply has no such node
            os.mknod(target, 0o666 | 0o020000, os.makedev(195, minor))

    write("/etc/crio/crio.conf", CRIO_CONF)
    write("/etc/crio/crio.conf.d/10-nvidia.conf", CRIO_DROP_IN)
    write("/etc/containerd/config.toml", CONTAINERD)
    write("/etc/containerd/conf.d/99-nvidia.toml", CONTAINERD_DROP_IN)
    write("/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json", HOOK)
    write("/etc/containers/oci/hooks.d/nvidia.json", HOOK)
    # /var/run a directory of its own, not the real nodes' link to /run: a revision that followed that link out
    # of the root would read this machine's /run/cdi and do less work, and the comparison would flatter it.
    write("/var/run/cdi/nvidia.yaml", cdi_spec(gpus))
    write("/etc/cdi/nvidia-mig.yaml", cdi_spec(2).replace("nvidia.com/gpu", "nvidia.com/mig"))
    write(
        "/var/lib/dpkg/status",
        "".join(
            f"Package: {name}\nStatus: install ok installed\nVersion: {version}\n\n"
            for name, version in (("containerd", "1.7.24~ds1-1"), ("cri-o", "1.30.3-1"), ("runc", "1.1.5+ds1-1"))
        ),
    )
    for program in ("nvidia-container-runtime", "nvidia-container-toolkit", "runc"):
        write(f"/usr/bin/{program}", "#!/bin/sh\n", 0o755)
    write(f"{DRIVER}/usr/bin/nvidia-smi", "#!/bin/sh\n", 0o755)
    # The driver's files as it installs them: named with its version, the .so.1 links ldconfig makes to them.
    for library in ("libnvidia-ml.so", "libcuda.so", "libnvidia-ptxjitcompiler.so"):
        write(f"{DRIVER}{LIB}/{library}.550.54.15")
        link = root / f"{DRIVER}{LIB}/{library}.1".lstrip("/")
        link.symlink_to(f"{library}.550.54.15")
    write("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")
    write("/run/nvidia/validations/toolkit-ready")
    write("/run/nvidia/validations/driver-ready", f"IS_HOST_DRIVER=false\nNVIDIA_DRIVER_ROOT={DRIVER}\n")
    for index in range(gpus):
        device(f"{DRIVER}/dev/nvidia{index}", index)
        device(f"/dev/nvidia{index}", index)
    device(f"{DRIVER}/dev/nvidiactl", 255)
    device("/dev/nvidiactl", 255)


@contextlib.contextmanager
def exported(revision: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bench-node-rev-") as directory:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", revision], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", directory], input=archive.stdout, check=True)
        yield Path(directory)


def command(tree: Path, *args: str) -> list[str]:
    # -I ignores PYTHONPATH; the launchers put the package on sys.path themselves, as this does, and the entry
    # sets up site (click, PyYAML) for the commands that need it.
    code = f"import sys; sys.path.insert(0, {str(tree)!r}); from nvidia_oci_hook.entry import run; run()"
    return [PYTHON, "-I", "-S", "-c", code, *args]


def guard_inputs(directory: Path) -> tuple[Path, bytes]:
    """The runtime-facing path, which takes no host root: the prestart guard's configuration (a fake driver root
    and its CDI spec) and the state of a GPU container whose device is requested by a CDI annotation."""
    driver = driver_root(directory)
    (directory / "cdi").mkdir()
    (directory / "cdi/nvidia.yaml").write_text(cdi_spec_yaml(driver))
    (directory / "rootfs").mkdir()
    bundle = directory / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(gpu_config(directory / "rootfs", driver, True)))
    config = directory / "config.yaml"
    config.write_text(
        f"driver_roots: [/, {driver}]\ncdi:\n  spec_dirs: [{directory / 'cdi'}]\n"
        f"log:\n  file: {directory / 'guard.log'}\n  syslog: false\n"
    )
    state = {"ociVersion": "1.0.2", "id": "bench", "status": "creating", "pid": 1, "bundle": str(bundle)}
    return config, json.dumps(state, separators=(",", ":")).encode()


def run_quietly(argv: list[str], stdin: bytes = b"") -> None:
    result = subprocess.run(argv, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv[-6:])}: exit {result.returncode}: {result.stderr.decode()[-400:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--against", default="HEAD", metavar="REV")
    parser.add_argument("--host-root", metavar="DIR", help="time this node root instead of a built one")
    parser.add_argument(
        "--cases", default="lint,doctor,hook", help="which of lint, doctor, hook to time (comma-separated)"
    )
    options = parser.parse_args()
    with exported(options.against) as before, tempfile.TemporaryDirectory(prefix="bench-node-") as scratch:
        root = options.host_root
        if root is None:
            root = str(Path(scratch) / "node")
            build_node(Path(root))
        trees = {"this tree": REPO, f"{options.against}": before}
        wanted = set(options.cases.split(","))
        commands = {
            label: args
            for label, args, case in (("lint --node", ("lint", "--node"), "lint"), ("doctor", ("doctor",), "doctor"))
            if case in wanted
        }
        cases = {"interpreter alone (python3 -I -S)": Case(lambda: run_quietly([PYTHON, "-I", "-S", "-c", "pass"]))}
        for label, args in commands.items():
            for name, tree in trees.items():
                argv = command(tree, *args, "--host-root", root)
                run_quietly(argv)  # fails loudly before any timing
                cases[f"{label}, {name}"] = Case(lambda argv=argv: run_quietly(argv), settle=0)
        guard_config, guard_state = guard_inputs(Path(scratch) / "guard")
        for name, tree in trees.items() if "hook" in wanted else ():
            commands["hook prestart"] = ()
            argv = command(tree, "--config", str(guard_config), "hook", "prestart")
            run_quietly(argv, guard_state)
            cases[f"hook prestart, {name}"] = Case(lambda argv=argv: run_quietly(argv, guard_state), settle=0)
        timings = interleaved_medians(options.runs, cases)
        floor = timings["interpreter alone (python3 -I -S)"]
        rows = [ratio_row(name, timing, floor) for name, timing in timings.items()]
        print(render_text(Section(f"{options.runs} interleaved runs, node {root}; against the interpreter", rows)))
        for label in commands:
            mine, theirs = timings[f"{label}, this tree"], timings[f"{label}, {options.against}"]
            print(f"{label}: this tree / {options.against} = x{mine.median / theirs.median:.3f}")


if __name__ == "__main__":
    main()
