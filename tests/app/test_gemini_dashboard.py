"""Gemini CLI on the one dashboard (issue 34): a real Gemini CLI session (tests/fixtures/gemini,
made by the real CLI) gets the map in Gemini's categories, the turns, the inspector, the Cache
and Diagnostics tabs and the one-line steering refusal, through the plug-in seam alone; SVG
snapshots at 100×30 (looked at as PNG: `uv run python scripts/screenshots.py --png FILE.svg`)."""

from __future__ import annotations

import pytest

from ds4tui.app import Ds4App
from tests.app.test_dashboard import settle
from tests.conftest import FIXTURES

GEMINI = FIXTURES / "gemini"
MAIN = GEMINI / "main" / "home" / ".gemini" / "tmp" / "proj-gemini" / "chats" / "session-2026-12-07T19-24-3adf0510.jsonl"
"""The shared scenario: list + tool, read, thinking, a compression, a turn after it (three resumes)."""
EXTRA = GEMINI / "extra" / "home" / ".gemini" / "tmp" / "proj-extra" / "chats" / "session-2026-12-07T19-25-81c32c5f.jsonl"
"""Ours: a failed tool call, an @-included picture, a subagent."""
LAST = {MAIN: 1796671503.47, EXTRA: 1796671564.273}
"""The last request's time of each session (Unix seconds): the clock is two minutes later."""


def app(path=MAIN) -> Ds4App:  # type: ignore[no-untyped-def]
    return Ds4App(path, watch=False, retrieval=False, now=lambda: LAST[path] + 120)


async def _ready(pilot) -> None:  # type: ignore[no-untyped-def]
    await settle(pilot, pilot.app)


@pytest.mark.parametrize("name", ["main", "extra"])
def test_dashboard_of_a_gemini_session(snap_compare, name: str) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(MAIN if name == "main" else EXTRA), terminal_size=(100, 30), run_before=_ready)


async def test_the_cockpit_on_a_gemini_session() -> None:
    """At 100×30: the map in Gemini's categories (12k tokens of a 1,048,576 window: the system
    instruction and tool declarations get cells, the messages share one; the compression's room
    drawn as reserved space) and the legend with every kind of part, the turns, the inspector
    with the request's usage, the Cache tab with every request once, Diagnostics, DS4's plan as a
    what-if, and `p` refused in one line."""
    from ds4tui.palette import colour_of
    from ds4tui.widgets.cache import CachePanel
    from ds4tui.widgets.panels import DiagnosticsView, EntryInspector, StatusLine
    from ds4tui.widgets.pixel_map import PixelMap
    from ds4tui.widgets.turns import TurnList

    before = EXTRA.read_bytes()
    dashboard = app(EXTRA)
    async with dashboard.run_test(size=(100, 30)) as pilot:
        await _ready(pilot)
        snap = dashboard.snapshot
        assert snap.agent == "gemini-cli" and dashboard.view.header.agent == "Gemini CLI"
        assert snap.provider.context_tokens == 12_247  # the last request's tokens.input
        assert dashboard.view.header.note == "compression in 512k"
        pixel_map = dashboard.query_one(PixelMap)
        roles = dashboard.view.map.roles
        cells = {c.category for c in pixel_map.cells}
        assert {"system_instruction", "tool_declarations", "compression_reserve"} <= cells
        assert len({colour_of(c, roles) for c in cells if c != "free"}) >= 3
        legend = [row.id for row in dashboard.view.legend.rows]
        assert legend[:2] == ["system_instruction", "tool_declarations"] and {
            "session_context", "user", "model_text", "function_calls", "function_responses", "images"} <= set(legend)
        assert dashboard.query_one(TurnList).row_count == len(snap.turns) == 4
        inspector = "\n".join(dashboard.query_one(EntryInspector).render_line(y).text for y in range(6))
        assert "entry " in inspector and "request 5: input 151 · cache read 12,096" in inspector
        assert dashboard.derived.plan is not None and dashboard.derived.plan.what_if
        await pilot.press("K")
        await pilot.pause()
        cache_text = "\n".join(dashboard.query_one(CachePanel).render_line(y).text for y in range(3))
        assert "5 requests" in cache_text
        await pilot.press("d")
        await pilot.pause()
        diagnostics = "".join(dashboard.query_one(DiagnosticsView).render_line(y).text.strip() for y in range(3))
        assert str(EXTRA) in diagnostics
        await pilot.press("p")
        await pilot.pause()
        status = str(dashboard.query_one(StatusLine).render())
        assert "refused, nothing written: Gemini CLI sessions are Gemini CLI's own append-only record" in status
    assert EXTRA.read_bytes() == before


async def test_home_lists_gemini_sessions_and_opens_one(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """`home` with a `.gemini` folder in `HOME`: the CLI's sessions (not a resume's header-only
    file), with Gemini's context count; Enter opens one in the one dashboard."""
    from textual.widgets import DataTable

    from ds4tui.screens.home import HomeScreen, visible_paths
    from tests.app.test_home import _filled, cell
    from tests.overview_home import env_for

    for key, value in env_for(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HOME", str(GEMINI / "extra" / "home"))
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)
    now = LAST[EXTRA] + 120
    dashboard = Ds4App(MAIN, watch=False, retrieval=False, now=lambda: now)
    async with dashboard.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await pilot.press("o")
        screen = await _filled(pilot)
        assert isinstance(screen, HomeScreen)
        shown = visible_paths(screen)
        assert str(EXTRA) in shown and not any(p.endswith("T19-26-81c32c5f.jsonl") for p in shown)
        table = screen.query_one(DataTable)
        assert cell(table, EXTRA, "agent") == "gemini" and cell(table, EXTRA, "context").endswith("1%")  # (compact at 140)
        table.move_cursor(row=shown.index(str(EXTRA)))
        table.focus()
        await pilot.press("enter")
        await dashboard.workers.wait_for_complete()
        for _ in range(100):
            await pilot.pause(0.02)
            if dashboard.snapshot is not None and dashboard.snapshot.path == EXTRA:
                break
        assert not isinstance(dashboard.screen, HomeScreen) and dashboard.session_path == EXTRA
        assert dashboard.snapshot.agent == "gemini-cli"


@pytest.mark.parametrize("days, form", [(0, "%H:%M"), (2, "%m-%d %H:%M")])
async def test_turn_times_follow_the_apps_clock(days: int, form: str) -> None:
    """The turn list's time column is "HH:MM" when every turn is from the app's today and
    "MM-DD HH:MM" otherwise, with today taken from the app's clock, not the machine's date (the
    snapshots above once changed form when CI ran the day after they were made)."""
    import datetime as dt

    now = LAST[MAIN] + 120 + days * 86_400
    dashboard = Ds4App(MAIN, watch=False, retrieval=False, now=lambda: now)
    async with dashboard.run_test(size=(100, 30)) as pilot:
        await _ready(pilot)
        turns = dashboard.snapshot.turns
        times = [row.time for row in dashboard.view.turns]
        expected = [t.time.astimezone().strftime(form) for t in turns if t.time is not None]
        assert [t for t in times if t] == expected and len(expected) == 3
