"""Launchers as the packages install them, a fake runtime that records how it was run, and configs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

from nvidia_oci_hook.launcher import write_launchers

# The interpreter the launchers use; Debian's own starts fastest and has the standard library alone.
INTERPRETER = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

FAKE_RUNTIME = """#!/bin/sh
# Records its arguments and the bundle's config.json, then answers like runc.
printf '%s\\n' "$@" > "$RECORD_DIR/args"
for arg; do
  if [ "$prev" = --bundle ] || [ "$prev" = -b ]; then cp "$arg/config.json" "$RECORD_DIR/config.json"; fi
  prev=$arg
done
echo "$$" > "$RECORD_DIR/pid"
echo '{"status":"created"}'
"""


def launchers(directory: Path, config: Optional[Path] = None, interpreter: Optional[Path] = None) -> tuple[Path, Path]:
    """The hook's front and the runtime dispatcher, the dispatcher reading config (default: the node's path), both
    keeping their record under directory, never in the node's /run."""
    written = write_launchers(
        str(directory),
        str(interpreter or INTERPRETER),
        config_path=str(config) if config else None,
        state_dir=str(directory / "state"),
    )
    hook, runtime = (Path(p) for p in written)
    return hook, runtime


def counting_interpreter(directory: Path) -> tuple[Path, Path]:
    """An interpreter for the launchers that counts its starts: (its path, the file with one line per start)."""
    starts = directory / "python-starts"
    shim = directory / "python3"
    shim.write_text(f'#!/bin/sh\necho started >> {starts}\nexec {INTERPRETER} "$@"\n')
    shim.chmod(0o755)
    return shim, starts


def python_starts(starts: Path) -> int:
    return len(starts.read_text().splitlines()) if starts.exists() else 0


def settled(config: Path) -> Path:
    """The configuration as a node's is when containers start: written a while before, so that the wrapper
    records its runtime names for the dispatcher at once."""
    stamp = config.stat().st_mtime - 60
    os.utime(config, (stamp, stamp))
    return config


def fake_runtime(directory: Path) -> Path:
    path = directory / "fake-runc"
    path.write_text(FAKE_RUNTIME)
    path.chmod(0o755)
    return path


def write_config(path: Path, **sections: Any) -> Path:
    """A configuration file for the tool: sections as keyword arguments ({"policy": {...}})."""
    lines = []
    for section, values in sections.items():
        if isinstance(values, dict):
            lines.append(f"{section}:")
            lines.extend(f"  {key}: {json.dumps(value)}" for key, value in values.items())
        else:
            lines.append(f"{section}: {json.dumps(values)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def run(
    command: list[str], *, stdin: bytes = b"", env: Optional[dict[str, str]] = None, cwd: Optional[Path] = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(command, input=stdin, capture_output=True, env=env, cwd=cwd, timeout=60, check=False)
