"""The tools from ../shared/peers/bin that the benchmarks set beside the project's: cri-o and crictl, and NVIDIA's
nvidia-container-runtime and nvidia-container-runtime-hook, each given a configuration of its own in the
benchmark's workspace (nothing under /etc is read or written)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPOSITORY = Path(__file__).resolve().parents[1]
PEERS = REPOSITORY.parent / "shared/peers/bin"
# Where both of NVIDIA's programs read their configuration instead of /etc/nvidia-container-runtime/config.toml.
TOOLKIT_CONFIG_ENV = "NVIDIA_CTK_CONFIG_FILE_PATH"
TOOLKIT_RUNTIME = PEERS / "nvidia-container-runtime"
TOOLKIT_HOOK = PEERS / "nvidia-container-runtime-hook"
CRIO = PEERS / "crio"
MODE_LINE = re.compile(r"Auto-detected mode as '([^']+)'")


def missing(*programs: Path) -> Optional[str]:
    """Why these programs cannot be measured here, or None when all of them can."""
    absent = [program.name for program in programs if not program.is_file()]
    if not PEERS.is_dir():
        return f"{PEERS} is absent"
    if absent:
        return f"{', '.join(absent)} not in {PEERS}"
    return None


@dataclass(frozen=True)
class Toolkit:
    """NVIDIA's runtime and hook with their configuration: the shipped defaults (mode "auto") but for the
    low-level runtime, the hook's path and a log of its own."""

    config: Path
    log: Path

    @property
    def runtime(self) -> str:
        return str(TOOLKIT_RUNTIME)

    @property
    def hook(self) -> str:
        return str(TOOLKIT_HOOK)

    @property
    def env(self) -> dict[str, str]:
        return {TOOLKIT_CONFIG_ENV: str(self.config)}

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def modes(self) -> list[str]:
        """The mode the runtime resolved "auto" to, once per create it logged."""
        return MODE_LINE.findall(self.log_text())


def toolkit(directory: Path, runc: str, name: str = "nvidia-toolkit", cli: Optional[Path] = None) -> Toolkit:
    """The configuration written as config.toml is, in directory: `runtimes` the one low-level runtime measured,
    info-level logging (what the runtime did with each create: the mode it resolved) to NAME.log. cli, where
    given, is where the hook is told nvidia-container-cli is."""
    log = directory / f"{name}.log"
    lines = [
        "[nvidia-container-runtime]",
        f"debug = {json.dumps(str(log))}",
        'log-level = "info"',
        'mode = "auto"',
        f"runtimes = [{json.dumps(runc)}]",
        "",
        "[nvidia-container-runtime-hook]",
        f"path = {json.dumps(str(TOOLKIT_HOOK))}",
    ]
    if cli is not None:
        lines += ["", "[nvidia-container-cli]", f"path = {json.dumps(str(cli))}"]
    config = directory / f"{name}.toml"
    config.write_text("\n".join(lines) + "\n")
    return Toolkit(config, log)
