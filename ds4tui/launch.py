"""Opening a session in the dashboard (used by the CLI): every agent's session opens in the one
dashboard (`ds4tui.app.Ds4App`), which asks the agent's plug-in for what it can offer.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable


LEAN_CL100K: Callable[[], None] | None = None
"""Set by the `ds4tui` console script (`ds4tui.mapjson.main`) to `mapjson._load_cl100k_lean`:
the process is ds4tui's own, so `run_tui` loads cl100k lean (which trims the process's shared
tiktoken encoding for good: not done for a caller in another program's process, e.g. tests)."""


def dashboard(path: Path, models: Any = None, **options: Any) -> Any:
    """`ds4tui.app.Ds4App(path, models=models, first_view=firstview.start(path, models),
    **options)`: the copy that reads a large file for the first paint (`ds4tui.firstview`) is
    forked before the app's modules (and Textual) are imported."""
    from ds4tui.firstview import start

    first = start(path, models)
    from ds4tui.app import Ds4App

    return Ds4App(path, models=models, first_view=first, **options)


def run_tui(path: Path, demo: bool, config: Path | None = None) -> None:
    """Run the dashboard on the session `path` of any agent (`demo` marks the bundled demo;
    `config` replaces the user's DS4 configuration)."""
    from ds4sessions.agents.pi.discovery import load_model_table

    if LEAN_CL100K is not None:
        # cl100k for the C count from the token cache, tiktoken's encoding built only if a text
        # needs it and without its Python copy of the ranks (~12 MiB + its Rust tables, issue 32)
        LEAN_CL100K()
    if not demo:
        _check_followable(path)
    models = load_model_table()
    # a large file is read for the first paint by a copy of this process, forked before Textual
    # is imported (`ds4tui.firstview`)
    app = dashboard(path, models, demo=demo, config_file=config)
    app.process_ends_after = not demo  # (`leave` below; the demo's caller cleans up first)
    app.run()
    for warning in models.warnings:
        print(f"ds4tui: {warning}", file=sys.stderr)
    if not demo:  # (the demo's caller removes its temporary copy afterwards)
        leave(app.return_code or 0)


def _check_followable(path: Path) -> None:
    """Refuse, before Textual starts, a session the dashboard could not follow: an agent whose
    sessions are not files opens its own tail (`Agent.tailer`, e.g. OpenCode's database, which
    needs one session named as `PATH#ses_…`) and raises OSError with the reason, which the
    guard prints as one line (exit 2) instead of a traceback screen. Agents without their own
    tail are checked by the dashboard's file tailer as it reads."""
    from ds4sessions.agents.registry import agent_for_path

    agent = agent_for_path(path)
    own = getattr(agent, "tailer", None) if agent is not None else None
    if own is not None:
        own(Path(path))


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
    """Open `path` in the dashboard, whatever agent wrote it. Exits 2 with one line for a file no
    agent recognizes (`ds4tui.commands.agent_of`)."""
    from ds4tui.commands import agent_of, session_file

    path = session_file(path)
    agent_of(path)
    run_tui(path, False, config)
