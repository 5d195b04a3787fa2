"""`ds4tui retrieve PATH [--json] [--rebuild-index]`: DS4's historical retrieval for a session's
current request: query terms, candidates with score and reason, what is sent or left out (and
why), and the evidence text exactly as it would be injected. The derived index lives in the
state directory (`ds4sessions.derive.retrieval_index`); `--rebuild-index` deletes it first, and
`ds4tui index-rebuild` only deletes it (it is re-built on the next use)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


from ds4tui.text import fmt_tokens, literal

NAMES = {"retrieve", "index-rebuild"}


def retrieve_cmd(
    path: Annotated[Path, typer.Argument(help="A session file (retrieval: Pi)")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the retrieval as JSON")] = False,
    rebuild_index: Annotated[bool, typer.Option("--rebuild-index", help="Delete the derived index first")] = False,
) -> None:
    """Show what DS4's historical retrieval would inject for the session's current request."""
    from ds4sessions.agents.pi.discovery import load_model_table
    from ds4sessions.agents.plugin import read_snapshot
    from ds4sessions.derive.retrieval import LiveRetrieval, open_session_index

    from ds4tui.commands import agent_of, refuse_unless

    agent = agent_of(path)
    refuse_unless(agent, "retrieval", "retrieve")  # (before the index is opened: nothing is written)
    index = open_session_index(path)
    for removed in index.removed:
        typer.echo(f"ds4tui: removed {literal(removed, keep_newlines=False)} from the state dir; the index is rebuilt", err=True)
    if rebuild_index:
        index.rebuild()
    view = LiveRetrieval(index).retrieve(read_snapshot(agent, path, load_model_table(), exact=False))
    index.close()
    if as_json:
        typer.echo(json.dumps(view.to_json(), indent=2, ensure_ascii=False))
        return
    result = view.result
    out = [
        f"Request:     {literal(view.request_text or '(no user message)', keep_newlines=False)}",
        f"Query terms: {literal(', '.join(view.query_terms) or 'none', keep_newlines=False)}",
        f"Status:      {result.status}; {result.candidate_count} candidates, {len(view.source_entry_ids)} sent "
        f"({fmt_tokens(view.selected_tokens)} of {fmt_tokens(view.max_tokens)} maxRetrievedHistoryTokens), "
        f"{result.alternate_branch_candidates} on other branches, {result.duplicate_candidates} duplicates",
        f"Index:       {view.index_path} (+{view.sync.added} entries, {view.sync.indexed_entries} indexed)",
    ]
    out += [f"Warning:     {literal(w, keep_newlines=False)}" for w in result.warnings]
    out += ["", "Candidates"]
    for row in view.rows:
        rank = "" if row.candidate.rank is None else str(row.candidate.rank + 1)
        score = "—" if row.score is None else f"{row.score:.3f}"
        state = "sent" if row.selected else "no"
        out.append(f"{rank:>3} {row.entry_id:<10} {(row.role or row.entry_type):<12} {score:>9} {state:<4} {fmt_tokens(row.tokens):>6}")
        out.append(f"     {literal(row.reason if row.selected else row.why + (f' ({row.reason})' if row.reason else ''), keep_newlines=False)}")
    out += ["", "Evidence injected" if view.evidence_text else "No evidence injected."]
    if view.evidence_text:
        out.append(literal(view.evidence_text))
    typer.echo("\n".join(out))


def index_rebuild_cmd() -> None:
    """Delete the derived retrieval index (it is rebuilt from the session files on next use)."""
    import shutil

    from ds4sessions.derive.retrieval_index import default_db_path, session_db_path

    folder = session_db_path("x").parent
    shutil.rmtree(folder, ignore_errors=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(default_db_path()) + suffix).unlink(missing_ok=True)
    typer.echo(f"ds4tui: retrieval indexes deleted: {folder} (rebuilt on next use)")


def register(app: typer.Typer) -> set[str]:
    """Add the `retrieve` and `index-rebuild` commands to `app`; returns their names."""
    app.command("retrieve")(retrieve_cmd)
    app.command("index-rebuild")(index_rebuild_cmd)
    return NAMES
