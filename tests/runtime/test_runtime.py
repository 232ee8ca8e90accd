"""The runtime wrapper: which invocations reconcile, what reaches the real runtime, how failures read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nvidia_oci_hook.runtime.wrapper import find_runtime, parse_invocation
from tests.engine.support import config, device
from tests.helpers import control_node
from tests.runtime.support import fake_runtime, launchers, run, write_config


@pytest.mark.parametrize(
    ("args", "subcommand", "bundle", "container"),
    [
        (["create", "--bundle", "/b", "id"], "create", "/b", "id"),
        (["create", "--bundle=/b", "id"], "create", "/b", "id"),
        (["create", "-b", "/b", "id"], "create", "/b", "id"),
        (["create", "-b=/b", "id"], "create", "/b", "id"),
        (["create", "-bundle", "/b", "id"], "create", "/b", "id"),
        (["create", "--b", "/b", "id"], "create", "/b", "id"),
        (
            [
                "--root",
                "/r",
                "--log",
                "/l",
                "--log-format",
                "json",
                "create",
                "--bundle",
                "/b",
                "--pid-file",
                "p",
                "id",
            ],
            "create",
            "/b",
            "id",
        ),
        (
            ["--root=/r", "--systemd-cgroup", "create", "--pid-file", "/p", "--console-socket", "/s", "id"],
            "create",
            None,
            "id",
        ),
        (["create", "id", "--bundle", "/b"], "create", "/b", "id"),
        (["run", "--bundle", "create", "id"], "run", None, None),
        (["--root", "create", "state", "create"], "state", None, None),
        (["--log", "create", "delete", "--force", "create"], "delete", None, None),
        (["--", "create", "-b", "/b", "x"], "create", "/b", "x"),
        (["features"], "features", None, None),
        ([], None, None, None),
    ],
)
def test_invocations(args: list[str], subcommand: str, bundle: str, container: str) -> None:
    invocation = parse_invocation(args)
    assert (invocation.subcommand, invocation.bundle, invocation.container_id) == (subcommand, bundle, container)


def test_log_options() -> None:
    invocation = parse_invocation(["--log", "/l", "--log-format=json", "create", "x"])
    assert (invocation.log_file, invocation.log_format) == ("/l", "json")


def test_runtime_lookup_skips_the_wrapper_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    for directory in (first, second):
        (directory / "runc").write_text("#!/bin/sh\n")
        (directory / "runc").chmod(0o755)
    env = {"PATH": f"{first}:{second}"}
    assert find_runtime(("crun", "runc"), env) == str(first / "runc")
    monkeypatch.setattr("sys.argv", [str(first / "runc")])
    assert find_runtime(("runc",), env) == str(second / "runc")
    assert find_runtime(("/nonexistent/runc",), env) is None


def _bundle(tmp_path: Path, value: dict[str, object]) -> Path:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(value, indent=2))
    os.chmod(bundle / "config.json", 0o640)
    return bundle


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    record = tmp_path / "record"
    record.mkdir(exist_ok=True)
    return {"PATH": "/usr/bin:/bin", "RECORD_DIR": str(record), "NVIDIA_OCI_HOOK_LOG_SYSLOG": "false", **extra}


def test_create_reconciles_then_execs_the_runtime(tmp_path: Path) -> None:
    _, runtime = launchers(tmp_path / "bin")
    value = config()
    value["linux"]["devices"] = [control_node(), device("/dev/nvidia0", 195, 0), device("/dev/nvidia0", 195, 0)]
    value["linux"]["resources"]["devices"].append(
        {"allow": True, "type": "c", "major": 195, "minor": 255, "access": "rwm"}
    )
    bundle = _bundle(tmp_path, value)
    log = tmp_path / "wrapper.log"
    cfg = write_config(
        tmp_path / "config.yaml", runtime={"low_level": [str(fake_runtime(tmp_path))]}, log={"file": str(log)}
    )
    args = ["--root", "/run/r", "create", "--bundle", str(bundle), "--pid-file", "/p", "ctr1"]
    result = run([str(runtime), *args], env=_env(tmp_path, NVIDIA_OCI_HOOK_CONFIG=str(cfg)))
    assert result.returncode == 0, result.stderr
    assert result.stdout == b'{"status":"created"}\n'  # the runtime's own output, nothing of ours
    record = tmp_path / "record"
    assert (record / "args").read_text().split("\n")[:-1] == args  # argv unchanged
    seen = json.loads((record / "config.json").read_text())
    assert seen["linux"]["devices"] == [control_node(), device("/dev/nvidia0", 195, 0)]
    assert seen["linux"]["resources"]["devices"][-1]["minor"] == 0
    assert os.stat(bundle / "config.json").st_mode & 0o777 == 0o640  # mode kept
    entry = json.loads(log.read_text())
    assert entry["mode"] == "runtime" and entry["container"] == "ctr1"
    assert [edit["code"] for edit in entry["edits"]] == ["DEV001", "DEV003"]
    assert not list(bundle.glob(".*tmp"))


def test_exec_keeps_the_pid(tmp_path: Path) -> None:
    _, runtime = launchers(tmp_path / "bin")
    cfg = write_config(tmp_path / "config.yaml", runtime={"low_level": [str(fake_runtime(tmp_path))]})
    import subprocess

    process = subprocess.Popen(
        [str(runtime), "state", "x"], env=_env(tmp_path, NVIDIA_OCI_HOOK_CONFIG=str(cfg)), stdout=subprocess.PIPE
    )
    process.communicate(timeout=30)
    assert (tmp_path / "record/pid").read_text().strip() == str(process.pid)


def test_unchanged_config_is_not_rewritten(tmp_path: Path) -> None:
    _, runtime = launchers(tmp_path / "bin")
    bundle = _bundle(tmp_path, config())
    before = os.stat(bundle / "config.json")
    cfg = write_config(
        tmp_path / "config.yaml",
        runtime={"low_level": [str(fake_runtime(tmp_path))]},
        log={"file": str(tmp_path / "log")},
    )
    result = run([str(runtime), "create", "-b", str(bundle), "c"], env=_env(tmp_path, NVIDIA_OCI_HOOK_CONFIG=str(cfg)))
    assert result.returncode == 0
    after = os.stat(bundle / "config.json")
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    assert not (tmp_path / "log").exists()


def test_refusal_is_written_like_runc(tmp_path: Path) -> None:
    _, runtime = launchers(tmp_path / "bin")
    value = config(annotations={"cdi.k8s.io/gpu": "example.com/gpu=0"})
    bundle = _bundle(tmp_path, value)
    cfg = write_config(
        tmp_path / "config.yaml",
        runtime={"low_level": [str(fake_runtime(tmp_path))]},
        cdi={"spec_dirs": [str(tmp_path / "cdi")]},
        log={"file": ""},
    )
    runc_log = tmp_path / "runc.log"
    args = ["--log", str(runc_log), "--log-format", "json", "create", "--bundle", str(bundle), "c9"]
    result = run([str(runtime), *args], env=_env(tmp_path, NVIDIA_OCI_HOOK_CONFIG=str(cfg)))
    assert result.returncode == 1
    assert result.stdout == b""
    assert not (tmp_path / "record/args").exists()  # the runtime never ran
    line = json.loads(runc_log.read_text())
    assert line["level"] == "error"
    assert line["msg"].startswith("nvidia-oci-hook: refusing container c9: [REC001] CDI device example.com/gpu=0")
    assert "is unresolvable (not-defined)" in line["msg"]
    assert json.loads(result.stderr.decode())["msg"] == line["msg"]


def test_bad_configuration_still_runs_the_container(tmp_path: Path) -> None:
    _, runtime = launchers(tmp_path / "bin")
    bundle = _bundle(tmp_path, config())
    cfg = tmp_path / "config.yaml"
    cfg.write_text("policy:\n  fail_on: sometimes\n")
    env = _env(
        tmp_path,
        NVIDIA_OCI_HOOK_CONFIG=str(cfg),
        NVIDIA_OCI_HOOK_RUNTIME_LOW_LEVEL=str(fake_runtime(tmp_path)),
        NVIDIA_OCI_HOOK_LOG_FILE=str(tmp_path / "log"),
    )
    result = run([str(runtime), "create", "--bundle", str(bundle), "c"], env=env)
    assert result.returncode == 0
    assert (
        "configuration ignored" in result.stderr.decode() and "policy.fail_on must be one of" in result.stderr.decode()
    )
    assert (tmp_path / "record/args").exists()


def test_no_runtime_found(tmp_path: Path) -> None:
    _, runtime = launchers(tmp_path / "bin")
    env = _env(tmp_path, NVIDIA_OCI_HOOK_CONFIG="/dev/null", NVIDIA_OCI_HOOK_RUNTIME_LOW_LEVEL="no-such-runtime")
    result = run([str(runtime), "state", "x"], env=env)
    assert result.returncode == 1
    assert b"none of no-such-runtime found in PATH" in result.stderr
