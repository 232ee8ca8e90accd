"""The installed .deb under a real podman: podman reads the package's hooks directories (from the package's
containers.conf.d drop-in), and the package's precreate filter and guard act on a container.

The package is installed on this machine for the test and purged afterwards (CI runs on a throwaway machine);
podman gets its own storage and configuration (tests/podman_env.py), with hooks_dir as the drop-in says.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.formats.tomltext import parse_toml
from tests.e2e.gpu_request import ANNOTATION, PROBE, SPEC
from tests.packaging.test_deb import deb  # noqa: F401 - the fixture
from tests.podman_env import IMAGE, run_isolated

pytestmark = [pytest.mark.root, pytest.mark.runtime]

DROP_IN = Path("/etc/containers/containers.conf.d/50-nvidia-oci-hook.conf")
CONFIG = Path("/etc/nvidia-oci-hook/config.yaml")
LOG = Path("/var/log/nvidia-oci-hook.log")
TEST_SPEC = Path("/etc/cdi/nvidia-oci-hook-package-test.json")


def _dpkg(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["dpkg", *args], capture_output=True, text=True, env=env, timeout=300, check=False)


@pytest.fixture(scope="module")
def installed(deb: Path) -> Iterator[list[str]]:  # noqa: F811 - the fixture imported above
    """The package installed on this machine; yields the hooks_dir list its podman drop-in sets."""
    assert _dpkg("-s", "nvidia-oci-hook").returncode != 0, "nvidia-oci-hook is already installed here"
    created_spec_dir = not TEST_SPEC.parent.exists()
    try:
        result = _dpkg("-i", str(deb))
        assert result.returncode == 0, result.stdout + result.stderr
        parsed = parse_toml(DROP_IN.read_bytes())
        hooks_dirs = parsed.value["engine"]["hooks_dir"]
        TEST_SPEC.parent.mkdir(exist_ok=True)
        TEST_SPEC.write_text(json.dumps(SPEC))
        yield hooks_dirs
    finally:
        TEST_SPEC.unlink(missing_ok=True)
        if created_spec_dir and TEST_SPEC.parent.exists() and not any(TEST_SPEC.parent.iterdir()):
            TEST_SPEC.parent.rmdir()
        _dpkg("--purge", "nvidia-oci-hook")


def _run(*extra: str, name: str) -> list[str]:
    return ["run", "--rm", "--pull=never", "--annotation", name, *extra, IMAGE, "sh", "-c", PROBE]


def _entries() -> list[dict[str, Any]]:
    return [json.loads(line) for line in LOG.read_text().splitlines()] if LOG.exists() else []


def test_podman_runs_the_packaged_precreate_filter_and_guard(installed: list[str]) -> None:
    assert "/usr/share/nvidia-oci-hook/hooks.d" in installed and "/usr/share/containers/oci/hooks.d" in installed
    before = len(_entries())
    [applied] = run_isolated("hooks", [{"hooks_dirs": installed, "args": _run(name="=".join(ANNOTATION))}])
    assert applied["status"] == 0, applied["output"]
    assert applied["stdout"].splitlines()[:2] == ["env=1", "c3:0"], applied["output"]
    assert [entry["mode"] for entry in _entries()[before:]] == ["precreate"]
    # With the policy at never, an unknown device refuses nothing: the filter passes the spec on, the guard
    # (the packaged createRuntime hook) runs and logs what is wrong.
    original = CONFIG.read_text()
    try:
        CONFIG.write_text(original + "policy:\n  fail_on: never\n")
        [passed] = run_isolated(
            "hooks", [{"hooks_dirs": installed, "args": _run(name="cdi.k8s.io/gpu=example.com/gpu=9")}]
        )
    finally:
        CONFIG.write_text(original)
    assert passed["status"] == 0 and passed["stdout"].startswith("env=\n"), passed["output"]
    modes = [(entry["mode"], [f["code"] for f in entry["findings"]]) for entry in _entries()[before + 1 :]]
    assert modes == [("precreate", ["REC001"]), ("prestart", ["REC001"])], modes
