"""deploy/kubernetes/Containerfile built and run: the image the DaemonSet names, built with podman on a Debian 12
base (the package tests' mmdebstrap root, imported as the base image; tests/deploy_image.py builds it once for
this test and tests/kubelet's), then run with the DaemonSet's own command, mounts and security settings against a
fake seed-003 node mounted read-only at /host. It writes the metrics file the alerts read, and stops at once on
SIGTERM, as a pod's termination sends it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy_image import TAG, ImageUnavailable, image_archive
from tests.helpers import FakeHost
from tests.node.fakenodes import seed_003
from tests.podman_env import run_isolated

pytestmark = [pytest.mark.runtime, pytest.mark.root]

REPOSITORY = Path(__file__).resolve().parents[2]
DEPLOY = REPOSITORY / "deploy/kubernetes"


def _container() -> dict[str, Any]:
    daemonset = yaml.safe_load((DEPLOY / "daemonset.yaml").read_text())
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    return container  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    host = seed_003(FakeHost(tmp_path_factory.mktemp("node") / "host"))
    textfile = tmp_path_factory.mktemp("textfile")
    container = _container()
    env = [f"--env={item['name']}={item['value']}" for item in container["env"]]
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] and context["capabilities"]["drop"] == ["ALL"]
    run = [
        *env,
        "--read-only",
        "--cap-drop=all",
        "--security-opt=no-new-privileges",
        f"--user={context['runAsUser']}",
        f"--volume={host.root}:/host:ro",
        f"--volume={textfile}:/textfile",
        f"--entrypoint={container['command'][0]}",
    ]
    try:
        archive = image_archive()
    except ImageUnavailable as error:
        return {"build": str(error)}
    case = {
        "archive": str(archive),
        "tag": TAG,
        "run": run,
        "image_args": [*container["command"][1:], *container["args"]],
        "wait_for": str(textfile / "nvidia-oci-hook.prom"),
        "timeout": 60,
    }
    (result,) = run_isolated("image", [case], timeout=900)
    result["metrics"] = (textfile / "nvidia-oci-hook.prom").read_text() if result.get("appeared_after") else ""
    return result


def test_the_containerfile_builds(ran: dict[str, Any]) -> None:
    assert "build" not in ran, ran["build"]
    assert ran["load"] == 0, ran["load_output"]


def test_the_daemonsets_command_writes_the_nodes_metrics(ran: dict[str, Any]) -> None:
    assert ran.get("run") == 0, ran.get("run_output")
    assert ran["appeared_after"] is not None, ran.get("logs")
    lines = ran["metrics"].splitlines()
    assert 'nvidia_oci_hook_check_status{check="stray-device-nodes"} 2' in lines
    assert "nvidia_oci_hook_stray_device_nodes 2" in lines
    assert 'nvidia_oci_hook_driver_root_info{root="/run/nvidia/driver",status="found"} 1' in lines


def test_it_stops_at_once_on_sigterm(ran: dict[str, Any]) -> None:
    # The loop traps TERM and exits 0; without the trap, sh would wait out its sleep and podman would kill it.
    assert ran["exit_code"] == "0", ran.get("logs")
    assert ran["stop_seconds"] < 5
