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


def _map_of(conversation) -> dict:  # type: ignore[no-untyped-def]
    from ds4sessions.agents.claude.views import context_map

    return {k: v for k, v in context_map(conversation, {}).items() if k != "path"}


def _read_all(tail) -> list[int]:  # type: ignore[no-untyped-def]
    """Poll until nothing is left; the lines each poll read."""
    counts = []
    while True:
        before = tail.line_no
        if not tail.poll():
            return counts
        counts.append(tail.line_no - before)


def test_the_tail_reads_a_file_of_tiny_lines_a_slice_at_a_time(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A transcript with runs of blank lines is read `POLL_LINES` lines a poll at most (it was up
    to 8 MiB of lines at once: ~1 GB of line objects for blank lines), with the numbers of a
    whole read."""
    from ds4sessions.agents.claude.reader import read_transcript
    from ds4sessions.ingest import tailer
    from ds4tui.claude_view import ClaudeTail

    lines = FIX.read_bytes().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[:20]) + b"\n" * 700 + b"".join(lines[20:]) + b" \n" * 300)
    monkeypatch.setattr(tailer, "POLL_LINES", 100)
    tail = ClaudeTail(path)
    counts = _read_all(tail)
    assert max(counts) == 100 and sum(counts) == len(lines) + 1000 and tail.offset == path.stat().st_size
    assert _map_of(tail.reader.conversation()) == _map_of(read_transcript(path))


def test_the_tail_starts_over_on_a_replaced_file_and_keeps_the_state_of_a_deleted_one(tmp_path: Path) -> None:
    """A transcript replaced by another (rename over it) is read from its start (the old tail read
    on from its old offset inside the new file); a deleted one keeps the last state and says so."""
    from ds4sessions.agents.claude.reader import read_transcript
    from ds4tui.claude_view import ClaudeTail

    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(FIX.read_bytes().splitlines(keepends=True)[:33]))
    tail = ClaudeTail(path)
    _read_all(tail)
    other = FIX.parent / "autocompact-diagnostics.jsonl"
    staged = tmp_path / "staged.jsonl"
    shutil.copy(other, staged)
    staged.replace(path)
    assert tail.poll() is True and tail.note == f"{path} was replaced: read again from its start"
    _read_all(tail)
    assert _map_of(tail.reader.conversation()) == _map_of(read_transcript(other))
    assert not tail.reader.conversation().diagnostics
    shown = _map_of(tail.reader.conversation())
    path.unlink()
    assert tail.poll() is False and tail.poll() is False
    assert tail.error == f"{path} was deleted: the last state read is shown"
    assert _map_of(tail.reader.conversation()) == shown
    shutil.copy(FIX, path)
    assert tail.poll() is True and tail.error is None and tail.note == f"{path} was created again: read again from its start"
    _read_all(tail)
    assert _map_of(tail.reader.conversation()) == _map_of(read_transcript(path))
    with path.open("ab") as f:  # an append: the note has been read
        f.write(FIX.read_bytes().splitlines(keepends=True)[-1])
    assert tail.poll() is True and tail.note is None


def test_a_line_over_the_cap_is_the_same_diagnostic_as_a_whole_read(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The tail keeps only the head of a line over the reader's cap (`OversizedLine`); the
    reader reports it as the whole-file read does, not as bad JSON."""
    from ds4sessions.agents.claude import reader as claude_reader
    from ds4tui import claude_view

    monkeypatch.setattr(claude_reader, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(claude_view, "MAX_LINE_BYTES", 1000)
    lines = FIX.read_bytes().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[:5]) + b'{"type":"user","x":"' + b"y" * 5000 + b'"}\n' + b"".join(lines[5:]))
    tail = claude_view.ClaudeTail(path)
    _read_all(tail)
    got = [(d.kind, d.message, d.line_no) for d in tail.reader.conversation().diagnostics]
    assert got == [(d.kind, d.message, d.line_no) for d in claude_reader.read_transcript(path).diagnostics]
    assert ("line longer than 1000 bytes, not read", 6) in [(m, n) for _, m, n in got]


def test_snapshot_of_a_deleted_transcript(snap_compare, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The view once its transcript is deleted: the last state read stays on screen (the
    categories, the requests, the countdown at a fixed clock) and the status line says why."""
    monkeypatch.chdir(tmp_path)
    path = Path("s.jsonl")
    shutil.copy(FIX, path)
    app = ClaudeApp(path, env={}, watch=True, clock=lambda: 1_796_176_129.596)  # 2 min after the last request

    async def delete(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause()
        path.unlink()
        app.refresh_data(force=False)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 36), run_before=delete)


async def test_a_last_request_dated_in_the_future_starts_no_countdown(tmp_path: Path) -> None:
    """A clock 187 days before the transcript's last request (a wrong timestamp or clock): no
    countdown, and why (it showed "cache 5m: 4493:25:10 left")."""
    app = ClaudeApp(FIX, env={}, watch=False, clock=lambda: 1_780_000_000.0)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        head = str(app.query_one("#head", Static).render())
        assert "cache 5m: the last refresh is dated 187 d 5 h in the future (a wrong timestamp or clock), so no countdown" \
            in " ".join(head.split()), head
        assert " left" not in head



async def test_the_category_table_is_not_cut_at_120_columns() -> None:
    """The category pane is as wide as its table (up to half the screen), so "inferred" and the
    longest skill name show whole at 120 columns (a fixed third cut them: "inferre")."""
    from textual.widgets import DataTable

    app = ClaudeApp(FIX, env={}, watch=False, clock=lambda: 1_780_000_000.0)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        table = app.query_one("#cat-table", DataTable)
        assert table.row_count > 20 and table.virtual_size.width <= table.scrollable_content_region.width
        assert app.query_one("#req-table", DataTable).size.width >= 120 // 2 - 2
