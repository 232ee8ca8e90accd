"""Containers under real runc and crun, through the wrapper or not: busybox bundles and a create/start/wait cycle.

The wrapper acts on `create` only, as every engine runs it, so containers here are created and started as an
engine would: `create` (through the wrapper or straight to the runtime), `start`, wait until stopped, `delete`.
The container's output goes to a file given as the create's stdout and stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.podman_env import busybox_rootfs

HUGETLB_V2 = Path("/sys/fs/cgroup/unified/cgroup.controllers")


def need(binary: str) -> str:
    found = shutil.which(binary)
    if found is None:
        pytest.fail(f"{binary} is not installed (scripts/setup test installs it)")
    return found


def prepare_crun() -> None:
    """crun 1.8 fails on a hybrid hierarchy whose hugetlb controller sits on cgroup v2 (FACTS.md section 7)."""
    if HUGETLB_V2.exists() and "hugetlb" in HUGETLB_V2.read_text().split():
        target = Path("/sys/fs/cgroup/hugetlb")
        target.mkdir(exist_ok=True)
        subprocess.run(["mount", "-t", "cgroup", "-o", "hugetlb", "cgroup", str(target)], check=False)


def bundle_rootfs(directory: Path) -> Path:
    """busybox with every applet, and the mount points the configs here use."""
    rootfs = busybox_rootfs(directory / "rootfs", applets=None)
    for name in ("proc", "dev", "sys", "etc", "tmp"):
        (rootfs / name).mkdir()
    return rootfs


def base_config(rootfs: Path, script: str) -> dict[str, Any]:
    """runc spec's defaults, without a terminal, running script in sh."""
    capabilities = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": 0, "gid": 0},
            "args": ["/bin/sh", "-c", script],
            "env": ["PATH=/bin"],
            "cwd": "/",
            "capabilities": {key: list(capabilities) for key in ("bounding", "effective", "permitted")},
            "noNewPrivileges": True,
        },
        "root": {"path": str(rootfs), "readonly": True},
        "hostname": "e2e",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {
                "destination": "/dev",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
            },
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
        ],
        "linux": {
            "resources": {"devices": [{"allow": False, "access": "rwm"}]},
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")],
        },
    }


def privileged(config: dict[str, Any]) -> dict[str, Any]:
    """What the engines make of a privileged container: every capability in the bounding set, every device allowed."""
    config["process"]["capabilities"]["bounding"].append("CAP_SYS_ADMIN")
    config["linux"]["resources"]["devices"] = [{"allow": True, "access": "rwm"}]
    return config


class Outcome:
    def __init__(self, created: bool, create_error: str, output: str) -> None:
        self.created = created
        self.create_error = create_error  # what create printed when it failed
        self.output = output  # the container's stdout and stderr (with create's own messages, if any)


class Runtime:
    """One runtime (runc or crun) with its own state directory."""

    def __init__(self, name: str, state: Path) -> None:
        self.binary = need(name)
        self.name = name
        self.state = state
        if name == "crun":
            prepare_crun()

    def cycle(
        self,
        bundle: Path,
        container_id: str,
        create_with: Optional[list[str]] = None,
        env: Optional[dict[str, str]] = None,
        timeout: float = 20,
    ) -> Outcome:
        """create (with create_with in front of the runtime's own argv, e.g. the wrapper), start, wait, delete."""
        output = bundle / "output"
        front = create_with or [self.binary]
        # Without a cgroups path runc lands the container in a cgroup other processes share, and says so.
        config = json.loads((bundle / "config.json").read_text())
        # The cgroup is the machine's: the pid keeps two test runs' containers of one name apart (runc's delete
        # --force kills what is in it).
        config["linux"]["cgroupsPath"] = f"/nvidia-oci-hook-e2e/{container_id}-{os.getpid()}"
        # Compact, as the engines write config.json.
        (bundle / "config.json").write_text(json.dumps(config, separators=(",", ":")))
        with open(output, "wb") as sink:
            created = subprocess.run(
                [*front, "--root", str(self.state), "create", "--bundle", str(bundle), container_id],
                stdin=subprocess.DEVNULL,
                stdout=sink,
                # The container inherits create's stdio: a pipe would stay open until the container exits.
                stderr=sink,
                env=env,
                timeout=timeout,
                check=False,
            )
        if created.returncode != 0:
            self.delete(container_id)
            return Outcome(False, output.read_text(errors="replace"), "")
        subprocess.run([self.binary, "--root", str(self.state), "start", container_id], check=True, timeout=timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = subprocess.run(
                [self.binary, "--root", str(self.state), "state", container_id],
                capture_output=True,
                timeout=timeout,
                check=False,
            )
            if state.returncode != 0 or json.loads(state.stdout).get("status") == "stopped":
                break
            time.sleep(0.02)
        self.delete(container_id)
        return Outcome(True, "", output.read_text(errors="replace"))

    def delete(self, container_id: str) -> None:
        subprocess.run(
            [self.binary, "--root", str(self.state), "delete", "--force", container_id],
            capture_output=True,
            timeout=30,
            check=False,
        )


def write_bundle(directory: Path, config: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    return directory
