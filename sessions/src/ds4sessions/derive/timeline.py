"""The context over time (issue 33): one compact row per request, for every agent.

`TimelineBuilder.update(snapshot, history)` extends the session's `Timeline` by the requests the
cache stage's history (`ds4core.cache_state.CacheHistory`, the Cache tab's and `cache --json`'s
rows: one per real request) gained since the previous update, so an append costs O(new
requests + new messages), never a pass over the file or the whole context. A row keeps a few
numbers: the request's usage (provider tokens), the context it left, that context by category
(tokens, one int per category of `Timeline.category_ids`), its cost (USD), its cache state and
markers (compaction, model switch, cache miss with its cause, idle gap longer than the cache TTL).

Sources and units, per row (`TimelineRow`):

- usage: the request's provider usage (`input`, `cache_read`, `cache_write`, `output`, tokens);
- `context_tokens`: the context after the request's reply, as the provider counted it: prompt
  (input + cache read + cache write) + output. The *last* row is the context now: the snapshot's
  own count (`ProviderView.context_tokens`, the messages after the last reply included; the
  calibrated estimate when there is no provider count), the number `map --json` prints;
- `categories`: that context split by category, the snapshot's estimate of the messages the
  request's reply closes (the fixed blocks: system prompt, tools; then the messages up to and
  including the reply) scaled to `context_tokens` by largest remainder
  (`ds4core.categories.calibrate`); the last row: the map's calibrated categories. A request
  the live session read only after a later compaction had replaced its context (e.g. the first
  read of a file with compactions) has `categories` None: its composition is not kept by the
  agent's reader (its total is still known);
- `cost_usd`: the cost the agent recorded, else the catalog price (`PriceCheck`), None without
  either; `share`: cache read / prompt;
- `cache`: "hit", "miss" (`miss_cause`: "first request", "TTL lapse", "prefix changed",
  "unexplained", from `ds4core.cache_state`) or "uncounted" (an aborted or error reply, a cache
  warm: shown, not judged).

Times are Unix epoch seconds (floats); `n` is 1-based, the history's `number`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from ds4core.indices import index_range
from ds4core.categories import calibrate, calibrated

from ds4sessions.agents import base

__all__ = ["Marker", "TimelineRow", "Timeline", "TimelineBuilder", "request_time_label", "session_timeline",
           "timeline_json", "timeline_threshold"]

_SKIP = frozenset(("unattributed", "free"))


@dataclass(frozen=True, slots=True)
class Marker:
    """One event on the timeline, at a row: `kind` is "compaction" (`tokens_before` recorded by
    the agent, `tokens_after` the prompt of the first request after it, None while no request
    followed; `detail` the compaction kind), "model" (`detail` "old → new"), "miss" (`detail`
    the cause, `text` its explanation) or "idle" (`seconds` of idle before the request, longer
    than the cache TTL `ttl_s`)."""

    kind: str
    detail: str = ""
    text: str = ""
    tokens_before: int | None = None
    tokens_after: int | None = None
    seconds: float | None = None
    ttl_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON: `{"type", ...}` with the fields of its kind (module doc of `docs/json.md`)."""
        if self.kind == "compaction":
            return {"type": "compaction", "kind": self.detail, "tokensBefore": self.tokens_before,
                    "tokensAfter": self.tokens_after}
        if self.kind == "model":
            old, _, new = self.detail.partition(" → ")
            return {"type": "model", "from": old or None, "to": new or None}
        if self.kind == "miss":
            return {"type": "miss", "cause": self.detail, "detail": self.text}
        return {"type": "idle", "seconds": self.seconds, "ttlSeconds": self.ttl_s}


@dataclass(frozen=True, slots=True)
class TimelineRow:
    """One request of the timeline (see the module doc for each field's source and unit).
    `categories`: tokens per category, aligned with the `Timeline.category_ids` it belongs to
    (a shorter tuple: the missing categories are 0); None when not known. `message_index`: where
    the request's reply was in the context it was counted on (None: not on a context read).
    `kind`: the cache event's kind: "reply", "cache_warm" (Pi) or "compaction_call" (a billed
    request that made a compaction: Codex's remote compaction; its marker is on the next request)."""

    n: int
    time: float | None
    model: str | None
    input: int
    cache_read: int
    cache_write: int
    output: int
    context_tokens: int
    categories: tuple[int, ...] | None
    cost_usd: float | None
    cumulative_usd: float
    share: float | None
    cache: str
    miss_cause: str | None
    markers: tuple[Marker, ...] = ()
    entry_id: str | None = None
    message_index: int | None = None
    kind: str = "reply"

    @property
    def prompt_tokens(self) -> int:
        """input + cache read + cache write (tokens): what the request carried."""
        return self.input + self.cache_read + self.cache_write


@dataclass(frozen=True)
class Timeline:
    """The session's requests over time (a value; `TimelineBuilder` makes a new one per update,
    sharing the unchanged rows).

    - `rows`: one per request of the cache history, in order;
    - `category_ids` / `labels` / `roles`: the categories rows' tuples are aligned with (ids in
      the order first seen; label and colour role per id, the agent's `CategoryTable`);
    - `window`: the context window (tokens, None unknown); `threshold`: `(label, tokens)` of the
      line the agent or DS4 acts at (autocompact point, DS4's hard input limit), None without one;
    - `ttl_s`: the prompt cache's lifetime (seconds) the idle markers compare with;
    - `agent`: agent id; `version`: the snapshot version it was built from."""

    agent: str
    rows: tuple[TimelineRow, ...]
    category_ids: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    roles: Mapping[str, str] = field(default_factory=dict)
    window: int | None = None
    threshold: tuple[str, int] | None = None
    ttl_s: float | None = None
    version: int = 0

    def categories_of(self, row: TimelineRow) -> dict[str, int] | None:
        """`row.categories` as id → tokens (non-zero only), None when unknown."""
        if row.categories is None:
            return None
        return {cid: t for cid, t in zip(self.category_ids, row.categories) if t}

    def compactions(self) -> list[int]:
        """Row positions (0-based) that carry a compaction marker (for `{`/`}`)."""
        return [i for i, r in enumerate(self.rows) if any(m.kind == "compaction" for m in r.markers)]

    def to_json(self) -> dict[str, Any]:
        """`ds4tui timeline --json` (docs/json.md)."""
        return timeline_json(self)


def timeline_json(tl: Timeline) -> dict[str, Any]:
    """`{"agent", "window", "threshold", "ttlSeconds", "categories": [{id, label}], "requests":
    [{"n", "time", "model", "inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens",
    "contextTokens", "categories": {id: tokens} | null, "costUsd", "cumulativeUsd",
    "cacheReadShare", "cache": {"state", "missCause"}, "markers": [...]}]}`."""
    return {
        "agent": tl.agent,
        "window": tl.window,
        "threshold": None if tl.threshold is None else {"label": tl.threshold[0], "tokens": tl.threshold[1]},
        "ttlSeconds": tl.ttl_s,
        "categories": [{"id": cid, "label": tl.labels.get(cid, cid)} for cid in tl.category_ids],
        "requests": [
            {
                "n": r.n, "kind": r.kind, "time": r.time, "model": r.model, "entryId": r.entry_id,
                "inputTokens": r.input, "cacheReadTokens": r.cache_read, "cacheWriteTokens": r.cache_write,
                "outputTokens": r.output, "contextTokens": r.context_tokens,
                "categories": tl.categories_of(r), "costUsd": r.cost_usd, "cumulativeUsd": r.cumulative_usd,
                "cacheReadShare": r.share, "cache": {"state": r.cache, "missCause": r.miss_cause},
                "markers": [m.to_json() for m in r.markers],
            }
            for r in tl.rows
        ],
    }


def request_time_label(seconds: float | None) -> str:
    """`HH:MM` local time of epoch `seconds` ("--:--" when unknown)."""
    if seconds is None:
        return "--:--"
    import time

    return time.strftime("%H:%M", time.localtime(seconds))


class _Cursor:
    """Running category totals over one context's segments (fixed blocks, then messages in
    order), advanced to "the messages up to message index `m`": rows come in context order, so a
    whole context is walked once per epoch."""

    __slots__ = ("key", "pos", "totals", "segments")

    def __init__(self, key: Any, segments: Sequence[Any]) -> None:
        self.key = key
        self.pos = 0
        self.totals: dict[str, int] = {}
        self.segments = segments

    def through(self, message_index: int) -> dict[str, int]:
        """Category → tokens of the fixed blocks and the messages `<= message_index`."""
        segments, totals, pos = self.segments, self.totals, self.pos
        n = len(segments)
        while pos < n:
            seg = segments[pos]
            mi = seg.message_index
            if mi is not None and mi > message_index:
                break
            cat = seg.category
            if cat not in _SKIP:
                totals[cat] = totals.get(cat, 0) + seg.tokens
            pos += 1
        self.pos = pos
        return totals


class TimelineBuilder:
    """Builds one session's `Timeline` incrementally (see the module doc). Not thread-safe: the
    derive worker of one session calls `update`."""

    def __init__(self) -> None:
        self._rows: list[TimelineRow] = []  # every row but the live last one, final
        self._events: list[Any] = []  # the history events of `_rows` (identity: what is kept)
        self._last_final: tuple[Any, tuple[int, ...] | None] | None = None
        self._ids: list[str] = []
        self._index: dict[str, int] = {}
        self._pos: dict[str, int] = {}  # entry id → first message index in the context
        self._pos_key: Any = None
        self._pos_len = 0
        self._cursor: _Cursor | None = None
        self._compactions: tuple[Any, ...] = ()
        self._compaction_key: Any = None
        self._labels: dict[str, str] = {}
        self._roles: dict[str, str] = {}

    # -- helpers -------------------------------------------------------------------------------

    def _aligned(self, totals: Mapping[str, int]) -> tuple[int, ...]:
        index, ids = self._index, self._ids
        for cid in totals:
            if cid not in index:
                index[cid] = len(ids)
                ids.append(cid)
        out = [0] * len(ids)
        for cid, tokens in totals.items():
            out[index[cid]] = tokens
        while out and not out[-1]:
            out.pop()
        return tuple(out)

    def _context_positions(self, snapshot: Any) -> dict[str, int]:
        """Entry id → first index in the snapshot's context (extended by the new ids while the
        context only grows: `Snapshot.lineage`)."""
        ctx = snapshot.context
        ids = ctx.message_entry_ids
        lineage = snapshot.lineage
        key = (lineage[0] if lineage is not None else None, id(ctx) if lineage is None else None)
        if key != self._pos_key or self._pos_len > len(ids) or lineage is None:
            self._pos, self._pos_len, self._pos_key = {}, 0, key
        pos = self._pos
        for i in index_range(self._pos_len, len(ids)):  # (shared ints: `ds4core.indices`)
            eid = ids[i]
            if eid is not None and eid not in pos:
                pos[eid] = i
        self._pos_len = len(ids)
        return pos

    def _compactions_of(self, snapshot: Any) -> tuple[Any, ...]:
        """The compactions on the snapshot's branch (`Conversation.compactions`), looked up again
        only when the context was rebuilt (a compaction always rebuilds it)."""
        lineage = snapshot.lineage
        key = lineage[0] if lineage is not None else ("ctx", id(snapshot.context))
        if key != self._compaction_key:
            self._compaction_key = key
            # a context after a compaction starts with its summary (a `compactionSummary`
            # message): without one there is none to mark, and Pi's neutral conversation (O(n)
            # to make: ~1 s at 10,000 turns) is not needed
            head = snapshot.context.messages[:8]
            summarized = any(isinstance(m, Mapping) and m.get("role") == "compactionSummary" for m in head)
            made = snapshot._conversation
            if summarized or isinstance(made, base.Conversation):
                self._compactions = tuple(snapshot.conversation.compactions)
            else:
                self._compactions = ()
        return self._compactions

    def _composition(self, snapshot: Any, message_index: int) -> dict[str, int]:
        best = snapshot.best
        lineage = snapshot.lineage
        key = (lineage, id(best.segments)) if lineage is None else lineage
        cursor = self._cursor
        if cursor is None or cursor.key != key or (cursor.pos and message_index < _last_index(cursor, message_index)):
            cursor = self._cursor = _Cursor(key, best.segments)
        cursor.segments = best.segments  # (the same prefix, extended: `Snapshot.lineage`)
        return cursor.through(message_index)

    # -- the update ----------------------------------------------------------------------------

    def update(self, snapshot: Any, history: Any, *, threshold: tuple[str, int] | None = None,
               ttl_s: float | None = None) -> Timeline:
        """The timeline of `snapshot` whose cache history is `history` (a `CacheHistory` of the
        same snapshot: `CacheView.history`). `threshold`: `(label, tokens)` drawn as a line;
        `ttl_s`: the cache lifetime (seconds) for the idle markers. O(new requests + new
        messages) after an append; a rebuilt context (compaction, branch switch) costs one walk of
        it; a history that is no longer an extension of the kept rows (another branch) is
        rebuilt from its records."""
        records = history.records
        kept = len(self._rows)
        if kept and (len(records) <= kept or records[kept - 1].event is not self._events[kept - 1]):
            kept = _common(records, self._events)
            del self._rows[kept:], self._events[kept:]
        best = snapshot.best
        for row in best.rows:
            self._labels.setdefault(row.id, row.label)
        self._roles.update(best.table.roles)
        pos = self._context_positions(snapshot)
        compactions = self._compactions_of(snapshot)
        times = sorted(c.timestamp for c in compactions if c.timestamp is not None)
        last_compaction = times[-1] if times else None
        previous = self._rows[-1] if self._rows else None
        cumulative = previous.cumulative_usd if previous is not None else 0.0
        pending = sorted((c for c in compactions if c.timestamp is not None and
                          (previous is None or previous.time is None or c.timestamp > previous.time)),
                         key=lambda c: c.timestamp)
        live = None
        for i in range(kept, len(records)):
            record = records[i]
            event = record.event
            usage = event.usage
            t = event.time_s
            markers: list[Marker] = []
            prompt = usage.input + usage.cache_read + usage.cache_write
            while pending and t is not None and pending[0].timestamp <= t:
                c = pending.pop(0)
                markers.append(Marker("compaction", c.kind, tokens_before=c.tokens_before, tokens_after=prompt))
            if previous is not None and previous.model != event.model_key and previous.model and event.model_key:
                markers.append(Marker("model", f"{previous.model} → {event.model_key}"))
            if previous is not None and previous.time is not None and t is not None and ttl_s and t - previous.time > ttl_s:
                markers.append(Marker("idle", seconds=t - previous.time, ttl_s=ttl_s))
            if record.miss is not None:
                markers.append(Marker("miss", record.miss.cause, record.miss.detail))
            price = record.price
            cost = price.recorded_usd if price.recorded_usd is not None else price.catalog_usd
            cumulative += cost or 0.0
            total = prompt + usage.output
            mi = pos.get(event.entry_id) if event.entry_id is not None else None
            on_context = mi is not None and (last_compaction is None or t is None or t >= last_compaction)
            categories: tuple[int, ...] | None = None
            if on_context:
                assert mi is not None
                raw = self._composition(snapshot, mi)
                if sum(raw.values()) > 0:
                    categories = self._aligned(calibrate(raw, total))
            elif self._last_final is not None and self._last_final[0] is event:
                categories = self._last_final[1]  # counted while it was on the context
            row = TimelineRow(
                n=record.number, time=t, model=event.model_key, input=usage.input, cache_read=usage.cache_read,
                cache_write=usage.cache_write, output=usage.output, context_tokens=total, categories=categories,
                cost_usd=cost, cumulative_usd=cumulative, share=record.share,
                cache="miss" if record.cold else ("hit" if event.counted else "uncounted"),
                miss_cause=record.miss.cause if record.miss is not None else None, markers=tuple(markers),
                entry_id=event.entry_id, message_index=mi if on_context else None, kind=event.kind,
            )
            if i < len(records) - 1:
                self._rows.append(row)
                self._events.append(event)
                previous = row
                continue
            # the last request: the row is the context now (what `map --json` shows); its final
            # form (counted above) is kept for when the next request arrives
            self._last_final = (event, categories)
            now_totals, now_total = _now(snapshot)
            after = tuple(Marker("compaction", c.kind, tokens_before=c.tokens_before) for c in pending)
            live = replace(row, context_tokens=now_total, categories=self._aligned(now_totals),
                           markers=row.markers + after)
        rows = tuple(self._rows) + ((live,) if live is not None else ())
        return Timeline(
            agent=snapshot.agent, rows=rows, category_ids=tuple(self._ids), labels=dict(self._labels),
            roles=dict(self._roles), window=snapshot.context_window, threshold=threshold, ttl_s=ttl_s,
            version=snapshot.version,
        )


def _last_index(cursor: _Cursor, message_index: int) -> int:
    """The message index of the last segment the cursor took (-1 when none)."""
    for k in range(cursor.pos - 1, -1, -1):
        mi = cursor.segments[k].message_index
        if mi is not None:
            return mi
    return -1


def _now(snapshot: Any) -> tuple[dict[str, int], int]:
    """(category → tokens, context tokens) of the snapshot as the map shows it: the calibrated
    categories (`ds4core.categories.calibrated`) and the provider's count (else the calibrated
    total)."""
    best = snapshot.best
    provider = snapshot.provider
    cal = calibrated(best, provider.context_tokens if provider is not None else None)
    total = provider.context_tokens if provider is not None else cal.used
    return cal.totals, total


def _common(records: Sequence[Any], events: Sequence[Any]) -> int:
    """How many leading `records` have the same events (entry id and time) as `events`."""
    n = min(len(records), len(events))
    for i in range(n):
        a, b = records[i].event, events[i]
        if a is not b and (a.entry_id != b.entry_id or a.time_s != b.time_s):
            return i
    return n


def timeline_threshold(snapshot: Any, plan: Any = None) -> tuple[str, int] | None:
    """The line the timeline draws besides the window: the agent's own compaction point when its
    extras name one (an optional `threshold()` giving tokens: Claude Code's autocompact), else DS4's
    hard input limit of `plan` (a `PlanView`; DS4's estimator tokens), else None."""
    extras = snapshot.extras
    own = getattr(extras, "threshold", None) if extras is not None else None
    if callable(own):
        value = own()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return ("autocompact", int(value))
        if isinstance(value, tuple):
            return value
    budget = getattr(plan, "budget", None) if plan is not None else None
    limit = getattr(budget, "hard_input_limit", None)
    return ("DS4 hard limit", int(limit)) if isinstance(limit, (int, float)) and limit > 0 else None


def session_timeline(agent: Any, snapshot: Any, models: Any = None, *, now: float | None = None) -> Timeline:
    """The timeline of a snapshot read once (`ds4tui timeline`): the Cache tab's history
    (`derive.cache.session_cache_view`) at `now` (default: the session's last entry or request,
    `session_last_time`) through one `TimelineBuilder.update`."""
    from ds4sessions.derive.cache import session_cache_view, session_last_time

    at = now if now is not None else (session_last_time(snapshot)[0] or 0.0)
    view = session_cache_view(agent, snapshot, at, models)
    return TimelineBuilder().update(snapshot, view.history, threshold=timeline_threshold(snapshot),
                                    ttl_s=view.clock.lifetime_s)
