"""Kubernetes manifests: Pods and the workloads that hold pod templates, RuntimeClasses and DRA objects, as
`kubectl`, `helm template` and a repository of manifests give them (stream.py reads them, objects.py walks them).

A finding is attributed here to the object and container its pointer is in, and dropped where the object (or
its pod template) silences its code with the `nvidia-oci-hook.io/ignore` annotation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem
from nvidia_oci_hook.kinds.document import Document, Kind, register_kind
from nvidia_oci_hook.kinds.kubernetes.objects import (
    CLUSTER_POLICY,
    Manifests,
    OperatorChoice,
    container_at,
    ignored_codes,
    object_at,
    objects,
)
from nvidia_oci_hook.kinds.kubernetes.stream import looks_like_manifests, read_stream

KUBERNETES = "kubernetes"
# The mark of a GPU Operator operand's pointer (gpu_operator.py); kept here so that a stream without a
# ClusterPolicy never imports that module.
DERIVED = "/~gpu-operator/"
# `kubectl get pods -A -o yaml` of a 20,000-pod cluster is about 250 MB.
MANIFEST_MAX_BYTES = 256 * 1024 * 1024

__all__ = ["KUBERNETES", "MANIFEST_MAX_BYTES", "attribute", "looks_like_manifests", "run_manifests"]


def _silenced(code: str, ignored: frozenset[str]) -> bool:
    return any(code.startswith(prefix) for prefix in ignored)


def attribute(stream: Any, code: str, problem: Problem) -> Optional[Problem]:
    """The problem with the object and container it is about named first; None where the object silences it."""
    obj = object_at(stream, problem.pointer)
    if obj is None:
        return problem
    if obj.kind == CLUSTER_POLICY and DERIVED in problem.pointer:
        from nvidia_oci_hook.kinds.kubernetes.gpu_operator import relocated

        problem = relocated(stream, obj.pointer, obj.value, problem)
    ignored = obj.ignored
    template = obj.template
    if template is not None and problem.pointer.startswith(template.pointer + "/"):
        ignored = ignored | ignored_codes(template.metadata)
    if _silenced(code, ignored):
        return None
    container = container_at(obj, problem.pointer)
    subject = obj.label if container is None else f"{obj.label}, {container.label}"
    if problem.message.startswith(subject):
        return problem
    return dataclasses.replace(problem, message=f"{subject}: {problem.message}")


def run_manifests(documents: Sequence[Document], operator: Optional[OperatorChoice] = None) -> Optional[Manifests]:
    """Every Kubernetes object of the documents given in one run, for the rules that judge one object by others
    (a RuntimeClass a pod names may be in another file); None where none is a manifest stream."""
    streams = [document for document in documents if document.kind == KUBERNETES and document.parsed]
    if not streams:
        return None
    return Manifests([obj for document in streams for obj in objects(document.value, document.path, operator)])


register_kind(
    Kind(
        KUBERNETES,
        "Kubernetes manifests",
        ("yaml", "json"),
        order=12,
        reader=read_stream,
        recognise=looks_like_manifests,
        attribute=attribute,
        readers=("kube-apiserver", "kubelet"),
    )
)
