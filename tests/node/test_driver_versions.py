"""The driver layer's own facts: the loaded module's version, each driver root's user space, the GPUs the module
lists; doctor's driver-versions check on the node after an upgrade without a reboot and on its healthy twin; CDI
specs written for another driver version, in lint and in cdi reconcile."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.base import ERROR, OK, UNKNOWN
from nvidia_oci_hook.node.checks.driver_versions import CLI_MISMATCH, NVML_MISMATCH
from nvidia_oci_hook.node.doctor import run_checks
from nvidia_oci_hook.node.driver_facts import (
    library_version,
    module_version,
    node_driver,
    proc_gpus,
    read_ld_cache,
    user_space,
)
from tests.cli.test_cli import run
from tests.helpers import FakeHost
from tests.node import fakenodes
from tests.node.fakenodes import CONTAINER, LIB

# The fake nodes hold device nodes (mknod).
pytestmark = pytest.mark.usefixtures("as_root")

LOADED = "550.54.15"
INSTALLED = "545.23.08"


def _check(root: Path, name: str = "driver-versions"):
    return next(check for check in run_checks(str(root), Settings(), nvml=False) if check.name == name)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str, expect: int = -1) -> tuple[int, str]:
    """The command's exit status and what it printed, standard output then standard error."""
    status, out, err = run(capsys, *args)
    if expect >= 0:
        assert status == expect, out + err
    return status, out + err


# -- the module -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("open_module", [False, True], ids=["proprietary", "open"])
def test_module_version_from_proc_in_both_module_formats(tmp_path: Path, open_module: bool) -> None:
    fakenodes.loaded_module(FakeHost(tmp_path), LOADED, open_module=open_module)
    found = module_version(HostView(str(tmp_path)))
    assert (found.version, found.source, found.disagreement) == (LOADED, "/proc/driver/nvidia/version", "")
    assert found.line.startswith("NVRM version: NVIDIA UNIX")


def test_module_version_disagreement_and_sys_alone(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    fakenodes.loaded_module(host, LOADED, sys_version="560.35.03")
    found = module_version(HostView(str(tmp_path)))
    assert found.version == LOADED and found.disagreement == "/sys/module/nvidia/version says 560.35.03"
    (tmp_path / "proc/driver/nvidia/version").unlink()
    found = module_version(HostView(str(tmp_path)))
    assert (found.version, found.source) == ("560.35.03", "/sys/module/nvidia/version")


def test_module_not_loaded_or_silent(tmp_path: Path) -> None:
    assert module_version(HostView(str(tmp_path))).version is None
    FakeHost(tmp_path).file("/proc/driver/nvidia/version")
    found = module_version(HostView(str(tmp_path)))
    assert found.version is None and "names no version" in found.source


# -- GPUs and libraries -----------------------------------------------------------------------------------------


def test_proc_gpus_in_the_drivers_format(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    fakenodes.proc_gpu(host, 1, "GPU-bbbbbbbb-0000-0000-0000-000000000001")
    fakenodes.proc_gpu(host, 0, "GPU-aaaaaaaa-0000-0000-0000-000000000000", model="Tesla T4")
    gpus = proc_gpus(HostView(str(tmp_path)))
    assert gpus is not None
    assert [(gpu.minor, gpu.uuid, gpu.model, gpu.bus_location) for gpu in gpus] == [
        (0, "GPU-aaaaaaaa-0000-0000-0000-000000000000", "Tesla T4", "0000:18:00.0"),
        (1, "GPU-bbbbbbbb-0000-0000-0000-000000000001", "NVIDIA H100 80GB HBM3", "0000:19:00.0"),
    ]
    assert not any(gpu.excluded for gpu in gpus)
    assert proc_gpus(HostView(str(tmp_path / "nothing"))) is None


def test_excluded_gpus_are_not_visible(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    fakenodes.proc_gpu(host, 0, "GPU-a")
    fakenodes.proc_gpu(host, 1, "GPU-b")
    path = tmp_path / "proc/driver/nvidia/gpus/0000:18:00.0/information"
    path.write_text(path.read_text().replace("GPU Excluded:\t No", "GPU Excluded:\t Yes"))
    visible = node_driver(HostView(str(tmp_path)), ("/",)).visible_gpus()
    assert visible is not None and [gpu.uuid for gpu in visible] == ["GPU-b"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("libcuda.so.550.54.15", ("libcuda", "550.54.15")),
        ("libnvidia-ml.so.570.26", ("libnvidia-ml", "570.26")),
        ("libGLX_nvidia.so.550.54.15", ("libGLX_nvidia", "550.54.15")),
        ("libnvidia-egl-wayland.so.1.1.13", None),
        ("libcuda.so.1", None),
        ("libcudart.so.12.4.99", None),
    ],
)
def test_library_version(name: str, expected) -> None:
    assert library_version(name) == expected


def test_user_space_versions_and_what_the_links_select(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    fakenodes.driver_libraries(host, INSTALLED, links=False)
    fakenodes.driver_libraries(host, LOADED)
    space = user_space(HostView(str(tmp_path)), "/")
    assert space.versions == [INSTALLED, LOADED]
    assert {s.name: s.version for s in space.selections} == {
        f"{LIB}/libcuda.so.1": LOADED,
        f"{LIB}/libnvidia-ml.so.1": LOADED,
        f"{LIB}/libnvidia-ptxjitcompiler.so.1": LOADED,
        f"{LIB}/libnvidia-nvvm.so.4": LOADED,
    }


# -- the linker cache, as glibc's ldconfig writes it ---------------------------------------------------------------

needs_ldconfig = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ldconfig") or not shutil.which("gcc"),
    reason="needs root (ldconfig -r chroots), ldconfig and gcc: CI runs as root with both",
)


def _shared_library(path: Path, soname: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["gcc", "-shared", "-nostdlib", f"-Wl,-soname,{soname}", "-o", str(path), "-x", "c", "/dev/null"], check=True
    )


@needs_ldconfig
def test_the_linker_cache_read_in_the_loaders_order(tmp_path: Path) -> None:
    """A leftover libnvidia-ml of the old driver in /usr/local/lib, which ld.so.conf lists first: ldconfig's own
    cache selects it, the loader takes the first entry, and doctor says what it selects."""
    host = FakeHost(tmp_path)
    fakenodes.host_driver(host)
    fakenodes.loaded_module(host, LOADED)
    for library in ("libcuda.so.1", "libnvidia-ml.so.1"):
        (tmp_path / LIB.lstrip("/") / library).unlink()
        stem = library[: -len(".1")]
        _shared_library(tmp_path / LIB.lstrip("/") / f"{stem}.{LOADED}", library)
    _shared_library(tmp_path / f"usr/local/lib/libnvidia-ml.so.{INSTALLED}", "libnvidia-ml.so.1")
    host.text("/etc/ld.so.conf", f"/usr/local/lib\n{LIB}\n")
    subprocess.run(["ldconfig", "-r", str(tmp_path)], check=True)
    listed = subprocess.run(
        ["ldconfig", "-p", "-C", str(tmp_path / "etc/ld.so.cache")], check=True, capture_output=True, text=True
    ).stdout
    order = [line.split(" => ")[1] for line in listed.splitlines() if "libnvidia-ml.so.1 " in line]
    entries = read_ld_cache(HostView(str(tmp_path)), "/etc/ld.so.cache")
    assert entries is not None
    assert [path for name, path in entries if name == "libnvidia-ml.so.1"] == order
    space = user_space(HostView(str(tmp_path)), "/")
    cached = [s for s in space.selections if s.via == "ld.so.cache"]
    assert cached and all(s.name.startswith(("/usr/local/lib/", LIB)) for s in cached)
    check = _check(tmp_path)
    if order[0].startswith("/usr/local/lib"):
        assert check.status == ERROR and f"libnvidia-ml.so.1 selects {INSTALLED} (ld.so.cache" in check.summary
    else:
        assert check.status == OK


def test_a_cache_that_is_not_one(tmp_path: Path) -> None:
    FakeHost(tmp_path).text("/etc/ld.so.cache", "not a cache")
    assert read_ld_cache(HostView(str(tmp_path)), "/etc/ld.so.cache") is None
    assert read_ld_cache(HostView(str(tmp_path)), "/etc/absent") is None


# -- doctor's driver-versions check ------------------------------------------------------------------------------


def test_upgrade_without_reboot_is_an_error_naming_both_versions(tmp_path: Path) -> None:
    fakenodes.upgraded_without_reboot(FakeHost(tmp_path), LOADED, INSTALLED)
    check = _check(tmp_path)
    assert check.status == ERROR
    assert f"kernel module {LOADED}" in check.summary and INSTALLED in check.summary
    assert NVML_MISMATCH in check.summary and CLI_MISMATCH in check.summary
    assert check.fix is not None and check.fix.startswith("reboot the node") and "rmmod" in check.fix
    assert check.counts == {"mismatched_roots": 1}
    # The kernel-module check still says the module is loaded: the mismatch is this check's.
    assert _check(tmp_path, "kernel-module").status == OK


def test_healthy_twin(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    fakenodes.host_driver(host)
    fakenodes.loaded_module(host, LOADED)
    fakenodes.driver_libraries(host, LOADED)
    check = _check(tmp_path)
    assert (check.status, check.summary, check.counts) == (
        OK,
        f"kernel module and user space are both {LOADED}",
        {"mismatched_roots": 0},
    )


def test_leftover_files_that_nothing_selects_are_only_noted(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    fakenodes.host_driver(host)
    fakenodes.loaded_module(host, LOADED)
    fakenodes.driver_libraries(host, INSTALLED, links=False)
    fakenodes.driver_libraries(host, LOADED)
    check = _check(tmp_path)
    assert check.status == OK and f"files of {INSTALLED} left over" in check.summary


def test_a_dangling_link_is_an_error(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    fakenodes.host_driver(host)
    fakenodes.loaded_module(host, LOADED)
    fakenodes.driver_libraries(host, LOADED)
    (tmp_path / LIB.lstrip("/") / f"libcuda.so.{LOADED}").unlink()
    check = _check(tmp_path)
    assert check.status == ERROR and f"{LIB}/libcuda.so.1 points to nothing" in check.summary


def test_driver_container_fix_restarts_its_pod(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    fakenodes.container_driver(host)
    fakenodes.loaded_module(host, LOADED)
    fakenodes.driver_libraries(host, INSTALLED, CONTAINER)
    check = _check(tmp_path)
    assert check.status == ERROR and f"under {CONTAINER}" in check.summary
    assert check.fix is not None and check.fix.startswith("restart the GPU Operator's driver pod")


def test_libraries_without_versions_in_their_names_are_not_compared(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    fakenodes.host_driver(host)  # libcuda.so.1 and libnvidia-ml.so.1 as plain files
    fakenodes.loaded_module(host, LOADED)
    check = _check(tmp_path)
    assert check.status == UNKNOWN and "/: no library names a driver version: not compared" in check.evidence


def test_unknown_without_module_version(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    fakenodes.host_driver(host)
    fakenodes.driver_libraries(host, INSTALLED)
    check = _check(tmp_path)
    assert check.status == UNKNOWN and "kernel module's version is unknown" in check.summary


def test_doctor_end_to_end_and_its_metric(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fakenodes.upgraded_without_reboot(FakeHost(tmp_path), LOADED, INSTALLED)
    result = run_cli(capsys, "doctor", "--host-root", str(tmp_path), "--format", "json")
    report = json.loads(result[1])
    check = next(check for check in report["checks"] if check["name"] == "driver-versions")
    assert check["status"] == ERROR and check["counts"] == {"mismatched_roots": 1}
    text = run_cli(capsys, "doctor", "--host-root", str(tmp_path), "--check", "driver-versions")[1]
    assert text.startswith(f"[error] driver-versions: kernel module {LOADED}")
    metrics = run_cli(capsys, "doctor", "--host-root", str(tmp_path), "--format", "prometheus")[1]
    assert "nvidia_oci_hook_driver_version_mismatches 1" in metrics.splitlines()
    assert 'nvidia_oci_hook_check_status{check="driver-versions"} 2' in metrics.splitlines()


# -- CDI specs written for another driver -------------------------------------------------------------------------

SPEC = """cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  deviceNodes:
  - path: /dev/nvidiactl
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, create-symlinks, --link, libcuda.so.{old}::/usr/lib/x86_64-linux-gnu/libcuda.so.1]
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, enable-cuda-compat, --host-driver-version={old}]
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.{old}
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.{old}
    options: [ro, nosuid, nodev, bind]
"""


def _cdi_node(root: Path, old_files: bool, new_files: bool, spec_version: str = INSTALLED) -> Path:
    host = FakeHost(root)
    fakenodes.host_driver(host)
    fakenodes.loaded_module(host, LOADED)
    if old_files:
        fakenodes.driver_libraries(host, INSTALLED, links=False)
    if new_files:
        fakenodes.driver_libraries(host, LOADED)
    host.executable("/usr/bin/nvidia-cdi-hook")
    host.text("/etc/cdi/nvidia.yaml", SPEC.format(old=spec_version))
    return root / "etc/cdi/nvidia.yaml"


def _codes(result: tuple[int, str]) -> list[str]:
    return [f["code"] for r in json.loads(result[1])["files"] for f in r["findings"]]


@pytest.mark.parametrize("old_files", [True, False], ids=["old-files-left", "old-files-gone"])
def test_a_spec_for_the_old_driver_is_stale_and_repointed(
    tmp_path: Path, old_files: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _cdi_node(tmp_path, old_files=old_files, new_files=True)
    linted = run_cli(capsys, "lint", "--host-root", str(tmp_path), "--format", "json", str(spec))
    assert _codes(linted) == ["CDI110", "CDI110", "CDI110"], linted[1]
    text = run_cli(capsys, "lint", "--host-root", str(tmp_path), str(spec))[1]
    assert f"is driver {INSTALLED}'s library" in text and f"the loaded kernel module is {LOADED}" in text
    assert f"repoints it to {LIB}/libcuda.so.{LOADED}" in text
    doctor = _check(tmp_path, "cdi-specs")
    assert doctor.status == ERROR and doctor.counts == {"unreconciled_specs": 1}
    run_cli(capsys, "cdi", "reconcile", "--host-root", str(tmp_path))
    assert yaml.safe_load(spec.read_text()) == yaml.safe_load(SPEC.format(old=LOADED))
    assert "--host-driver-version=550.54.15" in spec.read_text()
    assert _codes(run_cli(capsys, "lint", "--host-root", str(tmp_path), "--format", "json", str(spec))) == []


def test_without_the_loaded_versions_files_the_spec_must_be_regenerated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _cdi_node(tmp_path, old_files=True, new_files=False)
    text = run_cli(capsys, "lint", "--host-root", str(tmp_path), str(spec), expect=1)[1]
    assert f"regenerate the spec for driver {LOADED} (nvidia-ctk cdi generate)" in text
    before = spec.read_text()
    result = run_cli(capsys, "cdi", "reconcile", "--host-root", str(tmp_path), expect=1)
    assert "regenerate the spec (nvidia-ctk cdi generate)" in result[1]
    assert spec.read_text() == before


def test_a_spec_for_the_loaded_driver_is_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _cdi_node(tmp_path, old_files=True, new_files=True, spec_version=LOADED)
    assert _codes(run_cli(capsys, "lint", "--host-root", str(tmp_path), "--format", "json", str(spec))) == []
    assert _check(tmp_path, "cdi-specs").status == OK
