"""K8S002, K8S004-K8S006, K8S022: the NVIDIA_* environment a pod gives its containers, from env and command line."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.kubernetes.cases import Case, check_case, lint_manifest, manifest
from tests.kubernetes.schemas import validate

# Seed 000 (NVIDIA/gpu-operator #508): the device plugin's command of GPU Operator 22.9, exactly.
SEED_000 = (
    "[[ -f /run/nvidia/validations/host-driver-ready ]] && driver_root=/ || driver_root=/run/nvidia/driver; "
    "export NVIDIA_DRIVER_ROOT=$driver_root; exec nvidia-device-plugin;"
)
WAIT_THEN_FIXED = (
    "until [ -f /run/nvidia/validations/toolkit-ready ]; do echo waiting; sleep 5; done; "
    "export NVIDIA_DRIVER_ROOT=/run/nvidia/driver; exec nvidia-device-plugin;"
)

PLUGIN = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-device-plugin-daemonset, namespace: gpu-operator}
spec:
  selector: {matchLabels: {app: plugin}}
  template:
    metadata: {labels: {app: plugin}}
    spec:
      containers:
      - name: nvidia-device-plugin
        image: nvcr.io/nvidia/k8s-device-plugin:v0.13.0
        command: [bash, -c]
        args:
        - "COMMAND"
"""

BLOCK = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-mig-manager, namespace: gpu-operator}
spec:
  selector: {matchLabels: {app: mig}}
  template:
    metadata: {labels: {app: mig}}
    spec:
      containers:
      - name: nvidia-mig-manager
        image: nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.10.0
        securityContext: {privileged: true}
        command: [/bin/sh, -c]
        args:
        - |
          until [ -f /run/nvidia/validations/toolkit-ready ]; do sleep 5; done
          set -o allexport
          . /run/nvidia/validations/driver-ready
          exec nvidia-mig-manager
"""

# GPU Operator >= 24.6: the entrypoint is a ConfigMap key mounted over /bin/entrypoint.sh.
ENTRYPOINT = """
apiVersion: v1
kind: ConfigMap
metadata: {name: nvidia-device-plugin-entrypoint, namespace: gpu-operator}
data:
  entrypoint.sh: |-
    #!/bin/sh
    until [ -f /run/nvidia/validations/driver-ready ]; do sleep 5; done
    set -o allexport
    . /run/nvidia/validations/driver-ready
    exec nvidia-device-plugin
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-device-plugin-daemonset, namespace: gpu-operator}
spec:
  selector: {matchLabels: {app: plugin}}
  template:
    metadata: {labels: {app: plugin}}
    spec:
      containers:
      - name: nvidia-device-plugin
        image: nvcr.io/nvidia/k8s-device-plugin:v0.17.0
        command: [/bin/sh, -c]
        args: [/bin/entrypoint.sh]
        securityContext: {privileged: true}
        volumeMounts:
        - {name: entrypoint, mountPath: /bin/entrypoint.sh, subPath: entrypoint.sh, readOnly: true}
      volumes:
      - name: entrypoint
        configMap: {name: nvidia-device-plugin-entrypoint, defaultMode: 448}
"""

# Pre-24.6 GPU Operator entrypoints chose the root by which empty marker exists (same shape as 24.3's).
TWO_MARKERS = """while true; do
      if [ -f /run/nvidia/validations/host-driver-ready ]; then
        NVIDIA_DRIVER_ROOT=/; break
      elif [ -f /run/nvidia/validations/driver-ready ]; then
        NVIDIA_DRIVER_ROOT=/run/nvidia/driver; break
      fi
      sleep 5
    done"""
WAIT_ONLY = """while true; do
      [ -f /run/nvidia/validations/driver-ready ] && break
      sleep 5
    done"""

# An init container that reads the driver's files through the sourced root only to copy one: no root is chosen
# for a program (the shape of 24.9's IMEX config copy in GPU feature discovery, in other words).
COPIER = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: gpu-feature-discovery, namespace: gpu-operator}
spec:
  selector: {matchLabels: {app: gfd}}
  template:
    metadata: {labels: {app: gfd}}
    spec:
      initContainers:
      - name: copy-fabric-config
        image: nvcr.io/nvidia/k8s-device-plugin:v0.17.0
        command: [/bin/bash, -c]
        args:
        - |
          until [[ -f /run/nvidia/validations/driver-ready ]]; do echo "waiting; driver's validation"; sleep 5; done
          set -o allexport
          . /run/nvidia/validations/driver-ready   # IS_HOST_DRIVER, DRIVER_ROOT_CTR_PATH, ...
          wanted=/etc/fabric/nodes.cfg
          rm -f "/shared${wanted}"
          if [[ ! -f "${DRIVER_ROOT_CTR_PATH}${wanted}" ]]; then echo "none; skipping"; exit 0; fi
          mkdir -p "$(dirname "/shared${wanted}")"
          cp "${DRIVER_ROOT_CTR_PATH}${wanted}" "/shared${wanted}"
          exit 0
      containers:
      - name: gpu-feature-discovery
        image: nvcr.io/nvidia/k8s-device-plugin:v0.17.0
"""

# The same entrypoint as GPU Operator 24.3 and earlier wrote it: the two-marker guess.
TWO_MARKER_ENTRYPOINT = ENTRYPOINT.replace(
    "until [ -f /run/nvidia/validations/driver-ready ]; do sleep 5; done", TWO_MARKERS
).replace("set -o allexport\n    . /run/nvidia/validations/driver-ready", "export NVIDIA_DRIVER_ROOT")
# The line of the DaemonSet's args, which run the entrypoint.
TWO_MARKER_LINE = manifest(TWO_MARKER_ENTRYPOINT).decode().splitlines().index("        args: [/bin/entrypoint.sh]") + 1

NOTEBOOK = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: notebook, namespace: ml}
spec:
  selector: {matchLabels: {app: notebook}}
  template:
    metadata: {labels: {app: notebook}}
    spec:
      containers:
      - name: jupyter
        image: IMAGE
        resources: {limits: {cpu: "2"}}
        env:
        - {name: NVIDIA_VISIBLE_DEVICES, value: VALUE}
"""

EXPORTER = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: gpu-exporter}
spec:
  selector: {matchLabels: {app: exporter}}
  template:
    metadata: {labels: {app: exporter}}
    spec:
      containers:
      - name: exporter
        image: IMAGE
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
        env:
        - {name: NVIDIA_VISIBLE_DEVICES, value: all}
        - {name: NVIDIA_DRIVER_CAPABILITIES, value: "compute,utility"}
"""

CAPABILITIES_ONLY = """
apiVersion: v1
kind: Pod
metadata: {name: encoder}
spec:
  containers:
  - name: main
    image: nvcr.io/nvidia/cuda:12.8.0-base-ubuntu24.04
    env:
    - {name: NVIDIA_DRIVER_CAPABILITIES, value: "compute,video"}
"""

GPU_POD = """
apiVersion: v1
kind: Pod
metadata: {name: trainer}
spec:
  containers:
  - name: main
    image: nvcr.io/nvidia/pytorch:25.01-py3
    resources: {limits: {nvidia.com/gpu: 1}}
    securityContext: {privileged: false}
    env:
    - {name: NAME, value: "VALUE"}
"""


def _gpu_pod(name: str, value: str, privileged: bool = False) -> str:
    text = GPU_POD.replace("NAME", name).replace("VALUE", value)
    return text.replace("privileged: false", "privileged: true") if privileged else text


CASES = [
    Case(
        "K8S002",
        PLUGIN.replace("COMMAND", SEED_000),
        PLUGIN.replace("COMMAND", WAIT_THEN_FIXED),
        id="seed-000",
        line=14,
    ),
    Case(
        "K8S002",
        TWO_MARKER_ENTRYPOINT,
        ENTRYPOINT.replace("until [ -f /run/nvidia/validations/driver-ready ]; do sleep 5; done", WAIT_ONLY),
        id="configmap-two-markers",
        line=TWO_MARKER_LINE,
    ),
    Case(
        "K8S002",
        BLOCK.replace("validations/driver-ready", "validations/driver-root.env"),
        BLOCK.replace(". /run/nvidia/validations/driver-ready", "export NVIDIA_DRIVER_ROOT=/"),
        id="sourced-other-file",
        line=15,
    ),
    Case(
        "K8S022",
        BLOCK,
        BLOCK.replace(". /run/nvidia/validations/driver-ready", "export NVIDIA_DRIVER_ROOT=/"),
        id="inline",
        line=15,
    ),
    Case(
        "K8S022",
        ENTRYPOINT,
        ENTRYPOINT.replace(". /run/nvidia/validations/driver-ready", "export NVIDIA_DRIVER_ROOT=/run/nvidia/driver"),
        id="configmap-entrypoint",
        line=24,
    ),
    Case("K8S022", COPIER.replace("exit 0", "exec /usr/local/bin/imex-agent"), COPIER, id="copier-that-starts"),
    Case(
        "K8S004",
        NOTEBOOK.replace("IMAGE", "jupyter/scipy-notebook").replace("VALUE", "all"),
        NOTEBOOK.replace("IMAGE", "jupyter/scipy-notebook").replace("VALUE", "void"),
        line=14,
    ),
    Case(
        "K8S004",
        EXPORTER.replace("IMAGE", "registry.example/gpu-exporter:1"),
        EXPORTER.replace("IMAGE", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
        id="not-nvidia-component",
    ),
    Case(
        "K8S004",
        CAPABILITIES_ONLY,
        CAPABILITIES_ONLY + "    - {name: NVIDIA_VISIBLE_DEVICES, value: void}\n",
        id="left-to-the-image",
        line=9,
    ),
    Case("K8S005", _gpu_pod("NVIDIA_VISIBLE_DEVICES", "all"), _gpu_pod("NVIDIA_DRIVER_CAPABILITIES", "all"), line=11),
    Case(
        "K8S006",
        _gpu_pod("NVIDIA_DRIVER_CAPABILITIES", "compute,graphic"),
        _gpu_pod("NVIDIA_DRIVER_CAPABILITIES", "compute,graphics"),
        id="capability",
        line=11,
    ),
    Case(
        "K8S006",
        _gpu_pod("NVIDIA_REQUIRE_CUDA", "cuda=>12.0"),
        _gpu_pod("NVIDIA_REQUIRE_CUDA", "cuda>=12.0"),
        id="requirement",
    ),
    Case(
        "K8S006",
        _gpu_pod("NVIDIA_MIG_MONITOR_DEVICES", "all"),
        _gpu_pod("NVIDIA_MIG_MONITOR_DEVICES", "all", privileged=True),
        id="mig-unprivileged",
    ),
    Case(
        "K8S006",
        _gpu_pod("NVIDIA_VISIBLE_DEVICES", "gpu0"),
        _gpu_pod("NVIDIA_VISIBLE_DEVICES", "0"),
        id="device-form",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_trigger_and_twin(case: Case) -> None:
    check_case(case)


def _fired(text: str, code: str) -> list[str]:
    return [f.message for f in lint_manifest(text) if f.code == code]


def test_k8s002_quotes_what_the_gpu_pods_then_fail_with() -> None:
    (message,) = _fired(PLUGIN.replace("COMMAND", SEED_000), "K8S002")
    assert "chooses driver_root by whether /run/nvidia/validations/host-driver-ready exists" in message
    assert "lstat /run/nvidia/driver/dev/nvidiactl: no such file or directory" in message
    (message,) = _fired(TWO_MARKER_ENTRYPOINT, "K8S002")
    assert "runs /bin/entrypoint.sh (ConfigMap nvidia-device-plugin-entrypoint key entrypoint.sh)" in message
    assert "chooses NVIDIA_DRIVER_ROOT by whether /run/nvidia/validations/host-driver-ready exists" in message


def test_k8s022_says_when_the_sourced_root_can_be_stale() -> None:
    (message,) = _fired(ENTRYPOINT, "K8S022")
    assert (
        ": runs /bin/entrypoint.sh (ConfigMap nvidia-device-plugin-entrypoint key entrypoint.sh), which sources"
        in message
    )
    assert "starts nvidia-device-plugin with the NVIDIA_DRIVER_ROOT in it" in message
    assert "stale only when the node's driver changes" in message
    assert not _fired(ENTRYPOINT, "K8S002")  # one file, written whole: not the two-marker guess
    assert not _fired(COPIER, "K8S002") and not _fired(COPIER, "K8S022")  # copies a file, starts nothing


@pytest.mark.parametrize(
    "script",
    [
        # quoted separators and comments are no commands
        ". /run/nvidia/validations/driver-ready; echo 'root; exec it' # exec nvidia-toolkit",
        ". /run/nvidia/validations/driver-ready\ncase $IS_HOST_DRIVER in\n  true) echo host ;;\nesac",
        "source /run/nvidia/validations/driver-ready && for f in a b; do cp $f /out/; done",
        "exec nvidia-device-plugin; . /run/nvidia/validations/driver-ready",  # sourced after the program
    ],
)
def test_k8s022_a_script_that_starts_nothing_after_sourcing_is_quiet(script: str) -> None:
    assert not _fired(PLUGIN.replace('"COMMAND"', json.dumps(script)), "K8S022")


@pytest.mark.parametrize(
    ("script", "program"),
    [
        (". /run/nvidia/validations/driver-ready; FOO=1 exec 2>&1 nvidia-toolkit --x", "nvidia-toolkit"),
        ("source /run/nvidia/validations/driver-ready\n/usr/bin/gpu-agent &\nwait", "/usr/bin/gpu-agent"),
        (". /run/nvidia/validations/driver-ready; x=$(nvidia-smi -L)", "nvidia-smi"),
    ],
)
def test_k8s022_names_the_program_that_inherits_the_root(script: str, program: str) -> None:
    (message,) = _fired(PLUGIN.replace('"COMMAND"', json.dumps(script)), "K8S022")
    assert f"starts {program} with the NVIDIA_DRIVER_ROOT in it" in message


def test_k8s002_a_script_of_another_namespace_is_not_the_one_mounted() -> None:
    other = ENTRYPOINT.replace("{name: nvidia-device-plugin-entrypoint, namespace: gpu-operator}", "{name: x}", 1)
    other = other.replace("name: x}", "name: nvidia-device-plugin-entrypoint, namespace: elsewhere}")
    assert not _fired(other, "K8S002")


def test_k8s004_leaves_privileged_node_agents_alone() -> None:
    agent = EXPORTER.replace("IMAGE", "registry.example/gpu-exporter:1").replace(
        "{allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}", "{privileged: true}"
    )
    assert not _fired(agent, "K8S004")
    # The same container in a Deployment takes GPUs nobody scheduled.
    assert _fired(agent.replace("kind: DaemonSet", "kind: Deployment"), "K8S004")


def test_k8s005_says_what_the_container_gets() -> None:
    (message,) = _fired(_gpu_pod("NVIDIA_VISIBLE_DEVICES", "void"), "K8S005")
    assert "gets no GPU at all" in message


def test_k8s006_quotes_nvidias_refusals() -> None:
    (message,) = _fired(_gpu_pod("NVIDIA_DRIVER_CAPABILITIES", "compute,graphic"), "K8S006")
    assert "unsupported capabilities found in 'compute,graphic' (allowed 'compute')" in message
    assert "graphic -> graphics" not in message  # the spelling goes in the hint
    (message,) = _fired(_gpu_pod("NVIDIA_MIG_CONFIG_DEVICES", "all"), "K8S006")
    assert "cannot set MIG_CONFIG_DEVICES in non privileged container" in message
    (message,) = _fired(_gpu_pod("NVIDIA_REQUIRE_CUDA", "cuda=>12.0"), "K8S006")
    assert "nvidia-container-cli: requirement error: invalid expression" in message


def test_k8s006_leaves_unknowable_values_alone() -> None:
    assert not _fired(_gpu_pod("NVIDIA_DRIVER_CAPABILITIES", "$(CAPS)"), "K8S006")
    disabled = _gpu_pod("NVIDIA_REQUIRE_CUDA", "cuda=>12.0") + "    - {name: NVIDIA_DISABLE_REQUIRE, value: 'true'}\n"
    assert not _fired(disabled, "K8S006")


def test_the_clean_twins_are_objects_the_api_accepts() -> None:
    documents = [doc for case in CASES for doc in yaml.safe_load_all(manifest(case.clean)) if doc]
    assert validate([(doc, "1.35") for doc in documents]) == [None] * len(documents)


def test_k8s006_leaves_containers_that_get_no_device_alone() -> None:
    void = _gpu_pod("NVIDIA_MIG_CONFIG_DEVICES", "all") + "    - {name: NVIDIA_VISIBLE_DEVICES, value: void}\n"
    assert not _fired(void, "K8S006")


@pytest.mark.parametrize(
    "command",
    [
        "[ -f /run/nvidia/validations/toolkit-ready ] || exit 1; export NVIDIA_DRIVER_ROOT=/; exec plugin",
        "if [ -f /run/nvidia/validations/toolkit-ready ]; then echo ready; fi; export DRIVER_ROOT=/; exec plugin",
    ],
)
def test_k8s002_a_marker_that_guards_a_fixed_root_chooses_nothing(command: str) -> None:
    assert not _fired(PLUGIN.replace("COMMAND", command), "K8S002")


def test_k8s002_an_if_that_chooses_the_root() -> None:
    command = (
        "if [[ -f /run/nvidia/validations/host-driver-ready ]]; then driver_root=/; "
        "elif [[ -f /run/nvidia/validations/driver-ready ]]; then driver_root=/run/nvidia/driver; fi; "
        "export NVIDIA_DRIVER_ROOT=$driver_root"
    )
    assert _fired(PLUGIN.replace("COMMAND", command), "K8S002")
