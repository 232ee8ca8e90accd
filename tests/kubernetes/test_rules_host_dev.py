"""K8S001, K8S023: the host's /dev at the container's /dev in a container that runs NVIDIA's tooling."""

from __future__ import annotations

import pytest

from nvidia_oci_hook.findings import Severity
from tests.kubernetes.cases import (
    DRA_PLUGIN,
    DRA_PLUGIN_FIXED,
    DRA_PLUGIN_MOUNT_LINE,
    Case,
    check_case,
    lint_manifest,
)

GPU_POD = """
apiVersion: v1
kind: Pod
metadata: {name: trainer}
spec:
  containers:
  - name: main
    image: busybox
    resources: {limits: {nvidia.com/gpu: 1}}
    volumeMounts: [{name: root, mountPath: /, subPath: dev}]
  volumes: [{name: root, hostPath: {path: /}}]
"""


def _with_driver_root(text: str, entry: str) -> str:
    """The DRA plugin with an env entry of NVIDIA_DRIVER_ROOT, as the DRA driver's chart writes its value."""
    return text.replace("        securityContext:", f"        env: [{entry}]\n        securityContext:")


HOST_DRIVER = "{name: NVIDIA_DRIVER_ROOT, value: /}"
DRIVER_CONTAINER = "{name: NVIDIA_DRIVER_ROOT, value: /run/nvidia/driver/}"

CASES = [
    Case(
        "K8S001",
        _with_driver_root(DRA_PLUGIN, DRIVER_CONTAINER),
        _with_driver_root(DRA_PLUGIN, HOST_DRIVER),
        id="driver-container-root",
        line=DRA_PLUGIN_MOUNT_LINE + 1,
    ),
    Case(
        "K8S023",
        _with_driver_root(DRA_PLUGIN, HOST_DRIVER),
        _with_driver_root(DRA_PLUGIN_FIXED, HOST_DRIVER),
        line=DRA_PLUGIN_MOUNT_LINE + 1,
    ),
    Case("K8S001", DRA_PLUGIN, DRA_PLUGIN_FIXED, line=DRA_PLUGIN_MOUNT_LINE),
    Case(
        "K8S001",
        GPU_POD.replace("mountPath: /, subPath: dev", "mountPath: /dev/, subPath: dev"),
        GPU_POD.replace("mountPath: /, subPath: dev", "mountPath: /host/dev, subPath: dev"),
        id="subpath",
    ),
    Case(
        "K8S001",
        DRA_PLUGIN,
        DRA_PLUGIN.replace("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0", "registry.example/udev-monitor:1").replace(
            "privileged: true", "privileged: false"
        ),
        id="not-nvidia",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_trigger_and_twin(case: Case) -> None:
    check_case(case)


@pytest.mark.parametrize(
    "entry",
    [
        DRIVER_CONTAINER,
        "{name: NVIDIA_DRIVER_ROOT, valueFrom: {configMapKeyRef: {name: driver, key: root}}}",
        "{name: NVIDIA_DRIVER_ROOT, value: $(ROOT)}",
        "{name: NVIDIA_DEV_ROOT, value: /}",
    ],
)
def test_a_root_that_is_not_known_to_be_the_host_s_stays_an_error(entry: str) -> None:
    codes = [finding.code for finding in lint_manifest(_with_driver_root(DRA_PLUGIN, entry))]
    assert "K8S001" in codes and "K8S023" not in codes


@pytest.mark.parametrize("root", ["/", "//", "/."])
def test_the_host_s_root_in_any_spelling_is_only_information(root: str) -> None:
    findings = lint_manifest(_with_driver_root(DRA_PLUGIN, f"{{name: NVIDIA_DRIVER_ROOT, value: '{root}'}}"))
    (finding,) = [finding for finding in findings if finding.code in ("K8S001", "K8S023")]
    assert finding.code == "K8S023" and finding.severity == Severity.INFO
    assert "the device nodes NVML creates there are the host driver's own" in finding.message
