"""What the engine tests request and probe: a GPU asked for by a CDI annotation that only the wrapper resolves, and
the wrapper set up as an engine would run it (a runtime path, with its configuration)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import control_node
from tests.runtime.support import launchers, settled, write_config

SPEC = {
    "cdiVersion": "0.5.0",
    "kind": "example.com/gpu",
    "devices": [
        {
            "name": "0",
            "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}]},
        }
    ],
    # As nvidia-ctk writes it: the control node, which every GPU needs, for all devices of the spec.
    "containerEdits": {"env": ["GPU_FROM_CDI=1"], "deviceNodes": [control_node()]},
}
ANNOTATION = ("cdi.k8s.io/gpu", "example.com/gpu=0")
# The variable, the node's numbers (hex) and what opening it gives: ENXIO (no GPU here) once it is allowed.
PROBE = 'echo "env=$GPU_FROM_CDI"; /bin/busybox stat -c %t:%T /dev/nvidia0; cat /dev/nvidia0 2>&1; true'


class Wrapper:
    """The spec directory, the tool's configuration, its log, the hook launcher and a runtime path for engines."""

    def __init__(self, directory: Path) -> None:
        (directory / "cdi").mkdir(parents=True)
        (directory / "cdi/gpu.json").write_text(json.dumps(SPEC))
        self.log = directory / "wrapper.log"
        self.config = settled(
            write_config(
                directory / "config.yaml",
                runtime={"low_level": ["runc"]},
                cdi={"spec_dirs": [str(directory / "cdi")]},
                log={"file": str(self.log), "syslog": False},
            )
        )
        # The engines run the dispatcher as installed, with the configuration where it reads it: every call but
        # create goes from the dispatcher straight to runc.
        self.hook, self.runtime = launchers(directory / "bin", self.config)

    def entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []
