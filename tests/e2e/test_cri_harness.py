"""The CRI harness itself, against real containerd daemons: a container runs and its output comes back, CRI
annotations reach the OCI spec only through `container_annotations`, and Debian 12's containerd 1.6 does not
inject CDI devices even with `enable_cdi = true` (FACTS.md section 4), where 1.7 does with the same config and spec.

The runtime is `SpecRecorder`, a BinaryName wrapper that keeps the config.json runc is asked to create, so each
assertion is about the spec containerd really produced."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from tests.containerd.real import CANDIDATES
from tests.e2e.cri import (
    BUSYBOX_IMAGE,
    CONTAINERD,
    CRIDaemon,
    CRIResult,
    SpecRecorder,
    cgroup_dirs,
    cri,
    listening_sockets,
    run_pod_container,
)

pytestmark = [pytest.mark.runtime, pytest.mark.root]

PASSTHROUGH = ["cdi.k8s.io/*"]
CDI_DEVICE = "nvoh.example/gpu=0"
CDI_ENV = "NVOH_CDI_INJECTED=1"
CDI_NODE = "/dev/nvoh-cdi"
CDI_SPEC = {
    "cdiVersion": "0.5.0",
    "kind": "nvoh.example/gpu",
    "devices": [
        {
            "name": "0",
            "containerEdits": {"env": [CDI_ENV], "deviceNodes": [{"path": CDI_NODE, "hostPath": "/dev/null"}]},
        }
    ],
}
# Prints the CDI variable and the node (ls fails, and the exit code says so, when the node is missing).
PROBE = ["sh", "-c", f'echo "env=$NVOH_CDI_INJECTED"; ls {CDI_NODE}']


def release(path: Path, series: str) -> Path:
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing; run `sh scripts/setup test` as root (containerd, tests/containerd/setup.sh)")
    version = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert f" {series}." in version, f"{path} is not containerd {series}: {version}"
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cri-harness")


@pytest.fixture(scope="module")
def recorder(workdir: Path) -> SpecRecorder:
    return SpecRecorder.write(workdir)


@pytest.fixture(scope="module")
def cdi_dir(workdir: Path) -> Path:
    directory = workdir / "cdi"
    directory.mkdir()
    (directory / "nvoh.json").write_text(json.dumps(CDI_SPEC))
    return directory


def start(recorder: SpecRecorder, containerd: Path, **options: Any) -> CRIDaemon:
    if os.geteuid() != 0:
        pytest.fail("the CRI harness needs root; run the suite as root, as CI does")
    return CRIDaemon.start(binary_name=recorder.path, containerd=containerd, **options)


@pytest.fixture(scope="module")
def containerd16(recorder: SpecRecorder, cdi_dir: Path) -> Iterator[CRIDaemon]:
    containerd = release(CONTAINERD, "1.6")
    with start(recorder, containerd, container_annotations=PASSTHROUGH, enable_cdi=True, cdi_spec_dirs=[cdi_dir]) as d:
        yield d


@pytest.fixture(scope="module")
def containerd16_closed(recorder: SpecRecorder) -> Iterator[CRIDaemon]:
    with start(recorder, release(CONTAINERD, "1.6"), container_annotations=[]) as daemon:
        yield daemon


@pytest.fixture(scope="module")
def containerd17(recorder: SpecRecorder, cdi_dir: Path) -> Iterator[CRIDaemon]:
    containerd = release(CANDIDATES[1], "1.7")
    with start(recorder, containerd, container_annotations=PASSTHROUGH, enable_cdi=True, cdi_spec_dirs=[cdi_dir]) as d:
        yield d


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def spec_of(recorder: SpecRecorder, result: CRIResult) -> dict[str, Any]:
    assert result.container_id, result
    spec = recorder.spec(result.container_id)
    assert spec is not None, f"the wrapper never saw `create` for {result.container_id}: {result}"
    return spec


def cdi_edits(spec: dict[str, Any]) -> tuple[bool, bool]:
    env = CDI_ENV in spec["process"].get("env", [])
    node = any(device["path"] == CDI_NODE for device in spec["linux"].get("devices") or [])
    return env, node


def test_container_runs_and_its_output_comes_back(containerd16: CRIDaemon, recorder: SpecRecorder) -> None:
    result = run_pod_container(
        containerd16, command=["sh", "-c", "echo out-$((6 * 7)); echo err >&2; exit 3"], timeout=20
    )
    assert result.ran, result
    assert (result.exit_code, result.reason) == (3, "Error"), result
    assert (result.stdout, result.stderr) == ("out-42\n", "err\n")
    assert sorted(result.output.splitlines()) == ["err", "out-42"]
    assert result.cleanup_errors == ()
    # The container went through the wrapper named as BinaryName, and so did its pod's sandbox.
    assert spec_of(recorder, result)["process"]["args"] == ["sh", "-c", "echo out-$((6 * 7)); echo err >&2; exit 3"]
    assert recorder.spec(result.pod_id or "") is not None
    runtime = containerd16.runtime
    assert not runtime.ListContainers(cri.ListContainersRequest(), timeout=10).containers
    assert not runtime.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=10).items

    ok = run_pod_container(containerd16, command=["true"], privileged=True, timeout=20)
    assert (ok.failed_step, ok.exit_code, ok.reason, ok.output) == (None, 0, "Completed", ""), ok


def test_failures_name_the_step_and_containerds_error(containerd16: CRIDaemon) -> None:
    stale = run_pod_container(
        containerd16, command=["true"], devices=[("/run/nvoh-missing/dev/nvidiactl", "/dev/nvidiactl", "rwm")]
    )
    assert stale.failed_step == "CreateContainer" and stale.error_code == "UNKNOWN", stale
    assert stale.error and stale.error.endswith(
        "failed to generate spec: lstat /run/nvoh-missing/dev/nvidiactl: no such file or directory"
    ), stale.error
    assert stale.pod_id and stale.cleanup_errors == ()

    missing = run_pod_container(containerd16, command=["/no/such/program"])
    assert (missing.failed_step, missing.reason) == ("StartContainer", "StartError"), missing
    assert missing.error and 'exec: "/no/such/program": stat /no/such/program: no such file' in missing.error

    slow = run_pod_container(containerd16, command=["sleep", "60"], timeout=0.3)
    assert slow.failed_step == "wait" and slow.exit_code is None, slow
    assert slow.error == "the container is still CONTAINER_RUNNING after 0.3 s"
    assert not containerd16.runtime.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=10).items


def test_container_annotations_reach_the_spec_only_when_listed(
    containerd16: CRIDaemon, containerd16_closed: CRIDaemon, recorder: SpecRecorder
) -> None:
    annotations = {"cdi.k8s.io/x": CDI_DEVICE, "other.example/y": "1"}
    listed = run_pod_container(containerd16, command=["true"], annotations=annotations)
    unlisted = run_pod_container(containerd16_closed, command=["true"], annotations=annotations)
    assert listed.exit_code == 0 and unlisted.exit_code == 0, (listed, unlisted)
    seen = spec_of(recorder, listed).get("annotations", {})
    assert seen.get("cdi.k8s.io/x") == CDI_DEVICE
    assert "other.example/y" not in seen
    closed = spec_of(recorder, unlisted).get("annotations", {})
    assert "cdi.k8s.io/x" not in closed and "other.example/y" not in closed
    assert closed.get("io.kubernetes.cri.container-name") == "main"  # containerd's own annotations are there


def test_containerd_16_ignores_enable_cdi(
    containerd16: CRIDaemon, containerd17: CRIDaemon, recorder: SpecRecorder
) -> None:
    annotations = {"cdi.k8s.io/x": CDI_DEVICE}
    # The control: the same config, spec and annotation make 1.7 inject the device and its variable.
    injected = run_pod_container(containerd17, command=PROBE, annotations=annotations)
    assert (injected.exit_code, injected.stdout) == (0, f"env=1\n{CDI_NODE}\n"), injected
    assert cdi_edits(spec_of(recorder, injected)) == (True, True)

    ignored = run_pod_container(containerd16, command=PROBE, annotations=annotations)
    assert ignored.ran and ignored.exit_code == 1, ignored
    assert ignored.stdout == "env=\n" and "No such file or directory" in ignored.stderr
    spec = spec_of(recorder, ignored)
    assert spec["annotations"]["cdi.k8s.io/x"] == CDI_DEVICE  # the request reached the spec, nothing acted on it
    assert cdi_edits(spec) == (False, False)
    # 1.7 refuses a device no spec defines; 1.6 does not even look.
    unknown = {"cdi.k8s.io/x": "nvoh.example/gpu=9"}
    refused = run_pod_container(containerd17, command=["true"], annotations=unknown)
    assert refused.failed_step == "CreateContainer", refused
    assert refused.error and refused.error.endswith("unresolvable CDI devices nvoh.example/gpu=9"), refused.error
    assert run_pod_container(containerd16, command=["true"], annotations=unknown).exit_code == 0


def why(capsys: pytest.CaptureFixture[str], daemon: CRIDaemon, text: str) -> tuple[int, dict[str, Any]]:
    """`why` on containerd's own error, with the configuration the daemon runs on named by hand."""
    capsys.readouterr()
    status = main(["why", "--containerd-config", str(daemon.workdir / "config.toml"), "--format", "json", text])
    return status, json.loads(capsys.readouterr().out)


def test_containerd_17s_errors_explained_by_why(containerd17: CRIDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    # A RuntimeClass handler containerd has no runtime for: refused at RunPodSandbox.
    refused = run_pod_container(containerd17, command=["true"], runtime_handler="nvidia")
    assert refused.failed_step == "RunPodSandbox" and refused.error, refused
    assert 'no runtime for "nvidia" is configured' in refused.error, refused.error
    status, report = why(capsys, containerd17, refused.error)
    assert [match["signature"] for match in report["matches"]] == ["containerd-runtime-handler-unknown"], report
    verdict = {cause["code"]: cause["holds"] for cause in report["causes"]}
    # The manifest's side holds too: the pod's RuntimeClass names a handler this containerd lacks.
    assert status == 0 and verdict == {"engines": True, "RuntimeClass": True, "CTD117": False}, report
    handlers = report["causes"][0]["evidence"][0]
    assert handlers.startswith("containerd runtime handlers: ") and "runc (" in handlers, handlers
    # A CDI device no spec in its directory defines: the one reason is REC001's.
    unknown = run_pod_container(containerd17, command=["true"], annotations={"cdi.k8s.io/x": "nvoh.example/gpu=9"})
    assert unknown.failed_step == "CreateContainer" and unknown.error, unknown
    status, report = why(capsys, containerd17, unknown.error)
    assert [match["signature"] for match in report["matches"]] == ["cdi-unresolvable"], report
    holding = [cause["code"] for cause in report["causes"] if cause["holds"]]
    # The release judged is that of the daemon running with the configuration named, whatever other containerd
    # runs on the machine (this module's 1.6, another suite's): 1.6 would add its own cause, CDI off (CTD101).
    assert status == 0 and holding == ["REC001"], report


@pytest.mark.parametrize("client", ["connected", "broken"])
def test_close_removes_a_pod_left_running(recorder: SpecRecorder, client: str) -> None:
    """A test that fails half-way leaves its pod behind: close() must still leave no process, mount or cgroup,
    also when it cannot ask the daemon to remove the pod (then it kills the shims and the pod's cgroups)."""
    daemon = start(recorder, release(CONTAINERD, "1.6"))
    try:
        pod_config = cri.PodSandboxConfig(
            metadata=cri.PodSandboxMetadata(name="left", uid="left-1", namespace="e2e"),
            log_directory=str(daemon.workdir / "logs"),
            linux=cri.LinuxPodSandboxConfig(
                cgroup_parent=daemon.cgroup_parent,
                security_context=cri.LinuxSandboxSecurityContext(
                    namespace_options=cri.NamespaceOption(network=cri.NODE)
                ),
            ),
        )
        runtime = daemon.runtime
        pod = runtime.RunPodSandbox(cri.RunPodSandboxRequest(config=pod_config), timeout=30).pod_sandbox_id
        container_config = cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name="sleeper"),
            image=cri.ImageSpec(image=BUSYBOX_IMAGE),
            command=["sleep", "600"],
            log_path="sleeper.log",
        )
        request = cri.CreateContainerRequest(pod_sandbox_id=pod, config=container_config, sandbox_config=pod_config)
        container = runtime.CreateContainer(request, timeout=30).container_id
        runtime.StartContainer(cri.StartContainerRequest(container_id=container), timeout=30)
        shims = daemon.shims()
        assert shims, "no shim found for the running pod"
        assert daemon.process is not None
        # Daemonized shims are catatonit's, which reaps each as it dies (PID 1 here reaps late).
        assert {parent_of(pid) for pid in shims} == {daemon.process.pid}
        sockets = [path for pid in shims for path in listening_sockets(pid)]
        assert any(path.startswith("/run/containerd/s/") for path in sockets), sockets
        cgroups = cgroup_dirs(daemon.cgroup_parent)
        pids = {int(pid) for top in cgroups for path in top.rglob("cgroup.procs") for pid in path.read_text().split()}
        assert len(pids) >= 2, f"expected the pause and sleep processes in {cgroups}"
        if client == "broken":
            assert daemon.channel is not None
            daemon.channel.close()
    finally:
        daemon.close()
    for pid in [*shims, *pids]:
        assert not Path(f"/proc/{pid}").exists(), f"process {pid} survived close() (or was left a zombie)"
    assert not [path for path in sockets if os.path.exists(path)], "a shim's socket was left behind"
    assert not daemon.workdir.exists()
    assert not [top for top in cgroups if top.exists()]
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        assert str(daemon.workdir) not in mountinfo.read()
