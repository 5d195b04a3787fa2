"""`ConversationAgent`: what an agent plug-in gets for free (issue 28: "a fourth agent is one
package and one line in `PLUGINS`").

A plug-in names itself (`name`, `label`), says what ds4tui may offer (`capabilities`), lists its
sessions (`discover`), recognizes its files (`recognizes`) and reads them incrementally into a
frozen `Conversation` (`reader`). Subclassing `ConversationAgent` gives it the rest of the
cockpit, each part overridable:

- `live(path, models)`: the live session (`ds4sessions.ingest.conversation.ConversationLive`);
- `account(conv, memo, models)`: the context by category (default: DS4's categories, counted
  with cl100k, calibrated to the last request's provider count);
- `cache_facts(snapshot, now)`: the prompt cache (`ds4core.cache_state.CacheFacts`; default:
  from `Conversation.requests`, `ds4core.cache_state`'s rules, prices from the model table, no
  countdown without a lifetime); the derive pipeline wraps it into the Cache tab's view;
- `map_json`, `cache_json`, `context_json`: the JSON of `ds4tui map|cache|context --json`
  (defaults: from the snapshot, the shapes of docs/json.md);
- `is_prompt(message, meta)`: where a turn starts.

Nothing here compares agent names: the CLI and the app ask the agent (issue 28, "No branch on an
agent's name outside `ds4sessions/agents/` and the registry").
"""

from __future__ import annotations

import itertools
import operator

from pathlib import Path
from typing import Any, Mapping, Sequence

from ds4core.categories import PI_TABLE, CategoryTable, compose_breakdown
from ds4core.models import ModelTable

from ds4sessions.agents import base

__all__ = ["ConversationAgent", "inferred_fixed", "provider_view", "read_snapshot", "request_cache_facts"]


class ConversationAgent:
    """Defaults for an agent plug-in whose reader makes `base.Conversation`s (see module doc).

    Subclasses set `name`, `label`, `capabilities` and implement `discover`, `recognizes` and
    `reader`. `categories` is the vocabulary of the default accounting; `max_line_bytes` the
    longest line its reader accepts (None: the tailer's default)."""

    name: str = "agent"
    label: str = "Agent"
    capabilities: base.Capabilities = base.Capabilities(
        ds4_plan=True, read_only_reason="read-only: ds4tui writes only to Pi sessions")
    categories: CategoryTable = PI_TABLE
    max_line_bytes: int | None = None

    # -- what every plug-in implements ------------------------------------------------------

    def discover(self) -> list[base.SessionInfo]:
        """Every session of this agent on this machine, newest first (cheap listing)."""
        return []

    def recognizes(self, head: bytes) -> bool:
        """True when `head` (the first bytes of a file) is this agent's session file."""
        return False

    def reader(self, path: Path) -> Any:
        """A fresh incremental reader (`base.SessionReader`) for `path`."""
        raise NotImplementedError

    # -- the cockpit's defaults -------------------------------------------------------------

    def live(self, path: Path, models: ModelTable | None = None) -> Any:
        """The live session of `path` (`ConversationLive`: tailer → reader → accounting)."""
        from ds4sessions.ingest.conversation import ConversationLive

        return ConversationLive(path, self, models)

    def is_prompt(self, message: Mapping[str, Any], meta: base.MessageMeta | None) -> bool:
        """Where a turn starts (`ds4sessions.ingest.conversation.is_prompt`)."""
        from ds4sessions.ingest.conversation import is_prompt

        return is_prompt(message, meta)

    def account(self, conv: base.Conversation, memo: dict[str, Any], models: ModelTable | None = None) -> Any:
        """The context of `conv` by DS4's categories (`self.categories`), counted with cl100k
        (a ledger kept in `memo`, so unchanged messages are not counted again), calibrated to
        the provider's count: the last main-chain request's prompt + output, plus the estimate
        of the messages after its reply. Returns an `ingest.conversation.Accounting`."""
        from ds4core.categories import attribute, message_parts
        from ds4core.tokens import Cl100kCounter, TokenLedger

        from ds4sessions.ingest.conversation import Accounting, model_info

        ledger = memo.get("ledger")
        if ledger is None:
            ledger = memo["ledger"] = TokenLedger(Cl100kCounter(), message_parts)
        entry_ids = [m.entry_id for m in conv.meta]
        attribution = attribute(conv.messages, entry_ids, ledger)
        fixed = inferred_fixed(conv, attribution.message_tokens)
        provider = provider_view(conv, attribution.message_tokens, fixed=fixed or 0)
        model = model_info(conv.provider, conv.model, conv.context_window, models=models)
        window = model.context_window if model is not None else conv.context_window
        bd = compose_breakdown(attribution, context_window=window, provider_tokens=provider.context_tokens if provider else None,
                               inferred_fixed_tokens=fixed, table=self.categories)
        key = f"{conv.provider}/{conv.model}" if conv.model else None
        return Accounting(bd, provider, model, key, system_inferred=fixed is not None)

    def cache_facts(self, snapshot: Any, now: float, models: ModelTable | None = None, *,
                    memo: dict[str, Any] | None = None) -> Any:
        """The prompt cache of `snapshot` at `now` (epoch seconds): `request_cache_facts`
        (`memo`: kept by the live session's cache stage between snapshots)."""
        return request_cache_facts(snapshot, now, models, memo=memo)

    def map_json(self, path: Path, *, exact: bool = True, models: ModelTable | None = None) -> dict[str, Any]:
        """`ds4tui map --json`: the numbers of the snapshot (the Pi shape, docs/json.md)."""
        snap = read_snapshot(self, path, models)
        from ds4sessions.ingest.snapshot_json import map_json

        return map_json(snap)

    def cache_json(self, path: Path, *, at: float | None = None, models: ModelTable | None = None) -> dict[str, Any]:
        """`ds4tui cache --json`: the cache at `at` (default: the last request's time):
        `{"agent", "at", "model", "state", "history", "cachedPrefixEnd", "pricingSource"}`."""
        snap = read_snapshot(self, path, models)
        facts = self.cache_facts(snap, 0.0, models)
        refresh = facts.clock.refresh
        when = at if at is not None else (refresh.time_s if refresh is not None else _last_request_time(snap.conversation))
        state = facts.clock.state(when if when is not None else 0.0, facts.expiring_s)
        return {"agent": snap.agent, "at": when, "model": facts.model_key, "state": state.to_json(),
                "history": facts.history.to_json(), "cachedPrefixEnd": facts.cached_prefix_end,
                "pricingSource": facts.pricing_source}

    def context_json(self, path: Path) -> dict[str, Any]:
        """`ds4tui context --json`: the messages the model saw, with their neutral meta."""
        conv = read_snapshot(self, path).conversation
        return {
            "agent": conv.agent, "path": str(conv.path), "sessionId": conv.session_id, "model": conv.model,
            "contextWindow": conv.context_window, "messageCount": len(conv.messages),
            "messages": [dict(m) for m in conv.messages],
            "meta": [{"entryId": m.entry_id, "category": m.category, "tool": m.tool, "opaque": m.opaque, "source": m.source}
                     for m in conv.meta],
            "diagnostics": [str(d) for d in conv.diagnostics],
        }


def read_snapshot(agent: Any, path: Path, models: ModelTable | None = None, *, exact: bool = True) -> Any:
    """The snapshot of the whole file `path` read once by `agent`'s live session (a final read:
    a torn last line is read as complete), refined to exact counts unless `exact` is False.
    Raises OSError when the file cannot be read."""
    from ds4sessions.runtime import bulk_gc

    with bulk_gc():
        live = agent.live(Path(path), models)
        snap = live.refresh(force=True)
        assert snap is not None
        snap = live.finish() or snap
        return live.refine(snap) if exact else snap


def _last_request_time(conv: base.Conversation) -> float | None:
    return next((r.timestamp for r in reversed(conv.requests) if r.timestamp is not None), None)


def inferred_fixed(conv: base.Conversation, message_tokens: Sequence[int]) -> int | None:
    """The system prompt and tool definitions of `conv`'s requests, inferred as Pi's are when the
    file holds neither (Pi session format §6): the first real main-chain request on the current
    context, its prompt tokens minus the estimate of the messages it carried; None without such
    a request or when the estimate already covers the prompt."""
    for request in conv.requests:
        if request.synthetic or request.sidechain or request.message_index is None:
            continue
        before = sum(message_tokens[: request.message_index])
        fixed = request.usage.prompt_tokens - before
        return fixed if fixed > 0 else None
    return None


def provider_view(conv: base.Conversation, message_tokens: Sequence[int], fixed: int = 0,
                  context_tokens: int | None = None, cum: Sequence[int] | None = None) -> Any:
    """The provider's count of `conv`'s context (`ingest.snapshot.ProviderView`), anchored at
    the last real main-chain request whose reply is in the context: its prompt + output, plus
    the estimate (`message_tokens`) of the messages after the reply; `context_tokens` replaces
    that total when the agent records its own (e.g. Codex). `cum`: the prefix sums of
    `message_tokens` (length + 1) when the caller keeps them (O(1) instead of two sums over the
    context). None without such a request."""
    from ds4sessions.ingest.snapshot import ProviderView

    anchor = None
    for request in reversed(conv.requests):
        if request.synthetic or request.sidechain:
            continue
        anchor = request
        break
    if anchor is None or anchor.message_index is None:
        return None
    index = min(anchor.message_index, len(message_tokens) - 1) if message_tokens else 0
    if cum is not None and len(cum) == len(message_tokens) + 1:
        before = fixed + cum[index]
        later = cum[-1] - cum[min(index + 1, len(message_tokens))]
    else:
        before = fixed + sum(message_tokens[:index])
        later = sum(message_tokens[index + 1:])
    usage = anchor.usage
    total = context_tokens if context_tokens is not None else usage.prompt_tokens + usage.output + later
    return ProviderView(
        anchor_index=index, anchor_entry_id=anchor.entry_id, prompt_tokens=usage.prompt_tokens,
        context_tokens=total, estimate_at_anchor=before,
        ratio=(usage.prompt_tokens / before) if before else None,
        later_messages=max(len(message_tokens) - index - 1, 0), cache_read=usage.cache_read,
        cache_write=usage.cache_write,
    )


def core_usage(usage: base.Usage, *, cost: float | None = None, partial: bool = False) -> Any:
    """A neutral `base.Usage` as `ds4core.usage.Usage` (what `ds4core.cache_state` reads)."""
    from ds4core.usage import Usage

    return Usage(input=usage.input, output=usage.output, cache_read=usage.cache_read,
                 cache_write=usage.cache_write, cache_write_1h=usage.cache_write_1h,
                 recorded_cost=cost, partial=partial)


def request_cache_facts(snapshot: Any, now: float, models: ModelTable | None = None, *,
                       lifetimes: Mapping[str, int] | None = None, tier_source: str | None = None,
                       pricing_source: str | None = None, prices: Any = None,
                       miss_causes: Mapping[int, tuple[str, str]] | None = None,
                       expiring_s: float | None = None, no_countdown: str | None = None,
                       memo: dict[str, Any] | None = None) -> Any:
    """The `ds4core.cache_state.CacheFacts` of `snapshot`'s conversation from its requests.

    Every real request once (synthetic ones left out unless `billed`), in file order, as `ds4core.cache_state`
    events: the countdown from the last refresh of the current model, the read share per
    request, misses explained by `ds4core.cache_state` (first request, TTL lapse, prefix changed
    by a compaction or a model switch, unexplained). `lifetimes`: prompt-cache lifetime in
    seconds per tier ("short", "long"; default the model table's `promptCache`; none: no
    countdown); `prices(model) -> Pricing | None` (default the model table's); `miss_causes`:
    request index → (cause, detail) the agent recorded, which win over the inferred cause;
    `no_countdown`: why there is no countdown (replaces `ds4core.cache_state`'s Pi wording when
    the lifetimes are empty); `tier_source`: where the tier comes from, in words.

    `memo`: a dict kept between the snapshots of one live session (the derive pipeline's cache
    stage keeps one): the events of the requests that are the same objects as last time are
    reused and the history resumes after them (`cache_history(resume=...)`), so an append costs
    O(new requests); the result equals the one made without it."""
    from ds4core.cache_state import (
        DEFAULT_EXPIRING_SECONDS, CacheEvent, CacheFacts, PrefixChange, TierChoice, cache_clock, cache_history,
    )

    conv = snapshot.conversation
    table = models or ModelTable.bundled()
    memo = {} if memo is None else memo
    requests = conv.requests
    seen: list[Any] = memo.get("requests") or []
    made: list[Any] = memo.get("made") or []  # per request: its event, or None (left out)
    keep = min(len(seen), len(requests))
    if keep and (seen[0] is not requests[0] or memo.get("provider") != (conv.provider, conv.model)):
        keep = 0
    elif keep:
        keep = next(itertools.compress(itertools.count(), map(operator.is_not, requests[:keep], seen[:keep])), keep)
    by_event: dict[int, base.Request] = (memo.get("byEvent") if keep else None) or {}
    del made[keep:]
    for request in requests[keep:]:
        event = None
        if not ((request.synthetic and not request.billed) or request.timestamp is None):
            key = f"{request.provider or conv.provider}/{request.model or conv.model}"
            event = CacheEvent(request.timestamp, core_usage(request.usage, cost=request.cost_usd),
                               "compaction_call" if request.synthetic else "reply", request.entry_id, key)
            by_event[id(event)] = request
        made.append(event)
    events = [e for e in made if e is not None]
    if len(by_event) > 2 * len(events) + 64:  # requests gone (a rewrite): forget their events
        alive = {id(e) for e in events}
        by_event = {k: v for k, v in by_event.items() if k in alive}
    memo.update(requests=list(requests), made=made, byEvent=by_event, provider=(conv.provider, conv.model))
    model_key = snapshot.model_key

    def pricing_for(key: str | None) -> tuple[Any, str | None]:
        if prices is not None:
            price = prices(key.split("/", 1)[1] if key and "/" in key else key)
            return price, pricing_source if price is not None else None
        provider, _, model_id = (key or "").partition("/")
        info = table.get(provider, model_id)
        return (info.pricing, pricing_source or "model table") if info is not None and info.pricing is not None else (None, None)

    def prompt_cache_for(key: str | None) -> Mapping[str, int] | None:
        if lifetimes is not None:
            return lifetimes
        provider, _, model_id = (key or "").partition("/")
        info = table.get(provider, model_id)
        return info.prompt_cache if info is not None else None

    compaction_times = sorted(c.timestamp for c in conv.compactions if c.timestamp is not None)

    def change(previous: Any, request: Any) -> Any:
        recorded = (miss_causes or {}).get(by_event[id(request)].index) if id(request) in by_event else None
        if recorded is not None:
            return PrefixChange(recorded[0], request.entry_id, None, recorded[1])
        if any(previous.time_s <= t <= request.time_s for t in compaction_times):
            return PrefixChange("compaction", None, None, "a compaction replaced the context since the previous request")
        return None

    resume = memo.get("history") if memo.get("compactions") == compaction_times and memo.get("callbacks") == (
        lifetimes, prices, miss_causes) else None
    history = cache_history(events, pricing_for=pricing_for, prompt_cache_for=prompt_cache_for, prefix_change=change,
                            resume=resume)
    memo.update(history=history, compactions=compaction_times, callbacks=(lifetimes, prices, miss_causes))
    clock = cache_clock(events, model_key=model_key, prompt_cache=prompt_cache_for(model_key))
    if tier_source is not None or (no_countdown is not None and clock.no_countdown is not None):
        tier = TierChoice(clock.tier.tier, tier_source) if tier_source is not None else clock.tier
        reason = no_countdown if no_countdown is not None and clock.no_countdown is not None else clock.no_countdown
        clock = type(clock)(clock.model_key, clock.refresh, tier, clock.lifetime_s, reason)
    expiring = DEFAULT_EXPIRING_SECONDS if expiring_s is None else expiring_s
    last = next((e for e in reversed(events) if e.counted), None)
    end = 0
    if last is not None:
        request = by_event[id(last)]
        if request.message_index is not None and last.usage.cache_read + last.usage.cache_write > 0:
            from ds4core.cache_state import cached_prefix_end

            end = cached_prefix_end(snapshot.best.message_tokens, request_index=request.message_index,
                                    unchanged_prefix=request.message_index,
                                    cached_tokens=last.usage.cache_read + last.usage.cache_write,
                                    prompt_tokens=last.usage.prompt_tokens)
    return CacheFacts(model_key, clock, history, end, pricing_for(model_key)[1], expiring)
