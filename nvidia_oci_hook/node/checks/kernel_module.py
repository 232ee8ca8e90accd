"""doctor's `kernel-module`: whether the NVIDIA kernel module is loaded (/proc/driver/nvidia/version).

Without it there are no working device nodes, whatever the driver root holds: every GPU container fails at its
first NVML call. It is an error where a driver root was found (the driver is installed, its module is not
loaded), unknown where none was (nothing says the node should have one). The fix loads the module; doctor
repairs nothing here.
"""

from __future__ import annotations

from nvidia_oci_hook.node.checks.base import ERROR, OK, UNKNOWN, Check
from nvidia_oci_hook.node.driver import FOUND, DriverRootAnswer

NAME = "kernel-module"


def kernel_module_check(answer: DriverRootAnswer) -> Check:
    if answer.module_loaded:
        return Check(NAME, OK, answer.module_version or "the NVIDIA kernel module is loaded")
    status = ERROR if answer.status == FOUND else UNKNOWN
    return Check(
        NAME,
        status,
        "the NVIDIA kernel module is not loaded (/proc/driver/nvidia/version is missing)",
        fix="load it (modprobe nvidia), or let the driver container load it",
    )
