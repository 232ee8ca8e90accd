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
    assert [match["signature"] for match in report["matches"]] == ["mount-source-missing"]  # its stat is runc's
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


DPKG = "Package: {0}\nStatus: install ok installed\nVersion: {1}\n\n"
CRIO_CONF = '[crio.runtime]\ndefault_runtime = "crun"\n'
NVIDIA_HANDLER = '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/local/bin/nvidia-oci-hook-runtime"\n'
CONTAINERD_V2 = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'
CONTAINERD_NVIDIA = (
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
    '  runtime_type = "io.containerd.runc.v2"\n'
    '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
    '    BinaryName = "/usr/bin/nvidia-container-runtime"\n'
)
GPU_SPEC = (
    'cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: "0"\n'
    "  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n"
)


def crio_node(host: FakeHost, config: str = CRIO_CONF) -> FakeHost:
    host_driver(host).text("/etc/crio/crio.conf", config).text("/var/lib/dpkg/status", DPKG.format("cri-o", "1.37.0"))
    host.executable("/usr/bin/crun").executable("/usr/bin/conmon").directory("/usr/share/containers/oci/hooks.d")
    host.executable("/usr/bin/true")  # the hooks' program: cri-o skips, unread, a hook file whose program is missing
    return host.directory("/etc/cdi").directory("/var/run/cdi")


def containerd_node(host: FakeHost, config: str = CONTAINERD_V2, release: str = "1.7.24~ds1-6") -> FakeHost:
    host_driver(host).text("/etc/containerd/config.toml", config)
    host.text("/var/lib/dpkg/status", DPKG.format("containerd", release))
    return host.executable("/usr/bin/containerd-shim-runc-v2").executable("/usr/sbin/runc")


def hook_file(stages: str, when: str = '{"always": true}') -> str:
    return f'{{"version": "1.0.0", "hook": {{"path": "/usr/bin/true"}}, "when": {when}, "stages": {stages}}}'


def signature_and_verdicts(report: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    return [match["signature"] for match in report["matches"]], verdicts(report)


def test_cri_o_runtime_handler_missing_dropped_and_present(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        'E1201 10:00:00 remote_runtime.go:193] "RunPodSandbox from runtime service failed" err="rpc error: code = '
        'Unknown desc = failed to find runtime handler nvidia from runtime list map[crun:0xc000 runc:0xc001]"'
    )
    status, report = why(capsys, crio_node(fake_host), text)
    assert status == 0
    assert signature_and_verdicts(report) == (
        ["crio-runtime-handler-unknown"],
        {"engines": True, "RuntimeClass": True, "CRO103": False, "CRO109": False},
    )
    assert report["causes"][0]["evidence"] == ["cri-o runtime handlers: crun (crun)"]
    assert "[crio.runtime.runtimes.nvidia]" in report["causes"][0]["fix"]
    assert report["causes"][1]["summary"].startswith("the pod's runtimeClassName names a RuntimeClass whose handler")
    assert "register a handler nvidia" in report["causes"][1]["fix"]
    assert any("restart" in line for line in report["undecided"])
    # Configured, but its program is gone: cri-o dropped it at start.
    dropped = crio_node(FakeHost(tmp_path / "dropped"), CRIO_CONF + NVIDIA_HANDLER)
    status, report = why(capsys, dropped, text)
    assert status == 0 and verdicts(report) == {
        "engines": False,
        "RuntimeClass": False,
        "CRO103": True,
        "CRO109": False,
    }
    present = crio_node(FakeHost(tmp_path / "present"), CRIO_CONF + NVIDIA_HANDLER)
    present.executable("/usr/local/bin/nvidia-oci-hook-runtime")
    status, report = why(capsys, present, text)
    assert status == 1
    assert verdicts(report) == {"engines": False, "RuntimeClass": False, "CRO103": False, "CRO109": False}


def test_containerd_runtime_missing_and_present(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    text = 'failed to get sandbox runtime: no runtime for \\"nvidia\\" is configured'
    status, report = why(capsys, containerd_node(fake_host), text)
    assert status == 0
    assert signature_and_verdicts(report) == (
        ["containerd-runtime-handler-unknown"],
        {"engines": True, "RuntimeClass": True, "CTD117": False},
    )
    assert report["causes"][0]["evidence"] == ["containerd runtime handlers: runc (io.containerd.runc.v2)"]
    configured = containerd_node(FakeHost(tmp_path / "configured"), CONTAINERD_V2 + CONTAINERD_NVIDIA)
    status, report = why(capsys, configured, text)
    assert status == 1 and verdicts(report) == {"engines": False, "RuntimeClass": False, "CTD117": False}


def test_a_runtime_program_not_found(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        'failed to create containerd task: failed to start shim: exec: "nvidia-container-runtime": executable file '
        "not found in $PATH: unknown"
    )
    status, report = why(capsys, containerd_node(fake_host, CONTAINERD_V2 + CONTAINERD_NVIDIA), text)
    assert status == 0
    assert signature_and_verdicts(report) == (
        ["executable-not-found"],
        {"CTD111": True, "CRO103": False, "HKD101": False, "HKD107": False},
    )
    installed = containerd_node(FakeHost(tmp_path / "installed"), CONTAINERD_V2 + CONTAINERD_NVIDIA)
    installed.executable("/usr/bin/nvidia-container-runtime")
    status, report = why(capsys, installed, text)
    assert status == 1 and verdicts(report) == {"CTD111": False, "CRO103": False, "HKD101": False, "HKD107": False}


def test_containerd_config_versions(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = "containerd: failed to load TOML from /etc/containerd/config.toml: unsupported config version `5`"
    five = CONTAINERD_V2.replace("version = 2", "version = 5")
    status, report = why(capsys, containerd_node(fake_host, five), refused)
    assert status == 0
    assert signature_and_verdicts(report) == (["containerd-config-version"], {"CTD002": True, "CTD117": False})
    # containerd 1.7 merges the imports first: a version 3 drop-in under a version 2 root gets the same words, and
    # judged as the node's 1.7.24 the drop-in's own version is one that release refuses.
    dropin = containerd_node(
        FakeHost(tmp_path / "dropin"), 'imports = ["/etc/containerd/conf.d/*.toml"]\n' + CONTAINERD_V2
    )
    dropin.text("/etc/containerd/conf.d/99-nvidia.toml", 'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\n')
    status, report = why(capsys, dropin, refused.replace("`5`", "`3`"))
    assert status == 0 and verdicts(report) == {"CTD002": True, "CTD117": True}
    assert "99-nvidia.toml" in next(cause["summary"] for cause in report["causes"] if cause["code"] == "CTD002")
    newer = "containerd: drop-in config version 3 higher than root config version 2"
    status, report = why(capsys, dropin, newer)
    assert status == 0 and signature_and_verdicts(report) == (["containerd-dropin-version"], {"CTD117": True})
    status, report = why(capsys, containerd_node(FakeHost(tmp_path / "plain")), newer)
    assert status == 1 and verdicts(report) == {"CTD117": False}
    two = "expected containerd config version equal to or less than `3`, got `4`"
    status, report = why(capsys, containerd_node(FakeHost(tmp_path / "plain2")), two)
    assert status == 1 and [match["text"] for match in report["matches"]] == [two]


def test_cri_o_hooks_files_that_stop_it(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    hooks = "/usr/share/containers/oci/hooks.d"
    precreate = crio_node(fake_host).text(f"{hooks}/oci-nvidia-hook.json", hook_file('["precreate"]'))
    text = 'time="2026-12-01T10:00:00Z" level=fatal msg="unknown stage \\"precreate\\""'
    status, report = why(capsys, precreate, text)
    assert status == 0 and signature_and_verdicts(report) == (["crio-precreate-stage"], {"HKD204": True})
    clean = crio_node(FakeHost(tmp_path / "clean")).text(f"{hooks}/oci-nvidia-hook.json", hook_file('["prestart"]'))
    status, report = why(capsys, clean, text)
    assert status == 1 and verdicts(report) == {"HKD204": False}
    regexp = 'invalid annotation key "(": error parsing regexp: missing closing ): `(`'
    broken = crio_node(FakeHost(tmp_path / "regexp"))
    broken.text(f"{hooks}/oci-nvidia-hook.json", hook_file('["prestart"]', '{"annotations": {"(": "x"}}'))
    status, report = why(capsys, broken, regexp)
    assert status == 0 and signature_and_verdicts(report) == (["hooks-regexp"], {"HKD005": True})
    status, report = why(capsys, clean, regexp)
    assert status == 1 and verdicts(report) == {"HKD005": False}


def test_cdi_unresolvable_on_a_containerd_node(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    containerd_node(fake_host).text("/var/run/cdi/nvidia.yaml", GPU_SPEC)
    text = (
        'failed to generate container "c1" spec: CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=9'
    )
    status, report = why(capsys, fake_host, text)
    assert status == 0 and report["matches"] == [{"signature": "cdi-unresolvable", "text": text}]
    assert verdicts(report)["REC001"] is True
    assert [code for code, holds in verdicts(report).items() if holds] == ["REC001"]
    status, report = why(capsys, fake_host, text.replace("gpu=9", "gpu=0"))
    assert status == 1 and not any(verdicts(report).values())


def test_lost_gpu_access_and_cuda_insufficient(
    fake_host: FakeHost, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    host_driver(fake_host)  # /dev/nvidiactl and /dev/nvidia0 without their /dev/char links
    for text, signature in (
        ("Failed to initialize NVML: Unknown Error", "nvml-unknown-error"),
        ("open /dev/nvidiactl: operation not permitted", "nvidia-node-eperm"),
    ):
        status, report = why(capsys, fake_host, text)
        assert status == 0
        assert signature_and_verdicts(report) == ([signature], {"gpu-access": False, "dev-char-links": True})
        assert any("doctor --check gpu-access" in line for line in report["undecided"])
    linked = host_driver(FakeHost(tmp_path / "linked"))
    linked.symlink("/dev/char/195:255", "../nvidiactl").symlink("/dev/char/195:0", "../nvidia0")
    status, report = why(capsys, linked, "Failed to initialize NVML: Unknown Error")
    assert status == 1 and verdicts(report) == {"gpu-access": False, "dev-char-links": False}

    cuda = "CUDA error: CUDA driver version is insufficient for CUDA runtime version"
    status, report = why(capsys, upgraded_without_reboot(FakeHost(tmp_path / "upgraded")), cuda)
    assert status == 0 and verdicts(report) == {"driver-versions": True, "DRV001": None}
    status, report = why(capsys, two_gpu_node(FakeHost(tmp_path / "matching")), cuda)
    assert status == 1 and verdicts(report) == {"driver-versions": False, "DRV001": None}
    assert "12.4" in next(cause["summary"] for cause in report["causes"] if cause["code"] == "DRV001")
