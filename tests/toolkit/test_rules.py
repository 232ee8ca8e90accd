"""Every NCT rule: a config.toml (and node) that triggers it, and a clean twin that must not; detection, the
release named by --engine, and lint --node finding the file where the toolkit reads it."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import pytest

from nvidia_oci_hook.findings import Finding
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.document import parse_document
from nvidia_oci_hook.kinds.toolkit import TOOLKIT
from nvidia_oci_hook.lint import LintOptions, active_rules, lint_document, lint_paths
from nvidia_oci_hook.rules.base import Context, all_rules
from tests.helpers import FakeHost

CONFIG = "/etc/nvidia-container-runtime/config.toml"
LIB = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"


def host_driver(host: FakeHost) -> None:
    no_cli(host)
    host.executable("/usr/bin/nvidia-container-cli")


def no_cli(host: FakeHost) -> None:
    host.text(LIB, "ELF").executable("/usr/bin/nvidia-container-runtime-hook").executable("/usr/sbin/runc")
    host.file("/sbin/ldconfig")


def no_driver(host: FakeHost) -> None:
    host.executable("/usr/bin/nvidia-container-runtime-hook").executable("/usr/sbin/runc")
    host.executable("/usr/bin/nvidia-container-cli").file("/sbin/ldconfig")


GPU_SPEC = (
    "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n  containerEdits:\n    deviceNodes:\n"
    "    - path: /dev/nvidia0\n"
)


def cdi_spec(host: FakeHost) -> None:
    host_driver(host)
    host.text("/var/run/cdi/nvidia.yaml", GPU_SPEC).device("/dev/nvidia0", "c", 195, 0)


def cdi_spec_without_node(host: FakeHost) -> None:
    host_driver(host)
    host.text("/var/run/cdi/nvidia.yaml", GPU_SPEC)


def csv_files(host: FakeHost) -> None:
    host_driver(host)
    host.text("/etc/nvidia-container-runtime/host-files-for-container.d/devices.csv", "dev, /dev/nvidia0\n")
    host.device("/dev/nvidia0", "c", 195, 0)


def crio_hook(host: FakeHost) -> None:
    host_driver(host)
    host.directory("/etc/crio")
    hook = {"version": "1.0.0", "hook": {"path": "/usr/bin/nvidia-container-runtime-hook"}, "when": {"always": True}}
    host.text("/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json", json.dumps(hook))


def kubelet(host: FakeHost) -> None:
    host_driver(host)
    host.directory("/var/lib/kubelet")


def crio_cdi_dirs(host: FakeHost) -> None:
    cdi_spec(host)
    host.text("/etc/crio/crio.conf", '[crio.runtime]\ncdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]\n')
    host.text("/opt/cdi/nvidia.yaml", GPU_SPEC)


@dataclass
class Case:
    code: str
    trigger: str
    clean: str
    host: Callable[[FakeHost], None] = host_driver
    release: Optional[str] = None


LEGACY = '[nvidia-container-runtime]\nmode = "legacy"\n'
ACCEPT_BOTH = (
    "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n"
    "accept-nvidia-visible-devices-as-volume-mounts = true\n"
)
CDI = '[nvidia-container-runtime]\nmode = "cdi"\n[nvidia-container-runtime.modes.cdi]\n'
CASES = [
    Case(
        "NCT001",
        'accept-nvidia-visible-devices-envvar-when-unprivileged = "false"\n',
        "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n",
    ),
    Case(
        "NCT001",
        '[nvidia-container-cli]\nldconfig = "/sbin/ldconfig"\n',
        '[nvidia-container-cli]\nldconfig = "@/sbin/ldconfig"\n',
    ),
    Case("NCT001", "mode = {{ .Mode }}\n", 'mode = "x"\n'),
    Case(
        "NCT002",
        "[nvidia-container-runtime.modes.cdi]\nspec-dir = []\n",
        "[nvidia-container-runtime.modes.cdi]\nspec-dirs = []\n",
    ),
    Case(
        "NCT002",
        "[nvidia-container-runtime.modes.jit-cdi]\nnvcdi-feature-flags = []\n",
        "[nvidia-container-runtime.modes.cdi]\n",
        release="1.17.8",
    ),
    Case(
        "NCT003",
        '[nvidia-container-runtime]\nmode = "jit-cdi"\n',
        '[nvidia-container-runtime]\nmode = "jit-cdi"\n'.replace("jit-cdi", "cdi"),
        release="1.17",
    ),
    Case("NCT003", '[nvidia-container-runtime]\nmode = "cdi2"\n', LEGACY),
    Case(
        "NCT004",
        'supported-driver-capabilities = "compute,gpu"\n',
        'supported-driver-capabilities = "compute,utility"\n',
    ),
    Case(
        "NCT005",
        '[nvidia-container-runtime]\nlog-level = "verbose"\n',
        '[nvidia-container-runtime]\nlog-level = "debug"\n',
    ),
    Case(
        "NCT101",
        LEGACY + '[nvidia-container-cli]\nroot = "/run/nvidia/driver"\n',
        LEGACY + '[nvidia-container-cli]\nroot = "/"\n',
    ),
    Case(
        "NCT102",
        LEGACY + 'runtimes = ["/usr/local/sbin/runc"]\n',
        LEGACY + 'runtimes = ["/usr/local/sbin/runc", "runc"]\n',
    ),
    Case("NCT102", LEGACY + "runtimes = []\n", LEGACY, host=host_driver),
    Case(
        "NCT103",
        LEGACY + '[nvidia-container-runtime-hook]\npath = "/usr/local/nvidia/toolkit/nvidia-container-runtime-hook"\n',
        LEGACY,
    ),
    Case(
        "NCT104",
        CDI + 'default-kind = "example.com/gpu"\n',
        '[nvidia-container-runtime]\nmode = "cdi"\n',
        host=cdi_spec,
    ),
    Case(
        "NCT105",
        '[nvidia-container-runtime]\nmode = "cdi"\n',
        '[nvidia-container-runtime]\nmode = "cdi"\n[nvidia-container-runtime-hook]\nskip-mode-detection = true\n',
        host=crio_hook,
    ),
    Case("NCT104", CDI, CDI, host=cdi_spec_without_node, release="1.20.0"),
    Case("NCT006", "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n", ACCEPT_BOTH),
    Case("NCT109", '[nvidia-container-runtime]\nmode = "csv"\n', '[nvidia-container-runtime]\nmode = "csv"\n'),
    Case(
        "NCT101",
        LEGACY + '[nvidia-container-runtime.modes.legacy]\ncuda-compat-mode = "hook"\n',
        LEGACY,
        host=no_driver,
    ),
    Case("NCT103", LEGACY, LEGACY, host=no_cli),
    Case("NCT106", LEGACY, LEGACY, host=crio_hook, release="1.18.0"),
    Case("NCT107", LEGACY, "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n" + LEGACY, host=kubelet),
    Case(
        "NCT108",
        CDI + 'spec-dirs = ["/opt/cdi"]\n',
        CDI + 'spec-dirs = ["/etc/cdi", "/var/run/cdi"]\n',
        host=crio_cdi_dirs,
    ),
]
# NCT106's clean twin differs in the release that judges it, not in the file.
CLEAN_RELEASE = {"NCT106": "1.17.8"}
# Cases whose clean twin runs on another node (the trigger's node lacks what the twin's has).
CLEAN_HOST = {("NCT104", 1): cdi_spec, ("NCT109", 0): csv_files, ("NCT103", 1): host_driver}


def lint_toml(text: str, host_root: Path, release: Optional[str]) -> list[Finding]:
    document = parse_document(CONFIG, text.encode())
    assert document.kind == TOOLKIT
    context = Context(host=HostView(str(host_root)), toolkit_release=release)
    return lint_document(document, active_rules(LintOptions()), context)


def _id(case: Case) -> str:
    return f"{case.code}-{CASES.index(case)}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_rule_fires_on_trigger(case: Case, fake_host: FakeHost) -> None:
    case.host(fake_host)
    found = lint_toml(case.trigger, fake_host.root, case.release)
    assert case.code in [f.code for f in found], [(f.code, f.message) for f in found]


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_rule_silent_on_clean_twin(case: Case, fake_host: FakeHost) -> None:
    nth = [c for c in CASES if c.code == case.code].index(case)
    CLEAN_HOST.get((case.code, nth), case.host)(fake_host)
    found = lint_toml(case.clean, fake_host.root, CLEAN_RELEASE.get(case.code, case.release))
    assert case.code not in [f.code for f in found], [(f.code, f.message) for f in found]


def test_every_toolkit_rule_has_a_case() -> None:
    registered = {rule.code for rule in all_rules() if rule.code.startswith("NCT")}
    assert registered == {case.code for case in CASES}


def test_refusal_quotes_the_release_with_the_decoders_position(fake_host: FakeHost) -> None:
    text = "# the toolkit's file\n[nvidia-container-runtime]\n  debug = 1\n"
    found = [f for f in lint_toml(text, fake_host.root, "1.20.0") if f.code == "NCT001"]
    assert len(found) == 1 and found[0].line == 3
    assert (
        "`error loading config: failed to unmarshal config: (3, 3): Can't convert 1(int64) to string`"
        in found[0].message
    )


def test_keys_in_capitals_are_read_as_go_toml_v1_reads_them(fake_host: FakeHost) -> None:
    host_driver(fake_host)
    found = lint_toml('[nvidia-container-runtime]\nMODE = "cdi2"\n', fake_host.root, None)
    assert [f.code for f in found if f.code in ("NCT002", "NCT003")] == ["NCT003"]


def test_byte_order_mark_is_read_as_the_toolkit_reads_it(fake_host: FakeHost) -> None:
    document = parse_document(CONFIG, b"\xef\xbb\xbf" + LEGACY.encode())
    assert document.parsed and document.kind == TOOLKIT


def test_detected_by_content_without_its_name(tmp_path: Path) -> None:
    path = tmp_path / "toolkit.toml"
    path.write_text('[nvidia-container-cli]\nroot = "/run/nvidia/driver"\n')
    assert parse_document(str(path), path.read_bytes()).kind == TOOLKIT
    containerd = tmp_path / "containerd" / "config.toml"
    containerd.parent.mkdir()
    containerd.write_text("version = 2\n")
    assert parse_document(str(containerd), containerd.read_bytes()).kind != TOOLKIT


def test_engine_option_names_the_release_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[nvidia-container-runtime]\nmode = "jit-cdi"\n')
    run = [sys.executable, "-m", "nvidia_oci_hook", "lint", "--offline", "--kind", TOOLKIT, str(path)]
    old = subprocess.run([*run, "--engine", "nvidia-container-toolkit=1.17.8"], capture_output=True, text=True)
    new = subprocess.run([*run, "--engine", "nvidia-container-toolkit=1.18"], capture_output=True, text=True)
    bad = subprocess.run([*run, "--engine", "nvidia-container-toolkit=1.9"], capture_output=True, text=True)
    assert old.returncode == 1 and "NCT003" in old.stdout and "toolkit 1.17.8" in old.stdout
    assert new.returncode == 0, new.stdout
    assert bad.returncode == 2 and "1.14.0 to 1.20.0" in bad.stderr and "Traceback" not in bad.stderr


def test_lint_node_reads_the_operators_file_its_wrapper_names(fake_host: FakeHost) -> None:
    """Seed 000's second home: the GPU Operator's toolkit sets root = /run/nvidia/driver while the driver is on /."""
    host_driver(fake_host)
    toolkit = "/usr/local/nvidia/toolkit"
    fake_host.text(
        f"{toolkit}/nvidia-container-runtime",
        f"#! /bin/sh\nNVIDIA_CTK_CONFIG_FILE_PATH={toolkit}/.config/nvidia-container-runtime/config.toml \\\n"
        f'\t{toolkit}/nvidia-container-runtime.real \\\n\t\t"$@"\n',
    )
    fake_host.text(
        "/etc/containerd/config.toml",
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        'runtime_type = "io.containerd.runc.v2"\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        f'BinaryName = "{toolkit}/nvidia-container-runtime"\n',
    )
    fake_host.text(
        f"{toolkit}/.config/nvidia-container-runtime/config.toml",
        LEGACY + '[nvidia-container-cli]\nroot = "/run/nvidia/driver"\n',
    )
    run = lint_paths((), LintOptions(node=True, host_root=str(fake_host.root), toolkit_release="1.17.8"))
    toolkit_files = [result for result in run.files if result.kind == TOOLKIT]
    assert [result.path for result in toolkit_files] == [f"{toolkit}/.config/nvidia-container-runtime/config.toml"]
    messages = [f.message for f in toolkit_files[0].findings if f.code == "NCT101"]
    assert len(messages) == 1 and "the node's driver is under /" in messages[0]


def test_refusals_quote_the_words_the_real_runtime_printed() -> None:
    """Every configuration the real nvidia-container-runtime 1.20.0 refused to load (agreement.json, recorded by
    tests/toolkit/agreement.py) gets an NCT001 that quotes the runtime's own first line, position included."""
    recorded = json.loads((Path(__file__).parent / "agreement.json").read_text())["cases"]
    refused = [case for case in recorded if case["verdict"] == "refused"]
    rules = active_rules(LintOptions(select=("NCT001",)))
    unquoted = []
    for case in refused:
        document = parse_document(CONFIG, case["config"].encode("utf-8", "surrogateescape"))
        messages = [f.message for f in lint_document(document, rules, Context(toolkit_release="1.20.0"))]
        said = case["text"].split("\n")[0]
        if not any(said in message for message in messages):
            unquoted.append(f"{case['id']}: runtime `{said}`, lint {messages}")
    assert len(refused) >= 30 and not unquoted, "\n".join(unquoted)


def test_a_config_that_cannot_be_read_is_the_toolkits_refusal_not_an_error_of_ours(fake_host: FakeHost) -> None:
    host_driver(fake_host)
    fake_host.directory(CONFIG)
    run = lint_paths((), LintOptions(node=True, host_root=str(fake_host.root), select=("NCT",)))
    found = [f for result in run.files if result.kind == TOOLKIT for f in result.findings]
    assert [(f.code, f.path) for f in found] == [("NCT001", CONFIG)] and "cannot read this file" in found[0].message
