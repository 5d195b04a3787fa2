"""`ds4tui cache PATH [--json] [--now]`: the prompt cache of a session.

Prints the cache state (at the time of the file's last entry, or the current time with `--now`),
the per-request history (cache-read share, tokens read and written, catalog cost against Pi's
recorded cost), the misses with their causes, and DS4's cache-aware decision (the configured
mode, plus the mode-`auto` what-if when the configuration says `off`). The retention tier comes
from `PI_CACHE_RETENTION`; prices from the model table (bundled + `<agentDir>/models.json`);
DS4's configuration from the global and trusted-project `ds4-context.json`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated

import typer

from ds4tui.commands import session_file

from ds4tui.text import fmt_tokens, literal

NAMES = {"cache"}


def _last_entry_seconds(snapshot) -> float | None:  # type: ignore[no-untyped-def]
    from ds4sessions.agents.pi.context import iso_to_ms

    for entry in reversed(snapshot.reader.entries):
        ms = iso_to_ms(entry.timestamp)
        if ms is not None:
            return ms / 1000
    return None


def _usd(value: float | None) -> str:
    return "—" if value is None else f"${value:.6f}"


def cache_cmd(
    path: Annotated[Path, typer.Argument(help="A Pi session .jsonl file")],
    as_json: Annotated[bool, typer.Option("--json", help="Print everything as JSON")] = False,
    now: Annotated[bool, typer.Option("--now", help="State at the current time (default: the last entry's time)")] = False,
) -> None:
    """Show the prompt cache of PATH: state, history, misses with causes, DS4's decision."""
    from ds4sessions.derive.cache import cache_view
    from ds4sessions.agents.pi.discovery import load_model_table
    from ds4sessions.derive.ds4config import load_ds4_config
    from ds4sessions.ingest.live import LiveSession

    from ds4tui.commands.agents import agent_name, claude_cache

    if agent_name(path) == "claude-code":
        return claude_cache(path, as_json, now)
    models = load_model_table()
    snapshot = LiveSession(path, models).refresh(force=True)
    assert snapshot is not None
    loaded = load_ds4_config(snapshot.reader.cwd)
    for warning in loaded.warnings:
        typer.echo(f"ds4tui: {literal(warning, keep_newlines=False)}", err=True)
    at = time.time() if now else (_last_entry_seconds(snapshot) or time.time())
    view = cache_view(snapshot, at, os.environ.get("PI_CACHE_RETENTION"), models=models, config=loaded)
    if as_json:
        typer.echo(json.dumps({"at": at, **view.to_json()}, indent=2, ensure_ascii=False))
        return
    state = view.state
    out = [
        f"model: {literal(view.model_key or 'unknown', keep_newlines=False)}",
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
            flags.append(f"Pi recorded {_usd(record.price.recorded_usd)}")
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
    out += ["", f"Cost check: {len(disagreements)} disagreements with the catalog"
            f" ({literal(view.pricing_source or 'no prices', keep_newlines=False)});"
            f" catalog {_usd(history.catalog_usd)}, Pi recorded {_usd(history.recorded_usd)}"]
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
