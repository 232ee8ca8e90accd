"""Configs and specs for the engine's tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Optional

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.engine.pipeline import plan
from nvidia_oci_hook.engine.records import Plan
from nvidia_oci_hook.host import HostView

BASE: dict[str, Any] = {
    "ociVersion": "1.0.2",
    "process": {"args": ["sh"], "cwd": "/", "env": ["PATH=/bin"], "user": {"uid": 0, "gid": 0}},
    "root": {"path": "rootfs"},
    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
    "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}, "namespaces": [{"type": "mount"}]},
}


def config(**changes: Any) -> dict[str, Any]:
    result = copy.deepcopy(BASE)
    for key, value in changes.items():
        result[key] = value
    return result


def device(path: str, major: int, minor: int, kind: str = "c") -> dict[str, Any]:
    return {"path": path, "type": kind, "major": major, "minor": minor}


def gpu_spec(kind: str = "example.com/gpu", devices: Optional[dict[str, Any]] = None, **edits: Any) -> dict[str, Any]:
    """A CDI spec: devices maps name -> containerEdits; edits are the spec-wide containerEdits."""
    spec: dict[str, Any] = {
        "cdiVersion": "0.5.0",
        "kind": kind,
        "devices": [
            {"name": name, "containerEdits": device_edits}
            for name, device_edits in (devices or {"0": {"deviceNodes": [device("/dev/nvidia0", 195, 0)]}}).items()
        ],
    }
    if edits:
        spec["containerEdits"] = edits
    return spec


def write_spec(directory: Path, name: str, spec: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(json.dumps(spec))
    return path


def settings(spec_dirs: tuple[str, ...] = ("/etc/cdi", "/var/run/cdi"), **values: Any) -> Settings:
    return Settings(cdi_spec_dirs=spec_dirs, **values)


def run(value: dict[str, Any], host_root: Path, **values: Any) -> Plan:
    before = copy.deepcopy(value)
    result = plan(value, HostView(str(host_root)), settings(**values))
    assert value == before, "the engine modified its input"
    return result


def codes(result: Plan) -> list[str]:
    return [edit.code for edit in result.edits] + [finding.code for finding in result.findings]
