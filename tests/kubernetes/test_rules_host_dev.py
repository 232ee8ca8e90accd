"""K8S001: the host's /dev at the container's /dev in a container that runs NVIDIA's tooling."""

from __future__ import annotations

import pytest

from tests.kubernetes.cases import DRA_PLUGIN, DRA_PLUGIN_FIXED, DRA_PLUGIN_MOUNT_LINE, Case, check_case

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

CASES = [
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
