"""The three floors import one way only: ds4core <- ds4sessions <- ds4tui.

Checked twice: statically (every import statement in the source trees) and dynamically
(importing every module of a lower floor in a fresh interpreter loads none of the upper ones).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "ds4core": {"ds4sessions", "ds4tui", "textual", "rich", "watchdog", "typer"},
    "ds4sessions": {"ds4tui", "textual"},
}
SOURCES = {
    "ds4core": ROOT / "core" / "src" / "ds4core",
    "ds4sessions": ROOT / "sessions" / "src" / "ds4sessions",
}


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_static_imports_point_down(package: str) -> None:
    files = sorted(SOURCES[package].rglob("*.py"))
    assert files, f"no sources found for {package}"
    bad = {
        str(f.relative_to(ROOT)): sorted(_imported_roots(f) & FORBIDDEN[package])
        for f in files
        if _imported_roots(f) & FORBIDDEN[package]
    }
    assert bad == {}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_runtime_imports_point_down(package: str) -> None:
    modules = sorted(
        ".".join((package, *f.relative_to(SOURCES[package]).with_suffix("").parts)).removesuffix(".__init__")
        for f in SOURCES[package].rglob("*.py")
        if f.name != "__main__.py"
    )
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted({n.split('.')[0] for n in sys.modules})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert loaded & FORBIDDEN[package] == set()
