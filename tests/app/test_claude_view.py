"""The read-only live view of a Claude Code transcript: numbers on screen, live appends, the
countdown ticking while idle, torn lines held back; the file is never written."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from textual.widgets import DataTable, Static

from ds4tui.claude_view import ClaudeApp, fmt_seconds
from tests.app.view_keys import check_help_and_home

FIX = Path(__file__).parents[1] / "fixtures" / "claude" / "manual-compact-diagnostics.jsonl"


def cells(table: DataTable) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_live_view_follows_appends_and_ticks(tmp_path: Path) -> None:
    lines = FIX.read_bytes().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[:33]))  # through the THINK-ONLY reply (before /compact)
    now = [0.0]
    app = ClaudeApp(path, env={}, clock=lambda: now[0])
    async with app.run_test(size=(150, 45)) as pilot:
        await pilot.pause()
        anchor = app.cache["state"]["anchor"]
        now[0] = anchor + 60
        app.refresh_data(force=False)
        head = str(app.query_one("#head", Static).render())
        assert "4:00 left" in head and "tokens until autocompact" in head and "(read-only)" in head
        assert app.map["provider"]["contextTokens"] == 19902  # MAIN:32–33's usage in this run: 5 + 50 + 19,847
        assert app.map["total"] == 19902 + app.map["laterEstimate"]
        reqs = app.query_one("#req-table", DataTable)
        assert reqs.row_count == 7  # 7 responses so far (the subagent has its own file)
        # append the rest, the last line torn: it waits
        rest = b"".join(lines[33:])
        path.write_bytes(path.read_bytes() + rest[:-20])
        app.refresh_data(force=False)
        path.write_bytes(path.read_bytes() + rest[-20:])
        app.refresh_data(force=False)
        assert app.map["provider"]["contextTokens"] == 19875
        assert app.map["total"] == 19875 + app.map["laterEstimate"]
        assert "19.9k reported" in str(app.query_one("#head", Static).render())
        rows = cells(app.query_one("#req-table", DataTable))
        assert any("messages_changed (recorded)" in row[-1] for row in rows)
        cats = {row[0]: row[1] for row in cells(app.query_one("#cat-table", DataTable))}
        # /context shows no buffer row for the model's own window (source "auto"): Free space 180.1k;
        # like /context, rows of 0 tokens are not listed (the JSON keeps them), Free space always
        assert "System tools" in cats and "Free space" in cats
        assert not {"Autocompact buffer", "MCP tools", "Custom agents", "Memory files"} & set(cats)
        now[0] = app.cache["state"]["expiresAt"] + 5  # idle: the countdown keeps going
        app.refresh_data(force=False)
        assert "expired 5 s ago" in str(app.query_one("#head", Static).render())
        now[0] = app.cache["state"]["expiresAt"] + 13 * 3600 + 47 * 60  # a session left overnight
        app.refresh_data(force=False)
        assert "expired 13 h 47 min ago" in str(app.query_one("#head", Static).render())


async def test_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    shutil.copy(FIX, path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    app = ClaudeApp(path, env={})
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("q")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_fmt_seconds() -> None:
    assert fmt_seconds(299.6) == "5:00" and fmt_seconds(3725) == "1:02:05" and fmt_seconds(None) == "—"


async def test_the_dashboards_keys_o_help_and_r(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A new-user trial: the Claude Code view answered only `q`. `o` shows the home screen (the
    dashboard's), Esc comes back, a session chosen there ends the view with its path (the CLI
    opens it: `launch.open_any`); `?` shows the keys; `r` re-reads the file and says so."""
    from tests.conftest import FIXTURES
    from tests.overview_home import env_for

    for key, value in env_for(tmp_path).items():
        monkeypatch.setenv(key, value)
    path = tmp_path / "s.jsonl"
    shutil.copy(FIX, path)
    pi = FIXTURES / "pi" / "01-tools-and-image.jsonl"
    app = ClaudeApp(path, env={})
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        lines = len(FIX.read_bytes().splitlines())
        assert [n.message for n in app._notifications][-1] == f"re-read s.jsonl: {path.stat().st_size / 1024:.1f} KiB, {lines:,} lines"
        await check_help_and_home(pilot, app, pi)
    assert app.return_value == pi
