"""ds4tui's command line (Typer). Textual is imported only when the TUI starts.

    ds4tui [PATH]                 open a session of any agent (default: the newest one, else the demo)
    ds4tui sessions [--json]      list every agent's sessions (context, prompt cache)
    ds4tui usage [--by day|…]     tokens and cost across agents (like ccusage)
    ds4tui home                   start on the home screen (every session of every agent, live)
    ds4tui map PATH [--json]      print the context map's numbers (Rich panel, or JSON; --at N: as at request N)
    ds4tui timeline PATH [--json] the context over time, one row per request
    ds4tui context PATH --json    print the context the agent sends (Pi: in Pi's `.context.json` shape)
    ds4tui demo [--speed X]       replay the bundled demo session into a temp file and watch it
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import tempfile
import threading
from pathlib import Path
from typing import Annotated, Optional

import typer

from ds4tui.commands import agent_of, session_file
from ds4tui.launch import open_any, run_tui
from ds4tui.text import fmt_bytes, fmt_tokens, literal

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="A terminal cockpit for the context window of coding agents (Pi first).",
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

COMMANDS = {"open", "sessions", "map", "context", "demo"}


def version_text() -> str:
    """`ds4tui X (ds4core Y, ds4sessions Z)`: the installed distributions' versions."""
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return f"ds4tui {of('ds4tui')} (ds4core {of('ds4core')}, ds4sessions {of('ds4sessions')})"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(version_text())
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", "-V", help="Print the version and exit", callback=_show_version, is_eager=True)
    ] = False,
) -> None:
    """A terminal cockpit for the context window of coding agents."""






ConfigOption = Annotated[
    Optional[Path], typer.Option("--config", help="A DS4 configuration file used instead of the user's and project's")
]


@app.command("open")
def open_cmd(
    path: Annotated[Optional[Path], typer.Argument(help="A session file of any agent (Pi, Claude Code, Codex, Gemini CLI, ...)")] = None,
    config: ConfigOption = None,
) -> None:
    """Open a session (default: the newest session of any agent, else the bundled demo)."""
    if path is None:
        path = newest_any_agent()
        if path is None:
            _run_demo_copy(config)
            return
    open_any(path, config)


def newest_any_agent() -> Path | None:
    """The most recently modified session file of any agent (Pi, Claude Code, Codex, ...), or
    None. An agent that can name its newest session cheaply (`newest_session()`: Pi, by file
    times) is asked that; the others list their sessions (subagent transcripts skipped)."""
    from ds4sessions.agents.registry import all_agents

    best: tuple[float, Path] | None = None
    for agent in all_agents():
        try:
            quick = getattr(agent, "newest_session", None)
            if quick is not None:
                path = quick()
                found = (path.stat().st_mtime, path) if path is not None else None
            else:
                infos = [i for i in agent.discover() if i.parent is None]
                newest = max(infos, key=lambda i: i.modified) if infos else None
                found = (newest.modified, newest.path) if newest is not None else None
        except OSError:
            continue
        if found is not None and (best is None or found[0] > best[0]):
            best = found
    return best[1] if best else None


def _run_demo_copy(config: Path | None = None) -> None:
    """Open a temporary copy of the bundled demo, dated just now (the packaged file is never
    written: a pin confirmed in the demo appends to the copy, deleted on exit)."""
    from ds4tui.demo import demo_copy

    with tempfile.TemporaryDirectory(prefix="ds4tui-demo-") as tmp:
        run_tui(demo_copy(demo_session_path(), Path(tmp) / "demo-session.jsonl"), True, config)


@app.command("sessions")
def sessions_cmd(as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False) -> None:
    """List every agent's sessions (newest first): agent, live, name, project, model, context,
    prompt cache, entries, size."""
    from ds4tui.commands.overview import sessions

    sessions(as_json)


@app.command("map")
def map_cmd(
    path: Annotated[Path, typer.Argument(help="A session file of any agent (Pi, Claude Code, Codex, ...)")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the numbers as JSON")] = False,
    exact: Annotated[bool, typer.Option("--exact/--fast", help="cl100k counts (default) or chars-v1")] = True,
    at: Annotated[Optional[int], typer.Option("--at", help="The map as it was at request N (1-based, as `timeline` numbers them; with --json)")] = None,
) -> None:
    """Print the context map panel (categories, totals), or its numbers as JSON."""
    if at is not None:  # the file as it was right after request N (ds4tui.commands.timeline.map_at)
        from ds4tui.commands import fail
        from ds4tui.commands.timeline import map_at
        from ds4tui.mapdata import dumps_map

        if not as_json:
            fail("map --at: only with --json")
        agent_of(path)
        typer.echo(dumps_map(map_at(path, at, exact=exact)))
        return
    from ds4sessions.agents.pi.discovery import load_model_table
    from ds4sessions.agents.plugin import read_snapshot
    from ds4tui.mapdata import dumps_map
    from ds4tui.header import first_prompt_of, session_display_name
    from ds4tui.render import calibrated_of, calibration_line, category_lines, grid_lines, problem_lines

    agent = agent_of(path)
    if as_json:  # the agent's numbers (Pi: the one-shot reader that keeps no message content, issue 14)
        typer.echo(dumps_map(agent.map_json(path, exact=exact, models=load_model_table())))
        return
    snap = read_snapshot(agent, path, load_model_table(), exact=exact)
    bd = snap.best
    cal = calibrated_of(snap)
    from rich.console import Console, Group
    from rich.panel import Panel
    from rich.text import Text

    console = Console()
    used = cal.used  # the same number the dashboard's header and legend show
    window = snap.context_window
    label = getattr(agent, "label", agent.name)
    name = session_display_name(snap.reader.session_name, snap.path, first_prompt_of(snap.context.messages))
    from ds4sessions.agents.registry import default_agent

    title = Text(f"{literal(name, keep_newlines=False)} · {literal(snap.model_key or 'model unknown', keep_newlines=False)}"
                 + (f" · {label}" if agent is not default_agent() else ""))
    fill = f"{fmt_tokens(used)} / {fmt_tokens(window)} ({100 * used / window:.0f}%)" if window else fmt_tokens(used)
    note = snap.extras.header_note() if snap.extras is not None else None
    width = max(min(console.width - 4, 60), 30)
    grid, per_cell = grid_lines(cal, width=min(width, 50), rows=10)
    lines = [
        Text(fill + (f" · {note}" if note else ""), style="bold"),
        *grid,
        Text(f"1 cell = {per_cell:,} tokens · what {label} sends", style="dim"),
        *category_lines(cal, width=width),
        calibration_line(cal, bd.counter),
    ]
    if snap.extras is not None:
        lines += [Text(literal(line, keep_newlines=False), style="dim") for line in snap.extras.legend_lines()]
    for problem in problem_lines(snap):
        lines.append(Text(literal(problem), style="yellow"))
    console.print(Panel(Group(*lines), title=title, title_align="left", expand=False))


@app.command("context")
def context_cmd(
    path: Annotated[Path, typer.Argument(help="A session file of any agent")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (the only format)")] = True,
) -> None:
    """Print the context the agent sends from PATH (for Pi: in the shape of Pi's own `<name>.context.json`)."""
    agent = agent_of(path)
    out = agent.context_json(path)
    typer.echo(json.dumps(out, indent=2, ensure_ascii=False))
    for line in out.get("diagnostics") or ():
        typer.echo(f"ds4tui: {literal(str(line), keep_newlines=False)}", err=True)


from ds4tui.demo import demo_session_path, replay  # noqa: E402  (kept importable from here)


@app.command("demo")
def demo_cmd(
    speed: Annotated[float, typer.Option(help="Replay speed: 1 = recorded pace, 60 = a minute per second")] = 30.0,
) -> None:
    """Replay the bundled demo session into a temporary file while the dashboard tails it (each
    line dated when it is written, so the prompt cache is live; the packaged file is only read)."""
    from ds4sessions.agents.pi.discovery import load_model_table
    from ds4tui.app import Ds4App

    with tempfile.TemporaryDirectory(prefix="ds4tui-demo-") as tmp:
        target = Path(tmp) / "demo-session.jsonl"
        stop = threading.Event()
        writer = threading.Thread(target=replay, args=(demo_session_path(), target, speed, stop), daemon=True)
        writer.start()
        try:
            Ds4App(target, demo=True, models=load_model_table()).run()
        finally:
            stop.set()
            writer.join(timeout=5)


from ds4tui.commands import register_all  # noqa: E402

COMMANDS |= register_all(app)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: `ds4tui [PATH]` is short for `ds4tui open [PATH]`.

    Exits 0 (done), 1 (a write refused, nothing written) or 2 (bad input or an unusable state
    dir / journal / file, with one line `ds4tui: <reason>` on stderr; see `ds4tui.errors`)."""
    from ds4tui.errors import run_guarded

    args = sys.argv[1:] if argv is None else argv
    if not args or (args[0] not in COMMANDS and args[0] not in ("--help", "-h", "--version", "-V")):
        args = ["open", *args]
    run_guarded(lambda: app(args=args, prog_name="ds4tui"))


if __name__ == "__main__":
    main()
