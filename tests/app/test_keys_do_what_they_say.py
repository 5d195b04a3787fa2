"""Keys do what the footer and `?` say, on the dashboard of every agent. `q` quits (a new-user
trial found it did nothing: the binding named the screen's `quit` action, which only the app
has), and after moving between tabs; the session file is not touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4tui.app import Ds4App
from tests.conftest import FIXTURES

SESSIONS = {
    "pi": FIXTURES / "pi" / "01-tools-and-image.jsonl",
    "claude-code": FIXTURES / "claude" / "manual-compact-diagnostics.jsonl",
    "codex": FIXTURES / "codex/sample/sessions/2026/12/02/rollout-2026-12-02T01-10-23-01a2344d-7ef9-7e61-a841-8556539ac489.jsonl",
    "gemini-cli": FIXTURES / "gemini/main/home/.gemini/tmp/proj-gemini/chats/session-2026-12-07T19-24-3adf0510.jsonl",
}


@pytest.mark.parametrize("agent", sorted(SESSIONS))
async def test_q_quits_the_dashboard(agent: str) -> None:
    path: Path = SESSIONS[agent]
    before = path.read_bytes()
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(100):
            await pilot.pause(0.02)
            if app.snapshot is not None:
                break
        await pilot.press("K", "t")  # another tab and back: the key is the screen's, not a widget's
        await pilot.press("q")
        await pilot.pause(0.2)
        assert app._exit and not app.is_running
    assert path.read_bytes() == before


async def test_the_palette_offers_quit_once() -> None:
    """The palette lists Textual's own Quit, not a second copy made from the `q` binding."""
    app = Ds4App(SESSIONS["pi"], watch=False, retrieval=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.1)
        titles = [command.title for command in app.get_system_commands(app.screen)]
        assert titles.count("Quit") == 1 and "Help" in titles


async def test_map_keys_bring_the_map_back_on_a_short_screen() -> None:
    """At 80×24 a table tab takes the map's rows; `m` and `v` show the Turns tab (and so the map)
    instead of moving a cursor nobody sees (a new-user trial)."""
    from textual.widgets import TabbedContent

    from ds4tui.widgets.pixel_map import PixelMap

    app = Ds4App(SESSIONS["pi"], watch=False, retrieval=False)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(100):
            await pilot.pause(0.02)
            if app.snapshot is not None:
                break
        for key in ("m", "v"):
            await pilot.press("T")
            await pilot.pause(0.05)
            assert not app.screen.query_one(PixelMap).display or not app.screen.query_one("#left").display
            await pilot.press(key)
            await pilot.pause(0.05)
            assert app.screen.query_one(TabbedContent).active == "turns"
            assert app.screen.query_one("#left").display and app.screen.query_one(PixelMap).region.height > 0
