"""The keys the read-only views (Claude Code: `ds4tui.claude_view`, Codex: `ds4tui.codex_app`)
share with the Pi dashboard, so a user who knows one knows them all:

- `o`: the home screen (`ds4tui.screens.home.HomeScreen`, the same one the dashboard shows):
  Esc comes back to the view; choosing another session ends the view with that path as its
  result, and `ds4tui.launch.open_any` opens it in its agent's view;
- `?`: show or hide the key bindings; `q`: quit;
- `r`: re-read the file from its start (each view's `action_refresh_session`).

Light to import: the home screen loads on the first `o`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from textual.app import App
from textual.binding import Binding

SHARED_BINDINGS = [
    Binding("q", "quit", "Quit", id="quit", tooltip="Leave ds4tui (the session file is never touched)"),
    Binding("question_mark", "help", "Help", key_display="?", id="help", tooltip="Show or hide the key bindings"),
    Binding("escape", "hide_help_panel", "Hide keys", show=False),
    Binding("o", "open_session", "Open", id="open", tooltip="Every session of every agent: context, cache countdown, cost today"),
]
"""The first keys of every view, the dashboard's too (`ds4tui.app.Ds4App.BINDINGS`)."""

VIEW_BINDINGS = [
    *SHARED_BINDINGS,
    Binding("r", "refresh_session", "Refresh", id="refresh", tooltip="Re-read the session file from its start"),
]
"""The bindings of a read-only view (the dashboard's keys of the same names)."""


class SessionViewKeys(App[Path | None]):
    """An `App` showing the one session file `path`, with `VIEW_BINDINGS`' open and help actions
    (the view implements `action_refresh_session`). The app's result is the session chosen on
    the home screen, if any (None: quit)."""

    BINDINGS = VIEW_BINDINGS
    path: Path
    clock: Callable[[], float] = time.time
    """The clock for the home screen's countdowns (epoch seconds; tests inject one)."""

    def action_open_session(self) -> None:
        """The home screen; Esc comes back, a chosen session (another file) ends this view."""
        from ds4tui.screens.home import HomeScreen

        if isinstance(self.screen, HomeScreen) or quitting(self):
            return  # (already there, or quitting: `q` then `o`)

        def chosen(path: Path | None) -> None:
            if path is not None and Path(path).resolve() != self.path.resolve():
                self.exit(result=Path(path))

        self.push_screen(HomeScreen(now=self.clock), chosen)

    def action_help(self) -> None:
        """Show or hide the key bindings panel."""
        toggle_help(self)

    def reread_notice(self, lines: int, size: int) -> None:
        """Say what `r` read: `re-read NAME: 1.2 MiB, 4,512 lines`."""
        self.notify(reread_text(self.path.name, size, lines), timeout=4)


def quitting(app: App) -> bool:
    """True once `app.exit()` was called (a key pressed after `q` must not open a screen)."""
    return bool(getattr(app, "_exit", False))


def toggle_help(app: App) -> None:
    """Show the key bindings panel, or hide it when it is shown (`?` in every view)."""
    if app.screen.query("HelpPanel"):
        app.action_hide_help_panel()
    else:
        app.action_show_help_panel()


def reread_text(name: str, size: int, lines: int) -> str:
    """The notice after `r` (here and in the dashboard): `re-read NAME: 12.3 MiB, 4,512 lines`
    (`name` shown literally)."""
    from ds4tui.text import fmt_bytes, literal

    return f"re-read {literal(name, keep_newlines=False)}: {fmt_bytes(size)}, {lines:,} lines"
