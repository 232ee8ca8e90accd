"""Fake node roots: a host driver, a containerized driver, both, neither, and each seed's broken state."""

from __future__ import annotations

from tests.helpers import FakeHost

LIB = "/usr/lib/x86_64-linux-gnu"
CONTAINER = "/run/nvidia/driver"


def host_driver(host: FakeHost) -> FakeHost:
    host.executable("/usr/bin/nvidia-smi").file(f"{LIB}/libnvidia-ml.so.1").file(f"{LIB}/libcuda.so.1")
    host.device("/dev/nvidiactl", "c", 195, 255).device("/dev/nvidia0", "c", 195, 0)
    host.file("/proc/driver/nvidia/version").directory(CONTAINER)
    return host


def container_driver(host: FakeHost) -> FakeHost:
    host.executable(f"{CONTAINER}/usr/bin/nvidia-smi").file(f"{CONTAINER}{LIB}/libnvidia-ml.so.1")
    host.file(f"{CONTAINER}{LIB}/libcuda.so.1")
    host.device(f"{CONTAINER}/dev/nvidiactl", "c", 195, 255).device(f"{CONTAINER}/dev/nvidia0", "c", 195, 0)
    host.file("/proc/driver/nvidia/version")
    return host


def seed_000(host: FakeHost) -> FakeHost:
    """Driver on the host; a failed validator left toolkit-ready behind without host-driver-ready."""
    host_driver(host)
    host.file("/run/nvidia/validations/toolkit-ready").file("/run/nvidia/validations/cuda-ready")
    return host


OPERATOR_TOOLKIT_CONFIG = "/usr/local/nvidia/toolkit/.config/nvidia-container-runtime/config.toml"


def operator_toolkit(host: FakeHost, root: str = "/run/nvidia/driver") -> FakeHost:
    """The GPU Operator's toolkit as its container installs it: the binaries under /usr/local/nvidia/toolkit and
    their config.toml, whose driver root is the one the operator chose."""
    toolkit = "/usr/local/nvidia/toolkit"
    for name in ("nvidia-container-runtime-hook", "nvidia-container-cli", "nvidia-ctk"):
        host.executable(f"{toolkit}/{name}")
    host.executable("/usr/bin/runc").file("/sbin/ldconfig")
    host.text(
        OPERATOR_TOOLKIT_CONFIG,
        f'[nvidia-container-cli]\nroot = "{root}"\npath = "{toolkit}/nvidia-container-cli"\n'
        f'[nvidia-container-runtime]\nmode = "legacy"\n[nvidia-container-runtime-hook]\n'
        f'path = "{toolkit}/nvidia-container-runtime-hook"\n[nvidia-ctk]\npath = "{toolkit}/nvidia-ctk"\n',
    )
    return host


def seed_003(host: FakeHost) -> FakeHost:
    """Driver in a container; NVML in a pod that mounts the host's /dev created /dev/nvidia* there."""
    container_driver(host)
    host.device("/dev/nvidiactl", "c", 195, 255).device("/dev/nvidia0", "c", 195, 0)
    host.file("/run/nvidia/validations/toolkit-ready").file("/run/nvidia/validations/driver-ready")
    (host.root / "run/nvidia/validations/driver-ready").write_text(
        "IS_HOST_DRIVER=false\nNVIDIA_DRIVER_ROOT=/run/nvidia/driver\n"
    )
    return host


def driver_container_restarting(host: FakeHost) -> FakeHost:
    """The driver container's rootfs between restarts: its dev/ still holds the nodes, its libraries are gone."""
    host.device(f"{CONTAINER}/dev/nvidiactl", "c", 195, 255).device(f"{CONTAINER}/dev/nvidia0", "c", 195, 0)
    host.file("/proc/driver/nvidia/version")
    return host


# The driver's own formats (open-gpu-kernel-modules, kernel-open/nvidia/nv-procfs.c): the first line of
# /proc/driver/nvidia/version, and /proc/driver/nvidia/gpus/<bus id>/information.
PROPRIETARY_MODULE = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Tue Mar  5 22:23:56 UTC 2024\n"
OPEN_MODULE = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build  "
    "(dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:23:56 UTC 2024\n"
)
GCC_LINE = "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
GPU_INFORMATION = (
    "Model: \t\t {model}\n"
    "IRQ:   \t\t 185\n"
    "GPU UUID: \t {uuid}\n"
    "Video BIOS: \t 96.00.74.00.0b\n"
    "Bus Type: \t PCIe\n"
    "DMA Size: \t 52 bits\n"
    "DMA Mask: \t 0xfffffffffffff\n"
    "Bus Location: \t {bus}\n"
    "Device Minor: \t {minor}\n"
    "GPU Firmware: \t {version}\n"
    "GPU Excluded:\t No\n"
)
# What a driver installs with its version in the name, and the .so.1 links ldconfig makes for them.
DRIVER_LIBRARIES = {
    "libcuda.so": "libcuda.so.1",
    "libnvidia-ml.so": "libnvidia-ml.so.1",
    "libnvidia-ptxjitcompiler.so": "libnvidia-ptxjitcompiler.so.1",
    "libnvidia-nvvm.so": "libnvidia-nvvm.so.4",
    "libnvidia-allocator.so": "libnvidia-allocator.so.1",
}


def loaded_module(host: FakeHost, version: str, *, open_module: bool = False, sys_version: str = "") -> FakeHost:
    """The kernel module as /proc and /sys show it once loaded."""
    line = (OPEN_MODULE if open_module else PROPRIETARY_MODULE).format(version=version)
    host.text("/proc/driver/nvidia/version", line + GCC_LINE)
    host.text("/sys/module/nvidia/version", (sys_version or version) + "\n")
    return host


def driver_libraries(host: FakeHost, version: str, root: str = "/", *, links: bool = True) -> FakeHost:
    """A driver's user space of one version: versioned files and, with links, the .so.1 links to them."""
    prefix = "" if root == "/" else root
    for stem, soname in DRIVER_LIBRARIES.items():
        host.text(f"{prefix}{LIB}/{stem}.{version}", "\x7fELF")
        link = host.root / f"{prefix}{LIB}/{soname}".lstrip("/")
        if links:
            if link.is_symlink() or link.exists():
                link.unlink()
            host.symlink(f"{prefix}{LIB}/{soname}", f"{stem}.{version}")
    return host


def proc_gpu(
    host: FakeHost, minor: int, uuid: str, model: str = "NVIDIA H100 80GB HBM3", version: str = "550.54.15"
) -> FakeHost:
    bus = f"0000:{0x18 + minor:02x}:00.0"
    information = GPU_INFORMATION.format(model=model, uuid=uuid, bus=bus, minor=minor, version=version)
    return host.text(f"/proc/driver/nvidia/gpus/{bus}/information", information)


def upgraded_without_reboot(host: FakeHost, loaded: str = "550.54.15", installed: str = "545.23.08") -> FakeHost:
    """The issue's node: the module still the one loaded at boot, the libraries another driver's."""
    host_driver(host)
    loaded_module(host, loaded)
    driver_libraries(host, installed)
    return host


GPU_UUIDS = ("GPU-8f6a2c1e-0b1d-4a8e-9a4e-3c2d1e0f9a01", "GPU-1d2e3f40-5a6b-4c7d-8e9f-0a1b2c3d4e5f")


def two_gpu_node(host: FakeHost, version: str = "550.54.15") -> FakeHost:
    """A host driver of one version, loaded, with two GPUs listed by the module."""
    host_driver(host)
    loaded_module(host, version)
    driver_libraries(host, version)
    for minor, uuid in enumerate(GPU_UUIDS):
        proc_gpu(host, minor, uuid, version=version)
    return host
