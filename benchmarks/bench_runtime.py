"""Runtime-path benchmark: what the wrapper adds to `runc create`, and what the prestart guard costs.

Usage (as root): python benchmarks/bench_runtime.py [--runs N] [--runtime runc|crun]

The config is a realistic GPU container's: busybox root, the driver's libraries and binaries bind-mounted (27
mounts from a fake driver root), four NVIDIA device nodes with their allow rules, NVIDIA's environment, the
annotations an engine writes. Cases, each the median wall time of N runs:

- create: `RUNTIME create` of that bundle, alone and through the wrapper (the launcher as the packages install
  it: /usr/bin/python3 -IS); the wrapper finds nothing to change. Each container is deleted between runs.
- create + CDI: the same config with its GPU requested as a CDI annotation instead, resolved from a YAML spec,
  so the wrapper applies and writes edits on every run.
- hook: `nvidia-oci-hook hook prestart` with the container's state on stdin, against `python3 -I -c pass`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from nvidia_oci_hook.launcher import write_launchers  # noqa: E402

PYTHON = "/usr/bin/python3"
LIBRARIES = (
    "libcuda.so.1", "libcuda.so.550.54.15", "libnvidia-ml.so.1", "libnvidia-ml.so.550.54.15",
    "libnvidia-ptxjitcompiler.so.1", "libnvidia-ptxjitcompiler.so.550.54.15", "libnvidia-nvvm.so.4",
    "libnvidia-nvvm.so.550.54.15", "libnvidia-opencl.so.1", "libnvidia-allocator.so.1", "libnvidia-cfg.so.1",
    "libnvidia-gpucomp.so.550.54.15", "libnvidia-pkcs11.so.550.54.15", "libcudadebugger.so.1",
    "libnvidia-opticalflow.so.1", "libnvcuvid.so.1", "libnvidia-encode.so.1", "libnvidia-fbc.so.1",
    "libnvidia-glcore.so.550.54.15", "libnvidia-tls.so.550.54.15", "libnvidia-glsi.so.550.54.15",
)  # fmt: skip
BINARIES = (
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
)
DEVICES = (("/dev/nvidiactl", 255), ("/dev/nvidia0", 0), ("/dev/nvidia-uvm", 0), ("/dev/nvidia-uvm-tools", 1))
UVM_MAJOR = 235
SETTLE = 0.05  # seconds between the untimed setup of a run and its timed action
EXEC_RUNTIME = "import os, sys; os.execv(sys.argv[1], sys.argv[1:])"


def driver_root(directory: Path) -> Path:
    root = directory / "driver"
    for name in LIBRARIES:
        path = root / "usr/lib/x86_64-linux-gnu" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\0" * 64)
    for name in BINARIES:
        path = root / "usr/bin" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\0" * 64)
        path.chmod(0o755)
    return root


def _nodes() -> list[dict[str, Any]]:
    return [
        {"path": path, "type": "c", "major": UVM_MAJOR if "uvm" in path else 195, "minor": minor, "fileMode": 0o666}
        for path, minor in DEVICES
    ]


def gpu_config(rootfs: Path, root: Path, requested_by_cdi: bool) -> dict[str, Any]:
    config: dict[str, Any] = {
        "ociVersion": "1.0.2",
        "process": {
            "user": {"uid": 0, "gid": 0},
            "args": ["/bin/true"],
            "env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOSTNAME=gpu-pod",
                "NVIDIA_VISIBLE_DEVICES=void",
                "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
                "CUDA_VERSION=12.4.1",
                "KUBERNETES_SERVICE_HOST=10.96.0.1",
                "KUBERNETES_SERVICE_PORT=443",
            ],
            "cwd": "/",
            "capabilities": {
                key: [
                    "CAP_CHOWN",
                    "CAP_DAC_OVERRIDE",
                    "CAP_FSETID",
                    "CAP_FOWNER",
                    "CAP_SETGID",
                    "CAP_SETUID",
                    "CAP_KILL",
                ]
                for key in ("bounding", "effective", "permitted")
            },
            "noNewPrivileges": True,
        },
        "root": {"path": str(rootfs), "readonly": True},
        "hostname": "gpu-pod",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
            {
                "destination": "/dev",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "strictatime", "mode=755"],
            },
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
        ],
        "annotations": {
            "io.kubernetes.cri.container-type": "container",
            "io.kubernetes.cri.container-name": "cuda",
            "io.kubernetes.cri.sandbox-id": "5f0c" * 16,
            "io.kubernetes.cri.image-name": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
        },
        "linux": {
            "resources": {"devices": [{"allow": False, "access": "rwm"}], "memory": {"limit": 8589934592}},
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")],
            "maskedPaths": ["/proc/acpi", "/proc/kcore", "/proc/keys", "/sys/firmware"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys"],
        },
    }
    if requested_by_cdi:
        config["annotations"]["cdi.k8s.io/gpu"] = "nvidia.com/gpu=0"
        return config
    for name in LIBRARIES:
        source = str(root / "usr/lib/x86_64-linux-gnu" / name)
        destination = f"/usr/lib/x86_64-linux-gnu/{name}"
        config["mounts"].append(
            {
                "destination": destination,
                "type": "bind",
                "source": source,
                "options": ["ro", "nosuid", "nodev", "rbind"],
            }
        )
    for name in BINARIES:
        config["mounts"].append(
            {
                "destination": f"/usr/bin/{name}",
                "type": "bind",
                "source": str(root / "usr/bin" / name),
                "options": ["ro", "nosuid", "nodev", "rbind"],
            }
        )
    config["linux"]["devices"] = _nodes()
    config["linux"]["resources"]["devices"] += [
        {"allow": True, "type": "c", "major": node["major"], "minor": node["minor"], "access": "rwm"}
        for node in _nodes()
    ]
    return config


def cdi_spec_yaml(root: Path) -> str:
    """The spec nvidia-ctk would write for this driver, in its YAML layout."""
    lines = [
        "---",
        "cdiVersion: 0.5.0",
        "kind: nvidia.com/gpu",
        "devices:",
        '- name: "0"',
        "  containerEdits:",
        "    deviceNodes:",
    ]
    lines += ["    - path: /dev/nvidia0", "      type: c", "      major: 195", "      minor: 0"]
    lines += ["containerEdits:", "  env:", "  - NVIDIA_VISIBLE_DEVICES=void", "  deviceNodes:"]
    for path, minor in DEVICES:
        if path != "/dev/nvidia0":
            lines += [
                f"  - path: {path}",
                "    type: c",
                f"    major: {UVM_MAJOR if 'uvm' in path else 195}",
                f"    minor: {minor}",
            ]
    lines.append("  mounts:")
    for name in LIBRARIES:
        lines += [
            f"  - hostPath: {root}/usr/lib/x86_64-linux-gnu/{name}",
            f"    containerPath: /usr/lib/x86_64-linux-gnu/{name}",
            "    options:", "    - ro", "    - nosuid", "    - nodev", "    - rbind",
        ]  # fmt: skip
    for name in BINARIES:
        lines += [
            f"  - hostPath: {root}/usr/bin/{name}",
            f"    containerPath: /usr/bin/{name}",
            "    options: [ro, nosuid, nodev, rbind]",
        ]
    return "\n".join(lines) + "\n"


def interleaved_medians(runs: int, cases: dict[str, tuple[Callable[[], None], Callable[[], None]]]) -> dict[str, float]:
    """Median wall time of each case's action, the cases taking turns run by run, so that the machine's drift
    (two cores, other work) falls on all of them alike; each case's setup runs before its action, untimed."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, (setup, action) in cases.items():
            setup()
            start = time.perf_counter()
            action()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1000 for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--runtime", default="runc", choices=("runc", "crun"))
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_runtime: run as root (runc creates containers)")
    runtime = shutil.which(args.runtime)
    if runtime is None or not os.path.exists(PYTHON):
        sys.exit(f"bench_runtime: needs {args.runtime} and {PYTHON}")
    with tempfile.TemporaryDirectory(prefix="bench-runtime-") as temporary:
        directory = Path(temporary)
        # Engines keep bundles on tmpfs (/run/containerd, /run/containers): the wrapper's fsync costs nothing
        # there, while on this machine's disk it would dominate what is measured.
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "bench-runtime", str(directory)], check=True)
        try:
            return _measure(directory, runtime, args)
        finally:
            subprocess.run(["umount", "--lazy", str(directory)], check=False)


def _measure(directory: Path, runtime: str, args: argparse.Namespace) -> int:
    rootfs = directory / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    shutil.copy2("/bin/busybox", rootfs / "bin/busybox")
    (rootfs / "bin/true").symlink_to("busybox")
    for name in ("proc", "dev", "sys"):
        (rootfs / name).mkdir()
    root = driver_root(directory)
    spec_dir = directory / "cdi"
    spec_dir.mkdir()
    (spec_dir / "nvidia.yaml").write_text(cdi_spec_yaml(root))
    settings = directory / "config.yaml"
    settings.write_text(
        f"driver_roots: [/, {root}]\nruntime:\n  low_level: [{runtime}]\ncdi:\n  spec_dirs: [{spec_dir}]\n"
        f"log:\n  file: {directory / 'wrapper.log'}\n  syslog: false\n"
    )
    hook, wrapper = write_launchers(str(directory / "bin"), PYTHON)
    env = dict(os.environ, NVIDIA_OCI_HOOK_CONFIG=str(settings))
    state = directory / "state"

    def bundle(name: str, requested_by_cdi: bool) -> Path:
        path = directory / name
        path.mkdir()
        (path / "config.json").write_text(json.dumps(gpu_config(rootfs, root, requested_by_cdi)))
        return path

    def create(front: list[str], path: Path) -> Callable[[], None]:
        def action() -> None:
            command = [*front, "--root", str(state), "create", "--bundle", str(path), "bench"]
            subprocess.run(command, env=env, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

        return action

    def delete() -> None:
        subprocess.run([runtime, "--root", str(state), "delete", "--force", "bench"], capture_output=True, check=False)
        # The container's processes and cgroup go away after delete returns; let that finish outside the timing.
        time.sleep(SETTLE)

    plain_bundle = bundle("plain", requested_by_cdi=False)
    cdi_bundle = bundle("cdi-bundle", requested_by_cdi=True)
    pristine = (cdi_bundle / "config.json").read_bytes()

    def reset_cdi() -> None:
        delete()
        (cdi_bundle / "config.json").write_bytes(pristine)

    def nothing() -> None:
        time.sleep(SETTLE / 5)

    def hook_run() -> None:
        subprocess.run([hook, "hook", "prestart"], input=state_json.encode(), env=env, check=True)

    def bare() -> None:
        subprocess.run([PYTHON, "-I", "-c", "pass"], check=True)

    state_json = json.dumps(
        {"ociVersion": "1.0.2", "id": "bench", "status": "creating", "pid": 1, "bundle": str(plain_bundle)}
    )
    create([runtime], plain_bundle)()  # warm the caches once
    delete()
    create_times = interleaved_medians(
        args.runs,
        {
            "alone": (delete, create([runtime], plain_bundle)),
            # The interpreter's share: Python started as the launchers start it, doing nothing but exec.
            "interpreter": (delete, create([PYTHON, "-IS", "-c", EXEC_RUNTIME, runtime], plain_bundle)),
            "wrapped": (delete, create([wrapper], plain_bundle)),
            "wrapped-cdi": (reset_cdi, create([wrapper], cdi_bundle)),
        },
    )
    delete()
    edits = json.loads((directory / "wrapper.log").read_text().splitlines()[-1])["edits"]
    hook_times = interleaved_medians(args.runs * 2, {"bare": (nothing, bare), "hook": (nothing, hook_run)})
    alone = create_times["alone"]
    mounts = len(gpu_config(rootfs, root, False)["mounts"])
    name = args.runtime

    def row(label: str, value: float, note: str = "") -> None:
        extra = f"   +{value - alone:5.1f} ms" if label != f"{name} alone" else ""
        print(f"  {label:<28} {value:7.1f} ms{extra}{'  (' + note + ')' if note else ''}")

    print(f"{name} create, realistic GPU config ({mounts} mounts, bundles on tmpfs), median of {args.runs}:")
    row(f"{name} alone", alone)
    row(f"python3 -IS, exec {name}", create_times["interpreter"], "the interpreter's start alone")
    row(f"wrapper + {name}", create_times["wrapped"], f"x{create_times['wrapped'] / alone:.2f}; nothing to change")
    row(f"wrapper + {name}, CDI request", create_times["wrapped-cdi"], f"{len(edits)} edits applied and written")
    bare_ms, hook_ms = hook_times["bare"], hook_times["hook"]
    print(f"prestart hook, median of {args.runs * 2}:")
    print(f"  {'python3 -I -c pass':<28} {bare_ms:7.1f} ms")
    print(f"  {'hook prestart':<28} {hook_ms:7.1f} ms   +{hook_ms - bare_ms:5.1f} ms  (x{hook_ms / bare_ms:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
