"""Steering commands: `pin`, `collapse`, `compact`, `journal list|undo|reset`.

Every command that writes prints what it appended, to which file, at which byte, and the
journal number that undoes it. Writes are append-only Pi entries (see `ds4sessions.steering.writer`);
a refused write prints why and exits 1 with the file untouched. Session content is printed
through `literal()` (no terminal control from the file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ds4tui.commands import session_file

from ds4tui.text import literal

NAMES = {"pin", "collapse", "compact", "journal"}

journal_app = typer.Typer(help="List ds4tui's writes to session files, and undo them.", no_args_is_help=True)


def _refused(err: Exception) -> typer.Exit:
    typer.echo(f"ds4tui: refused, nothing written: {literal(str(err), keep_newlines=False)}", err=True)
    return typer.Exit(1)


def _steerable(path: Path, command: str) -> None:
    """Exit 1 with the agent's reason when PATH's agent cannot be steered (Claude Code, Codex:
    read-only; nothing written); exit 2 when no agent recognizes it."""
    from ds4tui.commands import agent_of

    agent = agent_of(path)
    if not agent.capabilities.steering:
        typer.echo(f"ds4tui: refused, nothing written: {command}: {agent.capabilities.read_only_reason}", err=True)
        raise typer.Exit(1)


def _model(session):
    from ds4sessions.agents.pi.discovery import load_model_table
    from ds4sessions.agents.pi import build_context

    model = build_context(session).model
    if not model:
        return None
    return load_model_table().get(model.get("provider"), model.get("modelId"))


def _usd(value: float | None) -> str:
    if value is None:
        return "?"
    return f"${value:.4f}" if abs(value) >= 0.01 else f"${value:.6f}"


def pin_cmd(
    path: Annotated[Path, typer.Argument(help="A Pi session .jsonl file")],
    entry_id: Annotated[str, typer.Argument(help="The entry to pin (or unpin with --clear)")],
    clear: Annotated[bool, typer.Option("--clear", help="Unpin: remove the ds4:pin label")] = False,
    note: Annotated[str | None, typer.Option("--note", help="Text after ds4:pin")] = None,
    force: Annotated[bool, typer.Option("--force", help="Write even if the agent looks busy")] = False,
) -> None:
    """Pin ENTRY_ID (a `ds4:pin` label, Pi-native), or unpin it with --clear."""
    from ds4sessions.steering.steer import pin
    from ds4sessions.steering.writer import Journal, WriteRefused

    _steerable(path, "pin")
    try:
        result = pin(path, entry_id, clear=clear, note=note, journal=Journal(), force=force)
    except WriteRefused as err:
        raise _refused(err) from None
    label = result.entries[0].get("label")
    what = f'label "{literal(label, keep_newlines=False)}"' if label else "cleared label"
    typer.echo(f"{'unpinned' if clear else 'pinned'} {entry_id}: {what}")
    typer.echo(result.describe())


def collapse_cmd(
    path: Annotated[Path, typer.Argument(help="A Pi session .jsonl file")],
    turns: Annotated[int, typer.Option("--turns", help="How many of the last finished turns to collapse")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Preview only; write nothing")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Write without asking")] = False,
    force: Annotated[bool, typer.Option("--force", help="Write even if another process has the file open")] = False,
) -> None:
    """Collapse the last N finished turns into a branch_summary built from the entries."""
    from ds4sessions.steering.steer import collapse, plan_collapse
    from ds4sessions.steering.writer import Journal, WriteRefused, read_state

    _steerable(path, "collapse")
    state = read_state(path)
    try:
        plan = plan_collapse(state, turns, _model(state.session))
    except WriteRefused as err:
        raise _refused(err) from None
    cost = plan.cost
    typer.echo(literal(plan.summary.text))
    typer.echo("")
    typer.echo(
        f"collapse {plan.turns} of {plan.available_turns} turns ({len(plan.span_entry_ids)} entries from "
        f"{plan.first_prompt_id}): {cost.token_effect()}"
    )
    typer.echo(
        f"prompt cache: the collapsed span's cached prefix is lost; next request {_usd(cost.next_with_usd)} instead of "
        f"{_usd(cost.next_without_usd)}, {cost.per_request_effect(_usd)}"
        + (
            f" (pays off after {cost.break_even_requests} request{'s' if cost.break_even_requests != 1 else ''})"
            if cost.break_even_requests
            else ""
        )
    )
    if plan.pinned_in_span:
        typer.echo(f"warning: pinned entries leave the context: {', '.join(plan.pinned_in_span)}")
    typer.echo(f"appends a branch_summary with parent {plan.anchor_id}, fromId {plan.from_id}")
    if dry_run:
        typer.echo("dry run: nothing written")
        return
    if not yes and not typer.confirm("Append it?", default=False):
        typer.echo("nothing written")
        raise typer.Exit(1)
    try:
        result = collapse(path, turns, expected=plan.expected, model=_model(state.session), journal=Journal(), force=force)
    except WriteRefused as err:
        raise _refused(err) from None
    typer.echo(result.describe())


def compact_cmd(
    path: Annotated[Path, typer.Argument(help="A Pi session .jsonl file")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Preview only; no request, nothing written")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Send the request and write without asking")] = False,
    force: Annotated[bool, typer.Option("--force", help="Write even if another process has the file open")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the summary")] = 120.0,
) -> None:
    """Preview Pi's compaction (cut point, tokens, cost); without --dry-run, summarise and append it.

    The summary request replays the previous request's messages (prompt cache) and goes to
    $DS4TUI_SUMMARY_BASE_URL (OpenAI-compatible or Anthropic, $DS4TUI_SUMMARY_API) with the key
    from $DS4TUI_SUMMARY_API_KEY (or ANTHROPIC_/OPENAI_API_KEY).
    """
    from ds4sessions.steering.compaction import CompactionFailed, compact, preview_compaction
    from ds4sessions.steering.writer import Journal, WriteRefused, read_state

    _steerable(path, "compact")
    state = read_state(path)
    model = _model(state.session)
    try:
        preview = preview_compaction(state, model=model)
    except WriteRefused as err:
        raise _refused(err) from None
    s = preview.settings
    typer.echo(
        f"cut point: keep from {preview.first_kept_entry_id}"
        + (" (splits a turn)" if preview.is_split_turn else "")
        + f"; keepRecentTokens {s.keep_recent_tokens:,}, reserveTokens {s.reserve_tokens:,}"
    )
    typer.echo(
        f"tokens: {preview.tokens_before:,} before → ~{preview.tokens_after:,} after "
        f"({len(preview.messages_to_summarize) + len(preview.turn_prefix_messages)} messages summarised, "
        f"{len(preview.kept_messages)} kept)"
    )
    if preview.context_window:
        typer.echo(
            f"context window {preview.context_window:,}: Pi compacts on its own above "
            f"{preview.context_window - s.reserve_tokens:,}" + (" (over now)" if preview.over_threshold else "")
        )
    cost = preview.cost
    if cost is not None:
        note = " (cache probably expired: priced as a cache write)" if cost.cache_probably_cold else ""
        typer.echo(
            f"summary request: cached {_usd(cost.cached_usd)} ({cost.prefix_tokens:,} cached + {cost.fresh_tokens:,} new "
            f"tokens){note} vs cold {_usd(cost.cold_usd)} ({cost.cold_tokens:,} tokens, Pi's way), "
            f"assuming {cost.output_tokens:,} output tokens"
        )
    if dry_run:
        typer.echo("dry run: no request sent, nothing written")
        return
    if not yes and not typer.confirm("Send the summary request and append the compaction?", default=False):
        typer.echo("nothing written")
        raise typer.Exit(1)
    try:
        outcome = compact(path, model=model, expected=preview.expected, journal=Journal(), force=force, timeout=timeout)
    except (WriteRefused, CompactionFailed) as err:
        raise _refused(err) from None
    assert outcome.write is not None
    typer.echo(outcome.write.describe())


def journal_list_cmd(
    path: Annotated[Path | None, typer.Argument(help="Only the writes to this session file")] = None,
) -> None:
    """List every write ds4tui made (oldest first), with its journal number."""
    from ds4sessions.steering.writer import Journal

    journal = Journal()
    records = journal.list(path)
    if not records:
        typer.echo(f"no writes recorded ({journal.path})")
        return
    for record in records:
        typer.echo(literal(record.describe(), keep_newlines=False))


def journal_undo_cmd(
    record_id: Annotated[int, typer.Argument(help="The journal number to undo")],
    force: Annotated[bool, typer.Option("--force", help="Write even if the agent looks busy or the file is open")] = False,
) -> None:
    """Undo a write by appending its counter-entry (a restoring label, or a leaf move back)."""
    from ds4sessions.steering.steer import undo
    from ds4sessions.steering.writer import Journal, WriteRefused

    try:
        result = undo(record_id, journal=Journal(), force=force)
    except WriteRefused as err:
        raise _refused(err) from None
    typer.echo(f"undid #{record_id}")
    typer.echo(result.describe())


def journal_reset_cmd() -> None:
    """Move the journal aside (e.g. a corrupt one) so the next write starts a new one. The old
    file is kept next to it as `journal.sqlite.broken-<time>`; the session files are untouched."""
    from ds4sessions.steering.journal import Journal

    moved = Journal.reset()
    typer.echo(f"moved the journal aside to {moved}" if moved else "no journal to reset")


def register(app: typer.Typer) -> set[str]:
    """Add `pin`, `collapse`, `compact` and the `journal` group to `app`; returns their names."""
    app.command("pin")(pin_cmd)
    app.command("collapse")(collapse_cmd)
    app.command("compact")(compact_cmd)
    journal_app.command("list")(journal_list_cmd)
    journal_app.command("undo")(journal_undo_cmd)
    journal_app.command("reset")(journal_reset_cmd)
    app.add_typer(journal_app, name="journal")
    return NAMES
