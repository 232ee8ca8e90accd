"""A plan per spec file: the changes, what blocks them, and the file's text before and after; and its writing.

The edited text is read back and must equal the intended value, or the file is left as it was. Planning never
writes: `plan_spec_dirs` is shared with `doctor --fix`, `write_plans` does the writing.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook import io
from nvidia_oci_hook.formats import leanyaml
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.cdi.directories import spec_files
from nvidia_oci_hook.kinds.cdi.goyaml import go_yaml_load
from nvidia_oci_hook.kinds.cdi.validation import analyse
from nvidia_oci_hook.node.cdi_reconcile.path_moves import _Planner
from nvidia_oci_hook.node.cdi_reconcile.text_edits import _CannotEdit, _rewrite, _set
from nvidia_oci_hook.node.driver import resolve_driver_root
from nvidia_oci_hook.node.driver_facts import module_version


@dataclass
class SpecPlan:
    """What reconciling one spec file means: the changes, what blocks them, and the file's text before and after."""

    path: str  # as the node names it
    changes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    old_text: Optional[str] = None
    new_text: Optional[str] = None  # None when nothing changes or the file cannot be fully reconciled

    @property
    def changed(self) -> bool:
        return self.new_text is not None and not self.problems


def _read_yaml(text: str) -> Any:
    """The value as the library reads it: the lean reader, PyYAML (goyaml.v2's typing) outside its subset."""
    try:
        return leanyaml.loads(text)
    except leanyaml.YAMLSubsetError as exc:
        if not exc.unsupported:
            raise ValueError(f"not valid YAML: {exc}") from None
    import yaml

    try:
        return go_yaml_load(text)
    except (yaml.YAMLError, RecursionError) as exc:
        raise ValueError(f"not valid YAML: {str(exc).splitlines()[0]}") from None


def _is_json(text: str) -> bool:
    return text.lstrip(" \t\r\n")[:1] == "{"


def _read(text: str, as_json: bool) -> Any:
    if as_json:
        return json.loads(text)
    return _read_yaml(text)


def _new_library_problems(before: Any, after: Any) -> list[str]:
    """What the library refuses in after and did not refuse in before (by rule and place)."""
    known = {(problem.code, problem.pointer) for problem in analyse(before).problems}
    return [problem.message for problem in analyse(after).problems if (problem.code, problem.pointer) not in known]


def plan_file(host: HostView, path: str, planner: _Planner) -> SpecPlan:
    """The plan for one spec file, named as the node names it."""
    plan = SpecPlan(path)
    try:
        raw = host.read_bytes(path)
    except (io.ReadError, io.TooLarge) as exc:
        plan.problems.append(f"cannot be read: {str(exc).split(': ', 1)[-1]}")
        return plan
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        plan.problems.append(f"is not UTF-8 text ({exc.reason} at byte {exc.start})")
        return plan
    plan.old_text = text
    as_json = _is_json(text)
    try:
        value = _read(text, as_json)
    except (ValueError, RecursionError) as exc:
        if not as_json:
            plan.problems.append(f"cannot be parsed: {exc}")
            return plan
        as_json = False
        try:
            value = _read_yaml(text)
        except (ValueError, RecursionError) as again:
            plan.problems.append(f"cannot be parsed: {again}")
            return plan
    spec = analyse(value).spec
    if spec is None:
        plan.problems.append("the CDI library cannot decode it as a spec; see `nvidia-oci-hook lint`")
        return plan
    edits, problems = planner.plan(spec)
    plan.changes = [edit.describe() for edit in edits]
    plan.problems.extend(problems)
    if not edits or plan.problems:
        return plan
    intended = copy.deepcopy(value)
    for edit in edits:
        _set(intended, edit.pointer, edit.new)
    try:
        new_text = _rewrite(text, value, edits, as_json)
    except _CannotEdit as exc:
        plan.problems.append(f"cannot be edited safely: {exc}")
        return plan
    try:
        reread = _read(new_text, as_json)
    except (ValueError, RecursionError) as exc:
        plan.problems.append(f"cannot be edited safely: the edited text does not parse ({exc})")
        return plan
    if reread != intended:
        plan.problems.append("cannot be edited safely: the edited text does not read back as the intended spec")
        return plan
    refused = _new_library_problems(value, intended)
    if refused:
        plan.problems.append(f"cannot be reconciled: the CDI library would refuse the edited spec: {refused[0]}")
        return plan
    plan.new_text = new_text
    return plan


def plan_spec_dirs(host: HostView, spec_dirs: Sequence[str], driver_roots: tuple[str, ...]) -> list[SpecPlan]:
    """Plans for every spec file the CDI library reads in spec_dirs (node paths)."""
    planner = _Planner(host, driver_roots, resolve_driver_root(host, driver_roots), module_version(host).version)
    plans = []
    for directory in spec_dirs:
        files, _skipped, _unread = spec_files(directory, host)
        for path in files:
            plans.append(plan_file(host, path, planner))
    return plans


def write_plans(host: HostView, plans: Sequence[SpecPlan]) -> None:
    """Write the fully reconciled files, atomically; a file changed since it was planned is left alone (and the
    plan gets a problem saying so)."""
    for plan in plans:
        if not plan.changed or plan.new_text is None:
            continue
        try:
            current = host.read_bytes(plan.path).decode("utf-8", errors="replace")
        except (io.ReadError, io.TooLarge) as exc:
            plan.problems.append(f"cannot be read again before writing: {str(exc).split(': ', 1)[-1]}")
            continue
        if current != plan.old_text:
            plan.problems.append("changed while it was being reconciled")
            continue
        try:
            host.write_atomic(plan.path, plan.new_text.encode("utf-8"))
        except OSError as exc:
            plan.problems.append(f"cannot be written: {exc.strerror or exc}")
