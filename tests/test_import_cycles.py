"""No import cycles inside the packages (issue 10: `ds4tui/app.py` ↔ the steering mixin was one).

The graph is static: every import statement of every module, including imports inside
functions and under `TYPE_CHECKING` (a cycle hidden there is still a cycle in the design). An
edge goes to the most specific module named (`from ds4tui.widgets import panels` → the module
`ds4tui.widgets.panels`); relative imports are resolved. Then every module is imported in a
fresh interpreter (the dynamic check that the static one describes importable code).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "ds4core": ROOT / "core" / "src" / "ds4core",
    "ds4sessions": ROOT / "sessions" / "src" / "ds4sessions",
    "ds4tui": ROOT / "ds4tui",
}


def _modules(package: str) -> dict[str, Path]:
    base = PACKAGES[package]
    out = {}
    for path in sorted(base.rglob("*.py")):
        name = ".".join((package, *path.relative_to(base).with_suffix("").parts)).removesuffix(".__init__")
        out[name] = path
    return out


def import_graph(package: str) -> dict[str, set[str]]:
    """Module → the modules of `package` it imports (statically; see the module docstring). A C
    extension module of the package (`_cprep.c`) is a module too: `from pkg import _cprep`
    imports it, not `pkg`, and it imports no module of the package."""
    modules = _modules(package)
    base = PACKAGES[package]
    extensions = {".".join((package, *p.relative_to(base).with_suffix("").parts)) for p in base.rglob("*.c")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = name.split(".")
                    base_parts = parts if is_package else parts[:-1]
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    module = ".".join([*base_parts, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                for alias in node.names:
                    candidate = f"{module}.{alias.name}"
                    targets.add(candidate if candidate in modules or candidate in extensions else module)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_sees_imports_inside_functions_and_type_checking() -> None:
    graph = import_graph("ds4tui")
    assert "ds4tui.screens.home" in graph["ds4tui.screens.dashboard"]  # imported inside an action
    assert "ds4tui.viewmodel" in graph["ds4tui.widgets.panels"]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_cycles(package: str) -> None:
    assert find_cycle(import_graph(package)) is None


def test_every_ds4tui_module_imports() -> None:
    modules = sorted(_modules("ds4tui"))
    code = f"import importlib\nfor m in {modules!r}: importlib.import_module(m)\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
