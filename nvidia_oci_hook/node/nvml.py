"""What NVML says about the node, read through pynvml (the optional `nvml` extra), with its side effect on /dev
accounted for.

With `ModifyDeviceFiles: 1` in /proc/driver/nvidia/params, NVML creates every /dev/nvidia* node it finds missing.
On a node whose driver lives in a container (/run/nvidia/driver), such nodes on the host's /dev later make cri-o
refuse privileged GPU containers (their CRI device's container path then exists on the host). So the host's /dev
is listed before the first NVML call and after the last one, and what appeared is reported, and removed on request.

pynvml keeps one library, one lock and a cache of function pointers in module globals; a library given here is
swapped in for the one read and the previous state restored afterwards, so this is not safe to run alongside other
pynvml users in the same process.
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


@dataclass
class NvmlGpu:
    index: int
    minor: int
    uuid: str
    name: str
    # None when the GPU does not support MIG (NVML_ERROR_NOT_SUPPORTED).
    mig_current: Optional[bool] = None
    mig_pending: Optional[bool] = None

    @property
    def mig_mode(self) -> Optional[bool]:
        """The MIG mode in effect now (the pending one takes effect at the next GPU reset)."""
        return self.mig_current


@dataclass
class NvmlView:
    available: bool
    reason: str = ""  # why not available: pynvml missing, the library not loadable, or the NVML call and error
    driver_version: Optional[str] = None
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
            view.gpus.append(gpu)
    except pynvml.NVMLError as error:
        raise _Failed(f"{step}: {error}") from None
    finally:
        # What was read stays true; a shutdown that fails leaves nothing behind for this process to undo.
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


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
