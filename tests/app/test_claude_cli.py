"""`ds4tui map/cache/context/plan/pin/collapse/compact` on Claude Code transcripts, discovery,
and files no agent recognizes (exit 2, one line). Runs the real CLI in-process (Typer runner)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ds4sessions.agents.claude.agent import ClaudeCodeAgent
from ds4sessions.agents.claude.discovery import config_roots, discover
from ds4sessions.agents.registry import agent_for_path
from ds4tui.cli import app

FIX = Path(__file__).parents[1] / "fixtures" / "claude"
MAIN = FIX / "manual-compact-diagnostics.jsonl"
runner = CliRunner()


def run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


def test_registry_recognizes_claude_files() -> None:
    agent = agent_for_path(MAIN)
    assert agent is not None and agent.name == "claude-code"
    assert not ClaudeCodeAgent().recognizes(b'{"type":"session","version":3,"id":"x"}\n')


def test_map_json() -> None:
    result = run("map", str(MAIN), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["agent"] == "claude-code" and data["provider"]["contextTokens"] == 19875
    assert data["total"] == 19875 + data["laterEstimate"]
    for key in ("path", "model", "contextWindow", "estimator", "estimate", "unattributed", "free", "provider",
                "systemInferred", "categories", "diagnostics", "problems"):
        assert key in data


def test_cache_json_totals() -> None:
    result = run("cache", str(MAIN), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["agent"] == "claude-code"
    assert set(data["totals"]) == {"requests", "inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens"}
    assert data["totals"]["requests"] == 8
    assert data["history"]["misses"][0]["miss"]["cause"] == "messages_changed"


def test_context_json() -> None:
    result = run("context", str(MAIN), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["agent"] == "claude-code" and data["messages"][0]["role"] == "compactionSummary"


def test_text_outputs() -> None:
    assert "tokens until autocompact" in run("map", str(MAIN)).stdout
    assert "totals: 8 requests" in run("cache", str(MAIN)).stdout


def test_cache_text_says_when_the_countdown_is_taken() -> None:
    """The text says the countdown is taken at the last request (as the JSON's state is), or
    now with `--now` (a new user read "300 s left" of a transcript from March as a live cache)."""
    lines = run("cache", str(MAIN)).stdout.splitlines()
    assert lines[1] == "cache: tier 5m, 300 s left as of the last request (--now: as of now)"
    assert run("cache", str(MAIN), "--now").stdout.splitlines()[1] == "cache: tier 5m, expired now"


@pytest.mark.parametrize("args", [("pin", "x"), ("collapse", "--turns", "1", "--yes"), ("compact", "--yes"), ("plan",)])
def test_steering_refused_and_nothing_written(tmp_path: Path, args: tuple[str, ...]) -> None:
    copy = tmp_path / "s.jsonl"
    shutil.copy(MAIN, copy)
    before = hashlib.sha256(copy.read_bytes()).hexdigest()
    result = run(args[0], str(copy), *args[1:])
    assert result.exit_code == 1
    assert "Claude Code" in result.output
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("content", [b'{"hello": 1}\n', b'[1, 2, 3]\n{"type": "weird"}\n'])
@pytest.mark.parametrize("command", ["map", "cache", "context"])
def test_unrecognized_file_exit_2(tmp_path: Path, content: bytes, command: str) -> None:
    path = tmp_path / "other.jsonl"
    path.write_bytes(content)
    result = run(command, str(path), "--json")
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "not a Pi session, Claude Code transcript or Codex rollout" in lines[0]


def test_discovery_roots_and_sessions(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    env = {"CLAUDE_CONFIG_DIR": f"{a}, {b}"}
    assert config_roots(env, tmp_path / "home")[:2] == [a, b]
    assert config_roots(env, tmp_path / "home")[2:] == [tmp_path / "home" / ".claude", tmp_path / "home" / ".config" / "claude"]
    project = b / "projects" / "-home-dev-proj-claude"
    project.mkdir(parents=True)
    shutil.copy(MAIN, project / "c347f1de-4417-4358-b17e-be31d2e7faa1.jsonl")
    sub = project / "c347f1de-4417-4358-b17e-be31d2e7faa1" / "subagents"
    sub.mkdir(parents=True)
    for f in (FIX / "manual-compact-diagnostics" / "subagents").iterdir():
        shutil.copy(f, sub / f.name)
    old = 1_000_000.0
    for f in [project / "c347f1de-4417-4358-b17e-be31d2e7faa1.jsonl", *sub.iterdir()]:
        os.utime(f, (old, old))
    (b / "sessions").mkdir()
    (b / "sessions" / f"{os.getpid()}.json").write_text(json.dumps({"sessionId": "c347f1de-4417-4358-b17e-be31d2e7faa1", "status": "busy"}))
    infos = discover(env, tmp_path / "home", now=old + 10_000)
    assert len(infos) == 2
    main = next(i for i in infos if i.parent is None)
    assert main.agent == "claude-code" and main.project == "/home/dev/proj-claude"
    assert main.title == "LIST-FILES: what files are in this project?" and main.live  # pid alive
    assert main.model == "claude-opus-4-8"
    subinfo = next(i for i in infos if i.parent is not None)
    assert subinfo.parent == "c347f1de-4417-4358-b17e-be31d2e7faa1" and not subinfo.live
    assert subinfo.title == "[general-purpose] Count lines in notes.txt"
    # a dead pid: live falls back to mtime
    (b / "sessions" / f"{os.getpid()}.json").unlink()
    (b / "sessions" / "999999999.json").write_text(json.dumps({"sessionId": main.session_id}))
    assert not next(i for i in discover(env, tmp_path / "home", now=old + 10_000) if i.parent is None).live
    assert next(i for i in discover(env, tmp_path / "home", now=old + 5) if i.parent is None).live


def test_open_runs_the_claude_view_not_the_pi_dashboard(monkeypatch: pytest.MonkeyPatch) -> None:
    # the view itself runs in tests/app/test_claude_view.py (Textual run_test); here only the dispatch
    from ds4tui import claude_view

    opened: list[Path] = []
    monkeypatch.setattr(claude_view.ClaudeApp, "run", lambda self: opened.append(self.path))
    result = run("open", str(MAIN))
    assert result.exit_code == 0, result.output
    assert opened == [MAIN]


def test_a_session_chosen_in_the_claude_view_opens_in_its_agents_view(monkeypatch: pytest.MonkeyPatch) -> None:
    # `o` then Enter in the Claude Code view ends it with the chosen path (test_claude_view.py,
    # run_test); here only the dispatch: that path opens next, in its agent's view
    from ds4tui import claude_view, codex_app

    rollout = (Path(__file__).parents[1] / "fixtures" / "codex" / "sample" / "sessions" / "2026" / "12" / "02"
               / "rollout-2026-12-02T01-10-23-01a2344d-7ef9-7e61-a841-8556539ac489.jsonl")
    opened: list[Path] = []
    monkeypatch.setattr(claude_view.ClaudeApp, "run", lambda self: opened.append(self.path) or rollout)
    monkeypatch.setattr(codex_app.CodexApp, "run", lambda self: opened.append(self.path))
    result = run("open", str(MAIN))
    assert result.exit_code == 0, result.output
    assert opened == [MAIN, rollout]


def test_the_map_lists_the_rows_context_lists(tmp_path: Path) -> None:
    """`ds4tui map` on a Claude Code transcript lists the categories `/context` lists: none of 0
    tokens (the JSON keeps them all), Free space always, child names in one aligned column."""
    import subprocess
    import sys

    from tests.conftest import FIXTURES

    path = next(p for p in sorted((FIXTURES / "claude").rglob("*.jsonl")))
    out = subprocess.run([sys.executable, "-m", "ds4tui.cli", "map", str(path)], capture_output=True, text=True, check=True).stdout
    assert "Free space" in out and "MCP tools" not in out and "Autocompact buffer" not in out
    data = json.loads(subprocess.run([sys.executable, "-m", "ds4tui.cli", "map", "--json", str(path)],
                                     capture_output=True, text=True, check=True).stdout)
    assert {c["id"] for c in data["categories"]} >= {"mcp_tools", "autocompact_buffer", "free_space"}
    rows = [line for line in out.splitlines() if line.startswith("    ") and line.strip()]
    assert rows and len({len(line.rstrip()) for line in rows}) == 1  # tokens right-aligned in one column


@pytest.mark.parametrize("value", ["1" + "0" * 400, "1e308", "-7", '"12"', "1" + "0" * 31], ids=["10**400", "1e308", "-7", "string", "10**31"])
def test_usage_counts_out_of_range_count_as_zero(tmp_path: Path, value: str) -> None:
    """Issue 30: a 400-digit `input_tokens` made `map` and `cache` on a Claude Code transcript an
    "internal error (OverflowError)". A count outside 0..2**53 counts as 0, as a malformed one."""
    import re

    text = MAIN.read_text(encoding="utf-8")
    hostile = re.sub(r'"(input_tokens|cache_read_input_tokens|ephemeral_1h_input_tokens)":\s*\d+',
                     lambda m: f'"{m.group(1)}": {value}', text)
    assert hostile != text
    path = tmp_path / "t.jsonl"
    path.write_text(hostile, encoding="utf-8")
    for command in (["map"], ["map", "--json"], ["cache"], ["cache", "--json"], ["context"]):
        result = run(*command, str(path))
        assert result.exit_code == 0 and result.exception is None, (command, result.output[-300:])
