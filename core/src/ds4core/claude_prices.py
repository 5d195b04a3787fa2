"""Prices of Claude models (USD per million tokens), from `data/claude-prices.json`.

The table is data with its source and the date it was made: `scripts/make_agent_models.py` writes
it from LiteLLM's `model_prices_and_context_window_backup.json` (the `litellm` wheel), for every
model Claude Code names (base input, 5m / 1h cache writes, cache hits, output; checked against
Claude Code 2.1.337's own `costUSD`, exact on tests/fixtures/claude-2.1.337). A model id matches
the longest listed prefix after dropping a `[1m]` suffix; a model not listed has no price (None),
never a guessed one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any


@dataclass(frozen=True, slots=True)
class ClaudePrice:
    """USD per million tokens for each usage bucket of one model."""

    model: str
    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float

    def cost(self, *, input: int, cache_write_5m: int, cache_write_1h: int, cache_read: int, output: int,
             cache_write_unsplit: int = 0) -> float:
        """USD of one request's buckets (tokens). `cache_write_unsplit`: written tokens whose TTL
        split is not recorded, billed at the 5m rate."""
        return (input * self.input + (cache_write_5m + cache_write_unsplit) * self.cache_write_5m
                + cache_write_1h * self.cache_write_1h + cache_read * self.cache_read + output * self.output) / 1e6


@cache
def price_table() -> dict[str, Any]:
    """The bundled table: `{source, checked, unit, note, models: {id: {input, cache_write_5m,
    cache_write_1h, cache_read, output}}}`."""
    text = resources.files("ds4core").joinpath("data", "claude-prices.json").read_text(encoding="utf-8")
    return json.loads(text)


def claude_price(model: str | None) -> ClaudePrice | None:
    """The price of `model` (longest matching prefix), None when the table has none."""
    if not model:
        return None
    key = model.lower().replace("[1m]", "")
    models = price_table()["models"]
    best = max((m for m in models if key.startswith(m)), key=len, default=None)
    if best is None:
        return None
    p = models[best]
    return ClaudePrice(best, p["input"], p["cache_write_5m"], p["cache_write_1h"], p["cache_read"], p["output"])
