"""The kubernetes kind: streams, Lists, JSON and directories read; lines found for every pointer; findings named
by object and container, silenced by the object's annotation; and the objects each workload kind holds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.formats.yamltext import parse_yaml
from nvidia_oci_hook.kinds.document import parse_document
from nvidia_oci_hook.kinds.kubernetes import stream
from nvidia_oci_hook.kinds.kubernetes.objects import objects
from nvidia_oci_hook.lint import LintOptions, lint_paths
from tests.kubernetes.cases import DRA_PLUGIN, DRA_PLUGIN_MOUNT_LINE, lint_manifest, manifest


def bad_plugin(annotations: str = "", template_annotations: str = "") -> str:
    """The K8S001 DaemonSet, with annotations on the object and on its pod template."""
    text = DRA_PLUGIN.replace("  namespace: nvidia-system\n", f"  namespace: nvidia-system{annotations}\n")
    return text.replace("      labels: {app: dra}\n", f"      labels: {{app: dra}}{template_annotations}\n")


def _pointers(value: Any, base: str = "") -> list[str]:
    found = [base]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _pointers(item, pointer_join(base, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _pointers(item, f"{base}/{index}")
    return found


def _kubectl_list(pods: int) -> str:
    items = []
    for index in range(pods):
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{index}", "namespace": "default", "labels": {"app": "x"}},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "env": [{"name": "A", "value": str(index)}],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}} if index % 3 == 0 else {},
                            "volumeMounts": [{"name": "v", "mountPath": "/data"}],
                        }
                    ],
                    "volumes": [{"name": "v", "emptyDir": {}}],
                },
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
    return yaml.safe_dump({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}})


def test_every_pointer_gets_the_line_pyyaml_gives() -> None:
    text = (
        "# Source: chart/templates/a.yaml\n"
        + manifest(bad_plugin()).decode()
        + "---\n# Source: chart/templates/empty.yaml\n---\n"
        + _kubectl_list(70)
        + "...\n"
    )
    parsed = stream.read_stream(text.encode())
    assert parsed.ok and not parsed.problems
    assert isinstance(parsed.locator, stream.StreamPositions)
    checked = 0
    for index, (start, end, first_row) in enumerate(parsed.locator.spans):
        reference = parse_yaml(text[start:end].encode())
        if parsed.value[index] is None:
            continue
        for pointer in _pointers(parsed.value[index])[1:]:
            line, _ = reference.locator.locate(pointer)  # type: ignore[union-attr]
            assert parsed.locator.locate(f"/{index}{pointer}")[0] == line + first_row, pointer
            checked += 1
    assert checked > 2000


def test_stream_documents_and_an_empty_one() -> None:
    document = parse_document("-", manifest(bad_plugin()) + b"---\n---\n" + manifest(bad_plugin()))
    assert document.kind == "kubernetes"
    assert [value is None for value in document.value] == [False, True, False]
    assert [obj.pointer for obj in objects(document.value)] == ["/0", "/2"]


def test_a_document_that_does_not_parse_is_a_finding_on_its_line_and_the_others_are_judged() -> None:
    text = bad_plugin() + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n   bad: indentation\n"
    findings = lint_manifest(text)
    by_code = {finding.code: finding for finding in findings}
    assert set(by_code) == {"K8S001", "DOC001"}
    assert by_code["DOC001"].line == text.lstrip("\n").splitlines().index("   bad: indentation") + 1


def test_findings_name_the_object_and_the_container_at_the_fields_line() -> None:
    (finding,) = lint_manifest(bad_plugin())
    assert finding.message.startswith("DaemonSet nvidia-system/nvidia-dra-driver, container plugin: ")
    assert finding.pointer == "/0/spec/template/spec/containers/0/volumeMounts/0/mountPath"
    assert manifest(bad_plugin()).decode().splitlines()[finding.line - 1].strip() == "mountPath: /dev"  # type: ignore[operator]


@pytest.mark.parametrize(
    ("annotations", "template_annotations", "silenced"),
    [
        ("\n  annotations: {nvidia-oci-hook.io/ignore: K8S001}", "", True),
        ("\n  annotations: {nvidia-oci-hook.io/ignore: 'K8S0, DOC'}", "", True),
        ("", "\n      annotations: {nvidia-oci-hook.io/ignore: k8s001}", True),
        ("\n  annotations: {nvidia-oci-hook.io/ignore: K8S002}", "", False),
        ("\n  annotations: {other.io/ignore: K8S001}", "", False),
    ],
)
def test_ignore_annotation(annotations: str, template_annotations: str, silenced: bool) -> None:
    findings = lint_manifest(bad_plugin(annotations, template_annotations))
    assert (not findings) is silenced


def test_json_is_a_stream_of_one_document(tmp_path: Path) -> None:
    value = yaml.safe_load(manifest(bad_plugin()))
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [value]}, indent=2))
    run = lint_paths([str(path)], LintOptions(offline=True))
    (result,) = run.files
    assert result.kind == "kubernetes"
    (finding,) = result.findings
    assert finding.pointer == "/0/items/0/spec/template/spec/containers/0/volumeMounts/0/mountPath"
    assert path.read_text().splitlines()[finding.line - 1].strip() == '"mountPath": "/dev"'  # type: ignore[operator]


@pytest.mark.parametrize(
    ("name", "text", "kind"),
    [
        ("nvidia.yaml", "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices: []\n", "cdi"),
        ("config.json", '{"ociVersion": "1.0.2", "process": {"env": []}}', "oci"),
        ("-", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", "kubernetes"),
        ("-", '{"kind": "Pod", "apiVersion": "v1"}', "kubernetes"),
        ("list.yaml", "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\nkind: List\n", "kubernetes"),
    ],
)
def test_detection(name: str, text: str, kind: str) -> None:
    assert parse_document(name, text.encode()).kind == kind


def test_every_workload_kind_yields_its_pod_template() -> None:
    spec = {"containers": [{"name": "c", "image": "i"}]}
    template = {"metadata": {}, "spec": spec}
    documents = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod"}, "spec": spec},
        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "pt"}, "template": template},
        {
            "apiVersion": "v1",
            "kind": "ReplicationController",
            "metadata": {"name": "rc"},
            "spec": {"template": template},
        },
        *(
            {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": kind.lower()}, "spec": {"template": template}}
            for kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")
        ),
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"}, "spec": {"template": template}},
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "cron"},
            "spec": {"jobTemplate": {"spec": {"template": template}}},
        },
        # Same kind names in other groups, and objects this tool does not judge, are passed over.
        {
            "apiVersion": "example.com/v1",
            "kind": "Deployment",
            "metadata": {"name": "crd"},
            "spec": {"template": template},
        },
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "secret"}},
        # A ConfigMap is an object without a pod template: the scripts a workload mounts from it are read.
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}},
    ]
    found = list(objects(documents))
    assert [obj.name for obj in found] == [
        "pod", "pt", "rc", "deployment", "statefulset", "daemonset", "replicaset", "job", "cron", "cm",
    ]  # fmt: skip
    assert found[-1].template is None
    containers = [container.pointer for obj in found[:-1] for container in obj.template.containers()]  # type: ignore[union-attr]
    assert containers[0] == "/0/spec/containers/0"
    assert containers[-1] == "/8/spec/jobTemplate/spec/template/spec/containers/0"


def test_a_large_list_read_in_parts_equals_one_read(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _kubectl_list(400)
    whole = stream.read_stream(text.encode()).value
    monkeypatch.setattr(stream, "_PARALLEL_BYTES", 1024)
    monkeypatch.setattr("os.cpu_count", lambda: 3)
    parted = stream.read_stream(text.encode()).value
    assert parted == whole and len(parted[0]["items"]) == 400
    # An item outside blockyaml's shape: the parts give up and the whole is read as before.
    odd = text.replace("name: p250\n", "name: p250 # renamed\n", 1)
    assert stream.read_stream(odd.encode()).value[0]["items"][250]["metadata"]["name"] == "p250"


def test_directory_of_manifests_is_read_recursively_with_other_files_passed_over(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "ds.yaml").write_bytes(manifest(bad_plugin()))
    (tmp_path / "values.yaml").write_text("replicas: 1\n")
    (tmp_path / "README.md").write_text("# manifests\n")
    run = lint_paths([str(tmp_path)], LintOptions(offline=True))
    assert [(Path(result.path).name, [f.code for f in result.findings]) for result in run.files] == [
        ("ds.yaml", ["K8S001"])
    ]


def test_cli_stdin_sarif_carries_the_line_and_exit_status() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nvidia_oci_hook", "lint", "--offline", "--format", "sarif", "-"],
        input=manifest(bad_plugin()),
        capture_output=True,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    (run,) = json.loads(result.stdout)["runs"]
    (finding,) = run["results"]
    assert finding["ruleId"] == "K8S001"
    assert finding["locations"][0]["physicalLocation"]["region"]["startLine"] == DRA_PLUGIN_MOUNT_LINE
