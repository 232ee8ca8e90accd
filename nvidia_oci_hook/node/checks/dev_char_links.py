"""doctor's `dev-char-links`: whether every NVIDIA device node of the driver root has its /dev/char/MAJOR:MINOR
link.

Under the systemd cgroup driver, runc hands a container's device rules to systemd as DeviceAllow= entries naming
`/dev/char/MAJOR:MINOR`, and runc 1.1.3 to 1.1.6 leave out a rule whose link does not exist; the NVIDIA driver
makes its nodes without udev, so nothing makes those links. The next time systemd applies the unit again (a
daemon-reload), the container loses its GPUs (node/reload_risk.py says which engine is exposed). A warning here;
`reload-risk` makes it an error where the runc in use needs the links. The fix creates the missing links, relative
as udev makes them (`--fix` does, leaving a link that points elsewhere alone), and the packages' udev rule keeps
them after a reboot or a driver reload.
"""

from __future__ import annotations

import posixpath
from typing import Callable

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.devices import gpu_index
from nvidia_oci_hook.node.checks.base import OK, UNKNOWN, WARNING, Check, Repair
from nvidia_oci_hook.node.driver import DriverRootAnswer

NAME = "dev-char-links"


def dev_char_check(host: HostView, answer: DriverRootAnswer) -> Check:
    dev_root = answer.dev_root()
    if dev_root is None:
        return Check(NAME, UNKNOWN, "not judged: the driver root is not known")
    directory = posixpath.join(dev_root, "dev")
    missing = []
    repairs = []
    for name in host.list_dir(directory):
        if name != "nvidiactl" and not name.startswith("nvidia-uvm") and gpu_index(f"/dev/{name}") is None:
            continue
        node = posixpath.join(directory, name)
        identity = host.identity(node)
        if identity is None or identity.type != "c":
            continue
        link = f"/dev/char/{identity.major}:{identity.minor}"
        if host.link_identity(link) is None:
            missing.append(f"{link} for {node}")
            if not host.lexists(link):  # a link to something else is not ours to replace
                repairs.append(Repair(f"link {link} to {node}", _link(host, link, node)))
    if not missing:
        return Check(NAME, OK, "every NVIDIA node has its /dev/char link")
    return Check(
        NAME,
        WARNING,
        f"{len(missing)} NVIDIA node{'s' if len(missing) != 1 else ''} without a /dev/char link: containers lose "
        "their GPUs when systemd reloads their cgroups",
        missing,
        "doctor --fix creates the links; the packages' udev rule keeps them after a reboot or a driver reload",
        repairs,
    )


def _link(host: HostView, link: str, node: str) -> Callable[[], None]:
    def perform() -> None:
        host.makedirs(posixpath.dirname(link))
        # Relative, as udev makes them: the link stays right when the node's root is seen from elsewhere.
        host.symlink(posixpath.relpath(node, posixpath.dirname(link)), link)

    return perform
