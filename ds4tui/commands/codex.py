"""Codex rollouts in the `map`, `cache` and `context` commands, and the steering refusal.

The Pi commands call `codex_dispatch(command, path, ...)` first: when `agents.registry` says the
file is a Codex rollout, this module prints the Codex view (`ds4sessions.agents.codex.view`) and
returns True; otherwise it returns False and the Pi code path runs unchanged. A file named
`rollout-*.jsonl` that is not a rollout exits 2 with one line saying so.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from ds4tui.commands import fail, session_file
from ds4tui.text import fmt_tokens, literal


def codex_agent_for(path: Path):  # type: ignore[no-untyped-def]
    """The Codex plug-in when `path` is a Codex rollout, else None. A `rollout-*.jsonl` file that
    is not one exits 2 ("not a Codex rollout")."""
    from ds4sessions.agents.registry import agent_for_path

    session_file(path)
    try:
        agent = agent_for_path(path)
    except OSError as error:
        fail(f"{path}: cannot read: {error.strerror or error}")
        return None
    if agent is not None and agent.name == "codex":
        return agent
    if agent is None and path.name.startswith("rollout-") and path.suffix == ".jsonl" and not _pi_header(path):
        fail(f"{path}: not a Codex rollout (its first line is not a session_meta row)")
    return None


def _pi_header(path: Path) -> bool:
    """True when the first line is a Pi session header (`{"type":"session",...}`)."""
    try:
        with path.open("rb") as f:
            first = json.loads(f.readline() or b"null")
    except (OSError, ValueError):
        return False
    return isinstance(first, dict) and first.get("type") == "session"


def read_conversation(agent, path: Path):  # type: ignore[no-untyped-def]
    """The whole file read by `agent`'s reader; the frozen `Conversation`."""
    from ds4sessions.agents.codex.reader import feed_rollout

    reader = agent.reader(path)
    try:
        feed_rollout(reader, path)  # (streamed: a line at a time)
    except OSError as error:
        fail(f"{path}: cannot read: {error.strerror or error}")
    return reader.conversation()


def codex_dispatch(command: str, path: Path, *, as_json: bool = True, exact: bool = True, now: bool = False) -> bool:
    """Run `command` ("map", "cache", "context") on a Codex rollout; False when `path` is not one."""
    agent = codex_agent_for(path)
    if agent is None:
        return False
    from ds4sessions.agents.codex import view

    conv = read_conversation(agent, path)
    if command == "map":
        out = view.map_json(conv, exact=exact)
        if as_json:
            typer.echo(json.dumps(out, indent=2, ensure_ascii=False))
        else:
            _map_text(out)
    elif command == "cache":
        last = conv.extra.get("lastTime")
        at = time.time() if now or last is None else last
        out = view.cache_json(conv, at, view.configured_retention())
        if as_json:
            typer.echo(json.dumps(out, indent=2, ensure_ascii=False))
        else:
            _cache_text(out)
    else:
        typer.echo(json.dumps(view.context_json(conv), indent=2, ensure_ascii=False))
    for line in view.problems(conv):
        if not as_json:
            continue
        typer.echo(f"ds4tui: {literal(line, keep_newlines=False)}", err=True)
    return True


def _map_text(out: dict) -> None:  # type: ignore[type-arg]
    ctx, window = out["contextTokens"], out["contextWindow"]
    head = f"{literal(out['title'] or out['path'], keep_newlines=False)} · {out['model'] or 'model unknown'} (Codex)"
    fill = (f"{fmt_tokens(ctx)} / {fmt_tokens(window)} · {out['percentLeft']}% left (Codex's formula)"
            if ctx is not None and window else f"context: {out['contextState']}")
    typer.echo(head)
    typer.echo(fill)
    for row in out["categories"]:
        typer.echo(f"  {row['label']:<28} {fmt_tokens(row['tokens']):>8}")
    for line in out["problems"]:
        typer.echo(f"  note: {literal(line, keep_newlines=False)}")


def _cache_text(out: dict) -> None:  # type: ignore[type-arg]
    state = out["state"]
    typer.echo(f"model: {out['model'] or 'unknown'} (Codex)")
    typer.echo(f"cache: {state['words']} — {literal(state['reason'], keep_newlines=False)}"
               + (f" [{state['label']}]" if state.get("label") else ""))
    for r in out["history"]["records"]:
        share = f"{r['share']:6.1%}" if r["share"] is not None else "     —"
        cost = "—" if r["catalogUsd"] is None else f"${r['catalogUsd']:.6f}"
        flag = "  [compaction call]" if r["compactionCall"] else ""
        typer.echo(f"#{r['number']:<4} {share}  read {fmt_tokens(r['usage']['cacheRead']):>6}  in {fmt_tokens(r['usage']['input']):>6}"
                   f"  out {fmt_tokens(r['usage']['output']):>6}  {cost}{flag}")
    t = out["totals"]
    typer.echo(f"totals: {t['requests']} requests, input {t['inputTokens']:,}, cache read {t['cacheReadTokens']:,}, "
               f"cache write {t['cacheWriteTokens']:,}, output {t['outputTokens']:,}")
    if out["priceNote"]:
        typer.echo(f"note: {out['priceNote']}")


def refuse_steering(path: Path) -> None:
    """Exit 1 with the agent's read-only reason when `path` is a Codex rollout (nothing written)."""
    agent = codex_agent_for(path)
    if agent is not None:
        typer.echo(f"ds4tui: refused, nothing written: {agent.capabilities.read_only_reason}", err=True)
        raise typer.Exit(1)
