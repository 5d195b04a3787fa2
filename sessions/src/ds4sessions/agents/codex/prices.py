"""Codex's prices: `ds4core/data/openai-prices.json` (OpenAI list prices with their date and
request-wide tiers, made by scripts/make_openai_prices.py) as the plug-in's `price(model)`."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

from ds4core.models import PriceTier, Pricing

from ds4sessions.agents.base import Price, Usage


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


@lru_cache(maxsize=1)
def _openai_table() -> tuple[dict[str, Pricing], str]:
    """`ds4core/data/openai-prices.json` as (bare model id → `Pricing` with its tiers, source
    label); ({}, label) when the file is missing or malformed (every model then has no price)."""
    import json
    from importlib import resources

    try:
        data = json.loads(resources.files("ds4core").joinpath("data", "openai-prices.json").read_text(encoding="utf-8"))
        models = data["models"]
        meta = data.get("source") or {}
    except (OSError, ValueError, KeyError, TypeError):
        return {}, "openai-prices.json (unreadable)"
    upstream = meta.get("upstream") if isinstance(meta, Mapping) else None
    origin = _source_label(upstream, "OpenAI list prices")
    label = f"openai-prices.json, OpenAI list prices {meta.get('date', '?')} (from {origin})"
    out: dict[str, Pricing] = {}
    for model, raw in models.items() if isinstance(models, Mapping) else ():
        try:
            tiers = tuple(PriceTier(int(t["inputTokensAbove"]), float(t.get("input", 0)), float(t.get("output", 0)),
                                    float(t.get("cacheRead", 0)), float(t.get("cacheWrite", 0)))
                          for t in raw.get("tiers") or ())
            out[model] = Pricing(float(raw["input"]), float(raw["output"]), float(raw.get("cacheRead", 0)),
                                 float(raw.get("cacheWrite", 0)), tiers)
        except (KeyError, TypeError, ValueError):
            continue  # a malformed entry: that model has no price
    return out, label


def openai_price(model: str) -> Price | None:
    """Codex: `ds4core/data/openai-prices.json` (OpenAI list prices; a `provider/` prefix is
    ignored, as in `ds4sessions.agents.codex.view.price_for`)."""
    table, label = _openai_table()
    pricing = table.get(model.split("/")[-1])
    if pricing is None:
        return None

    def cost(u: Usage) -> float:
        return pricing.cost(input=u.input, output=u.output, cache_read=u.cache_read, cache_write=u.cache_write,
                            cache_write_1h=u.cache_write_1h)

    return Price(label, cost)
