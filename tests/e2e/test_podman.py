"""A CDI annotation under podman 4.3: ignored by podman itself, applied by the precreate filter (a hooks.d
file) and, separately, by the wrapper given as `--runtime`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.gpu_request import ANNOTATION, PROBE, Wrapper
from tests.podman_env import IMAGE, run_isolated

pytestmark = [pytest.mark.runtime, pytest.mark.root]


def _run(*extra: str) -> list[str]:
    return ["run", "--rm", "--pull=never", *extra, "--annotation", "=".join(ANNOTATION), IMAGE, "sh", "-c", PROBE]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    wrapper = Wrapper(tmp_path_factory.mktemp("podman-cdi"))
    hooks = wrapper.config.parent / "hooks.d"
    hooks.mkdir()
    hook = str(wrapper.hook)
    (hooks / "nvidia-oci-hook-precreate.json").write_text(
        json.dumps(
            {
                "version": "1.0.0",
                "hook": {"path": hook, "args": [hook, "--config", str(wrapper.config), "hook", "precreate"]},
                "when": {"always": True},
                "stages": ["precreate"],
            }
        )
    )
    cases = [
        {"hooks_dirs": [], "args": _run()},
        {"hooks_dirs": [str(hooks)], "args": _run()},
        {"hooks_dirs": [], "args": _run("--runtime", str(wrapper.runtime))},
    ]
    return [*run_isolated("hooks", cases), {"log": wrapper.entries()}]


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
