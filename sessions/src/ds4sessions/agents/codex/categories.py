"""Codex's categories: DS4's message kinds (`ds4core.categories.CATEGORIES`) plus the parts of
Codex's own prompt (base instructions, AGENTS.md, the environment context, reasoning, web
search), for the map, the legend and `map --json`."""

from __future__ import annotations

from ds4core.categories import CATEGORIES, CategoryTable

#: Codex's categories: DS4's message kinds, plus the parts of Codex's own prompt.
CODEX_TABLE = CategoryTable(
    labels={
        "system_prompt": "Base instructions",
        "tools": "Tools",
        "instructions": "Instructions (AGENTS.md)",
        "environment": "Environment context",
        **{k: v for k, v in CATEGORIES.items() if k not in ("system_prompt", "tools", "unattributed", "free")},
        "reasoning": "Reasoning",
        "web_search": "Web search",
        "unattributed": CATEGORIES["unattributed"],
        "free": CATEGORIES["free"],
    },
    roles={"instructions": "instructions", "environment": "environment", "reasoning": "thinking", "web_search": "web_search"},
)
