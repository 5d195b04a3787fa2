"""A small, agent-neutral price lookup for requests whose agent records no cost.

Prices are data with a source and a date, never constants in code:

1. a request's own recorded cost (`Request.cost_usd`, Pi session format §6) always wins;
2. otherwise the price tables bundled in `ds4core/data/` are tried in order: the agent's own
   table (its plug-in's `price(model)`: Claude Code → `claude-prices.json`, Anthropic's pricing
   page with its check date; Codex → `openai-prices.json`, OpenAI list prices with their date
   and request-wide tiers, the table the Codex view prices with) first, then the bundled model
   table (`ds4core/data/models.json`, generated from Pi's catalog `@earendil-works/pi-ai`, which
   names its package version and generation date);
3. a model found in none of them has no price: the cost is None and the caller says
   "no price for <model>" (never $0.00).

Lookup keys tried for a request: `provider/model` as recorded, then `<the agent's
default_provider>/model` (Claude Code → anthropic, Codex → openai), then the bare model id.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping

from ds4core.models import ModelTable, PriceTier, Pricing

from ds4sessions.agents.base import Usage


@dataclass(frozen=True)
class Price:
    """Prices of one model and where they come from (`source`: a short label naming the table
    and its date, e.g. "@earendil-works/pi-ai 1.6.0, 2026-11-29"). `pricing` is the model
    table's per-million prices (None for an agent table with its own `cost_of`)."""

    pricing: Pricing | None
    source: str
    cost_of: Callable[[Usage], float] | None = None

    def cost(self, usage: Usage) -> float:
        """USD of one request's usage."""
        if self.cost_of is not None:
            return self.cost_of(usage)
        assert self.pricing is not None
        return self.pricing.cost(
            input=usage.input, output=usage.output, cache_read=usage.cache_read,
            cache_write=usage.cache_write, cache_write_1h=usage.cache_write_1h,
        )


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


def _plugin(agent: str) -> Any:
    """The agent plug-in named `agent` (loaded on the first price asked: the home screen's first
    paint loads no plug-in)."""
    from ds4sessions.agents.registry import agent_named

    return agent_named(agent)


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
        default = getattr(_plugin(agent), "default_provider", None)
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
        agent_table = getattr(_plugin(agent), "price", None)
        if agent_table is not None:
            own = agent_table(model)
            found = Price(None, own.source, own.cost) if own is not None else None
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
        return price.cost(usage), price.source
