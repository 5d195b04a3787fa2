"""A live session: tailer → reader → context → token counts → one immutable `Snapshot`.

This is the hot path of design.md ("The path of one appended line") below the UI:

    Tailer.poll() → PiSessionReader.feed() → build_context() → TokenLedger (new messages only)
    → categories / provider anchor / turns → Snapshot

`LiveSession.refresh()` does one step and returns a new `Snapshot` when something changed (else
None). It is not thread-safe: the app drives it from one worker thread and hands the immutable
snapshot to the UI thread. The session file is only ever opened read-only.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ds4core.categories import Breakdown, breakdown, in_llm_context, message_parts
from ds4core.models import ModelInfo, ModelTable
from ds4core.tokens import CharsV1Counter, Cl100kCounter, TokenLedger
from ds4core.usage import Anchor, find_anchor, is_valid_measurement, usage_of

from ds4sessions.pi.context import SessionContext, build_context
from ds4sessions.pi.reader import PiSessionReader
from ds4sessions.tailer import Tailer


@dataclass(frozen=True)
class Turn:
    """One turn of the context: a user message and everything until the next one.

    `index` is 1-based in context order (0 = messages before the first prompt, e.g. a
    compaction summary and kept replies); `time` is the prompt's local wall-clock time
    (None when unknown); `tokens` by the snapshot's preferred counter.
    """

    index: int
    time: dt.datetime | None
    prompt: str
    tool_calls: int
    tokens: int
    first_message: int
    last_message: int
    entry_ids: tuple[str, ...]


@dataclass(frozen=True)
class ProviderView:
    """The provider's numbers for the context (tokens), from the anchor reply's usage.

    - `prompt_tokens`: input + cacheRead + cacheWrite of the anchor request;
    - `context_tokens`: Pi's context size now = anchor total + estimate of later messages;
    - `estimate_at_anchor`: our estimate of what that request carried (fixed + earlier messages);
    - `ratio`: prompt_tokens / estimate_at_anchor (how far the estimator is from the provider);
    - `later_messages`: messages after the anchor, whose share is estimated.
    """

    anchor_index: int
    anchor_entry_id: str | None
    prompt_tokens: int
    context_tokens: int
    estimate_at_anchor: int
    ratio: float | None
    later_messages: int
    cache_read: int
    cache_write: int


@dataclass(frozen=True)
class Snapshot:
    """Everything the UI shows for one state of the session file. Immutable; one per update."""

    version: int
    path: Path
    reader: PiSessionReader
    context: SessionContext
    model: ModelInfo | None
    model_key: str | None
    breakdown: Breakdown
    exact: Breakdown | None
    provider: ProviderView | None
    turns: tuple[Turn, ...]
    system_inferred: bool
    deleted: bool = False
    pending_bytes: int = 0
    file_size: int = 0
    updated_at: float = field(default_factory=time.time)

    @property
    def best(self) -> Breakdown:
        """The exact (cl100k) breakdown when computed, else the fast chars-v1 one."""
        return self.exact or self.breakdown

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens, when the model is known."""
        return self.model.context_window if self.model else None

    @property
    def entries_by_id(self) -> Mapping[str, Any]:
        """The reader's index of entries by id (later duplicates win)."""
        return self.reader.by_id


def _first_fresh_index(ctx: SessionContext, reader: PiSessionReader) -> int:
    """Index of the first context message recorded after the latest compaction on the branch."""
    position = {eid: i for i, eid in enumerate(ctx.branch_entry_ids)}
    last_compaction = -1
    for eid in ctx.branch_entry_ids:
        entry = reader.by_id.get(eid)
        if entry is not None and entry.type == "compaction":
            last_compaction = position[eid]
    if last_compaction < 0:
        return 0
    for i, eid in enumerate(ctx.message_entry_ids):
        if eid is not None and position.get(eid, -1) > last_compaction:
            return i
    return len(ctx.messages)


def _turn_numbers(ctx: SessionContext, reader: PiSessionReader) -> dict[str, int]:
    """Entry id of each user prompt on the branch → its 1-based turn number on the branch."""
    numbers: dict[str, int] = {}
    for eid in ctx.branch_entry_ids:
        entry = reader.by_id.get(eid) if eid else None
        if entry is not None and entry.role == "user":
            numbers[eid] = len(numbers) + 1
    return numbers


def _preview(content: Any, limit: int = 80) -> str:
    if isinstance(content, str):
        text = content
    else:
        text = " ".join(
            b.get("text", "") for b in content or () if isinstance(b, Mapping) and b.get("type") == "text"
        ) or ("[image]" if content else "")
    return " ".join(text.split())[:limit]


def build_turns(
    messages: Sequence[Mapping[str, Any]],
    entry_ids: Sequence[str | None],
    tokens: Sequence[int],
    turn_numbers: Mapping[str, int] | None = None,
) -> tuple[Turn, ...]:
    """Group context messages into turns (see `Turn`).

    `turn_numbers` maps a prompt's entry id to its turn number on the whole branch (so a turn
    keeps its number after a compaction dropped earlier turns); without it turns count from 1.
    """
    turns: list[Turn] = []
    start = 0
    number = 0

    def close(end: int) -> None:
        if end <= start:
            return
        first = messages[start]
        is_prompt = first.get("role") == "user"
        when = None
        ts = first.get("timestamp")
        if isinstance(ts, (int, float)) and not isinstance(ts, bool):
            when = dt.datetime.fromtimestamp(ts / 1000, tz=dt.timezone.utc).astimezone()
        calls = sum(
            1
            for m in messages[start:end]
            if m.get("role") == "assistant"
            for b in m.get("content") or ()
            if isinstance(b, Mapping) and b.get("type") == "toolCall"
        )
        eid = entry_ids[start] if start < len(entry_ids) else None
        index = (turn_numbers or {}).get(eid or "", number) if is_prompt else 0
        turns.append(
            Turn(
                index=index,
                time=when,
                prompt=_preview(first.get("content")) if is_prompt else "(before the first prompt)",
                tool_calls=calls,
                tokens=sum(tokens[start:end]),
                first_message=start,
                last_message=end - 1,
                entry_ids=tuple(e for e in entry_ids[start:end] if e is not None),
            )
        )

    for i, message in enumerate(messages):
        if message.get("role") == "user" and i > start:
            close(i)
            start = i
        if message.get("role") == "user":
            number += 1
    close(len(messages))
    return tuple(turns)


class LiveSession:
    """Owns the tailer, reader and token ledgers of one session file.

    `refresh()` polls the file and returns a new `Snapshot` when it changed (None otherwise);
    `refine(snapshot)` adds the exact cl100k breakdown (slower: run it off the UI thread).
    """

    def __init__(self, path: Path, models: ModelTable | None = None) -> None:
        """Watch `path` (it need not exist yet). `models` defaults to the bundled table."""
        self.path = Path(path)
        self.models = models or ModelTable.bundled()
        self._tailer = Tailer(self.path)
        self._reader = PiSessionReader(self.path)
        self._fast = TokenLedger(CharsV1Counter(), message_parts)
        self._exact = TokenLedger(Cl100kCounter(), message_parts)
        self._version = 0
        self._deleted = False
        self.last: Snapshot | None = None

    @property
    def reader(self) -> PiSessionReader:
        """The reader (its entries, labels, diagnostics)."""
        return self._reader

    def refresh(self, force: bool = False) -> Snapshot | None:
        """Poll the file; on new lines or a reset, rebuild and return a snapshot (else None).

        `force` rebuilds even when nothing changed (e.g. after the model table changed).
        """
        batch = self._tailer.poll()
        if batch.reset == "deleted":
            self._deleted = True
        elif batch.reset is not None:
            self._deleted = False
            self._reader = PiSessionReader(self.path)
            self._fast.forget_identities()
            self._exact.forget_identities()
        if batch.lines:
            self._reader.feed(batch.lines)
        self._reader.set_pending_tail(batch.pending_bytes)
        changed = bool(batch.lines) or batch.reset is not None or self.last is None
        if not changed and not force:
            if self.last is not None and self.last.pending_bytes != batch.pending_bytes:
                self.last = _replace(self.last, pending_bytes=batch.pending_bytes)
                return self.last
            return None
        self.last = self._build(batch.pending_bytes, batch.size)
        return self.last

    def _build(self, pending: int, size: int) -> Snapshot:
        reader = self._reader
        ctx = build_context(reader)
        model_key = None
        model = None
        if ctx.model:
            provider, model_id = ctx.model.get("provider"), ctx.model.get("modelId")
            model_key = f"{provider}/{model_id}"
            model = self.models.get(provider, model_id)
        fast, provider_view, inferred = self._breakdown(ctx, reader, self._fast, model)
        turns = build_turns(ctx.messages, ctx.message_entry_ids, fast.message_tokens, _turn_numbers(ctx, reader))
        self._version += 1
        return Snapshot(
            version=self._version, path=self.path, reader=reader, context=ctx, model=model,
            model_key=model_key, breakdown=fast, exact=None, provider=provider_view, turns=turns,
            system_inferred=inferred, deleted=self._deleted, pending_bytes=pending, file_size=size,
        )

    def _breakdown(
        self, ctx: SessionContext, reader: PiSessionReader, ledger: TokenLedger, model: ModelInfo | None
    ) -> tuple[Breakdown, ProviderView | None, bool]:
        messages = ctx.messages
        ids = ctx.message_entry_ids
        tokens = [ledger.count(m).total if in_llm_context(m) else 0 for m in messages]
        has_system = any(m.get("role") == "system" for m in messages)
        inferred = None
        if not has_system:
            for i, m in enumerate(messages):
                if is_valid_measurement(m):
                    inferred = max(usage_of(m).prompt_tokens - sum(tokens[:i]), 0) or None
                    break
        fixed = inferred or 0
        anchor: Anchor | None = find_anchor(messages, _first_fresh_index(ctx, reader))
        view = None
        provider_tokens = None
        if anchor is not None:
            before = fixed + sum(tokens[: anchor.message_index])
            later = sum(tokens[anchor.message_index + 1 :])
            provider_tokens = anchor.usage.total + later
            view = ProviderView(
                anchor_index=anchor.message_index,
                anchor_entry_id=ids[anchor.message_index],
                prompt_tokens=anchor.usage.prompt_tokens,
                context_tokens=provider_tokens,
                estimate_at_anchor=before,
                ratio=(anchor.usage.prompt_tokens / before) if before else None,
                later_messages=len(messages) - anchor.message_index - 1,
                cache_read=anchor.usage.cache_read,
                cache_write=anchor.usage.cache_write,
            )
        result = breakdown(
            messages, ids, ledger,
            context_window=model.context_window if model else None,
            provider_tokens=provider_tokens,
            inferred_fixed_tokens=inferred,
        )
        return result, view, inferred is not None

    def finish(self) -> Snapshot | None:
        """Final read of an idle file: the held partial last line is read as complete (a whole
        JSON object without its newline becomes an entry, as Pi reads it; a fragment is counted
        as a partial last line). Returns the rebuilt snapshot, or None when nothing was held."""
        tail = self._tailer.pending_line()
        if tail is None:
            return None
        self._reader.set_pending_tail(0)
        self._reader.feed_final_tail(*tail)
        self.last = self._build(0, self.last.file_size if self.last else 0)
        return self.last

    def refine(self, snapshot: Snapshot) -> Snapshot:
        """Return `snapshot` with the exact cl100k breakdown added (turn tokens stay chars-v1's
        until then; afterwards they use cl100k)."""
        exact, provider_view, _ = self._breakdown(snapshot.context, snapshot.reader, self._exact, snapshot.model)
        turns = build_turns(
            snapshot.context.messages, snapshot.context.message_entry_ids, exact.message_tokens,
            _turn_numbers(snapshot.context, snapshot.reader),
        )
        return _replace(snapshot, exact=exact, provider=provider_view, turns=turns)


def _replace(snapshot: Snapshot, **changes: Any) -> Snapshot:
    from dataclasses import replace

    return replace(snapshot, **changes)


def open_snapshot(path: Path, models: ModelTable | None = None, exact: bool = False) -> Snapshot:
    """Read a whole session file once (a final read: see `LiveSession.finish`) and return its
    snapshot (CLI use; no watching)."""
    live = LiveSession(path, models)
    snap = live.refresh(force=True)
    assert snap is not None
    snap = live.finish() or snap
    return live.refine(snap) if exact else snap
