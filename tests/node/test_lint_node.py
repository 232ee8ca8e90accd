"""`lint --node` on fake node roots: each seed's cause and fix, and nothing at error level on healthy nodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from tests.helpers import FakeHost
from tests.node.fakenodes import LIB, container_driver, host_driver, seed_000, seed_003

pytestmark = pytest.mark.root


def cdi_spec(root: str) -> str:
    """An NVIDIA CDI spec as generated for the given driver root."""
    root = root.rstrip("/")
    return f"""\
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
  - name: "0"
    containerEdits:
      deviceNodes:
        - path: /dev/nvidia0
          hostPath: {root}/dev/nvidia0
containerEdits:
  deviceNodes:
    - path: /dev/nvidiactl
      hostPath: {root}/dev/nvidiactl
  mounts:
    - hostPath: {root}{LIB}/libcuda.so.1
      containerPath: {LIB}/libcuda.so.1
      options: [ro, nosuid, nodev, bind]
"""


CONTAINERD = """\
version = 2
[plugins."io.containerd.grpc.v1.cri"]
  enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
"""

CRIO = """\
[crio.runtime]
default_runtime = "crun"
"""


def write(host: FakeHost, path: str, text: str) -> None:
    target = host.root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def containerd_node(host: FakeHost, spec_root: str) -> FakeHost:
    write(host, "/etc/containerd/config.toml", CONTAINERD)
    host.executable("/usr/bin/containerd-shim-runc-v2").executable("/usr/sbin/runc")
    write(host, "/var/run/cdi/nvidia.yaml", cdi_spec(spec_root))
    return host


def crio_node(host: FakeHost) -> FakeHost:
    write(host, "/etc/crio/crio.conf", CRIO)
    host.executable("/usr/bin/crun").executable("/usr/bin/conmon").directory("/usr/share/containers/oci/hooks.d")
    host.directory("/etc/cdi").directory("/var/run/cdi")
    return host


def lint_node(host: FakeHost, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any]]:
    status = main(["lint", "--node", "--host-root", str(host.root), "--format", "json", *extra])
    return status, json.loads(capsys.readouterr().out)


def findings(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f["code"], file["path"], f["severity"]) for file in report["files"] for f in file["findings"]]


def test_seed_000_names_the_stale_markers_and_the_stale_specs(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    containerd_node(seed_000(fake_host), "/run/nvidia/driver")
    status, report = lint_node(fake_host, capsys)
    found = findings(report)
    assert ("NODE001", "/run/nvidia/validations/toolkit-ready", "error") in found
    stale = [f for file in report["files"] for f in file["findings"] if f["code"] == "CDI102"]
    assert {f["hint"].split()[-1] for f in stale} >= {"/dev/nvidiactl", "/dev/nvidia0", f"{LIB}/libcuda.so.1"}
    assert all(path == "/var/run/cdi/nvidia.yaml" for code, path, _ in found if code == "CDI102")
    assert status == 1


def test_seed_003_names_the_stray_nodes(fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]) -> None:
    crio_node(seed_003(fake_host))
    write(fake_host, "/etc/cdi/nvidia.yaml", cdi_spec("/run/nvidia/driver"))
    status, report = lint_node(fake_host, capsys)
    errors = {(code, path) for code, path, severity in findings(report) if severity == "error"}
    assert errors == {("NODE002", "/dev/nvidia0"), ("NODE002", "/dev/nvidiactl")}
    assert status == 1


@pytest.mark.parametrize("layout", ["host-driver+containerd", "container-driver+cri-o"])
def test_healthy_nodes_have_no_error(
    layout: str, fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    if layout == "host-driver+containerd":
        containerd_node(host_driver(fake_host), "/")
        write(fake_host, "/run/nvidia/validations/host-driver-ready", "")
    else:
        crio_node(container_driver(fake_host))
        write(fake_host, "/etc/cdi/nvidia.yaml", cdi_spec("/run/nvidia/driver"))
    status, report = lint_node(fake_host, capsys)
    assert [f for f in findings(report) if f[2] == "error"] == []
    assert status == 0
    assert report["files"], "the node's documents are listed even without findings"


def test_text_output_lists_what_was_looked_at(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    containerd_node(host_driver(fake_host), "/")
    main(["lint", "--node", "--host-root", str(fake_host.root)])
    out = capsys.readouterr().out
    root = fake_host.root
    assert out.startswith(f"looked at (the node's paths, read under {root}):\n")
    assert "/etc/containerd/config.toml" in out and "containerd" in out
    assert "/var/run/cdi/nvidia.yaml" in out
    assert "/etc/crio/crio.conf" in out and "not present" in out


def test_node_and_offline_exclude_each_other(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["lint", "--node", "--offline"]) == 2
    assert "cannot be --offline" in capsys.readouterr().err
    assert main(["lint"]) == 2
    assert "give at least one PATH" in capsys.readouterr().err
