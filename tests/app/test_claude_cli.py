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
    assert "autocompact at 167k" in run("map", str(MAIN)).stdout
    assert "History (8 requests" in run("cache", str(MAIN)).stdout


def test_cache_text_says_when_the_countdown_is_taken() -> None:
    """The text says the countdown is taken now (the default, as the TUI counts), or at the last
    request with `--last` (a new user read "300 s left" of a transcript from March as a live cache)."""
    lines = run("cache", str(MAIN), "--last").stdout.splitlines()
    assert lines[1].startswith("as of: the last request, ") and lines[1].endswith("(without --last: now)")
    assert lines[2].startswith("cache: warm · 5:00 left — ") and "lifetime 300 s" in lines[2]
    lines = run("cache", str(MAIN)).stdout.splitlines()
    assert lines[1].startswith("as of: now, ") and "the last request was" in lines[1]
    assert lines[2].startswith("cache: cold — expired")


@pytest.mark.parametrize("args", [("pin", "x"), ("collapse", "--turns", "1", "--yes"), ("compact", "--yes")])
def test_steering_refused_and_nothing_written(tmp_path: Path, args: tuple[str, ...]) -> None:
    copy = tmp_path / "s.jsonl"
    shutil.copy(MAIN, copy)
    before = hashlib.sha256(copy.read_bytes()).hexdigest()
    result = run(args[0], str(copy), *args[1:])
    assert result.exit_code == 1
    assert "Claude Code" in result.output and "refused, nothing written" in result.output
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == before


def test_plan_is_a_what_if_and_writes_nothing(tmp_path: Path) -> None:
    """`plan` on a Claude Code transcript: what DS4 would send, naming the real agent; the
    transcript and the state directory are untouched (no index, no journal)."""
    copy = tmp_path / "s.jsonl"
    shutil.copy(MAIN, copy)
    before = copy.read_bytes()
    state = tmp_path / "state"
    result = runner.invoke(app, ["plan", str(copy), "--json"], env={"DS4TUI_STATE_DIR": str(state)})
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["agent"] == "claude-code" and data["whatIf"] is True
    assert data["planning"]["originalMessageCount"] > 0
    assert copy.read_bytes() == before and not state.exists()
    text = runner.invoke(app, ["plan", str(copy)]).stdout
    assert text.startswith("What DS4 would send: a what-if (Claude Code builds its own context")


def test_retrieve_refuses_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    copy = tmp_path / "s.jsonl"
    shutil.copy(MAIN, copy)
    state = tmp_path / "state"
    result = runner.invoke(app, ["retrieve", str(copy), "--json"], env={"DS4TUI_STATE_DIR": str(state)})
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "retrieve: DS4's historical retrieval is not available for Claude Code sessions" in lines[0]
    assert not state.exists()


@pytest.mark.parametrize("content", [b'{"hello": 1}\n', b'[1, 2, 3]\n{"type": "weird"}\n'])
@pytest.mark.parametrize("command", ["map", "cache", "context"])
def test_unrecognized_file_exit_2(tmp_path: Path, content: bytes, command: str) -> None:
    path = tmp_path / "other.jsonl"
    path.write_bytes(content)
    result = run(command, str(path), "--json")
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "not a session file of Pi, Claude Code, Codex or OpenCode" in lines[0]


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


def test_open_runs_the_one_dashboard(monkeypatch: pytest.MonkeyPatch) -> None:
    # the dashboard itself runs on Claude Code transcripts in test_codex_tui_equals_json.py and
    # test_snapshots.py (Textual run_test); here only the dispatch: no view of its own
    from ds4tui import app as app_module

    opened: list[Path] = []
    monkeypatch.setattr(app_module.Ds4App, "run", lambda self: opened.append(self.session_path))
    monkeypatch.setattr("ds4tui.launch.leave", lambda code=0: None)
    result = run("open", str(MAIN))
    assert result.exit_code == 0, result.output
    assert opened == [MAIN]


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
    children = [line for line in out.splitlines() if line.startswith("│     ") and "..." in line]
    assert children and len({len(line.rstrip(" │")) for line in children}) == 1  # tokens right-aligned in one column
