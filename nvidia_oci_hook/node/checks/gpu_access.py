"""doctor's `gpu-access`: whether every running container can still open the NVIDIA nodes its spec gave it.

A GPU container loses its GPUs while it runs when its device cgroup is applied again without the NVIDIA rules (a
`systemctl daemon-reload` under the systemd cgroup driver with runc 1.1.3 to 1.1.6, rules that legacy injection
added behind the engine's back; node/containers.py reads the rules in force): it keeps running, and NVML says
"Unknown Error". The evidence names each container that lost access and its state file; one whose device rules
cannot be read here is not judged. The fix restarts the containers; with `--fix --restore-device-access`, doctor
writes the spec's own rules back into each one's cgroup v1 device controller, and only into a device cgroup under
/sys/fs/cgroup.
"""

from __future__ import annotations

import errno
import posixpath
from typing import Callable

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.base import ERROR, OK, UNKNOWN, Check, Repair

NAME = "gpu-access"
CGROUP_ROOT = "/sys/fs/cgroup"


class NotACgroup(OSError):
    """A state file names a cgroup that is not a device cgroup under the node's /sys/fs/cgroup: the repair is
    refused, and says why as any failed repair does (its strerror)."""


def allow_file(host: HostView, cgroup: str) -> str:
    """The devices.allow of a container's own device cgroup: the path from its state file, resolved inside the
    host root, must be a directory below /sys/fs/cgroup holding devices.allow, or nothing is written."""
    canonical = host.canonical(cgroup)
    if canonical is None or not canonical.startswith(CGROUP_ROOT + "/") or not host.is_dir(canonical):
        raise NotACgroup(errno.EPERM, f"{cgroup} is not a cgroup directory under {CGROUP_ROOT}")
    target = posixpath.join(canonical, "devices.allow")
    if not host.is_file(target):
        raise NotACgroup(errno.EPERM, f"{canonical} has no devices.allow (not a cgroup v1 device cgroup)")
    return target


def gpu_access_check(host: HostView, restore: bool = False, runtime_roots: tuple[str, ...] = ()) -> Check:
    """Whether every running container can still open the NVIDIA nodes its spec gave it."""
    from nvidia_oci_hook.node.containers import device_access, running_containers, spec_rules_for

    containers = running_containers(host, runtime_roots)
    accesses = device_access(host, containers)
    if not accesses:
        return Check(
            NAME,
            OK,
            f"no running container was given NVIDIA devices ({len(containers)} running)",
            counts={"containers_lost": 0},
        )
    lost = [access for access in accesses if access.lost]
    # The containers judged to have lost access: the unjudged ones are not counted either way.
    counts = {"containers_lost": len(lost)}
    unjudged = [access for access in accesses if not access.judged]
    evidence = [
        f"{access.container.name}: lost {', '.join(map(str, access.lost))}"
        + (f" (running since {access.container.created})" if access.container.created else "")
        + f"; state {access.container.state_path}"
        for access in lost
    ]
    evidence += [f"{access.container.name}: not judged: {access.why}" for access in unjudged]
    if not lost:
        if unjudged:
            return Check(
                NAME,
                UNKNOWN,
                f"{len(unjudged)} GPU container(s) not judged: their device rules cannot be read here",
                evidence,
            )
        return Check(NAME, OK, f"{len(accesses)} GPU container(s) can open their NVIDIA devices", counts=counts)
    repairs = []
    for access in lost if restore else []:
        cgroup = access.container.devices_cgroup
        rules = sorted({rule for device in access.lost for rule in spec_rules_for(access.container.spec, device)})
        if cgroup and rules:
            repairs.append(
                Repair(
                    f"re-allow {', '.join(rules)} for {access.container.name} (the spec's own rules)",
                    _allow(host, cgroup, rules),
                )
            )
    names = [access.container.name for access in lost]
    return Check(
        NAME,
        ERROR,
        f"{len(lost)} running container(s) can no longer open their GPUs (Failed to initialize NVML: Unknown "
        f"Error): {names[0]}" + (f" and {len(names) - 1} more" if len(names) > 1 else ""),
        evidence,
        f"restart {', '.join(names)}: {'its' if len(names) == 1 else 'their'} device cgroup lost the NVIDIA rules "
        "(a cgroup re-applied without them); doctor --fix --restore-device-access re-adds the spec's own rules on "
        "cgroup v1",
        repairs,
        counts=counts,
    )


def _allow(host: HostView, cgroup: str, rules: list[str]) -> Callable[[], None]:
    def perform() -> None:
        target = allow_file(host, cgroup)
        # The devices controller takes one rule per write.
        for rule in rules:
            host.write_existing(target, (rule + "\n").encode("ascii"))

    return perform
