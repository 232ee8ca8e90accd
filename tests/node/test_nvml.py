"""read_nvml through the real pynvml, against the fake library of tests/node/fake_nvml.c."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import pytest

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.nvml import MISSING_PYNVML, NvmlGpu, NvmlMigDevice, NvmlView, read_nvml
from tests.helpers import FakeHost
from tests.node.fake_nvml import fake_nvml_calls, fake_nvml_library

try:
    import pynvml  # type: ignore[import-untyped]
except ImportError:
    pytest.fail("tests/node/test_nvml.py needs nvidia-ml-py (tests/node/setup.sh installs it)", pytrace=False)

UUID0 = "GPU-11111111-1111-1111-1111-111111111111"
UUID1 = "GPU-22222222-2222-2222-2222-222222222222"
UUID2 = "GPU-33333333-3333-3333-3333-333333333333"
MIG0 = "MIG-aaaaaaaa-0000-0000-0000-000000000000"
MIG1 = "MIG-bbbbbbbb-0000-0000-0000-000000000000"
MIG2 = "MIG-cccccccc-0000-0000-0000-000000000000"
# Every entry point read_nvml reaches beyond the ones it always needed.
NEWER_ENTRY_POINTS = (
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlDeviceGetBrand",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
)


def tesla(index: int, minor: int, uuid: str, name: str, current: Optional[bool], pending: Optional[bool]) -> NvmlGpu:
    """A GPU as the fake answers it unless told otherwise: NVML_BRAND_TESLA, compute capability 8.0."""
    return NvmlGpu(index, minor, uuid, name, current, pending, brand="tesla", brand_enum=2, arch="8.0")


@pytest.fixture(scope="session")
def library(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(fake_nvml_library(tmp_path_factory))


@pytest.fixture(autouse=True)
def clean_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No FAKE_NVML_* from outside; pynvml left as each test found it, even when read_nvml is wrong."""
    for name in list(os.environ):
        if name.startswith("FAKE_NVML_"):
            monkeypatch.delenv(name)
    loaded = pynvml.nvmlLib
    yield
    pynvml.nvmlLib = loaded
    pynvml._nvmlGetFunctionPointer_cache.clear()


def created_in(fake_host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make the fake create its nodes in the fake root's /dev, as NVML would on the host's."""
    dev = fake_host.root / "dev"
    dev.mkdir(exist_ok=True)
    monkeypatch.setenv("FAKE_NVML_CREATE_NODES_IN", str(dev))
    return dev


def test_view_lists_driver_gpus_and_mig_modes(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVML_DRIVER", "570.86.15")
    monkeypatch.setenv("FAKE_NVML_GPUS", f"3:{UUID0},0:{UUID1}:NVIDIA H100 80GB HBM3,1:{UUID2}")
    monkeypatch.setenv("FAKE_NVML_MIG", "1")
    monkeypatch.setenv("FAKE_NVML_MIG_PENDING", "2")
    monkeypatch.setenv("FAKE_NVML_MIG_UNSUPPORTED", "0")
    view = read_nvml(HostView(str(fake_host.root)), remove_created=False, library=library)
    assert view.available, view.reason
    assert view.reason == ""
    assert view.driver_version == "570.86.15"
    assert view.cuda_driver_version == "12.4"
    assert view.gpus == [
        tesla(0, 3, UUID0, "NVIDIA Fake GPU", None, None),
        tesla(1, 0, UUID1, "NVIDIA H100 80GB HBM3", True, True),
        tesla(2, 1, UUID2, "NVIDIA Fake GPU", False, True),
    ]
    assert [gpu.mig_mode for gpu in view.gpus] == [None, True, False]
    assert view.created_nodes == []
    assert view.removed_nodes == []


def test_each_read_sees_the_configuration_of_its_own_init(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = HostView(str(fake_host.root))
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0},1:{UUID1}")
    assert [gpu.uuid for gpu in read_nvml(host, remove_created=False, library=library).gpus] == [UUID0, UUID1]
    monkeypatch.setenv("FAKE_NVML_GPUS", f"7:{UUID2}")
    monkeypatch.setenv("FAKE_NVML_DRIVER", "535.0")
    view = read_nvml(host, remove_created=False, library=library)
    assert (view.driver_version, [(gpu.minor, gpu.uuid) for gpu in view.gpus]) == ("535.0", [(7, UUID2)])


def test_the_given_library_is_used_for_the_read_only(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pynvml caches resolved functions next to its library; both must be as they were, or a later read without
    # a library would still call into the fake.
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0}")
    before = pynvml.nvmlLib
    assert read_nvml(HostView(str(fake_host.root)), remove_created=False, library=library).available
    assert pynvml.nvmlLib is before
    assert pynvml._nvmlGetFunctionPointer_cache == {}


@pytest.mark.root
def test_created_nodes_are_reported_and_removed(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch, as_root: None
) -> None:
    dev = created_in(fake_host, monkeypatch)
    fake_host.device("/dev/nvidia0", "c", 195, 0).file("/dev/null")
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0},1:{UUID1}")
    host = HostView(str(fake_host.root))
    # A view that already saw the node missing (and cached that) must still find it once NVML made it.
    assert not host.exists("/dev/nvidia1")
    view = read_nvml(host, remove_created=True, library=library)
    assert view.available, view.reason
    assert view.created_nodes == ["/dev/nvidia1", "/dev/nvidiactl"]
    assert view.removed_nodes == ["/dev/nvidia1", "/dev/nvidiactl"]
    assert view.removal_errors == {}
    # The node that was there before NVML ran is the node's own and stays.
    assert sorted(os.listdir(dev)) == ["null", "nvidia0"]


@pytest.mark.root
def test_created_nodes_are_kept_without_remove_created(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch, as_root: None
) -> None:
    dev = created_in(fake_host, monkeypatch)
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0},2:{UUID1}")
    view = read_nvml(HostView(str(fake_host.root)), remove_created=False, library=library)
    assert view.available, view.reason
    assert view.created_nodes == ["/dev/nvidia0", "/dev/nvidia2", "/dev/nvidiactl"]
    assert view.removed_nodes == []
    numbers = {}
    for name in sorted(os.listdir(dev)):
        info = os.lstat(dev / name)
        assert stat.S_ISCHR(info.st_mode), name
        numbers[name] = (os.major(info.st_rdev), os.minor(info.st_rdev))
    assert numbers == {"nvidia0": (195, 0), "nvidia2": (195, 2), "nvidiactl": (195, 255)}


@pytest.mark.root
def test_nodes_are_found_through_a_linked_dev(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch, as_root: None
) -> None:
    # The host's /dev resolved inside the host root, as every other host path is.
    real = fake_host.root / "real-dev"
    real.mkdir()
    fake_host.symlink("/dev", "/real-dev")
    monkeypatch.setenv("FAKE_NVML_CREATE_NODES_IN", str(real))
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0}")
    view = read_nvml(HostView(str(fake_host.root)), remove_created=True, library=library)
    assert view.removed_nodes == ["/dev/nvidia0", "/dev/nvidiactl"]
    assert os.listdir(real) == []


def test_missing_pynvml_is_reported(fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    view = read_nvml(HostView(str(fake_host.root)), remove_created=True, library=library)
    assert not view.available
    assert view.reason == MISSING_PYNVML
    assert view.gpus == []
    assert view.driver_version is None


def test_init_failure_gives_nvml_error_text(fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0}")
    monkeypatch.setenv("FAKE_NVML_FAIL_INIT", "1")
    view = read_nvml(HostView(str(fake_host.root)), remove_created=False, library=library)
    assert not view.available
    assert view.reason == "nvmlInit: Driver Not Loaded"
    assert view.gpus == []


@pytest.mark.root
def test_nodes_created_before_a_failed_init_are_still_accounted(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch, as_root: None
) -> None:
    dev = created_in(fake_host, monkeypatch)
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0}")
    monkeypatch.setenv("FAKE_NVML_FAIL_INIT", "1")
    view = read_nvml(HostView(str(fake_host.root)), remove_created=True, library=library)
    assert not view.available
    assert view.removed_nodes == view.created_nodes == ["/dev/nvidia0", "/dev/nvidiactl"]
    assert os.listdir(dev) == []


def test_a_failing_gpu_names_the_call_and_keeps_what_was_read(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = HostView(str(fake_host.root))
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0},1:{UUID1}")
    monkeypatch.setenv("FAKE_NVML_LOST", "1")
    view = read_nvml(host, remove_created=False, library=library)
    assert not view.available
    assert view.reason == "GPU 1: nvmlDeviceGetMinorNumber: GPU is lost"
    assert [gpu.uuid for gpu in view.gpus] == [UUID0]
    # NVML was shut down despite the error: the next read initialises afresh and succeeds.
    monkeypatch.delenv("FAKE_NVML_LOST")
    assert read_nvml(host, remove_created=False, library=library).available


def test_an_unloadable_library_is_reported(fake_host: FakeHost, tmp_path: Path) -> None:
    missing = tmp_path / "libnvidia-ml.so.1"
    view = read_nvml(HostView(str(fake_host.root)), remove_created=False, library=str(missing))
    assert not view.available
    assert view.reason.startswith(f"cannot load {missing} as the NVML library: ")


@pytest.mark.parametrize(
    ("params", "expected"),
    [("ModifyDeviceFiles: 1\nDeviceFileMode: 438\n", True), ("ModifyDeviceFiles: 0\n", False), (None, None)],
)
def test_modify_device_files_is_read_from_the_hosts_params(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch, params: Optional[str], expected: Optional[bool]
) -> None:
    if params is not None:
        fake_host.text("/proc/driver/nvidia/params", params)
    view = read_nvml(HostView(str(fake_host.root)), remove_created=False, library=library)
    assert view.modify_device_files is expected


def read(fake_host: FakeHost, library: str) -> NvmlView:
    view = read_nvml(HostView(str(fake_host.root)), remove_created=False, library=library)
    assert view.available, view.reason
    return view


@pytest.mark.parametrize(("number", "text"), [(12040, "12.4"), (13000, "13.0"), (11080, "11.8"), (12090, "12.9")])
def test_the_cuda_driver_version_is_major_dot_minor(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch, number: int, text: str
) -> None:
    monkeypatch.setenv("FAKE_NVML_CUDA", str(number))
    assert read(fake_host, library).cuda_driver_version == text


def test_the_cuda_version_of_libcuda_comes_first(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVML_CUDA", "12080")
    monkeypatch.setenv("FAKE_NVML_CUDA_V1", "12040")
    assert read(fake_host, library).cuda_driver_version == "12.8"
    assert fake_nvml_calls(library, "nvmlSystemGetCudaDriverVersion") == 0


@pytest.mark.parametrize("setting", [("FAKE_NVML_NO_CUDA_VERSION", "2"), ("FAKE_NVML_NO_LIBCUDA", "1")])
def test_the_older_cuda_version_call_answers_when_v2_cannot(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch, setting: tuple[str, str]
) -> None:
    monkeypatch.setenv("FAKE_NVML_CUDA", "12080")
    monkeypatch.setenv("FAKE_NVML_CUDA_V1", "12020")
    monkeypatch.setenv(*setting)
    assert read(fake_host, library).cuda_driver_version == "12.2"


def test_a_library_without_the_v2_call_gives_the_older_ones_version(
    fake_host: FakeHost, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    old = str(fake_nvml_library(tmp_path_factory, without=["nvmlSystemGetCudaDriverVersion_v2"]))
    monkeypatch.setenv("FAKE_NVML_CUDA_V1", "11040")
    assert read(fake_host, old).cuda_driver_version == "11.4"


def test_no_cuda_version_leaves_it_none_and_the_rest_read(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0}")
    monkeypatch.setenv("FAKE_NVML_NO_CUDA_VERSION", "1,2")
    view = read(fake_host, library)
    assert view.cuda_driver_version is None
    assert [gpu.uuid for gpu in view.gpus] == [UUID0]


def test_brands_are_read_per_gpu(fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0},1:{UUID1},2:{UUID2}")
    monkeypatch.setenv("FAKE_NVML_BRAND", "5,1:13")
    assert [(gpu.brand, gpu.brand_enum) for gpu in read(fake_host, library).gpus] == [
        ("geforce", 5),
        ("nvidiartx", 13),
        ("geforce", 5),
    ]


def test_every_nvml_brand_has_the_name_nvidia_container_cli_gives_it(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # libnvidia-container src/driver.c since 6845f41ef5313fda5b7254d6b75843d660e49fcc; the requirement check
    # compares case-insensitively, NVIDIA_REQUIRE_CUDA writes them in lower case.
    expected = [
        "unknown",  # NVML_BRAND_UNKNOWN
        "quadro",
        "tesla",
        "nvs",
        "grid",
        "geforce",
        "titan",
        "vapps",
        "vpc",
        "vcs",
        "vws",
        "cloudgaming",
        "quadrortx",
        "nvidiartx",
        "nvidia",
        "geforcertx",
        "titanrtx",
        "unknown",  # NVML_BRAND_NVIDIA_DLA and the newer ones: not in the tools' table
        "unknown",
        "unknown",
    ]
    monkeypatch.setenv("FAKE_NVML_GPUS", ",".join(f"{n}:GPU-{n}" for n in range(len(expected))))
    monkeypatch.setenv("FAKE_NVML_BRAND", ",".join(f"{n}:{n}" for n in range(len(expected))))
    gpus = read(fake_host, library).gpus
    assert [gpu.brand_enum for gpu in gpus] == list(range(len(expected)))
    assert [gpu.brand for gpu in gpus] == expected


def test_compute_capabilities_are_read_per_gpu(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0},1:{UUID1},2:{UUID2}")
    monkeypatch.setenv("FAKE_NVML_ARCH", "0:9.0,2:12.1")
    assert [gpu.arch for gpu in read(fake_host, library).gpus] == ["9.0", "8.0", "12.1"]


def test_unsupported_queries_leave_their_fields_none(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0},1:{UUID1}")
    monkeypatch.setenv("FAKE_NVML_BRAND", "1:unsupported")
    monkeypatch.setenv("FAKE_NVML_ARCH", "0:unsupported")
    monkeypatch.setenv("FAKE_NVML_MIG", "0,1")
    monkeypatch.setenv("FAKE_NVML_MIG_MAX", "unsupported")
    monkeypatch.setenv("FAKE_NVML_MIG_DEVICES", f"0:{MIG0}")
    gpus = read(fake_host, library).gpus
    assert [(gpu.brand, gpu.brand_enum, gpu.arch, gpu.mig_devices) for gpu in gpus] == [
        ("tesla", 2, None, []),
        (None, None, "8.0", []),
    ]


def test_a_library_older_than_the_new_calls_reads_as_before(
    fake_host: FakeHost, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    old = str(fake_nvml_library(tmp_path_factory, without=NEWER_ENTRY_POINTS))
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0},1:{UUID1}")
    monkeypatch.setenv("FAKE_NVML_MIG", "1")
    monkeypatch.setenv("FAKE_NVML_MIG_DEVICES", f"1:{MIG0}")
    view = read(fake_host, old)
    assert view.cuda_driver_version is None
    assert view.gpus == [
        NvmlGpu(index=0, minor=0, uuid=UUID0, name="NVIDIA Fake GPU", mig_current=False, mig_pending=False),
        NvmlGpu(index=1, minor=1, uuid=UUID1, name="NVIDIA Fake GPU", mig_current=True, mig_pending=True),
    ]


def test_mig_devices_carry_their_uuids_nvidia_indexes_and_instance_ids(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0},1:{UUID1}")
    monkeypatch.setenv("FAKE_NVML_MIG", "0,1")
    monkeypatch.setenv("FAKE_NVML_MIG_DEVICES", f"0:{MIG0}@7.0;{MIG1}@8.1,1:{MIG2}")
    gpus = read(fake_host, library).gpus
    assert gpus[0].mig_devices == [NvmlMigDevice(0, MIG0, 7, 0), NvmlMigDevice(1, MIG1, 8, 1)]
    assert gpus[1].mig_devices == [NvmlMigDevice(0, MIG2, 0, 0)]


def test_a_mig_index_without_a_device_keeps_the_later_ones_at_their_own_index(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GPU:N names the device NVML answers at MIG index N; a gap does not move the ones after it.
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0}")
    monkeypatch.setenv("FAKE_NVML_MIG", "0")
    monkeypatch.setenv("FAKE_NVML_MIG_DEVICES", f";{MIG0};;{MIG1}")
    migs = read(fake_host, library).gpus[0].mig_devices
    assert [(mig.index, mig.uuid) for mig in migs] == [(1, MIG0), (3, MIG1)]


def test_mig_devices_are_read_only_while_mig_mode_is_on(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0},1:{UUID1},2:{UUID2}")
    monkeypatch.setenv("FAKE_NVML_MIG", "0")
    monkeypatch.setenv("FAKE_NVML_MIG_PENDING", "1")
    monkeypatch.setenv("FAKE_NVML_MIG_DEVICES", f"{MIG0}")
    gpus = read(fake_host, library).gpus
    assert [len(gpu.mig_devices) for gpu in gpus] == [1, 0, 0]
    assert fake_nvml_calls(library, "nvmlDeviceGetMaxMigDeviceCount") == 1


def test_mig_instance_ids_missing_from_the_library_are_none(
    fake_host: FakeHost, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    without = ["nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId"]
    old = str(fake_nvml_library(tmp_path_factory, without=without))
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0}")
    monkeypatch.setenv("FAKE_NVML_MIG", "0")
    monkeypatch.setenv("FAKE_NVML_MIG_DEVICES", f"{MIG0}@3.0")
    assert read(fake_host, old).gpus[0].mig_devices == [NvmlMigDevice(0, MIG0)]


def test_another_error_of_a_new_call_fails_the_read_naming_it(
    fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only "not supported" and "no such function" are answers to leave out; any other error fails the read, as it
    # does for the calls every read needs, and what was read before stays.
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0},1:{UUID1}")
    monkeypatch.setenv("FAKE_NVML_BRAND", "1:error")
    view = read_nvml(HostView(str(fake_host.root)), remove_created=False, library=library)
    assert not view.available
    assert view.reason == "GPU 1: nvmlDeviceGetBrand: Unknown Error"
    assert [gpu.uuid for gpu in view.gpus] == [UUID0]


def test_the_nvml_calls_stay_few(fake_host: FakeHost, library: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0},1:{UUID1}")
    monkeypatch.setenv("FAKE_NVML_MIG", "1")
    monkeypatch.setenv("FAKE_NVML_MIG_MAX", "1:3")
    monkeypatch.setenv("FAKE_NVML_MIG_DEVICES", f"1:{MIG0};{MIG1}")
    read(fake_host, library)
    # init, driver, CUDA, count and shutdown; seven per GPU; per MIG GPU the maximum, one per MIG index and three
    # per MIG device.
    assert fake_nvml_calls(library) == 5 + 7 * 2 + (1 + 3 + 3 * 2)


def test_the_fake_answers_nvml_errors_for_bad_arguments(library: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    monkeypatch.setenv("FAKE_NVML_GPUS", f"0:{UUID0}")
    pynvml.nvmlLib = ctypes.CDLL(library)
    pynvml._nvmlGetFunctionPointer_cache.clear()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()
    pynvml.nvmlInit()
    try:
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            pynvml.nvmlDeviceGetHandleByIndex(1)
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            pynvml.nvmlDeviceGetUUID(pynvml.c_nvmlDevice_t())
        assert pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0)) == UUID0
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            pynvml.nvmlDeviceGetGpuInstanceId(pynvml.nvmlDeviceGetHandleByIndex(0))
    finally:
        pynvml.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlShutdown()
