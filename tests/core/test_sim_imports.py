"""The simulator's modules import one another without a cycle, counting TYPE_CHECKING and function-local imports."""

from __future__ import annotations

import ast
from pathlib import Path

import cockpit.sim

PACKAGE = "cockpit.sim"


def import_graph() -> dict[str, set[str]]:
    """Each module of cockpit.sim -> the modules of cockpit.sim it imports, wherever the import statement is."""
    directory = Path(cockpit.sim.__file__).parent
    modules = {f"{PACKAGE}.{p.stem}": p for p in directory.glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                graph[module] |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.module:
                # `from cockpit.sim import smi` imports the submodule; `from cockpit.sim.smi import X` the module
                named = {f"{node.module}.{a.name}" for a in node.names}
                graph[module] |= (named | {node.module}) & modules.keys()
        graph[module].discard(module)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    visiting: list[str] = []
    done: set[str] = set()

    def visit(module: str) -> list[str] | None:
        if module in visiting:
            return [*visiting[visiting.index(module) :], module]
        if module in done:
            return None
        visiting.append(module)
        for imported in sorted(graph[module]):
            cycle = visit(imported)
            if cycle:
                return cycle
        visiting.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module)
        if cycle:
            return cycle
    return None


def test_the_graph_sees_the_simulators_imports() -> None:
    graph = import_graph()
    assert {"cockpit.sim.packages", "cockpit.sim.containers", "cockpit.sim.kernel"} <= graph["cockpit.sim.node"]
    assert graph["cockpit.sim.shell"] == set()


def test_no_import_cycle_in_the_simulator() -> None:
    assert find_cycle(import_graph()) is None


def test_a_cycle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
