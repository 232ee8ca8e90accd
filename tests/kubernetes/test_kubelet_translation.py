"""The kubelet's translation (kinds/kubernetes/kubelet.py): a pod template's container and the device plugins'
answers -> the CRI ContainerConfig, each part pointing back at the manifest field it came from."""

from __future__ import annotations

from typing import Any

from nvidia_oci_hook.kinds.cri import CRI_CONTAINER, is_cri_container
from nvidia_oci_hook.kinds.document import parse_document
from nvidia_oci_hook.kinds.kubernetes.kubelet import PluginAnswer, derive, handler_of
from nvidia_oci_hook.kinds.kubernetes.objects import Container, Manifests, objects
from nvidia_oci_hook.kinds.schema import schema_problems
from tests.kubernetes.cases import manifest

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: ml
  uid: 0f9c1f6e-1111-2222-3333-444455556666
  annotations:
    cdi.k8s.io/pod-level: nvidia.com/gpu=all
spec:
  runtimeClassName: nvidia
  containers:
  - name: main
    image: cuda:12
    command: [python, train.py]
    env:
    - name: NVIDIA_VISIBLE_DEVICES
      value: all
    - name: EPOCHS
      value: "3"
    resources:
      limits:
        nvidia.com/gpu: 1
    securityContext:
      privileged: true
    volumeMounts:
    - name: data
      mountPath: /data
      subPath: set1
    - name: scratch
      mountPath: /scratch
  volumes:
  - name: data
    hostPath: {path: /srv/data/}
  - name: scratch
    emptyDir: {}
"""

PLUGIN = PluginAnswer(
    "nvidia.com/gpu",
    devices=(("/dev/nvidiactl", "/run/nvidia/driver/dev/nvidiactl", "rw"), ("/dev/nvidia0", "/dev/nvidia0", "rw")),
    mounts=(("/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi", True),),
    envs={"NVIDIA_VISIBLE_DEVICES": "GPU-aaaa"},
    annotations={"cdi.k8s.io/nvidia-device-plugin_uuid": "nvidia.com/gpu=GPU-aaaa"},
    cdi_devices=("nvidia.com/gpu=GPU-aaaa",),
    source="the checkpoint",
)


def _container(text: str = POD, index: int = 0) -> Container:
    document = parse_document("pod.yaml", manifest(text), "kubernetes")
    (obj,) = [o for o in objects(document.value, "pod.yaml") if o.template is not None]
    assert obj.template is not None
    return list(obj.template.containers())[index]


def test_plugin_parts_come_first_and_point_at_the_resource() -> None:
    container = _container()
    derived = derive(container, [PLUGIN])
    config = derived.config
    limit = f"{container.pointer}/resources/limits/nvidia.com~1gpu"
    assert [d["host_path"] for d in config["devices"]] == ["/run/nvidia/driver/dev/nvidiactl", "/dev/nvidia0"]
    assert derived.origin_of("/devices/0/host_path").pointer == limit
    assert "device plugin for nvidia.com/gpu (the checkpoint)" in derived.origin_of("/devices/1").source
    assert config["CDI_devices"] == [{"name": "nvidia.com/gpu=GPU-aaaa"}]
    assert derived.origin_of("/CDI_devices/0").pointer == limit
    # The plugin's env, then the pod's: the engine keeps the last, so the pod's `all` wins.
    assert [(e["key"], e["value"]) for e in config["envs"]] == [
        ("NVIDIA_VISIBLE_DEVICES", "GPU-aaaa"),
        ("NVIDIA_VISIBLE_DEVICES", "all"),
        ("EPOCHS", "3"),
    ]
    assert derived.origin_of("/envs/0").pointer == limit
    assert derived.origin_of("/envs/1").pointer == f"{container.pointer}/env/0"


def test_pod_annotations_stay_with_the_sandbox_and_the_plugins_go_to_the_container() -> None:
    config = derive(_container(), [PLUGIN]).config
    assert config["annotations"] == {"cdi.k8s.io/nvidia-device-plugin_uuid": "nvidia.com/gpu=GPU-aaaa"}
    assert "cdi.k8s.io/pod-level" not in config["annotations"]


def test_mounts_volumes_and_the_termination_log() -> None:
    container = _container()
    derived = derive(container, [PLUGIN])
    mounts = [(m["container_path"], m["host_path"], m["readonly"]) for m in derived.config["mounts"]]
    uid = "0f9c1f6e-1111-2222-3333-444455556666"
    assert mounts == [
        ("/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi", True),
        ("/data", "/srv/data/set1", False),
        ("/scratch", f"/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~empty-dir/scratch", False),
        ("/dev/termination-log", f"/var/lib/kubelet/pods/{uid}/containers/main/termination-log", False),
    ]
    assert derived.origin_of("/mounts/1/host_path").pointer == f"{container.pointer}/volumeMounts/0"


def test_privileged_and_labels() -> None:
    container = _container()
    derived = derive(container, [])
    assert derived.config["linux"]["security_context"] == {"privileged": True}
    assert derived.origin_of("/linux/security_context/privileged").pointer.endswith("/securityContext/privileged")
    assert derived.config["labels"]["io.kubernetes.pod.namespace"] == "ml"
    assert derived.config["devices"] == [] and derived.config["CDI_devices"] == []


def test_answers_of_two_resources_merge_with_the_first_kept() -> None:
    other = PluginAnswer(
        "nvidia.com/mig-1g.10gb",
        devices=(("/dev/nvidiactl", "/dev/nvidiactl", "rw"), ("/dev/nvidia-caps/nvidia-cap1", "/dev/x", "r")),
        envs={"NVIDIA_VISIBLE_DEVICES": "MIG-1", "NVIDIA_MIG_CONFIG_DEVICES": "all"},
        annotations={"cdi.k8s.io/nvidia-device-plugin_uuid": "other"},
        cdi_devices=("nvidia.com/gpu=GPU-aaaa",),
        source="s",
    )
    config = derive(_container(), [PLUGIN, other]).config
    assert [d["container_path"] for d in config["devices"]] == [
        "/dev/nvidiactl",
        "/dev/nvidia0",
        "/dev/nvidia-caps/nvidia-cap1",
    ]
    assert config["devices"][0]["host_path"] == "/run/nvidia/driver/dev/nvidiactl"
    assert [e["key"] for e in config["envs"]][:2] == ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES"]
    assert config["envs"][0]["value"] == "GPU-aaaa"
    assert config["annotations"]["cdi.k8s.io/nvidia-device-plugin_uuid"] == "nvidia.com/gpu=GPU-aaaa"
    assert config["CDI_devices"] == [{"name": "nvidia.com/gpu=GPU-aaaa"}]


DRA = """\
apiVersion: v1
kind: Pod
metadata: {name: dra}
spec:
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: single-gpu
  containers:
  - name: main
    image: cuda:12
    resources:
      claims:
      - name: gpu
      - name: not-a-pod-claim
"""


def test_dra_claims_cdi_names_for_the_claims_the_pod_has() -> None:
    container = _container(DRA)
    derived = derive(container, [], {"gpu": ["k8s.gpu.nvidia.com/claim=abc-gpu-0"], "not-a-pod-claim": ["x/y=z"]})
    assert derived.config["CDI_devices"] == [{"name": "k8s.gpu.nvidia.com/claim=abc-gpu-0"}]
    assert derived.origin_of("/CDI_devices/0").pointer == f"{container.pointer}/resources/claims/0"


def test_the_derived_config_is_a_cri_container_config_our_schema_accepts() -> None:
    config: Any = derive(_container(), [PLUGIN]).config
    assert is_cri_container(config)
    assert list(schema_problems(CRI_CONTAINER, config)) == []


def test_runtime_handler() -> None:
    container = _container()
    assert handler_of(container, {}) == (
        "nvidia",
        "/0/spec/runtimeClassName",
        "runtimeClassName nvidia (no RuntimeClass of that name given: its handler taken as nvidia)",
    )
    classes = Manifests(
        list(
            objects(
                parse_document(
                    "rc.yaml",
                    manifest("apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: nvidia}\nhandler: nv\n"),
                    "kubernetes",
                ).value
            )
        )
    ).named("RuntimeClass")
    assert handler_of(container, classes)[:1] == ("nv",)
    assert handler_of(container, classes, "crun")[:1] == ("crun",)
    assert handler_of(_container(DRA), {}) is None
