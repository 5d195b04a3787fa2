"""A live session: tailer → reader → context → token counts → one immutable `Snapshot`.

This is the hot path of design.md ("The path of one appended line") below the UI:

    Tailer.poll() → PiSessionReader.feed() → build_context() → TokenLedger (new messages only)
    → categories / provider anchor / turns → Snapshot

An append that only extends the branch (the common case while Pi works) takes the incremental
route instead: `extend_context()` → `attribute(..., previous=...)` → turns grown; each snapshot
keeps what the next append extends (`_Lineage`). Both routes give equal snapshots
(tests/sessions/test_live_incremental.py replays every sample line by line).

`LiveSession.refresh()` does one step and returns a new `Snapshot` when something changed (else
None). It is not thread-safe: the app drives it from one worker thread and hands the immutable
snapshot to the UI thread. The session file is only ever opened read-only.
"""

from __future__ import annotations

import datetime as dt
import itertools
import time
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from ds4core.categories import Attribution, Breakdown, Segment, compose_breakdown, counted_parts, message_parts
from ds4core.models import ModelInfo, ModelTable
from ds4core.spare import Spares
from ds4core.tokens import CharsV1Counter, Cl100kCounter, TokenLedger
from ds4core.usage import Anchor, find_anchor, is_valid_measurement, usage_of

from ds4sessions.agents import base
from ds4sessions.agents.base import PI
from ds4sessions.agents.pi.conversation import CAPABILITIES, conversation_of, request_of
from ds4sessions.agents.pi.context import SessionContext, build_context, extend_context
from ds4sessions.agents.pi.entries import Entry, StandIn
from ds4sessions.agents.pi.reader import EntryPrefix, PiSession, PiSessionReader
from ds4sessions.agents.pi.slim import CountingLedger, attribute_fast, c_parser, prompt_text
from ds4sessions.agents.pi.slim import _cprep as _c
from ds4sessions.ingest.snapshot import ProviderView, Snapshot, Turn
from ds4sessions.ingest.tailer import TailBatch, Tailer
from ds4sessions.runtime import BULK_LINES, bulk_gc

__all__ = ["BULK_LINES", "LiveSession", "ProviderView", "Snapshot", "Turn", "build_turns", "bulk_gc",
           "open_map_snapshot", "open_snapshot"]


def _model_of(ctx: SessionContext, models: ModelTable) -> tuple[str | None, Any]:
    """The context's model as `provider/modelId` and its entry in `models` (None, None without a
    model; the key and None for a model the table does not know)."""
    if not ctx.model:
        return None, None
    provider, model_id = ctx.model.get("provider"), ctx.model.get("modelId")
    return f"{provider}/{model_id}", models.get(provider, model_id)


def _branch_scan(ctx: SessionContext, reader: PiSessionReader) -> tuple[int | None, dict[str, int]]:
    """One walk of the branch's entry ids: the position of the last compaction on it (None
    without one) and, for each user prompt, its 1-based turn number on the branch."""
    ids, by_id = ctx.branch_entry_ids, reader.by_id
    chain, entries = ctx.chain, reader.entries
    if chain is not None and len(chain) == len(entries) == len(ids) and chain[-1] is entries[-1]:
        by_id = chain  # (nothing read since `build_context` found one chain: `by_id[ids[i]]` is `chain[i]`)
    if _c is not None and type(ids) is list and type(by_id) in (dict, list):
        scanned = _c.branch_scan(ids, by_id, Entry, StandIn)  # the same loop in C (tests/sessions/test_c_scans.py)
        if scanned is not None:
            return scanned  # type: ignore[no-any-return]
    numbers: dict[str, int] = {}
    last_compaction = None
    get = reader.by_id.get
    for index, eid in enumerate(ctx.branch_entry_ids):
        entry = get(eid)  # type: ignore[arg-type]
        if entry is None:
            continue
        kind = entry.type
        if kind == "message":  # `entry.role == "user"`, inlined
            if eid:
                raw = entry.raw
                message = raw if type(raw) is StandIn else entry.message
                if message is not None and message.get("role") == "user":
                    numbers[eid] = len(numbers) + 1
        elif kind == "compaction":
            last_compaction = index
    return last_compaction, numbers


def _first_fresh_index(ctx: SessionContext, last_compaction: int | None) -> int:
    """Index of the first context message recorded after the latest compaction on the branch
    (`last_compaction`: its position on the branch, from `_branch_scan`)."""
    if last_compaction is None:
        return 0  # (no position index of the whole branch to build)
    position = {eid: i for i, eid in enumerate(ctx.branch_entry_ids)}
    for i, eid in enumerate(ctx.message_entry_ids):
        if eid is not None and position.get(eid, -1) > last_compaction:
            return i
    return len(ctx.messages)


def _turn_numbers(ctx: SessionContext, reader: PiSessionReader) -> dict[str, int]:
    """Entry id of each user prompt on the branch → its 1-based turn number on the branch."""
    return _branch_scan(ctx, reader)[1]


def _preview(content: Any, limit: int = 80) -> str:
    text = prompt_text(content)
    preview = " ".join(text.split())[:limit]
    return text if preview == text else preview  # the same object when nothing changed (memory)


def _tool_calls(messages: Sequence[Mapping[str, Any]], start: int, end: int) -> int:
    """Tool calls made by the assistant messages in `messages[start:end]`."""
    calls = 0
    for m in messages[start:end]:  # (a loop, not a generator: once per turn, issue 14)
        if m.get("role") == "assistant":
            for b in m.get("content") or ():
                if (type(b) is dict or isinstance(b, Mapping)) and b.get("type") == "toolCall":
                    calls += 1
    return calls


def _ids(entry_ids: Sequence[str | None], start: int, end: int) -> tuple[str, ...]:
    """The entry ids of `entry_ids[start:end]` that are not None, as a tuple (the slice itself
    when none is None: one C call instead of a generator, once per turn)."""
    ids = entry_ids[start:end]
    return tuple(ids) if None not in ids else tuple(e for e in ids if e is not None)  # type: ignore[misc]


def build_turns(
    messages: Sequence[Mapping[str, Any]],
    entry_ids: Sequence[str | None],
    tokens: Sequence[int],
    turn_numbers: Mapping[str, int] | None = None,
) -> tuple[Turn, ...]:
    """Group context messages into turns (see `Turn`).

    `turn_numbers` maps a prompt's entry id to its turn number on the whole branch (so a turn
    keeps its number after a compaction dropped earlier turns); without it turns count from 1.
    The loop runs in C (`_cprep.turns`) for lists of plain messages: the same turns
    (tests/sessions/test_c_turns.py), or the whole build is handed back to `_extend_turns`.
    """
    numbers = turn_numbers or {}
    if (
        _c is not None and type(messages) is list and type(entry_ids) is list and type(tokens) is list
        and type(numbers) is dict
    ):
        made = _c.turns(messages, entry_ids, tokens, numbers, Turn, _zone, _preview, StandIn)
        if made is not None:
            return made  # type: ignore[no-any-return]
    return _extend_turns((), messages, entry_ids, tokens, numbers, 0)


def _extend_turns(
    previous: tuple[Turn, ...],
    messages: Sequence[Mapping[str, Any]],
    entry_ids: Sequence[str | None],
    tokens: Sequence[int],
    turn_numbers: Mapping[str, int],
    number: int,
) -> tuple[Turn, ...]:
    """`build_turns` of `messages`, given `previous` = the turns of its first n messages (n = the
    last turn's `last_message` + 1; 0 without turns) and `number` = the user messages among them.

    The last previous turn is grown by the messages after n until the next prompt; the others
    are kept. `turn_numbers` needs only the prompts after n. O(new messages + the grown turn's
    entry ids).
    """
    n = previous[-1].last_message + 1 if previous else 0
    turns: list[Turn] = []  # the turns after the kept ones (all of `previous` but its last)
    grown = previous[-1] if previous else None
    start = grown.first_message if grown is not None else 0

    def close(end: int) -> None:
        if grown is not None:
            turns.append(
                Turn(
                    index=grown.index,
                    time=grown.time,
                    prompt=grown.prompt,
                    tool_calls=grown.tool_calls + _tool_calls(messages, n, end),
                    tokens=grown.tokens + sum(tokens[n:end]),
                    first_message=grown.first_message,
                    last_message=end - 1,
                    entry_ids=grown.entry_ids + _ids(entry_ids, n, end),
                )
            )
            return
        if end <= start:
            return
        first = messages[start]
        is_prompt = first.get("role") == "user"
        when = None
        ts = first.get("timestamp")
        if isinstance(ts, (int, float)) and not isinstance(ts, bool):
            when = _local_time(ts)
        eid = entry_ids[start] if start < len(entry_ids) else None
        turns.append(
            Turn(  # index, time, prompt, tool_calls, tokens, first_message, last_message, entry_ids
                turn_numbers.get(eid or "", number) if is_prompt else 0,
                when,
                _preview(first.get("content")) if is_prompt else "(before the first prompt)",
                _tool_calls(messages, start, end),
                sum(tokens[start:end]),
                start,
                end - 1,
                _ids(entry_ids, start, end),
            )
        )

    for i in range(n, len(messages)):
        is_user = messages[i].get("role") == "user"
        if is_user and i > start:
            close(i)
            grown = None
            start = i
        if is_user:
            number += 1
    close(len(messages))
    if len(previous) > 1:
        return tuple(itertools.chain(itertools.islice(previous, len(previous) - 1), turns))  # one copy
    return tuple(turns)


_ZONES: dict[tuple[int, str], dt.timezone] = {}
"""The local time zones of turn times, by (UTC offset in seconds, name): `astimezone()` makes a
new one for every call (~150 bytes per turn at 50,000 turns); here equal ones are one object."""
_UTC = dt.timezone.utc
_UNIX_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)
_SECOND = dt.timedelta(seconds=1)


def _local_time(ms: float) -> dt.datetime | None:
    """`datetime.fromtimestamp(ms / 1000, tz=utc).astimezone()`, equal, with its zone shared
    (`_ZONES`). The zone follows CPython's `astimezone()` rule (`local_timezone_from_timestamp`
    in _datetimemodule.c): `timezone(timedelta(seconds=tm_gmtoff), tm_zone)` of `time.localtime`
    at the instant's whole UTC seconds (floored), so only the zone object is not new. None (an
    unknown time) for a time `datetime` cannot hold: before year 1 or after 9999 (a written
    message time, so bad input, not an error). In C (`_cprep.local_time`: ~0.1 µs instead of
    ~2.5 µs, once per turn) when the extension is built; `_local_time_py` otherwise."""
    if _c is not None:
        return _c.local_time(ms, _zone)  # type: ignore[no-any-return]
    return _local_time_py(ms)


def _local_time_py(ms: float) -> dt.datetime | None:
    """`_local_time` in Python."""
    try:
        when = dt.datetime.fromtimestamp(ms / 1000, tz=_UTC)
        local = time.localtime((when - _UNIX_EPOCH) // _SECOND)
        return when.astimezone(_zone(local.tm_gmtoff, local.tm_zone))  # (raises too at the range's edge, east of UTC)
    except (ValueError, OverflowError, OSError):
        return None


def _zone(gmtoff: int, name: str) -> dt.timezone:
    """The shared zone of UTC offset `gmtoff` (seconds) and `name` (`_ZONES`)."""
    key = (gmtoff, name)
    zone = _ZONES.get(key)
    if zone is None:
        zone = _ZONES[key] = dt.timezone(dt.timedelta(seconds=gmtoff), name)
    return zone


def _retokened(
    previous: tuple[Turn, ...], structure: tuple[Turn, ...], tokens: Sequence[int]
) -> tuple[Turn, ...] | None:
    """The turns `structure` with `tokens` per message (another counter), keeping `previous` (the
    same counter's turns of a prefix of the same context) but its last turn; None when
    `structure` does not continue `previous`. Turns other than their tokens do not depend on
    the counter. O(turns after the prefix + the messages in them)."""
    keep = len(previous) - 1 if previous else 0
    if previous and (len(structure) <= keep or structure[keep].first_message != previous[-1].first_message):
        return None
    return tuple(itertools.chain(itertools.islice(previous, keep), (  # one copy of the kept turns
        Turn(t.index, t.time, t.prompt, t.tool_calls, sum(tokens[t.first_message : t.last_message + 1]),
             t.first_message, t.last_message, t.entry_ids)
        for t in structure[keep:]
    )))


@dataclass(frozen=True)
class _Facts:
    """Counter-independent facts of one context (message indices) that an append extends."""

    first_fresh: int  # `_first_fresh_index`: unchanged by an append that extends the branch
    has_system: bool  # a `system` message is in context (then no system prompt is inferred)
    measurement: int | None  # the first valid measurement (it infers the system prompt)
    anchor: Anchor | None  # `find_anchor(messages, first_fresh)`
    prompts: int  # user entries on the branch (`_turn_numbers`)
    user_messages: int  # user messages in context


@dataclass(frozen=True)
class _Counted:
    """One counter's share of a context: the attribution, the tokens before the measurement
    and before the anchor (`(message index, tokens)`), the turns, and (the refined share
    `LiveSession` keeps) the breakdown made of it, whose segments the next append extends."""

    attribution: Attribution
    measurement: tuple[int, int] | None
    anchor: tuple[int, int] | None
    turns: tuple[Turn, ...]
    breakdown: Breakdown | None = None


@dataclass(frozen=True)
class _Requests:
    """The assistant replies read before a snapshot (a prefix of `LiveSession`'s append-only
    list) and the model table, from which `Snapshot.conversation` is made."""

    replies: EntryPrefix
    models: ModelTable

    def conversation(self, snapshot: Snapshot) -> base.Conversation:
        """The neutral conversation of `snapshot` (a Pi snapshot made with these replies):
        O(messages + requests); every request is one assistant reply of the file, counted once."""
        ctx = snapshot.context
        position = {eid: i for i, eid in enumerate(ctx.message_entry_ids) if eid is not None}
        requests = tuple(request_of(e, i, position.get(e.id or "")) for i, e in enumerate(self.replies))
        return conversation_of(snapshot.path, snapshot.session, ctx, requests, self.models)


@dataclass(frozen=True)
class _Lineage:
    """What a snapshot keeps so the next append extends it: its context (checked by identity),
    the full rebuild it descends from (`epoch`, unique in the process: the contexts of one epoch
    extend each other), which reader it was built from (`reader_id`, one number per reader of a
    `LiveSession`), its facts and its chars-v1 share."""

    context: SessionContext
    epoch: int
    reader_id: int
    facts: _Facts
    fast: _Counted


_EPOCHS = itertools.count(1)  # one number per full rebuild, process-wide


def _full_facts(ctx: SessionContext, reader: PiSessionReader) -> tuple[_Facts, dict[str, int]]:
    """The facts of a context built in full, and the turn number of every prompt on the branch."""
    messages = ctx.messages
    last_compaction, numbers = _branch_scan(ctx, reader)
    first_fresh = _first_fresh_index(ctx, last_compaction)
    roles = _c.role_counts(messages, StandIn) if _c is not None and type(messages) is list else None
    if roles is None:
        roles = any(m.get("role") == "system" for m in messages), sum(1 for m in messages if m.get("role") == "user")
    facts = _Facts(
        first_fresh=first_fresh,
        has_system=roles[0],
        # The first valid measurement at or after the first fresh message: a reply from before
        # the last compaction measured a context that is gone (issue 17: it inferred a 188k
        # system prompt); the provider anchor skips such replies the same way.
        measurement=next((i for i in range(first_fresh, len(messages)) if is_valid_measurement(messages[i])), None),
        anchor=find_anchor(messages, first_fresh),
        prompts=len(numbers),
        user_messages=roles[1],
    )
    return facts, numbers


def _extended_facts(
    previous: _Facts, n: int, ctx: SessionContext, new_entries: Sequence[Entry]
) -> tuple[_Facts, dict[str, int]]:
    """The facts after an append that extends the branch (`extend_context` succeeded): `n` is
    the previous message count. Returns them and the turn numbers of the new prompts."""
    messages = ctx.messages
    new = range(n, len(messages))
    measurement = previous.measurement
    if measurement is None:
        measurement = next((i for i in new if is_valid_measurement(messages[i])), None)
    anchor = previous.anchor
    for i in reversed(new):  # every new message is at or after the first fresh one
        if is_valid_measurement(messages[i]):
            anchor = Anchor(i, usage_of(messages[i]))
            break
    numbers: dict[str, int] = {}
    for entry in new_entries:
        if entry.role == "user" and entry.id is not None:
            numbers[entry.id] = previous.prompts + len(numbers) + 1
    facts = _Facts(
        first_fresh=previous.first_fresh,
        has_system=previous.has_system or any(messages[i].get("role") == "system" for i in new),
        measurement=measurement,
        anchor=anchor,
        prompts=previous.prompts + len(numbers),
        user_messages=previous.user_messages + sum(1 for i in new if messages[i].get("role") == "user"),
    )
    return facts, numbers


def _prefix(
    previous: tuple[int, int] | None, index: int | None, tokens: Sequence[int], start: int, before: int
) -> tuple[int, int] | None:
    """`(index, sum(tokens[:index]))`, from `previous` when it is for the same index, or from
    `before` = `sum(tokens[:start])` when `index >= start`."""
    if index is None:
        return None
    if previous is not None and previous[0] == index:
        return previous
    if index >= start:
        return index, before + sum(tokens[start:index])
    return index, sum(tokens[:index])


def _count(
    ctx: SessionContext, facts: _Facts, ledger: TokenLedger, previous: _Counted | None,
    copy: Callable[[Sequence[Any]], list[Any]] = list,
) -> _Counted:
    """Count `ctx` with `ledger`, extending `previous` (the same counter's share of a prefix of
    the context) when given (its lists copied by `copy`); turns are left empty (the caller adds
    them)."""
    attribution = attribute_fast(
        ctx.messages, ctx.message_entry_ids, ledger, previous.attribution if previous is not None else None, copy
    )
    start = len(previous.attribution.message_tokens) if previous is not None else 0
    before = previous.attribution.total if previous is not None else 0
    tokens = attribution.message_tokens
    return _Counted(
        attribution=attribution,
        measurement=_prefix(previous.measurement if previous else None, facts.measurement, tokens, start, before),
        anchor=_prefix(
            previous.anchor if previous else None,
            facts.anchor.message_index if facts.anchor is not None else None,
            tokens, start, before,
        ),
        turns=(),
    )


def _views(
    ctx: SessionContext, facts: _Facts, counted: _Counted, model: ModelInfo | None,
    base: list[Segment] | None = None,
) -> tuple[Breakdown, ProviderView | None, bool]:
    """The breakdown, the provider view and whether the system prompt was inferred (O(1) but for
    list copies): the system prompt + tools are inferred from the first valid measurement when
    no `system` message is in context; the provider's count is the anchor's total plus our
    estimate of the later messages. `base`: see `compose_breakdown`."""
    messages = ctx.messages
    tokens = counted.attribution.message_tokens
    inferred = None
    if not facts.has_system and counted.measurement is not None:
        index, before = counted.measurement
        inferred = max(usage_of(messages[index]).prompt_tokens - before, 0) or None
    fixed = inferred or 0
    anchor = facts.anchor
    view = None
    provider_tokens = None
    if anchor is not None and counted.anchor is not None:
        index, before_anchor = counted.anchor
        before = fixed + before_anchor
        later = counted.attribution.total - before_anchor - tokens[index]
        provider_tokens = anchor.usage.total + later
        view = ProviderView(
            anchor_index=index,
            anchor_entry_id=ctx.message_entry_ids[index],
            prompt_tokens=anchor.usage.prompt_tokens,
            context_tokens=provider_tokens,
            estimate_at_anchor=before,
            ratio=(anchor.usage.prompt_tokens / before) if before else None,
            later_messages=len(messages) - index - 1,
            cache_read=anchor.usage.cache_read,
            cache_write=anchor.usage.cache_write,
        )
    result = compose_breakdown(
        counted.attribution,
        context_window=model.context_window if model else None,
        provider_tokens=provider_tokens,
        inferred_fixed_tokens=inferred,
        base=base,
    )
    return result, view, inferred is not None


class LiveSession:
    """Owns the tailer, reader and token ledgers of one session file.

    `refresh()` polls the file and returns a new `Snapshot` when it changed (None otherwise);
    `refine(snapshot)` adds the exact cl100k breakdown (slower: run it off the UI thread).

    An append that only extends the branch (`extend_context`) is applied incrementally: the
    context, breakdowns, provider view and turns of the previous snapshot are extended by the
    new messages (O(new messages) plus list copies); anything else (a reset, a compaction,
    a branch switch, a context edit, `force`) rebuilds in full. Both give equal snapshots.
    """

    def __init__(self, path: Path, models: ModelTable | None = None) -> None:
        """Watch `path` (it need not exist yet). `models` defaults to the bundled table."""
        self.path = Path(path)
        self.models = models or ModelTable.bundled()
        self._tailer = Tailer(self.path)
        self._reader = PiSessionReader(self.path, c_parser())
        self._replies: list[Entry] = []  # assistant message entries of `_reader`, append-only
        self._generation = 0  # one number per reader (a reset starts a new one)
        # lines checked and parsed, messages counted in C when the extension is built (`slim`)
        # (no identity memo: a message is counted once, again only at a full rebuild; issue 32)
        self._fast: TokenLedger = CountingLedger(CharsV1Counter(), memo=False)
        self._exact: TokenLedger = CountingLedger(Cl100kCounter(), memo=False)
        self._version = 0
        self._exact_share: tuple[int, _Counted] | None = None  # (epoch, cl100k share) of the last refine
        self._spares = Spares()  # copies for the next append, made by `prepare` (off the latency path)
        self._deleted = False
        self.last: Snapshot | None = None

    @property
    def reader(self) -> PiSessionReader:
        """The live reader (its entries, labels, diagnostics): only for the thread that calls
        `refresh`; everything else reads a snapshot's frozen `session`."""
        return self._reader

    def refresh(self, force: bool = False, limit: int | None = None) -> Snapshot | None:
        """Poll the file; on new lines or a reset, update and return a snapshot (else None).

        `force` reads the whole file again from byte 0 with a new reader and rebuilds in full,
        even when nothing seems changed (the user's "re-read": a rewrite in place that kept the
        file's size and times is invisible to the tail; also after the model table changed).
        `limit` (> 0): read about that many new bytes at most (`Tailer.poll`); the snapshot then
        says how many are left (`Snapshot.unread_bytes`) and the next refresh reads on. The
        final snapshot equals the one a single refresh makes. None: to the end of the file, in
        slices (`Tailer.polls`: `SLICE_BYTES` and `tailer.POLL_LINES` lines a poll, so the lines
        in memory at once stay bounded), and one snapshot at the end.
        """
        if force and self.last is not None:
            self._tailer = Tailer(self.path)
            self._start_over()
        polls = self._tailer.polls() if limit is None else iter((self._tailer.poll(limit),))
        batch = next(polls)
        with bulk_gc(len(batch.lines) >= BULK_LINES or batch.unread > 0):
            return self._refresh(itertools.chain((batch,), polls), force)

    def _refresh(self, batches: Iterable[TailBatch], force: bool) -> Snapshot | None:
        """Read `batches` (one poll's, or the slices of a read to the end) into the reader and
        build the snapshot when anything changed (or `force`). A reset in any batch starts
        over from it (a rewrite between two slices: the file from its start, in full)."""
        reset = False
        changed = self.last is None
        new_entries: list[Entry] = []
        for batch in batches:
            if batch.reset is not None:
                reset = changed = True
                self._deleted = batch.reset == "deleted"
                if not self._deleted:
                    self._start_over()
                    new_entries = []
            if batch.lines:
                new_entries += self._reader.feed(batch.lines)
                changed = True
        self._note_replies(new_entries)
        self._reader.set_pending_tail(batch.pending_bytes)
        if not changed and not force:
            last = self.last
            if last is not None and (last.pending_bytes != batch.pending_bytes or last.unread_bytes != batch.unread):
                # (a slice that ended inside one long line: no new line, fewer bytes left)
                sized = {"file_size": batch.size} if last.unread_bytes != batch.unread else {}
                self.last = _replace(last, pending_bytes=batch.pending_bytes, unread_bytes=batch.unread,
                                     session=self._reader.freeze(), **sized)
                return self.last
            return None
        self.last = self._build(batch.pending_bytes, batch.size, None if reset or force else new_entries, batch.unread)
        return self.last

    def _start_over(self) -> None:
        """A new reader (the file is read again from its start): nothing read before is kept."""
        self._reader = PiSessionReader(self.path, c_parser())
        self._replies = []  # a new list: older snapshots keep theirs
        self._generation += 1
        self._fast.forget_identities()
        self._exact.forget_identities()
        self._spares.clear()

    def _note_replies(self, entries: Sequence[Entry]) -> None:
        """Keep the assistant replies among `entries` (`e.role == "assistant"`, read without
        its two property calls per entry)."""
        replies = self._replies
        for e in entries:
            if e.type == "message":
                raw = e.raw
                message = raw if type(raw) is StandIn else raw.get("message")
                if isinstance(message, dict) and message.get("role") == "assistant":
                    replies.append(e)

    def _build(self, pending: int, size: int, new_entries: Sequence[Entry] | None, unread: int = 0) -> Snapshot:
        """The snapshot of the reader's state; `new_entries` (the entries read since `self.last`)
        lets it extend `self.last` when they only extend the branch; None rebuilds in full."""
        reader = self._reader
        last = self.last._lineage if self.last is not None else None
        previous = last if last is not None and last.reader_id == self._generation else None
        ctx = None
        copy = self._spares.copy
        base = None
        if previous is not None and new_entries is not None:
            ctx = extend_context(previous.context, reader, new_entries, copy)
        if ctx is not None and previous is not None and new_entries is not None:
            facts, numbers = _extended_facts(previous.facts, len(previous.context.messages), ctx, new_entries)
            fast = _count(ctx, facts, self._fast, previous.fast, copy)
            base = self._base(self.last.breakdown if self.last is not None else None)
            turns = _extend_turns(
                previous.fast.turns, ctx.messages, ctx.message_entry_ids, fast.attribution.message_tokens,
                numbers, previous.facts.user_messages,
            )
            epoch = previous.epoch
        else:
            ctx = build_context(reader)
            facts, numbers = _full_facts(ctx, reader)
            fast = _count(ctx, facts, self._fast, None)
            turns = build_turns(ctx.messages, ctx.message_entry_ids, fast.attribution.message_tokens, numbers)
            epoch = next(_EPOCHS)
        fast = replace(fast, turns=turns)
        model_key, model = _model_of(ctx, self.models)
        breakdown, provider_view, inferred = _views(ctx, facts, fast, model, base)
        self._version += 1
        return Snapshot(
            version=self._version, path=self.path, session=reader.freeze(), context=ctx, model=model,
            model_key=model_key, breakdown=breakdown, exact=None, provider=provider_view, turns=turns,
            system_inferred=inferred, deleted=self._deleted, pending_bytes=pending, file_size=size,
            unread_bytes=unread, agent=PI, capabilities=CAPABILITIES,
            _lineage=_Lineage(ctx, epoch, self._generation, facts, fast),
            _conversation=_Requests(EntryPrefix(self._replies, len(self._replies)), self.models),
        )

    def finish(self) -> Snapshot | None:
        """Final read of an idle file: the held partial last line is read as complete (a whole
        JSON object without its newline becomes an entry, as Pi reads it; a fragment is counted
        as a partial last line). Returns the updated snapshot, or None when nothing was held."""
        tail = self._tailer.pending_line()
        if tail is None:
            return None
        self._reader.set_pending_tail(0)
        entry = self._reader.feed_final_tail(*tail)
        self._note_replies([entry] if entry is not None else [])
        self.last = self._build(0, self.last.file_size if self.last else 0, [entry] if entry is not None else [])
        return self.last

    QUICK_REFINE_TOKENS = 20_000
    """The most chars-v1 tokens of new messages `refines_quickly` accepts (cl100k counts of about
    80 kB of text: a few milliseconds)."""

    def refines_quickly(self, snapshot: Snapshot) -> bool:
        """True when `refine(snapshot)` only extends the last refined cl100k share by a few new
        messages (at most `QUICK_REFINE_TOKENS` chars-v1 tokens): an append while the exact
        counts are in. Then the app shows only the refined snapshot, so the screen's estimator
        never flips back to chars-v1 for one append (issue 10)."""
        lineage = snapshot._lineage
        cached = self._exact_share
        if lineage is None or lineage.context is not snapshot.context or cached is None or cached[0] != lineage.epoch:
            return False
        done = len(cached[1].attribution.message_tokens)
        if done > len(snapshot.context.messages):
            return False
        fresh = snapshot.breakdown.message_tokens[done:]
        return sum(fresh) <= self.QUICK_REFINE_TOKENS

    def refine(self, snapshot: Snapshot) -> Snapshot:
        """Return `snapshot` with the exact cl100k breakdown added (turn tokens stay chars-v1's
        until then; afterwards they use cl100k).

        The cl100k share of the last refined snapshot is extended when `snapshot` descends from
        it by appends (only the new messages are counted); otherwise it is counted in full.
        """
        ctx = snapshot.context
        lineage = snapshot._lineage
        base = None
        if lineage is None or lineage.context is not ctx:
            facts, numbers = _full_facts(ctx, snapshot.reader)
            exact = _count(ctx, facts, self._exact, None)
            turns: tuple[Turn, ...] | None = build_turns(
                ctx.messages, ctx.message_entry_ids, exact.attribution.message_tokens, numbers
            )
        else:
            facts = lineage.facts
            cached = self._exact_share
            previous = None
            if cached is not None and cached[0] == lineage.epoch and len(cached[1].attribution.message_tokens) <= len(ctx.messages):
                previous = cached[1]
                base = self._base(previous.breakdown)
            exact = _count(ctx, facts, self._exact, previous, self._spares.copy)
            tokens = exact.attribution.message_tokens
            turns = _retokened(previous.turns if previous is not None else (), lineage.fast.turns, tokens)
            if turns is None:
                turns = build_turns(ctx.messages, ctx.message_entry_ids, tokens, _turn_numbers(ctx, snapshot.reader))
        result, provider_view, _ = _views(ctx, facts, exact, snapshot.model, base)
        if lineage is not None and lineage.context is ctx:
            self._exact_share = (lineage.epoch, replace(exact, turns=turns, breakdown=result))
        return _replace(snapshot, exact=result, provider=provider_view, turns=turns)

    def _base(self, previous: Breakdown | None) -> list[Segment] | None:
        """A copy of `previous`'s segments without their `unattributed` (`compose_breakdown`'s
        `base`), from the prepared copies when there is one."""
        if previous is None:
            return None
        segments = self._spares.copy(previous.segments)
        if segments and segments[-1].category == "unattributed":
            segments.pop()
        return segments

    def prepare(self) -> None:
        """Copy now what the next append extends: the newest snapshot's context lists, both
        counters' per-message tokens and segments (O(messages), ~2-4 ms at 40,000 messages).
        Call it while nothing waits (the app: after the screen painted the snapshot); the next
        append then costs O(new messages) before its snapshot exists. Optional: without it
        the append copies them itself."""
        last = self.last
        if last is None or last._lineage is None:
            return
        lineage = last._lineage
        ctx = lineage.context
        lists: list[Sequence[Any] | None] = [
            ctx.messages, ctx.message_entry_ids, ctx.branch_entry_ids, ctx.context_entry_ids,
            lineage.fast.attribution.segments, lineage.fast.attribution.message_tokens, last.breakdown.segments,
        ]
        share = self._exact_share
        if share is not None and share[0] == lineage.epoch and share[1].breakdown is not None:
            lists += [share[1].attribution.segments, share[1].attribution.message_tokens, share[1].breakdown.segments]
        self._spares.prepare(lists)


def _replace(snapshot: Snapshot, **changes: Any) -> Snapshot:
    return replace(snapshot, **changes)


def open_snapshot(path: Path, models: ModelTable | None = None, exact: bool = False) -> Snapshot:
    """Read a whole session file once (a final read: see `LiveSession.finish`) and return its
    snapshot (CLI use; no watching)."""
    with bulk_gc():
        live = LiveSession(path, models)
        snap = live.refresh(force=True)
        assert snap is not None
        snap = live.finish() or snap
        return live.refine(snap) if exact else snap



def open_map_snapshot(path: Path, models: ModelTable | None = None, exact: bool = False) -> Snapshot:
    """`open_snapshot(path, models, exact)` for a one-shot reader of the map's numbers
    (`ds4tui map --json`, issue 14): the same `best` breakdown, provider view, turns,
    `system_inferred`, context warnings and diagnostics, at a fraction of the memory and time;
    but without entries or messages, and with `exact` its `breakdown` is the cl100k one too
    (`exact`): chars-v1 is counted only for the messages `system_inferred` needs.

    The file is streamed (`iter_lines`: one read chunk at a time, never all its lines at once)
    into a `SlimReader`, which counts each message as it is read (cl100k when `exact`, else
    chars-v1) and keeps a stand-in (`ds4sessions.agents.pi.slim`); an unterminated last line is
    read as at a final read (`LiveSession.finish`). Then the context, facts, attribution, turns
    and views are built by the same functions as `LiveSession._build` / `refine`. With `exact`,
    `system_inferred` needs the chars-v1 tokens of the context messages before the first
    measurement (`_views`): those few messages are read again from the file
    (`SlimReader.full_message`); if one cannot be (the file changed meanwhile), the whole
    snapshot is made by `open_snapshot`. `snapshot.context.messages` and `snapshot.session`
    hold stand-ins: not for the TUI, the planner, or anything that reads message content.
    The snapshot returned keeps the numbers only (`_numbers_only`: no entries, no messages), so
    the read's memory is free again when the caller formats them.
    Raises OSError (missing file, FIFO/device: `NotRegularFile`) as `read_session` does.
    """
    from ds4sessions.agents.pi.slim import SlimReader, StaleSession, StandInLedger, read_whole_file

    with bulk_gc():
        live = LiveSession(path, models)
        live._exact = StandInLedger(Cl100kCounter(digest_above=256), message_parts)
        if not exact:
            live._fast = StandInLedger(CharsV1Counter(), message_parts)
        reader = SlimReader(live.path, live._exact if exact else live._fast)
        size = read_whole_file(reader, live.path)
        live._reader = reader  # (its replies are not noted: the snapshot keeps no conversation)
        try:
            return _numbers_only(_map_snapshot(live, reader, size, exact))
        except StaleSession:
            pass
        finally:
            reader._ledger.reader = None  # no reader ↔ ledger cycle: all of it is freed on return
    return open_snapshot(path, models, exact=exact)  # the file changed under the read


def _map_snapshot(live: LiveSession, reader: Any, size: int, exact: bool) -> Snapshot:
    """The snapshot of `open_map_snapshot` from its filled reader; raises `StaleSession` when a
    message read again does not match (the file changed)."""
    from ds4sessions.agents.pi.slim import StaleSession, StandIn

    if not exact:
        return live._build(0, size, None)
    ctx = build_context(reader)
    facts, numbers = _full_facts(ctx, reader)
    messages = ctx.messages
    inferred = False
    if not facts.has_system and facts.measurement is not None:  # `_views` with chars-v1
        before = 0
        for index in range(facts.measurement):
            message = messages[index]
            if type(message) is StandIn:
                full = reader.full_message(message, ctx.message_entry_ids[index])
                if full is None:
                    raise StaleSession(f"{reader.path}: a message changed while the file was read")
                message = full
            before += counted_parts(live._fast, message).total
        inferred = max(usage_of(messages[facts.measurement]).prompt_tokens - before, 0) > 0
    counted = _count(ctx, facts, live._exact, None)
    turns = build_turns(messages, ctx.message_entry_ids, counted.attribution.message_tokens, numbers)
    model_key, model = _model_of(ctx, live.models)
    result, provider_view, _ = _views(ctx, facts, counted, model)
    return Snapshot(
        version=1, path=live.path, session=reader.freeze(), context=ctx, model=model,
        model_key=model_key, breakdown=result, exact=result, provider=provider_view, turns=turns,
        system_inferred=inferred, file_size=size, agent=PI, capabilities=CAPABILITIES,
    )


def _numbers_only(snap: Snapshot) -> Snapshot:
    """`snap` without what only the read needed, so that it is freed before the caller builds
    its output (most of a large session's memory): the session keeps its header, status, labels,
    name, leaf and diagnostics but no entries; the context its leaf, model, labels and warnings
    but no messages or entry-id lists; no lineage for a later append."""
    session = snap.session
    light = PiSession(session.path)
    light.header, light.status, light.version = session.header, session.status, session.version
    light.labels, light.session_name, light.leaf_id = session.labels, session.session_name, session.leaf_id
    light.diagnostics, light.end_offset, light.last_line_no = session.diagnostics, session.end_offset, session.last_line_no
    light.identity = session.identity
    context = replace(snap.context, messages=[], message_entry_ids=[], branch_entry_ids=[], context_entry_ids=[], chain=None)
    return replace(snap, session=light, context=context, _lineage=None, _conversation=None)
