"""Codex on the one dashboard (issue 28): its categories, Codex's own context count and "% left",
and a prompt cache whose lifetime OpenAI does not record.

The same functions as `ds4tui map|cache --json` on the rollout (`ds4sessions.agents.codex.view`):

- categories: DS4's message kinds (`view.codex_parts`, with the reader's `ds4Category`
  overrides), counted with cl100k; encrypted items (reasoning, remote compaction) are counted
  from their visible part and marked opaque in the inspector and Diagnostics;
- the provider's count: Codex's own `contextTokens` (the last `token_count` event: what Codex
  shows as "% left"), so the rows are calibrated to it;
- the cache: every request once (`Conversation.requests`), priced from `openai-prices.json`; a
  countdown only with a retention the user configures, labelled "typical, not recorded".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ds4core.models import ModelTable, PriceTier, Pricing

from ds4sessions.agents.base import Conversation

@dataclass(frozen=True)
class CodexExtras:
    """Codex's own facts for the screen (`ingest.snapshot.AgentExtras`): its "% left", the
    context state after a compaction, rate limits, the window note, and the problems the reader
    found beyond its diagnostics (`view.problems` minus the diagnostics themselves)."""

    extra: Mapping[str, Any] = field(repr=False)
    notes: tuple[str, ...] = ()

    def header_note(self) -> str | None:
        """"64% left" (Codex's own formula), or the context state when unknown."""
        left = self.extra.get("percentLeft")
        if left is not None:
            return f"{left}% left"
        state = self.extra.get("contextState")
        return str(state) if state else None

    def legend_lines(self) -> list[str]:
        """Rate limits and the window note, in Codex's words."""
        from ds4core.epoch import to_datetime

        lines = []
        if self.extra.get("percentLeft") is not None:
            lines.append(f"{self.extra['percentLeft']}% left (Codex's formula, baseline 12,000 tokens)")
        limits = (self.extra.get("rateLimits") or {}).get("limits") or {}
        for name in ("primary", "secondary"):
            data = limits.get(name)
            if isinstance(data, Mapping) and data.get("used_percent") is not None:
                reset = data.get("resets_at")
                at = to_datetime(reset, utc=True) if isinstance(reset, (int, float)) and not isinstance(reset, bool) else None
                when = at.strftime("%m-%d %H:%M UTC") if at is not None else "?"
                lines.append(f"rate limit {name}: {data['used_percent']}% of {data.get('window_minutes')} min, resets {when}")
        return lines

    def problems(self) -> list[str]:
        """The reader's notes that are not diagnostics (opaque items, forks, window notes)."""
        return list(self.notes)

    def to_json(self) -> dict[str, Any]:
        """`percentLeft`, `contextState`, `codexEstimate`, `rateLimits`, `windowNote`."""
        return {k: self.extra.get(k) for k in ("percentLeft", "contextState", "codexEstimate", "rateLimits", "windowNote")}


def account(conv: Conversation, memo: dict[str, Any], models: ModelTable | None = None) -> Any:
    """The dashboard's accounting of a Codex conversation (module doc): an
    `ingest.conversation.Accounting`; an append counts only the new messages (`view.MapState`
    kept in `memo`)."""
    from ds4sessions.agents.codex import view
    from ds4sessions.agents.plugin import provider_view
    from ds4sessions.ingest.conversation import Accounting, model_info

    from ds4sessions.agents.base import MessageMemo

    state = memo.get("map")
    if state is None:
        state = memo["map"] = view.MapState(exact=True)
        memo["ids"] = MessageMemo(lambda _message, meta: meta.entry_id)
        memo["opaque"] = view.opaque_memo()
    entry_ids = memo["ids"].values(conv)  # (read during the call only: `attribute` keeps none of it)
    attribution = state.attribute(conv.messages, entry_ids, stable=conv.stable)
    context = conv.extra.get("contextTokens")
    context = int(context) if isinstance(context, int) and not isinstance(context, bool) else None
    bd, _ = view.codex_breakdown(conv, attribution, state.cum)
    provider = provider_view(conv, attribution.message_tokens, context_tokens=context, cum=state.cum) if context is not None else None
    model = model_info(conv.provider or "openai", conv.model, conv.context_window, models=models, source="Codex")
    key = f"{conv.provider or 'openai'}/{conv.model}" if conv.model else None
    diagnostics = {str(d) for d in conv.diagnostics}
    notes = tuple(line for line in view.problems(conv, memo["opaque"]) if line not in diagnostics)
    return Accounting(bd, provider, model, key, extras=CodexExtras(conv.extra, notes), tokens_kept=state.kept)


def pricing_of(model: str | None) -> Pricing | None:
    """`openai-prices.json`'s prices of `model` as `ds4core.models.Pricing` (USD per million
    tokens; `tiers` by `inputTokensAbove`), None without a price."""
    from ds4sessions.agents.codex.view import price_for

    raw = price_for(model)
    if raw is None:
        return None
    tiers = tuple(
        PriceTier(int(t["inputTokensAbove"]), float(t.get("input", 0)), float(t.get("output", 0)),
                  float(t.get("cacheRead", 0)), float(t.get("cacheWrite", 0)))
        for t in raw.get("tiers") or () if isinstance(t, Mapping) and isinstance(t.get("inputTokensAbove"), int)
    )
    return Pricing(float(raw.get("input", 0)), float(raw.get("output", 0)), float(raw.get("cacheRead", 0)),
                   float(raw.get("cacheWrite", 0)), tiers)


def cache_facts(snapshot: Any, now: float, models: ModelTable | None = None, *, memo: dict[str, Any] | None = None) -> Any:
    """The prompt cache of a Codex snapshot: `agents.plugin.request_cache_facts`
    with OpenAI's prices and, only when configured (`view.configured_retention`), a "typical"
    lifetime; otherwise no countdown and the reason. `memo`: kept between the snapshots of one
    live session (O(new requests) per append)."""
    from ds4sessions.agents.codex.view import RETENTION_ENV, configured_retention, price_table
    from ds4sessions.agents.plugin import request_cache_facts

    retention = configured_retention()
    source = price_table()["source"]
    return request_cache_facts(
        snapshot, now, models,
        lifetimes={"short": int(retention)} if retention else {},
        tier_source=f"typical, not recorded ({RETENTION_ENV}=codex={retention:.0f})" if retention else "not recorded",
        no_countdown=f"OpenAI records no prompt-cache TTL in Codex rollouts; set {RETENTION_ENV}=codex=SECONDS for a typical countdown",
        pricing_source=f"openai-prices.json ({source.get('from')}, {source.get('date')})",
        prices=pricing_of, memo=memo,
    )
