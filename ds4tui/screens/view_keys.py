"""The keys every screen of the app shares (the dashboard's first bindings, the home screen's):

- `o`: the home screen (`ds4tui.screens.home.HomeScreen`): Esc comes back; choosing a session
  opens it in the dashboard, whatever agent wrote it;
- `?`: show or hide the key bindings; `q`: quit.

Light to import: the home screen loads on the first `o`.
"""

from __future__ import annotations

from textual.app import App
from textual.binding import Binding

SHARED_BINDINGS = [
    Binding("q", "app.quit", "Quit", id="quit", tooltip="Leave ds4tui (the session file is never touched)"),
    Binding("question_mark", "help", "Help", key_display="?", id="help", tooltip="Show or hide the key bindings"),
    Binding("escape", "hide_help_panel", "Hide keys", show=False),
    Binding("o", "open_session", "Open", id="open", tooltip="Every session of every agent: context, cache countdown, cost today"),
]
"""The first keys of every view, the dashboard's too (`ds4tui.app.Ds4App.BINDINGS`)."""

def quitting(app: App) -> bool:
    """True once `app.exit()` was called (a key pressed after `q` must not open a screen)."""
    return bool(getattr(app, "_exit", False))


def toggle_help(app: App) -> None:
    """Show the key bindings panel, or hide it when it is shown (`?` in every view)."""
    if app.screen.query("HelpPanel"):
        app.action_hide_help_panel()
    else:
        app.action_show_help_panel()
        app.call_after_refresh(_place_help, app)


def _place_help(app: App) -> None:
    """On a narrow screen the panel floats over the right side (app.tcss: `Screen.-narrow
    HelpPanel`, absolute): move it to the right edge, whatever its width came out as."""
    for panel in app.screen.query("HelpPanel"):
        if panel.styles.position == "absolute":
            panel.styles.offset = (max(app.screen.size.width - panel.outer_size.width, 0), 0)


def reread_text(name: str, size: int, lines: int) -> str:
    """The notice after `r` (here and in the dashboard): `re-read NAME: 12.3 MiB, 4,512 lines`
    (`name` shown literally)."""
    from ds4tui.text import fmt_bytes, literal

    return f"re-read {literal(name, keep_newlines=False)}: {fmt_bytes(size)}, {lines:,} lines"
