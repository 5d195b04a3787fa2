"""Thin per-agent dispatch for the file commands (`map`, `cache`, `context`, `plan`, `pin`,
`collapse`, `compact`): a Claude Code transcript is handled here; a Pi session goes on down the
Pi code path unchanged; a file no agent recognizes is refused (exit 2, one line).

Recognition: `ds4sessions.agents.registry.agent_for_path` (Claude Code plug-in), else a Pi-looking
head (a `{"type":"session"}` header or Pi entries with `id`/`parentId`), else unknown. An empty
file stays Pi's ("empty session", shared bad-input B02).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import typer

from ds4tui.commands import fail, session_file

PI_ROW_TYPES = {"session", "message", "model_change", "thinking_level_change", "compaction", "branch_summary",
                "custom", "custom_message", "label", "session_info"}


def _looks_like_pi(head: bytes) -> bool:
    """A Pi header or Pi entry in `head`, or a head with no complete JSON line at all (a torn or
    corrupt Pi header is the Pi reader's to report: bad input B02)."""
    parsed_any = False
    for raw in head.splitlines()[:200]:
        try:
            row = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        parsed_any = True
        if isinstance(row, dict) and (row.get("type") in PI_ROW_TYPES or ("id" in row and "parentId" in row)):
            return True
    return not parsed_any


def agent_name(path: Path) -> str:
    """"claude-code" or "pi" for an existing file; otherwise a one-line error and exit 2."""
    session_file(path)
    from ds4sessions.agents.registry import HEAD_BYTES, agent_for_head

    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError as error:
        fail(f"{path}: cannot read: {error.strerror or error}")
    if not head.strip():
        return "pi"
    agent = agent_for_head(head)
    if agent is not None and agent.name == "claude-code":
        return "claude-code"
    if _looks_like_pi(head) or agent is not None:
        return "pi"
    fail(f"{path}: not a Pi session, Claude Code transcript or Codex rollout")
    raise AssertionError  # unreachable: fail exits


def _conversation(path: Path):  # type: ignore[no-untyped-def]
    from ds4sessions.agents.registry import agent_named

    agent = agent_named("claude-code")
    assert agent is not None
    reader = agent.reader(path)
    from ds4sessions.agents.claude.reader import read_lines

    reader.feed(read_lines(path))
    return reader.conversation()


def _echo_json(data: object) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def claude_map(path: Path, as_json: bool) -> None:
    """`map` for a Claude Code transcript (JSON or a short text panel)."""
    from ds4sessions.agents.claude.views import context_map, shown_category

    conv = _conversation(path)
    data = context_map(conv, os.environ)
    if as_json:
        _echo_json(data)
        return
    from ds4tui.text import fmt_tokens, literal

    window = data["contextWindow"]
    lines = [f"{literal(conv.title or path.name, keep_newlines=False)} · {conv.model or 'model unknown'} · claude-code (read-only)",
             f"{fmt_tokens(data['total'])} / {fmt_tokens(window)} ({100 * data['total'] / window:.0f}%)"
             + (f" ({fmt_tokens(data['provider']['contextTokens'])} reported + {fmt_tokens(data['laterEstimate'])} est. "
                "since the last reply)" if data["totalSource"] == "provider" and data["laterEstimate"] else "")]
    width = max([len(t["label"]) + 2 for t in data["categories"]]
                + [len(c["label"]) for t in data["categories"] for c in t.get("children", ())] + [20])
    for term in data["categories"]:
        if not shown_category(term):
            continue
        mark = " (inferred)" if term["inferred"] else ""
        lines.append(f"  {term['label']:<{width + 2}} {fmt_tokens(term['tokens']):>8}{mark}")
        for child in term.get("children", ()):
            if child["tokens"]:
                lines.append(f"    {literal(child['label'], keep_newlines=False):<{width}} {fmt_tokens(child['tokens']):>8}")
    ac = data["autocompact"]
    if ac["enabled"]:
        lines.append(f"autocompact at {fmt_tokens(ac['threshold'])}: {fmt_tokens(ac['tokensUntil'])} tokens until autocompact")
        if ac["predictedAfterCompaction"] is not None:
            lines.append(f"after a compaction: about {fmt_tokens(ac['predictedAfterCompaction'])} (predicted: system + tools + summary)")
    else:
        lines.append("autocompact disabled")
    for problem in data["problems"]:
        lines.append(literal(problem, keep_newlines=False))
    typer.echo("\n".join(lines))


def claude_cache(path: Path, as_json: bool, now: bool) -> None:
    """`cache` for a Claude Code transcript."""
    from ds4sessions.agents.claude.views import cache_report

    conv = _conversation(path)
    report = cache_report(conv, time.time() if now else None)
    if as_json:
        _echo_json(report)
        return
    from ds4tui.text import fmt_tokens

    state = report["state"]
    remaining = state["remainingSeconds"]
    when = "now" if now else "as of the last request (--now: as of now)"  # (the state is taken at that time)
    if remaining is None:
        left = "no write yet"
    elif remaining <= 0:
        left = f"expired {when}"
    else:
        left = f"{remaining:.0f} s left {when}"
    out = [f"model: {conv.model or 'unknown'}", f"cache: tier {state['tier'] or 'none'}, {left}"]
    for r in report["history"]["records"]:
        share = f"{r['share']:6.1%}" if r["share"] is not None else "     —"
        flags = [x for x in ("sidechain" if r["sidechain"] else "", "synthetic" if r["synthetic"] else "") if x]
        if r["miss"]:
            flags.append(f"MISS: {r['miss']['cause']} ({r['miss']['source']})")
        cost = "—" if r["costUsd"] is None else f"${r['costUsd']:.6f}"
        out.append(f"#{r['index']:<4} {share}  read {fmt_tokens(r['cacheRead']):>6}  write {fmt_tokens(r['cacheWrite']):>6}  {cost}"
                   + (f"  [{'; '.join(flags)}]" if flags else ""))
    t = report["totals"]
    out.append(f"totals: {t['requests']} requests, input {t['inputTokens']}, read {t['cacheReadTokens']}, "
               f"write {t['cacheWriteTokens']}, output {t['outputTokens']}")
    if report["unpricedModels"]:
        out.append("no price for: " + ", ".join(report["unpricedModels"]))
    typer.echo("\n".join(out))


def claude_context(path: Path) -> None:
    """`context --json` for a Claude Code transcript: the messages the model saw."""
    from ds4sessions.agents.claude.views import context_messages

    _echo_json(context_messages(_conversation(path)))


def refuse_steering(path: Path, command: str) -> None:
    """pin / collapse / compact on a Claude Code transcript: say why, write nothing, exit 1."""
    from ds4sessions.agents.claude.reader import CAPABILITIES

    typer.echo(f"ds4tui: refused, nothing written: {command}: {CAPABILITIES.read_only_reason}", err=True)
    raise typer.Exit(1)


def refuse_plan(path: Path) -> None:
    """`plan` on a Claude Code transcript: DS4's planner applies to Pi only (exit 1)."""
    typer.echo("ds4tui: plan: DS4's context plan applies to Pi sessions only; Claude Code builds its own context "
               "(use `ds4tui map` for its /context terms)", err=True)
    raise typer.Exit(1)
