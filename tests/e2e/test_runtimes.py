"""The wrapper and the prestart guard under real runc and crun: each failure shown without the project, and
its absence with it. Needs root and the runtimes (scripts/setup test installs them)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.bundles import Runtime, base_config, bundle_rootfs, privileged, write_bundle
from tests.helpers import control_node
from tests.runtime.support import counting_interpreter, launchers, python_starts, settled, write_config

pytestmark = [pytest.mark.root, pytest.mark.runtime]

# A file every Debian host has; the spec looks for it under the GPU Operator's driver root, which this node lacks.
HOST_FILE = "/usr/lib/os-release"
STALE_SOURCE = "/run/nvidia/driver" + HOST_FILE


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert os.geteuid() == 0, "these tests need root"
    assert not os.path.exists(STALE_SOURCE), f"{STALE_SOURCE} exists on this machine: the test would prove nothing"
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="module")
def rootfs(workspace: Path) -> Path:
    return bundle_rootfs(workspace)


@pytest.fixture(params=["runc", "crun"])
def runtime(request: pytest.FixtureRequest, workspace: Path) -> Iterator[Runtime]:
    yield Runtime(request.param, workspace / f"state-{request.param}")


@pytest.fixture
def wrapper(tmp_path: Path, runtime: Runtime) -> tuple[list[str], dict[str, str], Path]:
    """The wrapper's command, its environment (configuration, log) and the CDI spec directory."""
    _, runtime_launcher = launchers(tmp_path / "bin")
    spec_dir = tmp_path / "cdi"
    spec_dir.mkdir()
    config = write_config(
        tmp_path / "config.yaml",
        runtime={"low_level": [runtime.binary]},
        cdi={"spec_dirs": [str(spec_dir)]},
        log={"file": str(tmp_path / "wrapper.log"), "syslog": False},
    )
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "NVIDIA_OCI_HOOK_CONFIG": str(config)}
    return [str(runtime_launcher)], env, spec_dir


def _both(runtime: Runtime, tmp_path: Path, config: dict[str, Any], wrapper: tuple[list[str], dict[str, str], Path]):
    """The same config, created once straight by the runtime and once through the wrapper."""
    command, env, _ = wrapper
    plain = runtime.cycle(write_bundle(tmp_path / "plain", json.loads(json.dumps(config))), f"plain-{tmp_path.name}")
    wrapped = runtime.cycle(write_bundle(tmp_path / "wrapped", config), f"wrapped-{tmp_path.name}", command, env)
    return plain, wrapped


def test_stale_driver_root_mount(runtime: Runtime, rootfs: Path, tmp_path: Path, wrapper: Any) -> None:
    config = base_config(rootfs, "cat /etc/driver-release")
    config["mounts"].append(
        {"destination": "/etc/driver-release", "type": "bind", "source": STALE_SOURCE, "options": ["ro", "rbind"]}
    )
    plain, wrapped = _both(runtime, tmp_path, config, wrapper)
    assert not plain.created
    assert "no such file or directory" in plain.create_error.lower()
    assert wrapped.created, wrapped.create_error
    assert wrapped.output == Path(HOST_FILE).read_text()


def test_device_without_cgroup_rule(runtime: Runtime, rootfs: Path, tmp_path: Path, wrapper: Any) -> None:
    config = base_config(rootfs, "cat /dev/nvidia0; echo done")
    config["linux"]["devices"] = [
        {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0, "fileMode": 0o666},
        control_node(fileMode=0o666),
    ]
    plain, wrapped = _both(runtime, tmp_path, config, wrapper)
    assert plain.created and "Operation not permitted" in plain.output
    # Allowed now: with no GPU on this machine the driver answers ENXIO, which only an allowed open reaches.
    assert (
        wrapped.created
        and "No such device or address" in wrapped.output
        and "Operation not permitted" not in wrapped.output
    )


def test_privileged_duplicates_plus_cdi_give_one_right_node(
    runtime: Runtime, rootfs: Path, tmp_path: Path, wrapper: Any
) -> None:
    _, _, spec_dir = wrapper
    (spec_dir / "gpu.json").write_text(
        json.dumps(
            {
                "cdiVersion": "0.5.0",
                "kind": "example.com/gpu",
                "devices": [
                    {
                        "name": "0",
                        "containerEdits": {
                            "deviceNodes": [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}]
                        },
                    }
                ],
                "containerEdits": {"env": ["GPU_FROM_CDI=1"], "deviceNodes": [control_node()]},
            }
        )
    )
    config = privileged(
        base_config(
            rootfs, "ls /dev | grep -c '^nvidia0$'; stat -c '%t:%T' /dev/nvidia0; echo GPU_FROM_CDI=$GPU_FROM_CDI"
        )
    )
    config["annotations"] = {"cdi.k8s.io/gpu": "example.com/gpu=0"}
    # The engine's host devices for a privileged container, from a stray node with other numbers, then the CDI entry.
    config["linux"]["devices"] = [
        {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 5},
        {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0},
    ]
    plain, wrapped = _both(runtime, tmp_path, config, wrapper)
    assert plain.created and plain.output.split("\n")[1] == "c3:5"  # the first entry won: the wrong GPU
    assert wrapped.created, wrapped.create_error
    assert wrapped.output.split("\n")[:3] == ["1", "c3:0", "GPU_FROM_CDI=1"]


def test_pause_container_spec_passes_through(runtime: Runtime, rootfs: Path, tmp_path: Path, wrapper: Any) -> None:
    config = base_config(rootfs, "echo paused")
    del config["process"]["env"]
    config["process"]["args"] = ["/bin/echo", "paused"]
    command, env, _ = wrapper
    outcome = runtime.cycle(write_bundle(tmp_path / "pause", config), f"pause-{tmp_path.name}", command, env)
    assert outcome.created, outcome.create_error
    assert outcome.output == "paused\n"
    seen = json.loads((tmp_path / "pause/config.json").read_text())
    assert seen == {**config, "linux": {**config["linux"], "cgroupsPath": seen["linux"]["cgroupsPath"]}}
    assert not (tmp_path / "wrapper.log").exists()


def test_prestart_guard_stops_the_container_with_one_line(
    runtime: Runtime, rootfs: Path, tmp_path: Path, wrapper: Any
) -> None:
    _, env, _ = wrapper
    hook = str(tmp_path / "bin/nvidia-oci-hook")
    config = base_config(rootfs, "echo started")
    config["linux"]["devices"] = [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}, control_node()]
    config["hooks"] = {
        "prestart": [{"path": hook, "args": [hook, "--config", env["NVIDIA_OCI_HOOK_CONFIG"], "hook", "prestart"]}]
    }
    # crun 1.8 sends a hook's stdout and stderr to /dev/null unless this annotation names a file for them.
    hook_stderr = tmp_path / "hook-stderr"
    config["annotations"] = {"run.oci.hooks.stderr": str(hook_stderr)}
    outcome = runtime.cycle(write_bundle(tmp_path / "guarded", config), f"guard-{tmp_path.name}")
    assert not outcome.created
    # The runtime says a hook stopped the container: runc by number, crun by path.
    assert ("error running hook #0" if runtime.name == "runc" else hook) in outcome.create_error
    shown = outcome.create_error if runtime.name == "runc" else hook_stderr.read_text()
    ours = [line for line in shown.splitlines() if "nvidia-oci-hook" in line and "refusing" in line]
    assert len(ours) == 1, shown
    assert "[DEV003] no rule in linux.resources.devices allows /dev/nvidia0 (c 195:0" in ours[0]
    if runtime.name == "crun":
        assert hook_stderr.read_text().count("\n") == 1
    logged = json.loads((tmp_path / "wrapper.log").read_text())
    assert logged["mode"] == "prestart" and logged["summary"] in ours[0]
    # The same container with its allow rules passes the guard.
    config["linux"]["resources"]["devices"] += [
        {"allow": True, "type": "c", "major": 195, "minor": minor, "access": "rwm"} for minor in (0, 255)
    ]
    outcome = runtime.cycle(write_bundle(tmp_path / "allowed", config), f"allowed-{tmp_path.name}")
    assert outcome.created, outcome.create_error
    assert outcome.output == "started\n"


def test_the_guard_starts_no_python_for_a_container_with_nothing_to_guard(
    runtime: Runtime, rootfs: Path, tmp_path: Path
) -> None:
    shim, starts = counting_interpreter(tmp_path)
    hook, _ = launchers(tmp_path / "bin", interpreter=shim)
    log = tmp_path / "guard.log"
    config_file = settled(write_config(tmp_path / "config.yaml", log={"file": str(log), "syslog": False}))
    hook_stderr = tmp_path / "hook-stderr"

    def guarded(script: str) -> dict[str, Any]:
        config = base_config(rootfs, script)
        # As hooks.d registers it: createRuntime, the configuration named in the hook's own environment.
        entry = {"path": str(hook), "args": [str(hook), "hook", "createRuntime"]}
        config["hooks"] = {"createRuntime": [{**entry, "env": [f"NVIDIA_OCI_HOOK_CONFIG={config_file}"]}]}
        config["annotations"] = {"run.oci.hooks.stderr": str(hook_stderr)}  # crun 1.8's only place for it
        return config

    # The first guard starts Python, which keeps the record the front reads; from then on a container with
    # nothing to guard starts none.
    for index in range(3):
        outcome = runtime.cycle(write_bundle(tmp_path / f"plain-{index}", guarded("echo started")), f"p{index}")
        assert outcome.created and outcome.output == "started\n", outcome.create_error
        assert python_starts(starts) == 1, index
    gpu = guarded("echo started")
    gpu["linux"]["devices"] = [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}, control_node()]
    outcome = runtime.cycle(write_bundle(tmp_path / "gpu", gpu), f"gpu-{tmp_path.name}")
    assert not outcome.created and python_starts(starts) == 2
    shown = outcome.create_error if runtime.name == "runc" else hook_stderr.read_text()
    assert "nvidia-oci-hook: refusing container" in shown and "[DEV003]" in shown, shown
    assert json.loads(log.read_text())["mode"] == "prestart"
