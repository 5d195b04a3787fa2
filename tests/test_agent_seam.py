"""Every agent through one seam (issue 28): no code outside the agent plug-ins
(`ds4sessions/agents/`) and the registry branches on an agent's name.

Statically, over every module of the app (`ds4tui/`) and of the sessions layer outside
`ds4sessions/agents/`: no comparison (`==`, `!=`, `in`, `not in`, `match`) against an agent id
("pi", "claude-code", "codex", or any id a bundled plug-in declares) or against the id constants
of `ds4sessions.agents.base`, and no dict or set literal keyed by agent ids (a lookup by name is a
branch too). What differs between agents is asked of the agent: its `capabilities`, `label`,
categories and methods.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = ROOT / "sessions" / "src" / "ds4sessions"
CHECKED = [ROOT / "ds4tui", SESSIONS]
ALLOWED = [SESSIONS / "agents"]
ID_CONSTANTS = {"PI", "CLAUDE_CODE", "CODEX", "GEMINI_CLI", "OPENCODE"}


def agent_ids() -> set[str]:
    from ds4sessions.agents.base import AGENTS
    from ds4sessions.agents.registry import all_agents

    return set(AGENTS) | {a.name for a in all_agents()} | {"gemini-cli", "opencode"}


def _files() -> list[Path]:
    out = []
    for base in CHECKED:
        for path in sorted(base.rglob("*.py")):
            if not any(path.is_relative_to(a) for a in ALLOWED):
                out.append(path)
    return out


def _is_agent_name(node: ast.AST, ids: set[str]) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in ids
    if isinstance(node, ast.Name):
        return node.id in ID_CONSTANTS
    if isinstance(node, ast.Attribute):
        return node.attr in ID_CONSTANTS
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_agent_name(e, ids) for e in node.elts)
    return False


def branches(path: Path, ids: set[str]) -> list[str]:
    """`file:line: code` of every branch on an agent's name in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        hit = False
        if isinstance(node, ast.Compare):
            hit = any(_is_agent_name(x, ids) for x in [node.left, *node.comparators])
        elif isinstance(node, ast.Dict):
            hit = any(k is not None and _is_agent_name(k, ids) for k in node.keys)
        elif isinstance(node, ast.Set):
            hit = any(_is_agent_name(e, ids) for e in node.elts)
        elif isinstance(node, ast.match_case):
            hit = isinstance(node.pattern, ast.MatchValue) and _is_agent_name(node.pattern.value, ids)
        if hit:
            where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
            line = getattr(node, "lineno", None) or getattr(getattr(node, "pattern", None), "lineno", "?")
            found.append(f"{where}:{line}: {ast.unparse(node)[:100]}")
    return found


def test_no_branch_on_an_agents_name_outside_the_plugins() -> None:
    ids = agent_ids()
    found = [line for path in _files() for line in branches(path, ids)]
    assert found == []


@pytest.mark.parametrize("code", [
    'if snap.agent == "claude-code": pass',
    'x = agent.name != "pi"',
    'if name in ("codex", "pi"): pass',
    'SHORT = {"claude-code": "claude"}',
    'from ds4sessions.agents.base import CODEX\nok = a == CODEX',
    'match agent.name:\n    case "codex":\n        pass',
])
def test_the_check_finds_each_kind_of_branch(tmp_path: Path, code: str) -> None:
    """(The check itself can fail: every form of branch it names is found.)"""
    path = tmp_path / "probe.py"
    path.write_text(code, encoding="utf-8")
    assert branches(path, agent_ids())
