"""GPU: NVIDIA device nodes, NVIDIA_VISIBLE_DEVICES and CDI requests in a config.json."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.engine.transforms import gpus_without_control_node
from nvidia_oci_hook.findings import OUTCOME_REFUSED, Problem, Severity
from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.kinds.cdinames import cdi_name_error
from nvidia_oci_hook.kinds.cri import CRI_CONTAINER
from nvidia_oci_hook.kinds.devices import (
    NVIDIA_UVM,
    NVIDIA_UVM_TOOLS,
    NVIDIACTL,
    first_by_path,
    nvidia_node,
)
from nvidia_oci_hook.kinds.document import OCI_CONFIG, OCI_STATE
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.devices import config, devices

CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"


@rule("GPU001", "gpu-without-nvidiactl", Severity.ERROR, [OCI_CONFIG])
def gpu_without_nvidiactl(value: Any, context: Context) -> Iterator[Problem]:
    """A GPU node is present without /dev/nvidiactl.

    ## What it checks
    A `linux.devices` entry `/dev/nvidiaN` with no `/dev/nvidiactl` entry.

    ## Why it matters
    Every CUDA and NVML call opens the control node first; without it the GPU node is useless and the
    application reports "no CUDA-capable device is detected" or NVML's "Driver Not Loaded". The wrapper and the
    guard judge the config as runc gets it (after CDI requests are applied) the same way, and refuse the
    container under the default `policy.fail_on: gpu-unusable`.

    ## Example
    `linux.devices` lists `/dev/nvidia0` (c 195:0) only.

    ## Fix
    Add `{"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255}` and an allow rule for it; a
    complete CDI spec (`nvidia-ctk cdi generate`) always includes it.
    """
    for finding in gpus_without_control_node(devices(value, context)):
        yield Problem(finding.pointer, finding.message, finding.hint)


@rule("GPU002", "uvm-without-control", Severity.ERROR, [OCI_CONFIG])
def uvm_without_control(value: Any, context: Context) -> Iterator[Problem]:
    """A UVM node is present without the node it depends on.

    ## What it checks
    `/dev/nvidia-uvm` or `/dev/nvidia-uvm-tools` listed without `/dev/nvidiactl`, and `/dev/nvidia-uvm-tools`
    listed without `/dev/nvidia-uvm`.

    ## Why it matters
    The UVM driver is reached through the control node; CUDA initialisation fails
    (`cudaErrorUnknown`, "CUDA_ERROR_NOT_INITIALIZED") when only the UVM node is present, and profilers need
    `/dev/nvidia-uvm` before `/dev/nvidia-uvm-tools` is of any use.

    ## Example
    `linux.devices` lists `/dev/nvidia-uvm-tools` alone.

    ## Fix
    Add the missing nodes (`/dev/nvidiactl` c 195:255, `/dev/nvidia-uvm` with the major that
    `grep nvidia-uvm /proc/devices` prints, minor 0) and their allow rules.
    """
    by_path = first_by_path(devices(value, context))
    for path in (NVIDIA_UVM, NVIDIA_UVM_TOOLS):
        device = by_path.get(path)
        if device is None:
            continue
        missing = [NVIDIACTL] if NVIDIACTL not in by_path else []
        if path == NVIDIA_UVM_TOOLS and NVIDIA_UVM not in by_path:
            missing.append(NVIDIA_UVM)
        if missing:
            yield Problem(
                device.pointer,
                f"{path} is listed without {' and '.join(missing)}",
                f"add {' and '.join(missing)} to linux.devices",
            )


@rule("GPU003", "nvidia-device-numbers", Severity.ERROR, [OCI_CONFIG])
def nvidia_device_numbers(value: Any, context: Context) -> Iterator[Problem]:
    """An NVIDIA device node's type or numbers do not match its name.

    ## What it checks
    `/dev/nvidiaN` must be c 195:N, `/dev/nvidiactl` c 195:255, `/dev/nvidia-modeset` c 195:254;
    `/dev/nvidia-uvm` and `/dev/nvidia-uvm-tools` must be character devices with minors 0 and 1 and one
    (dynamically assigned, never 195) major between them; `/dev/nvidia-caps/nvidia-capN` must have minor N.

    ## Why it matters
    The node's numbers, not its name, decide which GPU or driver interface the container opens. A spec
    written from another node or by hand can hand a container `/dev/nvidia0` that is really GPU 3, or a
    node that no driver answers (ENXIO).

    ## Example
    `{"path": "/dev/nvidia1", "type": "c", "major": 195, "minor": 0}`: the container's GPU 1 is the host's
    GPU 0.

    ## Fix
    Take the numbers from the node: `ls -l /dev/nvidia*` shows "195, N".
    """
    uvm_major: Optional[tuple[int, str]] = None
    for device in first_by_path(devices(value, context)).values():
        expected = nvidia_node(device.path)
        if expected is None or device.major is None or device.minor is None:
            continue
        wrong = []
        if device.type not in ("c", "u"):
            wrong.append(f"type {device.type!r} (the {expected.role} is a character device)")
        if expected.major is not None and device.major != expected.major:
            wrong.append(f"major {device.major} (the {expected.role} has major {expected.major})")
        if expected.major is None and device.major == 195:
            wrong.append(f"major 195 (the {expected.role}'s major is assigned at load time and is never 195)")
        if device.minor != expected.minor:
            wrong.append(f"minor {device.minor} (the {expected.role} has minor {expected.minor})")
        if device.path in (NVIDIA_UVM, NVIDIA_UVM_TOOLS):
            if uvm_major is None:
                uvm_major = (device.major, device.path)
            elif uvm_major[0] != device.major:
                wrong.append(f"major {device.major} while {uvm_major[1]} has major {uvm_major[0]}")
        if wrong:
            yield Problem(
                device.pointer,
                f"{device.path} has " + "; ".join(wrong),
                f"take the numbers from the node: ls -l {device.path}",
            )


@rule("GPU004", "visible-devices-on-privileged", Severity.WARNING, [OCI_CONFIG])
def visible_devices_on_privileged(value: Any, context: Context) -> Iterator[Problem]:
    """NVIDIA_VISIBLE_DEVICES selects GPUs in a privileged container, which sees every GPU.

    ## What it checks
    A privileged container (CAP_SYS_ADMIN in the bounding set, or an allow-all device rule) whose
    `process.env` sets `NVIDIA_VISIBLE_DEVICES` to anything but `all`.

    ## Why it matters
    The engines give a privileged container every host device, so the selection does not isolate anything:
    the workload can open every GPU on the node, and CUDA enumerates them all unless
    `CUDA_VISIBLE_DEVICES` is set too.

    ## Example
    `"env": ["NVIDIA_VISIBLE_DEVICES=0"]` with `CAP_SYS_ADMIN` in `capabilities.bounding`.

    ## Fix
    Drop privileged mode (grant the specific capabilities instead), or accept that every GPU is exposed and
    set `NVIDIA_VISIBLE_DEVICES=all` to say so.
    """
    spec = config(value, context)
    entry = spec.env().get("NVIDIA_VISIBLE_DEVICES")
    if entry is None or entry[1].strip() == "all":
        return
    evidence = spec.privileged_evidence()
    if evidence is not None:
        yield Problem(
            f"/process/env/{entry[0]}",
            f"NVIDIA_VISIBLE_DEVICES={entry[1]} has no effect on isolation: the container is privileged "
            f"({evidence}) and sees every GPU",
            "run the container unprivileged, or set NVIDIA_VISIBLE_DEVICES=all",
        )


@rule("GPU005", "malformed-cdi-annotation", Severity.ERROR, [OCI_CONFIG, OCI_STATE, CRI_CONTAINER])
def malformed_cdi_annotation(value: Any, context: Context) -> Iterator[Problem]:
    """A cdi.k8s.io/ annotation does not hold qualified CDI device names.

    ## What it checks
    Every annotation (of a config, of a state as hooks receive it, or of a CRI container config) whose key
    starts with `cdi.k8s.io/`:
    its value must be a comma-separated list of
    qualified device names `vendor/class=name`, as the CDI library parses them (vendor and class start with a
    letter, end with a letter or digit, and hold only letters, digits, `_`, `-` and `.`; device names may also
    start with a digit and hold `:`; no spaces around commas).

    ## Why it matters
    The engine or wrapper that resolves the annotation refuses the whole container with
    `invalid CDI device name`, or, where nothing resolves CDI annotations, the GPU is silently not injected.

    ## Example
    `"cdi.k8s.io/gpu": "nvidia.com/gpu=0, nvidia.com/gpu=1"` (the space before the second name).

    ## Fix
    Write each name as `nvidia.com/gpu=N` (or `=all`), separated by commas only; `nvidia-ctk cdi list` shows
    the names this node's specs define.
    """
    for key, annotation in config(value, context).annotations().items():
        if not key.startswith(CDI_ANNOTATION_PREFIX) or not isinstance(annotation, str):
            continue
        pointer = pointer_join("/annotations", key)
        for name in annotation.split(","):
            reason = cdi_name_error(name)
            if reason is not None:
                hint = (
                    f"remove the spaces: {name.strip()!r}"
                    if name != name.strip() and not cdi_name_error(name.strip())
                    else "write each device as vendor/class=name, e.g. nvidia.com/gpu=0"
                )
                yield Problem(pointer, f"annotation {key}: {reason}", hint, outcome=OUTCOME_REFUSED)
