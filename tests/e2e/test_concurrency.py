"""64 containers started at once through the installed runtime dispatcher, every call an engine makes going
through it: create (Python reconciles), start, state until stopped, delete (the dispatcher execs runc itself).
Needs root and runc."""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e.bundles import base_config, bundle_rootfs, need, write_bundle
from tests.helpers import control_node
from tests.runtime.support import launchers, settled, write_config

pytestmark = [pytest.mark.root, pytest.mark.runtime]

CONTAINERS = 64
# A GPU node without its device-cgroup rule: opening it fails with EPERM. With the rule the wrapper adds, the open
# reaches the driver, which on a machine without a GPU answers ENXIO.
DEVICE = {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0, "fileMode": 0o666}
SCRIPT = "cat /dev/nvidia0 2>&1; echo ran"
ALLOWED = "cat: can't open '/dev/nvidia0': No such device or address\nran"


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(command, capture_output=True, timeout=120, check=False, **kwargs)  # type: ignore[call-overload,no-any-return]


def test_64_containers_at_once_through_the_dispatcher(tmp_path: Path) -> None:
    need("runc")
    rootfs = bundle_rootfs(tmp_path)
    log = tmp_path / "wrapper.log"
    config = settled(
        write_config(tmp_path / "config.yaml", runtime={"low_level": ["runc"]}, log={"file": str(log), "syslog": False})
    )
    _, dispatcher = launchers(tmp_path / "bin", config)
    state = tmp_path / "runc-state"
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}

    def one(index: int) -> str:
        name = f"e2e-many-{index}"
        spec = base_config(rootfs, SCRIPT)
        spec["linux"]["devices"] = [dict(DEVICE), control_node(fileMode=0o666)]
        spec["linux"]["cgroupsPath"] = f"/nvidia-oci-hook-e2e/{name}"
        bundle = write_bundle(tmp_path / name, spec)
        runtime = [str(dispatcher), "--root", str(state)]
        try:
            with open(bundle / "output", "wb") as sink:
                created = subprocess.run(
                    [*runtime, "create", "--bundle", str(bundle), name],
                    stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, env=env, timeout=120, check=False,
                )  # fmt: skip
            if created.returncode != 0:
                return f"create failed: {(bundle / 'output').read_text(errors='replace')}"
            started = _run([*runtime, "start", name], env=env)
            if started.returncode != 0:
                return f"start failed: {started.stderr.decode(errors='replace')}"
            deadline = time.monotonic() + 60
            status = None
            while time.monotonic() < deadline:
                answer = _run([*runtime, "state", name], env=env)
                status = json.loads(answer.stdout).get("status") if answer.returncode == 0 else None
                if status == "stopped":
                    break
                time.sleep(0.05)
            if status != "stopped":
                return f"still {status} after 60 s"
            return (bundle / "output").read_text(errors="replace")
        finally:
            _run([*runtime, "delete", "--force", name], env=env)

    with ThreadPoolExecutor(CONTAINERS) as pool:
        outputs = list(pool.map(one, range(CONTAINERS)))
    assert [output.strip() for output in outputs] == [ALLOWED] * CONTAINERS, [
        o for o in outputs if o.strip() != ALLOWED
    ]
    # Each container ran because the wrapper gave its device a cgroup rule; the dispatcher had its record.
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(entries) == CONTAINERS
    assert all(any(edit["code"] == "DEV003" for edit in entry["edits"]) for entry in entries), entries[0]
    assert (tmp_path / "bin/state/settings").read_text().startswith("present\nrunc\n")
    leftovers = _run(["runc", "--root", str(state), "list", "--quiet"]).stdout.split()
    assert leftovers == []
