"""YAML documents (CDI specs): values from PyYAML's safe loader, positions from its node tree."""

from __future__ import annotations

from typing import Any

from nvidia_oci_hook.formats.jsontext import pointer_join
from nvidia_oci_hook.formats.parsing import LoadProblem, Parsed, decode_utf8, register_format
from nvidia_oci_hook.formats.positions import PositionMap

# Far beyond any real spec (a CDI spec for 64 GPUs has a few thousand nodes); an alias bomb goes past it early.
MAX_EXPANDED_NODES = 1_000_000


def _expanded_size(root: Any) -> int:
    """How many nodes the document has once every alias is expanded, counted without expanding anything.

    Aliased nodes are shared in the composed graph, so each is sized once. -1 when a node contains itself.
    """
    import yaml

    limit = MAX_EXPANDED_NODES + 1
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = min(limit, 1 + sum(sizes[id(child)] for child in children))
            continue
        if any(id(child) in open_nodes for child in children):
            return -1  # an alias to an enclosing node
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


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
    # One pass: the node tree, whose marks give the positions, and the value constructed from it (what
    # yaml.safe_load does after composing).
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        value = loader.construct_document(root) if root is not None else None
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
    finally:
        loader.dispose()
    size = _expanded_size(root) if root is not None else 0
    if size > MAX_EXPANDED_NODES or size < 0:
        reason = (
            "an alias refers to a node that contains it; goyaml (the CDI library's parser) refuses it with "
            "`anchor ... value contains itself`"
            if size < 0
            else f"YAML aliases expand this document to more than {MAX_EXPANDED_NODES:,} nodes; goyaml (the CDI "
            "library's parser) refuses it with `yaml: document contains excessive aliasing`"
        )
        problems.append(LoadProblem("DOC006", reason, line=1, column=1))
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
