"""`ds4tui sessions [--json]` and `ds4tui usage [--json] [--since DATE] [--by …]`: every agent's
sessions, and usage roll-ups across agents (like ccusage), from `ds4sessions.overview`.

Both read through the overview index (state dir), so a second run re-reads only files that
changed. `sessions --json` prints one object per session: agent, path, id, cwd, name, model,
modified, size, entries, live, contextTokens, contextWindow, cache {status, expiresAt, words,
tier, label}. `usage --json` prints `{"by", "since", "rows": [...], "total": {...}}` with token
buckets and `costUSD` (None when no request of the row had a price; `unpricedModels` names the
models without one).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ds4tui.commands import fail
from ds4tui.text import fmt_bytes, fmt_tokens, literal

NAMES = {"usage", "home"}


def session_json(summary: Any, now: float) -> dict[str, Any]:
    """One `sessions --json` object (see module doc)."""
    cache = summary.cache_at(now)
    return {
        "agent": summary.agent,
        "path": summary.path,
        "id": summary.session_id,
        "cwd": summary.project,
        "name": summary.name,
        "model": summary.model_key,
        "modified": summary.modified,
        "size": summary.size,
        "entries": summary.entries,
        "live": summary.live,
        "contextTokens": summary.context_tokens,
        "contextWindow": summary.context_window,
        "cache": {
            "status": cache.status,
            "expiresAt": cache.expires_at_s,
            "words": cache.words,
            "tier": summary.cache.tier,
            "label": cache.label,
        },
        "requests": summary.requests,
        "diagnostics": summary.diagnostics,
    }


def _load() -> tuple[list[Any], list[str]]:
    from ds4sessions.overview.scanner import Overview

    overview = Overview()
    summaries = overview.load_all()
    summaries.sort(key=lambda s: s.modified, reverse=True)
    return summaries, overview.problems


def sessions(as_json: bool) -> None:
    """The `sessions` command (registered by `ds4tui.cli`)."""
    from ds4sessions.agents.registry import all_agents

    summaries, problems = _load()
    now = time.time()
    if as_json:
        typer.echo(json.dumps([session_json(s, now) for s in summaries], indent=2, ensure_ascii=False))
    elif not summaries:
        names = ", ".join(a.name for a in all_agents())
        from ds4sessions.agents.pi.discovery import session_roots

        typer.echo(f"no sessions found ({names}); Pi looks in " + ", ".join(str(r) for r in session_roots()))
    else:
        from rich.console import Console
        from rich.text import Text

        console = Console(soft_wrap=True)
        agent_width = max(len(s.agent) for s in summaries) + 1  # "claude-code" ran into its state
        for s in summaries:
            line = Text()
            line.append(dt.datetime.fromtimestamp(s.modified).strftime("%Y-%m-%d %H:%M"), style="bold")
            line.append(f"  {s.agent:<{agent_width}}")
            line.append("live " if s.live else "idle ", style="green" if s.live else "dim")
            line.append(" " + literal(s.name or "(no name)", keep_newlines=False))
            line.append(f"  ·  {literal(s.project or '', keep_newlines=False)}", style="dim")
            ctx = fmt_tokens(s.context_tokens)
            pct = f" ({s.context_percent:.0f}%)" if s.context_percent is not None else ""
            line.append(f"  ·  {s.model_key or 'model unknown'}  ·  {ctx}{pct}  ·  {s.cache_at(now).words}"
                        f"  ·  {s.entries} entries  ·  {fmt_bytes(s.size)}")
            console.print(line)
            console.print(Text("  " + literal(s.path, keep_newlines=False), style="dim"))
    from ds4sessions.agents.pi.discovery import skipped_files

    for problem in [*problems, *skipped_files()]:  # FIFOs and devices named, never opened
        typer.echo(f"ds4tui: {literal(problem, keep_newlines=False)}", err=True)


def _usd(value: float | None) -> str:
    return "no price" if value is None else f"${value:,.4f}"


def register(app: typer.Typer) -> set[str]:
    """Add `usage` and `home` to `app`."""

    @app.command("home")
    def home_cmd(
        lead: Annotated[float, typer.Option("--lead", help="Seconds before a live session's prompt cache expires to warn (0: never)")] = 60.0,
        idle: Annotated[bool, typer.Option("--idle-notices", help="Warn for idle sessions too")] = False,
    ) -> None:
        """Start on the home screen: every session of every agent, live, with cache countdowns
        and cost today (Enter opens one in the dashboard, Esc comes back)."""
        import tempfile

        from ds4sessions.agents.pi.discovery import load_model_table, newest_session
        from ds4tui.app import home_app
        from ds4tui.launch import open_any

        path = newest_session()
        with tempfile.TemporaryDirectory(prefix="ds4tui-demo-") as tmp:
            demo = path is None
            if path is None:  # a temporary copy of the demo, dated now: the packaged file is never written
                from ds4tui.demo import demo_copy, demo_session_path

                path = demo_copy(demo_session_path(), Path(tmp) / "demo-session.jsonl")
            chosen = home_app(path, demo=demo, models=load_model_table(), lead_s=lead, notify_idle=idle).run()
        if isinstance(chosen, Path):  # another agent's session picked on the home screen
            open_any(chosen)

    @app.command("usage")
    def usage_cmd(
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
        since: Annotated[Optional[str], typer.Option("--since", help="Only days on or after DATE (YYYY-MM-DD or YYYYMMDD)")] = None,
        by: Annotated[str, typer.Option("--by", help="Group by day, session, model or agent")] = "day",
    ) -> None:
        """Tokens (input, cache read, cache write, output) and cost across every agent's sessions,
        by day, session, model or agent. Each request counts once."""
        from ds4sessions.overview.usage import BY_CHOICES, rollup

        if by not in BY_CHOICES:
            fail(f"--by must be one of {', '.join(BY_CHOICES)}, not {by!r}")
        day = None
        if since is not None:
            try:
                day = dt.date.fromisoformat(since if "-" in since else f"{since[:4]}-{since[4:6]}-{since[6:]}").isoformat()
            except ValueError:
                fail(f"--since {since!r} is not a date (YYYY-MM-DD)")
        summaries, problems = _load()
        result = rollup(summaries, by=by, since=day)
        if as_json:
            typer.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        else:
            from rich.console import Console
            from rich.table import Table

            table = Table(title=f"Usage by {by}" + (f" since {day}" if day else ""), title_justify="left")
            for name in (by, "agents", "requests", "input", "cache read", "cache write", "output", "cost"):
                if name == "agents" and by == "agent":
                    continue  # (the agent column would say it twice)
                # a session's path keeps its end (the file name tells sessions apart) when cut
                table.add_column(name, justify="left" if name in (by, "agents") else "right",
                                 overflow="fold" if name == "session" else "ellipsis")
            for row in [*result.rows, result.total]:
                cost = row.to_json()["costUSD"]
                note = f" (+{row.unpriced} unpriced)" if row.unpriced and cost is not None else ""
                table.add_row(
                    literal(row.key, keep_newlines=False), *([] if by == "agent" else [",".join(sorted(row.agents))]),
                    str(row.requests),
                    f"{row.input:,}", f"{row.cache_read:,}", f"{row.cache_write:,}", f"{row.output:,}",
                    _usd(cost) + note, style="bold" if row is result.total else None,
                )
            console = Console()
            if not console.is_terminal:
                console = Console(width=max(console.width, 140))
            console.print(table)
            if result.total.unpriced_models:
                typer.echo("no price for: " + ", ".join(sorted(result.total.unpriced_models)))
            sources = sorted(result.total.price_sources)
            if sources:
                typer.echo("prices: " + "; ".join(sources))
        for problem in problems:
            typer.echo(f"ds4tui: {literal(problem, keep_newlines=False)}", err=True)

    return NAMES
