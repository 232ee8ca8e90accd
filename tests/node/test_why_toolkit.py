"""`why TEXT` for the errors NVIDIA Container Toolkit's config.toml causes: each text as the real 1.20 runtime, hook
and low-level runtimes print it (produced here by running them with a crafted config), decided on a fake node where
the cause holds and on one where it does not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.helpers import FakeHost
from tests.node.test_why import DPKG, signature_and_verdicts, verdicts, why

PEERS = Path(__file__).resolve().parents[2].parent / "shared" / "peers" / "bin"
RUNTIME = PEERS / "nvidia-container-runtime"
HOOK = PEERS / "nvidia-container-runtime-hook"
needs_runtime = pytest.mark.skipif(not RUNTIME.is_file(), reason=f"no nvidia-container-runtime 1.20 under {PEERS}")
needs_hook = pytest.mark.skipif(not HOOK.is_file(), reason=f"no nvidia-container-runtime-hook 1.20 under {PEERS}")

CONFIG = "/etc/nvidia-container-runtime/config.toml"
OPERATOR = "/usr/local/nvidia/toolkit"
OPERATOR_CONFIG = f"{OPERATOR}/.config/nvidia-container-runtime/config.toml"
HOOKS = "/usr/share/containers/oci/hooks.d"
CDI_MODE = '[nvidia-container-runtime]\nmode = "cdi"\n'
K3S_TEMPLATE = '{{ template "base" . }}\n\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
GPU_ALL = (
    "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n  containerEdits:\n    env:\n"
    "    - NVIDIA_VISIBLE_DEVICES=void\n"
)
CTK_HOOK = (
    "containerEdits:\n  hooks:\n  - hookName: createContainer\n    path: /usr/bin/nvidia-ctk\n"
    "    args: [nvidia-ctk, hook, update-ldcache]\n"
)


def bundle(tmp_path: Path) -> Path:
    """A fresh bundle each time: the runtime writes its modified spec back into config.json."""
    path = tmp_path / "bundle"
    shutil.rmtree(path, ignore_errors=True)
    for directory in ("dev", "proc", "tmp"):
        (path / "rootfs" / directory).mkdir(parents=True)
    spec = {
        "ociVersion": "1.0.2",
        "process": {"args": ["sh"], "cwd": "/", "env": ["NVIDIA_VISIBLE_DEVICES=all"]},
        "root": {"path": "rootfs"},
        "mounts": [{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"}],
        "linux": {"namespaces": [{"type": "mount"}]},
    }
    (path / "config.json").write_text(json.dumps(spec))
    return path


def toolkit(tmp_path: Path, program: Path, config: str, args: list[str], stdin: Optional[str] = None) -> str:
    """What a toolkit binary prints with config as its config.toml."""
    path = tmp_path / "config.toml"
    path.write_text(config)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "NVIDIA_CTK_CONFIG_FILE_PATH": str(path)}
    done = subprocess.run(
        [str(program), *args], input=stdin, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0, done
    return done.stdout + done.stderr


def create(tmp_path: Path, config: str) -> str:
    """The runtime's `create` with config; the low-level runtime is a stand-in it never reaches."""
    stand_in = tmp_path / "stand-in-runc"
    stand_in.write_text("#!/bin/sh\nexit 0\n")
    stand_in.chmod(0o755)
    if "runtimes" not in config:
        config = f'[nvidia-container-runtime]\nruntimes = ["{stand_in}"]\n' + config.replace(
            "[nvidia-container-runtime]\n", "", 1
        )
    return toolkit(tmp_path, RUNTIME, config, ["create", "--bundle", str(bundle(tmp_path)), "toolkit-test"])


def prestart(tmp_path: Path, config: str) -> str:
    state = json.dumps({"ociVersion": "1.0.2", "id": "toolkit-test", "pid": 1, "bundle": str(bundle(tmp_path))})
    return toolkit(tmp_path, HOOK, config, ["prestart"], stdin=state)


def cause(report: dict[str, Any], code: str) -> dict[str, Any]:
    return next(found for found in report["causes"] if found["code"] == code)


def node(tmp_path: Path, name: str, config: Optional[str] = None, release: str = "1.20.0-1") -> FakeHost:
    host = FakeHost(tmp_path / name)
    host.directory("/etc")
    if config is not None:
        host.text(CONFIG, config)
    if release:
        host.text("/var/lib/dpkg/status", DPKG.format("nvidia-container-toolkit-base", release))
    return host


# ---------------------------------------------------------------------------------------------------------------


def test_invalid_discovery_mode_is_the_1_18_0_nvidia_ctk_reading_the_runtime_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # nvidia-ctk 1.18.0 cannot be run here: its words as cmd/nvidia-ctk/cdi/generate/generate.go validateFlags
    # writes them at v1.18.0, logged by cmd/nvidia-ctk/main.go (logger.Errorf), as nvidia-cdi-refresh's journal has it.
    text = (
        'Nov 02 10:00:00 gpu-1 nvidia-ctk[811]: time="2025-11-02T10:00:00Z" level=error msg="invalid discovery mode: '
        'cdi"'
    )
    status, report = why(capsys, node(tmp_path, "broken", CDI_MODE, "1.18.0-1"), text)
    assert status == 0
    assert signature_and_verdicts(report) == (
        ["toolkit-discovery-mode"],
        {"toolkit-release": True, "toolkit-mode": True},
    )
    assert "1.18.1" in cause(report, "toolkit-mode")["fix"] and "--mode=auto" in cause(report, "toolkit-mode")["fix"]
    assert any("NVIDIA_CTK_CDI_GENERATE_MODE" in line for line in report["undecided"])

    status, report = why(capsys, node(tmp_path, "fixed", CDI_MODE, "1.18.1-1"), text)
    assert status == 0 and verdicts(report) == {"toolkit-release": False, "toolkit-mode": True}
    status, report = why(capsys, node(tmp_path, "legacy", '[nvidia-container-runtime]\nmode = "legacy"\n'), text)
    assert status == 1 and verdicts(report) == {"toolkit-release": False, "toolkit-mode": False}
    status, report = why(capsys, node(tmp_path, "unknown", CDI_MODE, ""), text)
    assert verdicts(report)["toolkit-release"] is None


def hooked_node(tmp_path: Path, name: str, config: str) -> FakeHost:
    host = node(tmp_path, name, config)
    host.text("/etc/crio/crio.conf", '[crio.runtime]\ndefault_runtime = "crun"\n').executable("/usr/bin/crun")
    host.executable("/usr/bin/nvidia-container-runtime-hook")
    hook = {
        "version": "1.0.0",
        "hook": {
            "path": "/usr/bin/nvidia-container-runtime-hook",
            "args": ["nvidia-container-runtime-hook", "prestart"],
        },
        "when": {"always": True},
        "stages": ["prestart"],
    }
    return host.text(f"{HOOKS}/oci-nvidia-hook.json", json.dumps(hook))


@needs_hook
def test_the_hook_refuses_a_mode_other_than_legacy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = prestart(tmp_path, CDI_MODE)
    assert (
        "invoking the NVIDIA Container Runtime Hook directly (e.g. specifying the docker --gpus flag) is not " in text
    )
    status, report = why(capsys, hooked_node(tmp_path, "cdi", CDI_MODE), text)
    assert status == 0
    assert signature_and_verdicts(report) == (
        ["toolkit-hook-not-legacy"],
        {"toolkit-mode": True, "hook-callers": True},
    )
    mode = cause(report, "toolkit-mode")
    assert mode["summary"].startswith(f'{CONFIG}: mode = "cdi", which NVIDIA\'s hook resolves to cdi')
    assert mode["fix"].startswith(f"remove {HOOKS}/oci-nvidia-hook.json")
    assert "skip-mode-detection = true" in mode["fix"]
    assert (
        "oci-nvidia-hook.json runs /usr/bin/nvidia-container-runtime-hook" in cause(report, "hook-callers")["summary"]
    )

    jit = '[nvidia-container-runtime]\nmode = "jit-cdi"\n'
    status, report = why(capsys, node(tmp_path, "jit").executable("/usr/bin/dockerd").text(CONFIG, jit), text)
    assert status == 0 and verdicts(report) == {"toolkit-mode": True, "hook-callers": True}
    assert "docker run --gpus" in cause(report, "hook-callers")["summary"]

    legacy = '[nvidia-container-runtime]\nmode = "legacy"\n'
    status, report = why(capsys, hooked_node(tmp_path, "legacy", legacy), text)
    assert status == 0 and verdicts(report) == {"toolkit-mode": False, "hook-callers": True}
    skipped = CDI_MODE + "[nvidia-container-runtime-hook]\nskip-mode-detection = true\n"
    status, report = why(capsys, node(tmp_path, "skipped", skipped), text)
    assert status == 1 and verdicts(report) == {"toolkit-mode": False, "hook-callers": False}
    # auto resolves to csv where go-nvlib finds Tegra files and no NVML.
    status, report = why(capsys, hooked_node(tmp_path, "tegra", "").file("/etc/nv_tegra_release"), text)
    assert verdicts(report)["toolkit-mode"] is True and "resolves to csv" in cause(report, "toolkit-mode")["summary"]


@needs_runtime
def test_a_template_given_as_the_toolkit_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = toolkit(tmp_path, RUNTIME, K3S_TEMPLATE, ["state", "toolkit-test"])
    assert (
        "error loading config: failed to load specified config file: (1, 1): parsing error: keys cannot contain { "
        "character" in text
    )
    status, report = why(capsys, node(tmp_path, "template", K3S_TEMPLATE), text)
    assert status == 0
    assert signature_and_verdicts(report) == (["toolkit-config-refused"], {"toolkit-config": True})
    refused = cause(report, "toolkit-config")
    assert refused["summary"].startswith(f"{CONFIG} does not load: line 1: ")
    assert "it is a template (line 1 has {{ ... }})" in refused["summary"]
    assert "nvidia-ctk config default" in refused["fix"]
    status, report = why(capsys, node(tmp_path, "plain", CDI_MODE), text)
    assert status == 1 and verdicts(report) == {"toolkit-config": False}


@needs_runtime
def test_a_value_of_the_wrong_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    typed = 'accept-nvidia-visible-devices-envvar-when-unprivileged = "false"\n'
    text = toolkit(tmp_path, RUNTIME, typed, ["state", "toolkit-test"])
    assert "error loading config: failed to unmarshal config: (1, 1): Can't convert false(string) to bool" in text
    status, report = why(capsys, node(tmp_path, "typed", typed), text)
    assert status == 0 and verdicts(report) == {"toolkit-config": True}
    refused = cause(report, "toolkit-config")
    assert "(1, 1): Can't convert false(string) to bool" in refused["summary"]
    assert refused["fix"].startswith("write the value with its type")
    fixed = typed.replace('"false"', "false")
    status, report = why(capsys, node(tmp_path, "fixed", fixed), text)
    assert status == 1 and verdicts(report) == {"toolkit-config": False}


@needs_hook
def test_the_hook_on_an_ldconfig_path_and_on_a_config_its_wrapper_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ldconfig = '[nvidia-container-cli]\nldconfig = "/sbin/ldconfig"\n'
    text = prestart(tmp_path, ldconfig)
    assert (
        'error getting hook config: failed to load config: nvidia-container-cli.ldconfig value "/sbin/ldconfig" is '
        "not host-relative (does not start with a '@')" in text
    )
    status, report = why(capsys, node(tmp_path, "ldconfig", ldconfig), text)
    assert status == 0 and verdicts(report) == {"toolkit-config": True}
    assert '"@/sbin/ldconfig"' in cause(report, "toolkit-config")["fix"]
    status, report = why(capsys, node(tmp_path, "host", ldconfig.replace('"/', '"@/')), text)
    assert status == 1 and verdicts(report) == {"toolkit-config": False}

    # The GPU Operator's wrapper names a config the hook then requires; run the hook the same way.
    (tmp_path / "absent").mkdir()
    env = {"PATH": os.environ.get("PATH", ""), "NVIDIA_CTK_CONFIG_FILE_PATH": str(tmp_path / "absent" / "c.toml")}
    state = json.dumps({"ociVersion": "1.0.2", "id": "t", "pid": 1, "bundle": str(bundle(tmp_path))})
    done = subprocess.run([str(HOOK), "prestart"], input=state, env=env, capture_output=True, text=True, timeout=60)
    missing = done.stdout + done.stderr
    assert "failed to load config: couldn't open required configuration file: file does not exist" in missing
    wrapped = operator_node(tmp_path, "wrapped")
    status, report = why(capsys, wrapped, missing)
    assert status == 0 and verdicts(report) == {"toolkit-config": True}
    assert cause(report, "toolkit-config")["summary"].startswith(f"{OPERATOR_CONFIG} is named by ")
    status, report = why(capsys, operator_node(tmp_path, "written").text(OPERATOR_CONFIG, CDI_MODE), missing)
    assert status == 1 and verdicts(report) == {"toolkit-config": False}


def operator_node(tmp_path: Path, name: str) -> FakeHost:
    """containerd's nvidia handler runs the GPU Operator's wrapper, which points the toolkit at its own config."""
    host = node(tmp_path, name)
    host.text(
        "/etc/containerd/config.toml",
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
        '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        f'    BinaryName = "{OPERATOR}/nvidia-container-runtime"\n',
    )
    wrapper = (
        f'#!/bin/sh\nNVIDIA_CTK_CONFIG_FILE_PATH={OPERATOR_CONFIG} \\\n  {OPERATOR}/nvidia-container-runtime.real "$@"'
    )
    host.text(f"{OPERATOR}/nvidia-container-runtime", wrapper)
    (host.root / OPERATOR.lstrip("/") / "nvidia-container-runtime").chmod(0o755)
    return host


@needs_runtime
def test_the_installer_given_a_k3s_template_as_containerd_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The installer cannot be run here: its wrapping as cmd/nvidia-ctk-installer/container/runtime/containerd/
    # containerd.go Setup ('unable to load config: %v') and pkg/config/engine/containerd/containerd.go New ('failed
    # to load config: %v') write it at v1.20.0, around go-toml's own words on the template, measured.
    measured = toolkit(tmp_path, RUNTIME, K3S_TEMPLATE, ["state", "toolkit-test"])
    parse_error = measured[measured.index("(1, 1): parsing error") :].split('"')[0]
    text = (
        f'level=fatal msg="error running nvidia-toolkit: unable to load config: failed to load config: {parse_error}"'
    )
    template = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl"
    status, report = why(capsys, node(tmp_path, "k3s").text(template, K3S_TEMPLATE), text)
    assert status == 0
    assert signature_and_verdicts(report) == (["toolkit-config-refused"], {"engine-config": True})
    assert cause(report, "engine-config")["summary"].startswith(f"{template} is a Go template (line 1 has {{{{")
    assert any("CONTAINERD_CONFIG" in line for line in report["undecided"])
    plain = "version = 2\n"
    status, report = why(capsys, node(tmp_path, "plain").text("/etc/containerd/config.toml", plain), text)
    assert status == 1 and verdicts(report) == {"engine-config": False}


def low_level_runtime(tmp_path: Path, name: str) -> tuple[str, str]:
    """The runtime in cdi mode with a spec whose createContainer hook is /usr/bin/nvidia-ctk, running name: the
    low-level runtime's words on the hook (root, namespaces)."""
    program = shutil.which(name)
    if os.geteuid() != 0 or program is None or Path("/usr/bin/nvidia-ctk").exists():
        pytest.skip(f"{name} is not here, this is not root, or /usr/bin/nvidia-ctk exists")
    specs = tmp_path / "specs"
    specs.mkdir(exist_ok=True)
    (specs / "nvidia.yaml").write_text(GPU_ALL + CTK_HOOK)
    config = (
        f'[nvidia-container-runtime]\nmode = "cdi"\nruntimes = ["{program}"]\n'
        f'[nvidia-container-runtime.modes.cdi]\nspec-dirs = ["{specs}"]\n'
    )
    path = tmp_path / "config.toml"
    path.write_text(config)
    env = {"PATH": os.environ.get("PATH", ""), "NVIDIA_CTK_CONFIG_FILE_PATH": str(path)}
    state = tmp_path / f"{name}-state"
    args = [str(RUNTIME), "--root", str(state), "create", "--bundle", str(bundle(tmp_path)), f"toolkit-{name}"]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, check=False)
    return done.stdout + done.stderr, program


def cdi_hook_node(tmp_path: Path, name: str) -> FakeHost:
    host = node(tmp_path, name, CDI_MODE).text("/var/run/cdi/nvidia.yaml", GPU_ALL + CTK_HOOK)
    return host.executable("/usr/bin/nvidia-cdi-hook")


@needs_runtime
@pytest.mark.parametrize(
    "name, expected",
    [
        ("runc", "error running hook #0: fork/exec /usr/bin/nvidia-ctk: no such file or directory"),
        ("crun", "error executing hook `/usr/bin/nvidia-ctk` (exit code: 1)"),
    ],
)
def test_a_hook_program_the_node_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, expected: str
) -> None:
    text, program = low_level_runtime(tmp_path, name)
    if expected not in text:
        pytest.skip(f"{program} could not start a container here: {text.strip()[-300:]}")
    status, report = why(capsys, cdi_hook_node(tmp_path, "missing"), text)
    assert status == 0
    assert signature_and_verdicts(report) == (["hook-program-missing"], {"hook-program": True, "hook-source": True})
    source = cause(report, "hook-source")
    assert source["summary"] == "CDI spec /var/run/cdi/nvidia.yaml (/containerEdits/hooks/0) names /usr/bin/nvidia-ctk"
    assert "--nvidia-cdi-hook-path=/usr/bin/nvidia-cdi-hook" in source["fix"]
    assert source["evidence"] == [f"{CONFIG}'s nvidia-ctk.path (unset: the runtime's default)"]
    status, report = why(capsys, cdi_hook_node(tmp_path, "present").executable("/usr/bin/nvidia-ctk"), text)
    assert status == 1 and verdicts(report) == {"hook-program": False}


def test_a_hook_program_as_runc_1_2_words_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # runc 1.2 and later name the stage (libcontainer/configs/config.go Hooks.Run, 'error running %s hook #%d: %w');
    # the runc here is 1.1, so the stage's form is written as that source writes it.
    text = (
        "OCI runtime create failed: runc create failed: unable to start container process: error during container "
        "init: error running createContainer hook #0: fork/exec /usr/local/nvidia/toolkit/nvidia-cdi-hook: no such "
        "file or directory: unknown"
    )
    spec = GPU_ALL + CTK_HOOK.replace("/usr/bin/nvidia-ctk", f"{OPERATOR}/nvidia-cdi-hook")
    # The GPU Operator was removed; the spec it generated stayed.
    left = node(tmp_path, "left", CDI_MODE).text("/var/run/cdi/nvidia.yaml", spec)
    status, report = why(capsys, left, text)
    assert status == 0 and verdicts(report) == {"hook-program": True, "hook-source": True}
    assert "install nvidia-container-toolkit-base" in cause(report, "hook-source")["fix"]
    status, report = why(capsys, node(tmp_path, "clean", CDI_MODE), text)
    assert status == 0 and verdicts(report) == {"hook-program": True, "hook-source": False}


@needs_runtime
def test_no_low_level_runtime_from_the_candidates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("docker-runc") or Path("/opt/nvidia-test/runc").exists():
        pytest.skip("the candidates exist on this machine")
    listed = '[nvidia-container-runtime]\nruntimes = ["docker-runc", "/opt/nvidia-test/runc"]\n'
    text = create(tmp_path, listed)
    assert (
        "failed to create NVIDIA Container Runtime: error constructing low-level runtime: error locating runtime: no "
        "runtime binary found from candidate list: [docker-runc /opt/nvidia-test/runc]" in text
    )
    k3s = node(tmp_path, "k3s", listed).executable("/var/lib/rancher/k3s/data/current/bin/docker-runc")
    status, report = why(capsys, k3s, text)
    assert status == 0
    assert signature_and_verdicts(report) == (["toolkit-runtime-not-found"], {"low-level-runtime": True})
    found = cause(report, "low-level-runtime")
    assert "/opt/nvidia-test/runc: no such file" in found["evidence"]
    assert 'runtimes = ["/var/lib/rancher/k3s/data/current/bin/docker-runc"]' in found["fix"]
    status, report = why(capsys, node(tmp_path, "present", listed).executable("/usr/sbin/docker-runc"), text)
    assert status == 1 and verdicts(report) == {"low-level-runtime": False}

    empty = create(tmp_path, "[nvidia-container-runtime]\nruntimes = []\n")
    assert "error locating runtime: at least one runtime candidate must be specified" in empty
    status, report = why(capsys, node(tmp_path, "empty", "[nvidia-container-runtime]\nruntimes = []\n"), empty)
    assert status == 0 and verdicts(report) == {"low-level-runtime": True}
    status, report = why(capsys, node(tmp_path, "default", CDI_MODE), empty)
    assert status == 1 and verdicts(report) == {"low-level-runtime": False}


@needs_runtime
def test_a_mode_the_runtime_does_not_have(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    upper = '[nvidia-container-runtime]\nmode = "CDI"\n'
    text = create(tmp_path, upper)
    assert 'failed to construct OCI spec modifier: invalid mode \\"CDI\\"' in text
    status, report = why(capsys, node(tmp_path, "upper", upper), text)
    assert status == 0
    assert signature_and_verdicts(report) == (["toolkit-invalid-mode"], {"toolkit-mode": True})
    assert 'modes are lower case: "cdi"' in cause(report, "toolkit-mode")["summary"]
    status, report = why(capsys, node(tmp_path, "lower", CDI_MODE), text)
    assert status == 1 and verdicts(report) == {"toolkit-mode": False}

    blank = '[nvidia-container-runtime]\nmode = ""\n'
    text = create(tmp_path, blank)
    assert "failed to construct OCI spec modifier: a mode must be specified" in text
    status, report = why(capsys, node(tmp_path, "blank", blank), text)
    assert status == 0 and verdicts(report) == {"toolkit-mode": True}
    status, report = why(capsys, node(tmp_path, "unset", ""), text)
    assert status == 1 and verdicts(report) == {"toolkit-mode": False}

    # Before 1.18.0 there is no jit-cdi: 1.17.8's internal/runtime/runtime_factory.go newModeModifier words it.
    old = "failed to construct OCI spec modifier: invalid runtime mode: jit-cdi"
    jit = '[nvidia-container-runtime]\nmode = "jit-cdi"\n'
    status, report = why(capsys, node(tmp_path, "old", jit, "1.17.8-1"), old)
    assert status == 0 and "predates (1.18.0)" in cause(report, "toolkit-mode")["summary"]


@needs_runtime
def test_cdi_mode_without_a_spec_in_its_spec_dirs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    config = CDI_MODE + f'[nvidia-container-runtime.modes.cdi]\nspec-dirs = ["{tmp_path / "empty"}"]\n'
    text = create(tmp_path, config)
    assert "error modifying OCI spec: failed to inject CDI devices: unresolvable CDI devices nvidia.com/gpu=all" in text
    status, report = why(capsys, node(tmp_path, "none", CDI_MODE), text)
    assert status == 0
    ids, found = signature_and_verdicts(report)
    assert ids == ["cdi-unresolvable", "toolkit-cdi-unresolvable"]
    assert found["toolkit-cdi-specs"] is True
    assert "nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml" in cause(report, "toolkit-cdi-specs")["fix"]

    elsewhere = (
        '[nvidia-container-runtime]\nmode = "cdi"\n[nvidia-container-runtime.modes.cdi]\nspec-dirs = ["/var/run/cdi"]\n'
    )
    moved = node(tmp_path, "moved", elsewhere).text("/etc/cdi/nvidia.yaml", GPU_ALL)
    status, report = why(capsys, moved, text)
    assert verdicts(report)["toolkit-cdi-specs"] is True
    assert cause(report, "toolkit-cdi-specs")["fix"].startswith("add /etc/cdi to spec-dirs")

    status, report = why(capsys, node(tmp_path, "generated", CDI_MODE).text("/var/run/cdi/nvidia.yaml", GPU_ALL), text)
    assert verdicts(report)["toolkit-cdi-specs"] is False
