"""Which combination of cgroup driver, runtime release and /dev/char links loses GPUs on a systemd reload."""

from __future__ import annotations

import json
from typing import Optional

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.node.reload_risk import EngineCgroups, reload_risk
from tests.helpers import FakeHost
from tests.node.fakenodes import host_driver
from tests.node.test_lint_node import write

KEEPER = "/lib/udev/rules.d/71-nvidia-oci-hook.rules"


@pytest.mark.parametrize(
    "driver, runtime, version, missing, keeper, status, says",
    [
        ("cgroupfs", "runc", "1.1.5", 4, None, "ok", "a systemd reload does not touch them"),
        ("systemd", "runc", "1.1.5", 4, None, "error", "the next systemd 252 reload takes the GPUs"),
        ("systemd", "runc", "1.1.3", 1, KEEPER, "error", "1 NVIDIA node(s) have no /dev/char link"),
        ("systemd", "runc", "1.1.6", 0, None, "warning", "nothing makes them again after a reboot"),
        ("systemd", "runc", "1.1.6", 0, KEEPER, "ok", f"kept by {KEEPER}"),
        ("systemd", "runc", "1.1.2", 4, None, "ok", "without links"),
        ("systemd", "runc", "1.1.7", 4, None, "ok", "without links"),
        ("systemd", "runc", "1.2.5", 4, None, "ok", "without links"),
        ("systemd", "crun", "1.8.1", 4, None, "ok", "crun gives systemd 252 every device rule"),
        ("systemd", "runc", None, 2, None, "warning", "runc 1.1.3 to 1.1.6 then lose the GPUs"),
        ("systemd", "runc", None, 0, None, "unknown", "runc's release was not found"),
        (None, "runc", "1.1.5", 4, None, "unknown", "which cgroup driver it uses was not found"),
    ],
)  # fmt: skip
def test_the_risk_of_each_combination(
    driver: Optional[str],
    runtime: str,
    version: Optional[str],
    missing: int,
    keeper: Optional[str],
    status: str,
    says: str,
) -> None:
    risk = reload_risk(EngineCgroups("cri-o", driver, runtime, version), "252", missing, keeper)
    assert risk.status == status and says in risk.line, risk
    assert risk.line.startswith("cri-o (")
    if status == "error":
        assert "fix: nvidia-oci-hook doctor --fix creates the links" in risk.line


def _reload_risk(host: FakeHost, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    main(["doctor", "--host-root", str(host.root), "--check", "reload-risk", "--format", "json", *extra])
    (check,) = json.loads(capsys.readouterr().out)["checks"]
    return check  # type: ignore[no-any-return]


def test_a_node_is_judged_from_its_configs_packages_links_and_rules(
    fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    host_driver(fake_host)
    write(fake_host, "/etc/crio/crio.conf", '[crio.runtime]\ndefault_runtime = "runc"\n')
    write(fake_host, "/etc/crio/crio.conf.d/10-cgroups.conf", '[crio.runtime]\ncgroup_manager = "systemd"\n')
    write(fake_host, "/etc/containerd/config.toml", 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
          '  default_runtime_name = "runc"\n')  # fmt: skip
    packages = {"runc": "1.1.5+ds1-1", "systemd": "252.30-1~deb12u2", "containerd": "1.6.20~ds1-1"}
    write(fake_host, "/var/lib/dpkg/status", "\n".join(
        f"Package: {name}\nStatus: install ok installed\nVersion: {version}\n" for name, version in packages.items()
    ))  # fmt: skip
    check = _reload_risk(fake_host, capsys)
    assert check["status"] == "error", check
    assert str(check["summary"]).startswith("cri-o (systemd cgroup driver, runc 1.1.5): ")
    assert "containerd (cgroupfs cgroup driver, runc 1.1.5): the runtime alone writes" in str(check["evidence"])
    assert "systemd 252" in check["evidence"]  # type: ignore[operator]

    # The links made, but nothing to make them again: still a risk, of another kind.
    main(["doctor", "--host-root", str(fake_host.root), "--check", "dev-char-links", "--fix"])
    capsys.readouterr()
    check = _reload_risk(fake_host, capsys)
    assert check["status"] == "warning" and "install the package's udev rule" in str(check["summary"]), check
    write(fake_host, KEEPER, 'ACTION=="add", RUN+="/usr/bin/nvidia-oci-hook doctor --check dev-char-links --fix"\n')
    check = _reload_risk(fake_host, capsys)
    assert check["status"] == "ok" and KEEPER in str(check["summary"]), check

    # containerd's runc handler with SystemdCgroup is the systemd driver.
    write(fake_host, "/etc/containerd/config.toml", 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
          '  default_runtime_name = "runc"\n'
          '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
          '    runtime_type = "io.containerd.runc.v2"\n'
          '    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
          "      SystemdCgroup = true\n")  # fmt: skip
    check = _reload_risk(fake_host, capsys)
    assert "containerd (systemd cgroup driver, runc 1.1.5)" in str(check["evidence"]), check
