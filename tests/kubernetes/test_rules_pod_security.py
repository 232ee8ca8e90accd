"""K8S003: privilege given to a container that asks for a GPU."""

from __future__ import annotations

import pytest
import yaml

from tests.kubernetes.cases import Case, check_case, lint_manifest, manifest
from tests.kubernetes.schemas import validate

TRAINER = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer, namespace: ml}
spec:
  selector: {matchLabels: {app: trainer}}
  template:
    metadata: {labels: {app: trainer}}
    spec:
      containers:
      - name: main
        image: nvcr.io/nvidia/pytorch:25.01-py3
        resources: {limits: {nvidia.com/gpu: 1}}
        securityContext: {privileged: true}
"""

DRA_POD = """
apiVersion: v1
kind: Pod
metadata: {name: inference}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: single-gpu}
  containers:
  - name: main
    image: nvcr.io/nvidia/tritonserver:25.01-py3
    resources: {claims: [{name: gpu}]}
    securityContext:
      capabilities: {add: [SYS_NICE, CAP_SYS_ADMIN]}
"""

MIG_INIT = """
apiVersion: batch/v1
kind: Job
metadata: {name: prepare}
spec:
  template:
    spec:
      restartPolicy: Never
      initContainers:
      - name: warm
        image: busybox
        resources: {limits: {nvidia.com/mig-1g.10gb: 1}}
        securityContext: {privileged: true}
      containers:
      - {name: main, image: busybox}
"""

CASES = [
    Case("K8S003", TRAINER, TRAINER.replace("privileged: true", "privileged: false"), line=13),
    Case("K8S003", DRA_POD, DRA_POD.replace(", CAP_SYS_ADMIN", ", IPC_LOCK"), id="sys-admin-dra", line=12),
    Case("K8S003", MIG_INIT, MIG_INIT.replace("nvidia.com/mig-1g.10gb: 1", "cpu: 100m"), id="mig-init-container"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_trigger_and_twin(case: Case) -> None:
    check_case(case)


def test_a_privileged_container_without_gpu_is_another_rules_concern() -> None:
    findings = lint_manifest(TRAINER.replace("nvidia.com/gpu: 1", "cpu: 1"), select=("K8S003",))
    assert not findings


def test_the_message_names_the_engine_and_what_the_container_gets() -> None:
    (finding,) = [f for f in lint_manifest(TRAINER) if f.code == "K8S003"]
    assert "every GPU of the node" in finding.message
    assert "privileged container was configured with a device container path" in finding.message
    assert finding.message.startswith("Deployment ml/trainer, container main: ")


def test_the_clean_twins_are_objects_the_api_accepts() -> None:
    documents = [doc for case in CASES for doc in yaml.safe_load_all(manifest(case.clean)) if doc]
    assert validate([(doc, "1.35") for doc in documents]) == [None] * len(documents)
