"""A CDI annotation under containerd 1.6 through CRI: ignored by containerd (it skips enable_cdi), applied when
runc is reached through the wrapper as the runc shim's BinaryName."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cri import CRIDaemon, SpecRecorder, run_pod_container
from tests.modes.support import launchers, write_config

pytestmark = [pytest.mark.runtime, pytest.mark.root]

SPEC = {
    "cdiVersion": "0.5.0",
    "kind": "example.com/gpu",
    "devices": [
        {
            "name": "0",
            "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}]},
        }
    ],
    "containerEdits": {"env": ["GPU_FROM_CDI=1"]},
}
REQUEST = {"cdi.k8s.io/gpu": "example.com/gpu=0"}
# The variable, the node's numbers (hex), and what opening it gives: ENXIO (no GPU here) once it is allowed.
PROBE = ["sh", "-c", 'echo "env=$GPU_FROM_CDI"; stat -c %t:%T /dev/nvidia0; cat /dev/nvidia0 2>&1; true']


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert os.geteuid() == 0, "these tests need root"
    directory = tmp_path_factory.mktemp("containerd-cdi")
    (directory / "cdi").mkdir()
    (directory / "cdi/gpu.json").write_text(json.dumps(SPEC))
    return directory


def _daemon(binary_name: Path, spec_dir: Path) -> CRIDaemon:
    # enable_cdi and cdi_spec_dirs as a 1.7 node would have them: 1.6 ignores both.
    return CRIDaemon.start(
        binary_name=binary_name, container_annotations=["cdi.k8s.io/*"], enable_cdi=True, cdi_spec_dirs=[spec_dir]
    )


@pytest.fixture(scope="module")
def plain(workspace: Path) -> Iterator[tuple[CRIDaemon, SpecRecorder]]:
    recorder = SpecRecorder.write(workspace / "plain")
    with _daemon(recorder.path, workspace / "cdi") as daemon:
        yield daemon, recorder


@pytest.fixture(scope="module")
def wrapped(workspace: Path) -> Iterator[tuple[CRIDaemon, Path]]:
    _, runtime = launchers(workspace / "bin")
    config = write_config(
        workspace / "config.yaml",
        runtime={"low_level": ["runc"]},
        cdi={"spec_dirs": [str(workspace / "cdi")]},
        log={"file": str(workspace / "wrapper.log"), "syslog": False},
    )
    # The shim passes containerd's environment on; a node sets the configuration file's default path instead.
    shim = workspace / "nvidia-oci-runtime"
    shim.write_text(f'#!/bin/sh\nNVIDIA_OCI_HOOK_CONFIG={config} exec {runtime} "$@"\n')
    shim.chmod(0o755)
    with _daemon(shim, workspace / "cdi") as daemon:
        yield daemon, workspace / "wrapper.log"


def test_containerd_16_ignores_the_cdi_request(plain: tuple[CRIDaemon, SpecRecorder]) -> None:
    daemon, recorder = plain
    result = run_pod_container(daemon, command=PROBE, annotations=REQUEST)
    assert result.ran, result.error
    assert "env=\n" in result.stdout
    assert "can't stat '/dev/nvidia0'" in result.output
    spec = recorder.spec(result.container_id or "")
    assert spec is not None and spec["annotations"]["cdi.k8s.io/gpu"] == "example.com/gpu=0"  # it reached the spec
    assert "GPU_FROM_CDI=1" not in spec["process"]["env"]


def test_the_wrapper_applies_it(wrapped: tuple[CRIDaemon, Path]) -> None:
    daemon, log = wrapped
    result = run_pod_container(daemon, command=PROBE, annotations=REQUEST)
    assert result.ran, result.error
    lines = result.stdout.splitlines()
    assert lines[:2] == ["env=1", "c3:0"]
    assert "No such device or address" in result.output  # allowed: the driver, absent here, answers ENXIO
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    mine = [entry for entry in entries if entry["container"] == result.container_id]
    assert len(mine) == 1 and {edit["code"] for edit in mine[0]["edits"]} == {"REC006"}


def test_a_refusal_reaches_the_cri_caller_in_runc_style(wrapped: tuple[CRIDaemon, Path]) -> None:
    daemon, _ = wrapped
    result = run_pod_container(daemon, command=PROBE, annotations={"cdi.k8s.io/gpu": "example.com/gpu=9"})
    assert not result.ran
    # The shim reads the runc-style JSON line from its --log file: containerd's error quotes our message.
    assert result.error is not None and "nvidia-oci-hook: refusing container" in result.error, result.error
    assert "[REC001] CDI device example.com/gpu=9" in result.error
