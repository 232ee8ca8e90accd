"""The runtime-facing modes import only the standard library's cheap modules and the engine (DESIGN.md).

Checked in a fresh interpreter started as the launchers start it (-I -S), after each mode has done real work:
a CDI request resolved from a YAML spec, a configuration file read, a config reconciled and written.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.engine.support import config, device, gpu_spec
from tests.helpers import control_node
from tests.runtime.support import INTERPRETER, write_config

REPOSITORY = Path(__file__).resolve().parents[2]

# Costly at start-up (each a few milliseconds or more), or not the standard library at all.
FORBIDDEN = {
    "click", "yaml", "jsonschema", "tomli", "re", "typing", "dataclasses", "json", "enum", "inspect", "functools",
    "collections", "logging", "tempfile", "shutil", "subprocess", "contextlib", "pathlib", "importlib.metadata",
    "difflib", "copy", "os", "posixpath", "genericpath", "_collections_abc",
}  # fmt: skip
ENGINE_MODULES = {
    "nvidia_oci_hook", "nvidia_oci_hook.config", "nvidia_oci_hook.entry", "nvidia_oci_hook.host", "nvidia_oci_hook.io",
    "nvidia_oci_hook.leanos", "nvidia_oci_hook.runtime.codecache",
    "nvidia_oci_hook.engine", "nvidia_oci_hook.engine.cdi", "nvidia_oci_hook.engine.cdi_apply",
    "nvidia_oci_hook.engine.cdi_spec", "nvidia_oci_hook.engine.jsoncodec", "nvidia_oci_hook.engine.pipeline",
    "nvidia_oci_hook.engine.records", "nvidia_oci_hook.engine.requests", "nvidia_oci_hook.engine.transforms",
    "nvidia_oci_hook.runtime", "nvidia_oci_hook.runtime.dispatch", "nvidia_oci_hook.runtime.hooks",
    "nvidia_oci_hook.runtime.logbook",
    "nvidia_oci_hook.runtime.wrapper", "nvidia_oci_hook.runtime.messages",
    "nvidia_oci_hook.kinds", "nvidia_oci_hook.kinds.cdinames", "nvidia_oci_hook.kinds.devices",
    "nvidia_oci_hook.kinds.oci",
    "nvidia_oci_hook.formats", "nvidia_oci_hook.formats.leanyaml",
}  # fmt: skip

PROGRAM = """
import io, sys
sys.path.insert(0, {repository!r})
before = set(sys.modules)
from nvidia_oci_hook.config import load_settings
from nvidia_oci_hook.runtime import hooks, wrapper
from nvidia_oci_hook.engine import jsoncodec
settings = load_settings({settings!r})
invocation = wrapper.parse_invocation(["create", "--bundle", {bundle!r}, "c1"])
assert wrapper.reconcile_bundle(invocation, settings) is None
state = {{"ociVersion": "1.0.2", "id": "c1", "status": "creating", "bundle": {bundle!r}}}
findings, refusal = hooks.guard(jsoncodec.dumps(state).encode(), settings)
assert refusal is None, refusal
output, refusal = hooks.precreate(open({bundle!r} + "/config.json", "rb").read(), settings)
assert refusal is None
imported = sorted(set(sys.modules) - before)
print(" ".join(imported))
print(" ".join(n for n in imported if n.split(".")[0] not in sys.stdlib_module_names))
"""


# What NVIDIA's tools act on: the runtime path reads none of it, so it must import nothing of the driver layer.
NVIDIA_ENV = [
    "NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=tesla,driver>=470,driver<471",
    "NVIDIA_VISIBLE_DEVICES=0",
    "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
    "CUDA_VERSION=12.8.0",
]


@pytest.mark.parametrize("env", [[], NVIDIA_ENV], ids=["plain", "nvidia-variables"])
def test_runtime_modes_import_only_cheap_standard_modules_and_the_engine(tmp_path: Path, env: list[str]) -> None:
    spec_dir = tmp_path / "cdi"
    spec_dir.mkdir()
    spec = gpu_spec(env=["FROM_SPEC=1"])
    lines = json.dumps(spec, indent=2)  # JSON is YAML; the file's name makes the engine read it as YAML
    (spec_dir / "gpu.yaml").write_text(lines)
    settings = write_config(
        tmp_path / "config.yaml",
        cdi={"spec_dirs": [str(spec_dir)]},
        log={"file": str(tmp_path / "log"), "syslog": False},
    )
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    value = config(annotations={"cdi.k8s.io/gpu": "example.com/gpu=0"})
    value["process"]["env"] += env
    value["linux"]["devices"] = [device("/dev/nvidia0", 195, 0)] * 2 + [control_node()]
    (bundle / "config.json").write_text(json.dumps(value))
    program = PROGRAM.format(repository=str(REPOSITORY), settings=str(settings), bundle=str(bundle))
    result = subprocess.run(
        [INTERPRETER, "-I", "-S", "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    all_lines, outside_stdlib = result.stdout.split("\n")[:2]
    imported = set(all_lines.split())
    edited = json.loads((bundle / "config.json").read_text())
    assert "FROM_SPEC=1" in edited["process"]["env"], "the modes did no real work: the test would prove nothing"
    assert imported & FORBIDDEN == set()
    ours = {name for name in imported if name.split(".")[0] == "nvidia_oci_hook"}
    assert ours <= ENGINE_MODULES, sorted(ours - ENGINE_MODULES)
    assert not {name for name in ours if name.startswith(("nvidia_oci_hook.nvidia", "nvidia_oci_hook.node"))}
    assert set(outside_stdlib.split()) == ours
