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
