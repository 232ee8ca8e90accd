"""K8S014-K8S017: DRA claims, the classes and templates they name, and the resource.k8s.io versions a release
serves."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.kubernetes.cases import Case, check_case, lint_manifest, manifest
from tests.kubernetes.schemas import validate

POD = """
apiVersion: v1
kind: Pod
metadata: {name: trainer}
spec:
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: single-gpu
  containers:
  - name: main
    image: registry.example/cuda:12
    resources:
      claims:
      - name: gpu
"""

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: inference}
spec:
  selector: {matchLabels: {app: inference}}
  template:
    metadata: {labels: {app: inference}}
    spec:
      resourceClaims:
      - name: gpu
        resourceClaimTemplateName: single-gpu
      containers:
      - name: server
        image: registry.example/triton:25
        resources:
          claims:
          - name: gpu
"""

TEMPLATE = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: single-gpu}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
"""

TEMPLATE_V1BETA1 = """
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: single-gpu}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        deviceClassName: gpu.nvidia.com
"""

CLAIM_FIRST_AVAILABLE = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: any-gpu}
spec:
  devices:
    requests:
    - name: gpu
      firstAvailable:
      - name: big
        deviceClassName: gpu.nvidia.com
      - name: slice
        deviceClassName: mig.nvidia.com
"""

DEVICE_CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel:
      expression: "device.driver == 'gpu.nvidia.com'"
"""

MIG_CLASS = DEVICE_CLASS.replace("name: gpu.nvidia.com}", "name: mig.nvidia.com}")


def stream(*documents: str) -> str:
    return "---".join(documents)


CASES = [
    Case(
        "K8S014",
        POD.replace("resources:\n      claims:\n      - name: gpu", "resources:\n      claims:\n      - name: gpus"),
        POD,
        line=13,
    ),
    Case(
        "K8S014",
        POD.replace("  resourceClaims:\n  - name: gpu\n    resourceClaimTemplateName: single-gpu\n", ""),
        POD,
        id="no-pod-claims",
    ),
    Case(
        "K8S014",
        DEPLOYMENT.replace("          - name: gpu", "          - name: accel"),
        DEPLOYMENT,
        id="deployment",
    ),
    Case(
        "K8S015",
        POD.replace("    resources:\n      claims:\n      - name: gpu\n", ""),
        POD,
        line=6,
    ),
    Case(
        "K8S015",
        POD.replace("  containers:", "  initContainers:\n  - name: warmup\n    image: busybox\n  containers:").replace(
            "  resourceClaims:\n  - name: gpu\n",
            "  resourceClaims:\n  - name: cache\n    resourceClaimName: c\n  - name: gpu\n",
        ),
        POD.replace(
            "  containers:",
            "  initContainers:\n  - name: warmup\n    image: busybox\n    resources: {claims: [{name: cache}]}\n"
            "  containers:",
        ).replace(
            "  resourceClaims:\n  - name: gpu\n",
            "  resourceClaims:\n  - name: cache\n    resourceClaimName: c\n  - name: gpu\n",
        ),
        id="init-container-uses-it",
    ),
    Case(
        "K8S016",
        stream(TEMPLATE.replace("deviceClassName: gpu.nvidia.com", "deviceClassName: gpu.nvidia"), DEVICE_CLASS),
        stream(TEMPLATE, DEVICE_CLASS),
        id="exactly",
        line=10,
    ),
    Case(
        "K8S016",
        stream(
            TEMPLATE_V1BETA1.replace("deviceClassName: gpu.nvidia.com", "deviceClassName: nvidia-gpu"), DEVICE_CLASS
        ),
        stream(TEMPLATE_V1BETA1, DEVICE_CLASS),
        id="v1beta1",
    ),
    Case(
        "K8S016",
        stream(CLAIM_FIRST_AVAILABLE, DEVICE_CLASS),
        stream(CLAIM_FIRST_AVAILABLE, DEVICE_CLASS, MIG_CLASS),
        id="first-available",
    ),
    Case(
        "K8S016",
        stream(POD.replace("resourceClaimTemplateName: single-gpu", "resourceClaimTemplateName: one-gpu"), TEMPLATE),
        stream(POD, TEMPLATE),
        id="template-name",
    ),
    Case(
        "K8S017",
        stream(TEMPLATE, DEVICE_CLASS),
        stream(TEMPLATE_V1BETA1, DEVICE_CLASS.replace("resource.k8s.io/v1", "resource.k8s.io/v1beta1")),
        id="v1-before-1.34",
        kubernetes_version="1.32",
        line=1,
    ),
    Case(
        "K8S017",
        stream(TEMPLATE_V1BETA1, DEVICE_CLASS),
        stream(TEMPLATE, DEVICE_CLASS),
        id="beta-off-by-default",
        kubernetes_version="1.35",
    ),
    Case(
        "K8S017",
        TEMPLATE_V1BETA1,
        TEMPLATE,
        id="v1beta1-removed",
        kubernetes_version="1.38",
    ),
    Case(
        "K8S017",
        POD,
        POD.replace("  resourceClaims:\n  - name: gpu\n    resourceClaimTemplateName: single-gpu\n", "").replace(
            "    resources:\n      claims:\n      - name: gpu\n", "    resources: {limits: {nvidia.com/gpu: 1}}\n"
        ),
        id="pod-claims-gate-off",
        kubernetes_version="1.33",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_trigger_and_twin(case: Case) -> None:
    check_case(case)


def test_k8s014_quotes_the_api_servers_refusal() -> None:
    trigger = POD.replace("claims:\n      - name: gpu", "claims:\n      - name: gpus")
    (finding,) = [f for f in lint_manifest(trigger) if f.code == "K8S014"]
    assert (
        'spec.containers[0].resources.claims[0]: Not found: "gpus": must be one of the names in '
        "pod.spec.resourceClaims: gpu" in finding.message
    )
    assert finding.message.startswith("Pod trainer, container main: ")


def test_k8s016_is_silent_without_device_classes() -> None:
    lone = TEMPLATE.replace("deviceClassName: gpu.nvidia.com", "deviceClassName: anything")
    assert not [f for f in lint_manifest(lone) if f.code == "K8S016"]


def test_k8s017_needs_a_release() -> None:
    assert not [f for f in lint_manifest(stream(POD, TEMPLATE)) if f.code == "K8S017"]
    assert not [f for f in lint_manifest(stream(POD, TEMPLATE), kubernetes_version="1.34") if f.code == "K8S017"]


def test_k8s017_names_kubectls_answer() -> None:
    (finding,) = [f for f in lint_manifest(TEMPLATE, kubernetes_version="1.33") if f.code == "K8S017"]
    assert 'no matches for kind "ResourceClaimTemplate" in version "resource.k8s.io/v1"' in finding.message
    assert finding.hint == "write apiVersion resource.k8s.io/v1beta2"


def _documents(text: str) -> list[Any]:
    return [document for document in yaml.safe_load_all(manifest(text)) if document]


def test_clean_twins_are_objects_the_api_accepts() -> None:
    versions = {"v1": "1.35", "v1beta1": "1.35"}
    pairs = []
    for case in CASES:
        for document in _documents(case.clean):
            version = document["apiVersion"].rsplit("/", 1)[-1]
            pairs.append((document, versions.get(version, "1.35")))
    answers = validate(pairs)
    assert answers == [None] * len(pairs), [a for a in answers if a]
