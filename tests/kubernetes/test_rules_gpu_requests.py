"""K8S009-K8S012: GPU quantities the API server refuses, GPUs in init containers, CDI annotations on pods."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
import yaml

from nvidia_oci_hook.rules.kubernetes.gpu_requests import canonical, quantity
from tests.kubernetes.cases import Case, check_case, lint_manifest, manifest
from tests.kubernetes.schemas import validate

GPU_POD = """
apiVersion: v1
kind: Pod
metadata: {name: trainer}
spec:
  containers:
  - name: main
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
    resources:
      requests: {nvidia.com/gpu: REQUEST}
      limits: {nvidia.com/gpu: LIMIT}
"""

LIMIT_ONLY = """
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
      containers:
      - name: server
        image: nvcr.io/nvidia/tritonserver:24.08-py3
        resources:
          WHICH: {nvidia.com/gpu: COUNT}
"""

INIT_POD = """
apiVersion: batch/v1
kind: Job
metadata: {name: finetune}
spec:
  template:
    spec:
      restartPolicy: Never
      initContainers:
      - name: gpu-check
        image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
        command: [nvidia-smi]
        resources:
          limits: {INIT}
      containers:
      - name: train
        image: nvcr.io/nvidia/pytorch:24.08-py3
        resources:
          limits: {nvidia.com/gpu: 1}
"""

ANNOTATED = """
apiVersion: v1
kind: Pod
metadata:
  name: cdi-by-hand
  annotations:
    KEY: nvidia.com/gpu=0
spec:
  containers:
  - name: main
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
"""

ANNOTATED_TEMPLATE = """
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: render
  annotations: {cdi.k8s.io/render: nvidia.com/gpu=all}
spec:
  selector:
    matchLabels: {app: render}
  template:
    metadata:
      labels: {app: render}
      annotations: {KEY: nvidia.com/gpu=all}
    spec:
      containers:
      - name: main
        image: registry.example/render:1
"""


def _gpu_pod(request: str, limit: str) -> str:
    return GPU_POD.replace("REQUEST", request).replace("LIMIT", limit)


def _limit_only(which: str, count: str) -> str:
    return LIMIT_ONLY.replace("WHICH", which).replace("COUNT", count)


CASES = [
    Case("K8S009", _gpu_pod("1", "2"), _gpu_pod("2", "2"), id="differ", line=9),
    Case("K8S009", _gpu_pod('"1"', "2"), _gpu_pod('"1000m"', "1"), id="quantities-compared-as-numbers"),
    Case("K8S009", _limit_only("requests", "1"), _limit_only("limits", "1"), id="request-without-limit", line=15),
    Case("K8S010", _limit_only("limits", "0.5"), _limit_only("limits", "1"), id="half", line=15),
    Case("K8S010", _limit_only("limits", '"500m"'), _limit_only("limits", '"2"'), id="milli"),
    Case("K8S010", _gpu_pod("1.5", "1.5"), _gpu_pod("0", "0"), id="request-and-limit"),
    Case(
        "K8S011",
        INIT_POD.replace("{INIT}", "{nvidia.com/gpu: 1}"),
        INIT_POD.replace("{INIT}", "{cpu: 100m}"),
        line=13,
    ),
    Case(
        "K8S011",
        INIT_POD.replace("{INIT}", "{nvidia.com/gpu: 1}"),
        INIT_POD.replace("{INIT}", "{nvidia.com/gpu: 1}").replace(
            "- name: gpu-check\n", "- name: gpu-check\n        restartPolicy: Always\n"
        ),
        id="sidecar-keeps-its-gpu",
    ),
    Case("K8S012", ANNOTATED.replace("KEY", "cdi.k8s.io/gpu"), ANNOTATED.replace("KEY", "example.com/note"), line=6),
    Case(
        "K8S012",
        ANNOTATED_TEMPLATE.replace("KEY", "cdi.k8s.io/render"),
        ANNOTATED_TEMPLATE.replace("KEY", "nvidia.cdi.k8s.io/container.main").replace(
            "  annotations: {cdi.k8s.io/render: nvidia.com/gpu=all}\n", ""
        ),
        id="pod-template",
        line=12,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_trigger_and_twin(case: Case) -> None:
    check_case(case)


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        (1, "1"),
        ("1", "1"),
        (2.0, "2"),
        ("1000m", "1"),
        ("0.5", "0.5"),
        ("500m", "0.5"),
        ("1e3", "1000"),
        ("1k", "1000"),
    ],
)
def test_quantities_read_as_the_api_reads_them(written: Any, expected: str) -> None:
    assert quantity(written) == Decimal(expected)


@pytest.mark.parametrize("written", [True, None, "one", "1.5x", [1]])
def test_what_is_not_a_quantity_is_left_to_the_api(written: Any) -> None:
    assert quantity(written) is None


@pytest.mark.parametrize(
    ("value", "printed"), [("1", "1"), ("2", "2"), ("1000", "1k"), ("0.5", "500m"), ("1.5", "1500m")]
)
def test_quantities_print_as_the_api_prints_them(value: str, printed: str) -> None:
    assert canonical(Decimal(value)) == printed


def test_the_api_servers_words_and_field_paths_are_quoted() -> None:
    (differ,) = [f for f in lint_manifest(_gpu_pod("1", "2")) if f.code == "K8S009"]
    assert 'spec.containers[0].resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2' in (
        differ.message
    )
    assert differ.message.startswith("Pod trainer, container main: ")
    (missing,) = [f for f in lint_manifest(_limit_only("requests", "1")) if f.code == "K8S009"]
    assert (
        "spec.template.spec.containers[0].resources.limits: Required value: Limit must be set for non "
        "overcommitable resources" in missing.message
    )
    (half,) = [f for f in lint_manifest(_limit_only("limits", "0.5")) if f.code == "K8S010"]
    assert (
        "spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: 500m: must be an integer"
        in (half.message)
    )


def test_the_workloads_own_cdi_annotation_is_reported_apart() -> None:
    findings = [f for f in lint_manifest(ANNOTATED_TEMPLATE.replace("KEY", "cdi.k8s.io/render")) if f.code == "K8S012"]
    assert sorted(f.line or 0 for f in findings) == [5, 12]
    assert any("not copied to its pods" in f.message for f in findings)
    assert any("cri-o" in f.message and "containerd" in f.message for f in findings)


def test_an_init_container_asking_another_gpu_resource_is_not_judged() -> None:
    text = INIT_POD.replace("{INIT}", "{nvidia.com/mig-1g.10gb: 1}")
    assert not [f for f in lint_manifest(text) if f.code == "K8S011"]


def test_the_clean_twins_are_objects_the_api_accepts() -> None:
    documents: list[dict[str, Any]] = [yaml.safe_load(manifest(case.clean)) for case in CASES]
    answers = validate([(document, "1.35") for document in documents])
    assert [answer for answer in answers if answer] == []
