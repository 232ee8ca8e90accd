"""K8S018-K8S021: the device plugin beside the DRA GPU driver, the GPU Operator's toolkit and containerd, and the
device plugin's device-list strategy."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.kubernetes.cases import Case, check_case, lint_manifest, manifest
from tests.kubernetes.schemas import validate

DEVICE_PLUGIN = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-device-plugin-daemonset, namespace: gpu-operator}
spec:
  selector: {matchLabels: {app: nvidia-device-plugin-daemonset}}
  template:
    metadata: {labels: {app: nvidia-device-plugin-daemonset}}
    spec:
      nodeSelector: {nvidia.com/gpu.deploy.device-plugin: "true"}
      containers:
      - name: nvidia-device-plugin
        image: nvcr.io/nvidia/k8s-device-plugin:v0.18.0
        command: [/bin/sh, -c]
        args: [/bin/entrypoint.sh]
        env:
        - {name: DEVICE_LIST_STRATEGY, value: envvar}
        volumeMounts:
        - {name: device-plugin, mountPath: /var/lib/kubelet/device-plugins}
      volumes:
      - name: device-plugin
        hostPath: {path: /var/lib/kubelet/device-plugins}
"""

DRA_KUBELET_PLUGIN = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: dra-driver-nvidia-gpu-kubelet-plugin, namespace: dra}
spec:
  selector: {matchLabels: {app: dra}}
  template:
    metadata: {labels: {app: dra}}
    spec:
      containers:
      - name: compute-domains
        image: registry.k8s.io/dra-driver-nvidia-gpu/dra-driver-nvidia-gpu:v25.8.1
        command: [bash, -c]
        args: ["compute-domain-kubelet-plugin -v $(LOG_VERBOSITY)"]
      - name: gpus
        image: registry.k8s.io/dra-driver-nvidia-gpu/dra-driver-nvidia-gpu:v25.8.1
        command: [bash, -c]
        args: ["gpu-kubelet-plugin -v $(LOG_VERBOSITY)"]
"""

# The chart with resources.gpus.enabled=false: the ComputeDomain plugin only.
DRA_COMPUTE_DOMAINS_ONLY = DRA_KUBELET_PLUGIN[: DRA_KUBELET_PLUGIN.index("      - name: gpus")]

GPU_DEVICE_CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel:
      expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
"""

CHANNEL_DEVICE_CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: compute-domain-default-channel.nvidia.com}
spec:
  selectors:
  - cel:
      expression: "device.driver == 'compute-domain.nvidia.com'"
"""

TOOLKIT = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-container-toolkit-daemonset, namespace: gpu-operator}
spec:
  selector: {matchLabels: {app: nvidia-container-toolkit-daemonset}}
  template:
    metadata: {labels: {app: nvidia-container-toolkit-daemonset}}
    spec:
      containers:
      - name: nvidia-container-toolkit-ctr
        image: nvcr.io/nvidia/k8s/container-toolkit:v1.18.0
        command: [/bin/sh, -c]
        args: [/bin/entrypoint.sh]
        securityContext: {privileged: true}
        env:
        - {name: RUNTIME, value: containerd}
        - {name: CONTAINERD_CONFIG, value: /runtime/config-dir/config.toml}
        - {name: RUNTIME_CONFIG_SOURCE, value: "file=/host/etc/containerd/config.toml"}
"""


def stream(*documents: str) -> str:
    return "---".join(documents)


def with_env(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


CDI_PLUGIN = with_env(
    DEVICE_PLUGIN,
    "        - {name: DEVICE_LIST_STRATEGY, value: envvar}\n",
    "        - {name: DEVICE_LIST_STRATEGY, value: envvar}\n        - {name: CDI_ENABLED, value: 'true'}\n",
)
CDI_MOUNT = (
    "        - {name: cdi-root, mountPath: /var/run/cdi}\n      volumes:\n"
    "      - name: cdi-root\n        hostPath: {path: /var/run/cdi, type: DirectoryOrCreate}\n"
)

CASES = [
    Case(
        "K8S018",
        stream(DEVICE_PLUGIN, DRA_KUBELET_PLUGIN),
        stream(DEVICE_PLUGIN, DRA_COMPUTE_DOMAINS_ONLY),
        line=12,
    ),
    Case(
        "K8S018",
        stream(DEVICE_PLUGIN, DRA_KUBELET_PLUGIN),
        stream(
            DEVICE_PLUGIN,
            DRA_KUBELET_PLUGIN.replace(
                "    spec:\n      containers:",
                "    spec:\n      nodeSelector: {nvidia.com/gpu.deploy.device-plugin: 'false'}\n      containers:",
            ),
        ),
        id="disjoint-nodes",
    ),
    Case(
        "K8S018",
        stream(DEVICE_PLUGIN, GPU_DEVICE_CLASS),
        stream(DEVICE_PLUGIN, CHANNEL_DEVICE_CLASS),
        id="device-class",
    ),
    Case(
        "K8S019",
        with_env(
            TOOLKIT, '        - {name: RUNTIME_CONFIG_SOURCE, value: "file=/host/etc/containerd/config.toml"}\n', ""
        ),
        TOOLKIT,
        line=16,
    ),
    Case(
        "K8S019",
        with_env(TOOLKIT, 'value: "file=/host/etc/containerd/config.toml"', 'value: "command,file"'),
        with_env(TOOLKIT, 'value: "file=/host/etc/containerd/config.toml"', 'value: "file,command"'),
        id="command-first",
    ),
    Case(
        "K8S019",
        with_env(
            TOOLKIT, '        - {name: RUNTIME_CONFIG_SOURCE, value: "file=/host/etc/containerd/config.toml"}\n', ""
        ),
        with_env(
            TOOLKIT,
            '        - {name: RUNTIME_CONFIG_SOURCE, value: "file=/host/etc/containerd/config.toml"}\n',
            "        - {name: ENABLE_NRI_PLUGIN, value: 'true'}\n",
        ),
        id="nri",
    ),
    Case(
        "K8S020",
        with_env(
            TOOLKIT, "/runtime/config-dir/config.toml}", "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl}"
        ),
        with_env(TOOLKIT, "/runtime/config-dir/config.toml}", "/var/lib/rancher/k3s/agent/etc/containerd/config.toml}"),
        line=17,
    ),
    Case(
        "K8S020",
        with_env(
            TOOLKIT,
            "/host/etc/containerd/config.toml",
            "/host/var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl",
        ),
        with_env(
            TOOLKIT, "/host/etc/containerd/config.toml", "/host/var/lib/rancher/rke2/agent/etc/containerd/config.toml"
        ),
        id="file-source",
    ),
    Case(
        "K8S021",
        with_env(DEVICE_PLUGIN, "value: envvar}", "value: volume_mounts}"),
        DEVICE_PLUGIN,
        id="unknown",
        line=16,
    ),
    Case(
        "K8S021",
        CDI_PLUGIN,
        with_env(
            with_env(CDI_PLUGIN, "value: envvar}", "value: 'cdi-annotations,cdi-cri'}"),
            "      volumes:\n",
            CDI_MOUNT,
        ),
        id="envvar-with-operator-cdi",
    ),
    Case(
        "K8S021",
        with_env(DEVICE_PLUGIN, "value: envvar}", "value: cdi-cri}"),
        with_env(with_env(DEVICE_PLUGIN, "value: envvar}", "value: cdi-cri}"), "      volumes:\n", CDI_MOUNT),
        id="cdi-without-host-cdi-dir",
    ),
    Case(
        "K8S021",
        stream(with_env(DEVICE_PLUGIN, "value: envvar}", "value: volume-mounts}"), TOOLKIT),
        stream(
            with_env(DEVICE_PLUGIN, "value: envvar}", "value: volume-mounts}"),
            with_env(
                TOOLKIT,
                "        - {name: RUNTIME, value: containerd}\n",
                "        - {name: RUNTIME, value: containerd}\n"
                "        - {name: ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS, value: 'true'}\n",
            ),
        ),
        id="volume-mounts-not-accepted",
    ),
    Case(
        "K8S021",
        with_env(DEVICE_PLUGIN, "args: [/bin/entrypoint.sh]", "args: [/bin/entrypoint.sh, --device-list-strategy=cdi]"),
        with_env(
            DEVICE_PLUGIN, "args: [/bin/entrypoint.sh]", "args: [/bin/entrypoint.sh, --device-list-strategy=envvar]"
        ),
        id="argument",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_trigger_and_twin(case: Case) -> None:
    check_case(case)


def test_k8s018_judges_the_whole_run() -> None:
    from nvidia_oci_hook.kinds.document import parse_document
    from nvidia_oci_hook.kinds.kubernetes import run_manifests
    from nvidia_oci_hook.lint import LintOptions, active_rules, lint_document
    from nvidia_oci_hook.rules.base import Context

    plugin = parse_document("plugin.yaml", manifest(DEVICE_PLUGIN), "kubernetes")
    driver = parse_document("dra.yaml", manifest(DRA_KUBELET_PLUGIN), "kubernetes")
    context = Context(manifests=run_manifests([plugin, driver]))
    rules = active_rules(LintOptions(select=("K8S018",), offline=True))
    (finding,) = lint_document(plugin, rules, context)
    assert "dra.yaml" in finding.message
    assert not lint_document(driver, rules, Context(manifests=run_manifests([plugin, driver])))


def test_k8s018_passes_over_the_plugins_sidecars() -> None:
    gfd = with_env(DEVICE_PLUGIN, "command: [/bin/sh, -c]", "command: [gpu-feature-discovery]")
    assert not [f for f in lint_manifest(stream(gfd, DRA_KUBELET_PLUGIN)) if f.code == "K8S018"]


def test_k8s021_says_what_the_operator_sets() -> None:
    (finding,) = [f for f in lint_manifest(CDI_PLUGIN) if f.code == "K8S021"]
    assert finding.hint is not None and "sets cdi-annotations,cdi-cri here" in finding.hint


def _documents(text: str) -> list[Any]:
    return [document for document in yaml.safe_load_all(manifest(text)) if document]


def test_clean_twins_are_objects_the_api_accepts() -> None:
    pairs = [(document, "1.35") for case in CASES for document in _documents(case.clean)]
    answers = validate(pairs)
    assert answers == [None] * len(pairs), [a for a in answers if a]
