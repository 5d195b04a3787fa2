"""`ds4tui pin | collapse | compact | journal` run in-process on copies of Pi-written files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ds4sessions.agents.pi import build_context, read_session
from ds4tui.cli import app
from tests.sessions.test_compaction import KEY, Server, openai_reply
from tests.sessions.test_writer import copy_old

runner = CliRunner()


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_pin_prints_what_was_written_where(sample01: Path, tmp_path: Path) -> None:
    path = copy_old(sample01, tmp_path)
    code, out, _ = run("pin", str(path), "5e3b26a7")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == 'pinned 5e3b26a7: label "ds4:pin"'
    assert re.fullmatch(rf"appended label [0-9a-f]{{8}} to {re.escape(str(path))} at byte 26539 \(\d+ bytes\) \(journal #1\)", lines[1])
    code, out, _ = run("pin", str(path), "5e3b26a7", "--clear")
    assert code == 0 and out.startswith("unpinned 5e3b26a7: cleared label\n")
    code, _, err = run("pin", str(path), "5e3b26a7", "--clear")
    assert code == 1 and err == "ds4tui: refused, nothing written: entry 5e3b26a7 is not pinned\n"
    code, _, err = run("pin", str(tmp_path / "missing.jsonl"), "x")
    assert code == 2 and err.endswith("missing.jsonl: no such file\n")


def test_collapse_dry_run_then_yes_then_journal_undo(sample01: Path, tmp_path: Path) -> None:
    path = copy_old(sample01, tmp_path)
    before = path.read_bytes()
    code, out, _ = run("collapse", str(path), "--turns", "2", "--dry-run")
    assert code == 0 and path.read_bytes() == before
    assert out.startswith("Collapsed by ds4tui (built from the session entries, no model call): 2 turns, 6 messages.\n")
    assert "collapse 2 of 3 turns (6 entries from 75b6494e): saves ~1.2k tokens (1.4k → 148 summary)\n" in out
    assert (
        "prompt cache: the collapsed span's cached prefix is lost; next request $0.001124 instead of $0.000985, "
        "then $0.000371 saved per request (pays off after 1 request)\n"
    ) in out
    assert "appends a branch_summary with parent cb42aabc, fromId 7060d0dd" in out
    assert out.endswith("dry run: nothing written\n")

    code, out, _ = run("collapse", str(path), "--turns", "2", "--yes")
    assert code == 0
    assert re.search(rf"appended branch_summary ([0-9a-f]{{8}}) to {re.escape(str(path))} at byte 26539 .*\(journal #1\)\n$", out)
    assert build_context(read_session(path)).messages[-1]["role"] == "branchSummary"

    code, out, _ = run("journal", "list")
    assert code == 0 and re.fullmatch(r"#1 \S+Z collapse: branch_summary [0-9a-f]{8} in .*01-tools-and-image\.jsonl\n", out)
    code, out, _ = run("journal", "undo", "1")
    assert code == 0 and out.startswith("undid #1\nappended custom ")
    assert build_context(read_session(path)).messages == build_context(read_session(sample01)).messages
    code, out, _ = run("journal", "list", str(path))
    assert "(undone by #2)" in out.splitlines()[0] and "(undoes #1)" in out.splitlines()[1]
    code, _, err = run("journal", "undo", "1")
    assert code == 1 and "already undone by #2" in err


def test_collapse_refusals(sample01: Path, tmp_path: Path) -> None:
    path = copy_old(sample01, tmp_path)
    code, _, err = run("collapse", str(path), "--turns", "9", "--yes")
    assert code == 1 and err == "ds4tui: refused, nothing written: only 3 turn(s) on this branch; cannot collapse 9\n"
    result = runner.invoke(app, ["collapse", str(path), "--turns", "1"], input="n\n")
    assert result.exit_code == 1 and "nothing written" in result.stdout
    assert path.read_bytes() == sample01.read_bytes()


def test_compact_dry_run_and_real_request(sample01: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = copy_old(sample01, tmp_path)
    project = tmp_path / "agent"
    project.mkdir()
    (project / "settings.json").write_text('{"compaction": {"keepRecentTokens": 100}}')
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(project))
    code, out, _ = run("compact", str(path), "--dry-run")
    assert code == 0
    assert out.splitlines()[0] == "cut point: keep from df7b9f64 (splits a turn); keepRecentTokens 100, reserveTokens 16,384"
    assert out.splitlines()[1].startswith("tokens: 5,089 before → ~")
    assert "context window 200,000: Pi compacts on its own above 183,616" in out
    assert "summary request: cached $" in out and "vs cold $" in out
    assert out.endswith("dry run: no request sent, nothing written\n")
    with Server(lambda req: (200, openai_reply(), {})) as server:
        monkeypatch.setenv("DS4TUI_SUMMARY_API", "openai")
        monkeypatch.setenv("DS4TUI_SUMMARY_BASE_URL", server.base)
        monkeypatch.setenv("DS4TUI_SUMMARY_API_KEY", KEY)
        code, out, err = run("compact", str(path), "--yes")
    assert code == 0, err
    assert re.search(r"appended compaction [0-9a-f]{8} to .* at byte 26539 .*\(journal #1\)\n$", out)
    assert KEY not in out + err
    assert server.requests[0]["body"]["model"] == "claude-sonnet-4-5"


def test_compact_failure_says_why(sample01: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = copy_old(sample01, tmp_path)
    monkeypatch.setenv("DS4TUI_SUMMARY_API_KEY", KEY)
    with Server(lambda req: (503, b'{"error":"overloaded"}', {})) as server:
        monkeypatch.setenv("DS4TUI_SUMMARY_BASE_URL", server.base)
        code, _, err = run("compact", str(path), "--yes")
    assert code == 1
    # default settings: Pi keeps 20,000 tokens, this session is smaller
    assert err == "ds4tui: refused, nothing written: Nothing to compact\n"
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "settings.json").write_text('{"compaction": {"keepRecentTokens": 100}}')
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    with Server(lambda req: (503, b'{"error":"overloaded"}', {})) as server:
        monkeypatch.setenv("DS4TUI_SUMMARY_BASE_URL", server.base)
        code, _, err = run("compact", str(path), "--yes")
    assert code == 1 and "answered HTTP 503" in err
    assert path.read_bytes() == sample01.read_bytes()
