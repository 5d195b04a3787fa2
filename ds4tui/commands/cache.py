"""`ds4tui cache PATH [--json] [--last]`: the prompt cache of a session, of any agent.

Prints the cache state as of now (what the TUI shows), or as of the session's last entry (Pi)
or last request (the other agents) with `--last` (the state the session was left in), and says
which: an `as of:` line with the instant (local time), and `at` / `asOf` in the JSON (`--now`,
the old way to ask for now, is still accepted). Then the per-request history (cache-read share,
tokens read and written, catalog cost against the recorded cost), the misses with their causes
and, where DS4 runs inside the agent, DS4's cache-aware decision (the configured mode, plus the
mode-`auto` what-if when the configuration says `off`). The numbers are the dashboard's Cache
tab's (`ds4sessions.derive.cache.session_cache_view`); `--json` prints `session_cache_json`
(docs/json.md). Pi: the retention tier from `PI_CACHE_RETENTION`, prices from the model table
(bundled + `<agentDir>/models.json`), DS4's configuration from the global and trusted-project
`ds4-context.json`.
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

clock = time.time
"""The current time in epoch seconds (tests inject a fixed one)."""


def _usd(value: float | None) -> str:
    return "—" if value is None else f"${value:.6f}"


def as_of_line(at: float, last_s: float | None, last: bool, what: str = "entry") -> str:
    """The `as of:` line of `ds4tui cache`: the instant the countdown is taken at (`at`, epoch
    seconds, shown in local time) and what it is: `now` (the default, as the TUI counts) or the
    session's last entry or request (`last`; `what` names which), with the other choice named."""
    if last:
        return f"as of: the last {what}, {_clock(at)} (without --last: now)"
    tail = f"; the last {what} was {_clock(last_s)} (--last: as of then)" if last_s is not None else ""
    return f"as of: now, {_clock(at)}{tail}"


def _clock(seconds: float) -> str:
    """Epoch seconds as local `YYYY-MM-DD HH:MM:SS ZONE`."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(seconds))


def cache_cmd(
    path: Annotated[Path, typer.Argument(help="A session file of any agent")],
    as_json: Annotated[bool, typer.Option("--json", help="Print everything as JSON")] = False,
    last: Annotated[bool, typer.Option("--last", help="State as of the session's last entry (default: now, as the TUI shows)")] = False,
    now_flag: Annotated[bool, typer.Option("--now", hidden=True, help="State as of now (the default)")] = False,
) -> None:
    """Show the prompt cache of PATH as of now (--last: as of its last entry): state, history,
    misses with causes, DS4's decision."""
    if last and now_flag:
        typer.echo("ds4tui: cache: --last and --now exclude each other", err=True)
        raise typer.Exit(2)
    from ds4sessions.agents.pi.discovery import load_model_table
    from ds4sessions.agents.plugin import read_snapshot
    from ds4sessions.derive.cache import session_cache_json, session_cache_view, session_last_time

    agent = agent_of(path)
    models = load_model_table()
    snapshot = read_snapshot(agent, path, models, exact=False)
    last_s, what = session_last_time(snapshot)
    at = last_s if last and last_s is not None else clock()
    if as_json:
        out = session_cache_json(agent, path, at, models, snapshot=snapshot)
        for warning in out.pop("warnings", None) or ():
            typer.echo(f"ds4tui: {literal(warning, keep_newlines=False)}", err=True)
        as_of = f"last-{what}" if last and last_s is not None else "now"
        typer.echo(json.dumps({"at": at, "asOf": as_of, **{k: v for k, v in out.items() if k != "at"}}, indent=2,
                              ensure_ascii=False))
        return
    view = session_cache_view(agent, snapshot, at, models)
    state = view.state
    out = [
        f"model: {literal(view.model_key or 'unknown', keep_newlines=False)}",
        as_of_line(at, last_s, last and at == last_s, what),
        f"cache: {state.words} — {literal(state.reason, keep_newlines=False)}",
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
            + (f", recorded {_usd(recorded)}, {len(disagreements)} disagreements with the catalog" if recorded is not None else "")
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
