"""Every CRO rule: the smallest configuration that triggers it, and a clean twin that must not.

A configuration is laid out like /etc/crio ({relative path: text}); host-aware rules get a fake node. The table
must name every rule of the cri-o kinds: test_every_crio_rule_has_a_case fails otherwise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest

from nvidia_oci_hook.kinds.crio.reading import CRIO, CRIO_CONFIG
from nvidia_oci_hook.rules.base import all_rules
from tests.crio.support import lint_dir, write_tree
from tests.helpers import FakeHost
from tests.node.fakenodes import container_driver

RUNTIME = "[crio.runtime]\n"
NVIDIA = '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\nruntime_type = "oci"\n'


def dropin(text: str, name: str = "99-nvidia.conf") -> dict[str, str]:
    return {f"crio.conf.d/{name}": text}


@dataclass
class Case:
    code: str
    trigger: dict[str, str]
    clean: dict[str, str]
    # Where the trigger's finding must point: (file relative to the config root, line).
    at: Optional[tuple[str, Optional[int]]] = None
    host: Optional[Callable[[FakeHost], object]] = None
    clean_host: Optional[Callable[[FakeHost], object]] = None
    # Extra filesystem entries for the trigger / the clean twin (links, pipes).
    setup: Optional[Callable[[Path], None]] = None
    clean_setup: Optional[Callable[[Path], None]] = None
    id: str = ""
    driver_roots: tuple[str, ...] = ("/", "/run/nvidia/driver")
    marks: list[pytest.MarkDecorator] = field(default_factory=list)


def link_to_directory(root: Path) -> None:
    (root / "elsewhere").mkdir(exist_ok=True)
    (root / "crio.conf.d").mkdir(exist_ok=True)
    os.symlink(root / "elsewhere", root / "crio.conf.d" / "50-old")


def link_to_file(root: Path) -> None:
    (root / "crio.conf.d").mkdir(exist_ok=True)
    (root / "real.conf").write_text(RUNTIME + 'default_runtime = "crun"\n')
    os.symlink(root / "real.conf", root / "crio.conf.d" / "50-old")


def nvidia_runtime_installed(host: FakeHost) -> None:
    host.executable("/usr/bin/nvidia-container-runtime").executable("/usr/bin/crun")


def stray_nodes(host: FakeHost) -> None:
    """Seed 003: the driver's nodes under /run/nvidia/driver/dev, and NVML-made copies in the host's /dev."""
    container_driver(host)
    host.device("/dev/nvidiactl", "c", 195, 255).device("/dev/nvidia0", "c", 195, 0)
    nvidia_runtime_installed(host)


CASES = [
    Case(
        "CRO006",
        {"crio.conf.d/10-latin1.conf": b"[crio.runtime]\n# Ger\xe4te\n"},
        {"crio.conf.d/10-latin1.conf": "[crio.runtime]\n# Ger\u00e4te\n"},
        at=("crio.conf.d/10-latin1.conf", 2),
    ),
    Case(
        "CRO001",
        dropin(RUNTIME + 'hooks_dir = "/usr/share/containers/oci/hooks.d"\n'),
        dropin(RUNTIME + 'hooks_dir = ["/usr/share/containers/oci/hooks.d"]\n'),
        at=("crio.conf.d/99-nvidia.conf", 2),
        id="string-for-array",
    ),
    Case(
        "CRO001",
        dropin(NVIDIA + 'privileged_without_host_devices = "true"\n'),
        dropin(NVIDIA + "privileged_without_host_devices = true\n"),
        at=("crio.conf.d/99-nvidia.conf", 4),
        id="string-for-bool",
    ),
    Case(
        "CRO001",
        dropin('[crio.image]\npull_progress_timeout = "10 minutes"\n'),
        dropin('[crio.image]\npull_progress_timeout = "10m"\n'),
        id="duration",
    ),
    Case(
        "CRO001",
        dropin("[crio.runtime.workloads.w]\nactivation_annotation = \"a\"\n[crio.runtime.workloads.w.resources]\n"
               "cpushares = -1\n"),
        dropin("[crio.runtime.workloads.w]\nactivation_annotation = \"a\"\n[crio.runtime.workloads.w.resources]\n"
               "cpushares = 512\n"),
        at=("crio.conf.d/99-nvidia.conf", 4),
        id="negative-unsigned",
    ),
    Case(
        "CRO001",
        dropin("[crio.unrelated]\nsize = 18446744073709551616\n"),
        dropin("[crio.unrelated]\nsize = 9223372036854775807\n"),
        id="integer-beyond-64-bits",
    ),
    Case(
        "CRO001",
        dropin('[crio.runtime]\nruntimes = "nvidia"\n'),
        dropin(NVIDIA),
        id="string-for-table",
    ),
    Case(
        "CRO002",
        dropin(RUNTIME + 'default_runtime = "nvidia"\n'),
        dropin(RUNTIME + 'default_runtime = "nvidia"\n' + NVIDIA),
        at=("crio.conf.d/99-nvidia.conf", 2),
    ),
    Case(
        "CRO003",
        dropin(RUNTIME + 'additional_devices = ["/dev/fuse:/fuse:rwm"]\n'),
        dropin(RUNTIME + 'additional_devices = ["/dev/fuse:/dev/fuse:rwm"]\n'),
        at=("crio.conf.d/99-nvidia.conf", 2),
        id="container-path-outside-dev",
    ),
    Case(
        "CRO003",
        dropin(RUNTIME + 'additional_devices = ["/dev/fuse:rwx"]\n'),
        dropin(RUNTIME + 'additional_devices = ["/dev/fuse:rw"]\n'),
        id="permissions",
    ),
    Case(
        "CRO004",
        dropin(RUNTIME + 'default_capabilities = ["CAP_SYS_ADMIN"]\n'),
        dropin(RUNTIME + 'default_capabilities = ["SYS_ADMIN"]\n'),
        at=("crio.conf.d/99-nvidia.conf", 2),
        id="capability-prefix",
    ),
    Case(
        "CRO004",
        dropin(RUNTIME + "log_size_max = 1024\n"),
        dropin(RUNTIME + "log_size_max = 8192\n"),
        id="log-size-max",
    ),
    Case(
        "CRO004",
        dropin(RUNTIME + 'default_ulimits = ["nofile=2048:1024"]\n'),
        dropin(RUNTIME + 'default_ulimits = ["nofile=1024:2048"]\n'),
        id="ulimit",
    ),
    Case(
        "CRO004",
        dropin('[crio.image]\npause_image = "registry.k8s.io/Pause:3.10"\n'),
        dropin('[crio.image]\npause_image = "registry.k8s.io/pause:3.10"\n'),
        id="pause-image",
    ),
    Case(
        "CRO004",
        dropin('[crio.api]\ntls_min_version = "VersionTLS11"\n'),
        dropin('[crio.api]\ntls_min_version = "VersionTLS13"\n'),
        id="tls",
    ),
    Case(
        "CRO004",
        dropin('[crio.runtime.workloads.w]\nannotation_prefix = "io.w"\n'),
        dropin('[crio.runtime.workloads.w]\nactivation_annotation = "io.w/on"\n'),
        id="workload",
    ),
    Case(
        "CRO004",
        dropin('[crio.runtime.workloads.w]\nactivation_annotation = "io.w/on"\n[crio.runtime.workloads.w.resources]\n'
               "cpushares = 1024\ncpuquota = 500\n"),
        dropin('[crio.runtime.workloads.w]\nactivation_annotation = "io.w/on"\n[crio.runtime.workloads.w.resources]\n'
               "cpushares = 1024\ncpuquota = 50000\n"),
        at=("crio.conf.d/99-nvidia.conf", 5),
        id="workload-resources",
    ),
    Case(
        "CRO005",
        {"crio.conf": RUNTIME},
        {"crio.conf": RUNTIME},
        at=("crio.conf.d/50-old", None),
        setup=link_to_directory,
        clean_setup=link_to_file,
    ),
    Case(
        "CRO101",
        dropin(NVIDIA + "privileged_without_host_device = true\n"),
        dropin(NVIDIA + "privileged_without_host_devices = true\n"),
        at=("crio.conf.d/99-nvidia.conf", 4),
        id="misspelt",
    ),
    Case(
        "CRO101",
        dropin('[crio]\nhooks_dir = ["/usr/share/containers/oci/hooks.d"]\n'),
        dropin('[crio.runtime]\nhooks_dir = ["/usr/share/containers/oci/hooks.d"]\n'),
        at=("crio.conf.d/99-nvidia.conf", 2),
        id="misplaced",
    ),
    Case(
        "CRO101",
        dropin('[runtime]\ndefault_runtime = "crun"\n'),
        dropin('[crio.runtime]\ndefault_runtime = "crun"\n'),
        at=("crio.conf.d/99-nvidia.conf", 1),
        id="missing-crio-prefix",
    ),
    Case(
        "CRO101",
        dropin(RUNTIME + 'locrio.runtime.g_level = "info"\n'),
        dropin(RUNTIME + 'log_level = "info"\n'),
        at=("crio.conf.d/99-nvidia.conf", 2),
        id="spliced-dotted-key",
    ),
    Case(
        "CRO101",
        dropin(RUNTIME + 'crio.image.pause_image = "registry.k8s.io/pause:3.10"\n'),
        dropin('[crio.image]\npause_image = "registry.k8s.io/pause:3.10"\n'),
        at=("crio.conf.d/99-nvidia.conf", 2),
        id="dotted-key-from-the-top",
    ),
    Case(
        "CRO101",
        dropin('"crio.runtime.log_level" = "info"\n'),
        dropin('crio.runtime.log_level = "info"\n'),
        at=("crio.conf.d/99-nvidia.conf", 1),
        id="quoted-dotted-key",
    ),
    Case(
        "CRO102",
        dropin(RUNTIME + 'hooks_dir = ["/etc/containers/oci/hooks.d"]\n'),
        dropin(RUNTIME + 'hooks_dir = ["/usr/share/containers/oci/hooks.d/", "/etc/containers/oci/hooks.d"]\n'),
        at=("crio.conf.d/99-nvidia.conf", 2),
    ),
    Case(
        "CRO103",
        dropin(NVIDIA),
        dropin(NVIDIA),
        at=("crio.conf.d/99-nvidia.conf", 2),
        host=lambda h: h.executable("/usr/bin/crun"),
        clean_host=nvidia_runtime_installed,
        id="runtime-path",
    ),
    Case(
        "CRO103",
        dropin("[crio.runtime.runtimes.runc]\n"),
        dropin("[crio.runtime.runtimes.runc]\n"),
        host=lambda h: h.executable("/usr/bin/crun").file("/usr/bin/runc", 0o644),
        clean_host=lambda h: h.executable("/usr/bin/crun").executable("/usr/sbin/runc"),
        id="path-lookup",
    ),
    Case(
        "CRO103",
        dropin(NVIDIA),
        dropin(NVIDIA),
        host=lambda h: h.executable("/usr/bin/crun").file("/usr/bin/nvidia-container-runtime", 0o644),
        clean_host=nvidia_runtime_installed,
        id="not-executable",
    ),
    Case(
        "CRO104",
        dropin(RUNTIME + 'cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]\n'),
        dropin(RUNTIME + 'cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]\n'),
        at=("crio.conf.d/99-nvidia.conf", 2),
        host=lambda h: h.executable("/usr/bin/crun").directory("/etc/cdi"),
        clean_host=lambda h: h.executable("/usr/bin/crun").directory("/etc/cdi").directory("/var/run/cdi"),
    ),
    Case(
        "CRO105",
        dropin(RUNTIME + 'additional_devices = ["/dev/fuse"]\n'),
        dropin(RUNTIME + 'additional_devices = ["/dev/fuse"]\n'),
        at=("crio.conf.d/99-nvidia.conf", 2),
        host=lambda h: h.executable("/usr/bin/crun").file("/dev/fuse"),
        clean_host=lambda h: h.executable("/usr/bin/crun").device("/dev/fuse", "c", 10, 229),
        marks=[pytest.mark.root],
    ),
    Case(
        "CRO106",
        dropin(RUNTIME + 'allowed_devices = ["/dev/fuse:/dev/fuse:rwm"]\n'),
        dropin(RUNTIME + 'allowed_devices = ["/dev/fuse"]\n'),
        at=("crio.conf.d/99-nvidia.conf", 2),
    ),
    Case(
        "CRO107",
        dropin(NVIDIA),
        dropin(NVIDIA + "privileged_without_host_devices = true\n"),
        at=("crio.conf.d/99-nvidia.conf", 1),
        host=stray_nodes,
        clean_host=stray_nodes,
        marks=[pytest.mark.root],
    ),
    Case(
        "CRO107",
        dropin(NVIDIA),
        dropin(NVIDIA),
        host=stray_nodes,
        clean_host=lambda h: nvidia_runtime_installed(container_driver(h)),
        id="no-stray-nodes",
        marks=[pytest.mark.root],
    ),
    Case(
        "CRO108",
        {"crio.conf": NVIDIA + 'runtime_root = "/run/nvidia"\n', **dropin(NVIDIA + "no_sync_log = true\n")},
        {"crio.conf": NVIDIA + 'runtime_root = "/run/nvidia"\n',
         **dropin(NVIDIA + 'runtime_root = "/run/nvidia"\nno_sync_log = true\n')},
        at=("crio.conf.d/99-nvidia.conf", 1),
    ),
    Case(
        "CRO109",
        dropin(NVIDIA + 'allowed_annotations = ["io.kubernetes.cri-o.devices"]\n'),
        dropin(NVIDIA + 'allowed_annotations = ["io.kubernetes.cri-o.Devices"]\n'),
        at=("crio.conf.d/99-nvidia.conf", 4),
    ),
    Case(
        "CRO110",
        dropin(RUNTIME + 'cgroup_manager = "bogus"\n'),
        dropin(RUNTIME + 'cgroup_manager = "cgroupfs"\nconmon_cgroup = "pod"\n'),
        at=("crio.conf.d/99-nvidia.conf", 2),
        id="cgroup-manager",
    ),
    Case(
        "CRO110",
        dropin(RUNTIME + 'cgroup_manager = "cgroupfs"\nconmon_cgroup = "system.slice/crio"\n'),
        dropin(RUNTIME + 'cgroup_manager = "systemd"\nconmon_cgroup = "system.slice"\n'),
        at=("crio.conf.d/99-nvidia.conf", 3),
        id="conmon-cgroup",
    ),
    Case(
        "CRO111",
        dropin(RUNTIME + 'default_runtime = "crun"\nDefault_Runtime = "crun"\n'),
        dropin(RUNTIME + 'Default_Runtime = "crun"\n'),
        at=("crio.conf.d/99-nvidia.conf", 3),
    ),
    Case(
        "CRO112",
        dropin(RUNTIME + 'default_runtime = "crun"\n', name="99-nvidia.conf.bak"),
        dropin(RUNTIME + 'default_runtime = "crun"\n', name="99-nvidia.conf"),
        at=("crio.conf.d/99-nvidia.conf.bak", 1),
    ),
]  # fmt: skip


def _case_id(case: Case) -> str:
    return f"{case.code}-{case.id}" if case.id else case.code


def test_every_crio_rule_has_a_case() -> None:
    covered = {case.code for case in CASES}
    assert covered == {rule.code for rule in all_rules() if rule.kinds & {CRIO, CRIO_CONFIG}}


def _lint(
    tmp_path: Path,
    files: dict[str, str],
    setup: Optional[Callable[[Path], None]],
    host: Optional[Callable[[FakeHost], object]],
    case: Case,
) -> list[tuple[str, str, Optional[int]]]:
    root = write_tree(tmp_path / "etc-crio", files)
    if setup is not None:
        setup(root)
    host_root = None
    if host is not None:
        fake = FakeHost(tmp_path / "host")
        fake.root.mkdir()
        host(fake)
        host_root = fake.root
    findings = lint_dir(root, host_root=host_root, driver_roots=case.driver_roots)
    return [(f.code, os.path.relpath(f.path, root), f.line) for f in findings]


def _params() -> list[object]:
    return [pytest.param(case, id=_case_id(case), marks=case.marks) for case in CASES]


@pytest.mark.parametrize("case", _params())
def test_rule_fires_on_trigger(case: Case, tmp_path: Path) -> None:
    if case.marks and os.geteuid() != 0:
        pytest.fail("this case needs root (mknod); run the suite as root, as CI does")
    found = _lint(tmp_path, case.trigger, case.setup, case.host, case)
    mine = [(path, line) for code, path, line in found if code == case.code]
    assert mine, found
    if case.at is not None:
        assert case.at in mine


@pytest.mark.parametrize("case", _params())
def test_rule_silent_on_clean_twin(case: Case, tmp_path: Path) -> None:
    if case.marks and os.geteuid() != 0:
        pytest.fail("this case needs root (mknod); run the suite as root, as CI does")
    found = _lint(tmp_path, case.clean, case.clean_setup, case.clean_host or case.host, case)
    assert case.code not in [code for code, _, _ in found], found
