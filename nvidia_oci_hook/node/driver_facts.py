"""What the node's NVIDIA driver is, read from the node: the loaded kernel module's version, each driver root's
user-space version (the versioned library files, what each `.so.1` link and the linker cache select), and the
GPUs the module knows. Nothing is guessed: what the node does not show is None.

The formats are the driver's own (open-gpu-kernel-modules, kernel-open/nvidia/nv-procfs.c and nv.c):
`/proc/driver/nvidia/version` starts `NVRM version: NVIDIA UNIX <arch> Kernel Module  <version>  <date>` (the
open module: `NVIDIA UNIX Open Kernel Module for <arch>  <version>  Release Build  (<builder>)  <date>`);
`/sys/module/nvidia/version` holds the version alone (MODULE_VERSION); each `/proc/driver/nvidia/gpus/<bus id>/
information` holds `Key: <tabs> value` lines (Model, GPU UUID, Bus Location, Device Minor, …).

A driver installs its user space as files named with its version (`libcuda.so.550.54.15`) and `.so.1` links that
ldconfig points at them by their SONAME; the loader follows the link, or the linker cache where the link is not
on the search path. After a driver upgrade without a reboot the module stays the old one while the files are
the new ones: NVML then refuses every call ("Driver/library version mismatch").
"""

from __future__ import annotations

import posixpath
import re
import struct
from dataclasses import dataclass, field
from typing import Optional

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.driver import LIBRARY_DIRS

MODULE_VERSION_FILE = "/proc/driver/nvidia/version"
SYS_MODULE_VERSION = "/sys/module/nvidia/version"
GPUS_DIR = "/proc/driver/nvidia/gpus"
LD_SO_CACHE = "etc/ld.so.cache"
COMPAT_DIR = "usr/local/cuda/compat"

# A driver version as the driver writes it: a three-digit branch, then one or two numbers (570.26, 550.54.15).
DRIVER_VERSION = r"\d{3}\.\d{1,3}(?:\.\d{1,3})?"
_MODULE_LINE = re.compile(r"Kernel Module(?: for \S+)?\s+(" + DRIVER_VERSION + r")\b")
# The libraries a driver installs with its version in the name; libraries NVIDIA ships with their own versions
# (libnvidia-egl-wayland.so.1.1.13) do not match, having no three-digit branch.
_VERSIONED_LIBRARY = re.compile(
    r"^(lib(?:cuda|cudadebugger|nvcuvid|nvoptix|nvidia-[A-Za-z0-9_-]+|[A-Za-z0-9]+_nvidia))\.so\.("
    + DRIVER_VERSION
    + r")$"
)
# The links the loader and NVIDIA's tools open by SONAME; the first two decide whether NVML and CUDA work.
SELECTING_LINKS = ("libnvidia-ml.so.1", "libcuda.so.1", "libnvidia-ptxjitcompiler.so.1", "libnvidia-nvvm.so.4")


# The argument of NVIDIA's enable-cuda-compat hook that carries the driver version a CDI spec was generated for.
HOST_DRIVER_VERSION = "--host-driver-version="


def host_driver_version(argument: str) -> Optional[str]:
    """The version an enable-cuda-compat argument states, or None for any other argument."""
    if not argument.startswith(HOST_DRIVER_VERSION):
        return None
    stated = argument[len(HOST_DRIVER_VERSION) :]
    return stated if driver_version(stated) else None


def driver_version(text: str) -> Optional[tuple[int, ...]]:
    """A driver version's numbers, or None if text is not one."""
    if not re.fullmatch(DRIVER_VERSION, text):
        return None
    return tuple(int(part) for part in text.split("."))


def library_version(name: str) -> Optional[tuple[str, str]]:
    """(stem, version) of a driver library file name such as libcuda.so.550.54.15; None for any other name."""
    match = _VERSIONED_LIBRARY.match(name)
    return (match.group(1), match.group(2)) if match else None


def libraries_named(argument: str) -> list[tuple[str, str]]:
    """(file name, driver version) of each driver library a hook argument names: create-symlinks' links are
    TARGET::LINK, other arguments may be NAME=VALUE."""
    found = []
    for part in argument.replace("::", " ").replace("=", " ").split():
        name = posixpath.basename(part)
        parsed = library_version(name)
        if parsed is not None:
            found.append((name, parsed[1]))
    return found


@dataclass(frozen=True)
class ModuleVersion:
    version: Optional[str]  # None: not loaded, or the files do not say
    source: str  # the file that said it, or why it is unknown
    line: str = ""  # the first line of /proc/driver/nvidia/version
    # /sys/module/nvidia/version when it disagrees with /proc: a module replaced under a running kernel.
    disagreement: str = ""

    @property
    def loaded(self) -> bool:
        return self.version is not None or bool(self.line)


def module_version(host: HostView) -> ModuleVersion:
    proc = host.read_text(MODULE_VERSION_FILE, limit=4096)
    sys_text = host.read_text(SYS_MODULE_VERSION, limit=256)
    sys_version = sys_text.strip() if sys_text and driver_version(sys_text.strip()) else None
    line = proc.splitlines()[0].strip() if proc and proc.strip() else ""
    match = _MODULE_LINE.search(line)
    proc_version = match.group(1) if match else None
    if proc_version is not None:
        differs = sys_version is not None and sys_version != proc_version
        return ModuleVersion(
            proc_version,
            MODULE_VERSION_FILE,
            line,
            f"{SYS_MODULE_VERSION} says {sys_version}" if differs else "",
        )
    if sys_version is not None:
        return ModuleVersion(sys_version, SYS_MODULE_VERSION, line)
    if proc is not None:
        return ModuleVersion(None, f"{MODULE_VERSION_FILE} names no version: {line or '(empty)'}", line)
    return ModuleVersion(None, f"the module is not loaded ({MODULE_VERSION_FILE} and {SYS_MODULE_VERSION} are absent)")


@dataclass(frozen=True)
class Selection:
    """What one name the loader opens (a `.so.1` link, or a linker cache entry) leads to."""

    name: str  # the node path of the link or cache entry
    target: str  # the file it resolves to (node path), or "" when it resolves to nothing
    version: Optional[str]  # the driver version in the target's name; None: not a versioned driver file
    via: str  # "link" or "ld.so.cache"


@dataclass
class UserSpace:
    """One driver root's user-space libraries."""

    root: str
    # version -> the versioned driver files of that version, node paths
    files: dict[str, list[str]] = field(default_factory=dict)
    selections: list[Selection] = field(default_factory=list)
    cache_read: Optional[str] = None  # the linker cache read (node path), None when absent or unreadable

    @property
    def versions(self) -> list[str]:
        return sorted(self.files, key=lambda text: driver_version(text) or ())

    def selected_versions(self) -> set[str]:
        return {selection.version for selection in self.selections if selection.version}

    @property
    def found(self) -> bool:
        return bool(self.files or self.selections)


def _join(root: str, relative: str) -> str:
    return posixpath.join(root, relative.lstrip("/"))


def _resolve_link(host: HostView, path: str, via: str) -> Selection:
    canonical = host.canonical(path)
    if canonical is None:
        return Selection(path, "", None, via)
    parsed = library_version(posixpath.basename(canonical))
    return Selection(path, canonical, parsed[1] if parsed else None, via)


def user_space(host: HostView, root: str) -> UserSpace:
    found = UserSpace(root)
    for directory in LIBRARY_DIRS:
        path = _join(root, directory)
        names = host.list_dir(path)
        for name in names:
            parsed = library_version(name)
            if parsed is not None and host.is_file(posixpath.join(path, name)):
                found.files.setdefault(parsed[1], []).append(posixpath.join(path, name))
        for link in SELECTING_LINKS:
            if link in names:
                found.selections.append(_resolve_link(host, posixpath.join(path, link), "link"))
    cache = _join(root, LD_SO_CACHE)
    entries = read_ld_cache(host, cache)
    if entries is not None:
        found.cache_read = cache
        seen = set()
        for soname, library in entries:
            # The loader takes the first entry for a name; a 32-bit one (compat32) is another name's business.
            if soname not in SELECTING_LINKS or soname in seen or not library.startswith("/"):
                continue
            seen.add(soname)
            # The cache names the node's path as seen from its root; read it under that root.
            selection = _resolve_link(host, _join(root, library), "ld.so.cache")
            if all(selection.name != earlier.name for earlier in found.selections):
                found.selections.append(selection)
    return found


# glibc's cache format since 2.32 ("glibc-ld.so.cache" "1.1", elf/cache.c): a 48-byte header (magic, version,
# nlibs, len_strings, flags, padding, extension_offset, unused), nlibs 24-byte entries (flags, key, value,
# osversion, hwcap), then the strings; key and value are offsets from the header's start. An older file starts with
# the "ld.so-1.7.0" table (12-byte entries) and carries the new format after it, aligned.
_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_OLD_MAGIC = b"ld.so-1.7.0"
_NEW_HEADER = 48
_NEW_ENTRY = 24
# The 64-bit library flags (FLAG_ELF_LIBC6 with FLAG_X8664_LIB64 or FLAG_AARCH64_LIB64); the loader of a 64-bit
# program skips other entries.
_LIB64_FLAGS = (0x0303, 0x0A03)


def read_ld_cache(host: HostView, path: str) -> Optional[list[tuple[str, str]]]:
    """(soname, library path) for each 64-bit entry of a glibc linker cache, in the cache's order (the loader
    takes the first match); None when the file is absent or not a cache."""
    data = host.read_prefix(path, 16 << 20)
    if data is None:
        return None
    start = 0
    if data.startswith(_OLD_MAGIC):
        (count,) = struct.unpack_from("<I", data, len(_OLD_MAGIC) + 1)
        start = len(_OLD_MAGIC) + 1 + 4 + count * 12
        start += -start % 8
    if data[start : start + len(_NEW_MAGIC)] != _NEW_MAGIC or len(data) < start + _NEW_HEADER:
        return None
    (count,) = struct.unpack_from("<I", data, start + len(_NEW_MAGIC))
    entries = []
    for index in range(count):
        offset = start + _NEW_HEADER + index * _NEW_ENTRY
        if offset + _NEW_ENTRY > len(data):
            return None
        flags, key, value = struct.unpack_from("<iII", data, offset)
        if flags not in _LIB64_FLAGS:
            continue
        entries.append((_string(data, start + key), _string(data, start + value)))
    return entries


def _string(data: bytes, offset: int) -> str:
    end = data.find(b"\0", offset)
    return data[offset : end if end >= 0 else len(data)].decode("utf-8", "replace")


@dataclass(frozen=True)
class ProcGpu:
    """One GPU as the module lists it under /proc/driver/nvidia/gpus."""

    bus_id: str  # the directory's name: the PCI domain, bus, device and function
    uuid: Optional[str]
    minor: Optional[int]
    model: Optional[str]
    bus_location: Optional[str]
    excluded: bool = False  # "GPU Excluded: Yes": the module keeps it from every client


def proc_gpus(host: HostView) -> Optional[list[ProcGpu]]:
    """The GPUs the loaded module knows, ordered by device minor; None when the module lists none (not loaded)."""
    if not host.is_dir(GPUS_DIR):
        return None
    gpus = []
    for bus_id in host.list_dir(GPUS_DIR):
        text = host.read_text(posixpath.join(GPUS_DIR, bus_id, "information"), limit=65536)
        if text is None:
            continue
        fields = {}
        for line in text.splitlines():
            key, separator, value = line.partition(":")
            if separator:
                fields[key.strip()] = value.strip()
        minor = fields.get("Device Minor", "")
        gpus.append(
            ProcGpu(
                bus_id,
                fields.get("GPU UUID") or None,
                int(minor) if minor.isdigit() else None,
                fields.get("Model") or None,
                fields.get("Bus Location") or None,
                fields.get("GPU Excluded", "").lower() == "yes",
            )
        )
    return sorted(gpus, key=lambda gpu: (gpu.minor is None, gpu.minor or 0, gpu.bus_id))


def compat_libraries(files: HostView) -> dict[str, list[str]]:
    """version -> the CUDA forward-compatibility libraries (libcuda.so.<version>, …) an image carries in
    /usr/local/cuda/compat; files is the image's root filesystem."""
    found: dict[str, list[str]] = {}
    directory = "/" + COMPAT_DIR
    for name in files.list_dir(directory):
        parsed = library_version(name)
        if parsed is not None:
            found.setdefault(parsed[1], []).append(posixpath.join(directory, name))
    return found


@dataclass
class NodeDriver:
    """The driver facts the rules judge a container's NVIDIA_* variables against."""

    module: ModuleVersion
    root: Optional[str]  # the driver root found, None when none or several
    user_space: Optional[UserSpace]  # of that root
    gpus: Optional[list[ProcGpu]]  # None: the module lists none (not loaded, or /proc not readable)
    cuda: Optional[str]  # the highest CUDA the driver supports; None: unknown
    cuda_basis: str  # how cuda was found, or why it is unknown

    @property
    def driver(self) -> Optional[str]:
        return self.module.version

    def visible_gpus(self) -> Optional[list[ProcGpu]]:
        """The GPUs in NVML's index order (the PCI bus order), those the module excludes left out."""
        if self.gpus is None:
            return None
        return sorted((gpu for gpu in self.gpus if not gpu.excluded), key=lambda gpu: gpu.bus_id.lower())


def highest_cuda(driver: Optional[str]) -> tuple[Optional[str], str]:
    """The highest CUDA a driver version supports, from NVIDIA's table, and the sentence saying how."""
    from nvidia_oci_hook.nvidia import cuda_drivers

    if driver is None:
        return None, "the driver version is unknown"
    release = cuda_drivers.release_for_driver(driver)
    if release is None:
        return None, f"driver {driver} is older than every CUDA release in NVIDIA's table"
    if cuda_drivers.beyond_table(driver):
        return None, (
            f"driver {driver} is newer than NVIDIA's table as read (to {cuda_drivers.CUDA_DRIVERS[0].label}): it "
            f"supports CUDA {release.cuda} or later"
        )
    return release.cuda, (
        f"driver {driver} supports CUDA {release.cuda} at most ({release.label} needs >= {release.minimum_driver}, "
        f"NVIDIA's table of CUDA toolkit and driver versions)"
    )


def node_driver(host: HostView, driver_roots: tuple[str, ...]) -> NodeDriver:
    from nvidia_oci_hook.node.driver import FOUND, resolve_driver_root

    module = module_version(host)
    answer = resolve_driver_root(host, driver_roots)
    root = answer.root if answer.status == FOUND else None
    space = user_space(host, root) if root is not None else None
    cuda, basis = highest_cuda(module.version)
    return NodeDriver(module, root, space, proc_gpus(host), cuda, basis)
