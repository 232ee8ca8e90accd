"""Runtime-path benchmark: what the wrapper adds to each runtime call and to a container's start in the engines,
and what the prestart guard costs.

Usage (as root, with the tests' interpreter: the engine part needs grpcio and the CRI v1 stubs, tests/e2e/setup.sh):

    .venv/bin/python benchmarks/bench_runtime.py [--only calls|engines|containerd|podman|crio] [--runs N]
        [--engine-runs M] [--runtime runc|crun] [--markdown]

The launchers are written by nvidia_oci_hook.launcher.write_launchers for /usr/bin/python3, as the packages
install them. Every number is the median wall time of one interleaved run: the cases compared take turns run by
run, each case's untimed setup (creating the container it acts on, say) just before its timed action.

Calls (--runs N, default 20), on a realistic GPU container's config: busybox root, the driver's libraries and
binaries bind-mounted (27 mounts from a fake driver root), four NVIDIA device nodes with their allow rules,
NVIDIA's environment, the annotations an engine writes; bundles and runtime state on tmpfs, as engines keep them.

- create: `RUNTIME create` of that bundle alone, through `python3 -IS` exec'ing the runtime (the interpreter's
  start alone: the floor of any Python wrapper), and through the wrapper, which finds nothing to change; and the
  config with its GPU requested as a CDI annotation instead, so the wrapper applies and writes edits each run.
  Beside them, NVIDIA's `nvidia-container-runtime` over the same runtime, on the same bytes in a bundle of its
  own (it writes config.json back on every create, so they are put back before each run). Target: the wrapper's
  create / NVIDIA's <= 1.12.
- state, start, kill, delete: each through the wrapper against the runtime alone, on a real container: state of
  a created one, start of a created one, kill (SIGKILL) of a started `sleep`, delete of one whose `true` exited.
- hook: `nvidia-oci-hook hook prestart` with the container's state on stdin (compact, as runc writes it), against
  `python3 -I -S -c pass`, which is what the fronts start (-I alone would load site and make the hook look
  cheaper than it is): on that GPU container, which starts Python, and on a busybox container with no GPU
  content, which the hook's sh front ends without Python, its config compact and as cri-o writes it (tabs).
  Beside them, NVIDIA's `nvidia-container-runtime-hook prestart` on the GPU container. Target: ours on the GPU
  container <= 1.3x the floor.

NVIDIA's two programs come from ../shared/peers/bin (benchmarks/peers.py; left out, with one line saying why,
where it is absent) and read a configuration of their own in the workspace (NVIDIA_CTK_CONFIG_FILE_PATH, never
/etc): the shipped defaults, mode "auto" included, but for `runtimes` (the runtime measured), the hook's path and
an info-level log. The runtime resolves "auto" to jit-cdi, here as on a node with NVML; the container's
NVIDIA_VISIBLE_DEVICES=void requests no device, so it loads the config, writes it back unchanged and execs the
runtime (its row says what its log and the written config showed). The hook, for the same reason, finds no GPU
container and ends before it would look for nvidia-container-cli, which is not installed here; that is proven
before the runs: the same config asking for every GPU must make it try to exec nvidia-container-cli (a path
configured for that check alone, which does not exist), and the config as it is must end quietly with status 0.

Engines (--engine-runs M, default 30), containerd, podman and cri-o, with runc as the baseline: see
benchmarks/bench_engines.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

import bench_engines  # noqa: E402  (grpc and the CRI messages load only when an engine is measured)
from peers import TOOLKIT_HOOK, TOOLKIT_RUNTIME, Toolkit, missing, toolkit  # noqa: E402
from timing import (  # noqa: E402
    SETTLE,
    Case,
    Row,
    Section,
    delta_row,
    interleaved_medians,
    interrupt_once,
    machine,
    ratio_row,
    reap,
    render_markdown,
    render_text,
    subreaper,
    tmpfs,
    wait_orphans,
)

from nvidia_oci_hook.launcher import write_launchers  # noqa: E402
from tests.e2e.bundles import base_config  # noqa: E402

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


CALL_BOUND = 1.5  # ms over the runtime alone that the issue allows each call through the wrapper
CREATE_BOUND = 2.0  # ms over python3 -IS exec'ing the runtime, for a create with nothing to change
CREATE_CDI_BOUND = 5.0  # the same, with a CDI request applied and the config written
HOOK_BOUND = 1.3  # times python3 -I -S -c pass, for the guard on a container with nothing wrong
TOOLKIT_CREATE_BOUND = 1.12  # the wrapper's create of the GPU container against NVIDIA's runtime's
CONFIG_ENV = "NVIDIA_OCI_HOOK_CONFIG"
CDI_REQUEST = ("cdi.k8s.io/gpu", "nvidia.com/gpu=0")


@dataclass(frozen=True)
class Workspace:
    """What every part measures with: a busybox root, the fake driver and its CDI spec, and the launchers."""

    directory: Path
    rootfs: Path
    driver: Path
    spec_dir: Path
    hook: str
    wrapper: str
    config: Path

    def settings(self, name: str, runtime: str, roots: str = "") -> Path:
        """The tool's configuration for one part (its low-level runtime, the spec, a log of its own), where the
        installed wrapper reads it, and written a while ago, as a node's is when containers start: the wrapper
        records what the dispatcher reads at its first call. roots are the driver roots, by default / and the
        fake driver's."""
        self.config.write_text(
            f"driver_roots: [{roots or f'/, {self.driver}'}]\nruntime:\n  low_level: [{runtime}]\n"
            f"cdi:\n  spec_dirs: [{self.spec_dir}]\nlog:\n  file: {self.log(name)}\n  syslog: false\n"
        )
        settled = time.time() - 60
        os.utime(self.config, (settled, settled))
        return self.config

    def log(self, name: str) -> Path:
        return self.directory / f"{name}.log"


def workspace(directory: Path) -> Workspace:
    rootfs = directory / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    shutil.copy2("/bin/busybox", rootfs / "bin/busybox")
    for applet in ("true", "sleep"):
        (rootfs / "bin" / applet).symlink_to("busybox")
    for name in ("proc", "dev", "sys"):
        (rootfs / name).mkdir()
    driver = driver_root(directory)
    spec_dir = directory / "cdi"
    spec_dir.mkdir()
    (spec_dir / "nvidia.yaml").write_text(cdi_spec_yaml(driver))
    # By name: which launcher is which is write_launchers' business, and so is what each one holds. The wrapper
    # reads its configuration where the package's reads /etc/nvidia-oci-hook/config.yaml, and keeps its record
    # for the dispatcher here instead of the node's /run.
    config = directory / "config.yaml"
    written = write_launchers(str(directory / "bin"), PYTHON, config_path=str(config), state_dir=str(directory / "run"))
    launchers = {Path(path).name: path for path in written}
    return Workspace(
        directory, rootfs, driver, spec_dir, launchers["nvidia-oci-hook"], launchers["nvidia-oci-runtime"], config
    )


def measure_calls(
    space: Workspace, name: str, runtime: str, runs: int, nvidia: Optional[Toolkit] = None
) -> list[Section]:
    """The calls' sections; with nvidia, NVIDIA's runtime and hook beside the wrapper and the guard."""
    settings = space.settings("calls", runtime)
    # The hook's launcher has no configuration path of its own: the guard's hooks.d file names it in env.
    env = dict(os.environ, **{CONFIG_ENV: str(settings)})
    state = space.directory / "state"
    subreaper(True)
    try:
        return _measure_calls(space, name, runtime, runs, env, state, nvidia)
    finally:
        # Whatever stopped the runs: the containers they left, then the inits that this process adopted.
        listed = subprocess.run([runtime, "--root", str(state), "list", "-q"], capture_output=True, text=True)
        for container in listed.stdout.split():
            subprocess.run([runtime, "--root", str(state), "delete", "--force", container], capture_output=True)
        wait_orphans(timeout=10)
        subreaper(False)


def _measure_calls(
    space: Workspace, name: str, runtime: str, runs: int, env: dict[str, str], state: Path, nvidia: Optional[Toolkit]
) -> list[Section]:
    directory = space.directory
    # What an engine passes the runtime: no configuration path of ours, which would send every call to Python.
    engine_env = {key: value for key, value in env.items() if key != CONFIG_ENV}

    def bundle(bundle_name: str, requested_by_cdi: bool, args: Sequence[str] = ("/bin/true",)) -> Path:
        path = directory / bundle_name
        path.mkdir()
        config = gpu_config(space.rootfs, space.driver, requested_by_cdi)
        config["process"]["args"] = list(args)
        (path / "config.json").write_text(json.dumps(config))
        return path

    def call(front: str, *args: str, check: bool = True) -> None:
        subprocess.run(
            [front, "--root", str(state), *args],
            env=engine_env,
            check=check,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=None if check else subprocess.DEVNULL,
        )

    def remove(container: str) -> None:
        call(runtime, "delete", "--force", container, check=False)
        reap()

    def create_with(
        front: Sequence[str], path: Path, extra_env: Optional[Mapping[str, str]] = None
    ) -> Callable[[], None]:
        command = [*front, "--root", str(state), "create", "--bundle", str(path), "bench"]
        command_env = {**engine_env, **(extra_env or {})}

        def action() -> None:
            subprocess.run(command, env=command_env, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

        return action

    def stopped(container: str) -> None:
        deadline = time.monotonic() + 10
        while True:
            out = subprocess.run([runtime, "--root", str(state), "state", container], capture_output=True, text=True)
            if out.returncode == 0 and json.loads(out.stdout)["status"] == "stopped":
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: container {container} did not stop: {out.stdout}{out.stderr}")
            time.sleep(0.005)

    plain = bundle("plain", requested_by_cdi=False)
    cdi = bundle("cdi-bundle", requested_by_cdi=True)
    sleeper = bundle("sleeper", requested_by_cdi=False, args=("/bin/sleep", "1000"))
    pristine = (cdi / "config.json").read_bytes()
    # NVIDIA's runtime writes config.json back on every create (as Go's compact JSON), so it gets a bundle of
    # its own, the same bytes as plain's again before each run.
    toolkit_bundle = bundle("toolkit-bundle", requested_by_cdi=False)

    def reset_toolkit() -> None:
        remove("bench")
        (toolkit_bundle / "config.json").write_bytes((plain / "config.json").read_bytes())

    def reset_cdi() -> None:
        remove("bench")
        (cdi / "config.json").write_bytes(pristine)

    def fresh(container: str, path: Path = plain) -> Callable[[], None]:
        def setup() -> None:
            remove(container)
            call(runtime, "create", "--bundle", str(path), container)

        return setup

    def started(container: str, path: Path) -> Callable[[], None]:
        def setup() -> None:
            fresh(container, path)()
            call(runtime, "start", container)

        return setup

    def exited(container: str) -> Callable[[], None]:
        def setup() -> None:
            started(container, plain)()
            stopped(container)
            reap()

        return setup

    create_with([runtime], plain)()  # warm the caches once
    remove("bench")
    call(runtime, "create", "--bundle", str(plain), "state")
    cases = {
        "alone": Case(create_with([runtime], plain), setup=lambda: remove("bench")),
        # The interpreter's share: Python started as the launchers start it, doing nothing but exec.
        "interpreter": Case(
            create_with([PYTHON, "-IS", "-c", EXEC_RUNTIME, runtime], plain), setup=lambda: remove("bench")
        ),
        "wrapped": Case(create_with([space.wrapper], plain), setup=lambda: remove("bench")),
        "wrapped-cdi": Case(create_with([space.wrapper], cdi), setup=reset_cdi),
    }
    toolkit_mode = ""
    if nvidia is not None:
        toolkit_mode = toolkit_create_path(
            nvidia, create_with([nvidia.runtime], toolkit_bundle, nvidia.env), toolkit_bundle, plain
        )
        remove("bench")
        cases["toolkit"] = Case(create_with([nvidia.runtime], toolkit_bundle, nvidia.env), setup=reset_toolkit)
    for front, side in ((runtime, "alone"), (space.wrapper, "wrapped")):
        # Each pair shares its container name; the setups always use the runtime alone.
        cases[f"state {side}"] = Case(partial(call, front, "state", "state"), settle=SETTLE / 5)
        cases[f"start {side}"] = Case(partial(call, front, "start", "start"), setup=fresh("start"))
        cases[f"kill {side}"] = Case(partial(call, front, "kill", "kill", "KILL"), setup=started("kill", sleeper))
        cases[f"delete {side}"] = Case(partial(call, front, "delete", "delete"), setup=exited("delete"))
    times = interleaved_medians(runs, cases)
    for container in ("bench", "state", "start", "kill", "delete"):
        remove(container)
    entries = [json.loads(line) for line in space.log("calls").read_text().splitlines()]
    edits = entries[-1]["edits"] if entries else []

    # A container with no GPU content, its config compact as the engines write it.
    busybox = directory / "busybox"
    busybox.mkdir()
    (busybox / "config.json").write_text(json.dumps(base_config(space.rootfs, "true"), separators=(",", ":")))
    # The same container as cri-o writes its config.json: Go's MarshalIndent with a tab (its escapes change
    # nothing here: the config holds no <, > or &).
    busybox_crio = directory / "busybox-crio"
    busybox_crio.mkdir()
    (busybox_crio / "config.json").write_text(
        json.dumps(base_config(space.rootfs, "true"), indent="\t", separators=(",", ": "))
    )

    def hook_run(path: Path, command: Sequence[str] = (space.hook, "hook", "prestart"), hook_env: Any = env) -> None:
        subprocess.run(list(command), input=hook_state(path), env=hook_env, check=True)

    def bare() -> None:
        subprocess.run([PYTHON, "-I", "-S", "-c", "pass"], check=True)

    hook_run(plain)  # Python keeps the record the hook's front reads
    hook_cases = {
        "bare": Case(bare, settle=SETTLE / 5),
        "hook": Case(partial(hook_run, plain), settle=SETTLE / 5),
        "hook busybox": Case(partial(hook_run, busybox), settle=SETTLE / 5),
        "hook busybox crio": Case(partial(hook_run, busybox_crio), settle=SETTLE / 5),
    }
    toolkit_hook_path = ""
    if nvidia is not None:
        toolkit_env = {**engine_env, **nvidia.env}
        toolkit_hook_path = toolkit_prestart_path(nvidia, plain, directory, runtime)
        hook_cases["toolkit hook"] = Case(
            partial(hook_run, plain, (nvidia.hook, "prestart"), toolkit_env), settle=SETTLE / 5
        )
    hook_times = interleaved_medians(runs * 2, hook_cases)

    alone = times["alone"]
    floor = times["interpreter"]
    mounts = len(gpu_config(space.rootfs, space.driver, False)["mounts"])
    create = Section(
        f"{name} create, realistic GPU config ({mounts} mounts, bundles on tmpfs), median of {runs}",
        [
            Row(f"{name} alone", alone),
            delta_row(f"python3 -IS, exec {name}", floor, alone, note="the floor of create"),
            # The wrapper against the floor: what the wrapper's own work costs beyond starting Python at all.
            delta_row(
                f"wrapper + {name}", times["wrapped"], floor, CREATE_BOUND, "nothing to change; against the floor"
            ),
            delta_row(
                f"wrapper + {name}, CDI request",
                times["wrapped-cdi"],
                floor,
                CREATE_CDI_BOUND,
                f"{len(edits)} edits written; against the floor",
            ),
        ],
    )
    calls = Section(
        f"{name} state, start, kill, delete: through the wrapper against {name} alone, median of {runs}", []
    )
    for verb, what in (
        ("state", "a created container"),
        ("start", "a created container"),
        ("kill", "SIGKILL to a running sleep"),
        ("delete", "a container whose true exited"),
    ):
        calls.rows.append(Row(f"{verb}, {name} alone", times[f"{verb} alone"], note=what))
        calls.rows.append(
            delta_row(f"{verb}, wrapper + {name}", times[f"{verb} wrapped"], times[f"{verb} alone"], CALL_BOUND)
        )
    bare_time = hook_times["bare"]
    hook = Section(
        f"prestart hook, the state on stdin, median of {runs * 2}",
        [
            Row("python3 -I -S -c pass", bare_time, note="what the launchers start"),
            ratio_row("hook prestart", hook_times["hook"], bare_time, HOOK_BOUND, "nothing wrong"),
            ratio_row(
                "hook prestart, no GPU content",
                hook_times["hook busybox"],
                bare_time,
                note="ends in its sh front: no Python",
            ),
            ratio_row(
                "hook prestart, no GPU content, cri-o's text",
                hook_times["hook busybox crio"],
                bare_time,
                note="tab-indented: sh and one awk, no Python",
            ),
        ],
    )
    if nvidia is None:
        return [create, calls, hook]
    toolkit_time = times["toolkit"]
    side_by_side = Section(
        f"{name} create of the same GPU config: the wrapper and NVIDIA's nvidia-container-runtime, median of {runs}",
        [
            Row(f"{name} alone", alone),
            delta_row(f"nvidia-container-runtime + {name}", toolkit_time, alone, note=toolkit_mode),
            delta_row(f"wrapper + {name}", times["wrapped"], alone, note="nothing to change"),
            ratio_row(
                "wrapper against nvidia-container-runtime",
                times["wrapped"],
                toolkit_time,
                TOOLKIT_CREATE_BOUND,
                "ours / NVIDIA's",
            ),
        ],
    )
    toolkit_hook = hook_times["toolkit hook"]
    hook.rows += [
        ratio_row("nvidia-container-runtime-hook prestart", toolkit_hook, bare_time, note=toolkit_hook_path),
        ratio_row(
            "hook prestart against nvidia-container-runtime-hook",
            hook_times["hook"],
            toolkit_hook,
            note="ours / NVIDIA's, the GPU config",
        ),
    ]
    return [create, side_by_side, calls, hook]


def hook_state(bundle: Path) -> bytes:
    """The state a prestart hook reads on stdin, as runc writes it: compact JSON on one line."""
    state = {"ociVersion": "1.0.2", "id": "bench", "status": "creating", "pid": 1, "bundle": str(bundle)}
    return json.dumps(state, separators=(",", ":")).encode()


def toolkit_create_path(nvidia: Toolkit, create: Callable[[], None], bundle: Path, reference: Path) -> str:
    """What NVIDIA's runtime did with one create of bundle (whose config.json had reference's bytes): the mode
    it resolved "auto" to, from its log, and whether it changed the config. Raises RuntimeError when its log
    shows no create, which would mean the cases measured runc alone."""
    before = len(nvidia.modes())
    create()
    modes = nvidia.modes()[before:]
    if not modes:
        raise RuntimeError(f"nvidia-container-runtime logged no mode for a create:\n{nvidia.log_text()[-2000:]}")
    given = json.loads((reference / "config.json").read_text())
    written = json.loads((bundle / "config.json").read_text())
    changed = sorted(key for key in given.keys() | written.keys() if given.get(key) != written.get(key))
    outcome = f"edited {', '.join(changed)}" if changed else "config.json written back unchanged"
    return f"mode auto as {modes[-1]}: {outcome}"


def toolkit_prestart_path(nvidia: Toolkit, bundle: Path, directory: Path, runtime: str) -> str:
    """Which way NVIDIA's hook goes on bundle's config, proven by the other way: the same config asking for every
    GPU must reach nvidia-container-cli (here a path that does not exist, so nothing runs), while bundle's must
    end without a word. Raises RuntimeError when either does otherwise."""
    config = json.loads((bundle / "config.json").read_text())
    env = config["process"]["env"]
    visible = next(
        (entry for entry in env if entry.startswith("NVIDIA_VISIBLE_DEVICES=")), "NVIDIA_VISIBLE_DEVICES unset"
    )
    quiet = subprocess.run([nvidia.hook, "prestart"], input=hook_state(bundle), env=nvidia.env, capture_output=True)
    if quiet.returncode != 0 or quiet.stdout or quiet.stderr:
        raise RuntimeError(f"nvidia-container-runtime-hook on {bundle}: exit {quiet.returncode}: {quiet.stderr!r}")
    every = directory / "toolkit-every-gpu"
    every.mkdir()
    config["process"]["env"] = [entry for entry in env if not entry.startswith("NVIDIA_VISIBLE_DEVICES=")]
    config["process"]["env"].append("NVIDIA_VISIBLE_DEVICES=all")
    (every / "config.json").write_text(json.dumps(config))
    cli = directory / "absent/nvidia-container-cli"
    probe = toolkit(directory, runtime, "nvidia-toolkit-probe", cli=cli)
    loud = subprocess.run([nvidia.hook, "prestart"], input=hook_state(every), env=probe.env, capture_output=True)
    said = loud.stderr.decode(errors="replace")
    if loud.returncode == 0 or "exec failed" not in said:
        raise RuntimeError(f"nvidia-container-runtime-hook asked for every GPU did not try {cli}: {said}")
    return f"{visible}: not a GPU container to it, ends before nvidia-container-cli"


@contextlib.contextmanager
def workspace_on_tmpfs() -> Iterator[Workspace]:
    # Engines keep bundles on tmpfs (/run/containerd, /run/containers): the wrapper's fsync costs nothing there,
    # while on this machine's disk it would dominate what is measured.
    with tmpfs("bench-runtime-") as directory:
        yield workspace(directory)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--only",
        choices=("calls", "engines", *bench_engines.ENGINES),
        help="one part alone, or one engine of the engine part (default: both parts, every engine)",
    )
    parser.add_argument("--runs", type=int, default=20, help="runs of each call case (default 20)")
    parser.add_argument("--engine-runs", type=int, default=30, help="runs of each engine case (default 30)")
    parser.add_argument("--runtime", default="runc", choices=("runc", "crun"), help="the calls' runtime")
    parser.add_argument("--markdown", action="store_true", help="also a markdown table for README.md")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_runtime: run as root (runc creates containers)")
    runtime = shutil.which(args.runtime)
    if runtime is None or not os.path.exists(PYTHON):
        sys.exit(f"bench_runtime: needs {args.runtime} and {PYTHON}")
    if min(args.runs, args.engine_runs) < 1:
        sys.exit("bench_runtime: --runs and --engine-runs must be at least 1")
    interrupt_once()
    programs: dict[str, Sequence[str]] = {"python3": [PYTHON, "--version"]}
    sections: list[Section] = []
    try:
        with workspace_on_tmpfs() as space:
            if args.only in (None, "calls"):
                programs[args.runtime] = [runtime, "--version"]
                absent = missing(TOOLKIT_RUNTIME, TOOLKIT_HOOK)
                nvidia = None
                if absent is None:
                    nvidia = toolkit(space.directory, runtime)
                    programs["nvidia-container-runtime"] = [nvidia.runtime, "--version"]
                else:
                    print(f"calls: NVIDIA's runtime and hook left out: {absent}", file=sys.stderr, flush=True)
                for section in measure_calls(space, args.runtime, runtime, args.runs, nvidia):
                    print(render_text(section), flush=True)
                    sections.append(section)
            if args.only != "calls":
                programs.update(bench_engines.PROGRAMS)
                # A node whose driver is installed on the host: the default roots, the operator's absent.
                settings = space.settings("engines", "runc", "/, /run/nvidia/driver")
                engines = bench_engines.ENGINES if args.only in (None, "engines") else (args.only,)
                engine_sections = bench_engines.measure(
                    args.engine_runs, space.wrapper, space.hook, settings, space.log("engines"), CDI_REQUEST, engines
                )
                for section in engine_sections:
                    print(render_text(section), flush=True)
                    sections.append(section)
    except KeyboardInterrupt:
        print("bench_runtime: interrupted; everything it started has been removed", file=sys.stderr)
        return 130
    except (RuntimeError, subprocess.CalledProcessError) as error:
        print(f"bench_runtime: {error}", file=sys.stderr)
        return 1
    if args.markdown:
        print()
        print(render_markdown(machine(programs), sections), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
