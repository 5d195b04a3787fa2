"""The generic live session: any agent's `SessionReader` → frozen `Snapshot`s (issue 28).

    Tailer.poll() → agent.reader(path).feed(lines) → reader.conversation() (a frozen
    `base.Conversation`) → agent.account(conversation, memo) (the agent's categories, the
    provider's count, its own facts) → turns → Snapshot

Pi has a live session of its own (`ds4sessions.agents.pi.live.LiveSession`: exact to Pi's context,
incremental per append, two estimators); every other agent goes through `ConversationLive`, so a
new agent is a reader, an accountant and one registry line (`ds4sessions.agents.registry`).

What the snapshot of a conversation holds:

- `session`: a `ConversationSession` (the file's facts: title, ids, diagnostics, entries by id
  for the inspector), `context`: a `ConversationContext` (the messages the model saw, Pi-shaped,
  with their entry ids), both read-only views of the conversation;
- `breakdown` = `exact`: the agent's accounting (one estimator, chosen by the agent);
- `turns`: a prompt (`is_prompt`) and everything until the next one.

Like `LiveSession`, `refresh()` does one step and returns a new snapshot when something changed
(else None); it is not thread-safe (one worker drives it). Session files are only ever opened
read-only.
"""

from __future__ import annotations

import datetime as dt
import itertools
import operator
import time
from collections import Counter, abc
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ds4core.categories import Breakdown
from ds4core.models import DEFAULT_MAX_TOKENS, ModelInfo, ModelTable
from ds4core.spare import Spares

from ds4sessions.agents import base
from ds4sessions.agents.registry import tailer_for
from ds4sessions.ingest.snapshot import ProviderView, Snapshot, Turn
from ds4sessions.ingest.tailer import TailBatch
from ds4sessions.runtime import bulk_gc

__all__ = [
    "Accounting",
    "ConversationContext",
    "ConversationDiagnostics",
    "ConversationLive",
    "ConversationSession",
    "EntryLookup",
    "EntryView",
    "TurnIndex",
    "conversation_turns",
    "is_prompt",
    "model_info",
]


@dataclass(frozen=True)
class Accounting:
    """What an agent's accountant says about one `Conversation` (`Agent.account`).

    - `breakdown`: the context by the agent's own categories (`ds4core.categories.Breakdown`
      with the agent's `CategoryTable`), one raw estimate per message (`message_tokens`, same
      length as the conversation's messages) and the map's segments;
    - `provider`: the provider's count of the context (None before the first reply);
    - `model`: the model's facts the screen needs (context window; `model_info` makes one),
      None when unknown; `model_key`: `provider/model` as recorded;
    - `system_inferred`: the system prompt and tools are inferred (not in the file);
    - `extras`: the agent's own facts (`ingest.snapshot.AgentExtras`), or None;
    - `tokens_kept`: how many leading `message_tokens` are those of the previous accounting of
      the same live session (the accountant extended its list), None when not known: the turn
      index then compares them (O(messages)).
    """

    breakdown: Breakdown
    provider: ProviderView | None
    model: ModelInfo | None
    model_key: str | None
    system_inferred: bool = False
    extras: Any = None
    tokens_kept: int | None = None


def model_info(provider: str | None, model: str | None, window: int | None, *, models: ModelTable | None = None,
               source: str = "agent") -> ModelInfo | None:
    """A `ModelInfo` for an agent's model: the model table's entry when it has one (prices,
    prompt-cache lifetimes), with the agent's own `window` (tokens) when given, else None
    without a window."""
    known = models.get(provider or "", model or "") if models is not None and model else None
    if known is not None:
        if window and window != known.context_window:
            return ModelInfo(known.provider, known.id, known.name, window, known.max_tokens, known.pricing,
                             known.prompt_cache, known.reasoning, known.inputs, source)
        return known
    if not window:
        return None
    return ModelInfo(provider or "?", model or "?", model or "?", window, DEFAULT_MAX_TOKENS, None, {}, source=source)


# --- the session's facts --------------------------------------------------------------------


class ConversationDiagnostics:
    """The reader's diagnostics as the screen reads them (`Diagnostics`' interface): `items`
    (each with a `str()`), `total`, `counts` (kind → count) and `summary()` (one line per kind).
    Items may be the ingest `Diagnostic`s or an agent's own (anything with `kind` and `str()`);
    `counts` given by the reader (never capped) win over counting the items."""

    def __init__(self, items: Sequence[Any], counts: Mapping[str, int] | None = None) -> None:
        self.items = list(items)
        if counts:
            self.counts: Counter[str] = Counter({str(k): int(v) for k, v in counts.items()})
        else:
            self.counts = Counter(str(getattr(getattr(i, "kind", None), "value", getattr(i, "kind", "problem"))) for i in self.items)
        self.pending = None

    @property
    def total(self) -> int:
        """Problems of all kinds."""
        return sum(self.counts.values())

    def summary(self) -> str:
        """One line per kind, e.g. `malformed: 2 (lines 3, 9)`; "no problems" without any."""
        parts = []
        for kind, n in self.counts.items():
            lines = [i.line_no for i in self.items if _kind_of(i) == kind and getattr(i, "line_no", None) is not None][:3]
            where = f" (line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}{', …' if n > 3 else ''})" if lines else ""
            parts.append(f"{kind}: {n}{where}")
        return "\n".join(parts) if parts else "no problems"


def _kind_of(item: Any) -> str:
    kind = getattr(item, "kind", "problem")
    return str(getattr(kind, "value", kind))


@dataclass(frozen=True)
class EntryView:
    """One message of a conversation as the inspector reads an entry: `id`, `type` (the agent's
    source label, e.g. "attachment:file", or "message"), `role`, `line_no` (None: the agent does
    not record it), `message` (the Pi-shaped message) and `raw` (the same), `timestamp`."""

    id: str | None
    type: str
    role: str | None
    message: Mapping[str, Any]
    line_no: int | None = None
    timestamp: Any = None

    @property
    def raw(self) -> Mapping[str, Any]:
        """The message (the agent's row is not kept: the snapshot holds numbers and messages)."""
        return self.message


class ConversationSession:
    """A read-only view of a `Conversation` with the interface of a frozen `PiSession` that the
    screen reads (`ingest.snapshot` module doc: `SessionState`). O(1) to make; `by_id` is built
    on first use (O(messages))."""

    header = None
    version = 0
    labels: Mapping[str, str] = {}

    def __init__(self, conv: base.Conversation, *, last_line_no: int = 0, end_offset: int = 0,
                 identity: int = 0, counts: Mapping[str, int] | None = None,
                 index: Mapping[str, int] | None = None) -> None:
        self.conversation = conv
        self._index = index
        self.path = conv.path
        self.diagnostics = ConversationDiagnostics(conv.diagnostics, counts)
        self.last_line_no = last_line_no
        self.end_offset = end_offset
        self.identity = identity
        self.entries: Sequence[Any] = ()  # (entries outside the context are not kept: `entry_count` counts them)
        self.entry_count = conv.entries
        has_any = bool(conv.entries or conv.messages or conv.requests)
        self.status = "session" if has_any else "empty"

    @property
    def session_id(self) -> str | None:
        """The agent's session id."""
        return self.conversation.session_id

    @property
    def session_name(self) -> str | None:
        """The session's title (named, or its first prompt)."""
        return self.conversation.title

    @property
    def cwd(self) -> str | None:
        """The working directory the agent recorded."""
        return self.conversation.cwd

    @property
    def leaf_id(self) -> str | None:
        """The current leaf entry id."""
        return self.conversation.leaf_id

    @cached_property
    def by_id(self) -> "EntryLookup":
        """Entry id → `EntryView` of the messages in context (the first message of an entry):
        a read-only mapping, O(1) per lookup with the live session's index, else built on
        first use (O(messages))."""
        return EntryLookup(self.conversation, self._index)


class EntryLookup(Mapping[str, EntryView]):
    """Entry id → `EntryView` of a conversation's messages (the first message of an entry).

    `index`: entry id → message index, kept by the live session across its snapshots (it may
    know ids of messages newer than this conversation: an id is only found here when this
    conversation's message at that index has it; other ids are looked up in a full map, built
    once on the first miss). Read-only; O(1) per found id."""

    def __init__(self, conv: base.Conversation, index: Mapping[str, int] | None = None) -> None:
        self._conv = conv
        self._index = index
        self._full: dict[str, EntryView] | None = None

    def _view(self, i: int) -> EntryView:
        message, meta = self._conv.messages[i], self._conv.meta[i]
        mapping = isinstance(message, abc.Mapping)
        role = message.get("role") if mapping else None
        return EntryView(meta.entry_id, meta.source or "message", role, message, getattr(meta, "line_no", None),
                         message.get("timestamp") if mapping else None)

    def _all(self) -> dict[str, EntryView]:
        if self._full is None:
            out: dict[str, EntryView] = {}
            for i, meta in enumerate(self._conv.meta):
                eid = meta.entry_id
                if eid is not None and eid not in out:
                    out[eid] = self._view(i)
            self._full = out
        return self._full

    def __getitem__(self, entry_id: str) -> EntryView:
        if self._index is not None and self._full is None:
            i = self._index.get(entry_id)
            if i is not None and i < len(self._conv.meta) and self._conv.meta[i].entry_id == entry_id:
                return self._view(i)
        return self._all()[entry_id]

    def __iter__(self) -> Any:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


class ConversationContext:
    """The messages the model saw (a `Conversation`'s), with the interface of Pi's
    `SessionContext` that the screen and DS4's planner read (`ingest.snapshot`: `ContextState`):
    one list of Pi-shaped messages and one of their entry ids; a conversation has no branch
    apart from its context, so `branch_entry_ids` and `context_entry_ids` are the same list."""

    labels: Mapping[str, str] = {}
    warnings: tuple[Any, ...] = ()
    chain = None

    def __init__(self, conv: base.Conversation, entry_ids: list[str | None] | None = None) -> None:
        self._requests = conv.requests
        # a list the conversation owns is shared (never changed once handed out)
        self.messages: list[Mapping[str, Any]] = conv.messages if type(conv.messages) is list else list(conv.messages)
        self.message_entry_ids: list[str | None] = entry_ids if entry_ids is not None else [m.entry_id for m in conv.meta]
        self.branch_entry_ids = self.message_entry_ids
        self.context_entry_ids = self.message_entry_ids
        self.leaf_id = conv.leaf_id
        self.model = {"provider": conv.provider, "modelId": conv.model} if conv.model else None

    def request_for(self, message_index: int) -> base.Request | None:
        """The request whose reply is message `message_index` (the agent records usage per
        request, not on its messages; the last such request when several name it), or None.
        Searched from the newest request back: the inspector mostly shows the newest messages,
        and an index of every request (O(requests), ~3 ms at 20,000) would be made again for
        every snapshot the inspector shows."""
        for request in reversed(self._requests):
            if request.message_index == message_index:
                return request
        return None


# --- turns ----------------------------------------------------------------------------------


def is_prompt(message: Mapping[str, Any], meta: base.MessageMeta | None) -> bool:
    """True when `message` is a prompt the user typed: a `user` message that is not an
    attachment, a listing or a harness message (`MessageMeta.category` None, `source` None or
    "message.user"). A turn starts at each prompt."""
    if message.get("role") != "user":
        return False
    if meta is None:
        return True
    return meta.category is None and meta.source in (None, "message.user", "prompt")


def _ms(value: Any) -> float | None:
    """A message time as ms since the epoch: a number (ms) as is, an ISO 8601 string parsed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value:
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        return when.timestamp() * 1000
    return None


def _preview(message: Mapping[str, Any], limit: int = 80) -> str:
    content = message.get("content")
    if isinstance(content, str):
        text = content
    else:
        text = " ".join(str(b.get("text", "")) for b in content or () if isinstance(b, Mapping) and b.get("type") == "text")
    return " ".join(text.split())[:limit]


def conversation_turns(conv: base.Conversation, tokens: Sequence[int], prompt: Any = is_prompt,
                       preview: Any = None) -> tuple[Turn, ...]:
    """The turns of `conv`'s context: a prompt (`prompt(message, meta)`) and every message until
    the next one (turn 0: what comes before the first prompt, e.g. a compaction summary).
    `tokens`: per message (the accounting's `message_tokens`); `preview(message)`: the prompt's
    words in the turn list (default: its text, one line, 80 characters). O(messages)."""
    return TurnIndex(prompt, preview).turns(conv, tokens)


class TurnIndex:
    """`conversation_turns` kept between the snapshots of one live session, so an append costs
    O(new messages + the last turn) (issue 28): the prompt test and tool-call count of each
    message are made once per message object, and a turn is made again only when one of its
    messages, their tokens or the prompt that closes it is new. The messages kept are the first
    `conv.stable` (`Conversation.stable`: the previous conversation's very objects), checked at
    both ends; `turns(conv, tokens)` equals `conversation_turns(conv, tokens, ...)` always."""

    def __init__(self, prompt: Any = is_prompt, preview: Any = None) -> None:
        self.prompt = prompt
        self.preview = preview or _preview
        self._objects: list[Any] = []
        self._opens: list[bool] = []
        self._calls: list[int] = []
        self._tokens: Sequence[int] = ()  # the previous call's (a list nobody changes)
        self.tokens_kept = 0
        self._turns: list[Turn] = []
        self._ends: list[int] = []  # each turn's last message + 1

    def turns(self, conv: base.Conversation, tokens: Sequence[int], tokens_kept: int | None = None) -> tuple[Turn, ...]:
        """The turns of `conv` (see `conversation_turns`). `tokens_kept`: how many leading
        `tokens` equal the previous call's (`Accounting.tokens_kept`); None: compared here."""
        from bisect import bisect_right

        messages, metas = conv.messages, conv.meta
        keep = min(conv.stable, len(self._objects))
        if keep and (messages[0] is not self._objects[0] or messages[keep - 1] is not self._objects[keep - 1]):
            keep = 0
        if tokens_kept is not None and len(self._tokens) >= tokens_kept:
            keep = min(keep, tokens_kept)
        elif keep and not _same_prefix(tokens, self._tokens, keep):
            keep = next(i for i, (a, b) in enumerate(zip(tokens, self._tokens)) if a != b)
        self.tokens_kept = keep  # leading messages whose tokens are the previous call's
        del self._objects[keep:], self._opens[keep:], self._calls[keep:]
        for i in range(keep, len(messages)):
            message = messages[i]
            self._objects.append(message)
            self._opens.append(bool(self.prompt(message, metas[i] if i < len(metas) else None)))
            # (`type(b) is dict` first: `isinstance` against `typing.Mapping` costs ~2 µs a block)
            self._calls.append(sum(1 for b in message.get("content") or ()
                                   if (type(b) is dict or isinstance(b, Mapping)) and b.get("type") == "toolCall")
                               if message.get("role") == "assistant" and not isinstance(message.get("content"), str) else 0)
        self._tokens = tokens
        # a turn is kept when the message after it (the prompt that closed it) is kept too
        reuse = bisect_right(self._ends, keep - 1)
        del self._turns[reuse:], self._ends[reuse:]
        start = self._ends[-1] if self._ends else 0
        number = next((t.index for t in reversed(self._turns) if t.index), 0)
        opens = self._opens
        if start < len(messages) and opens[start]:
            number += 1
        for i in range(start + 1, len(messages) + 1):
            if i == len(messages) or opens[i]:
                if i > start:
                    self._turns.append(self._turn(conv, number if opens[start] else 0, start, i, tokens))
                    self._ends.append(i)
                start = i
                if i < len(messages):
                    number += 1
        return tuple(self._turns)

    def _turn(self, conv: base.Conversation, number: int, start: int, end: int, tokens: Sequence[int]) -> Turn:
        from ds4core.epoch import to_datetime

        first = conv.messages[start]
        opens = self._opens[start]
        ms = _ms(first.get("timestamp")) if opens else None
        ids = (m.entry_id for m in conv.meta[start:end] if m.entry_id is not None)
        return Turn(number, to_datetime(ms / 1000) if ms is not None else None,
                    self.preview(first) if opens else "(before the first prompt)", sum(self._calls[start:end]),
                    sum(tokens[start:end]), start, end - 1, tuple(dict.fromkeys(ids)))


def _same_prefix(a: Sequence[int], b: Sequence[int], n: int) -> bool:
    """Whether the first `n` items of `a` and `b` are equal: when both are lists, their slices
    compared in C (the same int objects compare at once); else as lists."""
    if type(a) is list and type(b) is list:
        return a[:n] == b[:n]
    return list(a[:n]) == list(b[:n])


# --- the live session -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Lineage:
    """What `Snapshot.lineage` reads: the context (by identity) and its epoch."""

    context: Any
    epoch: int


_EPOCHS = itertools.count(1)

FIRST_SLICE_BYTES = 1 << 20
"""The first slice of a first read in slices is at most this many bytes, whatever the caller
asks (the dashboard asks 4 MiB, then twice as much each time): these readers are Python per
line where Pi's is C, and the first slice is what the first paint waits for (a 95 MiB Codex
rollout: ~0.17 → ~0.03 s of reading before its first paint, issue 36). Later slices are the
caller's."""


@dataclass
class _Memo:
    """What an accountant keeps between the snapshots of one reader (`Agent.account`'s memo)."""

    state: dict[str, Any] = field(default_factory=dict)


class ConversationLive:
    """Tailer → the agent's reader → `Conversation` → the agent's accounting → `Snapshot`.

    `agent` is the plug-in (`ds4sessions.agents.base.Agent`): its `reader(path)`, `account(conv,
    memo)` and, when it has them, `is_prompt(message, meta)`, `max_line_bytes` and `tailer(path)`
    (a session that is not a file: `agents.registry.tailer_for`). `models`: the
    model table prices and windows come from (default: bundled). Same interface as Pi's
    `LiveSession` (`refresh`, `finish`, `refine`, `refines_quickly`, `prepare`, `last`)."""

    def __init__(self, path: Path, agent: Any, models: ModelTable | None = None) -> None:
        self.path = Path(path)
        self.agent = agent
        self.models = models or ModelTable.bundled()
        self._tailer = tailer_for(agent, self.path, cap=getattr(agent, "max_line_bytes", None))
        self._version = 0
        self._deleted = False
        self._start_over()
        self.last: Snapshot | None = None

    def _start_over(self) -> None:
        self._reader = self.agent.reader(self.path)
        self._memo = _Memo()
        self._turn_index = TurnIndex(getattr(self.agent, "is_prompt", is_prompt), getattr(self.agent, "prompt_preview", None))
        self._entry_ids: list[str | None] = []
        self._first_index: dict[str, int] = {}
        self._spares = Spares()
        self._epoch = next(_EPOCHS)
        self._built = False  # no snapshot of this reader yet (the next one starts an epoch)
        self._line_no = 0
        self._offset = 0

    @property
    def reader(self) -> Any:
        """The agent's live reader (only for the thread that calls `refresh`)."""
        return self._reader

    def refresh(self, force: bool = False, limit: int | None = None) -> Snapshot | None:
        """Poll the file; on new lines or a reset, read them and return a new snapshot (else
        None). `force`: read the whole file again from byte 0 with a new reader. `limit`: read
        about that many bytes at most (the snapshot says how many are left: `unread_bytes`);
        None: to the end, in bounded slices (`Tailer.polls`)."""
        if force and self.last is not None:
            self._tailer = tailer_for(self.agent, self.path, cap=getattr(self.agent, "max_line_bytes", None))
            self._start_over()
        if limit is not None and (self.last is None or force):
            limit = min(limit, FIRST_SLICE_BYTES)  # (the first paint sooner: see FIRST_SLICE_BYTES)
        # a first read (whole or a slice of it) with the collector paused, as Pi's (`bulk_gc`:
        # nothing the reader builds forms a cycle; ~20 % of a 95 MiB read in slices, issue 36)
        with bulk_gc(force or limit is not None or self.last is None):
            return self._refresh(force, limit)

    def _refresh(self, force: bool, limit: int | None) -> Snapshot | None:
        polls: Iterable[TailBatch] = self._tailer.polls() if limit is None else (self._tailer.poll(limit),)
        changed = self.last is None or force
        batch: TailBatch | None = None
        for batch in polls:
            if batch.reset is not None:
                changed = True
                self._deleted = batch.reset == "deleted"
                if not self._deleted:
                    self._start_over()
            if batch.lines:
                self._reader.feed(batch.lines)
                self._line_no = batch.lines[-1].line_no
                changed = True
            self._offset = batch.offset
        assert batch is not None
        last = self.last
        if not changed:
            if last is not None and (last.pending_bytes != batch.pending_bytes or last.unread_bytes != batch.unread):
                self.last = Snapshot(**{**_fields(last), "pending_bytes": batch.pending_bytes,
                                        "unread_bytes": batch.unread, "file_size": batch.size})
                return self.last
            return None
        self.last = self._build(batch.pending_bytes, batch.size, batch.unread)
        return self.last

    def finish(self) -> Snapshot | None:
        """Final read of an idle file: the held partial last line is read as complete (a whole
        JSON object without its newline is a row, as the agents read their files back). None
        when nothing was held."""
        tail = self._tailer.pending_line()
        if tail is None:
            return None
        self._reader.feed([tail])
        self._line_no = tail.line_no
        self.last = self._build(0, self.last.file_size if self.last else 0, 0)
        return self.last

    def refine(self, snapshot: Snapshot) -> Snapshot:
        """The snapshot as it is: a conversation is counted once, by the agent's estimator."""
        return snapshot

    def refines_quickly(self, snapshot: Snapshot) -> bool:
        """True: `refine` has nothing to add."""
        return True

    def prepare(self) -> None:
        """Copy now what the next append extends (O(messages), while nothing waits: the feed
        calls it after the screen painted the last snapshot): the context's entry ids, the
        reader's lists (its `prepare()`, when it has one) and those of the accountant's memo
        (each value with a `prepare()`). Optional: without it the append copies on the spot."""
        self._spares.prepare([self._entry_ids])
        for owner in (self._reader, *self._memo.state.values()):
            prepare = getattr(owner, "prepare", None)
            if callable(prepare):
                prepare()

    def _build(self, pending: int, size: int, unread: int) -> Snapshot:
        conv = self._reader.conversation()
        accounting: Accounting = self.agent.account(conv, self._memo.state, self.models)
        tokens = accounting.breakdown.message_tokens
        turns = self._turn_index.turns(conv, tokens, accounting.tokens_kept)
        self._version += 1
        keep = min(conv.stable, len(self._entry_ids))
        fresh = [m.entry_id for m in conv.meta[keep:]]
        if keep < len(self._entry_ids):  # messages replaced: their ids leave the index (an older
            # snapshot that looks one up meanwhile finds it by a full scan: `EntryLookup`)
            index = self._first_index
            for eid in self._entry_ids[keep:]:
                if eid is not None and index.get(eid, -1) >= keep:
                    del index[eid]
        for i, eid in enumerate(fresh, keep):
            if eid is not None:
                self._first_index.setdefault(eid, i)
        # the same epoch while the conversation only grows (`Snapshot.lineage`: the view model
        # then checks one item at each end of a prefix instead of all of them)
        last = self.last
        grows = (self._built and last is not None and keep == len(self._entry_ids)
                 and last.best.counter == accounting.breakdown.counter
                 and self._turn_index.tokens_kept >= len(last.breakdown.message_tokens))
        if not grows:
            self._epoch = next(_EPOCHS)
        self._built = True
        ids = self._spares.copy(self._entry_ids)
        del ids[keep:]
        ids.extend(fresh)
        self._entry_ids = ids
        context = ConversationContext(conv, self._entry_ids)
        counts = getattr(self._reader, "diagnostic_counts", None)
        session = ConversationSession(
            conv, last_line_no=self._line_no, end_offset=self._offset, identity=id(self._memo),
            counts=counts() if callable(counts) else None, index=self._first_index,
        )
        return Snapshot(
            version=self._version, path=self.path, session=session, context=context,
            model=accounting.model, model_key=accounting.model_key, breakdown=accounting.breakdown,
            exact=accounting.breakdown, provider=accounting.provider, turns=turns,
            system_inferred=accounting.system_inferred, deleted=self._deleted, pending_bytes=pending,
            file_size=size, unread_bytes=unread, updated_at=time.time(), agent=conv.agent,
            capabilities=self.agent.capabilities, extras=accounting.extras,
            _lineage=_Lineage(context, self._epoch), _conversation=conv,
        )


def _fields(snapshot: Snapshot) -> dict[str, Any]:
    from dataclasses import fields

    return {f.name: getattr(snapshot, f.name) for f in fields(snapshot)}
