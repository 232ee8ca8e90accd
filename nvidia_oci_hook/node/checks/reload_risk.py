"""doctor's `reload-risk`: which engine loses its GPU containers' devices when systemd applies their cgroups
again, and why.

A `systemctl daemon-reload` re-applies every unit's DeviceAllow= entries; under the systemd cgroup driver, runc
1.1.3 to 1.1.6 gave systemd no rule for a node without its /dev/char link, so the reload takes the GPUs from every
running GPU container (node/reload_risk.py holds the verdict per engine and the reasoning). Each engine
configured or installed is judged by its cgroup driver, its runtime and that runtime's release, the links missing
(`dev-char-links`) and whether a udev rule keeps them; the worst engine's verdict is the check's. The fix, in
that verdict, creates the links (`doctor --fix`, through `dev-char-links`' repairs) or upgrades runc.
"""

from __future__ import annotations

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.checks.base import RANK, UNKNOWN, WARNING, Check
from nvidia_oci_hook.node.checks.dev_char_links import dev_char_check
from nvidia_oci_hook.node.driver import DriverRootAnswer

NAME = "reload-risk"


def reload_risk_check(host: HostView, answer: DriverRootAnswer) -> Check:
    """Which engine loses its GPU containers' devices when systemd applies their cgroups again, and why."""
    from nvidia_oci_hook.node.engine_versions import installed_packages
    from nvidia_oci_hook.node.reload_risk import engine_cgroups, link_keeper, node_configs, reload_risk, systemd_version

    found, _ = installed_packages(host)
    packages = {name: version for name, (version, _) in found.items()}
    engines = engine_cgroups(host, node_configs(host, packages), packages)
    if not engines:
        return Check(NAME, UNKNOWN, "no cri-o, containerd or podman configured or installed")
    links = dev_char_check(host, answer)
    missing = len(links.evidence) if links.status == WARNING else 0
    systemd = systemd_version(host, packages)
    keeper = link_keeper(host)
    risks = [reload_risk(engine, systemd, missing, keeper) for engine in engines]
    worst = min(risks, key=lambda risk: RANK[risk.status])
    evidence = [risk.line for risk in risks] + [f"udev rule keeping the /dev/char links: {keeper or 'none'}"]
    if systemd:
        evidence.append(f"systemd {systemd}")
    return Check(NAME, worst.status, worst.line, evidence)
