"""doctor's `modify-device-files`: the NVIDIA module's ModifyDeviceFiles parameter against where the driver is.

With ModifyDeviceFiles: 1, NVML creates every /dev/nvidia* node it finds missing. That is harmless where the
driver's nodes are the host's own (driver root `/`), but with the driver in a container, NVML called in a pod that
mounts the host's /dev leaves nodes there, and cri-o then refuses privileged GPU containers (what
`stray-device-nodes` finds afterwards). A warning, since nothing is broken yet. The fix loads the module with
NVreg_ModifyDeviceFiles=0; doctor repairs nothing here.
"""

from __future__ import annotations

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.base import OK, UNKNOWN, WARNING, Check
from nvidia_oci_hook.node.driver import DriverRootAnswer
from nvidia_oci_hook.node.nvml import PARAMS, modify_device_files

NAME = "modify-device-files"


def modify_device_files_check(host: HostView, answer: DriverRootAnswer) -> Check:
    value = modify_device_files(host)
    if value is None:
        return Check(NAME, UNKNOWN, f"no ModifyDeviceFiles in {PARAMS} (module not loaded?)")
    if not value:
        return Check(NAME, OK, "ModifyDeviceFiles: 0 (NVML does not create device nodes)")
    if answer.root in (None, "/"):
        return Check(NAME, OK, "ModifyDeviceFiles: 1 (NVML may create /dev/nvidia*, where the driver's are)")
    return Check(
        NAME,
        WARNING,
        f"ModifyDeviceFiles: 1 while the driver lives under {answer.root}: NVML called in a pod that mounts the "
        "host's /dev creates /dev/nvidia* on the host",
        [f"{PARAMS}: ModifyDeviceFiles: 1"],
        "load the module with NVreg_ModifyDeviceFiles=0 (the driver container's kernel module parameters), and do "
        "not mount the host's /dev into GPU pods",
    )
