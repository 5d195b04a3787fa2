"""Opening a session in the view of the agent that wrote it (used by the CLI and the home screen).

A Pi session opens in the dashboard (`ds4tui.app.Ds4App`); a Claude Code transcript or a Codex
rollout in its read-only live view. When the user picks another agent's session on the home
screen, the dashboard ends with that path as its result and `run_tui` opens it here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def codex_open(path: Path) -> bool:
    """A Codex rollout opens the read-only Codex view (`ds4tui.codex_app`), then the session
    chosen on its home screen, if any; False when `path` is not a rollout."""
    from ds4tui.commands.codex import codex_agent_for

    if codex_agent_for(path) is None:
        return False
    from ds4tui.codex_app import CodexApp

    _then_open(CodexApp(path).run())
    return True


def dashboard(path: Path, models: Any = None, **options: Any) -> Any:
    """`ds4tui.app.Ds4App(path, models=models, first_view=firstview.start(path, models),
    **options)`: the copy that reads a large file for the first paint (`ds4tui.firstview`) is
    forked before the app's modules (and Textual) are imported."""
    from ds4tui.firstview import start

    first = start(path, models)
    from ds4tui.app import Ds4App

    return Ds4App(path, models=models, first_view=first, **options)


def _then_open(chosen: object) -> None:
    """Open the session a view's home screen chose (`o`, then Enter), if any."""
    if isinstance(chosen, Path):
        open_any(chosen)


def run_tui(path: Path, demo: bool, config: Path | None = None) -> None:
    """Run the dashboard on the Pi session `path` (`demo` marks the bundled demo; `config` replaces
    the user's DS4 configuration); afterwards open the other agent's session picked on its home
    screen, if any."""
    from ds4sessions.agents.pi.discovery import load_model_table

    models = load_model_table()
    # a large file is read for the first paint by a copy of this process, forked before Textual
    # is imported (`ds4tui.firstview`)
    app = dashboard(path, models, demo=demo, config_file=config)
    app.process_ends_after = not demo  # (`leave` below; the demo's caller cleans up first)
    chosen = app.run()
    for warning in models.warnings:
        print(f"ds4tui: {warning}", file=sys.stderr)
    if isinstance(chosen, Path):  # another agent's session picked on the home screen
        import gc

        gc.enable()  # (`process_ends_after` left it off: another view runs now)
        open_any(chosen, config)
    elif not demo:  # (the demo's caller removes its temporary copy afterwards)
        leave(app.return_code or 0)


def leave(code: int = 0) -> None:
    """End the process now, once the dashboard is closed: stdout and stderr flushed, then
    `os._exit`. A normal exit would first wait for a derive pass still running on its thread
    and free every parsed object one by one: 2–5 s after `q` at 50,000 turns, ~20 s at 250 MB
    (a new-user trial), with the terminal blank meanwhile. Nothing is left to write: session
    files are written only by steering actions, each complete before the app returns, and the
    SQLite files ds4tui keeps are consistent at every commit."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def open_any(path: Path, config: Path | None = None) -> None:
    """Open `path` in the view of the agent that wrote it: a Codex rollout or a Claude Code
    transcript in its read-only live view, a Pi session in the dashboard. Exits 2 with one line
    for a file no agent recognizes."""
    from ds4tui.commands import session_file
    from ds4tui.commands.agents import agent_name

    path = session_file(path)
    if codex_open(path):
        return
    if agent_name(path) == "claude-code":
        # the Pi dashboard does not read Claude Code yet: a small read-only live view instead
        from ds4tui.claude_view import ClaudeApp

        _then_open(ClaudeApp(path).run())
        return
    run_tui(path, False, config)
