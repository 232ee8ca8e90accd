"""`why` on what the real tools print, each made to fail here the way it fails on a GPU node: runc and crun on a
bind mount whose source is missing, podman on a missing --device and a hooks.d file whose regexp does not
compile, containerd 1.7 and 2.1 on config versions they refuse, NVIDIA's hook 1.20 (../shared/peers/bin) on an
unknown capability and a missing nvidia-container-cli, and NVIDIA's runtime 1.20 in cdi mode on a device no spec
defines. Each text goes to `why` on a fake node where its cause holds and on one where it does not. cri-o's and
containerd's CRI errors are fed to `why` where their daemons run (tests/e2e/test_crio.py,
tests/e2e/test_cri_harness.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from tests.containerd.real import Binary, binaries, dump
from tests.e2e.bundles import Runtime, base_config, bundle_rootfs, write_bundle
from tests.e2e.crio import PEERS
from tests.helpers import FakeHost
from tests.node.fakenodes import CONTAINER, container_driver, host_driver, seed_000
from tests.podman_env import IMAGE, PodmanUnavailable, run_isolated

pytestmark = [pytest.mark.runtime, pytest.mark.root]

# Under the containerized driver's root, which this machine does not have: the engines find nothing there.
SOURCE = f"{CONTAINER}/usr/bin/nvidia-smi"
DEVICE = f"{CONTAINER}/dev/nvidiactl"
HOOK = PEERS / "nvidia-container-runtime-hook"


def why(capsys: pytest.CaptureFixture[str], host: FakeHost, text: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    status = main(["why", "--host-root", str(host.root), "--format", "json", text])
    out, err = capsys.readouterr()
    assert err == "", err
    return status, json.loads(out)


def verdicts(report: dict[str, Any]) -> dict[str, Any]:
    return {cause["code"]: cause["holds"] for cause in report["causes"]}


def signatures(report: dict[str, Any]) -> list[str]:
    return [match["signature"] for match in report["matches"]]


@pytest.fixture
def nodes(tmp_path: Path) -> tuple[FakeHost, FakeHost]:
    """seed 000's node (the driver on the host, a stale marker saying the container's root), and a node whose
    driver is under /run/nvidia/driver, where every path the errors name exists."""
    healthy = container_driver(FakeHost(tmp_path / "healthy"))
    healthy.executable(SOURCE)
    return seed_000(FakeHost(tmp_path / "seed-000")), healthy


@pytest.mark.parametrize("runtime", ["runc", "crun"])
def test_a_bind_mount_source_missing(
    runtime: str, tmp_path: Path, nodes: tuple[FakeHost, FakeHost], capsys: pytest.CaptureFixture[str]
) -> None:
    assert not os.path.exists(SOURCE), f"{SOURCE} exists on this machine: the runtime would mount it"
    rootfs = bundle_rootfs(tmp_path)
    config = base_config(rootfs, "true")
    config["root"]["readonly"] = False  # the runtime makes the mount point
    config["mounts"].append(
        {"destination": "/usr/bin/nvidia-smi", "type": "bind", "source": SOURCE, "options": ["ro", "nosuid", "bind"]}
    )
    outcome = Runtime(runtime, tmp_path / "state").cycle(write_bundle(tmp_path / "bundle", config), f"why-{runtime}")
    assert not outcome.created and SOURCE in outcome.create_error, outcome.create_error

    broken, healthy = nodes
    status, report = why(capsys, broken, outcome.create_error)
    expected = "mount-source-missing" if runtime == "runc" else "crun-mount-source-missing"
    assert status == 0 and signatures(report) == [expected], (outcome.create_error, report)
    assert verdicts(report) == {"HOST003": True, "validation-markers": True, "driver-root": True}, report
    status, report = why(capsys, healthy, outcome.create_error)
    assert status == 1 and verdicts(report) == {"HOST003": False, "validation-markers": False, "driver-root": False}


def podman_outputs(cases: list[dict[str, Any]]) -> list[str]:
    try:
        results = run_isolated("hooks", cases)
    except PodmanUnavailable as exc:
        pytest.fail(str(exc))
    return [result["output"] for result in results]


def test_podmans_missing_device_and_hooks_regexp(
    tmp_path: Path, nodes: tuple[FakeHost, FakeHost], capsys: pytest.CaptureFixture[str]
) -> None:
    assert not os.path.exists(DEVICE), f"{DEVICE} exists on this machine: podman would add it"
    hook = {
        "version": "1.0.0",
        "hook": {"path": "/bin/true"},
        "when": {"annotations": {"(": "x"}},
        "stages": ["prestart"],
    }
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "oci-nvidia-hook.json").write_text(json.dumps(hook))
    run = ["run", "--rm", "--pull=never", "--device", DEVICE, IMAGE, "/bin/true"]
    device_error, regexp_error = podman_outputs([{"hooks_dirs": [], "args": run}, {"hooks_dirs": [str(hooks)]}])

    broken, healthy = nodes
    status, report = why(capsys, broken, device_error)
    assert status == 0 and signatures(report) == ["device-host-path-missing"], (device_error, report)
    assert verdicts(report)["CRI002"] is True
    status, report = why(capsys, healthy, device_error)
    assert status == 1 and not any(verdicts(report).values()), report

    # The same file in the hooks directory of the node's podman: HKD005 holds there, and on no other node.
    podman_node = host_driver(FakeHost(tmp_path / "podman-node")).executable("/bin/true")
    podman_node.text("/var/lib/dpkg/status", "Package: podman\nStatus: install ok installed\nVersion: 4.3.1+ds1-8\n\n")
    podman_node.text("/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json", json.dumps(hook))
    status, report = why(capsys, podman_node, regexp_error)
    assert status == 0 and signatures(report) == ["hooks-regexp"], (regexp_error, report)
    assert verdicts(report) == {"HKD005": True}, report
    status, report = why(capsys, healthy, regexp_error)
    assert status == 1 and verdicts(report) == {"HKD005": False}, report


def release(series: str) -> Binary:
    found = [binary for binary in binaries() if binary.series == series]
    assert found, f"no containerd {series} among {binaries()}"
    return found[0]


CONTAINERD_V2 = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'


def containerd_node(host: FakeHost, config: str, release: str) -> FakeHost:
    host_driver(host).text("/etc/containerd/config.toml", config)
    host.text("/var/lib/dpkg/status", f"Package: containerd\nStatus: install ok installed\nVersion: {release}\n\n")
    return host.executable("/usr/bin/containerd-shim-runc-v2").executable("/usr/sbin/runc")


@pytest.mark.parametrize("series", ["1.7", "2.1"])
def test_containerd_refuses_a_config_version(series: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = release(series)
    config = tmp_path / "config.toml"
    config.write_text(CONTAINERD_V2.replace("version = 2", "version = 5"))
    refused = dump(binary, config, tmp_path)
    assert refused.refused, refused
    status, report = why(
        capsys, containerd_node(FakeHost(tmp_path / "node"), config.read_text(), binary.version), refused.stderr
    )
    assert status == 0 and signatures(report) == ["containerd-config-version"], (refused.stderr, report)
    assert verdicts(report) == {"CTD002": True, "CTD117": False}, report
    status, report = why(
        capsys, containerd_node(FakeHost(tmp_path / "v2"), CONTAINERD_V2, binary.version), refused.stderr
    )
    assert status == 1 and verdicts(report) == {"CTD002": False, "CTD117": False}, report


def test_containerd_17_refuses_a_version_3_dropin_under_a_version_2_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = release("1.7")
    dropins = tmp_path / "conf.d"
    dropins.mkdir()
    (dropins / "99-nvidia.toml").write_text(
        'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\n  enable_cdi = true\n'
    )
    config = tmp_path / "config.toml"
    config.write_text(f'imports = ["{dropins}/*.toml"]\n' + CONTAINERD_V2)
    refused = dump(binary, config, tmp_path)
    assert refused.refused and "unsupported config version `3`" in refused.stderr, refused
    node = containerd_node(
        FakeHost(tmp_path / "node"), 'imports = ["/etc/containerd/conf.d/*.toml"]\n' + CONTAINERD_V2, binary.version
    )
    node.text("/etc/containerd/conf.d/99-nvidia.toml", (dropins / "99-nvidia.toml").read_text())
    status, report = why(capsys, node, refused.stderr)
    assert status == 0 and verdicts(report) == {"CTD002": True, "CTD117": True}, (refused.stderr, report)


def nvidia_hook(bundle: Path, env: list[str], path: str) -> str:
    """NVIDIA's prestart hook on a bundle, as a runtime runs it: the state on stdin. Returns what it printed."""
    (bundle / "rootfs").mkdir(parents=True, exist_ok=True)
    config = {"ociVersion": "1.0.2", "process": {"env": env, "args": ["true"], "cwd": "/"}, "root": {"path": "rootfs"}}
    (bundle / "config.json").write_text(json.dumps(config))
    state = {"ociVersion": "1.0.2", "id": "why", "pid": 1, "bundle": str(bundle), "status": "creating"}
    ran = subprocess.run(
        [str(HOOK), "prestart"],
        input=json.dumps(state),
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": path},
        check=False,
    )
    assert ran.returncode != 0, ran
    return ran.stdout + ran.stderr


def test_nvidias_hook_on_capabilities_and_its_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not HOOK.is_file():
        pytest.skip(f"no NVIDIA hook at {HOOK} (../shared/peers is absent)")
    node = host_driver(FakeHost(tmp_path / "node"))
    unknown = nvidia_hook(
        tmp_path / "caps", ["NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,graphic"], "/usr/bin:/bin"
    )
    status, report = why(capsys, node, unknown)
    assert status == 0 and signatures(report) == ["unsupported-capabilities"], (unknown, report)
    assert report["causes"][0]["fix"] == "drop graphic from NVIDIA_DRIVER_CAPABILITIES", report
    known = nvidia_hook(
        tmp_path / "known",
        ["NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"],
        "/usr/bin:/bin",
    )
    # With every capability known, the hook goes on and finds no nvidia-container-cli on this machine.
    assert 'exec: "nvidia-container-cli": executable file not found in $PATH' in known, known
    status, report = why(capsys, node, known)
    assert signatures(report) == ["executable-not-found"], (known, report)
    assert any("nvidia-container-cli" in line for line in report["undecided"]), report
    # A hooks.d file that runs NVIDIA's hook with an env list and no PATH is the cause that holds.
    hook = {
        "version": "1.0.0",
        "hook": {"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["hook", "prestart"], "env": ["X=1"]},
        "when": {"always": True},
        "stages": ["prestart"],
    }
    node.executable("/usr/bin/nvidia-container-runtime-hook")
    node.text("/var/lib/dpkg/status", "Package: podman\nStatus: install ok installed\nVersion: 4.3.1+ds1-8\n\n")
    node.text("/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json", json.dumps(hook))
    status, report = why(capsys, node, known)
    assert status == 0 and [code for code, holds in verdicts(report).items() if holds] == ["HKD107"], report


RUNTIME = PEERS / "nvidia-container-runtime"


def gpu_spec(name: str) -> str:
    return (
        f'cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: "{name}"\n'
        "  containerEdits:\n    env: [GPU_FROM_CDI=1]\n"
    )


def test_nvidias_runtime_on_an_unresolvable_cdi_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not RUNTIME.is_file():
        pytest.skip(f"no NVIDIA runtime at {RUNTIME} (../shared/peers is absent)")
    specs = tmp_path / "cdi"
    specs.mkdir()
    (specs / "nvidia.yaml").write_text(gpu_spec("0"))
    log = tmp_path / "runtime.log"
    config = tmp_path / "config.toml"
    config.write_text(
        "[nvidia-container-runtime]\n"
        f'debug = "{log}"\nlog-level = "info"\nmode = "cdi"\nruntimes = ["runc"]\n'
        f'[nvidia-container-runtime.modes.cdi]\nspec-dirs = ["{specs}"]\n'
    )
    bundle = tmp_path / "bundle"
    (bundle / "rootfs").mkdir(parents=True)
    spec = {
        "ociVersion": "1.0.2",
        "process": {"env": ["PATH=/bin"], "args": ["true"], "cwd": "/", "user": {"uid": 0, "gid": 0}},
        "root": {"path": "rootfs"},
        "annotations": {"cdi.k8s.io/gpu": "nvidia.com/gpu=9"},
        "linux": {"namespaces": [{"type": "mount"}]},
    }
    (bundle / "config.json").write_text(json.dumps(spec))
    ran = subprocess.run(
        [str(RUNTIME), "--root", str(tmp_path / "state"), "create", "--bundle", str(bundle), "why-nvidia"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "NVIDIA_CTK_CONFIG_FILE_PATH": str(config)},
        check=False,
    )
    said = ran.stdout + ran.stderr
    assert ran.returncode != 0 and "unresolvable CDI devices nvidia.com/gpu=9" in said, said

    node = containerd_node(FakeHost(tmp_path / "node"), CONTAINERD_V2, "1.7.24~ds1-6")
    node.text("/var/run/cdi/nvidia.yaml", gpu_spec("0"))
    status, report = why(capsys, node, said)
    assert status == 0 and signatures(report) == ["cdi-unresolvable", "toolkit-cdi-unresolvable"], (said, report)
    assert [code for code, holds in verdicts(report).items() if holds] == ["REC001", "toolkit-cdi-specs"], report
    assert any("NVIDIA_CTK_CONFIG_FILE_PATH" in line for line in report["undecided"]), report
    defined = containerd_node(FakeHost(tmp_path / "defined"), CONTAINERD_V2, "1.7.24~ds1-6")
    defined.text("/var/run/cdi/nvidia.yaml", gpu_spec("9"))
    status, report = why(capsys, defined, said)
    assert status == 1 and not any(verdicts(report).values()), report
