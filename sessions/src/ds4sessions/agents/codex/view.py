"""JSON views of a Codex `Conversation` for `ds4tui map|cache|context --json` (agent "codex").

Shapes follow the Pi commands where the facts exist (`contextWindow`, `estimate`, `categories`,
`provider`, `turns`, `diagnostics`, `problems` for map; `history`, `state` for cache) and add
the Codex facts: Codex's own context count and "% left" (`tokens.percent_left`), the window note,
rate limits, opaque bytes. Token counts: cl100k (`ds4core.tokens.Cl100kCounter`) or chars-v1.

Tools: the system message's tool definitions (the reader's, inferred per Codex version) plus the
first request's remainder (`first_request_remainder`: Codex's count of it − our estimate of what it
carried), both under Tools, inferred; what is left is `unattributed`.

Prices: `ds4core/data/openai-prices.json` (USD per million tokens; source and date inside,
made by scripts/make_openai_prices.py). A model without a price gets `costUsd: null` and a note.
Cache: OpenAI records no TTL (`Capabilities.cache_ttl_recorded` False); a countdown is given only
for a retention the user configures (`DS4TUI_CACHE_RETENTION=codex=SECONDS`, the one setting of
`ds4sessions.retention`), labelled "typical, not recorded".
"""

from __future__ import annotations

import itertools
import json
import operator
from functools import cache
from importlib import resources
from typing import Any, Mapping, Sequence

from ds4core.categories import Attribution, Breakdown, attribute, compose_breakdown, message_parts
from ds4core.spare import Spares
from ds4core.tokens import CharsV1Counter, Cl100kCounter, TokenLedger
from ds4sessions.agents.base import Conversation, MessageMemo, Request
from ds4sessions.agents.codex.tokens import usable_window, window_note

RETENTION_ENV = "DS4TUI_CACHE_RETENTION"
"""Environment variable whose `codex=SECONDS` entry is the prompt-cache retention to assume for
Codex sessions (`ds4sessions.retention`)."""


def codex_parts(message: Mapping[str, Any]) -> list[tuple[str, str | None, Any]]:
    """`ds4core.categories.message_parts`, with the reader's `ds4Category` override applied
    (e.g. Codex's compaction summary, written as a user message, counts as "compaction")."""
    parts = message_parts(message)
    override = message.get("ds4Category") if isinstance(message, Mapping) else None
    if isinstance(override, str):
        return [(override, None, payload) for _, _, payload in parts]
    return parts


@cache
def price_table() -> dict[str, Any]:
    """The bundled OpenAI price table (`source`, `models`), read once."""
    text = resources.files("ds4core").joinpath("data", "openai-prices.json").read_text(encoding="utf-8")
    return json.loads(text)


def price_for(model: str | None) -> Mapping[str, Any] | None:
    """Prices of `model` (USD per million tokens), None when the table has none. A provider
    prefix (`openai/`) is ignored."""
    if not model:
        return None
    return price_table()["models"].get(model.split("/")[-1])


def request_cost(request: Request, prices: Mapping[str, Any] | None) -> float | None:
    """USD for one request at list prices (uncached input, cached input, cache write, output;
    the tier above `inputTokensAbove` prompt tokens when listed), None without prices."""
    if prices is None:
        return None
    u = request.usage
    rates = prices
    for tier in prices.get("tiers") or ():
        if isinstance(tier, Mapping) and u.prompt_tokens > tier.get("inputTokensAbove", 1 << 62):
            rates = tier
    return (u.input * rates.get("input", 0) + u.cache_read * rates.get("cacheRead", 0)
            + u.cache_write * rates.get("cacheWrite", 0) + u.output * rates.get("output", 0)) / 1e6


def _usage_json(request: Request) -> dict[str, int]:
    u = request.usage
    return {"input": u.input, "cacheRead": u.cache_read, "cacheWrite": u.cache_write, "output": u.output,
            "reasoning": u.reasoning}


def opaque_in_context(conv: Conversation, memo: MessageMemo | None = None) -> tuple[int, int]:
    """(items, bytes) of encrypted content (reasoning, remote compaction) in the current context:
    the messages whose `MessageMeta.opaque` is set, sized by their `opaqueBytes`. O(messages),
    or O(new messages) with a `memo` (`opaque_memo()`) kept by a live session."""
    if memo is None:
        sizes = [_opaque_size(m, meta) for m, meta in zip(conv.messages, conv.meta)]
    else:
        sizes = memo.values(conv)
    return len(sizes) - sizes.count(None), sum(filter(None, sizes))


def opaque_memo() -> MessageMemo:
    """A `MessageMemo` of each message's encrypted bytes (None: not opaque), for `opaque_in_context`."""
    return MessageMemo(_opaque_size)


def _opaque_size(message: Mapping[str, Any], meta: Any) -> int | None:
    if not meta.opaque:
        return None
    found = message.get("opaqueBytes") or 0
    for block in message.get("content") or ():
        if type(block) is dict:
            found += block.get("opaqueBytes", 0)
    return int(found)


def problems(conv: Conversation, opaque: MessageMemo | None = None) -> list[str]:
    """One line per thing worth the user's attention: diagnostics, unknown types, opaque content
    (`opaque`: a live session's `opaque_memo()`)."""
    lines = [str(d) for d in conv.diagnostics]
    extra = conv.extra
    if extra.get("contextState") == "unknown after compaction":
        est = extra.get("codexEstimate")
        lines.append("context unknown right after a compaction until the next request"
                     + (f" (Codex's own estimate: {est:,} tokens)" if est else ""))
    items, size = opaque_in_context(conv, opaque)
    if items:
        lines.append(f"{items} encrypted item(s) in the context, {size:,} bytes: opaque, not in the estimate")
    inherited = extra.get("inherited") or {}
    if inherited.get("path"):
        lines.append(f"forked from thread {extra['forkedFrom']}: {inherited['rows']} inherited rows read from {inherited['path']}")
    elif extra.get("forkedFrom"):
        lines.append(f"forked from thread {extra['forkedFrom']}: the history it inherited is in the parent's rollout (not found)")
    if extra.get("windowNote"):
        lines.append(str(extra["windowNote"]))
    return lines


def new_ledger(exact: bool = True) -> TokenLedger:
    """A token ledger for Codex messages (cl100k or chars-v1, `codex_parts` split); keep one per
    live session so unchanged messages are not counted again."""
    return TokenLedger(Cl100kCounter() if exact else CharsV1Counter(), codex_parts)


class MapState:
    """What `map_json` keeps between calls on one live session: the token ledger, and the last
    attribution with the message objects it covered, so an append counts only the new messages
    (`ds4core.categories.attribute(previous=...)`). A compaction or rollback (a changed prefix)
    starts over. `cum`: the prefix sums of the last attribution's per-message tokens
    (`cum[i]` = tokens of messages `[0, i)`, length messages + 1), extended in O(new)."""

    def __init__(self, exact: bool = True) -> None:
        self.ledger = new_ledger(exact)
        self.messages: tuple[Mapping[str, Any], ...] = ()
        self.attribution: Attribution | None = None
        self.cum: list[int] = [0]
        self.kept = 0  # how many leading message tokens the last `attribute` kept from the one before
        self._spares = Spares()

    def prepare(self) -> None:
        """Copy the last attribution's lists now, for the next append's `attribute` (called by
        `ingest.conversation.ConversationLive.prepare` once the screen painted; `ds4core.spare`)."""
        if self.attribution is not None:
            self._spares.prepare([self.attribution.segments, self.attribution.message_tokens])

    def attribute(self, messages: tuple[Mapping[str, Any], ...], entry_ids: list[str | None],
                  stable: int | None = None) -> Attribution:
        """The attribution of `messages`, extending the previous one when it covers a prefix.
        `stable` (`Conversation.stable`): how many leading messages are the previous call's very
        objects (checked at both ends); without it the prefix is compared (a tuple comparison in
        C that checks identity first: O(messages))."""
        old = self.messages
        previous = self.attribution
        if previous is not None:
            if stable is not None:
                keep = min(stable, len(old), len(messages))
                if keep < len(old) or (keep and (messages[0] is not old[0] or messages[keep - 1] is not old[keep - 1])):
                    previous = None
            elif len(old) > len(messages) or tuple(old) != tuple(messages[:len(old)]):
                previous = None
        self.kept = len(previous.message_tokens) if previous is not None else 0
        self.attribution = attribute(messages, entry_ids, self.ledger, previous, copy=self._spares.copy)
        self.messages = messages
        cum, tokens = self.cum, self.attribution.message_tokens
        if previous is None:
            del cum[1:]
        running = cum[-1]
        for n in tokens[len(cum) - 1:]:
            running += n
            cum.append(running)
        return self.attribution


FIRST_REQUEST_REMAINDER = "first-request remainder (inferred)"
"""The child of the Tools row holding `first_request_remainder`."""


def _first_in_context(requests: Sequence[Any]) -> Any:
    """The first request that is not synthetic and has a message index (None without one). The
    requests before the last compaction have none: they are skipped in C (a 95 MiB rollout holds
    17,000 of them; a Python loop over them cost ~2 ms an append, issue 36)."""
    indexed = itertools.compress(requests, map(operator.is_not, map(operator.attrgetter("message_index"), requests),
                                               itertools.repeat(None)))
    return next((r for r in indexed if not r.synthetic), None)


def first_request_remainder(conv: Conversation, message_tokens: list[int], cum: list[int] | None = None) -> int | None:
    """Tokens the first request of the current context carried beyond our estimate of the messages
    it carried (`message_tokens`: per message, the same counter; the system message holds the tool
    definitions): what the rollout does not record — how Codex frames the tool definitions and the
    input items for the model. Codex's own count of that request (`token_count`, codex-rs
    `TokenUsage::input_tokens`) minus the estimate, never negative; None without such a request.
    The same inference as Claude Code's fixed part (`ds4core.claude_context.fixed_part`)."""
    if conv.extra.get("forkedFrom") and not (conv.extra.get("inherited") or {}).get("path"):
        return None  # a fork whose parent is not read: its first request carried history we lack
    first = _first_in_context(conv.requests)
    if first is None or first.message_index is None:
        return None
    before = cum[min(first.message_index, len(cum) - 1)] if cum is not None else sum(message_tokens[: first.message_index])
    return max(first.usage.prompt_tokens - before, 0)


def codex_breakdown(conv: Conversation, attribution: Attribution, cum: list[int] | None = None) -> tuple[Breakdown, int | None]:
    """The context of a Codex conversation by Codex's categories (`categories.CODEX_TABLE`):
    the attribution of its messages, calibrated against Codex's own count (`contextTokens`), with
    the first request's remainder (`first_request_remainder`: Codex's framing of the tools and
    items) moved out of unattributed into Tools, inferred. Returns it and the remainder (None
    when there is none). The one breakdown `map --json` and the dashboard show."""
    from ds4sessions.agents.codex.categories import CODEX_TABLE

    context = conv.extra.get("contextTokens")
    context = context if isinstance(context, int) and not isinstance(context, bool) else None
    bd = compose_breakdown(attribution, context_window=conv.context_window, provider_tokens=context, table=CODEX_TABLE)
    remainder = first_request_remainder(conv, attribution.message_tokens, cum)
    if remainder and context is not None:
        moved = min(remainder, bd.unattributed)
        if moved > 0:
            bd = compose_breakdown(attribution, context_window=conv.context_window, provider_tokens=context,
                                   table=CODEX_TABLE, fixed=[("tools", moved, True, FIRST_REQUEST_REMAINDER)])
    return bd, remainder


def map_json(conv: Conversation, *, exact: bool = True, ledger: TokenLedger | None = None,
             state: MapState | None = None) -> dict[str, Any]:
    """The `map --json` object for a Codex conversation (see module doc). `state` (a `MapState`
    kept per live session) makes an append O(new messages); `ledger` alone memoises counts; a
    fresh ledger is made when both are None."""
    extra = conv.extra
    context = extra.get("contextTokens")
    entry_ids = [m.entry_id for m in conv.meta]
    if state is not None:
        attribution = state.attribute(conv.messages, entry_ids)
    else:
        attribution = attribute(conv.messages, entry_ids, ledger or new_ledger(exact))
    bd, remainder = codex_breakdown(conv, attribution)
    estimate, unattributed = bd.estimate, bd.unattributed
    anchor = conv.last_request
    rows = [
        {"id": r.id, "label": r.label, "tokens": r.tokens, "inferred": r.inferred,
         "children": [{"name": n, "tokens": t} for n, t in r.children]}
        for r in bd.rows
    ]
    configured, note = extra.get("configuredWindow"), extra.get("windowNote")
    configured_source = "config.toml" if configured else None
    if configured is None:
        catalog = (price_for(conv.model) or {}).get("contextWindow")
        if isinstance(catalog, int) and usable_window(catalog) == extra.get("recordedWindow"):
            configured, configured_source = catalog, "openai-prices.json"
            note = window_note(extra.get("recordedWindow"), catalog)
    turns = []
    for i, turn in enumerate(extra.get("turns") or ()):
        turns.append({"index": i, "turnId": turn.get("turnId"), "model": turn.get("model"), "effort": turn.get("effort"),
                      "time": turn.get("time")})
    return {
        "agent": conv.agent,
        "path": str(conv.path),
        "sessionId": conv.session_id,
        "title": conv.title,
        "cwd": conv.cwd,
        "parent": conv.parent,
        "model": conv.model,
        "effort": extra.get("effort"),
        "contextWindow": conv.context_window,
        "recordedWindow": extra.get("recordedWindow"),
        "configuredWindow": configured,
        "configuredWindowSource": configured_source,
        "windowNote": note,
        "estimator": bd.counter,
        "estimate": estimate,
        "unattributed": unattributed,
        "firstRequestRemainder": remainder,
        "free": bd.free,
        "contextTokens": context,
        "contextState": extra.get("contextState"),
        "codexEstimate": extra.get("codexEstimate"),
        "percentLeft": extra.get("percentLeft"),
        "autoCompact": extra.get("autoCompact"),
        "provider": None if anchor is None or context is None else {
            "anchorEntryId": anchor.entry_id, "promptTokens": anchor.usage.prompt_tokens, "contextTokens": context,
        },
        "systemInferred": False,
        "toolsRecorded": extra.get("toolsRecorded"),
        "toolsInferred": extra.get("toolsInferred"),
        "opaque": {"inContext": dict(zip(("items", "encryptedBytes"), opaque_in_context(conv))),
                   "inFile": extra.get("opaque"),
                   "note": "encrypted reasoning / remote compaction: opaque; bytes counted, not tokenised"},
        "categories": rows,
        "turns": turns,
        "compactions": [{"entryId": c.entry_id, "time": c.timestamp, "kind": c.kind, "tokensBefore": c.tokens_before,
                         "opaque": c.opaque} for c in conv.compactions],
        "rateLimits": extra.get("rateLimits"),
        "spawnedAgents": extra.get("spawnedAgents"),
        "rowTypes": extra.get("rowTypes"),
        "eventTypes": extra.get("eventTypes"),
        "diagnostics": sum((extra.get("diagnosticCounts") or {}).values()),
        "problems": problems(conv),
    }


def cache_json(conv: Conversation, at: float, retention: float | None = None) -> dict[str, Any]:
    """The `cache --json` object: per-request cached share and cost, totals counting each request
    once, and the cache state (a countdown only with a configured `retention` in seconds)."""
    records = []
    totals = {"requests": 0, "inputTokens": 0, "cacheReadTokens": 0, "cacheWriteTokens": 0, "outputTokens": 0}
    cost_total = 0.0
    priced = True
    compaction_calls = set(conv.extra.get("compactionCalls") or ())
    for r in conv.requests:
        prices = price_for(r.model or conv.model)
        cost = request_cost(r, prices)
        if cost is None:
            priced = False
        else:
            cost_total += cost
        share = r.usage.cache_read_share
        records.append({"number": r.index + 1, "entryId": r.entry_id, "time": r.timestamp, "model": r.model,
                        "share": share, "usage": _usage_json(r), "catalogUsd": cost,
                        "compactionCall": r.index in compaction_calls})
        totals["requests"] += 1
        totals["inputTokens"] += r.usage.input
        totals["cacheReadTokens"] += r.usage.cache_read
        totals["cacheWriteTokens"] += r.usage.cache_write
        totals["outputTokens"] += r.usage.output
    prompt = totals["inputTokens"] + totals["cacheReadTokens"] + totals["cacheWriteTokens"]
    last = conv.requests[-1] if conv.requests else None
    if last is None or last.timestamp is None:
        state = {"status": "none", "words": "no requests", "reason": "no model request recorded yet", "ttlRecorded": False,
                 "retentionSeconds": retention, "remainingSeconds": None, "label": None}
    elif retention is None:
        state = {"status": "unknown", "words": "unknown", "reason": "OpenAI records no prompt-cache TTL in Codex rollouts; set "
                 f"{RETENTION_ENV}=codex=SECONDS for a typical countdown", "ttlRecorded": False,
                 "retentionSeconds": None, "remainingSeconds": None, "label": None}
    else:
        remaining = last.timestamp + retention - at
        state = {"status": "warm" if remaining > 0 else "cold", "words": "warm (typical)" if remaining > 0 else "probably cold (typical)",
                 "reason": f"last request {max(at - last.timestamp, 0):.0f} s ago; retention {retention:.0f} s configured",
                 "ttlRecorded": False, "retentionSeconds": retention, "remainingSeconds": max(remaining, 0.0),
                 "label": "typical, not recorded"}
    model = conv.model
    source = price_table()["source"]
    return {
        "agent": conv.agent,
        "path": str(conv.path),
        "at": at,
        "model": model,
        "state": state,
        "pricingSource": f"openai-prices.json ({source.get('from')}, {source.get('date')})",
        "priceNote": None if priced else f"no price for {model or 'an unknown model'} in the OpenAI price table",
        "history": {"requests": len(records), "records": records, "overallShare": (totals["cacheReadTokens"] / prompt) if prompt else None},
        "totals": totals,
        "costUsd": cost_total if priced and records else None,
    }


def context_json(conv: Conversation) -> dict[str, Any]:
    """The `context --json` object: the messages the model saw after the last compaction
    (Pi-shaped), with their neutral meta, plus the model and window."""
    return {
        "agent": conv.agent,
        "path": str(conv.path),
        "sessionId": conv.session_id,
        "model": conv.model,
        "provider": conv.provider,
        "contextWindow": conv.context_window,
        "messageCount": len(conv.messages),
        "messages": list(conv.messages),
        "meta": [{"entryId": m.entry_id, "category": m.category, "tool": m.tool, "opaque": m.opaque, "source": m.source}
                 for m in conv.meta],
        "compactions": len(conv.compactions),
        "diagnostics": [str(d) for d in conv.diagnostics],
    }


def configured_retention() -> float | None:
    """The `codex` entry of `$DS4TUI_CACHE_RETENTION` (or the deprecated
    `$DS4TUI_CODEX_CACHE_RETENTION`) in seconds (> 0), None when unset or invalid."""
    from ds4sessions.retention import retention_from_env

    value = retention_from_env().get("codex")
    return float(value) if value is not None else None
