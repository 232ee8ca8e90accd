"""The real cri-o 1.37 (../shared/peers/bin) through CRI: seed 003's privileged device-path collision with cri-o's
own refusal, explained by `lint --kind cri` and `doctor`, repaired by `doctor --fix`; `configure crio`'s drop-in
read by the daemon, and the `nvidia` handler's wrapper reconciling a GPU request cri-o does not act on; the guard
in cri-o's hooks directory; the precreate file that stops cri-o, and `lint --node`'s HKD204 for it; CDI devices
by annotation and by `cdi_devices`, resolved and unresolvable for each reason `cdi resolve` gives; the specs cri-o
writes, against those kept in tests/runtime/crio-specs.

Two daemons serve the module: `crio`, with a handler that records each spec cri-o wrote (SpecRecorder, then runc
without the capabilities this sandbox's bounding set lacks, so that privileged containers run) and the CDI spec
directories; `node`, reading a fake node root that `configure --host-root` wrote to, with the project's launchers
and the guard where the packages put them.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.engine import cdi_reasons
from nvidia_oci_hook.node.configure import CRIO_DROP_IN, PRECREATE_HOOKS, SHARED_HOOKS
from nvidia_oci_hook.node.why.deciders import CDI_REASON_CODES
from tests.e2e.cri import BUSYBOX_IMAGE, CRIResult, SpecRecorder, cgroup_dirs, cri, run_pod_container
from tests.e2e.crio import CrioDaemon, CrioUnavailable, bounded_runc, skip_reason
from tests.e2e.gpu_request import PROBE, SPEC
from tests.helpers import FakeHost
from tests.runtime.precheck_corpus import CRIO_SPECS, go_indented
from tests.runtime.support import launchers, settled, write_config

pytestmark = [pytest.mark.runtime, pytest.mark.root]

REPOSITORY = Path(__file__).resolve().parents[2]
COLLISION = "privileged container was configured with a device container path that already exists on the host"
GPU_REQUEST = "example.com/gpu=0"  # gpu_request.SPEC's device: /dev/nvidia0 and /dev/nvidiactl, fully specified
# A stray node under the host's real /dev: cri-o stats a privileged container's device paths there and nowhere
# else. Its name is this run's own, so that nothing else on the machine can own it.
STRAY = f"/dev/nvidia-e2e-{os.getpid()}"


@pytest.fixture(scope="module", autouse=True)
def _needs_crio() -> None:
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    status = main(list(args))
    return status, capsys.readouterr().out


def cdi_spec(kind: str, version: str = "0.5.0", env: str = "GPU_FROM_CDI=1") -> str:
    return f'cdiVersion: "{version}"\nkind: {kind}\ndevices:\n- name: "0"\n  containerEdits:\n    env: [{env}]\n'


# What each unresolvable name stands for, under the second of cri-o's two CDI directories (as /var/run/cdi is
# on a node): reason -> (the name, {relative path: text}).
UNRESOLVABLE = {
    cdi_reasons.NOT_DEFINED: ("example.com/gpu=9", {}),
    cdi_reasons.CONFLICT: (
        "conflict.example.com/gpu=0",
        {
            "conflict-a.yaml": cdi_spec("conflict.example.com/gpu"),
            "conflict-b.yaml": cdi_spec("conflict.example.com/gpu"),
        },
    ),
    cdi_reasons.NOT_LOADED: (
        "broken.example.com/gpu=0",
        {"broken.yaml": cdi_spec("broken.example.com/gpu").replace("env:", "evn:")},
    ),
    cdi_reasons.NOT_SCANNED: (
        "unscanned.example.com/gpu=0",
        {"sub/unscanned.yaml": cdi_spec("unscanned.example.com/gpu")},
    ),
}
# A cdiVersion newer than any CDI release: cri-o 1.37's library (1.1.0) is the newest, so no newer library would
# load it, and the spec is refused as invalid (spec-not-loaded), not as too new for this library.
NEWER = ("newer.example.com/gpu=0", {"newer.yaml": cdi_spec("newer.example.com/gpu", "1.2.0")})


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("crio")


@pytest.fixture(scope="module")
def recorder(workdir: Path) -> SpecRecorder:
    return SpecRecorder.write(workdir, runc=str(bounded_runc(workdir)))


@pytest.fixture(scope="module")
def cdi_dirs(workdir: Path) -> tuple[Path, Path]:
    etc, run = workdir / "cdi-etc", workdir / "cdi-run"
    etc.mkdir()
    run.mkdir()
    (run / "gpu.json").write_text(json.dumps(SPEC))
    for _, files in [*UNRESOLVABLE.values(), NEWER]:
        for relative, text in files.items():
            (run / relative).parent.mkdir(parents=True, exist_ok=True)
            (run / relative).write_text(text)
    return etc, run


@pytest.fixture(scope="module")
def crio(recorder: SpecRecorder, cdi_dirs: tuple[Path, Path]) -> Iterator[CrioDaemon]:
    with CrioDaemon.start(runtimes={"runc": recorder.path}, cdi_spec_dirs=cdi_dirs) as daemon:
        yield daemon


def spec_of(recorder: SpecRecorder, result: CRIResult) -> dict[str, Any]:
    assert result.container_id, result
    spec = recorder.spec(result.container_id)
    assert spec is not None, f"the runtime never saw `create` for {result.container_id}: {result}"
    return spec


def refusal(error: str) -> tuple[str, str]:
    """The guard's one line in a CRI error: (the container's id, the reason after it). runc quotes the hook's
    stderr in a log line of its own (`msg="... stderr: LINE\\n"`), which conmon hands to cri-o as it is."""
    ours = [line for line in error.splitlines() if "nvidia-oci-hook: refusing container " in line]
    assert len(ours) == 1, error
    assert ours[0].endswith('\\n"'), ours[0]
    quoted = ours[0].split("nvidia-oci-hook: refusing container ", 1)[1][: -len('\\n"')]
    container, reason = quoted.replace('\\"', '"').split(": ", 1)
    return container, reason


def device_paths(spec: dict[str, Any]) -> list[str]:
    return [device["path"] for device in spec["linux"].get("devices") or []]


# --- seed 003 ---


def test_seed_003_privileged_collision_refused_explained_repaired_then_accepted(
    crio: CrioDaemon, recorder: SpecRecorder, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The DRA driver's NVML run left an NVIDIA node in the host's /dev while the driver lives under its own root;
    the device plugin hands a privileged pod host_path=<driver root>/dev/X, container_path=/dev/X."""
    assert not os.path.exists(STRAY), f"{STRAY} exists before the test: a run of it was killed half-way"
    name = STRAY[len("/dev/") :]
    driver = FakeHost(workdir / "driver")
    driver.executable("/usr/bin/nvidia-smi").device("/dev/nvidiactl", "c", 195, 255).device(STRAY, "c", 195, 0)
    device = (f"{driver.root}/dev/{name}", STRAY, "rw")
    # The node's contents seen from inside: its numbers, then what opening it gives (no driver behind it).
    probe = ["sh", "-c", f"stat -c %t:%T {STRAY}; cat {STRAY} 2>&1; true"]
    try:
        FakeHost(Path("/")).device(STRAY, "c", 195, 0)
        refused = run_pod_container(crio, command=probe, privileged=True, devices=[device])
        assert (refused.failed_step, refused.error) == ("CreateContainer", COLLISION), refused
        assert refused.container_id is None  # refused while cri-o generates the spec: no runtime, no hook ran

        # The error as cri-o said it, to `why`: the stray node is the cause that holds.
        status, out = cli(capsys, "why", "--driver-root", str(driver.root), "--format", "json", refused.error)
        report = json.loads(out)
        assert status == 0 and report["matches"] == [{"signature": "crio-device-path-exists", "text": COLLISION}]
        assert (report["causes"][0]["code"], report["causes"][0]["holds"]) == ("stray-device-nodes", True), report
        assert report["causes"][0]["evidence"] == [f"{STRAY} (c 195:0): the same device as {driver.root}{STRAY}"]

        # The pod's CRI container config, as crictl would take it: lint names the collision.
        config = workdir / "seed-003-container.json"
        config.write_text(json.dumps(MessageToDict(refused.container_config, preserving_proto_field_name=True)))
        status, out = cli(capsys, "lint", "--kind", "cri", "--engine", "crio", "--format", "json", str(config))
        (found,) = json.loads(out)["files"][0]["findings"]
        assert status == 1 and (found["code"], found["pointer"]) == ("CRI001", "/devices/0/container_path"), out
        assert found["message"] == (
            f"cri-o refuses the container: {COLLISION} ({STRAY} exists on the host as c 195:0, while host_path is "
            f"{device[0]})"
        )

        doctor = ["doctor", "--driver-root", str(driver.root), "--check", "stray-device-nodes", "--format", "json"]
        status, out = cli(capsys, *doctor)
        (check,) = json.loads(out)["checks"]
        assert status == 1 and check["status"] == "error", check
        assert check["summary"] == (
            f"1 NVIDIA node in the host's /dev while the driver's are under {driver.root}/dev: cri-o refuses "
            f"privileged GPU containers ('{COLLISION}')"
        )
        assert check["evidence"] == [f"{STRAY} (c 195:0): the same device as {driver.root}{STRAY}"]

        status, out = cli(capsys, *doctor, "--fix")
        report = json.loads(out)
        assert report["repairs"] == [f"fixed: remove {STRAY}"], report
        assert status == 0 and report["checks"][0]["status"] == "ok", report
        assert not os.path.exists(STRAY)
    finally:
        Path(STRAY).unlink(missing_ok=True)

    accepted = run_pod_container(crio, command=probe, privileged=True, devices=[device])
    assert (accepted.failed_step, accepted.exit_code) == (None, 0), accepted
    assert accepted.stdout.splitlines() == ["c3:0", f"cat: can't open '{STRAY}': No such device or address"]
    spec = spec_of(recorder, accepted)
    (entry,) = [entry for entry in spec["linux"]["devices"] if entry["path"] == STRAY]
    assert (entry["type"], entry["major"], entry["minor"]) == ("c", 195, 0)
    assert {"allow": True, "access": "rwm"} in spec["linux"]["resources"]["devices"]  # privileged: all devices


# --- configure crio, the nvidia handler, the guard ---


@pytest.fixture(scope="module")
def tool_config(workdir: Path, recorder: SpecRecorder) -> Path:
    """The tool's configuration on the fake node: the wrapper runs runc through the recorder and resolves CDI
    names from a directory cri-o does not read."""
    (workdir / "wrapper-cdi").mkdir()
    (workdir / "wrapper-cdi/gpu.json").write_text(json.dumps(SPEC))
    return settled(
        write_config(
            workdir / "config.yaml",
            runtime={"low_level": [str(recorder.path)]},
            cdi={"spec_dirs": [str(workdir / "wrapper-cdi")]},
            log={"file": str(workdir / "wrapper.log"), "syslog": False},
        )
    )


def node_root(directory: Path, tool_config: Path, hooks_file: str) -> Path:
    """A node with the project's launchers in /usr/local/bin and one of its hooks.d files in cri-o's default
    hooks directory (where the packages put the guard), naming the installed hook and the tool's configuration."""
    launchers(directory / "usr/local/bin", tool_config)
    registration = json.loads((REPOSITORY / "hooks" / hooks_file).read_text())
    registration["hook"]["path"] = "/usr/local/bin/nvidia-oci-hook"
    registration["hook"]["args"][1:1] = ["--config", str(tool_config)]
    FakeHost(directory).text(f"{SHARED_HOOKS}/{hooks_file}", json.dumps(registration, indent=2))
    return directory


@pytest.fixture(scope="module")
def node(workdir: Path, tool_config: Path, recorder: SpecRecorder) -> Iterator[CrioDaemon]:
    """cri-o on a node where `configure --runtime crio` ran before it started; what configure printed is kept
    as configure.out in the daemon's directory."""
    root = node_root(workdir / "node", tool_config, "nvidia-oci-hook-guard.json")
    daemon = CrioDaemon.prepare(runtimes={"runc": recorder.path}, hooks_dirs=None, node_root=root)
    try:
        printed = io.StringIO()
        with redirect_stdout(printed):
            status = main(["configure", "--runtime", "crio", "--host-root", str(root)])
        assert status == 0, printed.getvalue()
        (daemon.workdir / "configure.out").write_text(printed.getvalue())
        daemon.run()
        yield daemon
    finally:
        daemon.close()


def wrapper_log(workdir: Path) -> list[dict[str, Any]]:
    path = workdir / "wrapper.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_relative_container_path_is_looked_up_in_crios_working_directory(
    crio: CrioDaemon, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cri-o stats a privileged container's relative container path as it is: in its own working directory."""
    name = f"nvidia-e2e-relative-{os.getpid()}"
    device = ("/dev/null", name, "rw")
    assert run_pod_container(crio, command=["true"], privileged=True, devices=[device]).ran
    placed = crio.workdir / name
    placed.write_text("")
    try:
        refused = run_pod_container(crio, command=["true"], privileged=True, devices=[device])
        assert (refused.failed_step, refused.error) == ("CreateContainer", COLLISION), refused
        config = workdir / "relative-container.json"
        config.write_text(json.dumps(MessageToDict(refused.container_config, preserving_proto_field_name=True)))
        status, out = cli(capsys, "lint", "--kind", "cri", "--engine", "crio", "--format", "json", str(config))
        (found,) = json.loads(out)["files"][0]["findings"]
        assert status == 1 and found["code"] == "CRI001", out
        assert f"the relative {name} is {placed} in the working directory of the cri-o running" in found["message"]
    finally:
        placed.unlink(missing_ok=True)


def test_configure_writes_the_drop_in_the_daemon_reads(node: CrioDaemon, crio: CrioDaemon) -> None:
    assert node.node_root is not None
    assert (node.workdir / "configure.out").read_text().splitlines() == [
        f"crio: did write {CRIO_DROP_IN}",
        "crio: restart it to take effect; the runtime handler is 'nvidia'",
        f"crio: the node read under {node.node_root}; every path above is the node's own",
    ]
    drop_in = node.node_root / CRIO_DROP_IN.lstrip("/")
    text = drop_in.read_text()
    assert drop_in.parent == node.config_dir
    assert f'hooks_dir = ["{SHARED_HOOKS}", "/etc/containers/oci/hooks.d"]\n' in text, text
    assert '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/local/bin/nvidia-oci-runtime"\n' in text, text
    assert f"Updating config from drop-in file: {drop_in}" in node.log()
    handlers = [h.name for h in node.runtime.Status(cri.StatusRequest(), timeout=10).runtime_handlers]
    assert "nvidia" in handlers, handlers
    # The same pod where configure did not run: cri-o has no such handler.
    unknown = run_pod_container(crio, command=["true"], runtime_handler="nvidia")
    assert unknown.failed_step == "RunPodSandbox", unknown
    assert unknown.error is not None and "failed to find runtime handler nvidia" in unknown.error, unknown.error


def test_the_nvidia_handler_reconciles_what_the_guard_refuses(
    node: CrioDaemon, recorder: SpecRecorder, workdir: Path, tool_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A GPU requested by a CDI name in NVIDIA_VISIBLE_DEVICES, which cri-o does not read: through runc the guard
    refuses it; through the nvidia handler the wrapper applies it, and runc gets the spec reconcile plans."""
    request = {"NVIDIA_VISIBLE_DEVICES": GPU_REQUEST}
    refused = run_pod_container(node, command=["sh", "-c", PROBE], envs=request)
    assert refused.failed_step == "CreateContainer" and refused.error is not None, refused
    assert "error running hook #0: error running hook: exit status 1" in refused.error, refused.error
    refused_id, reason = refusal(refused.error)
    assert reason.startswith(
        f"[REC006] CDI device {GPU_REQUEST} (NVIDIA_VISIBLE_DEVICES) is requested but not applied to the spec"
    ), reason
    as_written = recorder.spec(refused_id)  # cri-o's spec, recorded before runc ran the hook
    assert as_written is not None, reason

    ran = run_pod_container(node, command=["sh", "-c", PROBE], envs=request, runtime_handler="nvidia")
    assert (ran.failed_step, ran.exit_code) == (None, 0), ran
    lines = ran.stdout.splitlines()
    assert lines[:2] == ["env=1", "c3:0"] and "No such device or address" in lines[2], ran.stdout
    given = spec_of(recorder, ran)
    (logged,) = [entry for entry in wrapper_log(workdir) if entry.get("container") == ran.container_id]
    assert logged["mode"] == "runtime" and {edit["code"] for edit in logged["edits"]} == {"REC006"}, logged
    assert len(logged["edits"]) == 5, logged  # the variable, two nodes and their two allow rules

    # What the wrapper did is what `reconcile` plans for the spec cri-o wrote.
    path = workdir / "as-written.json"
    path.write_text(json.dumps(as_written))
    status, out = cli(capsys, "--config", str(tool_config), "reconcile", str(path))
    planned = json.loads(out)
    assert status == 0
    assert device_paths(as_written) == []
    assert device_paths(given) == device_paths(planned) == ["/dev/nvidiactl", "/dev/nvidia0"]
    assert given["linux"]["resources"]["devices"] == planned["linux"]["resources"]["devices"]
    assert [e for e in given["process"]["env"] if e.startswith("GPU_")] == ["GPU_FROM_CDI=1"]
    assert planned["process"]["env"][-1] == "GPU_FROM_CDI=1"


def test_the_guard_in_crios_hooks_dir(node: CrioDaemon, workdir: Path) -> None:
    plain = run_pod_container(node, command=["echo", "started"])
    assert (plain.failed_step, plain.stdout) == (None, "started\n"), plain
    # A device plugin's GPU without its control node.
    gpu = FakeHost(workdir / "plugin").device("/dev/nvidia0", "c", 195, 0)
    broken = run_pod_container(node, command=["true"], devices=[(f"{gpu.root}/dev/nvidia0", "/dev/nvidia0", "rw")])
    assert broken.failed_step == "CreateContainer" and broken.error is not None, broken
    broken_id, reason = refusal(broken.error)
    assert reason == (
        "[GPU001] /dev/nvidia0 is listed but /dev/nvidiactl is not: CUDA and NVML cannot use the GPU at "
        '/linux/devices/0; fix: add {"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255} to '
        "linux.devices"
    ), reason
    (logged,) = [entry for entry in wrapper_log(workdir) if entry.get("container") == broken_id]
    assert logged["mode"] == "prestart" and logged["refused"], logged
    assert logged["summary"] == f"nvidia-oci-hook: refusing container {broken_id}: {reason}"


def test_precreate_in_crios_hooks_dir_stops_it_and_lint_node_says_hkd204(
    workdir: Path, tool_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = node_root(workdir / "precreate-node", tool_config, "nvidia-oci-hook-precreate.json")
    with pytest.raises(CrioUnavailable) as stopped:
        CrioDaemon.start(hooks_dirs=None, node_root=root)
    assert stopped.value.returncode == 1, stopped.value
    assert 'unknown stage \\"precreate\\"' in stopped.value.log, stopped.value.log[-2000:]
    hooks_file = f"{SHARED_HOOKS}/nvidia-oci-hook-precreate.json"
    status, out = cli(capsys, "why", "--host-root", str(root), "--format", "json", stopped.value.log)
    report = json.loads(out)
    assert [match["signature"] for match in report["matches"]] == ["crio-precreate-stage"], report
    assert status == 0 and (report["causes"][0]["code"], report["causes"][0]["holds"]) == ("HKD204", True), report
    assert report["causes"][0]["summary"].startswith(hooks_file), report
    status, out = cli(capsys, "lint", "--node", "--host-root", str(root), "--format", "json", "--select", "HKD2")
    findings = [(f["code"], entry["path"]) for entry in json.loads(out)["files"] for f in entry["findings"]]
    assert status == 1 and findings == [("HKD204", hooks_file)], out

    # Where the hooks README puts it, a directory only podman reads: cri-o starts, and lint is content.
    moved = root / PRECREATE_HOOKS.lstrip("/")
    moved.mkdir(parents=True)
    shutil.move(str(root / hooks_file.lstrip("/")), str(moved))
    with CrioDaemon.start(hooks_dirs=None, node_root=root) as daemon:
        assert daemon.runtime.Version(cri.VersionRequest(), timeout=10).runtime_name == "cri-o"
    status, out = cli(capsys, "lint", "--node", "--host-root", str(root), "--format", "json", "--select", "HKD2")
    assert status == 0 and not [f for entry in json.loads(out)["files"] for f in entry["findings"]], out


def test_a_pod_asking_for_a_handler_cri_o_dropped(
    crio: CrioDaemon, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cri-o drops a handler whose runtime_path is missing at start; a pod whose RuntimeClass names it fails."""
    refused = run_pod_container(crio, command=["true"], runtime_handler="nvidia")
    assert refused.failed_step == "RunPodSandbox", refused
    assert "failed to find runtime handler nvidia from runtime list" in (refused.error or ""), refused
    args = ["why", "--crio-config", str(crio.config), "--crio-config-dir", str(crio.config_dir), "--format", "json"]
    status, out = cli(capsys, *args, refused.error or "")
    report = json.loads(out)
    assert [match["signature"] for match in report["matches"]] == ["crio-runtime-handler-unknown"], report
    verdict = {cause["code"]: cause["holds"] for cause in report["causes"]}
    assert status == 0 and verdict == {"engines": True, "RuntimeClass": True, "CRO103": False, "CRO109": False}, report
    # The handlers why lists are those the daemon has: its log names each one it loaded.
    (listed,) = report["causes"][0]["evidence"]
    for name in crio_handlers(crio):
        assert f"{name} (" in listed, (listed, name)

    # A drop-in that gives cri-o an nvidia handler whose program is gone: the handler is defined, and dropped.
    dropin = workdir / "handler-dropin"
    dropin.mkdir()
    shutil.copy(crio.config, dropin / "crio.conf")
    (dropin / "99-nvidia.conf").write_text(
        '[crio.runtime.runtimes.nvidia]\nruntime_path = "/nonexistent/nvidia-oci-hook-runtime"\n'
    )
    args = ["why", "--crio-config", str(dropin / "crio.conf"), "--crio-config-dir", str(dropin), "--format", "json"]
    status, out = cli(capsys, *args, refused.error or "")
    verdict = {cause["code"]: cause["holds"] for cause in json.loads(out)["causes"]}
    # The configuration names the handler: the RuntimeClass is right, and cri-o's dropping it is the cause.
    assert status == 0 and verdict == {"engines": False, "RuntimeClass": False, "CRO103": True, "CRO109": False}, out


def crio_handlers(daemon: CrioDaemon) -> list[str]:
    """The runtime handlers in cri-o's configuration, as the test wrote it."""
    from nvidia_oci_hook.formats.tomltext import parse_toml

    value = parse_toml(daemon.config.read_bytes()).value
    return sorted(value["crio"]["runtime"]["runtimes"])


# --- CDI ---

PROBE_CDI = ["sh", "-c", "echo env=$GPU_FROM_CDI; stat -c %t:%T /dev/nvidia0 /dev/nvidiactl"]


@pytest.mark.parametrize("how", ["annotation", "cdi_devices"])
def test_cdi_request_resolved(crio: CrioDaemon, recorder: SpecRecorder, how: str) -> None:
    request = (
        {"annotations": {"cdi.k8s.io/gpu": GPU_REQUEST}} if how == "annotation" else {"cdi_devices": [GPU_REQUEST]}
    )
    result = run_pod_container(crio, command=PROBE_CDI, **request)
    assert (result.failed_step, result.stdout) == (None, "env=1\nc3:0\nc3:ff\n"), result
    spec = spec_of(recorder, result)
    assert device_paths(spec) == ["/dev/nvidiactl", "/dev/nvidia0"]
    assert "GPU_FROM_CDI=1" in spec["process"]["env"]


@pytest.fixture(scope="module")
def resolved(crio: CrioDaemon) -> dict[str, dict[str, Any]]:
    """`cdi resolve` of every name, for cri-o as it runs (its configuration, its release)."""
    names = [GPU_REQUEST, *(name for name, _ in UNRESOLVABLE.values()), NEWER[0]]
    args = ["cdi", "resolve", "--engine", "crio", "--crio-config", str(crio.config)]
    args += ["--crio-config-dir", str(crio.config_dir), "--format", "json", *names]
    out = io.StringIO()
    with redirect_stdout(out):
        status = main(args)
    (engine,) = json.loads(out.getvalue())["engines"]
    assert status == 1 and (engine["label"], engine["cdi_library"]) == ("cri-o 1.37.0", "1.1.0"), engine
    return {found["name"]: found for found in engine["names"]}


def test_cdi_resolve_says_cri_o_resolves_the_good_name(resolved: dict[str, dict[str, Any]], cdi_dirs: Any) -> None:
    found = resolved[GPU_REQUEST]
    assert found["resolved"] and found["spec"] == str(cdi_dirs[1] / "gpu.json"), found


@pytest.mark.parametrize("reason", [*UNRESOLVABLE, "newer-version"])
def test_cdi_request_unresolvable(
    crio: CrioDaemon,
    resolved: dict[str, dict[str, Any]],
    cdi_dirs: tuple[Path, Path],
    reason: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, files = UNRESOLVABLE.get(reason, NEWER)
    refusal = f"CDI device injection failed: unresolvable CDI devices {name}"
    for request in ({"annotations": {"cdi.k8s.io/gpu": name}}, {"cdi_devices": [name]}):
        result = run_pod_container(crio, command=PROBE_CDI, **request)
        assert (result.failed_step, result.error) == ("CreateContainer", refusal), (request, result)
    found = resolved[name]
    expected = reason if reason in UNRESOLVABLE else cdi_reasons.NOT_LOADED
    # cri-o's own error, to `why`: the one reason `cdi resolve` gives is the cause that holds, the others are out.
    args = ["why", "--crio-config", str(crio.config), "--crio-config-dir", str(crio.config_dir), "--format", "json"]
    status, out = cli(capsys, *args, result.error)
    report = json.loads(out)
    assert status == 0 and report["matches"] == [{"signature": "cdi-unresolvable", "text": refusal}], report
    holding = [cause["code"] for cause in report["causes"] if cause["holds"]]
    assert holding == [CDI_REASON_CODES[expected]], report
    assert (found["resolved"], found["reason"]) == (False, expected), found
    assert found["engine_error"].startswith(f"unresolvable CDI devices {name}"), found
    assert found["files"] == sorted(str(cdi_dirs[1] / relative) for relative in files), found
    logged = crio.log().replace('\\"', '"')
    if expected == cdi_reasons.NOT_LOADED:
        # The library's own words, as cri-o logs them when it loads the directory.
        said = found["engine_error"].split("logged once at WARN: ", 1)[1].rstrip(")")
        assert said in logged, logged[-2000:]
        assert ('invalid version "1.2.0"' in said) == (reason == "newer-version"), said
    if expected == cdi_reasons.CONFLICT:
        assert f'conflicting device "{name}"' in logged
        assert found["message"].endswith(
            "both define conflict.example.com/gpu=0 in one directory: the CDI cache "
            "records a conflicting device and drops it from every directory"
        )
    if expected == cdi_reasons.NOT_SCANNED:
        assert "the CDI library reads no subdirectory" in found["message"], found
    if expected == cdi_reasons.NOT_DEFINED:
        assert found["defined"] == [GPU_REQUEST], found


# --- the specs cri-o writes ---

# The pods whose specs tests/runtime/crio-specs keeps: its file -> run_pod_container's options (command /bin/true).
SPEC_PODS: dict[str, dict[str, Any]] = {
    "plain.json": {},
    "annotated.json": {
        "annotations": {"io.kubernetes.x": "y", "note": "<b>&</b>"},
        "envs": {"SCRIPT": 'echo "a\tb"\n'},
    },
    "device.json": {"devices": [("/dev/null", "/dev/fuse0", "rw")]},
    "privileged.json": {"privileged": True},
    "cdi-devices.json": {"cdi_devices": [GPU_REQUEST]},
    "cdi-annotation.json": {"annotations": {"cdi.k8s.io/gpu": GPU_REQUEST}},
}
# The values that belong to one run: ids, times, the daemon's directory, the image, the pod's and container's names.
RUN_ANNOTATIONS = (
    *("ContainerID", "Created", "Image", "ImageName", "ImageRef", "ImageRepoDigests", "LogPath", "Metadata"),
    *("MountPoint", "Name", "ResolvPath", "SandboxID", "SandboxName"),
)


def skeleton(value: Any) -> Any:
    """Keys in their order, with the distinct shapes of list items; a scalar's type."""
    if isinstance(value, dict):
        return tuple((key, skeleton(item)) for key, item in value.items())
    if isinstance(value, list):
        return tuple(dict.fromkeys(skeleton(item) for item in value))
    return type(value).__name__


def run_independent(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec without what differs from one run to the next; a privileged container's devices are the host's
    /dev at that moment, kept by shape."""
    spec = json.loads(json.dumps(spec))
    for key in RUN_ANNOTATIONS:
        spec["annotations"][f"io.kubernetes.cri-o.{key}"] = "<run>"
    spec["root"]["path"] = spec["linux"]["cgroupsPath"] = "<run>"
    for namespace in spec["linux"]["namespaces"]:
        if "path" in namespace:
            namespace["path"] = "<run>"
    for mount in spec["mounts"]:
        if "/runroot/overlay-containers/" in mount["source"]:
            mount["source"] = "<run>"
    if {"allow": True, "access": "rwm"} in spec["linux"]["resources"]["devices"]:
        spec["linux"]["devices"] = skeleton(spec["linux"]["devices"])
    return spec


@pytest.mark.parametrize("name", list(SPEC_PODS))
def test_the_specs_kept_are_what_crio_writes(crio: CrioDaemon, recorder: SpecRecorder, name: str) -> None:
    result = run_pod_container(crio, command=["/bin/true"], **SPEC_PODS[name])
    assert (result.failed_step, result.exit_code) == (None, 0), result
    assert result.container_id
    written = (recorder.specs / f"{result.container_id}.json").read_bytes()
    kept = (CRIO_SPECS / name).read_bytes()
    # Go's MarshalIndent with a tab, which the pre-check corpus writes for its cri-o form.
    assert written.decode() == go_indented(json.loads(written))
    assert kept.decode() == go_indented(json.loads(kept))
    assert skeleton(json.loads(written)) == skeleton(json.loads(kept))
    assert run_independent(json.loads(written)) == run_independent(json.loads(kept))


# --- the harness ---


def test_close_leaves_no_process_mount_or_cgroup(recorder: SpecRecorder) -> None:
    """A pod left running: close() must still leave nothing. cri-o's mounts live in its own mount namespace."""
    daemon = CrioDaemon.start(runtimes={"runc": recorder.path})
    try:
        name = daemon.next_pod_name()
        pod_config = cri.PodSandboxConfig(
            metadata=cri.PodSandboxMetadata(name=name, uid=f"{name}-1", namespace="e2e"),
            log_directory=str(daemon.workdir / "logs"),
            linux=cri.LinuxPodSandboxConfig(
                cgroup_parent=daemon.cgroup_parent,
                security_context=cri.LinuxSandboxSecurityContext(namespace_options=daemon.namespace_options),
            ),
        )
        runtime = daemon.runtime
        pod = runtime.RunPodSandbox(cri.RunPodSandboxRequest(config=pod_config), timeout=30).pod_sandbox_id
        image = cri.ImageSpec(image=BUSYBOX_IMAGE, user_specified_image=BUSYBOX_IMAGE)
        container_config = cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name="sleeper"),
            image=image,
            command=["sleep", "600"],
            log_path="sleeper.log",
            linux=cri.LinuxContainerConfig(
                security_context=cri.LinuxContainerSecurityContext(namespace_options=daemon.namespace_options)
            ),
        )
        request = cri.CreateContainerRequest(pod_sandbox_id=pod, config=container_config, sandbox_config=pod_config)
        container = runtime.CreateContainer(request, timeout=30).container_id
        runtime.StartContainer(cri.StartContainerRequest(container_id=container), timeout=30)
        conmons = daemon.conmons()
        assert len(conmons) == 1, conmons
        crio_pid = daemon.pid
        assert crio_pid is not None
        assert str(daemon.workdir) in Path(f"/proc/{crio_pid}/mountinfo").read_text()
        assert str(daemon.workdir) not in Path("/proc/self/mountinfo").read_text()
        cgroups = cgroup_dirs(daemon.cgroup_parent)
        pids = {int(p) for top in cgroups for path in top.rglob("cgroup.procs") for p in path.read_text().split()}
        assert len(pids) == 1, f"expected the sleep process in {cgroups}"
        processes = [*pids, *conmons, crio_pid]
    finally:
        daemon.close()
    for pid in processes:
        assert not Path(f"/proc/{pid}").exists(), f"process {pid} survived close() (or was left a zombie)"
    assert not daemon.workdir.exists()
    assert not [top for top in cgroups if top.exists()]
    assert str(daemon.workdir) not in Path("/proc/self/mountinfo").read_text()
