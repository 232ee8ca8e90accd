"""benchmarks/cluster_manifests.py: the cluster the manifest benchmark lints is the one its docstring describes,
written as kubectl and helm write it, and the same on every run."""

from __future__ import annotations

import collections
import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

_PATH = Path(__file__).resolve().parents[2] / "benchmarks/cluster_manifests.py"
_SPEC = importlib.util.spec_from_file_location("cluster_manifests", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
cm = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(cm)

PODS = 50


@pytest.fixture(scope="module")
def pod_text() -> str:
    return str(cm.pod_list(PODS, seed=3))


@pytest.fixture(scope="module")
def pods(pod_text: str) -> list[dict[str, Any]]:
    documents = list(yaml.safe_load_all(pod_text))
    assert len(documents) == 1
    listing = documents[0]
    assert (listing["apiVersion"], listing["kind"], listing["metadata"]) == ("v1", "List", {"resourceVersion": ""})
    items: list[dict[str, Any]] = listing["items"]
    return items


@pytest.fixture(scope="module")
def helm_text() -> str:
    return str(cm.helm_template(seed=3))


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {entry["name"]: entry.get("value") for entry in container.get("env", [])}


def _unsorted_keys(value: Any, where: str = "") -> list[str]:
    if isinstance(value, dict):
        found = [where or "/"] if list(value) != sorted(value) else []
        for key, item in value.items():
            found += _unsorted_keys(item, f"{where}/{key}")
        return found
    if isinstance(value, list):
        return [bad for index, item in enumerate(value) for bad in _unsorted_keys(item, f"{where}/{index}")]
    return []


def test_same_seed_same_text_and_other_seed_other_text(pod_text: str, helm_text: str) -> None:
    assert cm.pod_list(PODS, seed=3) == pod_text
    assert cm.helm_template(seed=3) == helm_text
    assert cm.pod_list(PODS, seed=4) != pod_text
    assert cm.helm_template(seed=4) != helm_text


def test_a_smaller_cluster_is_the_first_pods_of_a_larger_one() -> None:
    listing = cm.PodList(seed=3)
    smaller = list(listing.chunks(PODS))[1:-1]
    larger = list(listing.chunks(PODS + 20))[1:-1]
    assert len(larger) == len(set(larger)) == PODS + 20
    assert set(smaller) <= set(larger)
    assert smaller == [text for text in larger if text in set(smaller)]  # in the same order


def test_pod_list_is_kubectl_get_pods_output(pod_text: str, pods: list[dict[str, Any]]) -> None:
    assert len(pods) == PODS
    assert {(pod["apiVersion"], pod["kind"]) for pod in pods} == {("v1", "Pod")}
    keys = [(pod["metadata"]["namespace"], pod["metadata"]["name"]) for pod in pods]
    assert keys == sorted(keys) and len(set(keys)) == PODS  # the API server lists by namespace, then name
    # goyaml.v2's layout: keys sorted, sequences at their key's column, no anchors, "True" and "" quoted.
    assert _unsorted_keys(pods) == []
    assert pod_text.startswith("apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n")
    assert pod_text.endswith('kind: List\nmetadata:\n  resourceVersion: ""\n')
    assert "\n    containers:\n    - " in pod_text
    assert '\n      status: "True"\n' in pod_text
    assert not re.search(r"[&*]id\d+", pod_text)
    # Strings goyaml.v2 would read as something else double-quoted, those that cannot be plain single-quoted.
    for line in ('      - "15001"\n', '      - ""\n', "      - '*'\n", "      sidecar.istio.io/status: '{"):
        assert line in pod_text
    for pod in pods:
        metadata = pod["metadata"]
        assert "managedFields" not in metadata
        assert metadata["ownerReferences"][0]["controller"] is True
        assert metadata["labels"] and metadata["annotations"] is not None
        status = pod["status"]
        assert {c["type"] for c in status["conditions"]} >= {"Initialized", "Ready", "ContainersReady", "PodScheduled"}
        names = [c["name"] for c in pod["spec"]["containers"]]
        assert [c["name"] for c in status["containerStatuses"]] == names
        assert status["phase"] in ("Running", "Succeeded")
        projected = [v for v in pod["spec"]["volumes"] if v["name"].startswith("kube-api-access-")]
        assert len(projected) == 1 and projected[0]["projected"]["sources"][0]["serviceAccountToken"]


def test_mix_of_web_sidecar_and_batch_pods(pods: list[dict[str, Any]]) -> None:
    meshed = [pod for pod in pods if any(c["name"] == "istio-proxy" for c in pod["spec"]["containers"])]
    batch = [pod for pod in pods if pod["metadata"]["ownerReferences"][0]["kind"] == "Job"]
    assert len(meshed) >= PODS // 3
    assert batch
    assert all(len(_env(pod["spec"]["containers"][0])) >= 20 for pod in meshed)


def test_gpu_share_is_as_documented() -> None:
    # Over whole runs of 20 pods the share is exact; any 50 are within one pod of it.
    items = [cm.pod(5, index) for index in range(100)]
    gpu = [pod for pod in items if cm.is_gpu_pod(pod)]
    assert len(gpu) == round(100 * cm.GPU_SHARE) == 15
    operator = [pod for pod in gpu if pod["metadata"]["namespace"] == cm.GPU_OPERATOR_NAMESPACE]
    workloads = [pod for pod in gpu if pod not in operator]
    assert len(operator) == 5 and len(workloads) == 10
    for pod in workloads:
        limits = [c["resources"].get("limits", {}).get("nvidia.com/gpu") for c in pod["spec"]["containers"]]
        requests = [c["resources"].get("requests", {}).get("nvidia.com/gpu") for c in pod["spec"]["containers"]]
        assert limits == requests and any(limits)
    for pod in operator:
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    others = [pod for pod in items if pod not in gpu]
    assert not any("nvidia.com/gpu" in str(c.get("resources")) for pod in others for c in pod["spec"]["containers"])


def test_gpu_pods_have_the_habits_the_rules_look_for() -> None:
    items = [cm.pod(0, index) for index in range(400)]
    gpu = [pod for pod in items if cm.is_gpu_pod(pod)]
    workloads = [pod for pod in gpu if pod["metadata"]["namespace"] != cm.GPU_OPERATOR_NAMESPACE]
    privileged = [p for p in workloads if any(c.get("securityContext", {}).get("privileged") for c in _containers(p))]
    visible = [p for p in workloads if any("NVIDIA_VISIBLE_DEVICES" in _env(c) for c in _containers(p))]
    runtime_class = [p for p in workloads if p["spec"].get("runtimeClassName") == "nvidia"]
    for share in (privileged, visible, runtime_class):
        assert 0 < len(share) < len(workloads)
    operator = {
        pod["metadata"]["ownerReferences"][0]["name"]: pod
        for pod in gpu
        if pod["metadata"]["namespace"] == cm.GPU_OPERATOR_NAMESPACE
    }
    assert set(operator) == {
        "nvidia-device-plugin-daemonset",
        "nvidia-dra-driver-gpu-kubelet-plugin",
        "nvidia-container-toolkit-daemonset",
        "nvidia-operator-validator",
    }
    dra = operator["nvidia-dra-driver-gpu-kubelet-plugin"]["spec"]
    assert {"hostPath": {"path": "/dev", "type": ""}, "name": "host-dev"} in dra["volumes"]
    assert any(m["mountPath"] == "/dev" for m in dra["containers"][0]["volumeMounts"])
    toolkit = _env(operator["nvidia-container-toolkit-daemonset"]["spec"]["containers"][0])
    assert toolkit["RUNTIME"] == "containerd" and toolkit["CONTAINERD_CONFIG"]


def test_size_per_pod_is_as_documented(pod_text: str) -> None:
    per_pod = len(pod_text.encode()) / PODS
    assert 0.9 * cm.POD_BYTES <= per_pod <= 1.1 * cm.POD_BYTES


def test_helm_stream_is_helm_template_output(helm_text: str) -> None:
    documents = [doc for doc in yaml.safe_load_all(helm_text) if doc is not None]
    assert len(documents) == cm.HELM_OBJECTS == sum(cm.HELM_KINDS.values())
    assert collections.Counter(doc["kind"] for doc in documents) == cm.HELM_KINDS
    sources = re.findall(r"^---\n# Source: (gpu-operator/\S+\.yaml)\n(?:apiVersion|kind): ", helm_text, re.MULTILINE)
    assert len(sources) == cm.HELM_OBJECTS
    assert any("/charts/" in source for source in sources)  # subcharts' templates too
    # helm's install order: namespaces first; kinds helm does not know after the ones it does.
    kinds = [doc["kind"] for doc in documents]
    assert kinds[: cm.HELM_KINDS["Namespace"]] == ["Namespace"] * cm.HELM_KINDS["Namespace"]
    assert kinds.index("DeviceClass") > kinds.index("CronJob")
    daemonsets = {doc["metadata"]["name"]: doc for doc in documents if doc["kind"] == "DaemonSet"}
    assert {"nvidia-device-plugin-daemonset", "nvidia-dcgm-exporter", "nvidia-operator-validator"} <= set(daemonsets)
    toolkit = _env(daemonsets["nvidia-container-toolkit-daemonset"]["spec"]["template"]["spec"]["containers"][0])
    assert toolkit["RUNTIME"] == "containerd" and toolkit["CONTAINERD_CONFIG"].endswith("config.toml")
    dra = {doc["apiVersion"] for doc in documents if doc["kind"] in ("DeviceClass", "ResourceClaimTemplate")}
    assert dra == {"resource.k8s.io/v1"}
    assert {doc["handler"] for doc in documents if doc["kind"] == "RuntimeClass"} >= {"nvidia"}
