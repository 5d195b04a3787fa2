"""Provider-reported usage: the prompt size of a request, the context anchor, request cost.

Pi stores a `usage` object on each assistant message: `input` (uncached input), `output`,
`cacheRead`, `cacheWrite`, `totalTokens`, `cost` (USD). `input` excludes cached tokens for every
provider, so the prompt of that request = `input + cacheRead + cacheWrite` (Pi session format §6;
bad input B09: a tiny `input` with a huge `cacheRead` is still a huge prompt).

The *anchor* is the provider's last word on the context size: the latest assistant reply that is
neither aborted nor an error and has non-zero usage, among the replies recorded after the latest
compaction (Pi 1.x ignores older usage; bad input B10). The context now = the anchor's total
(prompt + output) + an estimate of the messages after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ds4core.models import MAX_COUNT, Pricing, count_or_none

_BUCKETS = ("input", "output", "cacheRead", "cacheWrite")

_int = count_or_none
"""A usage count in 0..`MAX_COUNT` (2**53), else None (NaN, infinities, `1e308`, `10**30`,
strings, negatives: issue 30, `int(1e308)` priced to an OverflowError)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """A normalised usage record (tokens). `missing` is True when the message had no usage object;
    `partial` when the reply was aborted or errored (its numbers are not a context measurement).
    Slotted (issue 32): one is kept per reply by the planner inputs and by the cache monitor's
    events (~100 bytes each instead of ~290 with an instance dict)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0
    total_tokens: int | None = None
    recorded_cost: float | None = None
    missing: bool = False
    partial: bool = False

    @property
    def prompt_tokens(self) -> int:
        """Tokens of the request's prompt: input + cacheRead + cacheWrite."""
        return self.input + self.cache_read + self.cache_write

    @property
    def total(self) -> int:
        """Prompt + output: `totalTokens` when recorded, else the sum of the four buckets."""
        return self.total_tokens if self.total_tokens else self.prompt_tokens + self.output

    @property
    def is_zero(self) -> bool:
        """True when every bucket is zero (errored replies, proxies that report nothing)."""
        return self.prompt_tokens == 0 and self.output == 0

    @property
    def cache_read_share(self) -> float | None:
        """cacheRead / prompt tokens, or None for an empty prompt."""
        prompt = self.prompt_tokens
        return self.cache_read / prompt if prompt else None

    def cost(self, pricing: Pricing | None) -> float | None:
        """Catalog cost in USD from `pricing`; None when prices are unknown or the usage is
        missing or all zero (a proxy that reports nothing: "unknown", not $0.00; bad input B10)."""
        if pricing is None or self.missing or self.is_zero:
            return None
        return pricing.cost(
            input=self.input, output=self.output, cache_read=self.cache_read,
            cache_write=self.cache_write, cache_write_1h=self.cache_write_1h,
        )


def usage_of(message: Mapping[str, Any]) -> Usage:
    """The normalised `Usage` of an assistant message (missing or malformed fields count as 0)."""
    raw = message.get("usage")
    partial = message.get("stopReason") in ("aborted", "error")
    if not isinstance(raw, Mapping):
        return Usage(missing=True, partial=partial)
    values = {k: _int(raw.get(k)) or 0 for k in _BUCKETS}
    cost = raw.get("cost")
    recorded = _float(cost.get("total")) if isinstance(cost, Mapping) else None
    return Usage(
        input=values["input"], output=values["output"], cache_read=values["cacheRead"],
        cache_write=values["cacheWrite"], cache_write_1h=_int(raw.get("cacheWrite1h")) or 0,
        total_tokens=_int(raw.get("totalTokens")), recorded_cost=recorded, partial=partial,
    )


def _float(value: Any) -> float | None:
    """A finite number of magnitude at most `MAX_COUNT` as a float, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) and abs(value) > MAX_COUNT:
        return None
    value = float(value)
    return value if abs(value) <= MAX_COUNT else None  # NaN and infinities fail too


def is_valid_measurement(message: Mapping[str, Any]) -> bool:
    """True for an assistant reply whose usage measures the context: not aborted, not an error,
    usage present and non-zero (Pi's rule for estimating context size)."""
    if message.get("role") != "assistant" or message.get("stopReason") in ("aborted", "error"):
        return False
    usage = usage_of(message)
    return not usage.missing and not usage.is_zero


@dataclass(frozen=True)
class Anchor:
    """The reply whose usage anchors the context size. `message_index` indexes the context
    messages; `usage` is its usage (tokens)."""

    message_index: int
    usage: Usage


def find_anchor(messages: Sequence[Mapping[str, Any]], first_fresh_index: int = 0) -> Anchor | None:
    """The latest valid measurement at or after `first_fresh_index` (the first context message
    recorded after the latest compaction), or None."""
    for index in range(len(messages) - 1, first_fresh_index - 1, -1):
        if is_valid_measurement(messages[index]):
            return Anchor(index, usage_of(messages[index]))
    return None
