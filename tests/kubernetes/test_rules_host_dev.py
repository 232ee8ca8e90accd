"""K8S001: the host's /dev at the container's /dev in a container that runs NVIDIA's tooling."""

from __future__ import annotations

import pytest

from tests.kubernetes.cases import Case, check_case

DRA_PLUGIN = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-dra-driver, namespace: nvidia-system}
spec:
  selector: {matchLabels: {app: dra}}
  template:
    metadata: {labels: {app: dra}}
    spec:
      containers:
      - name: plugin
        image: nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0
        securityContext: {privileged: true}
        volumeMounts:
        - name: host-dev
          mountPath: {mount}
      volumes:
      - name: host-dev
        hostPath: {{path: {host}}}
"""

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
    Case(
        "K8S001",
        DRA_PLUGIN.replace("{mount}", "/dev").replace("{{path: {host}}}", "{path: /dev}"),
        DRA_PLUGIN.replace("{mount}", "/host/dev").replace("{{path: {host}}}", "{path: /dev}"),
        line=15,
    ),
    Case(
        "K8S001",
        GPU_POD.replace("mountPath: /, subPath: dev", "mountPath: /dev/, subPath: dev"),
        GPU_POD.replace("mountPath: /, subPath: dev", "mountPath: /host/dev, subPath: dev"),
        id="subpath",
    ),
    Case(
        "K8S001",
        DRA_PLUGIN.replace("{mount}", "/dev").replace("{{path: {host}}}", "{path: /dev}"),
        DRA_PLUGIN.replace("{mount}", "/dev")
        .replace("{{path: {host}}}", "{path: /dev}")
        .replace("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0", "registry.example/udev-monitor:1")
        .replace("privileged: true", "privileged: false"),
        id="not-nvidia",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_trigger_and_twin(case: Case) -> None:
    check_case(case)
