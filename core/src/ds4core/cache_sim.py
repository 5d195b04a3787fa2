"""Synthetic prefix-cache simulator of DS4 0.3.7 (`tests/integration/cache-prefix-simulator.test.ts`).

The provider is modelled as a prefix cache: a request is billed as cache read for the longest run
of leading message parts it shares with the previous request, plus the fixed system/tool prefix
whenever a previous request exists, and as uncached input for the rest. Parts are identified by a
Java-style string hash (multiplier 31, int32 wrap-around, over UTF-16 code units), `"h<int>"`.

`keep_recent_tail` reproduces the upstream truncation loop *including its off-by-one*: it keeps
the token count of part `i` but the text of part `i + 1` (spec §10.7). The DS4 vectors
(`simulator.json`) are computed with it, so it is kept on purpose.

Units: tokens; prices USD per million (`CachePricing`); costs USD rounded to 6 decimals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ds4core.cache_policy import CachePricing, count_common_prefix, estimate_request_cost

__all__ = [
    "SIM_FIXED_TOKENS",
    "SimRequest",
    "SimUsage",
    "conversation",
    "java_string_hash",
    "keep_recent_tail",
    "simulate_request",
    "simulate_sequence",
]

SIM_FIXED_TOKENS = 2_000
"""System prompt plus tools, in tokens, of every generated conversation (upstream constant)."""


def java_string_hash(value: str) -> str:
    """`"h" + hash` where hash = fold(h·31 + code unit) in int32 over the UTF-16 code units of `value`.

    Same as Java's `String.hashCode`; a non-BMP character contributes its two surrogates.
    """
    data = value.encode("utf-16-le", "surrogatepass")
    output = 0
    for index in range(0, len(data), 2):
        unit = data[index] | (data[index + 1] << 8)
        output = (output * 31 + unit) & 0xFFFFFFFF
    if output >= 0x80000000:
        output -= 0x100000000
    return f"h{output}"


@dataclass(frozen=True)
class SimRequest:
    """One synthetic request: serialized message `parts`, the fixed prefix and per-part token estimates.

    `message_tokens[i]` is the token estimate of `parts[i]`; `fixed_tokens` is the system + tools
    prefix, which the simulator treats as stable across requests.
    """

    parts: tuple[str, ...]
    fixed_tokens: int
    message_tokens: tuple[int, ...]


@dataclass(frozen=True)
class SimUsage:
    """Billed usage of one simulated request: tokens and cost (USD, 6 decimals; 0 if unpriced)."""

    input_tokens: int
    cache_read_tokens: int
    total_tokens: int
    cost: float

    def to_json(self) -> dict[str, int | float]:
        """`{"inputTokens", "cacheReadTokens", "totalTokens", "cost"}` as in the vectors."""
        return {
            "inputTokens": self.input_tokens,
            "cacheReadTokens": self.cache_read_tokens,
            "totalTokens": self.total_tokens,
            "cost": self.cost,
        }


def simulate_request(previous: SimRequest | None, current: SimRequest, pricing: CachePricing) -> SimUsage:
    """Bill `current` against the cache left by `previous` (None: cold, as after a model switch).

    Reusable = fixed tokens (only if a previous request exists) + the positive, finite token
    estimates of the common leading parts (compared by `java_string_hash`), capped at the total.
    """
    previous_hashes = [java_string_hash(part) for part in previous.parts] if previous else []
    current_hashes = [java_string_hash(part) for part in current.parts]
    common = count_common_prefix(previous_hashes, current_hashes)
    message_reusable = sum(tokens for tokens in current.message_tokens[:common] if tokens > 0)
    fixed_reusable = current.fixed_tokens if previous else 0
    total = current.fixed_tokens + sum(current.message_tokens)
    reusable = min(total, fixed_reusable + message_reusable)
    cost = estimate_request_cost(total, reusable, pricing).total
    return SimUsage(total - reusable, reusable, total, 0 if cost is None else cost)


def simulate_sequence(requests: Iterable[SimRequest], pricing: CachePricing) -> list[SimUsage]:
    """Simulate requests in order, each against the one before (the first one is cold)."""
    usages: list[SimUsage] = []
    previous: SimRequest | None = None
    for request in requests:
        usages.append(simulate_request(previous, request, pricing))
        previous = request
    return usages


def conversation(turns: int, tokens_per_turn: int, seed: str = "") -> SimRequest:
    """`turns` user/assistant pairs (`user:<seed>t<i>`, `assistant:<seed>a<i>`) with a 2,000-token
    fixed prefix; each pair splits `tokens_per_turn` as floor/ceil of half."""
    parts: list[str] = []
    tokens: list[int] = []
    for index in range(turns):
        parts += [f"user:{seed}t{index}", f"assistant:{seed}a{index}"]
        tokens += [tokens_per_turn // 2, -(-tokens_per_turn // 2)]
    return SimRequest(tuple(parts), SIM_FIXED_TOKENS, tuple(tokens))


def keep_recent_tail(full: SimRequest, tail_cap: int) -> SimRequest:
    """The upstream "planner keeps the last `tail_cap` tokens" truncation, off-by-one included.

    Walks parts newest first while budget remains, skipping any part larger than the remaining
    budget. A kept part contributes its own token count but the *text of the next part*
    (`parts[i + 1]`, `""` past the end): the upstream test's bug, reproduced because the DS4
    vectors depend on it.
    """
    budget = tail_cap
    kept_parts: list[str] = []
    kept_tokens: list[int] = []
    parts: Sequence[str] = full.parts
    for index in range(len(full.message_tokens) - 1, -1, -1):
        if budget <= 0:
            break
        tokens = full.message_tokens[index]
        if tokens > budget:
            continue
        kept_parts.insert(0, parts[index + 1] if index + 1 < len(parts) else "")
        kept_tokens.insert(0, tokens)
        budget -= tokens
    return SimRequest(tuple(kept_parts), full.fixed_tokens, tuple(kept_tokens))
