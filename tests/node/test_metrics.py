"""`doctor --format prometheus`: the real promtool accepts the output without a lint message, and the values are
the checks' own, for seed 003's broken node, a healthy node, a log the real runtime modes wrote, and CDI names
an engine cannot resolve; `--output` replaces the file atomically."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from nvidia_oci_hook import __version__
from nvidia_oci_hook.cli import main
from nvidia_oci_hook.node.doctor import CHECK_NAMES
from nvidia_oci_hook.node.metrics import count_log
from tests.engine.support import config, device
from tests.helpers import FakeHost
from tests.node.fakenodes import host_driver, seed_000, seed_003
from tests.node.test_cdi_resolve import containerd_node as containerd_release
from tests.node.test_cdi_resolve import spec
from tests.node.test_lint_node import containerd_node, crio_node, write
from tests.runtime.support import fake_runtime, launchers, run, write_config

pytestmark = pytest.mark.root

STRAY = 'nvidia_oci_hook_check_status{check="stray-device-nodes"}'


def promtool_lint(path: Path) -> None:
    """promtool check metrics: exit 0 and not one line of lint (a missing HELP, a counter without _total...)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing (apt-get install prometheus; scripts/setup test installs it)")
    with open(path, "rb") as handle:
        result = subprocess.run([promtool, "check", "metrics"], stdin=handle, capture_output=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b""), result


def samples(path: Path) -> dict[str, str]:
    """Series (name and labels, as written) -> value; every family announced by HELP and TYPE before its series."""
    found: dict[str, str] = {}
    announced: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            word, name = line.split()[1:3]
            announced.setdefault(name, set()).add(word)
            continue
        series, value = line.rsplit(" ", 1)
        assert announced.get(series.split("{")[0]) == {"HELP", "TYPE"}, line
        found[series] = value
    return found


def doctor_metrics(host: FakeHost, output: Path, *extra: str) -> tuple[int, dict[str, str]]:
    status = main(["doctor", "--host-root", str(host.root), "--format", "prometheus", "--output", str(output), *extra])
    promtool_lint(output)
    return status, samples(output)


def seed_003_node(host: FakeHost) -> FakeHost:
    crio_node(seed_003(host))
    write(host, "/proc/driver/nvidia/params", "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\n")
    return host


def test_seed_003(fake_host: FakeHost, as_root: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed_003_node(fake_host)
    output = tmp_path / "textfile" / "nvidia-oci-hook.prom"
    output.parent.mkdir()
    before = time.time()
    status, found = doctor_metrics(fake_host, output)
    assert status == 1  # doctor's own: the node has errors; the file is written all the same
    assert capsys.readouterr() == ("", "")  # --output: nothing on the terminal
    assert found[STRAY] == "2"
    assert found["nvidia_oci_hook_stray_device_nodes"] == "2"
    assert found['nvidia_oci_hook_check_status{check="modify-device-files"}'] == "1"
    assert found['nvidia_oci_hook_check_status{check="validation-markers"}'] == "0"
    assert found['nvidia_oci_hook_check_status{check="nvml"}'] == "3"  # not read under --host-root
    assert found['nvidia_oci_hook_driver_root_info{root="/run/nvidia/driver",status="found"}'] == "1"
    assert found[f'nvidia_oci_hook_build_info{{version="{__version__}"}}'] == "1"
    assert found["nvidia_oci_hook_validation_markers_contradicting"] == "0"
    assert found["nvidia_oci_hook_containers_gpu_access_lost"] == "0"
    assert found["nvidia_oci_hook_cdi_specs_unreconciled"] == "0"
    assert found['nvidia_oci_hook_cdi_unresolvable_names{engine="cri-o"}'] == "0"
    assert before <= float(found["nvidia_oci_hook_last_run_timestamp_seconds"]) <= time.time()
    assert 0 < float(found["nvidia_oci_hook_doctor_duration_seconds"]) < 60
    # One gauge per check that ran, and no log: no counters.
    assert len([series for series in found if series.startswith("nvidia_oci_hook_check_status{")]) == len(CHECK_NAMES)
    assert not [series for series in found if series.endswith("_total") or "_total{" in series]
    assert stat.S_IMODE(os.stat(output).st_mode) == 0o644
    assert os.listdir(output.parent) == ["nvidia-oci-hook.prom"]
    # After the repair the same file says so, replaced rather than rewritten in place.
    inode = os.stat(output).st_ino
    status, found = doctor_metrics(fake_host, output, "--fix")
    assert (found[STRAY], found["nvidia_oci_hook_stray_device_nodes"]) == ("0", "0")
    assert os.stat(output).st_ino != inode and os.listdir(output.parent) == ["nvidia-oci-hook.prom"]


def test_healthy_node(fake_host: FakeHost, as_root: None, tmp_path: Path) -> None:
    containerd_node(host_driver(fake_host), "/")
    fake_host.symlink("/dev/char/195:0", "../nvidia0").symlink("/dev/char/195:255", "../nvidiactl")
    status, found = doctor_metrics(fake_host, tmp_path / "out.prom")
    assert status == 0
    statuses = {series: value for series, value in found.items() if series.startswith("nvidia_oci_hook_check_status")}
    assert statuses and set(statuses.values()) <= {"0", "3"}, statuses
    assert found[STRAY] == "0" and found["nvidia_oci_hook_stray_device_nodes"] == "0"
    assert found['nvidia_oci_hook_driver_root_info{root="/",status="found"}'] == "1"
    assert found['nvidia_oci_hook_cdi_unresolvable_names{engine="containerd"}'] == "0"


def test_no_driver_root_and_one_check(fake_host: FakeHost, as_root: None, tmp_path: Path) -> None:
    """No driver: root "" with status none, and the counts a check could not judge left out, not written as 0."""
    fake_host.device("/dev/nvidia0", "c", 195, 0)
    status, found = doctor_metrics(fake_host, tmp_path / "out.prom")
    assert status == 1
    assert found['nvidia_oci_hook_driver_root_info{root="",status="none"}'] == "1"
    assert found[STRAY] == "3" and "nvidia_oci_hook_stray_device_nodes" not in found
    assert "nvidia_oci_hook_validation_markers_contradicting" not in found
    _, found = doctor_metrics(fake_host, tmp_path / "out.prom", "--check", "stray-device-nodes")
    assert [series for series in found if "check_status" in series] == [STRAY]
    assert "nvidia_oci_hook_driver_root_info" not in " ".join(found)


def test_a_driver_root_whose_name_needs_escaping(fake_host: FakeHost, as_root: None, tmp_path: Path) -> None:
    root = '/opt/nv"id\\ia'
    fake_host.executable(f"{root}/usr/bin/nvidia-smi").file(f"{root}/usr/lib/libnvidia-ml.so.1")
    fake_host.file(f"{root}/usr/lib/libcuda.so.1").file("/proc/driver/nvidia/version")
    fake_host.device(f"{root}/dev/nvidiactl", "c", 195, 255).device(f"{root}/dev/nvidia0", "c", 195, 0)
    _, found = doctor_metrics(fake_host, tmp_path / "out.prom", "--driver-root", root)
    assert found['nvidia_oci_hook_driver_root_info{root="/opt/nv\\"id\\\\ia",status="found"}'] == "1", found


def test_cdi_names_an_engine_cannot_resolve(
    fake_host: FakeHost, as_root: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """containerd 1.7's library refuses a 0.8.0 spec (its two names), and two specs of one directory conflict."""
    containerd_release(fake_host).text("/var/run/cdi/nvidia.yaml", spec(version="0.8.0"))
    fake_host.text("/etc/cdi/a.yaml", spec(names=("1",), kind="example.com/gpu"))
    fake_host.text("/etc/cdi/b.yaml", spec(names=("1", "2"), kind="example.com/gpu"))
    _, found = doctor_metrics(fake_host, tmp_path / "out.prom")
    assert found['nvidia_oci_hook_cdi_unresolvable_names{engine="containerd"}'] == "3"
    main(["doctor", "--host-root", str(fake_host.root), "--format", "json", "--check", "engines"])
    (engines,) = json.loads(capsys.readouterr().out)["checks"]
    assert engines["counts"] == {"cdi_unresolvable_names": {"containerd": 3}}
    assert engines["evidence"][-1] == (
        "containerd cannot resolve 3 CDI device names its specs declare: example.com/gpu=1 (conflict), "
        "nvidia.com/gpu=0 (library-too-old), nvidia.com/gpu=all (library-too-old)"
    )


def test_what_the_device_plugins_handed_out(fake_host: FakeHost, as_root: None, tmp_path: Path) -> None:
    """Seed 000 seen from the kubelet's checkpoint: one pod given the missing driver root's nodes, one pod gone;
    with no pods directory nor running container, the gone pods are not judged: that count is left out."""
    from tests.node.test_device_plugins import (
        DRIVER_DEV,
        POD_A,
        POD_B,
        answer,
        checkpoint,
        entry,
        gpu_devices,
        plugin_dir,
        pod,
    )

    seed_000(fake_host)
    plugin_dir(fake_host, "nvidia-gpu.sock")
    checkpoint(fake_host, entry(POD_A, answer(gpu_devices(DRIVER_DEV))), entry(POD_B, answer(gpu_devices())))
    _, found = doctor_metrics(fake_host, tmp_path / "out.prom")
    assert found['nvidia_oci_hook_check_status{check="device-plugins"}'] == "2"
    assert (found["nvidia_oci_hook_device_plugin_allocations"],
            found["nvidia_oci_hook_device_plugin_allocations_missing_host_path"],
            found["nvidia_oci_hook_device_plugin_unresolved_cdi_names"],
            found["nvidia_oci_hook_device_plugin_unregistered_resources"]) == ("2", "1", "0", "0")  # fmt: skip
    assert "nvidia_oci_hook_device_plugin_stale_allocations" not in found
    pod(fake_host, POD_A)
    _, found = doctor_metrics(fake_host, tmp_path / "out.prom")
    assert found["nvidia_oci_hook_device_plugin_stale_allocations"] == "1"
    assert found["nvidia_oci_hook_device_plugin_allocations_missing_host_path"] == "1"


def test_counters_from_the_log_the_runtime_modes_wrote(fake_host: FakeHost, as_root: None, tmp_path: Path) -> None:
    """The real wrapper reconciles one container and the real precreate filter and guard refuse one each; the
    counters of the node's log (log.file under --host-root) say so."""
    host_driver(fake_host)
    log = fake_host.root / "var/log/nvidia-oci-hook.log"
    log.parent.mkdir(parents=True)
    hook, runtime = launchers(tmp_path / "bin")
    cfg = write_config(
        tmp_path / "config.yaml",
        runtime={"low_level": [str(fake_runtime(tmp_path))]},
        log={"file": str(log), "syslog": False},
    )
    output = tmp_path / "out.prom"
    _, found = doctor_metrics(fake_host, output)
    assert "nvidia_oci_hook_containers_reconciled_total" not in " ".join(found)  # no log yet: no counters
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    value = config()
    # Twice the same node and no allow rules: one duplicate dropped (DEV001), the rules added (DEV003).
    value["linux"]["devices"] = [device("/dev/nvidiactl", 195, 255), device("/dev/nvidia0", 195, 0)] * 2
    (bundle / "config.json").write_text(json.dumps(value))
    env = {"PATH": "/usr/bin:/bin", "RECORD_DIR": str(tmp_path), "NVIDIA_OCI_HOOK_CONFIG": str(cfg)}
    assert run([str(runtime), "create", "--bundle", str(bundle), "c1"], env=env).returncode == 0
    unusable = config()
    unusable["linux"]["devices"] = [device("/dev/nvidia0", 195, 0)]
    raw = json.dumps(unusable).encode()
    assert run([str(hook), "--config", str(cfg), "hook", "precreate"], stdin=raw, env={}).returncode == 1
    (bundle / "config.json").write_bytes(raw)
    state = json.dumps({"ociVersion": "1.0.2", "id": "c2", "status": "creating", "pid": 1, "bundle": str(bundle)})
    assert run([str(hook), "--config", str(cfg), "hook", "prestart"], stdin=state.encode(), env={}).returncode == 1
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(entry["mode"], entry.get("refused")) for entry in entries] == [
        ("runtime", None),
        ("precreate", True),
        ("prestart", True),
    ]
    edits = [edit["code"] for edit in entries[0]["edits"]]
    _, found = doctor_metrics(fake_host, output)
    assert found['nvidia_oci_hook_containers_reconciled_total{mode="runtime"}'] == "1"
    assert found['nvidia_oci_hook_containers_reconciled_total{mode="precreate"}'] == "0"
    assert {code: found[f'nvidia_oci_hook_edits_total{{mode="runtime",code="{code}"}}'] for code in edits} == {
        code: str(edits.count(code)) for code in edits
    }
    assert {"DEV001", "DEV003"} <= set(edits)
    assert found['nvidia_oci_hook_containers_refused_total{mode="precreate"}'] == "1"
    assert found['nvidia_oci_hook_containers_refused_total{mode="prestart"}'] == "1"
    assert found['nvidia_oci_hook_containers_refused_total{mode="runtime"}'] == "0"
    # After two rotations (FILE.1, FILE.2.gz) the rotated entries still count: a rotation is no counter reset.
    shutil.copy(log, log.with_name(log.name + ".1"))
    with open(log, "rb") as source, gzip.open(log.with_name(log.name + ".2.gz"), "wb") as target:
        target.write(source.read())
    _, found = doctor_metrics(fake_host, output)
    assert found['nvidia_oci_hook_containers_reconciled_total{mode="runtime"}'] == "3"
    assert found['nvidia_oci_hook_containers_refused_total{mode="prestart"}'] == "3"
    for rotated in log.parent.glob(log.name + ".*"):
        rotated.unlink()
    # A log that cannot be read: the counters are absent, not reset to 0.
    log.unlink()  # root reads any file whatever its mode: a directory in its place cannot be read
    log.mkdir()
    _, found = doctor_metrics(fake_host, output)
    assert not [series for series in found if "_total" in series]


def test_count_log_skips_what_is_not_an_entry() -> None:
    counts = count_log(
        [
            {"mode": "runtime", "edits": [{"code": "DEV001"}, "junk"]},
            {"mode": "runtime", "refused": True, "edits": [{"code": "DEV003"}]},  # never applied
            {"mode": 3, "edits": [{"code": "DEV001"}]},
            {"mode": "precreate", "edits": []},
        ]
    )
    assert counts.reconciled == {"runtime": 1, "precreate": 0}
    assert counts.edits == {("runtime", "DEV001"): 1}
    assert counts.refused == {"runtime": 1, "precreate": 0, "prestart": 0}


def test_output_that_cannot_be_written(
    fake_host: FakeHost, as_root: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host_driver(fake_host)
    missing = tmp_path / "missing" / "x.prom"
    assert main(["doctor", "--host-root", str(fake_host.root), "--output", str(missing)]) == 2
    assert capsys.readouterr() == ("", f"nvidia-oci-hook: {missing}: cannot write: No such file or directory\n")
    # Every format goes to the file the same way, with doctor's own exit status.
    assert main(["doctor", "--host-root", str(fake_host.root), "--format", "json", "-o", str(tmp_path / "d.json")]) == 0
    assert json.loads((tmp_path / "d.json").read_text())["status"] == "warning"
    assert capsys.readouterr().out == ""
