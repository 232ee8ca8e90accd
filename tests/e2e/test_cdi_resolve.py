"""Unresolvable CDI devices end to end: containerd 1.7 through CRI and podman 4.3 each refuse (or ignore) a
request for nvidia.com/gpu=0 for one reason, and `cdi resolve` names that reason.

containerd runs with its own configuration (enable_cdi, cdi_spec_dirs in a temporary directory); `cdi resolve`
finds the running daemon in /proc, follows its --config and asks its binary for its release. podman 4.3 reads
only /etc/cdi and /var/run/cdi: the podman cases run in a mount namespace of their own where temporary
directories are bound over those two (tests/podman_env.py, mode cdi).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.engine import cdi_reasons
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.locations import find_locations
from tests.containerd.real import CANDIDATES
from tests.e2e.cri import CRIDaemon, run_pod_container
from tests.podman_env import run_isolated

pytestmark = [pytest.mark.runtime, pytest.mark.root]

REPOSITORY = Path(__file__).resolve().parents[2]
CONTAINERD_17 = CANDIDATES[1]
NAME = "nvidia.com/gpu=0"


def spec(version: str = "0.5.0", env: str = "GPU_FROM_CDI=1") -> str:
    return (
        f'cdiVersion: "{version}"\nkind: nvidia.com/gpu\ndevices:\n- name: "0"\n  containerEdits:\n    env: [{env}]\n'
    )


# reason -> {relative path: text} under the spec directory; the podman cases add the directory each file is in.
BROKEN_SPEC = spec().replace("env:", "evn:")
CASES = {
    cdi_reasons.NOT_LOADED: {"nvidia.yaml": BROKEN_SPEC},
    cdi_reasons.CONFLICT: {"nvidia.yaml": spec(), "nvidia-copy.yaml": spec()},
    cdi_reasons.NOT_SCANNED: {"nvidia/nvidia.yaml": spec()},
    cdi_reasons.LIBRARY_TOO_OLD: {"nvidia.yaml": spec("1.0.0")},
}


def write(directory: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        (directory / relative).parent.mkdir(parents=True, exist_ok=True)
        (directory / relative).write_text(text)


def cdi_resolve(*args: str) -> tuple[int, dict[str, Any]]:
    result = subprocess.run(
        [sys.executable, "-m", "nvidia_oci_hook", "cdi", "resolve", "--format", "json", *args, NAME],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPOSITORY,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


@pytest.fixture(scope="module")
def spec_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cdi-resolve")


def containerd_case(spec_root: Path, reason: str) -> Iterator[tuple[CRIDaemon, Path]]:
    directory = spec_root / f"containerd-{reason}"
    directory.mkdir()
    write(directory, CASES.get(reason, {"nvidia.yaml": spec()}))
    with CRIDaemon.start(
        containerd=CONTAINERD_17,
        container_annotations=["cdi.k8s.io/*"],
        enable_cdi=reason != cdi_reasons.CDI_OFF,
        cdi_spec_dirs=[directory],
    ) as daemon:
        yield daemon, directory


@pytest.mark.parametrize("reason", [*CASES, cdi_reasons.CDI_OFF])
def test_containerd_17_through_cri(spec_root: Path, reason: str) -> None:
    for daemon, directory in containerd_case(spec_root, reason):
        result = run_pod_container(
            daemon, command=["sh", "-c", "echo env=$GPU_FROM_CDI"], annotations={"cdi.k8s.io/gpu": NAME}
        )
        if reason == cdi_reasons.CDI_OFF:
            # enable_cdi = false: the request is ignored, and the container starts without the device.
            assert result.ran, result.error
            assert result.stdout == "env=\n"
        else:
            assert not result.ran
            assert result.error is not None and f"unresolvable CDI devices {NAME}" in result.error, result.error
        # The running daemon, found in /proc: its --config and its own binary's release.
        config = str(daemon.workdir / "config.toml")
        running = [d for d in find_locations(HostView("/")).daemons if d.config == config]
        assert [d.version for d in running] == ["1.7.24"]
        status, report = cdi_resolve("--engine", "containerd", "--containerd-config", config)
        (engine,) = report["engines"]
        assert engine["label"] == "containerd 1.7.24"
        (found,) = engine["names"]
        assert status == 1 and found["reason"] == reason, found
        if reason != cdi_reasons.CDI_OFF:
            assert found["engine_error"].startswith(f"unresolvable CDI devices {NAME}")
            assert all(path.startswith(str(directory)) for path in found["files"])
        logged = daemon.log().replace('\\"', '"')
        if reason in (cdi_reasons.NOT_LOADED, cdi_reasons.LIBRARY_TOO_OLD):
            # What the library says of the spec, as containerd logs it once at its refresh.
            said = found["engine_error"].split("logged once at WARN: ", 1)[1].rstrip(")")
            assert said in logged, logged[-2000:]
        if reason == cdi_reasons.CONFLICT:
            assert f'conflicting device "{NAME}"' in logged


def test_containerd_17_resolves_a_good_spec(spec_root: Path) -> None:
    for daemon, _ in containerd_case(spec_root, "good"):
        result = run_pod_container(
            daemon, command=["sh", "-c", "echo env=$GPU_FROM_CDI"], annotations={"cdi.k8s.io/gpu": NAME}
        )
        assert result.ran and result.stdout == "env=1\n", result.error
        status, report = cdi_resolve(
            "--engine", "containerd", "--containerd-config", str(daemon.workdir / "config.toml")
        )
        assert status == 0 and report["engines"][0]["names"][0]["resolved"]


@pytest.fixture(scope="module")
def podman_results(spec_root: Path) -> dict[str, dict[str, Any]]:
    cases = []
    for reason, files in {**CASES, "good": {"nvidia.yaml": spec()}}.items():
        etc = spec_root / f"podman-{reason}" / "etc"
        run = spec_root / f"podman-{reason}" / "run"
        etc.mkdir(parents=True)
        run.mkdir()
        # The conflict needs both files in one directory; the others sit in /var/run/cdi as the operator's do.
        write(run, files)
        cases.append({"reason": reason, "etc_cdi": str(etc), "run_cdi": str(run), "name": NAME})
    return {result["reason"]: result for result in run_isolated("cdi", cases)}


@pytest.mark.parametrize("reason", list(CASES))
def test_podman_43(podman_results: dict[str, dict[str, Any]], reason: str) -> None:
    result = podman_results[reason]
    assert result["status"] != 0
    assert f"unresolvable CDI devices {NAME}" in result["output"], result["output"]
    (engine,) = result["resolve"]["engines"]
    assert engine["label"] == "podman 4.3.1" and engine["cdi_library"] == "0.5.2"
    (found,) = engine["names"]
    assert result["resolve_status"] == 1 and found["reason"] == reason, found


def test_podman_43_resolves_a_good_spec(podman_results: dict[str, dict[str, Any]]) -> None:
    result = podman_results["good"]
    assert result["status"] == 0 and result["stdout"] == "env=1\n", result["output"]
    assert result["resolve_status"] == 0
