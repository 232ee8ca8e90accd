"""deploy/kubernetes: every manifest accepted by the Kubernetes API's strict schemas of each supported release,
offline (kubernetes-validate's), and the properties that keep the DaemonSet harmless to the node it inspects."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kubernetes.schemas import shipped_versions, validate

REPOSITORY = Path(__file__).resolve().parents[2]
DEPLOY = REPOSITORY / "deploy/kubernetes"

# The Kubernetes minor releases upstream supports on 2026-12-01, from the release pages of kubernetes.io
# (kubernetes.io/releases/1.NN): 1.34 reached its end of life on 2026-10-27; 1.35 is supported until 2027-02-28
# (maintenance mode from 2026-12-28), 1.36 until 2027-06-28, 1.37 (released 2026-08-26) until 2027-10-28; 1.38's
# release cycle began on 2026-08-31 and ends after that date. Review this list with each Kubernetes release.
SUPPORTED = ["1.35", "1.36", "1.37"]


def _manifests() -> dict[str, list[dict[str, Any]]]:
    found = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            found[path.name] = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return found


def _all() -> list[dict[str, Any]]:
    return [doc for docs in _manifests().values() for doc in docs]


def _one(kind: str) -> dict[str, Any]:
    matching = [doc for doc in _all() if doc["kind"] == kind]
    assert len(matching) == 1, f"{len(matching)} {kind} manifests"
    return matching[0]


def _pod() -> dict[str, Any]:
    spec: dict[str, Any] = _one("DaemonSet")["spec"]["template"]["spec"]
    return spec


def _container() -> dict[str, Any]:
    containers = _pod()["containers"]
    assert len(containers) == 1 and not _pod().get("initContainers")
    container: dict[str, Any] = containers[0]
    return container


def _kustomization() -> dict[str, Any]:
    value: dict[str, Any] = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    return value


def test_the_schemas_cover_every_supported_release() -> None:
    shipped = {".".join(version.split(".")[:2]) for version in shipped_versions()}
    assert set(SUPPORTED) <= shipped


@pytest.mark.parametrize("version", SUPPORTED)
def test_every_manifest_is_valid_for_the_release(version: str) -> None:
    documents = _all()
    assert {doc["kind"] for doc in documents} == {"Namespace", "ServiceAccount", "DaemonSet"}
    answers = validate([(doc, version) for doc in documents])
    problems = [
        f"{doc['kind']}/{doc['metadata']['name']}: {answer}" for doc, answer in zip(documents, answers) if answer
    ]
    assert problems == []


def test_the_strict_schemas_do_reject_a_wrong_manifest() -> None:
    # What the test above relies on: a misspelt field and a wrong value are errors, in every supported release.
    misspelt = copy.deepcopy(_one("DaemonSet"))
    misspelt["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    wrong_type = copy.deepcopy(_one("DaemonSet"))
    wrong_type["spec"]["template"]["spec"]["hostPID"] = "no"
    answers = validate([(doc, version) for version in SUPPORTED for doc in (misspelt, wrong_type)])
    assert all(answers), answers
    assert "volumeMount" in str(answers[0])


def test_the_kustomization_lists_every_manifest() -> None:
    assert sorted(_kustomization()["resources"]) == sorted(_manifests())


def test_the_kustomization_sets_the_image_the_daemonset_names() -> None:
    (image,) = _kustomization()["images"]
    assert image["name"] == _container()["image"]
    version = next(
        line.split('"')[1]
        for line in (REPOSITORY / "pyproject.toml").read_text().splitlines()
        if line.startswith("version")
    )
    assert image["newTag"] == version
    # The placeholder fails the pull loudly (its registry does not exist) and the file says where to set it.
    assert image["newName"] == "REGISTRY/nvidia-oci-hook"
    assert "set newName" in (DEPLOY / "kustomization.yaml").read_text()


def test_everything_is_in_the_namespace_of_its_own() -> None:
    namespace = _one("Namespace")["metadata"]["name"]
    for doc in _all():
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == namespace


def test_no_api_access_at_all() -> None:
    kinds = {doc["kind"] for doc in _all()}
    assert not kinds & {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
    account = _one("ServiceAccount")
    assert account["automountServiceAccountToken"] is False
    assert _pod()["serviceAccountName"] == account["metadata"]["name"]
    assert _pod()["automountServiceAccountToken"] is False


def _host_mounts() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    volumes = {volume["name"]: volume for volume in _pod()["volumes"]}
    return {
        mount["mountPath"]: (mount, volumes[mount["name"]])
        for mount in _container()["volumeMounts"]
        if "hostPath" in volumes[mount["name"]]
    }


def test_the_host_is_mounted_read_only_at_host() -> None:
    mount, volume = _host_mounts()["/host"]
    assert volume["hostPath"]["path"] == "/"
    assert mount["readOnly"] is True
    assert mount["recursiveReadOnly"] in ("Enabled", "IfPossible")  # /host/proc, /host/sys too
    assert mount.get("mountPropagation", "None") == "None"


def test_the_textfile_directory_is_the_only_writable_host_mount() -> None:
    writable = {
        path: volume["hostPath"]["path"]
        for path, (mount, volume) in _host_mounts().items()
        if not mount.get("readOnly")
    }
    service = (REPOSITORY / "packaging/systemd/nvidia-oci-hook-metrics.service").read_text()
    packaged = next(
        line.split("=", 2)[2] for line in service.splitlines() if line.startswith("Environment=TEXTFILE_DIR=")
    )
    assert writable == {"/textfile": packaged}  # where the packages' timer writes too
    assert not [volume for volume in _pod()["volumes"] if set(volume) - {"name", "hostPath"}]  # no other volumes


def _script() -> str:
    container = _container()
    assert container["command"] == ["/bin/sh", "-c"]
    (script,) = container["args"]
    assert isinstance(script, str)
    return script


def test_doctor_runs_against_host_and_writes_the_packaged_metrics_file() -> None:
    words = _script().replace("\\\n", " ").split()
    start = words.index("nvidia-oci-hook")
    command = words[start : words.index("--output", start) + 2]
    assert command[1] == "doctor"
    assert " --host-root /host " in " ".join(command) + " "
    assert " --format prometheus " in " ".join(command)
    service = (REPOSITORY / "packaging/systemd/nvidia-oci-hook-metrics.service").read_text()
    assert command[-1] == "/textfile/nvidia-oci-hook.prom"
    assert "${TEXTFILE_DIR}/nvidia-oci-hook.prom" in service
    interval = {env["name"]: env["value"] for env in _container()["env"]}["INTERVAL_SECONDS"]
    assert interval == "300"


def test_the_pod_keeps_every_privilege_it_does_not_need() -> None:
    pod, container = _pod(), _container()
    assert not pod.get("hostPID") and not pod.get("hostNetwork") and not pod.get("hostIPC")
    context = container["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"]}  # nothing added back
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["privileged"] is False
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    resources = container["resources"]
    assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}


def test_it_runs_on_gpu_nodes_only_and_tolerates_their_taint() -> None:
    pod = _pod()
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in pod["tolerations"]
    assert "resources" not in pod or "nvidia.com/gpu" not in str(_container()["resources"])  # it asks for no GPU


def test_the_loop_runs_doctor_on_schedule_reports_errors_and_stops_on_sigterm(tmp_path: Path) -> None:
    # The container's script under a real sh, with a doctor that records its runs and fails as a broken one does.
    fake = tmp_path / "bin/nvidia-oci-hook"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/runs\nexit 2\n')
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "INTERVAL_SECONDS": "0.2"}
    with subprocess.Popen(["/bin/sh", "-c", _script()], env=env, stderr=subprocess.PIPE, text=True) as loop:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(_runs(tmp_path)) < 3:
            time.sleep(0.05)
        loop.send_signal(signal.SIGTERM)
        started = time.monotonic()
        _, err = loop.communicate(timeout=10)
    assert time.monotonic() - started < 1.0  # not after the sleep: the pod stops at once
    assert loop.returncode == 0
    runs = _runs(tmp_path)
    assert len(runs) >= 3
    assert runs[0] == "doctor --host-root /host --format prometheus --output /textfile/nvidia-oci-hook.prom"
    assert "nvidia-oci-hook doctor exited 2" in err


def _runs(tmp_path: Path) -> list[str]:
    path = tmp_path / "runs"
    return path.read_text().splitlines() if path.exists() else []


def test_the_image_has_the_debian_libraries_the_deb_depends_on() -> None:
    containerfile = (DEPLOY / "Containerfile").read_text()
    control = (REPOSITORY / "packaging/deb/debian/control").read_text()
    lines = control[control.index("\nDepends:") + 1 :].split("\n")
    field = [lines[0]]
    for line in lines[1:]:  # the field's continuation lines, up to the next field
        if not line.startswith(" "):
            break
        field.append(line)
    items = [item.strip() for item in " ".join(field)[len("Depends:") :].split(",") if item.strip()]
    # Each Python item, an alternative (`python3-tomli | python3 (>= 3.11)`) as the names it accepts.
    needed = [[alt.split()[0] for alt in item.split("|")] for item in items if "python3" in item and "$" not in item]
    assert ["python3-click"] in needed and ["python3-yaml"] in needed and ["python3-jsonschema"] in needed
    final = containerfile[containerfile.rindex("\nFROM ") :]
    installed = final[final.index("apt-get install") :].split("&&")[0].split()
    assert all(any(name in installed for name in names) for names in needed), (needed, installed)
    assert "pip" not in final.split("COPY --from=build")[0]  # PyPI's libraries never reach the image
    assert os.path.exists(REPOSITORY / "README.md") and "COPY pyproject.toml README.md" in containerfile
