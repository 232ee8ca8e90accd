"""What NVML says about the node, read through pynvml (the optional `nvml` extra), with its side effect on /dev
accounted for.

With `ModifyDeviceFiles: 1` in /proc/driver/nvidia/params, NVML creates every /dev/nvidia* node it finds missing.
On a node whose driver lives in a container (/run/nvidia/driver), such nodes on the host's /dev later make cri-o
refuse privileged GPU containers (their CRI device's container path then exists on the host). So the host's /dev
is listed before the first NVML call and after the last one, and what appeared is reported, and removed on request.

pynvml keeps one library, one lock and a cache of function pointers in module globals; a library given here is
swapped in for the one read and the previous state restored afterwards, so this is not safe to run alongside other
pynvml users in the same process.

The CUDA version, brands, compute capabilities and MIG devices are read in the forms NVIDIA's container tools use
to check an image's NVIDIA_REQUIRE_CUDA and to resolve NVIDIA_VISIBLE_DEVICES, so the two can be compared with what
a container asks for. What a GPU does not support, or a library too old to have, is left out, not an error.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import posixpath
import stat
from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.host import HostView

DEV = "/dev"
# MIG capability nodes live here; one that appears is as visible to cri-o as a top-level node.
CAPS_DIR = "/dev/nvidia-caps"
PARAMS = "/proc/driver/nvidia/params"
MISSING_PYNVML = "pynvml is not installed (pip install nvidia-ml-py)"

# nvmlBrandType_t -> the brand nvidia-container-cli matches `brand=` requirements against (case-insensitively), as
# NVIDIA/libnvidia-container src/driver.c (driver_get_device_brand_1_svc) names them since commit
# 6845f41ef5313fda5b7254d6b75843d660e49fcc (v1.9.0), lower-cased as NVIDIA_REQUIRE_CUDA spells them. Every other
# value (NVML_BRAND_UNKNOWN, and those newer than that table) is "unknown" there. nvidia-container-toolkit has no
# table of its own at d34b3046758cb1a5db606b2a39519c731bbf9f56; its CDI requirement check (pull request 1795, not
# merged) names the vGPU brands differently ("nvidiavapps", ...), which images' requirements do not use.
BRANDS = {
    1: "quadro",  # NVML_BRAND_QUADRO
    2: "tesla",  # NVML_BRAND_TESLA
    3: "nvs",  # NVML_BRAND_NVS
    4: "grid",  # NVML_BRAND_GRID
    5: "geforce",  # NVML_BRAND_GEFORCE
    6: "titan",  # NVML_BRAND_TITAN
    7: "vapps",  # NVML_BRAND_NVIDIA_VAPPS
    8: "vpc",  # NVML_BRAND_NVIDIA_VPC
    9: "vcs",  # NVML_BRAND_NVIDIA_VCS
    10: "vws",  # NVML_BRAND_NVIDIA_VWS
    11: "cloudgaming",  # NVML_BRAND_NVIDIA_CLOUD_GAMING (was NVML_BRAND_NVIDIA_VGAMING)
    12: "quadrortx",  # NVML_BRAND_QUADRO_RTX
    13: "nvidiartx",  # NVML_BRAND_NVIDIA_RTX
    14: "nvidia",  # NVML_BRAND_NVIDIA
    15: "geforcertx",  # NVML_BRAND_GEFORCE_RTX
    16: "titanrtx",  # NVML_BRAND_TITAN_RTX
}
UNKNOWN_BRAND = "unknown"


@dataclass
class NvmlMigDevice:
    # The N of NVIDIA_VISIBLE_DEVICES=GPU:N: the index nvmlDeviceGetMigDeviceHandleByIndex answers this device at.
    # nvidia-container-toolkit resolves GPU:N by that very call (pkg/nvcdi/lib-nvml.go normalizeDeviceID at
    # d34b3046758cb1a5db606b2a39519c731bbf9f56) and go-nvlib's VisitMigDevices names CDI devices GPU:N by it,
    # skipping indexes without a device; nvidia-container-cli (libnvidia-container src/nvc_info.c
    # fill_mig_device_info at 00b4b47e2a3eed09f8059eb39feaa0b4540d22d9, src/cli/common.c select_mig_device) also
    # keeps device N at N, but stops at the first index without one, so devices after a gap are not visible to it.
    index: int
    uuid: str
    # None when NVML lacks the call (older than MIG instance ids) or does not support it.
    gpu_instance_id: Optional[int] = None
    compute_instance_id: Optional[int] = None


@dataclass
class NvmlGpu:
    index: int
    minor: int
    uuid: str
    name: str
    # None when the GPU does not support MIG (NVML_ERROR_NOT_SUPPORTED).
    mig_current: Optional[bool] = None
    mig_pending: Optional[bool] = None
    # For each of these, None: the GPU does not support the query or the library lacks it.
    brand: Optional[str] = None  # the `brand` requirement's value for this GPU: BRANDS, or UNKNOWN_BRAND
    brand_enum: Optional[int] = None  # what nvmlDeviceGetBrand answered
    # The compute capability as the `arch` requirement compares it: "major.minor" (libnvidia-container's "%u.%u").
    arch: Optional[str] = None
    # Read only while MIG mode is on now (the pending mode does not count, as for nvidia-container-cli since 1.10).
    mig_devices: list[NvmlMigDevice] = field(default_factory=list)

    @property
    def mig_mode(self) -> Optional[bool]:
        """The MIG mode in effect now (the pending one takes effect at the next GPU reset)."""
        return self.mig_current


@dataclass
class NvmlView:
    available: bool
    reason: str = ""  # why not available: pynvml missing, the library not loadable, or the NVML call and error
    driver_version: Optional[str] = None
    # The `cuda` requirement's value: "major.minor" of the CUDA driver API version; None when NVML does not say.
    cuda_driver_version: Optional[str] = None
    gpus: list[NvmlGpu] = field(default_factory=list)
    created_nodes: list[str] = field(default_factory=list)  # host paths that appeared during the NVML calls
    removed_nodes: list[str] = field(default_factory=list)  # of those, the ones removed again
    removal_errors: dict[str, str] = field(default_factory=dict)  # host path -> why it could not be removed
    # What the host's /proc/driver/nvidia/params says; None when it is absent or does not say.
    modify_device_files: Optional[bool] = None


class _Failed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def modify_device_files(host: HostView) -> Optional[bool]:
    """Whether the driver lets NVML create device nodes, per the host's /proc/driver/nvidia/params."""
    text = host.read_text(PARAMS)
    if text is None:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "ModifyDeviceFiles":
            return value.strip() != "0"
    return None


def _nvidia_entries(host: HostView) -> dict[str, str]:
    """host path -> canonical node path of every nvidia* entry of the host's /dev (and of /dev/nvidia-caps).

    The canonical path is the resolved directory joined with the name, looked at with lstat, which HostView
    does not cache: asking the cached stat about a node that was missing earlier in the run would still say
    missing.
    """
    entries: dict[str, str] = {}
    for directory in (DEV, CAPS_DIR):
        canonical = host.canonical(directory)
        if canonical is None:
            continue
        for name in host.list_dir(directory):
            if name.startswith("nvidia"):
                entries[posixpath.join(directory, name)] = posixpath.join(canonical, name)
    return entries


def read_nvml(host: HostView, *, remove_created: bool, library: Optional[str] = None) -> NvmlView:
    """The NVML view of the node; never raises for a missing pynvml, an unloadable library or an NVML error.

    library: a file to load as libnvidia-ml.so.1 instead of the one the dynamic loader finds.
    remove_created: unlink the nvidia* character devices that appeared in the host's /dev during the calls.
    NVML itself works on the /dev of the process it runs in; only the host's /dev (host.root) is watched.
    """
    view = NvmlView(available=False, modify_device_files=modify_device_files(host))
    try:
        pynvml: Any = importlib.import_module("pynvml")
    except ImportError:
        view.reason = MISSING_PYNVML
        return view

    before = _nvidia_entries(host)
    try:
        _query(pynvml, view, library)
        view.available = True
    except _Failed as failure:
        view.reason = failure.reason
    finally:
        _account(host, view, before, remove_created)
    return view


def _query(pynvml: Any, view: NvmlView, library: Optional[str]) -> None:
    if library is None:
        _calls(pynvml, view)
        return
    try:
        loaded = ctypes.CDLL(library)
    except OSError as error:
        raise _Failed(f"cannot load {library} as the NVML library: {error}") from None
    previous = _use_library(pynvml, loaded)
    try:
        _calls(pynvml, view)
    finally:
        _use_library(pynvml, previous)


def _use_library(pynvml: Any, library: Optional[ctypes.CDLL]) -> Optional[ctypes.CDLL]:
    """Make pynvml use library; returns the one it used before (None: not loaded yet).

    pynvml loads libnvidia-ml.so.1 only while its nvmlLib is None, and caches every function it resolves, so the
    cache must go with the library or the next call still lands in the previous one.
    """
    with pynvml.libLoadLock:
        previous: Optional[ctypes.CDLL] = pynvml.nvmlLib
        pynvml.nvmlLib = library
        cache = getattr(pynvml, "_nvmlGetFunctionPointer_cache", None)
        if isinstance(cache, dict):
            cache.clear()
    return previous


def _calls(pynvml: Any, view: NvmlView) -> None:
    step = "nvmlInit"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        raise _Failed(f"{step}: {error}") from None
    try:
        step = "nvmlSystemGetDriverVersion"
        view.driver_version = _text(pynvml.nvmlSystemGetDriverVersion())
        view.cuda_driver_version = _cuda_driver_version(pynvml)
        step = "nvmlDeviceGetCount"
        count = int(pynvml.nvmlDeviceGetCount())
        for index in range(count):
            step = f"GPU {index}: nvmlDeviceGetHandleByIndex"
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            step = f"GPU {index}: nvmlDeviceGetMinorNumber"
            minor = int(pynvml.nvmlDeviceGetMinorNumber(handle))
            step = f"GPU {index}: nvmlDeviceGetUUID"
            uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
            step = f"GPU {index}: nvmlDeviceGetName"
            name = _text(pynvml.nvmlDeviceGetName(handle))
            gpu = NvmlGpu(index=index, minor=minor, uuid=uuid, name=name)
            step = f"GPU {index}: nvmlDeviceGetMigMode"
            try:
                current, pending = pynvml.nvmlDeviceGetMigMode(handle)
            except pynvml.NVMLError_NotSupported:
                pass
            else:
                gpu.mig_current = current == pynvml.NVML_DEVICE_MIG_ENABLE
                gpu.mig_pending = pending == pynvml.NVML_DEVICE_MIG_ENABLE
            _requirement_fields(pynvml, gpu, handle)
            if gpu.mig_current:
                gpu.mig_devices = _mig_devices(pynvml, gpu, handle)
            view.gpus.append(gpu)
    except pynvml.NVMLError as error:
        raise _Failed(f"{step}: {error}") from None
    finally:
        # What was read stays true; a shutdown that fails leaves nothing behind for this process to undo.
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _optional(pynvml: Any, where: str, name: str, *args: Any, absent: tuple[type[BaseException], ...] = ()) -> Any:
    """pynvml.name(*args), or None where NVML does not support it, lacks it, or answers one of absent.

    Any other NVML error fails the read, named by where and name, as the calls every read needs do.
    """
    function = getattr(pynvml, name, None)
    if function is None:  # a pynvml older than the call
        return None
    try:
        return function(*args)
    except (pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound, *absent):
        return None
    except pynvml.NVMLError as error:
        raise _Failed(f"{where}{name}: {error}") from None


def _cuda_driver_version(pynvml: Any) -> Optional[str]:
    # _v2 asks libcuda (cuDriverGetVersion), which is what a container gets; without libcuda it answers
    # NVML_ERROR_LIBRARY_NOT_FOUND, where the older call still answers a version the driver supports.
    version = _optional(pynvml, "", "nvmlSystemGetCudaDriverVersion_v2", absent=(pynvml.NVMLError_LibraryNotFound,))
    if version is None:
        version = _optional(pynvml, "", "nvmlSystemGetCudaDriverVersion")
    if not isinstance(version, int) or version <= 0:
        return None
    return cuda_version_text(version)


def cuda_version_text(version: int) -> str:
    """NVML's CUDA version number (1000 * major + 10 * minor) as "major.minor": 12040 -> "12.4".

    nvidia-container-cli takes the minor as version % 100 // 10; the two agree while CUDA minors stay below 10.
    """
    return f"{version // 1000}.{version % 1000 // 10}"


def _requirement_fields(pynvml: Any, gpu: NvmlGpu, handle: Any) -> None:
    where = f"GPU {gpu.index}: "
    brand = _optional(pynvml, where, "nvmlDeviceGetBrand", handle)
    if brand is not None:
        gpu.brand_enum = int(brand)
        gpu.brand = BRANDS.get(gpu.brand_enum, UNKNOWN_BRAND)
    capability = _optional(pynvml, where, "nvmlDeviceGetCudaComputeCapability", handle)
    if capability is not None:
        major, minor = capability
        gpu.arch = f"{int(major)}.{int(minor)}"


def _mig_devices(pynvml: Any, gpu: NvmlGpu, handle: Any) -> list[NvmlMigDevice]:
    where = f"GPU {gpu.index}: "
    count = _optional(pynvml, where, "nvmlDeviceGetMaxMigDeviceCount", handle)
    # NOT_FOUND: no MIG device at that index now; INVALID_ARGUMENT is how some drivers say the same (go-nvlib
    # skips both).
    missing = (pynvml.NVMLError_NotFound, pynvml.NVMLError_InvalidArgument)
    found: list[NvmlMigDevice] = []
    for index in range(int(count or 0)):
        where = f"GPU {gpu.index} MIG {index}: "
        mig = _optional(pynvml, where, "nvmlDeviceGetMigDeviceHandleByIndex", handle, index, absent=missing)
        if mig is None:
            continue
        try:
            uuid = _text(pynvml.nvmlDeviceGetUUID(mig))
        except pynvml.NVMLError as error:
            raise _Failed(f"{where}nvmlDeviceGetUUID: {error}") from None
        device = NvmlMigDevice(index=index, uuid=uuid)
        gpu_instance = _optional(pynvml, where, "nvmlDeviceGetGpuInstanceId", mig)
        compute_instance = _optional(pynvml, where, "nvmlDeviceGetComputeInstanceId", mig)
        device.gpu_instance_id = None if gpu_instance is None else int(gpu_instance)
        device.compute_instance_id = None if compute_instance is None else int(compute_instance)
        found.append(device)
    return found


def _text(value: object) -> str:
    # Older pynvml releases return bytes where newer ones decode.
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _account(host: HostView, view: NvmlView, before: dict[str, str], remove_created: bool) -> None:
    after = _nvidia_entries(host)
    for path in sorted(set(after) - set(before)):
        view.created_nodes.append(path)
        if not remove_created:
            continue
        canonical = after[path]
        info = host.lstat(canonical)
        if info is None:
            continue  # gone already
        if not stat.S_ISCHR(info.st_mode) or not posixpath.basename(path).startswith("nvidia"):
            view.removal_errors[path] = "not a character device; left alone"
            continue
        try:
            host.unlink(canonical)
        except OSError as error:
            view.removal_errors[path] = error.strerror or str(error)
            continue
        view.removed_nodes.append(path)
