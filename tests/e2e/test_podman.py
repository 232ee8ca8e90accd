"""A CDI annotation under podman 4.3: ignored by podman itself, applied by the precreate filter (a hooks.d
file) and, separately, by the wrapper given as `--runtime`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.modes.support import launchers, write_config
from tests.podman_env import IMAGE, run_isolated

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
# The variable, the node's numbers (hex) and what opening it gives: ENXIO (no GPU here) once it is allowed.
PROBE = 'echo "env=$GPU_FROM_CDI"; /bin/busybox stat -c %t:%T /dev/nvidia0; cat /dev/nvidia0 2>&1; true'


def _run(*extra: str) -> list[str]:
    return [
        "run",
        "--rm",
        "--pull=never",
        *extra,
        "--annotation",
        "cdi.k8s.io/gpu=example.com/gpu=0",
        IMAGE,
        "sh",
        "-c",
        PROBE,
    ]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    directory = tmp_path_factory.mktemp("podman-cdi")
    (directory / "cdi").mkdir()
    (directory / "cdi/gpu.json").write_text(json.dumps(SPEC))
    hook, runtime = launchers(directory / "bin")
    config = write_config(
        directory / "config.yaml",
        runtime={"low_level": ["runc"]},
        cdi={"spec_dirs": [str(directory / "cdi")]},
        log={"file": str(directory / "wrapper.log"), "syslog": False},
    )
    hooks = directory / "hooks.d"
    hooks.mkdir()
    (hooks / "nvidia-oci-hook-precreate.json").write_text(
        json.dumps(
            {
                "version": "1.0.0",
                "hook": {"path": str(hook), "args": [str(hook), "--config", str(config), "hook", "precreate"]},
                "when": {"always": True},
                "stages": ["precreate"],
            }
        )
    )
    shim = directory / "nvidia-oci-runtime"
    shim.write_text(f'#!/bin/sh\nNVIDIA_OCI_HOOK_CONFIG={config} exec {runtime} "$@"\n')
    shim.chmod(0o755)
    cases = [
        {"hooks_dirs": [], "args": _run()},
        {"hooks_dirs": [str(hooks)], "args": _run()},
        {"hooks_dirs": [], "args": _run("--runtime", str(shim))},
    ]
    found = run_isolated("hooks", cases)
    log = directory / "wrapper.log"
    return [*found, {"log": [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []}]


def test_podman_alone_ignores_the_annotation(results: list[dict[str, Any]]) -> None:
    plain = results[0]
    assert plain["status"] == 0, plain["output"]
    assert plain["stdout"].startswith("env=\n")
    assert "can't stat '/dev/nvidia0'" in plain["output"]


@pytest.mark.parametrize(("index", "mode"), [(1, "precreate"), (2, "runtime")])
def test_applied_by_the_precreate_filter_and_by_the_runtime_wrapper(
    results: list[dict[str, Any]], index: int, mode: str
) -> None:
    run = results[index]
    assert run["status"] == 0, run["output"]
    lines = run["stdout"].splitlines()
    assert lines[:2] == ["env=1", "c3:0"], run["output"]
    assert "No such device or address" in run["stdout"]
    logged = [entry for entry in results[-1]["log"] if entry["mode"] == mode]
    assert len(logged) == 1 and {edit["code"] for edit in logged[0]["edits"]} == {"REC006"}
