"""The engine's house (issue 19): the modules of apps_registry/routes/ import each other without a circle, and a
step kind's module imports only the layers below it (types, expressions, store, limits, dates, cursors), so adding
a step kind stays one class (plus, where it touches storage, one store method)."""

from __future__ import annotations

import ast
from pathlib import Path

ROUTES = Path(__file__).resolve().parents[2] / "apps_registry" / "routes"
MODULES = {path.stem for path in ROUTES.glob("*.py")}
# What the step kinds (routes/steps.py) may import from the engine.
BELOW_STEPS = {"types", "expressions", "store", "limits", "dates", "library"}


def _imports(module: str) -> set[str]:
    """The engine modules `module` imports when loaded (imports under `if TYPE_CHECKING:` excluded)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and isinstance(child.test, ast.Name) and child.test.id == "TYPE_CHECKING":
                continue
            if isinstance(child, ast.ImportFrom) and child.module:
                if child.module.startswith("apps_registry.routes."):
                    found.add(child.module.rsplit(".", 1)[1])
                elif child.module == "apps_registry.routes":
                    found.update(alias.name for alias in child.names if alias.name in MODULES)
            visit(child)

    visit(ast.parse((ROUTES / f"{module}.py").read_text()))
    return found & MODULES


def test_the_engine_has_no_import_circle():
    graph = {module: _imports(module) for module in MODULES}
    circles = []

    def walk(module: str, path: list[str]) -> None:
        for target in sorted(graph[module]):
            if target in path:
                circles.append(path[path.index(target) :] + [target])
            else:
                walk(target, [*path, target])

    for module in sorted(graph):
        walk(module, [module])
    assert circles == []


def test_step_kinds_import_only_downward():
    assert _imports("steps") <= BELOW_STEPS, _imports("steps") - BELOW_STEPS
