"""The package's import graph against DESIGN.md's layers: lint builds on the node's evidence (node/engines.py),
and node/reload_risk.py on both, so none of the three may import its way back to itself.

Every import counts, the ones inside functions too: a function-level import hides a cycle from the interpreter
at start-up, not from the next reader, and the next such import at module level turns it into an ImportError.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import nvidia_oci_hook

PACKAGE = Path(nvidia_oci_hook.__file__).parent
ROOT = PACKAGE.name
# The modules that must be on no cycle. The package has other cycles, each between a package's __init__ and
# modules of its own (host, node/why, report): only these are asserted on, and a cycle through any of them is
# reported.
ACYCLIC = (f"{ROOT}.lint", f"{ROOT}.node.engines", f"{ROOT}.node.reload_risk")


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The package's modules that the module imports anywhere in its body (under `if TYPE_CHECKING:` too), with
    the packages above each, whose __init__ runs first."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                above = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*above, base] if base else above)
            # `from package import module` imports the module; `from module import name` only the module.
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            for end in range(1, len(parts) + 1):
                candidate = ".".join(parts[:end])
                if candidate in modules and candidate != name:
                    yield candidate


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: set(_imported(name, path, modules)) for name, path in modules.items()}


def cycle_through(graph: dict[str, set[str]], start: str) -> list[str]:
    """A shortest chain of imports from start back to start; empty where there is none."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(graph.get(module, ())):
                if target == start:
                    chain = [module]
                    while chain[-1] != start:
                        chain.append(previous[chain[-1]])
                    return [start, *reversed(chain[:-1]), start]
                if target not in previous:
                    previous[target] = module
                    following.append(target)
        frontier = following
    return []


def test_the_graph_sees_imports_inside_functions() -> None:
    graph = import_graph()
    # lint reads the node's documents through node/engines.py, imported where lint --node needs it.
    assert f"{ROOT}.node.engines" in graph[f"{ROOT}.lint"]
    assert f"{ROOT}.node.engines" in graph[f"{ROOT}.node.reload_risk"]
    assert cycle_through({"a": {"b"}, "b": {"c"}, "c": {"a"}}, "a") == ["a", "b", "c", "a"]


def test_lint_engines_and_reload_risk_are_on_no_import_cycle() -> None:
    graph = import_graph()
    cycles = [" -> ".join(chain) for chain in (cycle_through(graph, module) for module in ACYCLIC) if chain]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
