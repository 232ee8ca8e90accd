"""The pod on this node: `lint --node POD.yaml` and `nvidia-oci-hook pod` on fake node roots — the CRI config the
kubelet derives with what the node's device plugins answered, judged for the node's engine, reported at the
manifest's lines, and the verdict per container."""

from __future__ import annotations

import json
import os
import stat
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from nvidia_oci_hook.cli import main
from tests.helpers import FakeHost
from tests.node.fakenodes import container_driver, host_driver, seed_000
from tests.node.test_device_plugins import POD_A, answer, checkpoint, entry, gpu_devices
from tests.node.test_engine_versions import dpkg_status

pytestmark = pytest.mark.root  # the fake nodes hold device nodes (mknod)

TRAINER = """\
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: ml
spec:
  containers:
  - name: main
    image: cuda:12
    resources:
      limits:
        nvidia.com/gpu: 1
"""
LIMIT_LINE = TRAINER.splitlines().index("        nvidia.com/gpu: 1") + 1
PRIVILEGED = TRAINER.replace("    resources:\n", "    securityContext: {privileged: true}\n    resources:\n")
WITH_CLASS = TRAINER.replace("spec:\n  containers:", "spec:\n  runtimeClassName: nvidia\n  containers:")
NO_GPU = TRAINER.replace("    resources:\n      limits:\n        nvidia.com/gpu: 1\n", "")

CRIO_CONF = '[crio.runtime]\ndefault_runtime = "runc"\n[crio.runtime.runtimes.runc]\nruntime_path = "/usr/bin/runc"\n'
CRIO_NVIDIA = CRIO_CONF + '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n'
CRIO_NVIDIA_DEFAULT = CRIO_NVIDIA.replace('default_runtime = "runc"', 'default_runtime = "nvidia"')
CONTAINERD_17 = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\nenable_cdi = true\n'
CONTAINERD_17_CDI_OFF = "version = 2\n"


def crio(host: FakeHost, config: str = CRIO_CONF) -> FakeHost:
    host.text("/var/lib/dpkg/status", dpkg_status(**{"cri-o": "1.37.0-1"}))
    host.text("/etc/crio/crio.conf", config)
    return host


def containerd(release: str, config: str = CONTAINERD_17) -> Callable[[FakeHost], FakeHost]:
    def make(host: FakeHost) -> FakeHost:
        host.text("/var/lib/dpkg/status", dpkg_status(containerd=release))
        host.text("/etc/containerd/config.toml", config)
        return host

    return make


def plugin_answered(host: FakeHost, devices: Any = None, cdi: tuple[str, ...] = ()) -> FakeHost:
    """The plugin's answer to another pod of the node, in the kubelet's checkpoint."""
    raw = answer(gpu_devices() if devices is None else devices, cdi)
    return checkpoint(host, entry(POD_A, raw))


def plugin_socket(host: FakeHost) -> FakeHost:
    """NVIDIA's plugin registered (its socket is there) and no pod allocated yet."""
    path = host.root / "var/lib/kubelet/device-plugins/nvidia-gpu.sock"
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(path, stat.S_IFSOCK | 0o600)
    return host


def seed_000_plugin(host: FakeHost) -> FakeHost:
    """Seed 000 from the plugin's side: the driver is on /, the plugin hands out /run/nvidia/driver/dev paths."""
    return plugin_answered(seed_000(host), gpu_devices("/run/nvidia/driver/dev"))


def judge(host: FakeHost, manifest_text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> Any:
    path = tmp_path / "pod.yaml"
    path.write_text(manifest_text)
    status = main(["pod", "--host-root", str(host.root), "--format", "json", str(path), *extra])
    out, err = capsys.readouterr()
    assert err == "", err
    return status, json.loads(out)


def lint_node(
    host: FakeHost, manifest_text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, list[dict[str, Any]]]:
    path = tmp_path / "pod.yaml"
    path.write_text(manifest_text)
    status = main(["lint", "--node", "--host-root", str(host.root), "--format", "json", str(path), *extra])
    report = json.loads(capsys.readouterr().out)
    (result,) = [r for r in report["files"] if r["path"] == str(path)]
    return status, result["findings"]


@dataclass(frozen=True)
class Verdict:
    id: str
    node: Callable[[FakeHost], FakeHost]
    manifest: str
    verdict: str
    said: str = ""  # a text the reasons hold


VERDICTS = [
    Verdict("seed-000-containerd", lambda h: containerd("1.7.24~ds1-6")(seed_000_plugin(h)), TRAINER, "refused",
            "lstat /run/nvidia/driver/dev/nvidiactl: no such file or directory"),
    Verdict("seed-000-crio", lambda h: crio(seed_000_plugin(h)), TRAINER, "runs-without-gpu",
            "cri-o skips the device without a word"),
    Verdict("healthy-crio", lambda h: crio(plugin_answered(host_driver(h))), TRAINER, "runs-as-asked",
            "/dev/nvidiactl"),
    Verdict("privileged-crio", lambda h: crio(plugin_answered(host_driver(h))), PRIVILEGED, "runs-with-every-gpu",
            "/dev/nvidia0"),
    # Seed 003: the driver in a container, stray nodes on the host's /dev, the plugin's host paths under the root.
    Verdict("seed-003-crio", lambda h: crio(plugin_answered(container_driver(h).device("/dev/nvidia0", "c", 195, 0),
                                                           gpu_devices("/run/nvidia/driver/dev"))),
            PRIVILEGED, "refused", "privileged container was configured with a device container path"),
    Verdict("seed-003-containerd", lambda h: containerd("2.1.4~ds1-1")(plugin_answered(
        container_driver(h).device("/dev/nvidia0", "c", 195, 0), gpu_devices("/run/nvidia/driver/dev"))),
            PRIVILEGED, "runs-with-every-gpu"),
    Verdict("no-plugin", lambda h: crio(host_driver(h)), TRAINER, "runs-without-gpu",
            "no device plugin for nvidia.com/gpu is registered"),
    Verdict("cdi-on-containerd-1.6", lambda h: containerd("1.6.20~ds1-1")(
        plugin_answered(host_driver(h), (), ("nvidia.com/gpu=0",))), TRAINER, "runs-without-gpu",
            "resolves none (containerd 1.6.20 does not resolve CDI devices"),
    Verdict("cdi-off-containerd-1.7", lambda h: containerd("1.7.24~ds1-6", CONTAINERD_17_CDI_OFF)(
        plugin_answered(host_driver(h), (), ("nvidia.com/gpu=0",))), TRAINER, "runs-without-gpu",
            "enable_cdi off"),
    Verdict("cdi-name-undefined-crio", lambda h: crio(plugin_answered(host_driver(h), (), ("nvidia.com/gpu=0",))),
            TRAINER, "refused", "unresolvable CDI devices nvidia.com/gpu=0"),
    Verdict("handler-missing-crio", lambda h: crio(plugin_answered(host_driver(h))), WITH_CLASS, "refused",
            "failed to find runtime handler nvidia from runtime list"),
    Verdict("handler-present-crio", lambda h: crio(plugin_answered(host_driver(h)), CRIO_NVIDIA), WITH_CLASS,
            "runs-as-asked"),
    Verdict("env-only-runc", lambda h: crio(plugin_answered(host_driver(h), devices=())), TRAINER,
            "runs-without-gpu", "only NVIDIA_VISIBLE_DEVICES=GPU-a"),
    Verdict("env-only-nvidia-runtime", lambda h: crio(plugin_answered(host_driver(h), devices=()),
                                                      CRIO_NVIDIA_DEFAULT), TRAINER, "runs-as-asked"),
    Verdict("env-only-nvidia-hook", lambda h: crio(plugin_answered(host_driver(h), devices=())).text(
        "/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json",
        '{"version": "1.0.0", "hook": {"path": "/usr/bin/nvidia-container-runtime-hook", "args": '
        '["nvidia-container-runtime-hook", "prestart"]}, "when": {"always": true}, "stages": ["prestart"]}'),
            TRAINER, "runs-as-asked"),
    Verdict("no-plugin-privileged", lambda h: crio(host_driver(h)), PRIVILEGED, "runs-with-every-gpu"),
    Verdict("no-gpu-asked", lambda h: crio(host_driver(h)), NO_GPU, "no-gpu-asked"),
]  # fmt: skip


@pytest.mark.parametrize("case", VERDICTS, ids=[case.id for case in VERDICTS])
def test_the_verdict_for_the_pod_on_this_node(
    case: Verdict, fake_host: FakeHost, as_root: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = judge(case.node(fake_host), case.manifest, tmp_path, capsys)
    (container,) = report["pods"]
    assert container["verdict"] == case.verdict, container["reasons"]
    assert case.said in " ".join(container["reasons"]), container["reasons"]
    assert status == (1 if case.verdict in ("refused", "runs-without-gpu") else 0)
    assert container["line"] == TRAINER.splitlines().index("  - name: main") + 1 + (
        1 if case.manifest in (PRIVILEGED, WITH_CLASS) and case.manifest is WITH_CLASS else 0
    )


def test_lint_node_reports_the_engines_finding_at_the_resource_line(
    fake_host: FakeHost, as_root: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = containerd("1.7.24~ds1-6")(seed_000_plugin(fake_host))
    status, findings = lint_node(host, TRAINER, tmp_path, capsys)
    assert status == 1
    missing = [f for f in findings if f["code"] == "CRI002"]
    assert {f["line"] for f in missing} == {LIMIT_LINE}, findings
    message = missing[0]["message"]
    assert message.startswith("Pod ml/trainer, container main: host_path /run/nvidia/driver/dev/")
    assert "containerd refuses the container" in message
    assert f"the device plugin for nvidia.com/gpu (its answer to pod {POD_A}" in message
    assert missing[0]["hint"].startswith("use /dev/")
    # The same pod on cri-o: the engine's own outcome.
    crio(fake_host)
    (fake_host.root / "var/lib/dpkg/status").write_text(dpkg_status(**{"cri-o": "1.37.0-1"}))
    (fake_host.root / "etc/containerd/config.toml").unlink()
    status, findings = lint_node(fake_host, TRAINER, tmp_path, capsys)
    assert next(f["message"] for f in findings if f["code"] == "CRI002").count("cri-o skips the device") == 1


def test_without_node_the_manifest_rules_only(
    fake_host: FakeHost, as_root: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_000_plugin(fake_host)
    path = tmp_path / "pod.yaml"
    path.write_text(TRAINER)
    status = main(["lint", "--host-root", str(fake_host.root), "--format", "json", str(path)])
    findings = json.loads(capsys.readouterr().out)["files"][0]["findings"]
    assert status == 0 and not [f for f in findings if f["code"].startswith(("CRI", "K8S1"))]


def test_the_derived_cri_config_is_printed_for_crictl(
    fake_host: FakeHost, as_root: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    crio(seed_000_plugin(fake_host))
    path = tmp_path / "pod.yaml"
    path.write_text(TRAINER)
    status = main(["pod", "--host-root", str(fake_host.root), "--format", "cri", str(path)])
    (printed,) = json.loads(capsys.readouterr().out)
    assert status == 1
    assert printed["object"] == "Pod ml/trainer" and printed["container"] == "main"
    config = printed["config"]
    assert [d["host_path"] for d in config["devices"]] == [
        "/run/nvidia/driver/dev/nvidiactl",
        "/run/nvidia/driver/dev/nvidia0",
    ]
    assert config["envs"] == [{"key": "NVIDIA_VISIBLE_DEVICES", "value": "GPU-a"}]
    # What lint --kind cri says of that file is what lint --node said of the manifest.
    cri_file = tmp_path / "main.json"
    cri_file.write_text(json.dumps(config))
    status = main(["lint", "--kind", "cri", "--engine", "crio", "--host-root", str(fake_host.root), str(cri_file)])
    assert status == 1 and "CRI002" in capsys.readouterr().out


def test_text_report(fake_host: FakeHost, as_root: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crio(seed_000_plugin(fake_host))
    path = tmp_path / "pod.yaml"
    path.write_text(TRAINER)
    assert main(["pod", "--host-root", str(fake_host.root), str(path)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("node: cri-o 1.37.0; CDI on; runtime handlers: crun, runc")
    assert f"Pod ml/trainer, container main ({path}:8): runs WITHOUT its GPU" in out
    device = "    device /run/nvidia/driver/dev/nvidiactl -> /dev/nvidiactl (rw): device /dev/nvidiactl of the device"
    assert device in out
    assert out.rstrip().endswith("1 runs WITHOUT its GPU")


def test_runtime_handler_option(
    fake_host: FakeHost, as_root: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    crio(plugin_answered(host_driver(fake_host)), CRIO_NVIDIA)
    _, findings = lint_node(fake_host, TRAINER, tmp_path, capsys, "--runtime-handler", "kata")
    (refused,) = [f for f in findings if f["code"] == "K8S103"]
    assert "failed to find runtime handler kata from runtime list" in refused["message"]
    assert "Its handlers: crun, nvidia, runc" in refused["message"]
    assert main(["lint", "--runtime-handler", "x", str(tmp_path / "pod.yaml")]) == 2


def test_bad_input_is_one_line(fake_host: FakeHost, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: [\n")
    assert main(["pod", "--host-root", str(fake_host.root), str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert main(["pod", "--host-root", str(fake_host.root), str(tmp_path / "absent.yaml")]) == 2


# The GPU Operator's configuration, as `kubectl get clusterpolicy -o yaml` gives it.
CLUSTER_POLICY = """\
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata:
  name: cluster-policy
  labels: {app.kubernetes.io/version: v25.10.0}
spec:
  cdi: {enabled: true}
  driver: {enabled: false}
"""


@dataclass(frozen=True)
class NodeCase:
    """A K8S rule of the node: its trigger and clean twin are node states for one manifest."""

    code: str
    manifest: str
    trigger: Callable[[FakeHost], FakeHost]
    clean: Callable[[FakeHost], FakeHost]
    extra: tuple[str, ...] = ()
    line: Optional[int] = None


CASES = [
    NodeCase("K8S101", TRAINER, lambda h: crio(host_driver(h)), lambda h: crio(plugin_answered(host_driver(h))),
             line=LIMIT_LINE),
    NodeCase("K8S102", TRAINER, containerd("1.6.20~ds1-1"), containerd("1.7.24~ds1-6"), line=LIMIT_LINE),
    NodeCase("K8S103", WITH_CLASS, lambda h: crio(plugin_answered(host_driver(h))),
             lambda h: crio(plugin_answered(host_driver(h)), CRIO_NVIDIA),
             line=WITH_CLASS.splitlines().index("  runtimeClassName: nvidia") + 1),
    NodeCase("K8S104", TRAINER, lambda h: crio(plugin_answered(host_driver(h), devices=())),
             lambda h: crio(plugin_answered(host_driver(h), devices=()), CRIO_NVIDIA_DEFAULT), line=LIMIT_LINE),
    NodeCase("K8S105", TRAINER, lambda h: crio(plugin_socket(host_driver(h))),
             lambda h: crio(plugin_answered(host_driver(h))), line=LIMIT_LINE),
    NodeCase("K8S106", CLUSTER_POLICY, containerd("1.7.24~ds1-6", CONTAINERD_17_CDI_OFF), containerd("1.7.24~ds1-6"),
             line=CLUSTER_POLICY.splitlines().index("  cdi: {enabled: true}") + 1),
]  # fmt: skip


def _k8s102_node(make: Callable[[FakeHost], FakeHost]) -> Callable[[FakeHost], FakeHost]:
    return lambda h: make(plugin_answered(host_driver(h), (), ("nvidia.com/gpu=0",)))


@pytest.mark.parametrize("case", CASES, ids=[case.code for case in CASES])
def test_node_rule_trigger_and_clean_twin(
    case: NodeCase, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    for make, fires in ((case.trigger, True), (case.clean, False)):
        if case.code == "K8S102":
            make = _k8s102_node(make)
        host = make(FakeHost(tmp_path / ("trigger" if fires else "clean")))
        _, findings = lint_node(host, case.manifest, tmp_path, capsys, *case.extra)
        found = [f for f in findings if f["code"] == case.code]
        assert bool(found) == fires, (case.code, fires, findings)
        if fires and case.line is not None:
            assert case.line in [f["line"] for f in found]


def test_the_manifest_of_a_pod_already_here_uses_its_own_allocation(
    fake_host: FakeHost, as_root: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = "1d2e3f40-aaaa-4bbb-8ccc-111111111111"
    host = crio(host_driver(fake_host))
    checkpoint(
        host,
        entry(POD_A, answer(gpu_devices("/run/nvidia/driver/dev"))),
        entry(own, answer(gpu_devices()), container="main"),
    )
    placed = TRAINER.replace("  namespace: ml\n", f"  namespace: ml\n  uid: {own}\n")
    _, report = judge(host, placed, tmp_path, capsys)
    (container,) = report["pods"]
    assert container["verdict"] == "runs-as-asked", container["reasons"]
    assert f"its allocation to this pod, {own}" in json.dumps(container["origins"])


def test_manifest_text_helper_is_dedented() -> None:
    assert textwrap.dedent(TRAINER) == TRAINER


def test_no_manifest_of_the_wrong_shape_fails_the_pod_on_the_node(
    fake_host: FakeHost, as_root: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every value of the triggers in turn replaced by one of another type: judged on a node with a plugin's
    answer, a handler and a checkpoint, never an internal error."""
    import random

    import yaml

    from nvidia_oci_hook.node.pods import VERDICTS as VERDICT_NAMES
    from tests.kubernetes.test_robustness import ODD_VALUES, _paths, _replaced

    crio(plugin_answered(host_driver(fake_host), cdi=("nvidia.com/gpu=0",)), CRIO_NVIDIA)
    rng = random.Random(32)
    judged = 0
    for text in (PRIVILEGED, WITH_CLASS):
        documents = [yaml.safe_load(text)]
        for path in _paths(documents)[1:]:
            odd = yaml.safe_dump_all(_replaced(documents, path, rng.choice(ODD_VALUES)))
            (tmp_path / "odd.yaml").write_text(odd)
            status = main(["pod", "--host-root", str(fake_host.root), "--format", "json", str(tmp_path / "odd.yaml")])
            out, err = capsys.readouterr()
            assert status in (0, 1) and err == "", (odd, err)
            assert all(pod["verdict"] in VERDICT_NAMES for pod in json.loads(out)["pods"])
            judged += 1
    assert judged > 25


SEED_000_TEXT = (
    'failed to generate container "4f1d" spec: failed to generate spec: lstat /run/nvidia/driver/dev/nvidiactl: '
    "no such file or directory"
)


@pytest.mark.parametrize("handed", [True, False])
def test_why_says_which_plugin_handed_the_missing_path(
    handed: bool, fake_host: FakeHost, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    root = "/run/nvidia/driver/dev" if handed else "/dev"
    containerd("1.7.24~ds1-6")(plugin_answered(seed_000(fake_host), gpu_devices(root)))
    main(["why", "--host-root", str(fake_host.root), "--format", "json", SEED_000_TEXT])
    report = json.loads(capsys.readouterr().out)
    causes = {cause["code"]: cause for cause in report["causes"]}
    assert causes["device-plugins"]["holds"] is handed
    if handed:
        assert causes["device-plugins"]["summary"].startswith(
            "the device plugin for nvidia.com/gpu hands out /run/nvidia/driver/dev/nvidiactl"
        )
        assert causes["device-plugins"]["evidence"] == [f"pod {POD_A} container cuda (nvidia.com/gpu): "
                                                        "/run/nvidia/driver/dev/nvidiactl"]  # fmt: skip


DRA_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: dra
  namespace: ml
  uid: 5b0e9d3c-8f1a-4c2e-9d7b-1a2b3c4d5e6f
spec:
  resourceClaims:
  - name: gpu
    resourceClaimName: single-gpu
  containers:
  - name: main
    image: cuda:12
    resources:
      claims:
      - name: gpu
"""


@pytest.mark.parametrize("defined", [True, False])
def test_a_dra_claims_cdi_names_come_from_the_kubelets_dra_checkpoint(
    defined: bool, fake_host: FakeHost, as_root: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.node.test_dra_state import CHECKPOINT, CLAIM_UID, POD, claim, data_checkpoint, gpu

    host = crio(host_driver(fake_host))
    host.text(CHECKPOINT, data_checkpoint([claim(CLAIM_UID, "single-gpu", [POD], {"gpu.nvidia.com": [gpu(0)]})]))
    name = f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-0"
    if defined:
        host.text("/var/run/cdi/dra.json", json.dumps({
            "cdiVersion": "0.5.0", "kind": "k8s.gpu.nvidia.com/claim",
            "devices": [{"name": f"{CLAIM_UID}-gpu-0",
                         "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}}]}))  # fmt: skip
    _, report = judge(host, DRA_POD, tmp_path, capsys)
    (container,) = report["pods"]
    assert container["cri_config"]["CDI_devices"] == [{"name": name}]
    assert container["origins"]["/CDI_devices/0"]["line"] == DRA_POD.splitlines().index("      - name: gpu") + 1
    assert container["verdict"] == ("runs-as-asked" if defined else "refused"), container["reasons"]
    if not defined:
        assert [f["code"] for f in container["findings"]] == ["REC001"]


@pytest.mark.parametrize(
    ("release", "cdi", "fires"),
    [("v26.7.0", "{}", True), ("v25.3.0", "{enabled: true}", False), ("v26.7.0", "{enabled: false}", False)],
)
def test_k8s106_only_where_the_release_leaves_gpus_to_cdi_alone(
    release: str, cdi: str, fires: bool, tmp_path: Path, as_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Up to 25.3 the device plugin keeps envvar beside cdi-annotations and NVIDIA's runtime stays the default;
    from 25.10 CDI is on unless cdi.enabled says otherwise."""
    manifest = CLUSTER_POLICY.replace("v25.10.0", release).replace("{enabled: true}", cdi)
    host = containerd("1.7.24~ds1-6", CONTAINERD_17_CDI_OFF)(FakeHost(tmp_path / "node"))
    _, findings = lint_node(host, manifest, tmp_path, capsys)
    found = [finding for finding in findings if finding["code"] == "K8S106"]
    assert bool(found) == fires, findings
    if fires:
        assert f"CDI is on for GPU Operator {release[1:5]}" in found[0]["message"]
        assert "cdi-annotations,cdi-cri" in found[0]["message"]
