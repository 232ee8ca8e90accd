"""The precreate filter and the prestart/createRuntime guard, run as the engines run them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.support import config, device
from tests.runtime.support import launchers, run, write_config


def _settings(tmp_path: Path, **policy: object) -> Path:
    return write_config(
        tmp_path / "config.yaml",
        log={"file": str(tmp_path / "hook.log"), "syslog": False},
        cdi={"spec_dirs": [str(tmp_path / "cdi")]},
        **({"policy": policy} if policy else {}),
    )


def _gpu_config() -> dict[str, object]:
    value = config()
    value["linux"]["devices"] = [device("/dev/nvidia0", 195, 0), device("/dev/nvidiactl", 195, 255)]
    return value


def test_precreate_edits_with_an_empty_environment(tmp_path: Path) -> None:
    hook, _ = launchers(tmp_path / "bin")
    cfg = _settings(tmp_path)
    result = run(
        [str(hook), "--config", str(cfg), "hook", "precreate"], stdin=json.dumps(_gpu_config()).encode(), env={}
    )
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    minors = [rule.get("minor") for rule in output["linux"]["resources"]["devices"][1:]]
    assert minors == [0, 255]
    assert json.loads((tmp_path / "hook.log").read_text())["mode"] == "precreate"


def test_precreate_hands_back_an_unchanged_config_byte_for_byte(tmp_path: Path) -> None:
    hook, _ = launchers(tmp_path / "bin")
    raw = json.dumps(config(), indent=3).encode()
    result = run([str(hook), "--config", str(_settings(tmp_path)), "hook", "precreate"], stdin=raw, env={})
    assert (result.returncode, result.stdout) == (0, raw)
    garbage = b"{not json"
    result = run([str(hook), "--config", str(_settings(tmp_path)), "hook", "precreate"], stdin=garbage, env={})
    assert (result.returncode, result.stdout) == (0, garbage)


def test_precreate_refusal(tmp_path: Path) -> None:
    hook, _ = launchers(tmp_path / "bin")
    value = config(annotations={"cdi.k8s.io/gpu": "example.com/gpu=0"})
    result = run(
        [str(hook), "--config", str(_settings(tmp_path)), "hook", "precreate"], stdin=json.dumps(value).encode(), env={}
    )
    assert result.returncode == 1 and result.stdout == b""
    assert result.stderr.decode().count("\n") == 1
    assert "[REC001] CDI device example.com/gpu=0" in result.stderr.decode()


def _state(bundle: Path, crun: bool) -> bytes:
    state: dict[str, object] = {
        "ociVersion": "1.0.2",
        "id": "c1",
        "status": "creating",
        "pid": 4242,
        "bundle": str(bundle),
    }
    if crun:
        state.update(status="created", root="/run/crun")  # crun's variant
    return json.dumps(state).encode()


@pytest.mark.parametrize("crun", [False, True])
@pytest.mark.parametrize("stage", ["prestart", "createRuntime"])
def test_guard_refuses_an_unusable_gpu_with_one_line(tmp_path: Path, crun: bool, stage: str) -> None:
    hook, _ = launchers(tmp_path / "bin")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(_gpu_config()))
    result = run([str(hook), "--config", str(_settings(tmp_path)), "hook", stage], stdin=_state(bundle, crun), env={})
    assert result.returncode == 1
    stderr = result.stderr.decode()
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith(
        "nvidia-oci-hook: refusing container c1: [DEV003] no rule in linux.resources.devices allows /dev/nvidia0"
    )
    assert "(and 1 more)" in stderr
    logged = json.loads((tmp_path / "hook.log").read_text())
    assert logged["mode"] == "prestart" and len(logged["findings"]) == 2


def test_guard_passes_a_reconciled_spec_and_honours_the_policy(tmp_path: Path) -> None:
    hook, _ = launchers(tmp_path / "bin")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    value = _gpu_config()
    value["linux"]["resources"]["devices"] += [
        {"allow": True, "type": "c", "major": 195, "minor": minor, "access": "rwm"} for minor in (0, 255)
    ]
    (bundle / "config.json").write_text(json.dumps(value))
    result = run(
        [str(hook), "--config", str(_settings(tmp_path)), "hook", "prestart"], stdin=_state(bundle, False), env={}
    )
    assert (result.returncode, result.stderr) == (0, b"")
    (bundle / "config.json").write_text(json.dumps(_gpu_config()))
    cfg = _settings(tmp_path, fail_on="never")
    result = run([str(hook), "--config", str(cfg), "hook", "prestart"], stdin=_state(bundle, False), env={})
    assert result.returncode == 0


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        (b"", "the state on stdin is not JSON"),
        (b"[]", "the state on stdin has no bundle"),
        (b'{"bundle": "/nonexistent"}', "cannot check the container: /nonexistent/config.json"),
    ],
)
def test_guard_that_cannot_check_says_so_and_refuses_only_fail_closed(
    tmp_path: Path, stdin: bytes, message: str
) -> None:
    hook, _ = launchers(tmp_path / "bin")
    result = run([str(hook), "--config", str(_settings(tmp_path)), "hook", "prestart"], stdin=stdin, env={})
    assert result.returncode == 0
    assert result.stderr.decode().count("\n") == 1 and message in result.stderr.decode()
    closed = _settings(tmp_path, fail_closed=True)
    result = run([str(hook), "--config", str(closed), "hook", "prestart"], stdin=stdin, env={})
    assert result.returncode == 1 and "policy.fail_closed is set" in result.stderr.decode()


@pytest.mark.parametrize("args", [["hook", "poststop"], ["hook"], ["hook", "prestart", "extra"]])
def test_hook_usage_errors_are_one_line(tmp_path: Path, args: list[str]) -> None:
    hook, _ = launchers(tmp_path / "bin")
    result = run([str(hook), "--config", str(_settings(tmp_path)), *args], env={})
    assert result.returncode == 1
    usage = "usage: nvidia-oci-hook hook precreate|prestart|createRuntime  (the config or state on stdin)"
    assert result.stderr.decode() == f"nvidia-oci-hook: {usage}\n"
