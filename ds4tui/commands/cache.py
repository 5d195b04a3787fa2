"""`ds4tui cache PATH [--json] [--now]`: the prompt cache of a session, of any agent.

Prints the cache state (at the time of the session's last request or entry, or the current time
with `--now`), the per-request history (cache-read share, tokens read and written, catalog cost
against the recorded cost), the misses with their causes and, where DS4 plans for the agent,
DS4's cache-aware decision (the configured mode, plus the mode-`auto` what-if when the
configuration says `off`). The numbers are the dashboard's Cache tab's
(`ds4sessions.derive.cache.session_cache_view`); `--json` prints `session_cache_json` (docs/json.md). Pi: the retention
tier from `PI_CACHE_RETENTION`, prices from the model table, DS4's configuration from the global
and trusted-project `ds4-context.json`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from ds4tui.commands import agent_of

from ds4tui.text import fmt_tokens, literal

NAMES = {"cache"}


def _usd(value: float | None) -> str:
    return "—" if value is None else f"${value:.6f}"


def cache_cmd(
    path: Annotated[Path, typer.Argument(help="A session file of any agent")],
    as_json: Annotated[bool, typer.Option("--json", help="Print everything as JSON")] = False,
    now: Annotated[bool, typer.Option("--now", help="State at the current time (default: the last request's time)")] = False,
) -> None:
    """Show the prompt cache of PATH: state, history, misses with causes, DS4's decision."""
    from ds4sessions.agents.pi.discovery import load_model_table
    from ds4sessions.agents.plugin import read_snapshot
    from ds4sessions.derive.cache import session_cache_json, session_cache_view

    agent = agent_of(path)
    models = load_model_table()
    at = time.time() if now else None
    if as_json:
        out = session_cache_json(agent, path, at, models)
        for warning in out.get("warnings") or ():
            typer.echo(f"ds4tui: {literal(warning, keep_newlines=False)}", err=True)
        typer.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    snapshot = read_snapshot(agent, path, models, exact=False)
    view = session_cache_view(agent, snapshot, time.time(), models)
    refresh = view.clock.refresh
    if now or refresh is None:
        state = view.state
        taken = "now"
    else:  # the countdown as it stood at the last request (what the JSON says by default)
        state = view.state_at(refresh.time_s)
        taken = "as of the last request (--now: as of now)"
    out = [
        f"model: {literal(view.model_key or 'unknown', keep_newlines=False)}",
        f"cache: {state.words} {taken} — {literal(state.reason, keep_newlines=False)}",
        f"cached prefix of the last request: context messages 0..{view.cached_prefix_end - 1}"
        if view.cached_prefix_end else "cached prefix of the last request: none",
    ]
    history = view.history
    share = history.overall_share
    out += ["", f"History ({len(history.records)} requests"
            + (f", overall cache-read share {share:.1%})" if share is not None else ")")]
    for record in history.records:
        usage = record.event.usage
        flags = []
        if record.event.kind == "cache_warm":
            flags.append("cache warm")
        elif not record.event.counted:
            flags.append("aborted/error")
        if record.price.agrees is False:
            flags.append(f"recorded {_usd(record.price.recorded_usd)}")
        if record.miss is not None:
            flags.append(f"MISS: {record.miss.cause}")
        share_text = f"{record.share:6.1%}" if record.share is not None else "     —"
        out.append(
            f"#{record.number:<4} {literal(record.event.entry_id or '?', keep_newlines=False):<8} {share_text}"
            f"  read {fmt_tokens(usage.cache_read):>6}  write {fmt_tokens(usage.cache_write):>6}"
            f"  {_usd(record.price.catalog_usd)}" + (f"  [{'; '.join(flags)}]" if flags else "")
        )
    out += ["", f"Misses ({len(history.misses)})"]
    for record in history.misses:
        assert record.miss is not None
        out.append(f"#{record.number:<4} {record.miss.cause}: {literal(record.miss.detail, keep_newlines=False)}")
    disagreements = history.disagreements
    recorded = history.recorded_usd
    out += ["", f"Cost: catalog {_usd(history.catalog_usd)}"
            + (f", recorded {_usd(recorded)}, {len(disagreements)} disagreements" if recorded is not None else "")
            + f" ({literal(view.pricing_source or 'no prices', keep_newlines=False)})"]
    for decision in (view.decision, view.what_if):
        if decision is None:
            continue
        title = f"DS4 cache-aware policy, mode {decision.mode}" + (" (what-if)" if decision.what_if else "")
        out += ["", title]
        for label, epoch in (("nominal", decision.nominal), ("extended", decision.extended)):
            if epoch is None:
                out.append(f"  {label:<8} —")
                continue
            out.append(
                f"  {label:<8} tail {fmt_tokens(int(epoch.tail_tokens))}  reusable {fmt_tokens(int(epoch.reusable_prefix_tokens))}"
                f"  cold {_usd(epoch.cold.total)}  warm {_usd(epoch.warm.total)}  epoch {_usd(epoch.epoch_cost)}"
            )
        if decision.comparison is not None:
            margin = decision.comparison.improvement_ratio
            out.append(f"  winner {decision.comparison.winner}, margin {margin:+.1%}" if margin is not None
                       else f"  winner {decision.comparison.winner}")
        if decision.decision is not None:
            for gate in decision.decision.gates:
                out.append(f"  {'pass' if gate.passed else 'FAIL'} {gate.name} = {gate.value} (threshold {gate.threshold})")
        h = decision.hysteresis_after
        out.append(f"  hysteresis: stick {'yes' if h.stick_extended else 'no'}, loss streak {h.loss_streak};"
                   f" next request: {decision.candidate} tail")
        if decision.note:
            out.append(f"  note: {literal(decision.note, keep_newlines=False)}")
    typer.echo("\n".join(out))


def register(app: typer.Typer) -> set[str]:
    """Add the `cache` command to `app`; returns {"cache"}."""
    app.command("cache")(cache_cmd)
    return NAMES
