"""Pi's session state as the agent-neutral `base.Conversation` (`PiConversationReader`,
`conversation_of`) and its capabilities.

Requests (Pi session format §6, §10): every assistant `message` entry of the file is one request,
counted once, in file order, on any branch. Its usage buckets are Pi's `input`, `cacheRead`,
`cacheWrite`, `output` (already disjoint: `input` excludes cached tokens); `usage.cost.total` is
`cost_usd`. Pi does not record the prompt-cache TTL split, nor reasoning tokens, so those are 0.
A reply with `stopReason` "error" or "aborted", or without usage, is `synthetic` (Pi never
anchors the context size on it, §9). `Conversation.messages` are exactly the messages of Pi's
`buildSessionContext` (`build_context` / `extend_context`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ds4core.models import ModelTable
from ds4core.usage import usage_of

from ds4sessions.agents import base
from ds4sessions.agents.pi.context import SessionContext, build_context, extend_context, iso_to_ms
from ds4sessions.agents.pi.entries import COMPACTION, Entry
from ds4sessions.agents.pi.reader import PiSessionReader

CAPABILITIES = base.Capabilities(
    ds4_plan=True, ds4_exact=True, retrieval=True, steering=True, bridge=True, cache_ttl_recorded=False, read_only_reason=""
)
"""Pi supports everything ds4tui offers; it records no cache TTL (Pi session format §10)."""


def _seconds(entry: Entry, message: Mapping[str, Any]) -> float | None:
    """The reply's time in Unix seconds: the message's ms `timestamp`, else the entry's ISO one."""
    ts = message.get("timestamp")
    if isinstance(ts, (int, float)) and not isinstance(ts, bool) and ts >= 0:
        return ts / 1000
    ms = iso_to_ms(entry.timestamp)
    return ms / 1000 if ms is not None else None


def request_of(entry: Entry, index: int, message_index: int | None = None) -> base.Request:
    """The neutral `Request` of one assistant `message` entry (see module doc for the rules)."""
    message = entry.message or {}
    usage = usage_of(message)
    model = message.get("model")
    provider = message.get("provider")
    return base.Request(
        index=index,
        usage=base.Usage(
            input=usage.input, cache_read=usage.cache_read, cache_write=usage.cache_write, output=usage.output,
        ),
        entry_id=entry.id,
        timestamp=_seconds(entry, message),
        model=model if isinstance(model, str) else None,
        provider=provider if isinstance(provider, str) else None,
        message_index=message_index,
        synthetic=usage.partial or usage.missing,
        cost_usd=usage.recorded_cost,
    )


def _tool_name(message: Mapping[str, Any]) -> str | None:
    """A tool result's `toolName`; an assistant message's tool when it makes exactly one call."""
    role = message.get("role")
    if role == "toolResult":
        name = message.get("toolName")
        return name if isinstance(name, str) else None
    if role == "assistant":
        names = [
            b.get("name") for b in message.get("content") or () if isinstance(b, Mapping) and b.get("type") == "toolCall"
        ]
        return names[0] if len(names) == 1 and isinstance(names[0], str) else None
    return None


def message_meta(messages: Sequence[Mapping[str, Any]], entry_ids: Sequence[str | None]) -> tuple[base.MessageMeta, ...]:
    """One `MessageMeta` per context message (entry id, tool name; Pi has no category overrides
    and nothing opaque)."""
    return tuple(base.MessageMeta(entry_id=eid, tool=_tool_name(m)) for m, eid in zip(messages, entry_ids))


def compactions_of(session: PiSessionReader, branch_entry_ids: Sequence[str | None]) -> tuple[base.Compaction, ...]:
    """The compactions on the branch, oldest first. Pi does not record whether a compaction was
    automatic or a `/compact` (Pi session format §5, §9): `kind` is "manual" when an extension
    supplied the summary (`fromHook`), else "auto". `tokens_before` is Pi's
    `tokensBefore`."""
    out = []
    for eid in branch_entry_ids:
        entry = session.by_id.get(eid) if eid is not None else None
        if entry is None or entry.type != COMPACTION:
            continue
        ms = iso_to_ms(entry.timestamp)
        before = entry.raw.get("tokensBefore")
        out.append(
            base.Compaction(
                entry_id=entry.id,
                timestamp=ms / 1000 if ms is not None else None,
                kind="manual" if entry.raw.get("fromHook") else "auto",
                tokens_before=int(before) if isinstance(before, (int, float)) and not isinstance(before, bool) else None,
            )
        )
    return tuple(out)


class PiConversationReader:
    """An incremental reader of one Pi session file producing `base.Conversation`s.

    `feed(lines)` reads complete lines (see `PiSessionReader.feed`) and records the new assistant
    replies as requests (O(new lines)); `conversation()` extends the previous context when the
    append only extends the branch (`extend_context`), else rebuilds it (`build_context`), and
    returns a new frozen `Conversation` (O(new messages) plus tuple copies on the common path).
    `session` is the underlying `PiSessionReader` (its state grows in place: do not hand it to
    another thread).
    """

    def __init__(self, path: Path, models: ModelTable | None = None) -> None:
        self.path = Path(path)
        self.models = models or ModelTable.bundled()
        self.session = PiSessionReader(self.path)
        self._replies: list[Entry] = []  # assistant message entries, file order
        self._new: list[Entry] | None = []  # entries since the last context (None: rebuild)
        self._context: SessionContext | None = None

    def feed(self, lines: Iterable[tuple[int, int, bytes]]) -> list[Entry]:
        """Read complete lines `(line_no, byte_offset, raw)`; returns the new entries."""
        new = self.session.feed(lines)
        self._note(new)
        return new

    def feed_final_tail(self, line_no: int, offset: int, raw: bytes) -> Entry | None:
        """The unterminated last line at a final read (see `PiSessionReader.feed_final_tail`)."""
        entry = self.session.feed_final_tail(line_no, offset, raw)
        if entry is not None:
            self._note([entry])
        return entry

    def _note(self, new: Sequence[Entry]) -> None:
        self._replies.extend(e for e in new if e.type == "message" and e.role == "assistant")
        if self._new is not None:
            self._new.extend(new)

    def context(self) -> SessionContext:
        """Pi's context now (`buildSessionContext` with the default leaf)."""
        ctx = self._context
        if ctx is None or self._new is None:
            ctx = build_context(self.session)
        elif self._new:
            ctx = extend_context(ctx, self.session, self._new) or build_context(self.session)
        self._context = ctx
        self._new = []
        return ctx

    def conversation(self) -> base.Conversation:
        """The frozen neutral state after everything fed so far."""
        ctx = self.context()
        session = self.session
        position = {eid: i for i, eid in enumerate(ctx.message_entry_ids) if eid is not None}
        requests = tuple(request_of(e, i, position.get(e.id or "")) for i, e in enumerate(self._replies))
        return conversation_of(self.path, session, ctx, requests, self.models)


def conversation_of(
    path: Path, session: PiSessionReader, ctx: SessionContext, requests: tuple[base.Request, ...], models: ModelTable
) -> base.Conversation:
    """The `Conversation` of `session` with its context `ctx` and its `requests` (read `session`
    only on the thread that feeds it)."""
    provider = model_id = None
    if ctx.model:
        provider, model_id = ctx.model.get("provider"), ctx.model.get("modelId")
    info = models.get(provider, model_id)
    return base.Conversation(
        agent=base.PI,
        path=path,
        capabilities=CAPABILITIES,
        messages=tuple(ctx.messages),
        meta=message_meta(ctx.messages, ctx.message_entry_ids),
        requests=requests,
        compactions=compactions_of(session, ctx.branch_entry_ids),
        session_id=session.session_id,
        title=ctx.session_name,
        cwd=session.cwd,
        model=model_id if isinstance(model_id, str) else None,
        provider=provider if isinstance(provider, str) else None,
        context_window=info.context_window if info else None,
        leaf_id=ctx.leaf_id,
        entries=len(session.entries),
        diagnostics=tuple(session.diagnostics.items),
        parent=session.parent_session,
        extra={"thinking_level": ctx.thinking_level} if isinstance(ctx.thinking_level, str) else {},
    )
