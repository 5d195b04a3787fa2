"""`ds4tui state`: what ds4tui keeps in its state directory, per session, and pruning it.

    ds4tui state [--json]                      the journal, each derived index (session, size,
                                               last opened), other files, totals
    ds4tui state --prune [--days N] [--dry-run] remove indexes of sessions not opened for N days
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Annotated

import typer

from ds4tui.commands import fail
from ds4tui.text import fmt_bytes, literal

NAMES = {"state"}


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M")


def state_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    prune: Annotated[bool, typer.Option("--prune", help="Remove indexes of sessions not opened for --days days")] = False,
    days: Annotated[float, typer.Option("--days", help="With --prune: age in days (default 30)")] = 30.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --prune: list what would be removed")] = False,
) -> None:
    """Show what ds4tui stores (journal, derived indexes per session, sizes), or prune old indexes."""
    from ds4sessions import state

    if days < 0:
        fail("--days must be >= 0")
    removed = state.prune(days, dry_run=dry_run) if prune else []
    report = state.inventory()
    try:
        cap = state.index_cap_bytes()
    except ValueError as error:
        fail(str(error))
    if as_json:
        out = {
            "stateDir": str(report.state_dir),
            "journal": {"path": str(report.journal[0]), "bytes": report.journal[1]} if report.journal else None,
            "indexes": [
                {
                    "path": str(i.path),
                    "session": i.session_path,
                    "sessionExists": i.session_exists,
                    "bytes": i.size,
                    "lastOpened": dt.datetime.fromtimestamp(i.last_opened, dt.timezone.utc).isoformat(),
                }
                for i in report.indexes
            ],
            "other": [{"path": str(p), "bytes": n} for p, n in report.other],
            "indexBytes": report.index_bytes,
            "indexCapBytes": cap,
            "totalBytes": report.total,
        }
        if prune:
            out["pruned" if not dry_run else "wouldPrune"] = [
                {"path": str(i.path), "session": i.session_path, "bytes": i.size} for i in removed
            ]
        typer.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    lines = [f"State directory: {literal(str(report.state_dir))}"]
    if report.journal:
        lines.append(f"  journal        {fmt_bytes(report.journal[1]):>9}  {literal(str(report.journal[0]))}  (undo history)")
    else:
        lines.append("  journal        (none: nothing written yet)")
    lines.append(
        f"  retrieval indexes: {len(report.indexes)}, {fmt_bytes(report.index_bytes)} of a {fmt_bytes(cap)} cap "
        "(derived; rebuilt on demand)"
    )
    for info in report.indexes:
        gone = "" if info.session_exists else "  [session file gone]"
        lines.append(
            f"    {fmt_bytes(info.size):>9}  opened {_when(info.last_opened)}  "
            f"{literal(info.session_path or '(unreadable index)', keep_newlines=False)}{gone}"
        )
    for path, size in report.other:
        lines.append(f"  other          {fmt_bytes(size):>9}  {literal(str(path))}")
    lines.append(f"  total          {fmt_bytes(report.total):>9}")
    if prune:
        verb = "would remove" if dry_run else "removed"
        lines.append(
            f"Prune (not opened for {days:g} days): {verb} {len(removed)} index(es), "
            f"{fmt_bytes(sum(i.size for i in removed))}"
        )
        for info in removed:
            lines.append(f"    {literal(info.session_path or str(info.path), keep_newlines=False)}")
    typer.echo("\n".join(lines))


def register(app: typer.Typer) -> set[str]:
    """Add the `state` command to `app`; returns its name."""
    app.command("state")(state_cmd)
    return NAMES
