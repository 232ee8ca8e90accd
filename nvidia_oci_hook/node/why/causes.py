"""What decides each cause on the node: doctor's checks, `lint --node`'s rules, `cdi resolve`, the driver's facts.

Each is read once per `why` run, when the first cause that needs it is decided, from the node under the host root.
A verdict is `holds` True (the cause is present on this node now), False (ruled out, with what was looked at), or
None (not decidable here, with what would decide it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.locations import ByHand


@dataclass
class Cause:
    code: str  # the rule code or doctor check name that decides it
    holds: Optional[bool]
    summary: str
    evidence: list[str] = field(default_factory=list)
    fix: Optional[str] = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "holds": self.holds,
            "summary": self.summary,
            "evidence": self.evidence,
            "fix": self.fix,
        }


class Node:
    """The node under host_root, each source of evidence read on first use."""

    def __init__(self, host_root: str, settings: Settings, by_hand: Optional[ByHand] = None) -> None:
        self.host_root = host_root
        self.settings = settings
        self.by_hand = by_hand or ByHand(None, None, None)
        self.host = HostView(host_root)
        self._checks: Optional[dict[str, Any]] = None
        self._findings: Optional[list[Any]] = None
        self._driver: Any = None

    def check(self, name: str) -> Any:
        if self._checks is None:
            from nvidia_oci_hook.node import doctor

            nvml = self.host_root == "/"
            self._checks = {check.name: check for check in doctor.run_checks(self.host_root, self.settings, nvml)}
        return self._checks[name]

    def findings(self) -> list[Any]:
        """`lint --node`'s findings, each with the path of the file it is about."""
        if self._findings is None:
            from nvidia_oci_hook.lint import LintOptions, lint_paths

            options = LintOptions(
                host_root=self.host_root,
                driver_roots=self.settings.driver_roots,
                node=True,
                settings=self.settings,
                containerd_config=self.by_hand.containerd_config,
                crio_config=self.by_hand.crio_config,
                crio_config_dir=self.by_hand.crio_config_dir,
            )
            run = lint_paths([], options)
            self._findings = [(result.path, finding) for result in run.files for finding in result.findings]
        return self._findings

    def driver(self) -> Any:
        if self._driver is None:
            from nvidia_oci_hook.node.driver_facts import node_driver

            self._driver = node_driver(self.host, self.settings.driver_roots)
        return self._driver

    def load(self) -> Any:
        from nvidia_oci_hook.kinds.loading import load_document

        return load_document


def from_check(node: Node, name: str) -> Cause:
    """A doctor check's verdict: an error or a warning holds, ok rules the cause out, unknown leaves it open."""
    from nvidia_oci_hook.node.checks.base import ERROR, OK, WARNING

    check = node.check(name)
    holds = True if check.status in (ERROR, WARNING) else False if check.status == OK else None
    return Cause(name, holds, check.summary, list(check.evidence), check.fix if holds else None)


def from_rule(node: Node, code: str, about: str = "", absent: str = "") -> Cause:
    """`lint --node`'s findings of a rule (those whose message names `about`, when given): any holds; none rules
    the cause out, with absent saying what was read."""
    found = [
        (path, finding)
        for path, finding in node.findings()
        if finding.code == code and (not about or about in finding.message)
    ]
    if not found:
        from nvidia_oci_hook.rules.base import all_rules

        rule = next((rule for rule in all_rules() if rule.code == code), None)
        name = f" ({rule.name})" if rule is not None else ""
        return Cause(code, False, f"lint --node finds no {code}{name} on this node{absent}")
    path, first = found[0]
    evidence = [f"{where}: {finding.message}" for where, finding in found[1:]]
    return Cause(code, True, f"{path}: {first.message}", evidence, first.hint)


def path_missing(node: Node, code: str, path: str, what: str) -> Cause:
    """A path the engine could not find: the cause holds while it is still missing on the node."""
    if node.host.lexists(path):
        if node.host.is_link(path) and not node.host.exists(path):
            target = node.host.readlink(path)
            return Cause(code, True, f"{what} {path} is a link to nothing on this node", [f"{path} -> {target}"])
        return Cause(
            code,
            False,
            f"{what} {path} exists on this node now: the error came from another node, or the path came back since",
        )
    parent = path.rsplit("/", 1)[0] or "/"
    evidence = [f"{path}: no such file or directory"]
    if not node.host.is_dir(parent):
        evidence.append(f"{parent}: no such directory either")
    return Cause(code, True, f"{what} {path} does not exist on this node", evidence)
