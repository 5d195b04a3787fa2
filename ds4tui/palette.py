"""Category colours and glyphs, shared by the TUI and the Rich `map` output."""

from __future__ import annotations

#: Colour per category id (see `ds4core.categories.CATEGORIES`); works on dark and light themes.
COLOURS: dict[str, str] = {
    "system_prompt": "#8a8f98",
    "tools": "#b48ead",
    "user": "#5fafff",
    "assistant_text": "#87d787",
    "thinking": "#d7af5f",
    "tool_calls": "#ff8700",
    "tool_results": "#d75f5f",
    "images": "#87ffd7",
    "bash": "#d787af",
    "compaction": "#00afaf",
    "branch_summary": "#5fd7d7",
    "custom": "#af87ff",
    "other": "#808080",
    "unattributed": "#bcbcbc",
    "free": "#3a3a3a",
    # roles of other agents' own categories (`ds4core.categories.CategoryTable.roles`)
    "tools_deferred": "#8787af",
    "mcp": "#d7afff",
    "agents": "#ffaf87",
    "memory": "#afd75f",
    "skills": "#ffd75f",
    "attachments": "#87afaf",
    "instructions": "#af8787",
    "environment": "#87875f",
    "web_search": "#5f87d7",
    "reserved": "#5f5f87",
}


def colour_of(category: str, roles: object = None) -> str | None:
    """The colour of `category`: its role's (`roles`: category id → role, the agent's
    `CategoryTable.roles`; an id without one is its own role), None when the palette has none."""
    role = roles.get(category, category) if isinstance(roles, dict) else category
    return COLOURS.get(role)


FILLED = "■"
FREE = "·"
EXCLUDED = "▒"
"""A cell of an entry the DS4 plan leaves out."""
PINNED = "◆"
"""A cell of a pinned entry (`ds4:pin` label)."""
UNCACHED = "□"
"""A cell after the cached prefix of the last request (not in the prompt cache yet)."""
BOUNDARY: dict[str, str] = {
    "warm": "#2e7d32",
    "expiring": "#b8860b",
    "cold": "#1f4e8c",
    "unknown": "#5f5f5f",
}
"""Background of the map cell where the cached prefix ends, by cache status (the category's
colour stays in the foreground; the status words are in the header and the legend)."""
COLD = "#5f5f5f"
"""Kept for callers of the old cold grey (the map no longer greys cells)."""
