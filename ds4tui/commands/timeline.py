"""`ds4tui timeline PATH [--json]`: the context over time, one row per request (issue 33), and
`cut_after_request`, the byte offset `ds4tui map PATH --at N` cuts the file at.

The rows are the dashboard's Timeline tab's (`ds4sessions.derive.timeline`): per request its
usage, the context it left (total and by category), its cost, cache state and markers
(compactions with their sizes, model switches, cache misses with their cause, idle gaps longer
than the cache TTL). One row per request of the Cache tab's history, the rows `cache --json`
counts; `--json` prints `Timeline.to_json()` (docs/json.md).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from ds4tui.commands import agent_of, fail
from ds4tui.text import fmt_tokens, literal

NAMES = {"timeline"}


def read_timeline(path: Path) -> tuple[Any, Any, Any]:
    """(agent, snapshot, timeline) of the session file `path`, read once (exact counts)."""
    from ds4sessions.agents.pi.discovery import load_model_table
    from ds4sessions.agents.plugin import read_snapshot
    from ds4sessions.derive.timeline import session_timeline

    agent = agent_of(path)
    models = load_model_table()
    snapshot = read_snapshot(agent, path, models)
    return agent, snapshot, session_timeline(agent, snapshot, models)


def timeline_cmd(
    path: Annotated[Path, typer.Argument(help="A session file of any agent")],
    as_json: Annotated[bool, typer.Option("--json", help="Print every request as JSON")] = False,
) -> None:
    """Show the context over time of PATH: per request the context (total, by category), the
    cache read share, the cost and the markers (compactions, model switches, misses, idle gaps)."""
    _, _, tl = read_timeline(path)
    if as_json:
        typer.echo(json.dumps(tl.to_json(), indent=2, ensure_ascii=False))
        return
    from ds4sessions.derive.timeline import request_time_label
    from ds4tui.timeline_model import cumulative_text, marker_text  # (the words the Timeline tab uses)

    out = [f"{len(tl.rows)} requests" + (f" · window {fmt_tokens(tl.window)}" if tl.window else "")
           + (f" · {tl.threshold[0]} at {fmt_tokens(tl.threshold[1])}" if tl.threshold else "")]
    for row in tl.rows:
        share = f"{row.share:5.0%}" if row.share is not None else "    —"
        marks = "; ".join(([] if row.kind == "reply" else [row.kind.replace("_", " ")])
                          + [literal(marker_text(m), keep_newlines=False) for m in row.markers])
        cost = cumulative_text(row)
        out.append(f"#{row.n:<5} {request_time_label(row.time)}  {fmt_tokens(row.context_tokens):>7}  read {share}"
                   f"  {cost:>10}  {literal(row.model or '?', keep_newlines=False)}" + (f"  [{marks}]" if marks else ""))
    typer.echo("\n".join(out))


def _lines(data: bytes) -> list[int]:
    """Byte offsets just after each line end (`\\n`) of `data`, in order."""
    ends, start = [], 0
    while True:
        i = data.find(b"\n", start)
        if i < 0:
            break
        ends.append(i + 1)
        start = i + 1
    if start < len(data):
        ends.append(len(data))
    return ends


def _probe(agent: Any, name: str, data: bytes, end: int, models: Any, folder: Path) -> Any:
    """The snapshot (chars-v1) of `data[:end]` written as `folder/name`."""
    from ds4sessions.agents.plugin import read_snapshot

    cut = folder / name
    cut.write_bytes(data[:end])
    return read_snapshot(agent, cut, models, exact=False)


def cut_after_request(agent: Any, path: Path, entry_id: str | None, models: Any = None) -> int:
    """The byte offset (a line end) of `path` right after request `entry_id`: the shortest
    prefix of whole lines whose cache history (the timeline's rows) has that request, extended
    by the lines that still belong to its reply (a streamed reply's next content blocks: neither
    a message, a request nor a compaction is added). Found by bisection over line ends with reads of prefixes, so a few
    reads of the file (`ds4tui map --at`, not the dashboard's path). Raises ValueError when the
    request is not in the file."""
    data = Path(path).read_bytes()
    ends = _lines(data)

    from ds4sessions.derive.cache import session_cache_view

    def facts(snap: Any) -> tuple[bool, int, int, int]:
        # the timeline's rows are the cache history's (replies, and Pi's cache warms)
        records = session_cache_view(agent, snap, 0.0, models).history.records
        has = any(r.event.entry_id == entry_id for r in records)
        return has, len(records), len(snap.context.messages), len(snap.conversation.compactions)

    with tempfile.TemporaryDirectory(prefix="ds4tui-at-") as tmp:
        folder = Path(tmp)
        lo, hi = 0, len(ends) - 1  # the answer's index in `ends`
        if not facts(_probe(agent, path.name, data, ends[hi], models, folder))[0]:
            raise ValueError(f"request {entry_id} is not in {path}")
        while lo < hi:
            mid = (lo + hi) // 2
            if facts(_probe(agent, path.name, data, ends[mid], models, folder))[0]:
                hi = mid
            else:
                lo = mid + 1
        here = facts(_probe(agent, path.name, data, ends[lo], models, folder))
        while lo + 1 < len(ends):
            nxt = facts(_probe(agent, path.name, data, ends[lo + 1], models, folder))
            if nxt[1:] != here[1:]:
                break
            lo += 1
        return ends[lo]


def map_at(path: Path, n: int, *, exact: bool = True) -> dict[str, Any]:
    """`ds4tui map PATH --at N --json`: the map as it was at request N (1-based, a row of
    `timeline`): `map --json` of the file cut after that request (`cut_after_request`), with the
    original `path` and `asOfRequest` = N. Exit 2 when N is not a request of the file."""
    from ds4sessions.agents.pi.discovery import load_model_table

    agent, _, tl = read_timeline(path)
    if not 1 <= n <= len(tl.rows):
        fail(f"map --at: request {n} is not in {path} ({len(tl.rows)} requests)")
    row = tl.rows[n - 1]
    models = load_model_table()
    end = cut_after_request(agent, path, row.entry_id, models)
    with tempfile.TemporaryDirectory(prefix="ds4tui-at-") as tmp:
        cut = Path(tmp) / path.name
        cut.write_bytes(Path(path).read_bytes()[:end])
        out = agent.map_json(cut, exact=exact, models=models)
    out["path"] = str(path)
    out["asOfRequest"] = n
    return out


def register(app: typer.Typer) -> set[str]:
    """Add the `timeline` command to `app`; returns {"timeline"}."""
    app.command("timeline")(timeline_cmd)
    return NAMES
