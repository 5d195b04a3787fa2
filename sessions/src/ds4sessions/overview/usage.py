"""Usage roll-ups across agents, like ccusage's daily / session / model reports.

Input: `SessionSummary.usage` rows, in which every request of a session is already counted once
(the agents' readers fold Claude Code's streamed rows and repeats, Codex's re-emitted
`token_count` events and fork replays into `Conversation.requests`). This module only sums them.

`rollup(summaries, by="day" | "session" | "model" | "agent", since="YYYY-MM-DD")` → `Rollup`:
one `RollupRow` per key (sorted by key; days ascending), plus a total. Tokens are disjoint
buckets (input, cache read, cache write, output); cost in USD over priced requests; a model
without any price is named in `unpriced_models` and its requests counted in `unpriced`
(their cost is unknown, not $0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Literal

from ds4sessions.overview.summary import SessionSummary

By = Literal["day", "session", "model", "agent"]
BY_CHOICES: tuple[str, ...] = ("day", "session", "model", "agent")


@dataclass
class RollupRow:
    """Totals for one key: `requests`, token buckets (tokens), `cost_usd`, `unpriced` requests,
    `unpriced_models`, `agents` and `models` seen, `price_sources` used."""

    key: str
    requests: int = 0
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    unpriced_models: set[str] = field(default_factory=set)
    agents: set[str] = field(default_factory=set)
    models: set[str] = field(default_factory=set)
    price_sources: set[str] = field(default_factory=set)

    @property
    def total_tokens(self) -> int:
        """input + cache read + cache write + output."""
        return self.input + self.cache_read + self.cache_write + self.output

    def to_json(self) -> dict[str, Any]:
        """ccusage-like JSON (camelCase), sets as sorted lists; `costUSD` None when nothing was
        priced."""
        priced = self.requests - self.unpriced
        return {
            "key": self.key,
            "requests": self.requests,
            "inputTokens": self.input,
            "cacheReadTokens": self.cache_read,
            "cacheWriteTokens": self.cache_write,
            "outputTokens": self.output,
            "totalTokens": self.total_tokens,
            "costUSD": round(self.cost_usd, 6) if priced else None,
            "unpricedRequests": self.unpriced,
            "unpricedModels": sorted(self.unpriced_models),
            "agents": sorted(self.agents),
            "models": sorted(self.models),
            "priceSources": sorted(self.price_sources),
        }


@dataclass
class Rollup:
    """The rows of one roll-up (`by`), in key order, and their `total`."""

    by: str
    since: str | None
    rows: list[RollupRow]
    total: RollupRow

    def to_json(self) -> dict[str, Any]:
        """{"by", "since", "rows": [...], "total": {...}}."""
        return {"by": self.by, "since": self.since, "rows": [r.to_json() for r in self.rows],
                "total": self.total.to_json()}


def _key(summary: SessionSummary, day: str, model: str, by: str) -> str:
    if by == "day":
        return day
    if by == "model":
        return model
    if by == "agent":
        return summary.agent
    return summary.path


def rollup(summaries: Iterable[SessionSummary], by: str = "day", since: str | None = None) -> Rollup:
    """Sum every session's usage rows by `by`, keeping days ≥ `since` (local `YYYY-MM-DD`;
    requests of unknown day are left out when `since` is given). Raises ValueError for an
    unknown `by`."""
    if by not in BY_CHOICES:
        raise ValueError(f"--by must be one of {', '.join(BY_CHOICES)}, not {by!r}")
    rows: dict[str, RollupRow] = {}
    total = RollupRow("total")
    for summary in summaries:
        for u in summary.usage:
            if since is not None and (u.day == "unknown" or u.day < since):
                continue
            key = _key(summary, u.day, u.model, by)
            for row in (rows.setdefault(key, RollupRow(key)), total):
                row.requests += u.requests
                row.input += u.input
                row.cache_read += u.cache_read
                row.cache_write += u.cache_write
                row.output += u.output
                row.cost_usd += u.cost_usd
                row.unpriced += u.unpriced
                if u.unpriced:
                    row.unpriced_models.add(u.model)
                row.agents.add(summary.agent)
                row.models.add(u.model)
                if u.price_source:
                    row.price_sources.add(u.price_source)
    ordered = [rows[k] for k in sorted(rows)]
    return Rollup(by, since, ordered, total)
