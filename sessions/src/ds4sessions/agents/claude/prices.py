"""Claude Code's prices: `ds4core.claude_prices` (Anthropic's pricing page, with its own 5m / 1h
cache-write rates) as the plug-in's `price(model)`."""

from __future__ import annotations

from ds4sessions.agents.base import Price, Usage


def claude_code_price(model: str) -> Price | None:
    """Claude Code: `ds4core.claude_prices` (Anthropic's pricing page, with its own 5m / 1h
    cache-write rates)."""
    from ds4core.claude_prices import claude_price, price_table

    found = claude_price(model)
    if found is None:
        return None
    table = price_table()
    source = f"Anthropic pricing page, checked {table.get('checked', '?')}"

    def cost(u: Usage) -> float:
        unsplit = max(u.cache_write - u.cache_write_5m - u.cache_write_1h, 0)
        return found.cost(input=u.input, cache_write_5m=u.cache_write_5m, cache_write_1h=u.cache_write_1h,
                          cache_read=u.cache_read, output=u.output, cache_write_unsplit=unsplit)

    return Price(source, cost)
