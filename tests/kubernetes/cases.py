"""What the K8S rule tests share: manifests written as YAML text, linted as `lint` lints a stream, and the case
table each concern's test module fills (its trigger and its clean twin)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Optional

from nvidia_oci_hook.findings import Finding
from nvidia_oci_hook.kinds.document import parse_document
from nvidia_oci_hook.kinds.kubernetes import run_manifests
from nvidia_oci_hook.lint import LintOptions, active_rules, lint_document
from nvidia_oci_hook.rules.base import Context

# Seed 003 in a manifest: NVIDIA's DRA driver's kubelet plugin with the host's /dev mounted over its own (K8S001).
DRA_PLUGIN = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nvidia-dra-driver
  namespace: nvidia-system
spec:
  selector:
    matchLabels: {app: dra}
  template:
    metadata:
      labels: {app: dra}
    spec:
      containers:
      - name: plugin
        image: nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0
        securityContext: {privileged: true}
        volumeMounts:
        - name: host-dev
          mountPath: /dev
      volumes:
      - name: host-dev
        hostPath: {path: /dev}
"""
# The line of its finding: the mountPath.
DRA_PLUGIN_MOUNT_LINE = DRA_PLUGIN.splitlines().index("          mountPath: /dev") + 1
# Its fix.
DRA_PLUGIN_FIXED = DRA_PLUGIN.replace("mountPath: /dev", "mountPath: /host/dev")


@dataclass(frozen=True)
class Case:
    code: str
    trigger: str  # YAML text of a stream; dedented
    clean: str
    id: str = ""
    kubernetes_version: Optional[str] = None
    # The line of the trigger's finding, where the case pins it.
    line: Optional[int] = None

    @property
    def name(self) -> str:
        return f"{self.code}-{self.id}" if self.id else self.code


def manifest(text: str) -> bytes:
    return textwrap.dedent(text).lstrip("\n").encode()


def lint_manifest(
    text: str, *, select: tuple[str, ...] = (), kubernetes_version: Optional[str] = None, path: str = "pod.yaml"
) -> list[Finding]:
    """The findings of lint on one stream, offline, as `lint --kind kubernetes` makes them."""
    document = parse_document(path, manifest(text), "kubernetes")
    options = LintOptions(select=select, offline=True)
    context = Context(kubernetes_version=kubernetes_version, manifests=run_manifests([document]))
    return lint_document(document, active_rules(options), context)


def check_case(case: Case) -> None:
    fired = [f for f in lint_manifest(case.trigger, kubernetes_version=case.kubernetes_version) if f.code == case.code]
    assert fired, f"{case.name} did not fire on its trigger"
    assert all(f.line is not None for f in fired), f"{case.name}: a finding without a line"
    if case.line is not None:
        assert case.line in [f.line for f in fired], [f.line for f in fired]
    silent = [f for f in lint_manifest(case.clean, kubernetes_version=case.kubernetes_version) if f.code == case.code]
    assert not silent, f"{case.name} fired on its clean twin: {silent[0].message}"
