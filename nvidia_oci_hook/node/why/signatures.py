"""The errors `why` recognises: each one's text as its engine or tool writes it, where that text is written, and
the causes that can produce it, each decided on the node.

A signature's pattern is matched against the views `reading.views` makes of the paste; its named groups (a path,
a device name, a condition) are what its causes are decided with. The causes come in the order a cause that holds
is most likely the reason; `why` lists the ones that hold first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from nvidia_oci_hook.node.why import deciders
from nvidia_oci_hook.node.why.causes import Cause, Node

Decide = Callable[[Node, "dict[str, str]"], "list[Cause]"]
Undecided = Callable[["dict[str, str]"], "list[str]"]


@dataclass(frozen=True)
class Signature:
    id: str
    title: str
    source: str  # where the text is written: project, release, file and function
    pattern: re.Pattern[str]
    decide: Decide
    undecided: Undecided = lambda groups: []  # the common case: nothing left to another command


_PATH = r"(?P<path>/[^\s\"':]+)"

SIGNATURES = (
    Signature(
        "crio-device-path-exists",
        "cri-o refuses a privileged container whose device's container path exists on the host (seed 003)",
        "cri-o v1.37.0 internal/factory/container/device_linux.go, specAddContainerConfigDevices",
        re.compile(r"privileged container was configured with a device container path that already exists on the host"),
        deciders.device_path_exists,
        deciders.device_path_exists_undecided,
    ),
    Signature(
        "device-host-path-missing",
        "the engine cannot find a device's host path while it generates the spec (seed 000)",
        "containerd v1.7.24 pkg/cri/opts/spec_linux_opts.go and v2.1.x internal/cri/opts/spec_linux_opts.go, "
        "WithDevices (the lstat of oci.DeviceFromPath, wrapped in 'failed to generate container %q spec')",
        re.compile(r"\blstat " + _PATH + r": no such file or directory"),
        deciders.host_path_missing("CRI002", "the device's host path"),
        deciders.host_path_missing_undecided,
    ),
    Signature(
        "mount-source-missing",
        "runc cannot bind-mount a source that does not exist",
        "runc v1.1.5 libcontainer/rootfs_linux.go, mountToRootfs ('error mounting %q to rootfs at %q: %w')",
        re.compile(
            r"error mounting \"(?P<path>/[^\"]+)\" to rootfs at \"(?P<target>[^\"]*)\"[^\"]*?no such file or directory"
        ),
        deciders.host_path_missing("HOST003", "the mount's source"),
    ),
    Signature(
        "cdi-unresolvable",
        "the CDI cache cannot resolve a requested device",
        "container-device-interface v0.8.1 and v1.0.1 pkg/cdi/cache.go, InjectDevices ('unresolvable CDI devices %s'); "
        "cri-o v1.37.0 wraps it in 'CDI device injection failed', containerd in 'failed to inject CDI devices'",
        re.compile(
            r"(?:(?P<crio>CDI device injection failed: )|(?P<containerd>failed to inject CDI devices: ))?"
            r"unresolvable CDI devices (?P<names>[\w./-]+=[\w.:-]+(?:, ?[\w./-]+=[\w.:-]+)*)"
        ),
        deciders.cdi_unresolvable,
    ),
    Signature(
        "nvml-unknown-error",
        "NVML fails inside a running container: the container lost access to its GPUs",
        "NVIDIA nvidia-smi ('Failed to initialize NVML: %s' with nvmlErrorString(NVML_ERROR_UNKNOWN))",
        re.compile(r"Failed to initialize NVML: Unknown Error"),
        deciders.lost_device_access,
        deciders.lost_device_access_undecided,
    ),
    Signature(
        "nvidia-node-eperm",
        "opening an NVIDIA device node inside a container is refused by its device cgroup",
        "the open(2) of /dev/nvidia* in NVML or CUDA: EPERM from the device cgroup",
        re.compile(r"open (?P<path>/dev/nvidia(?:ctl|-uvm(?:-tools)?|\d+)): operation not permitted"),
        deciders.lost_device_access,
        deciders.lost_device_access_undecided,
    ),
    Signature(
        "driver-library-mismatch",
        "the loaded kernel module and the driver's libraries are different versions",
        "NVML nvmlErrorString(NVML_ERROR_LIB_RM_VERSION_MISMATCH) 'Driver/library version mismatch'; "
        "libnvidia-container v1.17 src/cli (nvidia-container-cli: 'initialization error: nvml error: %s')",
        re.compile(r"(?i:driver/library version mismatch)"),
        deciders.driver_mismatch,
    ),
    Signature(
        "requirement-unsatisfied",
        "nvidia-container-cli refuses a container whose NVIDIA_REQUIRE_* the driver does not meet",
        "libnvidia-container v1.17 src/cli/common.c, check_requirements "
        "('unsatisfied condition: %s, please update your driver to a newer version, or use an earlier cuda container')",
        re.compile(r"requirement error: unsatisfied condition: (?P<condition>[^,]+?)(?:, please update|\s*$)"),
        deciders.requirement_unsatisfied,
    ),
    Signature(
        "cuda-driver-insufficient",
        "the CUDA runtime in the image is newer than what the node's driver supports",
        "CUDA runtime cudaGetErrorString(cudaErrorInsufficientDriver)",
        re.compile(r"CUDA driver version is insufficient for CUDA runtime version"),
        deciders.cuda_insufficient,
        deciders.cuda_insufficient_undecided,
    ),
    Signature(
        "unknown-device",
        "nvidia-container-cli cannot find a device NVIDIA_VISIBLE_DEVICES names",
        "libnvidia-container v1.17 src/cli/common.c, select_devices ('device error: %s: unknown device')",
        re.compile(r"device error: (?P<device>[^\s:]+): unknown device"),
        deciders.unknown_device,
    ),
    Signature(
        "unsupported-capabilities",
        "NVIDIA's hook refuses an NVIDIA_DRIVER_CAPABILITIES it does not know",
        "nvidia-container-toolkit v1.20.0 cmd/nvidia-container-runtime-hook/container_config.go "
        "('unsupported capabilities found in '%v' (allowed '%v')')",
        re.compile(r"unsupported capabilities found in '(?P<requested>[^']*)'"),
        deciders.unsupported_capabilities,
    ),
    Signature(
        "crio-precreate-stage",
        "cri-o will not start: a hooks.d file in its hooks directory names the precreate stage",
        "containers/common v0.64 pkg/hooks/1.0.0/hook.go, Validate ('unknown stage %q')",
        re.compile(r"unknown stage \"precreate\""),
        deciders.from_rule_decider("HKD204"),
    ),
    Signature(
        "hooks-regexp",
        "a hooks.d file's when-regexp does not compile",
        "containers/common v0.64 pkg/hooks/1.0.0/hook.go, Validate (regexp.Compile: 'error parsing regexp: ...')",
        re.compile(r"error parsing regexp: [^\n]*"),
        deciders.from_rule_decider("HKD005"),
    ),
    Signature(
        "containerd-config-version",
        "containerd refuses its configuration's version",
        "containerd v1.7.24 services/server/config/config.go, ValidateVersion ('expected version value to be 2 or "
        "1, got %d'); v2.1 cmd/containerd/server/config/config.go ('unsupported config version')",
        re.compile(r"unsupported config version(?:: ?\d+)?|expected version value to be [^\n]*?, got -?\d+"),
        deciders.from_rule_decider("CTD002"),
    ),
    Signature(
        "containerd-dropin-version",
        "a containerd drop-in has a higher config version than the root file",
        "containerd v2.1 cmd/containerd/server/config/config.go, LoadConfig "
        "('failed to load config %s: version %d is higher than root config version %d'",
        re.compile(r"version \d+ (?:is )?higher than (?:the )?root config version \d+"),
        deciders.from_rule_decider("CTD117"),
    ),
    Signature(
        "executable-not-found",
        "a runtime or hook program is not where the engine looks for it",
        "Go os/exec ErrNotFound ('executable file not found in $PATH'), as exec.LookPath wraps it ('exec: %q: %v')",
        re.compile(r"exec: \"(?P<name>[^\"]+)\": executable file not found in \$PATH"),
        deciders.program_missing,
    ),
    Signature(
        "nvidia-oci-hook-refusal",
        "this project's runtime wrapper or guard refused the container",
        "nvidia-oci-hook runtime/messages.py, refusal ('nvidia-oci-hook: refusing container ID: [CODE] ...')",
        re.compile(
            r"nvidia-oci-hook: refusing (?:container \S+|the container): (?P<reasons>.+?)(?=nvidia-oci-hook:|$)"
        ),
        deciders.our_refusal,
    ),
)
