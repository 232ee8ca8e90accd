"""`why TEXT` on fake node roots: each signature on a node where its cause holds and on one where it does not, the
error as it arrives in practice (wrapped, escaped, prefixed, several in one paste), the output contract, the exit
statuses, and no traceback on any input."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from tests.helpers import FakeHost
from tests.node.fakenodes import (
    container_driver,
    host_driver,
    seed_000,
    seed_003,
    two_gpu_node,
    upgraded_without_reboot,
)

pytestmark = pytest.mark.root

SEED_000 = (
    'Error: failed to generate container "5d0c3b" spec: failed to generate spec: lstat '
    "/run/nvidia/driver/dev/nvidiactl: no such file or directory"
)
SEED_003 = (
    "Error: container create failed: privileged container was configured with a device container path that "
    "already exists on the host"
)


def why(capsys: pytest.CaptureFixture[str], host: FakeHost, text: str, *extra: str) -> tuple[int, dict[str, Any]]:
    status = main(["why", "--host-root", str(host.root), "--format", "json", *extra, text])
    out, err = capsys.readouterr()
    assert err == ""
    return status, json.loads(out)


def verdicts(report: dict[str, Any]) -> dict[str, Any]:
    return {cause["code"]: cause["holds"] for cause in report["causes"]}


def test_seed_000_on_its_node_and_on_a_driver_container_node(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = why(capsys, seed_000(fake_host), SEED_000)
    assert status == 0
    assert [match["signature"] for match in report["matches"]] == ["device-host-path-missing"]
    assert report["matches"][0]["text"] == "lstat /run/nvidia/driver/dev/nvidiactl: no such file or directory"
    assert verdicts(report) == {"CRI002": True, "validation-markers": True, "driver-root": True}
    markers = next(cause for cause in report["causes"] if cause["code"] == "validation-markers")
    assert "rm -f /run/nvidia/validations/toolkit-ready" in markers["fix"]
    assert any("CONFIG.json" in line for line in report["undecided"])

    healthy = container_driver(FakeHost(tmp_path / "healthy"))
    status, report = why(capsys, healthy, SEED_000)
    assert status == 1
    assert verdicts(report) == {"CRI002": False, "validation-markers": False, "driver-root": False}


def test_seed_003_on_its_node_and_on_a_clean_one(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = why(capsys, seed_003(fake_host), SEED_003)
    assert status == 0
    assert verdicts(report) == {"stray-device-nodes": True, "NODE002": True}
    assert report["causes"][0]["fix"].startswith("rm /dev/nvidia0 /dev/nvidiactl")
    status, report = why(capsys, container_driver(FakeHost(tmp_path / "clean")), SEED_003)
    assert status == 1
    assert verdicts(report) == {"stray-device-nodes": False, "NODE002": False}


@pytest.mark.parametrize(
    "paste",
    [
        pytest.param(f'E1202 07:42:08.123456    4242 log.go:32] "CreateContainer failed" err="{SEED_000}"', id="klog"),
        pytest.param(
            'Dec 02 07:42:08 gpu-node-7 kubelet[4242]: E1202 07:42:08.123456 4242 pod_workers.go:1298] "Error syncing '
            'pod" err="failed to \\"StartContainer\\" with CreateContainerError: \\"failed to generate container '
            '\\\\\\"5d0c3b\\\\\\" spec: failed to generate spec: lstat /run/nvidia/driver/dev/nvidiactl: no such file '
            'or directory\\""',
            id="journal-escaped-twice",
        ),
        pytest.param(
            "    State:          Waiting\n      Reason:       CreateContainerError\n      Message:      failed to "
            'generate container "5d0c3b" spec: failed to generate spec: lstat /run/nvidia/dri\n  ver/dev/nvidiactl: '
            "no such file or directory\n",
            id="kubectl-describe-wrapped-inside-the-path",
        ),
        pytest.param(
            '  Warning  Failed  3s (x4 over 41s)  kubelet  Error: failed to generate container "5d0c3b" spec: '
            "failed to generate spec: lstat\n/run/nvidia/driver/dev/nvidiactl: no such file or directory",
            id="kubectl-event-wrapped-at-a-space",
        ),
        pytest.param("2026-12-02T07:42:08.123Z " + SEED_000 + "\r\n\x1b[0m", id="timestamp-and-terminal-codes"),
    ],
)
def test_the_seed_000_error_as_it_arrives(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str], paste: str
) -> None:
    status, report = why(capsys, seed_000(fake_host), paste)
    assert status == 0, report
    assert [match["text"] for match in report["matches"]] == [
        "lstat /run/nvidia/driver/dev/nvidiactl: no such file or directory"
    ]


def test_two_errors_in_one_paste_each_explained(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_003(fake_host)
    paste = f"{SEED_003}\n---\nwarning: {SEED_000}\n"
    status, report = why(capsys, fake_host, paste)
    assert status == 0
    assert [match["signature"] for match in report["matches"]] == [
        "crio-device-path-exists",
        "device-host-path-missing",
    ]
    # seed 003's node keeps its driver under /run/nvidia/driver: the nodes seed 000 names are there
    assert verdicts(report)["CRI002"] is False and verdicts(report)["stray-device-nodes"] is True
    assert [cause["holds"] for cause in report["causes"]] == sorted(
        (cause["holds"] for cause in report["causes"]), key=lambda holds: {True: 0, None: 1, False: 2}[holds]
    )


def test_mount_source_of_another_driver_root(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    runc = (
        "runc create failed: unable to start container process: error during container init: error mounting "
        '"/run/nvidia/driver/usr/bin/nvidia-smi" to rootfs at "/usr/bin/nvidia-smi": stat '
        "/run/nvidia/driver/usr/bin/nvidia-smi: no such file or directory: unknown"
    )
    status, report = why(capsys, seed_000(fake_host), runc)
    assert status == 0
    assert report["matches"][0]["signature"] == "mount-source-missing"
    assert verdicts(report) == {"HOST003": True, "validation-markers": True, "driver-root": True}


def test_driver_library_mismatch_after_an_upgrade_and_on_a_matching_node(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown"
    status, report = why(capsys, upgraded_without_reboot(fake_host), text)
    assert status == 0 and verdicts(report) == {"driver-versions": True}
    status, report = why(capsys, two_gpu_node(FakeHost(tmp_path / "matching")), text)
    assert status == 1 and verdicts(report) == {"driver-versions": False}


def test_requirement_against_the_loaded_driver(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver to "
        "a newer version, or use an earlier cuda container: unknown"
    )
    status, report = why(capsys, two_gpu_node(fake_host, "550.54.15"), text)
    assert status == 0 and verdicts(report) == {"DRV001": True}
    assert "12.4" in " ".join(report["causes"][0]["evidence"])
    status, report = why(capsys, two_gpu_node(FakeHost(tmp_path / "newer"), "570.86.10"), text)
    assert status == 1 and verdicts(report) == {"DRV001": False}


def test_unknown_device_against_the_gpus_listed(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    two_gpu_node(fake_host)
    status, report = why(capsys, fake_host, "nvidia-container-cli: device error: 2: unknown device: unknown")
    assert status == 0 and verdicts(report) == {"DRV004": True}
    status, report = why(capsys, fake_host, "nvidia-container-cli: device error: 1: unknown device: unknown")
    assert status == 1 and verdicts(report) == {"DRV004": False}


def test_unsupported_capabilities(fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]) -> None:
    host_driver(fake_host)
    status, report = why(capsys, fake_host, "unsupported capabilities found in 'compute,gpu' (allowed 'compute')")
    assert status == 0 and report["causes"][0]["fix"] == "drop gpu from NVIDIA_DRIVER_CAPABILITIES"
    status, report = why(capsys, fake_host, "unsupported capabilities found in 'compute,video' (allowed 'x')")
    assert status == 1


def test_this_projects_own_refusal(fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]) -> None:
    host_driver(fake_host)
    line = (
        "nvidia-oci-hook: refusing container c1: [GPU001] /dev/nvidia0 is given without /dev/nvidiactl at "
        "/linux/devices/0; fix: add /dev/nvidiactl (c 195:255) (and 1 more)"
    )
    status, report = why(capsys, fake_host, f"error running hook #0: exit status 1, stderr: {line}")
    assert status == 0
    assert report["causes"][0]["code"] == "GPU001"
    assert report["causes"][0]["fix"] == "add /dev/nvidiactl (c 195:255)"


def test_text_output_puts_the_cause_that_holds_first(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["why", "--host-root", str(seed_000(fake_host).root), SEED_000])
    out, err = capsys.readouterr()
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("recognised device-host-path-missing:")
    assert lines[3].startswith("[holds] CRI002: the device's host path /run/nvidia/driver/dev/nvidiactl")
    assert lines[-1].startswith("3 of 3 causes hold on this node")
    assert len(lines) < 40


def test_unrecognised_text_and_the_readers(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    host_driver(fake_host)
    status, report = why(capsys, fake_host, "the pod is pending: 0/3 nodes are available")
    assert status == 3
    assert report == {"version": 1, "recognized": False, "matches": [], "causes": [], "undecided": []}
    paste = tmp_path / "paste.txt"
    paste.write_text(SEED_003)
    status = main(["why", "--host-root", str(fake_host.root), "--file", str(paste)])
    assert status == 1  # recognised; this node has no stray nodes
    capsys.readouterr()


@pytest.mark.parametrize(
    "args",
    [[], ["TEXT", "--file", "/etc/hostname"], ["--file", "/nonexistent/paste"], ["--host-root", "/nonexistent", "x"]],
    ids=["nothing", "both", "missing-file", "missing-root"],
)
def test_usage_errors_are_one_line_and_status_2(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    status = main(["why", *args])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert err.strip().splitlines()[-1].startswith(("Error: ", "nvidia-oci-hook: ")) and "Traceback" not in err


def test_no_traceback_on_any_input(fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]) -> None:
    host_driver(fake_host)
    chooser = random.Random(23)
    pieces = [
        SEED_000, SEED_003, "\\", '\\"', "\\\\\\\"", "\n", "  ", "lstat /", ": no such file or directory",
        "unresolvable CDI devices ", "nvidia.com/gpu=", "device error: ", "\x00", "\udcff", "é", "[GPU001] ",
        "nvidia-oci-hook: refusing container ", "error mounting \"", "requirement error: unsatisfied condition: ",
    ]  # fmt: skip
    for _ in range(150):
        text = "".join(chooser.choice(pieces) for _ in range(chooser.randrange(1, 12)))
        status = main(
            [
                "why",
                "--host-root",
                str(fake_host.root),
                text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
            ]
        )
        out, err = capsys.readouterr()
        assert status in (0, 1, 3), (text, out, err)
        assert "Traceback" not in err
