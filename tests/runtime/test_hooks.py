"""The precreate filter and the prestart/createRuntime guard, run as the engines run them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.support import config, device
from tests.runtime.support import fake_runtime, launchers, run, settled, write_config


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
    # The one reason, not only "not defined": no spec directory of the settings holds a spec at all.
    assert "is unresolvable (not-defined): no spec in" in result.stderr.decode()
    assert "defines it; no spec defines any device" in result.stderr.decode()
    assert result.stderr.decode().rstrip().endswith("(nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml)")


def _bundle(tmp_path: Path, value: object) -> Path:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(value))
    return bundle


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
    bundle = _bundle(tmp_path, _gpu_config())
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


def _gpu_without_control() -> dict[str, object]:
    """A GPU node and its allow rule, and no /dev/nvidiactl: nothing for the engine to edit, and no GPU to use."""
    value = config()
    value["linux"]["devices"] = [device("/dev/nvidia0", 195, 0)]
    value["linux"]["resources"]["devices"].append(
        {"allow": True, "type": "c", "major": 195, "minor": 0, "access": "rwm"}
    )
    return value


GPU001_REFUSAL = (
    "nvidia-oci-hook: refusing container c1: [GPU001] /dev/nvidia0 is listed but /dev/nvidiactl is not: CUDA and "
    'NVML cannot use the GPU at /linux/devices/0; fix: add {"path": "/dev/nvidiactl", "type": "c", "major": 195, '
    '"minor": 255} to linux.devices\n'
)


@pytest.mark.parametrize("crun", [False, True])
@pytest.mark.parametrize("stage", ["prestart", "createRuntime"])
def test_guard_refuses_a_gpu_without_its_control_node(tmp_path: Path, crun: bool, stage: str) -> None:
    hook, _ = launchers(tmp_path / "bin")
    bundle = _bundle(tmp_path, _gpu_without_control())
    cfg = settled(_settings(tmp_path))
    # With the configuration on the command line, and as hooks.d runs it (named in the environment), the second
    # time with the record the sh front reads.
    for args, env in (
        (["--config", str(cfg), "hook", stage], {}),
        (["hook", stage], {"NVIDIA_OCI_HOOK_CONFIG": str(cfg)}),
        (["hook", stage], {"NVIDIA_OCI_HOOK_CONFIG": str(cfg)}),
    ):
        result = run([str(hook), *args], stdin=_state(bundle, crun), env=env)
        assert (result.returncode, result.stderr.decode()) == (1, GPU001_REFUSAL), args
    logged = [json.loads(line) for line in (tmp_path / "hook.log").read_text().splitlines()]
    assert [[finding["code"] for finding in entry["findings"]] for entry in logged] == [["GPU001"]] * 3
    assert logged[0]["findings"][0]["gpu_unusable"] is True
    # Refused only as the policy says: "error" refuses it too, "never" lets it start.
    for fail_on, status in (("error", 1), ("never", 0)):
        policy = _settings(tmp_path, fail_on=fail_on)
        result = run([str(hook), "--config", str(policy), "hook", stage], stdin=_state(bundle, crun), env={})
        assert result.returncode == status, fail_on


def test_wrapper_and_precreate_refuse_a_gpu_without_its_control_node(tmp_path: Path) -> None:
    hook, runtime = launchers(tmp_path / "bin")
    bundle = _bundle(tmp_path, _gpu_without_control())
    raw = (bundle / "config.json").read_bytes()
    cfg = write_config(
        tmp_path / "config.yaml",
        runtime={"low_level": [str(fake_runtime(tmp_path))]},
        log={"file": str(tmp_path / "hook.log"), "syslog": False},
    )
    record = tmp_path / "record"
    record.mkdir()
    env = {"PATH": "/usr/bin:/bin", "RECORD_DIR": str(record), "NVIDIA_OCI_HOOK_CONFIG": str(cfg)}
    result = run([str(runtime), "create", "--bundle", str(bundle), "c1"], env=env)
    assert result.returncode == 1 and not (record / "args").exists(), "the real runtime never ran"
    assert "[GPU001] /dev/nvidia0 is listed but /dev/nvidiactl is not" in result.stderr.decode()
    assert (bundle / "config.json").read_bytes() == raw
    result = run([str(hook), "--config", str(cfg), "hook", "precreate"], stdin=raw, env={})
    assert result.returncode == 1 and result.stdout == b""
    assert result.stderr.decode().startswith("nvidia-oci-hook: refusing the container: [GPU001] /dev/nvidia0")


def test_guard_passes_a_reconciled_spec_and_honours_the_policy(tmp_path: Path) -> None:
    hook, _ = launchers(tmp_path / "bin")
    value = _gpu_config()
    value["linux"]["resources"]["devices"] += [
        {"allow": True, "type": "c", "major": 195, "minor": minor, "access": "rwm"} for minor in (0, 255)
    ]
    bundle = _bundle(tmp_path, value)
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
