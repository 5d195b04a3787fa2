"""What the Timeline tab and a scrubbed dashboard show, as plain values (no Textual): issue 33.

- `columns(timeline, width)`: the plot's data, at most `width` columns (one per request, or the
  last request of each run of requests when there are more requests than columns), stacked by
  category: O(width × categories) whatever the session's length;
- `scrubbed(view, timeline, i)`: the header, legend and map of the dashboard as of row `i` (the
  context as it was at that request: its total and categories, `ds4sessions.derive.timeline`),
  O(categories): the map is drawn from the categories (one block each, in the legend's order),
  since the timeline keeps a few numbers per request, not the messages;
- `row_lines(timeline, i)`: the inspector's lines for a row.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ds4core.categories import Calibrated, CategoryRow, MapIndex, Segment
from ds4core.tokens import fmt_tokens
from ds4sessions.derive.timeline import Timeline, TimelineRow, request_time_label
from ds4tui.viewmodel import CategoryModel, HeaderModel, LegendModel, MapModel, Tokens, ViewModel

UNKNOWN = "earlier_context"
"""The category a row without a kept composition is drawn as (its total only)."""
UNKNOWN_LABEL = "Context (composition not kept)"


@dataclass(frozen=True)
class Columns:
    """The plot's data: `x` the request number of each column, `stacks` per category id (in
    `Timeline.category_ids` order, `UNKNOWN` last) the cumulative top of its band per column
    (tokens), `share` the cache-read share per column (0–1; None: not counted), `cost` the
    cumulative cost per column (USD), `compactions` / `misses` the request numbers with such a
    marker, `rows` the row position (0-based) each column shows."""

    x: tuple[int, ...]
    stacks: tuple[tuple[str, tuple[int, ...]], ...]
    share: tuple[float | None, ...]
    cost: tuple[float, ...]
    compactions: tuple[int, ...]
    misses: tuple[int, ...]
    rows: tuple[int, ...]


def columns(tl: Timeline, width: int) -> Columns:
    """At most `width` columns of `tl` (see `Columns`): every request when they fit, else the
    last row of each equal run of rows (its markers: those of the whole run)."""
    rows = tl.rows
    n = len(rows)
    width = max(width, 1)
    if n <= width:
        picks = list(range(n))
    else:
        picks = [min(n - 1, ((k + 1) * n) // width - 1) for k in range(width)]
    ids = list(tl.category_ids)
    tops: dict[str, list[int]] = {cid: [] for cid in ids}
    tops[UNKNOWN] = []
    compactions: list[int] = []
    misses: list[int] = []
    start = 0
    for i in picks:
        row = rows[i]
        acc = 0
        cats = row.categories
        for k, cid in enumerate(ids):
            if cats is not None and k < len(cats):
                acc += cats[k]
            tops[cid].append(acc)
        tops[UNKNOWN].append(row.context_tokens if cats is None else acc)
        for j in range(start, i + 1):
            for m in rows[j].markers:
                if m.kind == "compaction":
                    compactions.append(rows[i].n)
                elif m.kind == "miss":
                    misses.append(rows[i].n)
        start = i + 1
    order = [c for c in ids if any(tops[c])] + ([UNKNOWN] if any(t for t in tops[UNKNOWN]) else [])
    return Columns(
        x=tuple(rows[i].n for i in picks),
        stacks=tuple((cid, tuple(tops[cid])) for cid in order),
        share=tuple(rows[i].share for i in picks),
        cost=tuple(rows[i].cumulative_usd for i in picks),
        compactions=tuple(dict.fromkeys(compactions)),
        misses=tuple(dict.fromkeys(misses)),
        rows=tuple(picks),
    )


def as_of_text(row: TimelineRow, last: bool) -> str:
    """"as of request 57 · 14:02" (the header's scrub badge)."""
    return f"as of request {row.n} · {request_time_label(row.time)}" + (" (latest)" if last else "")


def scrubbed(view: ViewModel, tl: Timeline, i: int) -> tuple[HeaderModel, LegendModel, MapModel]:
    """The dashboard's header, legend and map as of row `i` of `tl` (see the module doc)."""
    row = tl.rows[i]
    window = tl.window
    used = row.context_tokens
    cats = tl.categories_of(row)
    if not cats:
        cats = {UNKNOWN: used}
    labels = dict(tl.labels)
    labels.setdefault(UNKNOWN, UNKNOWN_LABEL)
    counted = sum(cats.values())
    rows = [CategoryRow(cid, labels.get(cid, cid), tokens) for cid, tokens in cats.items() if tokens > 0]
    free = max(window - used, 0) if window else None
    cal_rows = rows + ([CategoryRow("free", "Free space", free)] if free is not None else [])
    cal = Calibrated(rows=cal_rows, used=used, free=free, window=window, estimate=counted,
                     factor=(used / counted) if counted else 1.0, source="provider")
    header = replace(view.header, used=used, measured=True, window=window, fill=(used / window) if window else None,
                     model_key=row.model or view.header.model_key, as_of=as_of_text(row, i == len(tl.rows) - 1))
    legend = LegendModel(
        tuple(CategoryModel(r.id, r.label, Tokens(r.tokens, "provider")) for r in cal_rows),
        Tokens(counted, "provider"), None, None, cal,
        (f"request {row.n} of {len(tl.rows)}: {row.cache}" + (f" ({row.miss_cause})" if row.miss_cause else ""),
         "End or f: back to live"),
        {**dict(tl.roles), UNKNOWN: "unattributed"},
    )
    segments = [Segment(r.id, r.tokens, None, None) for r in rows]
    index = MapIndex.of(segments)
    totals = tuple((r.id, r.tokens) for r in rows)
    base = view.map
    roles = dict(tl.roles)
    roles.setdefault(UNKNOWN, "unattributed")
    map_model = MapModel(index, totals, window or max(used, 1), calibrated=cal, roles=roles,
                         agent=base.agent, what_if=base.what_if)
    return header, legend, map_model


def cumulative_text(row: Any) -> str:
    """The running cost of a timeline row as shown: "$0.1234", or "no price" while no request so
    far had one (a model without a catalog price: "$0.0000" would claim it was free)."""
    if row.cost_usd is None and not row.cumulative_usd:
        return "no price"
    return f"${row.cumulative_usd:.4f}"


def row_lines(tl: Timeline, i: int) -> list[str]:
    """The inspector's lines for row `i`: time, model, usage, context, cost, cache, markers."""
    row = tl.rows[i]
    lines = [
        f"Request {row.n} of {len(tl.rows)} · {request_time_label(row.time)} · {row.model or 'model unknown'}",
        f"context {fmt_tokens(row.context_tokens)}" + (f" / {fmt_tokens(tl.window)}" if tl.window else ""),
        f"input {fmt_tokens(row.input)} · cache read {fmt_tokens(row.cache_read)} · cache write "
        f"{fmt_tokens(row.cache_write)} · output {fmt_tokens(row.output)}",
        "cache: " + row.cache + (f" ({row.miss_cause})" if row.miss_cause else "")
        + (f", read share {row.share:.0%}" if row.share is not None else ""),
        ("cost " + (f"${row.cost_usd:.4f}" if row.cost_usd is not None else "unknown")
         + f" · cumulative {cumulative_text(row)}"),
    ]
    for m in row.markers:
        lines.append("• " + marker_text(m))
    if row.categories is None:
        lines.append("composition not kept: this request's context was compacted before ds4tui read it")
    lines.append("[ ] one request · { } one compaction · End or f: live")
    return lines


def marker_text(m: Any) -> str:
    """One marker in words ("compaction 83k → 21k", "model a → b", "miss: TTL lapse", "idle 7m")."""
    if m.kind == "compaction":
        before = fmt_tokens(m.tokens_before) if m.tokens_before is not None else "?"
        after = fmt_tokens(m.tokens_after) if m.tokens_after is not None else "(no request since)"
        return f"compaction ({m.detail}) {before} → {after}"
    if m.kind == "model":
        return f"model {m.detail}"
    if m.kind == "miss":
        return f"cache miss: {m.detail}" + (f" — {m.text}" if m.text else "")
    minutes = (m.seconds or 0) / 60
    return f"idle {minutes:.0f} min (cache TTL {int(m.ttl_s or 0) // 60} min)"
