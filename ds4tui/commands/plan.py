"""`ds4tui plan PATH [--json] [--config FILE]`: DS4's manifest for a session, metadata only.

Prints what DS4's `/context explain` and `/context tokens` print, then one line per manifest
item in the style of `/context included|excluded` (`NNN. kind tokens tok score=… source=…
group=…` and the reason on its own line). Never message content (DS4's manifest rule). With
`--json`, the manifest as JSON (`PlanView.to_json`). Configuration: `--config FILE`, else DS4's
global and trusted-project files for the session's cwd; warnings go to stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer


from ds4tui.text import literal

NAMES = {"plan"}


def _item_line(number: int, item) -> str:
    score = f" score={item.score:.3f}" if item.score is not None else ""
    source = item.entry_id or (item.key if item.key.startswith(("pi:", "tool:")) else None)
    parts = [f"{number:03d}. {item.kind} {item.tokens:,} tok{score}"]
    if source:
        parts.append(f"source={literal(source, keep_newlines=False)}")
    if item.group_id:
        parts.append(f"group={item.group_id}")
    return " ".join(parts)


def plan_cmd(
    path: Annotated[Path, typer.Argument(help="A session file of any agent")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", help="A ds4-context.json used instead of the user's")] = None,
) -> None:
    """Print DS4's context plan (manifest) for PATH: what is sent, what is left out, and why.
    For an agent that builds its own context (Claude Code, Codex) it is a what-if: what DS4
    would send for the same conversation."""
    from ds4sessions.agents.pi.discovery import load_model_table
    from ds4sessions.agents.plugin import read_snapshot
    from ds4sessions.derive.ds4config import load_ds4_config
    from ds4sessions.derive.planning import LivePlanner, explain_lines, tokens_lines

    from ds4tui.commands import agent_of, refuse_unless

    agent = agent_of(path)
    refuse_unless(agent, "ds4_plan", "plan")
    snapshot = read_snapshot(agent, path, load_model_table(), exact=False)
    loaded = load_ds4_config(snapshot.reader.cwd, config_file=config)
    view = LivePlanner(loaded).plan(snapshot)
    for warning in view.warnings:
        typer.echo(f"ds4tui: {literal(warning, keep_newlines=False)}", err=True)
    if as_json:
        typer.echo(json.dumps(view.to_json(), indent=2, ensure_ascii=False))
        return
    out = [*explain_lines(view), "", *tokens_lines(view)]
    for title, items in (("Included", view.included), ("Excluded", view.excluded)):
        out += ["", f"{title} ({len(items)})"]
        for number, item in enumerate(items, 1):
            out.append(_item_line(number, item))
            out.append(f"     {literal(item.reason, keep_newlines=False)}")
    typer.echo("\n".join(out))


def register(app: typer.Typer) -> set[str]:
    """Add the `plan` command to `app`; returns {"plan"}."""
    app.command("plan")(plan_cmd)
    return NAMES
