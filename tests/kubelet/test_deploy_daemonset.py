"""deploy/kubernetes/daemonset.yaml's pod, as the DaemonSet controller would stamp it out, run by a real kubelet 1.32
on cri-o 1.37 (tests/kubelet/harness.py) as a static pod, on a fake GPU node in seed 003's state (a stray
/dev/nvidia0 beside a driver container's root): the image deploy/kubernetes/Containerfile builds
(tests/deploy_image.py), the manifest's own command, args, env, securityContext, resources and volumes.

The pod template is read from the YAML, not copied; `static_pod` changes only what this harness cannot run as
written, each change with its reason, and `test_the_static_pod_changes_only_what_the_harness_needs` holds it to
that list. The textfile volume keeps the manifest's hostPath: /var/lib is the kubelet namespace's own tmpfs. The
node's label nvidia.com/gpu.present=true, which the DaemonSet's nodeSelector asks for, is given to the kubelet
(`--node-labels`, where GPU feature discovery would set it on a cluster): the kubelet checks a static pod's
nodeSelector against its own node's labels before it admits it.

What is checked, on the running pod: the metrics file in node_exporter's textfile directory, its values for seed
003, promtool's verdict, and that they are what this checkout's doctor says of the same node; the security settings
as the container's processes have them (uid, capability sets, no_new_privs, seccomp mode, read-only root and
/host) and as cri-o wrote them into the OCI spec; how far down /host is read-only; the fake node's tree unchanged.

As seen here (2 CPUs, kernel 6.18, runc 1.1.5): the pod Running and Burstable, the metrics file 1 to 1.5 s after
the manifest went in, `nvidia_oci_hook_check_status{check="stray-device-nodes"} 2` among the 14 checks; CapInh, CapPrm,
CapEff, CapBnd and CapAmb 0000000000000000 in PID 1 and in an exec'd shell, NoNewPrivs 1, Seccomp 2; `touch` on
/ and /host: "Read-only file system". recursiveReadOnly resolves to Disabled: /host is ro, the bind below it rw,
the spec's /host mount `rbind, rprivate, ro, bind`. The image's build (about 30 s) happens once per content of
what it copies in; loading it into cri-o's storage takes 5 to 8 s, the whole module about 12 s.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.node.doctor import CHECK_NAMES
from tests.deploy_image import TAG, ImageUnavailable, image_archive, load_into
from tests.helpers import FakeHost
from tests.kubelet.harness import Kubelet, KubeletUnavailable, Pod, container_status, skip_reason
from tests.node.fakenodes import seed_003
from tests.node.test_metrics import promtool_lint, samples

pytestmark = [pytest.mark.runtime, pytest.mark.root]

REPOSITORY = Path(__file__).resolve().parents[2]
DAEMONSET = REPOSITORY / "deploy/kubernetes/daemonset.yaml"
METRICS = "nvidia-oci-hook.prom"
# A directory of the fake node bound over itself in the kubelet's namespace before cri-o starts: a mount below
# /host, as the host's /run, /proc and /sys are on a real node, which only a recursive read-only bind keeps
# read-only.
SUBMOUNT = "run"
ZERO_CAPABILITIES = "0000000000000000"


def daemonset() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(DAEMONSET.read_text())
    return loaded


def static_pod(manifest: dict[str, Any], node_root: Path) -> dict[str, Any]:
    """The Pod the DaemonSet's template makes, with only what a static pod on this harness must have changed."""
    template = copy.deepcopy(manifest["spec"]["template"])
    spec = template["spec"]
    # No CNI configuration here: a pod on the pod network hangs in RunPodSandbox; the host's network is the one
    # that works, and the doctor opens no socket.
    spec["hostNetwork"] = True
    # A static pod counts as critical, and a critical pod of system-node-critical gets oom_score_adj -997, which
    # this sandbox forbids (no CAP_SYS_RESOURCE): runc would refuse the container.
    del spec["priorityClassName"]
    (container,) = spec["containers"]
    # Nothing can be pulled: the image built from this checkout, loaded into cri-o's storage beforehand.
    container["image"] = TAG
    container["imagePullPolicy"] = "Never"
    (host,) = [volume for volume in spec["volumes"] if volume["name"] == "host"]
    # The fake GPU node stands in for the machine's /, which must not be what the test reads.
    host["hostPath"]["path"] = str(node_root)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": manifest["metadata"]["name"],
            "namespace": manifest["metadata"]["namespace"],
            "labels": template["metadata"]["labels"],
        },
        "spec": spec,
    }


class GpuNodeKubelet(Kubelet):
    """The harness's kubelet with node labels: without an API server, --node-labels is where they come from."""

    _starting_kubelet = False

    def _start_kubelet(self, timeout: float) -> None:
        self._starting_kubelet = True
        try:
            super()._start_kubelet(timeout)
        finally:
            self._starting_kubelet = False

    def _enter(self) -> list[str]:
        prefix = super()._enter()
        if not self._starting_kubelet:
            return prefix
        selector = daemonset()["spec"]["template"]["spec"]["nodeSelector"]
        labels = ",".join(f"{key}={value}" for key, value in selector.items())
        # The kubelet's command follows the prefix: a shell appends the flag and execs it, the same process.
        return [*prefix, "sh", "-c", f'exec "$@" --node-labels={labels}', "sh"]


def tree(root: Path) -> dict[str, tuple[Any, ...]]:
    """Each entry under root: type and mode, owner, size, mtime, device numbers, content or link target."""
    found: dict[str, tuple[Any, ...]] = {}
    for directory, names, files in os.walk(root):
        for name in [*names, *files]:
            path = Path(directory, name)
            info = path.lstat()
            if stat.S_ISREG(info.st_mode):
                content: Optional[str] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISLNK(info.st_mode):
                content = os.readlink(path)
            else:
                content = None
            found[str(path.relative_to(root))] = (
                info.st_mode, info.st_uid, info.st_gid, info.st_size, info.st_mtime_ns, info.st_rdev, content,
            )  # fmt: skip
    return found


def _bind_over_itself(host_root: Path, node_root: Path) -> None:
    anchor = host_root.parent.name  # /proc/ANCHOR/root
    path = node_root / SUBMOUNT
    done = subprocess.run(
        ["nsenter", "--target", anchor, "--mount", "--", "mount", "--bind", str(path), str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if done.returncode != 0:
        raise KubeletUnavailable(f"mount --bind {path}: {done.stderr.strip()}")


@dataclass
class Deployed:
    kubelet: Kubelet
    name: str
    node: Path
    before: dict[str, tuple[Any, ...]]
    metrics: Path
    pod: Pod


def running(pod: Pod) -> bool:
    return "running" in container_status(pod, "doctor").get("state", {})


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    try:
        archive = image_archive()
    except ImageUnavailable as error:
        pytest.skip(f"the image cannot be built: {str(error).splitlines()[0]}")
    node = seed_003(FakeHost(tmp_path_factory.mktemp("node") / "host")).root
    before = tree(node)
    try:
        kubelet = GpuNodeKubelet.start("crio", node_setup=lambda host_root: _bind_over_itself(host_root, node))
    except KubeletUnavailable as error:
        pytest.fail(str(error))
    try:
        assert kubelet.engine is not None
        load_into(kubelet.engine.workdir / "root", kubelet.engine.workdir / "runroot", archive)
        manifest = daemonset()
        name = kubelet.add_static_pod(static_pod(manifest, node))
        pod = kubelet.wait_for(name, running)
        (textfile,) = [
            volume for volume in manifest["spec"]["template"]["spec"]["volumes"] if volume["name"] == "textfile"
        ]
        metrics = kubelet.node_path(textfile["hostPath"]["path"]) / METRICS
        deadline = time.monotonic() + 60
        while not metrics.exists():
            assert time.monotonic() < deadline, kubelet.container_log(name, "doctor")
            time.sleep(0.1)
        yield Deployed(kubelet, name, node, before, metrics, pod)
    finally:
        kubelet.close()


def test_the_static_pod_changes_only_what_the_harness_needs(tmp_path: Path) -> None:
    manifest = daemonset()
    pod = static_pod(manifest, tmp_path)
    template = manifest["spec"]["template"]["spec"]
    changed = {key for key in {*template, *pod["spec"]} if template.get(key) != pod["spec"].get(key)}
    assert changed == {"hostNetwork", "priorityClassName", "containers", "volumes"}
    (original,), (container,) = template["containers"], pod["spec"]["containers"]
    assert {key for key in {*original, *container} if original.get(key) != container.get(key)} == {
        "image",
        "imagePullPolicy",
    }
    volumes = {volume["name"]: volume for volume in pod["spec"]["volumes"]}
    assert volumes["host"]["hostPath"] == {"path": str(tmp_path), "type": "Directory"}
    assert volumes["textfile"] == next(volume for volume in template["volumes"] if volume["name"] == "textfile")


def test_the_pod_runs(deployed: Deployed) -> None:
    pod = deployed.kubelet.wait_for(deployed.name, running)
    status = container_status(pod, "doctor")
    assert pod["status"]["phase"] == "Running", pod["status"]
    # Requests below limits: Burstable, as on a cluster.
    assert pod["status"]["qosClass"] == "Burstable"
    assert status["restartCount"] == 0
    # doctor exits 0 or 1 on a run that wrote its metrics: the loop logs nothing.
    assert deployed.kubelet.container_log(deployed.name, "doctor") == ""


def test_it_writes_seed_003s_metrics(deployed: Deployed) -> None:
    info = deployed.metrics.stat()
    # Written by uid 0 through the owner's bits of the root-owned directory the kubelet created (DirectoryOrCreate).
    assert (info.st_uid, deployed.metrics.parent.stat().st_uid) == (0, 0)
    promtool_lint(deployed.metrics)
    found = samples(deployed.metrics)
    assert found['nvidia_oci_hook_check_status{check="stray-device-nodes"}'] == "2"
    assert found["nvidia_oci_hook_stray_device_nodes"] == "2"
    assert found['nvidia_oci_hook_driver_root_info{root="/run/nvidia/driver",status="found"}'] == "1"
    statuses = {series for series in found if series.startswith("nvidia_oci_hook_check_status{")}
    assert statuses == {f'nvidia_oci_hook_check_status{{check="{name}"}}' for name in CHECK_NAMES}


def test_the_images_doctor_says_what_this_checkouts_says(deployed: Deployed, tmp_path: Path) -> None:
    """The same node read through the pod's /host and directly: every series the same but the run's own time."""
    here = tmp_path / METRICS
    main(["doctor", "--host-root", str(deployed.node), "--format", "prometheus", "--output", str(here)])
    timed = ("nvidia_oci_hook_last_run_timestamp_seconds", "nvidia_oci_hook_doctor_duration_seconds")
    pod, expected = (
        {series: value for series, value in samples(path).items() if series not in timed}
        for path in (deployed.metrics, here)
    )
    assert pod == expected


def _status(text: str) -> dict[str, str]:
    return {key: value.strip() for key, _, value in (line.partition(":") for line in text.splitlines())}


PROBE = """\
id -u
for file in /proc/1/status /proc/self/status; do
    grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' "$file"; echo --
done
for path in "" /host /textfile; do
    if touch "$path/.probe" 2>&1; then rm "$path/.probe"; echo "${path:-/}: written"; fi
done
"""


def test_the_security_settings_hold_in_the_container(deployed: Deployed) -> None:
    done = deployed.kubelet.exec(deployed.name, "sh", "-c", PROBE, container="doctor")
    assert done.returncode == 0, done.stderr
    head, pid1, exec_, writes = done.stdout.split("--\n")[0].split("\n", 1) + done.stdout.split("--\n")[1:]
    assert head == "0"
    # PID 1 is the manifest's loop, whose children are the doctor's runs; the exec'd shell gets the same process
    # settings from cri-o's spec.
    for status in (_status(pid1), _status(exec_)):
        capabilities = {key: value for key, value in status.items() if key.startswith("Cap")}
        assert capabilities == dict.fromkeys(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), ZERO_CAPABILITIES)
        assert (status["NoNewPrivs"], status["Seccomp"]) == ("1", "2")
    assert writes.splitlines() == [
        "touch: cannot touch '/.probe': Read-only file system",
        "touch: cannot touch '/host/.probe': Read-only file system",
        "/textfile: written",
    ]


def test_host_is_read_only_as_far_down_as_the_kubelet_asked(deployed: Deployed) -> None:
    """recursiveReadOnly IfPossible: Enabled where the kubelet knows the runtime handler supports it, else the
    fallback the manifest documents, the top mount alone read-only. This kubelet has no API server and so no
    RuntimeClass manager, the only way it learns that (cri-o's `crictl info` lists recursive_read_only_mounts for
    runc here): it resolves IfPossible to Disabled, as a kubelet does on a runtime without the feature."""
    kubelet = deployed.kubelet
    pod = kubelet.pod(deployed.name)
    assert pod is not None
    mounts = {mount["mountPath"]: mount for mount in container_status(pod, "doctor").get("volumeMounts") or []}
    recursive = mounts["/host"].get("recursiveReadOnly")
    assert recursive in ("Enabled", "Disabled"), mounts
    done = kubelet.exec(deployed.name, "cat", "/proc/1/mountinfo", container="doctor")
    assert done.returncode == 0, done.stderr
    options = {line.split()[4]: line.split()[5].split(",") for line in done.stdout.splitlines()}
    assert "ro" in options["/"] and "rw" in options["/textfile"], options
    assert "ro" in options["/host"]
    below = f"/host/{SUBMOUNT}"
    assert ("ro" if recursive == "Enabled" else "rw") in options[below], options
    inspected = kubelet.crictl("inspect", kubelet.container_id(deployed.name, "doctor"))
    assert inspected.returncode == 0, inspected.stderr
    (host,) = [mount for mount in _spec(inspected.stdout)["mounts"] if mount["destination"] == "/host"]
    assert host["source"] == str(deployed.node)
    # mountPropagation None: rprivate.
    assert {"rbind", "rprivate", "rro" if recursive == "Enabled" else "ro"} <= set(host["options"]), host


def _spec(inspected: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(inspected)["info"]["runtimeSpec"]
    return found


def test_cri_o_wrote_the_declared_settings_into_the_spec(deployed: Deployed) -> None:
    kubelet = deployed.kubelet
    inspected = kubelet.crictl("inspect", kubelet.container_id(deployed.name, "doctor"))
    assert inspected.returncode == 0, inspected.stderr
    spec = _spec(inspected.stdout)
    process = spec["process"]
    assert process["user"]["uid"] == 0
    assert process.get("noNewPrivileges") is True
    assert all(not names for names in process.get("capabilities", {}).values()), process["capabilities"]
    assert spec["root"].get("readonly") is True
    # RuntimeDefault: cri-o's own profile, which refuses by default and allows a list.
    assert spec["linux"]["seccomp"]["defaultAction"] == "SCMP_ACT_ERRNO"


def test_the_node_was_only_read(deployed: Deployed) -> None:
    assert tree(deployed.node) == deployed.before
