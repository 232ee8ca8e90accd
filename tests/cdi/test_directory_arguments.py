"""Several directory arguments of one kind are read together, in order, as the engine reads its list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvidia_oci_hook.cli import main

SPEC = """\
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
  - name: "0"
    containerEdits:
      deviceNodes:
        - path: /dev/nvidia0
          type: c
          major: 195
          minor: 0
containerEdits:
  deviceNodes:
    - path: /dev/nvidiactl
      type: c
      major: 195
      minor: 255
"""


def test_later_spec_directory_overrides_the_earlier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    etc, run = tmp_path / "etc-cdi", tmp_path / "var-run-cdi"
    for directory in (etc, run):
        directory.mkdir()
        (directory / "nvidia.yaml").write_text(SPEC)
    status = main(["lint", "--offline", "--format", "json", str(etc), str(run)])
    report = json.loads(capsys.readouterr().out)
    overridden = [
        (file["path"], f["code"]) for file in report["files"] for f in file["findings"] if f["code"] == "CDI202"
    ]
    assert overridden == [(str(etc / "nvidia.yaml"), "CDI202")]
    assert status == 0
