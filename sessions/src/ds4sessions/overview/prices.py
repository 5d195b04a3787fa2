"""A small, agent-neutral price lookup for requests whose agent records no cost.

Prices are data with a source and a date, never constants in code:

1. a request's own recorded cost (`Request.cost_usd`, Pi session format §6) always wins;
2. otherwise the price tables bundled in `ds4core/data/` are tried in order: agent-specific
   tables (`prices-<agent>.json`, when present) first, then the bundled model table
   (`ds4core/data/models.json`, generated from Pi's catalog `@earendil-works/pi-ai`, which names
   its package version and generation date);
3. a model found in none of them has no price: the cost is None and the caller says
   "no price for <model>" (never $0.00).

A price table file is JSON `{"source": {...}, "models": {"<provider>/<id>" | "<id>": {"input",
"output", "cacheRead", "cacheWrite", "tiers"?}}}` in USD per million tokens (the shape of
`models.json`'s `cost`).

Lookup keys tried for a request: `provider/model` as recorded, then `<default provider of the
agent>/model` (Claude Code → anthropic, Codex → openai), then the bare model id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

from ds4core.models import ModelTable, Pricing, _pricing

from ds4sessions.agents.base import CLAUDE_CODE, CODEX, Usage

#: The provider an agent's bare model ids belong to (Claude Code: Anthropic Messages API;
#: Codex: OpenAI Responses API). Pi records the provider on every reply.
DEFAULT_PROVIDER: dict[str, str] = {CLAUDE_CODE: "anthropic", CODEX: "openai"}


@dataclass(frozen=True)
class Price:
    """Prices of one model (USD per million tokens) and where they come from (`source`: a
    short label naming the table and its date, e.g. "@earendil-works/pi-ai 1.6.0, 2026-11-29")."""

    pricing: Pricing
    source: str


def _source_label(source: Mapping[str, Any] | None, fallback: str) -> str:
    if not isinstance(source, Mapping):
        return fallback
    name = source.get("package") or source.get("name") or source.get("url") or fallback
    version = source.get("version")
    date = source.get("generated") or source.get("date") or source.get("retrieved")
    parts = [str(name) + (f" {version}" if version else "")]
    if date:
        parts.append(str(date))
    return ", ".join(parts)


@lru_cache(maxsize=None)
def _agent_table(agent: str) -> tuple[dict[str, Any], str] | None:
    """`ds4core/data/prices-<agent>.json` as (models, source label), None when absent."""
    try:
        text = resources.files("ds4core").joinpath("data", f"prices-{agent}.json").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    models = data.get("models") if isinstance(data, Mapping) else None
    if not isinstance(models, Mapping):
        return None
    return dict(models), _source_label(data.get("source"), f"prices-{agent}.json")


@lru_cache(maxsize=1)
def _bundled() -> ModelTable:
    return ModelTable.bundled()


class PriceBook:
    """Price lookup by (agent, provider, model); each answer is memoised (the tables never change
    while ds4tui runs). `models` is the model table to use (default: the bundled one)."""

    def __init__(self, models: ModelTable | None = None) -> None:
        self._models = models or _bundled()
        self._memo: dict[tuple[str, str | None, str | None], Price | None] = {}

    def _keys(self, agent: str, provider: str | None, model: str) -> list[str]:
        keys = []
        if provider:
            keys.append(f"{provider}/{model}")
        default = DEFAULT_PROVIDER.get(agent)
        if default and default != provider:
            keys.append(f"{default}/{model}")
        return keys

    def price(self, agent: str, provider: str | None, model: str | None) -> Price | None:
        """The price of `model` as used by `agent`, or None when no table knows it."""
        if not model:
            return None
        key = (agent, provider, model)
        if key in self._memo:
            return self._memo[key]
        found: Price | None = None
        keys = self._keys(agent, provider, model)
        table = _agent_table(agent)
        if table is not None:
            models, label = table
            for k in [*keys, model]:
                pricing = _pricing(models.get(k))
                if pricing is not None:
                    found = Price(pricing, label)
                    break
        if found is None:
            label = _source_label(self._models.source, "models.json")
            for k in keys:
                prov, _, mid = k.partition("/")
                info = self._models.get(prov, mid)
                if info is not None and info.pricing is not None:
                    found = Price(info.pricing, label if info.source == "bundled" else info.source)
                    break
        self._memo[key] = found
        return found

    def cost(self, agent: str, provider: str | None, model: str | None, usage: Usage) -> tuple[float | None, str | None]:
        """(catalog cost in USD, price source) of one request's `usage`; (None, None) when the
        model has no price. 1-hour cache writes are priced at 2 × input (Anthropic's rule, as
        `ds4core.models.Pricing.cost`)."""
        price = self.price(agent, provider, model)
        if price is None:
            return None, None
        usd = price.pricing.cost(
            input=usage.input, output=usage.output, cache_read=usage.cache_read,
            cache_write=usage.cache_write, cache_write_1h=usage.cache_write_1h,
        )
        return usd, price.source
