"""`cdi reconcile`: rewrite CDI spec files so that injecting their devices succeeds on this node.

A spec generated for one driver root (the GPU Operator's `/run/nvidia/driver`, or `/`) names host paths that do
not exist once the driver lives under the other root, and the engine then fails every container that requests
one of its devices. The driver root is decided by evidence (nvidia_oci_hook.node.driver), never by marker files; a
host path is moved only when the whole path, relative to its root, exists under that root.

The file is edited as text, value by value, so that comments, key order, quoting and indentation survive; the
result is read back and must equal the intended value, or the file is left as it was. Planning never writes:
`plan_spec_dirs` is shared with `doctor --fix`, `write_plans` does the writing.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, TextIO

from nvidia_oci_hook import io
from nvidia_oci_hook.formats import leanyaml
from nvidia_oci_hook.formats.jsontext import has_duplicate_keys, pointer_join
from nvidia_oci_hook.host import DEFAULT_DRIVER_ROOTS, DeviceIdentity, HostView, owning_root
from nvidia_oci_hook.kinds.cdi.directories import DEFAULT_SPEC_DIRS, spec_files
from nvidia_oci_hook.kinds.cdi.goyaml import go_yaml_load
from nvidia_oci_hook.kinds.cdi.specs_go import GoStruct, edit_blocks, entries, fully_specified
from nvidia_oci_hook.kinds.cdi.validation import analyse
from nvidia_oci_hook.node.driver import FOUND, DriverRootAnswer, resolve_driver_root

# deviceNodes[].hostPath exists from this spec version on: adding one to an older spec makes the library refuse it.
HOST_PATH_VERSION = (0, 5, 0)
UNSET = "(unset)"


@dataclass
class SpecPlan:
    """What reconciling one spec file means: the changes, what blocks them, and the file's text before and after."""

    path: str  # as the node names it (under --host-root)
    changes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    old_text: Optional[str] = None
    new_text: Optional[str] = None  # None when nothing changes or the file cannot be fully reconciled

    @property
    def changed(self) -> bool:
        return self.new_text is not None and not self.problems


@dataclass(frozen=True)
class _Edit:
    """One value to set (pointer names it) or a hostPath to add to the device node at `node`."""

    pointer: str
    old: Optional[str]  # None: the key is added
    new: str
    node: str = ""  # for an addition: the device node's pointer

    def describe(self) -> str:
        return f"{self.pointer}: {UNSET if self.old is None else self.old} -> {self.new}"


class _CannotEdit(Exception):
    """The text cannot be edited safely at this place; the file is left as it is."""


# ---------------------------------------------------------------------------------------------------------------
# Planning the values


def _on_host(real_root: str, path: str) -> str:
    return os.path.join(real_root, path.lstrip("/"))


def _version(text: str) -> Optional[tuple[int, ...]]:
    parts = text.split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return None
    return tuple(int(part) for part in parts)


def _spec_identity(node: GoStruct) -> Optional[DeviceIdentity]:
    """The device a fully specified node describes itself, in the host's terms; None where it cannot say."""
    node_type = node.text("type")
    if node_type in ("c", "b") and node.integer("major") != 0:
        return DeviceIdentity(node_type, node.integer("major"), node.integer("minor"))
    if node_type == "p":
        return DeviceIdentity("p")
    return None


class _Planner:
    def __init__(self, host: HostView, roots: tuple[str, ...], answer: DriverRootAnswer) -> None:
        self.host = host
        self.roots = roots
        self.answer = answer
        self.root = answer.root if answer.status == FOUND else None

    def moved(self, path: str, device: Optional[GoStruct]) -> Optional[str]:
        """path under the resolved root, when path sits under another candidate root and the resolved root has
        the whole relative path (for a device node the library stats: a device node of the spec's type)."""
        if self.root is None:
            return None
        path = posixpath.normpath(path)
        root, relative = owning_root(self.roots, path)
        if root.rstrip("/") == self.root.rstrip("/"):
            return None
        candidate = posixpath.normpath(posixpath.join(self.root, relative)) if relative else self.root
        if device is None or fully_specified(device):
            return candidate if self.host.exists(candidate) else None
        identity = self.host.link_identity(candidate)
        if identity is None or identity.type not in ("c", "b", "p"):
            return None
        wanted = device.text("type")
        if wanted and wanted != identity.type:
            return None
        return candidate

    def under_resolved_root(self, path: str) -> bool:
        assert self.root is not None
        root, _ = owning_root(self.roots, posixpath.normpath(path))
        return root.rstrip("/") == self.root.rstrip("/")

    def plan(self, spec: GoStruct) -> tuple[list[_Edit], list[str]]:
        edits: list[_Edit] = []
        problems: list[str] = []
        version = spec.text("cdiVersion")
        parsed = _version(version)
        host_path_allowed = parsed is not None and parsed >= HOST_PATH_VERSION
        for block in edit_blocks(spec):
            for pointer, node in entries(block, "deviceNodes"):
                self.device_node(pointer, node, version if not host_path_allowed else None, edits, problems)
            for _pointer, mount in entries(block, "mounts"):
                self.host_path(mount, "hostPath", f"mount source (for {mount.text('containerPath')})", edits, problems)
            for _pointer, hook in entries(block, "hooks"):
                self.host_path(hook, "path", f"{hook.text('hookName')} hook program", edits, problems)
        return edits, problems

    def missing_reason(self, path: str) -> str:
        if self.root is None:
            return (
                f"{path} does not exist on the host, and the driver root is {self.answer.status} ({self.answer.reason})"
            )
        return f"{path} does not exist on the host, nor under the driver root {self.root}"

    def host_path(self, entry: GoStruct, key: str, what: str, edits: list[_Edit], problems: list[str]) -> None:
        path = entry.text(key)
        if not path.startswith("/") or self.host.exists(path):
            return
        target = self.moved(path, None)
        if target is None:
            problems.append(f"{entry.at(key)}: {what} {self.missing_reason(path)}")
            return
        edits.append(_Edit(entry.at(key), path, target))

    def device_node(
        self, pointer: str, node: GoStruct, too_old: Optional[str], edits: list[_Edit], problems: list[str]
    ) -> None:
        """too_old: the spec's version when it is too old for a hostPath to be added."""
        host_path_allowed = too_old is None
        path = node.text("path")
        host_path = node.text("hostPath")
        effective = host_path or path
        fully = fully_specified(node)
        # The library needs the host node only when the entry does not give its type and numbers.
        needed = not fully
        new_host_path = host_path
        if effective.startswith("/") and self.host.link_identity(effective) is None:
            target = self.moved(effective, node)
            if target is None:
                if needed:
                    problems.append(f"{node.at('hostPath' if host_path else 'path')}: {self.missing_reason(effective)}")
                    return
            elif host_path or host_path_allowed:
                # An empty hostPath means path, which is also where the container sees the node: the host side
                # moves by giving the entry a hostPath, and the container keeps its path.
                new_host_path = target
            elif needed:
                problems.append(
                    f"{node.at('path')}: {effective} does not exist on the host; the driver root has it as {target}, "
                    f"but naming that needs a hostPath, which cdiVersion {too_old!r} does not have"
                )
                return
        if self.root is not None and path.startswith("/") and new_host_path != path:
            same = self.same_device_at_path(node, new_host_path, path, fully)
            if same and (new_host_path or host_path_allowed):
                new_host_path = path
        if new_host_path != host_path:
            if node.get("hostPath") is not None or "hostPath" in node.pointers:
                edits.append(_Edit(node.at("hostPath"), host_path, new_host_path))
            else:
                edits.append(_Edit(pointer_join(node.pointer, "hostPath"), None, new_host_path, node.pointer))

    def same_device_at_path(self, node: GoStruct, host_path: str, path: str, fully: bool) -> bool:
        """Whether the entry's host node may be path itself: path is on the host the very device the entry
        names, and the entry names no node of the resolved root (or none at all)."""
        reference: Optional[DeviceIdentity]
        if host_path:
            if self.host.link_identity(host_path) is not None and self.under_resolved_root(host_path):
                return False
            reference = _spec_identity(node) if fully else self.host.link_identity(host_path)
        else:
            # Without a hostPath a node the library stats is already path; one it does not stat gains a host node
            # that the host really has.
            if not fully:
                return False
            reference = _spec_identity(node)
        if reference is None or reference.type not in ("c", "b", "p"):
            return False
        return self.host.link_identity(path) == reference


# ---------------------------------------------------------------------------------------------------------------
# Where values are in the text


@dataclass
class _Span:
    start: int
    end: int
    style: str  # "" plain, '"' or "'" quoted (YAML); '"' for JSON strings


@dataclass
class _Member:
    """A device node mapping and its `path` member: enough to insert a member right after it."""

    path_key: _Span
    path_value: _Span
    separator: str  # what goes before a new member: the comma (JSON, flow) or line break and indentation (block)
    colon: str  # what goes between a key and its value
    block: bool


_PLAIN_SAFE = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./+@=~-]*")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _tokens(pointer: str) -> list[str]:
    return [_unescape(token) for token in pointer.split("/")[1:]] if pointer else []


class _YAMLText:
    """Spans of values in a YAML text, from PyYAML's node tree (leanyaml keeps no positions)."""

    def __init__(self, text: str) -> None:
        import yaml

        self.text = text
        try:
            self.root = yaml.compose(text, Loader=yaml.SafeLoader)
        except (yaml.YAMLError, RecursionError) as exc:
            raise _CannotEdit(f"the text cannot be located value by value ({str(exc).splitlines()[0]})") from None
        self.references: dict[int, int] = {}
        stack = [self.root]
        while stack:
            node = stack.pop()
            self.references[id(node)] = self.references.get(id(node), 0) + 1
            if self.references[id(node)] > 1:
                continue
            if isinstance(node, yaml.MappingNode):
                stack.extend(part for pair in node.value for part in pair)
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(node.value)

    def node(self, pointer: str) -> Any:
        import yaml

        node = self.root
        for token in _tokens(pointer):
            if self.references.get(id(node), 0) > 1:
                raise _CannotEdit(f"{pointer} is reached through a YAML alias")
            if isinstance(node, yaml.MappingNode):
                found = [value for key, value in node.value if isinstance(key, yaml.ScalarNode) and key.value == token]
                if len(found) != 1:
                    raise _CannotEdit(f"{pointer}: the key is not found once in the text")
                node = found[0]
            elif isinstance(node, yaml.SequenceNode) and token.isdigit() and int(token) < len(node.value):
                node = node.value[int(token)]
            else:
                raise _CannotEdit(f"{pointer} is not in the text")
        if self.references.get(id(node), 0) > 1:
            raise _CannotEdit(f"{pointer} is a YAML alias or anchored value")
        return node

    def scalar(self, pointer: str) -> _Span:
        import yaml

        node = self.node(pointer)
        if not isinstance(node, yaml.ScalarNode) or node.style not in (None, '"', "'"):
            raise _CannotEdit(f"{pointer} is not a plain or quoted scalar")
        start, end = node.start_mark.index, node.end_mark.index
        if self.text[start : start + 1] in ("&", "!", "*"):
            raise _CannotEdit(f"{pointer} has an anchor or a tag")
        return _Span(start, end, node.style or "")

    def render(self, value: str, style: str) -> str:
        import yaml

        if style == "'" and "\n" not in value:
            return "'" + value.replace("'", "''") + "'"
        if style == "" and _PLAIN_SAFE.fullmatch(value) and leanyaml.go_resolve_plain(value) == value:
            with _quiet_yaml():
                if yaml.safe_load(value) == value:
                    return value
        return json.dumps(value, ensure_ascii=False)

    def member(self, pointer: str) -> _Member:
        import yaml

        mapping = self.node(pointer)
        if not isinstance(mapping, yaml.MappingNode):
            raise _CannotEdit(f"{pointer} is not a mapping")
        pairs = [(k, v) for k, v in mapping.value if isinstance(k, yaml.ScalarNode) and k.value == "path"]
        if len(pairs) != 1:
            raise _CannotEdit(f"{pointer}: no single path key")
        key, value = pairs[0]
        if not isinstance(value, yaml.ScalarNode):
            raise _CannotEdit(f"{pointer}/path is not a scalar")
        key_span = _Span(key.start_mark.index, key.end_mark.index, key.style or "")
        value_span = self.scalar(pointer_join(pointer, "path"))
        colon = self.text[key_span.end : value_span.start]
        if "\n" in colon or colon.strip() != ":":
            raise _CannotEdit(f"{pointer}/path: its value is not on its key's line")
        if mapping.flow_style:
            return _Member(key_span, value_span, self.flow_separator(mapping), colon, False)
        line_start = self.text.rfind("\n", 0, key_span.start) + 1
        indent = self.text[line_start : key_span.start]
        # The key may follow the "- " of its sequence entry: the new line lines up with the key itself.
        indent = " " * len(indent) if indent.strip(" ") in ("", "-") else ""
        if not indent and key_span.start != line_start:
            raise _CannotEdit(f"{pointer}: the path key's line cannot be continued")
        return _Member(key_span, value_span, indent, colon, True)

    def flow_separator(self, mapping: Any) -> str:
        if len(mapping.value) >= 2:
            between = self.text[mapping.value[0][1].end_mark.index : mapping.value[1][0].start_mark.index]
            if between.strip() == ",":
                return between
        return ", "

    def key_text(self, key: _Span) -> str:
        return self.render("hostPath", key.style) if key.style else "hostPath"

    def insertion(self, member: _Member, value: str) -> tuple[int, str]:
        """(offset, text) of a hostPath member right after path."""
        text = self.text
        rendered = self.render(value, member.path_value.style)
        if not member.block:
            return member.path_value.end, f"{member.separator}{self.key_text(member.path_key)}{member.colon}{rendered}"
        end = member.path_value.end
        line_end = text.find("\n", end)
        rest = text[end : len(text) if line_end < 0 else line_end].rstrip("\r")
        if rest.strip(" \t") and not rest.lstrip(" \t").startswith("#"):
            raise _CannotEdit("the path value's line goes on after it")
        newline = "\r\n" if line_end > 0 and text[line_end - 1] == "\r" else "\n"
        line = f"{member.separator}{self.key_text(member.path_key)}{member.colon}{rendered}"
        if line_end < 0:
            return len(text), newline + line
        return line_end + 1, line + newline


class _quiet_yaml:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, value: object, traceback: object) -> bool:
        import yaml

        return isinstance(value, yaml.YAMLError)


_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.DOTALL)


class _JSONText:
    """Spans of values and object members in a JSON text known to be valid."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.values: dict[str, _Span] = {}
        self.keys: dict[str, _Span] = {}
        self.members: dict[str, list[str]] = {}  # object pointer -> member pointers, in order
        self.opening: dict[str, int] = {}
        stack: list[list[Any]] = []  # [pointer, is_object, next index, pending key pointer]
        for match in _JSON_TOKEN.finditer(text):
            token = match.group()
            if token in (":", ","):
                continue
            if token in ("}", "]"):
                pointer = stack.pop()[0]
                self.values[pointer] = _Span(self.opening[pointer], match.end(), "")
                continue
            if stack and stack[-1][1] and stack[-1][3] is None:
                frame = stack[-1]
                pointer = pointer_join(frame[0], json.loads(token))
                frame[3] = pointer
                self.keys[pointer] = _Span(match.start(), match.end(), '"')
                self.members[frame[0]].append(pointer)
                continue
            if not stack:
                pointer = ""
            elif stack[-1][1]:
                pointer, stack[-1][3] = stack[-1][3], None
            else:
                pointer = f"{stack[-1][0]}/{stack[-1][2]}"
                stack[-1][2] += 1
            if token in ("{", "["):
                self.opening[pointer] = match.start()
                if token == "{":
                    self.members[pointer] = []
                stack.append([pointer, token == "{", 0, None])
            else:
                self.values[pointer] = _Span(match.start(), match.end(), '"' if token[0] == '"' else "")

    def scalar(self, pointer: str) -> _Span:
        span = self.values.get(pointer)
        if span is None or span.style != '"':
            raise _CannotEdit(f"{pointer} is not a string in the text")
        return span

    def render(self, value: str, style: str) -> str:
        return json.dumps(value, ensure_ascii=False)

    def member(self, pointer: str) -> _Member:
        members = self.members.get(pointer)
        path_pointer = pointer_join(pointer, "path")
        if members is None or path_pointer not in members:
            raise _CannotEdit(f"{pointer}: no path member")
        key = self.keys[path_pointer]
        value = self.scalar(path_pointer)
        colon = self.text[key.end : value.start]
        if len(members) >= 2:
            separator = self.text[self.values[members[0]].end : self.keys[members[1]].start]
        else:
            separator = "," + self.text[self.opening[pointer] + 1 : key.start]
        return _Member(key, value, separator, colon, False)

    def insertion(self, member: _Member, value: str) -> tuple[int, str]:
        return (
            member.path_value.end,
            f'{member.separator}"hostPath"{member.colon}{json.dumps(value, ensure_ascii=False)}',
        )


# ---------------------------------------------------------------------------------------------------------------
# Reading and rewriting one file


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


def _set(value: Any, pointer: str, new: str) -> None:
    tokens = _tokens(pointer)
    target = value
    for token in tokens[:-1]:
        target = target[int(token)] if isinstance(target, list) else target[token]
    if isinstance(target, list):
        target[int(tokens[-1])] = new
    else:
        target[tokens[-1]] = new


def _get(value: Any, pointer: str) -> Any:
    for token in _tokens(pointer):
        if isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        elif isinstance(value, dict) and token in value:
            value = value[token]
        else:
            return None
    return value


def _rewrite(text: str, value: Any, edits: list[_Edit], as_json: bool) -> str:
    """The text with edits applied in place; raises _CannotEdit."""
    located: _JSONText | _YAMLText
    if as_json:
        if has_duplicate_keys(text):
            raise _CannotEdit("a key appears twice in one object")
        located = _JSONText(text)
    else:
        located = _YAMLText(text)
    pieces: list[tuple[int, int, str]] = []
    for edit in edits:
        if edit.old is None:
            offset, inserted = located.insertion(located.member(edit.node), edit.new)
            pieces.append((offset, offset, inserted))
        else:
            if _get(value, edit.pointer) != edit.old:
                raise _CannotEdit(f"{edit.pointer} is not the string {edit.old!r} in the file")
            span = located.scalar(edit.pointer)
            pieces.append((span.start, span.end, located.render(edit.new, span.style)))
    pieces.sort()
    for (_, end, _), (start, _, _) in zip(pieces, pieces[1:]):
        if start < end:
            raise _CannotEdit("two edits overlap")
    for start, end, replacement in reversed(pieces):
        text = text[:start] + replacement + text[end:]
    return text


def _new_library_problems(before: Any, after: Any) -> list[str]:
    """What the library refuses in after and did not refuse in before (by rule and place)."""
    known = {(problem.code, problem.pointer) for problem in analyse(before).problems}
    return [problem.message for problem in analyse(after).problems if (problem.code, problem.pointer) not in known]


def plan_file(host: HostView, path: str, planner: _Planner) -> SpecPlan:
    """The plan for one spec file, named as the node names it."""
    plan = SpecPlan(path)
    try:
        raw = io.read_bounded(_on_host(host.root, path))
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
    """Plans for every spec file the CDI library reads in spec_dirs (host paths under host.root)."""
    planner = _Planner(host, driver_roots, resolve_driver_root(host, driver_roots))
    plans = []
    for directory in spec_dirs:
        files, _skipped, _unread = spec_files(_on_host(host.root, directory))
        for real in files:
            plans.append(plan_file(host, posixpath.join(directory, os.path.basename(real)), planner))
    return plans


def write_plans(host: HostView, plans: Sequence[SpecPlan]) -> None:
    """Write the fully reconciled files, atomically; a file changed since it was planned is left alone (and the
    plan gets a problem saying so)."""
    for plan in plans:
        if not plan.changed or plan.new_text is None:
            continue
        real = _on_host(host.root, plan.path)
        try:
            current = io.read_bounded(real).decode("utf-8", errors="replace")
        except (io.ReadError, io.TooLarge) as exc:
            plan.problems.append(f"cannot be read again before writing: {str(exc).split(': ', 1)[-1]}")
            continue
        if current != plan.old_text:
            plan.problems.append("changed while it was being reconciled")
            continue
        try:
            io.write_atomic(real, plan.new_text.encode("utf-8"))
        except OSError as exc:
            plan.problems.append(f"cannot be written: {exc.strerror or exc}")


# ---------------------------------------------------------------------------------------------------------------
# The command


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _diff(plan: SpecPlan) -> str:
    assert plan.old_text is not None and plan.new_text is not None
    lines = difflib.unified_diff(
        plan.old_text.splitlines(keepends=True),
        plan.new_text.splitlines(keepends=True),
        plan.path,
        f"{plan.path} (reconciled)",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def run(
    spec_dirs: Sequence[str],
    host_root: str,
    driver_roots: Sequence[str],
    dry_run: bool,
    diff: bool,
    out: TextIO,
    err: TextIO,
) -> int:
    """Reconcile the spec files of spec_dirs; 0 when nothing is left unreconciled, 1 when a problem remains."""
    if not os.path.isdir(host_root):
        err.write(f"--host-root {host_root}: not a directory\n")
        return 1
    host = HostView(host_root)
    roots = tuple(driver_roots) or DEFAULT_DRIVER_ROOTS
    directories = list(spec_dirs) or list(DEFAULT_SPEC_DIRS)
    answer = resolve_driver_root(host, roots)
    if answer.status == FOUND:
        err.write(f"driver root: {answer.root} ({answer.reason})\n")
    else:
        err.write(f"driver root: {answer.status} ({answer.reason}); nothing is moved\n")
    plans = plan_spec_dirs(host, directories, roots)
    writing = not (dry_run or diff)
    if writing:
        write_plans(host, plans)
    verb = "changed" if writing else "would change"
    for plan in plans:
        if plan.changed:
            for change in plan.changes:
                err.write(f"{verb} {plan.path}: {change}\n")
            if diff:
                out.write(_diff(plan))
        for problem in plan.problems:
            err.write(f"problem {plan.path}: {problem}; left unchanged\n")
    changed = sum(1 for plan in plans if plan.changed)
    blocked = sum(1 for plan in plans if plan.problems)
    if not changed and not blocked:
        err.write(f"nothing to do: {_plural(len(plans), 'spec file')} in {', '.join(directories)}\n")
    else:
        err.write(f"{_plural(len(plans), 'spec file')}: {changed} {verb}, {blocked} left unchanged with problems\n")
    return 1 if blocked else 0
