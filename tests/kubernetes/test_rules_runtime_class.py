"""K8S007, K8S008, K8S013: the RuntimeClass a GPU pod names or lacks, and user namespaces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from nvidia_oci_hook.lint import LintOptions, lint_paths
from tests.kubernetes.cases import Case, check_case, lint_manifest, manifest
from tests.kubernetes.schemas import validate

RUNTIME_CLASSES = """
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: nvidia}
handler: nvidia
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: nvidia-legacy}
handler: nvidia-legacy
"""

KATA_CLASS = """
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: kata}
handler: kata-qemu
"""

GPU_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: inference, namespace: ml}
spec:
  selector:
    matchLabels: {app: inference}
  template:
    metadata:
      labels: {app: inference}
    spec:
      runtimeClassName: CLASS
      containers:
      - name: server
        image: nvcr.io/nvidia/tritonserver:24.08-py3
        resources:
          limits: {nvidia.com/gpu: 1}
"""

GPU_JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: finetune}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: train
        image: nvcr.io/nvidia/pytorch:24.08-py3
        resources:
          limits: {nvidia.com/gpu: 1}
"""

DEVICE_PLUGIN = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-device-plugin, namespace: kube-system}
spec:
  selector:
    matchLabels: {app: nvdp}
  template:
    metadata:
      labels: {app: nvdp}
    spec:
      containers:
      - name: nvidia-device-plugin-ctr
        image: nvcr.io/nvidia/k8s-device-plugin:v0.17.1
        env:
        - {name: DEVICE_LIST_STRATEGY, value: "@STRATEGY@"}
"""

USERNS_POD = """
apiVersion: v1
kind: Pod
metadata: {name: isolated}
spec:
  hostUsers: HOST_USERS
  containers:
  - name: main
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
    resources:
      limits: {nvidia.com/gpu: 1}
"""


def _deployment(runtime_class: str) -> str:
    return GPU_DEPLOYMENT.replace("CLASS", runtime_class)


def _stream(*parts: str) -> str:
    return "\n---\n".join(part.strip("\n") for part in parts) + "\n"


def _plugin(strategy: str, runtime_class: bool = True) -> str:
    text = DEVICE_PLUGIN.replace("@STRATEGY@", strategy)
    return text.replace("    spec:\n", "    spec:\n      runtimeClassName: nvidia\n", 1) if runtime_class else text


CASES = [
    Case(
        "K8S007",
        _stream(RUNTIME_CLASSES, _deployment("nvidia-cdi")),
        _stream(RUNTIME_CLASSES, _deployment("nvidia")),
        line=21,
    ),
    Case(
        "K8S007",
        _stream(
            KATA_CLASS, GPU_JOB.replace("restartPolicy: Never", "restartPolicy: Never\n      runtimeClassName: nvida")
        ),
        _stream(
            KATA_CLASS, GPU_JOB.replace("restartPolicy: Never", "restartPolicy: Never\n      runtimeClassName: kata")
        ),
        id="typo",
    ),
    Case(
        "K8S008",
        _stream(RUNTIME_CLASSES, GPU_JOB),
        _stream(
            RUNTIME_CLASSES,
            GPU_JOB.replace("restartPolicy: Never", "restartPolicy: Never\n      runtimeClassName: nvidia"),
        ),
        line=16,
    ),
    Case("K8S008", _stream(RUNTIME_CLASSES, GPU_JOB), _stream(KATA_CLASS, GPU_JOB), id="no-nvidia-handler"),
    Case(
        "K8S008",
        _stream(RUNTIME_CLASSES, _plugin("envvar"), GPU_JOB),
        _stream(RUNTIME_CLASSES, _plugin("cdi-annotations,cdi-cri"), GPU_JOB),
        id="plugin-hands-gpus-over-by-cdi",
    ),
    Case(
        "K8S008",
        _stream(RUNTIME_CLASSES, _plugin("cdi-cri", runtime_class=False)),
        _stream(RUNTIME_CLASSES, _plugin("cdi-cri")),
        id="device-plugin",
    ),
    Case("K8S013", USERNS_POD.replace("HOST_USERS", "false"), USERNS_POD.replace("HOST_USERS", "true"), line=5),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_trigger_and_twin(case: Case) -> None:
    check_case(case)


def test_nothing_is_said_where_the_input_defines_no_runtime_class() -> None:
    assert not [f for f in lint_manifest(_deployment("nvidia-cdi")) if f.code in ("K8S007", "K8S008")]
    assert not [f for f in lint_manifest(GPU_JOB) if f.code in ("K8S007", "K8S008")]


def test_the_refusal_is_the_admission_plugins() -> None:
    (finding,) = [f for f in lint_manifest(_stream(RUNTIME_CLASSES, _deployment("nvidia-cdi"))) if f.code == "K8S007"]
    assert 'pod rejected: RuntimeClass "nvidia-cdi" not found' in finding.message
    assert finding.message.startswith("Deployment ml/inference: ")
    assert "did you mean 'nvidia" in (finding.hint or "")


def test_k8s008_says_the_default_runtime_cannot_be_decided_offline() -> None:
    (finding,) = [f for f in lint_manifest(_stream(RUNTIME_CLASSES, GPU_JOB)) if f.code == "K8S008"]
    assert "cannot be decided offline" in finding.message
    assert "runtimeClassName: nvidia" in (finding.hint or "")


def test_a_non_gpu_pod_naming_another_class_is_not_judged() -> None:
    pod = GPU_JOB.replace("nvcr.io/nvidia/pytorch:24.08-py3", "busybox").replace(
        "        resources:\n          limits: {nvidia.com/gpu: 1}\n", ""
    )
    pod = pod.replace("restartPolicy: Never", "restartPolicy: Never\n      runtimeClassName: gvisor")
    assert not [f for f in lint_manifest(_stream(RUNTIME_CLASSES, pod)) if f.code == "K8S007"]


def _lint_files(tmp_path: Path, runtime_classes: str, workload: str) -> list[Any]:
    classes = tmp_path / "runtimeclasses.yaml"
    classes.write_bytes(manifest(runtime_classes))
    workloads = tmp_path / "workloads.yaml"
    workloads.write_bytes(manifest(workload))
    run = lint_paths([str(classes), str(workloads)], LintOptions(offline=True))
    return [finding for result in run.files if result.path == str(workloads) for finding in result.findings]


def test_runtime_classes_of_another_file_of_the_run_are_judged_with_it(tmp_path: Path) -> None:
    missing = _lint_files(tmp_path, RUNTIME_CLASSES, _deployment("nvidia-cdi"))
    assert [f.code for f in missing if f.code == "K8S007"] == ["K8S007"]
    assert [f.line for f in missing if f.code == "K8S007"] == [11]
    without = _lint_files(tmp_path, RUNTIME_CLASSES, GPU_JOB)
    assert [f.code for f in without if f.code == "K8S008"] == ["K8S008"]
    found = _lint_files(tmp_path, RUNTIME_CLASSES, _deployment("nvidia-legacy"))
    assert not [f for f in found if f.code in ("K8S007", "K8S008")]


def test_the_clean_twins_are_objects_the_api_accepts() -> None:
    documents: list[dict[str, Any]] = [
        document for case in CASES for document in yaml.safe_load_all(manifest(case.clean)) if document
    ]
    answers = validate([(document, "1.35") for document in documents])
    assert [answer for answer in answers if answer] == []
