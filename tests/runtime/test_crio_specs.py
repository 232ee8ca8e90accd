"""The specs cri-o 1.37 wrote (tests/runtime/crio-specs; tests/e2e/test_crio.py runs the same pods and compares)
through `lint` and `reconcile`, read as cri-o wrote them: tab-indented, with Go's escapes.

Each was written for a pod that is gone: its root filesystem and the files cri-o bind-mounts from the container's
run directory (/dev/shm, resolv.conf, hostname, .containerenv) no longer exist, and lint with the host says so for
those mounts and nothing else. None asks for anything the wrapper would change: the CDI ones came with their
device already injected by cri-o, from a `cdi_devices` request or a `cdi.k8s.io/` annotation, out of the spec
tests/e2e/gpu_request.py defines; where no spec defines that device, the annotation is unresolvable (REC001).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from tests.e2e.gpu_request import SPEC
from tests.runtime.precheck_corpus import CRIO_SPECS
from tests.runtime.support import write_config

SPECS = sorted(CRIO_SPECS.rglob("*.json"))
RUN_DIRECTORY = "/runroot/overlay-containers/"  # where cri-o keeps a container's own files while it exists


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def findings(out: str) -> list[dict[str, Any]]:
    (entry,) = json.loads(out)["files"]
    assert entry["kind"] == "oci", entry
    found: list[dict[str, Any]] = entry["findings"]
    return found


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """The tool's configuration on the node the CDI pods ran on: the spec cri-o injected their device from."""
    (tmp_path / "cdi").mkdir()
    (tmp_path / "cdi/gpu.json").write_text(json.dumps(SPEC))
    return write_config(tmp_path / "config.yaml", cdi={"spec_dirs": [str(tmp_path / "cdi")]})


def test_the_captured_specs_are_there() -> None:
    names = {str(path.relative_to(CRIO_SPECS)) for path in SPECS}
    assert names == {
        "plain.json",
        "annotated.json",
        "device.json",
        "privileged.json",
        "cdi-devices.json",
        "cdi-annotation.json",
    }


@pytest.mark.parametrize("path", SPECS, ids=lambda path: str(path.relative_to(CRIO_SPECS)))
def test_lint(path: Path, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "--config", str(config), "lint", "--offline", "--format", "json", str(path))
    assert (status, findings(out), err) == (0, [], "")

    spec = json.loads(path.read_text())
    gone = {
        f"/mounts/{index}/source": mount["source"]
        for index, mount in enumerate(spec["mounts"])
        if RUN_DIRECTORY in mount.get("source", "")
    }
    assert len(gone) == 4, gone
    status, out, _ = run(capsys, "--config", str(config), "lint", "--format", "json", str(path))
    found = findings(out)
    assert status == 1
    assert {(f["code"], f["pointer"]) for f in found} == {("HOST003", pointer) for pointer in gone}, found
    for finding in found:
        assert finding["message"].startswith(f"bind mount source {gone[finding['pointer']]} (for "), finding


@pytest.mark.parametrize("path", SPECS, ids=lambda path: str(path.relative_to(CRIO_SPECS)))
def test_reconcile_changes_nothing(
    path: Path, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "--config", str(config), "reconcile", str(path))
    assert (status, err) == (0, "0 edits, 0 problems left\n")
    assert json.loads(out) == json.loads(path.read_text())

    status, out, err = run(capsys, "--config", str(config), "reconcile", "--diff", str(path))
    assert (status, out, err) == (0, "", "0 edits, 0 problems left\n")

    copy = tmp_path / "config.json"
    shutil.copy(path, copy)
    status, _, _ = run(capsys, "--config", str(config), "reconcile", "--in-place", str(copy))
    assert status == 0
    assert copy.read_bytes() == path.read_bytes()


def test_an_annotation_no_spec_defines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same spec on a node whose CDI directories are empty: the request names a device nothing defines."""
    empty = tmp_path / "cdi"
    empty.mkdir()
    config = write_config(tmp_path / "config.yaml", cdi={"spec_dirs": [str(empty)]})
    path = CRIO_SPECS / "cdi-annotation.json"
    status, out, _ = run(capsys, "--config", str(config), "lint", "--format", "json", "--select", "REC", str(path))
    (found,) = findings(out)
    assert (status, found["code"], found["pointer"]) == (1, "REC001", "/annotations/cdi.k8s.io~1gpu"), found
    assert found["message"].startswith(
        "CDI device example.com/gpu=0 (annotation cdi.k8s.io/gpu) is unresolvable (not-defined)"
    ), found
    status, out, err = run(capsys, "--config", str(config), "reconcile", str(path))
    assert status == 1 and err.endswith("0 edits, 1 problem left\n") and "REC001" in err, err
    assert json.loads(out) == json.loads(path.read_text())
