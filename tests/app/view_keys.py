"""The keys the read-only views share with the dashboard (`ds4tui.screens.view_keys`), driven
the same way for the Claude Code and the Codex view."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input

from ds4tui.screens.home import HomeScreen


async def check_help_and_home(pilot, app, chosen: Path) -> None:  # type: ignore[no-untyped-def]
    """`?` shows and hides the keys; `o` opens the home screen and Esc comes back; `o`, a typed
    path and Enter end the view with that path (the caller checks `app.return_value`)."""
    await pilot.press("question_mark")
    await pilot.pause()
    assert app.screen.query("HelpPanel")
    await pilot.press("question_mark")
    await pilot.press("o")
    await pilot.pause()
    assert isinstance(app.screen, HomeScreen)
    await pilot.press("escape")
    await pilot.pause()
    assert not isinstance(app.screen, HomeScreen) and app.is_running
    await pilot.press("o")
    await pilot.pause()
    app.screen.query_one(Input).value = str(chosen)
    await pilot.press("enter")
    await pilot.pause()
