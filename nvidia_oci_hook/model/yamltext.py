"""YAML documents (CDI specs): values from PyYAML's safe loader, positions from its node tree."""

from __future__ import annotations

from typing import Any

from nvidia_oci_hook.model.document import LoadProblem, Parsed, decode_utf8, register_format
from nvidia_oci_hook.model.jsontext import pointer_join
from nvidia_oci_hook.model.positions import PositionMap


def _scalar_key(node: Any) -> str:
    return str(node.value) if hasattr(node, "value") and isinstance(node.value, str) else repr(node)


def _walk(root: Any) -> tuple[dict[str, tuple[int, int]], list[tuple[str, int, int]]]:
    import yaml

    positions: dict[str, tuple[int, int]] = {}
    duplicates: list[tuple[str, int, int]] = []
    stack: list[tuple[str, Any]] = [("", root)]
    while stack:
        pointer, node = stack.pop()
        positions.setdefault(pointer, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value_node in node.value:
                key = _scalar_key(key_node)
                child = pointer_join(pointer, key)
                mark = key_node.start_mark
                if key in seen:
                    duplicates.append((child, mark.line + 1, mark.column + 1))
                seen.add(key)
                positions[child] = (mark.line + 1, mark.column + 1)
                stack.append((child, value_node))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                stack.append((f"{pointer}/{index}", item))
    return positions, duplicates


def parse_yaml(raw: bytes) -> Parsed:
    import yaml

    problems: list[LoadProblem] = []
    text = decode_utf8(raw, problems)
    empty = PositionMap(text, {})
    if not text.strip():
        problems.append(LoadProblem("DOC001", "the file is empty", line=1, column=1))
        return Parsed(text, None, False, problems, empty)
    try:
        value = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        problems.append(
            LoadProblem(
                "DOC001",
                f"invalid YAML: {reason}",
                line=mark.line + 1 if mark else None,
                column=mark.column + 1 if mark else None,
            )
        )
        return Parsed(text, None, False, problems, empty)
    except yaml.YAMLError as exc:
        problems.append(LoadProblem("DOC001", f"invalid YAML: {exc}".replace("\n", " ")))
        return Parsed(text, None, False, problems, empty)
    except RecursionError:
        problems.append(LoadProblem("DOC003", "YAML nested deeper than this tool parses"))
        return Parsed(text, None, False, problems, empty)
    positions, duplicates = _walk(root) if root is not None else ({}, [])
    for pointer, line, column in duplicates:
        problems.append(
            LoadProblem(
                "DOC005",
                f"key {pointer.rsplit('/', 1)[-1]!r} appears more than once in the same mapping",
                pointer=pointer,
                line=line,
                column=column,
            )
        )
    return Parsed(text, value, True, problems, PositionMap(text, positions))


register_format("yaml", parse_yaml)
