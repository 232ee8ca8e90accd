"""A ClusterPolicy judged through the operands its GPU Operator release renders (kinds/kubernetes/gpu_operator.py):
the existing rules find what the toolkit and the device plugin would be given, and report it at the
ClusterPolicy's field, per release where releases differ."""

from __future__ import annotations

import io
import json
from typing import Any
from unittest import mock

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.findings import Finding, Severity
from nvidia_oci_hook.kinds.kubernetes.gpu_operator import NEWEST, RELEASES, release_named
from tests.kubernetes.cases import DRA_PLUGIN, lint_manifest, manifest

POLICY = """
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata:
  name: cluster-policy
  labels: {app.kubernetes.io/version: RELEASE}
spec:
  operator: {defaultRuntime: containerd}
  cdi:
    enabled: CDI
  toolkit:
    enabled: true
    env:
    - name: NAME
      value: VALUE
  devicePlugin:
    enabled: true
"""
TMPL = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl"


def policy(release: str, name: str = "CONTAINERD_SOCKET", value: str = "/run/containerd/containerd.sock",
           cdi: str = "true", plugin_env: str = "") -> str:  # fmt: skip
    text = POLICY.replace("RELEASE", release).replace("CDI", cdi).replace("NAME", name).replace("VALUE", value)
    assert text.endswith("  devicePlugin:\n    enabled: true\n")
    return text + ("    env:\n" + plugin_env if plugin_env else "")


def line_of(text: str, fragment: str) -> int:
    return manifest(text).decode().splitlines().index(fragment) + 1


def findings(text: str, code: str) -> list[Finding]:
    return [finding for finding in lint_manifest(text) if finding.code == code]


@pytest.mark.parametrize("release", ["v24.9.2", "v25.3.0", "v26.7.0"])
def test_a_k3s_template_as_containerd_config_is_caught_at_the_toolkit_env(release: str) -> None:
    text = policy(release, "CONTAINERD_CONFIG", TMPL)
    (finding,) = findings(text, "K8S020")
    assert finding.severity == Severity.ERROR
    assert finding.line == line_of(text, f"      value: {TMPL}")
    assert finding.pointer == "/0/spec/toolkit/env/0/value"
    assert f"as GPU Operator {release_named(release)} renders it" in finding.message
    assert "for containerd nodes" in finding.message
    assert not findings(policy(release, "CONTAINERD_SOCKET", "/run/k3s/containerd/containerd.sock"), "K8S020")


@pytest.mark.parametrize(
    ("release", "caught"),
    # the toolkit of 25.3 and earlier (1.17) reads no RUNTIME_CONFIG_SOURCE
    [("v24.9.0", False), ("v25.3.0", False), ("v25.10.0", True), ("v26.7.0", True)],
)
def test_a_template_as_config_source_is_caught_where_the_release_reads_sources(release: str, caught: bool) -> None:
    text = policy(release, "RUNTIME_CONFIG_SOURCE", f"file={TMPL}")
    assert bool(findings(text, "K8S020")) == caught
    assert not findings(policy(release, "RUNTIME_CONFIG_SOURCE", "file=/etc/containerd/config.toml"), "K8S020")


def test_the_nri_plugin_leaves_containerd_s_config_alone() -> None:
    nri = "    enabled: true\n    nriPluginEnabled: true\n  toolkit"
    text = policy("v26.7.0", "CONTAINERD_CONFIG", TMPL).replace("    enabled: true\n  toolkit", nri, 1)
    assert "nriPluginEnabled: true" in text
    assert not findings(text, "K8S020") and not findings(text, "K8S019")


STRATEGY = "    - {name: DEVICE_LIST_STRATEGY, value: envvar}\n"


@pytest.mark.parametrize(
    ("release", "cdi", "caught"),
    [
        # 25.10 and later apply devicePlugin.env after the CDI env: the user's envvar wins over cdi-annotations,cdi-cri
        ("v26.7.0", "true", True),
        ("v25.10.0", "true", True),
        # up to 25.3 the CDI env comes last: the operator's envvar,cdi-annotations wins, nothing breaks
        ("v25.3.0", "true", False),
        ("v24.9.0", "true", False),
        # without CDI envvar is what the operator sets anyway
        ("v26.7.0", "false", False),
    ],
)
def test_a_hand_set_strategy_counts_only_where_the_release_lets_it_win(release: str, cdi: str, caught: bool) -> None:
    text = policy(release, cdi=cdi, plugin_env=STRATEGY)
    found = findings(text, "K8S021")
    assert bool(found) == caught, [finding.message for finding in found]
    if caught:
        (finding,) = found
        assert finding.pointer == "/0/spec/devicePlugin/env/0/value"
        assert finding.line == line_of(text, STRATEGY.rstrip("\n"))
        assert (
            "DaemonSet gpu-operator/nvidia-device-plugin-daemonset, container nvidia-device-plugin" in finding.message
        )


def test_the_operator_s_device_plugin_beside_the_dra_driver() -> None:
    text = policy("v26.7.0") + "---\n" + DRA_PLUGIN.replace("      - name: plugin\n", "      - name: gpus\n", 1)
    (finding,) = findings(text, "K8S018")
    assert finding.pointer == "/0/spec/devicePlugin"
    assert finding.line == line_of(text, "  devicePlugin:")
    disabled = text.replace("  devicePlugin:\n    enabled: true", "  devicePlugin:\n    enabled: false", 1)
    assert not findings(disabled, "K8S018")


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_a_stock_cluster_policy_gives_no_error(release: str) -> None:
    labels = f"{{helm.sh/chart: gpu-operator-v{release}.0}}"
    text = f"apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: p\n  labels: {labels}\nspec: {{}}\n"
    found = lint_manifest(text)
    assert [finding for finding in found if finding.severity == Severity.ERROR] == []
    # The installer reads containerd's config through `config dump` from toolkit 1.18, the toolkit of 25.10.
    expected = ["K8S019"] if tuple(map(int, release.split("."))) >= (25, 10) else []
    assert [finding.code for finding in found] == expected


def test_the_release_is_the_operator_image_s_then_the_labels_then_the_newest() -> None:
    operator = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: gpu-operator, namespace: gpu}\nspec:\n"
        "  selector: {matchLabels: {app: op}}\n  template:\n    metadata: {labels: {app: op}}\n    spec:\n"
        "      containers: [{name: gpu-operator, image: 'nvcr.io/nvidia/gpu-operator:v25.3.4'}]\n"
    )
    text = policy("v26.7.0", "CONTAINERD_CONFIG", TMPL)
    (message,) = [finding.message for finding in findings(operator + "---\n" + text, "K8S020")]
    assert "GPU Operator 25.3 renders it (the operator's image nvcr.io/nvidia/gpu-operator:v25.3.4)" in message
    assert "DaemonSet gpu/nvidia-container-toolkit-daemonset" in message
    (message,) = [finding.message for finding in findings(text, "K8S020")]
    assert "GPU Operator 26.7 renders it (its label app.kubernetes.io/version: v26.7.0)" in message
    unlabelled = text.replace("  labels: {app.kubernetes.io/version: v26.7.0}\n", "", 1)
    (message,) = [finding.message for finding in findings(unlabelled, "K8S020")]
    assert f"GPU Operator {NEWEST} renders it (the newest: the input names no release)" in message


def test_a_disabled_toolkit_is_not_rendered() -> None:
    text = policy("v26.7.0", "CONTAINERD_CONFIG", TMPL).replace(
        "    enabled: true\n    env:", "    enabled: false\n    env:", 1
    )
    assert not findings(text, "K8S020") and not findings(text, "K8S019")


@pytest.mark.parametrize(
    ("text", "release"),
    [("v24.9.2", "24.9"), ("25.10", "25.10"), ("nvcr.io/nvidia/gpu-operator:v26.3.1", "26.3"),
     ("gpu-operator-v24.6.0", "24.6"), ("v23.9.0", None), ("devel-ubi8", None)],
)  # fmt: skip
def test_release_names(text: str, release: str) -> None:
    assert release_named(text) == release


def _lint_cli(capsys: pytest.CaptureFixture[str], text: str, *arguments: str) -> tuple[int, list[dict[str, Any]]]:
    capsys.readouterr()
    with mock.patch("sys.stdin", io.TextIOWrapper(io.BytesIO(manifest(text)))):
        status = main(["lint", "--offline", "--format", "json", *arguments, "-"])
    output = json.loads(capsys.readouterr().out)
    return status, [finding for file in output["files"] for finding in file["findings"]]


def test_the_release_and_the_engine_can_be_named(capsys: pytest.CaptureFixture[str]) -> None:
    text = policy("v26.7.0", cdi="true", plugin_env=STRATEGY)
    status, found = _lint_cli(capsys, text)
    assert status == 0 and [finding["code"] for finding in found] == ["K8S019", "K8S021"]
    # 25.3 lets its own CDI strategy win over the hand-set one
    status, found = _lint_cli(capsys, text, "--gpu-operator-version", "v25.3.4")
    assert (status, found) == (0, [])
    template = policy("v26.7.0", "CONTAINERD_CONFIG", TMPL)
    _, found = _lint_cli(capsys, template)
    assert [finding["code"] for finding in found] == ["K8S019", "K8S020"]
    assert all("for containerd nodes" in finding["message"] for finding in found)
    # cri-o nodes: the toolkit edits cri-o's configuration, whatever CONTAINERD_CONFIG says
    assert _lint_cli(capsys, template, "--engine", "crio") == (0, [])


def test_a_release_not_modelled_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with mock.patch("sys.stdin", io.TextIOWrapper(io.BytesIO(manifest(policy("v26.7.0"))))):
        status = main(["lint", "--offline", "--gpu-operator-version", "23.9", "-"])
    error = capsys.readouterr().err
    assert status == 2 and "'23.9' is not a GPU Operator release this tool models (24.3, 24.6" in error
