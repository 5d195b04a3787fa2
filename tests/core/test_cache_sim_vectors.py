"""The synthetic prefix-cache simulator against every case of `ds4-vectors/simulator.json`.

Each scenario is replayed the way DS4's `cache-prefix-simulator.test.ts@a03009a4` drives it, and
the per-request usage is compared exactly (DS4 rounds costs to 6 decimals). The vectors' aggregates
(shares, summed costs, ratios) were rounded by the oracle to 9 decimals, JS-style; the same
rounding is applied here and compared exactly. The upstream assertion of each scenario is checked
too.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from ds4core.cache_policy import CachePricing, estimate_request_cost
from ds4core.cache_sim import (
    SimRequest,
    SimUsage,
    conversation,
    java_string_hash,
    keep_recent_tail,
    simulate_request,
    simulate_sequence,
)

from tests.core.vectors import case_names, load_cases

VECTORS = "ds4-vectors/simulator.json"


@pytest.fixture(scope="module")
def cases(shared_dir: Path) -> dict[str, dict[str, Any]]:
    return load_cases(shared_dir, VECTORS)


def _round9(value: float) -> float:
    """The oracle's rounding of aggregates: JS `Math.round(value * 1e9) / 1e9` (ties toward +inf)."""
    scaled = value * 1e9
    low = math.floor(scaled)
    return (low + 1 if scaled - low >= 0.5 else low) / 1e9


def _share(usages: list[SimUsage]) -> float:
    return sum(u.cache_read_tokens for u in usages) / sum(u.total_tokens for u in usages)


def _json(usages: list[SimUsage]) -> list[dict[str, Any]]:
    return [usage.to_json() for usage in usages]


def _tail_run(cap: int, tokens_per_turn: int, turns: int, seed: str, pricing: CachePricing) -> list[SimUsage]:
    requests = [
        keep_recent_tail(conversation(turn, tokens_per_turn, seed), cap) for turn in range(1, turns + 1)
    ]
    return simulate_sequence(requests, pricing)


def _check(case: dict[str, Any]) -> None:
    spec, expected = case["input"], case["expected"]
    pricing = CachePricing.from_json(spec["pricing"])
    scenario = spec.get("scenario")
    if scenario == "append":
        requests = [
            conversation(turn, spec["tokensPerTurn"], spec["seed"]) for turn in range(1, spec["turns"] + 1)
        ]
        assert all(request.fixed_tokens == spec["fixedTokens"] for request in requests)
        usages = simulate_sequence(requests, pricing)
        assert _json(usages) == expected["perRequest"]
        later = usages[1:]
        total_cache = sum(u.cache_read_tokens for u in later)
        total_input = sum(u.input_tokens for u in later)
        assert (total_cache, total_input) == (
            expected["totalCacheAfterFirst"],
            expected["totalInputAfterFirst"],
        )
        assert usages[-1].cache_read_tokens > 0 and total_cache > 10 * total_input
    elif scenario == "slide":
        usages = _tail_run(spec["tailCap"], spec["tokensPerTurn"], spec["turns"], spec["seed"], pricing)
        assert _json(usages) == expected["perRequest"]
        late_share = _share(usages[10:])
        assert _round9(late_share) == expected["lateCacheShare"]
        assert late_share < 0.35
    elif scenario == "wide":
        requests = [
            conversation(turn, spec["tokensPerTurn"], spec["seed"]) for turn in range(1, spec["turns"] + 1)
        ]
        usages = simulate_sequence(requests, pricing)
        assert sum(u.total_tokens for u in usages) == expected["totalTokens"]
        assert sum(u.cache_read_tokens for u in usages) == expected["cacheTokens"]
        assert _round9(_share(usages)) == expected["cacheShare"]
        assert _share(usages) > 0.9
    elif scenario == "compare":

        def run(cap: int, tokens_per_turn: int, turns: int) -> float:
            seed = spec["seeds"].replace("${cap}", str(cap)).replace("${tokensPerTurn}", str(tokens_per_turn))
            return sum(u.cost for u in _tail_run(cap, tokens_per_turn, turns, seed, pricing))

        runs = {
            "appendSmall": run(64_000, 16_000, 20),
            "appendWide": run(500_000, 16_000, 20),
            "giantSmall": run(64_000, 140_000, 8),
            "giantWide": run(500_000, 140_000, 8),
        }
        runs["appendRatio"] = runs["appendWide"] / runs["appendSmall"]
        runs["giantRatio"] = runs["giantWide"] / runs["giantSmall"]
        actual = {key: _round9(value) for key, value in runs.items()}
        assert actual == {key: value for key, value in expected.items() if key != "assertion"}
        assert runs["appendRatio"] < 0.75 and runs["giantRatio"] > 5
    elif scenario == "tool-cycles":
        base = conversation(spec["turns"], spec["tokensPerTurn"], spec["seed"])
        requests = [
            SimRequest(
                (*base.parts, f"tool-call:{cycle}", f"tool-result:{cycle}"),
                base.fixed_tokens,
                (*base.message_tokens, *spec["extra"]),
            )
            for cycle in range(5)
        ]
        usages = simulate_sequence(requests, pricing)
        assert _json(usages) == expected["perRequest"]
        assert _round9(_share(usages[1:])) == expected["laterCacheShare"]
        assert _share(usages[1:]) > 0.95 and usages[0].input_tokens > usages[1].input_tokens
    elif scenario == "switch":
        base = conversation(spec["turns"], spec["tokensPerTurn"], spec["seed"])
        first = simulate_request(None, base, pricing)
        second = simulate_request(base, base, pricing)
        cold = simulate_request(None, base, pricing)
        assert {"first": first.to_json(), "second": second.to_json(), "cold": cold.to_json()} == expected
        assert second.cache_read_tokens == first.total_tokens and cold.input_tokens == cold.total_tokens
    else:  # the candidate comparison has no scenario: two plain request costs
        costs = {
            key: estimate_request_cost(
                spec[key]["totalInputTokens"], spec[key]["reusablePrefixTokens"], pricing
            )
            for key in ("nominal", "cacheAware")
        }
        assert {key: cost.to_json() for key, cost in costs.items()} == expected
        assert costs["cacheAware"].total < costs["nominal"].total  # type: ignore[operator]


@pytest.mark.parametrize("name", case_names(VECTORS))
def test_simulator_vector(cases: dict[str, dict[str, Any]], name: str) -> None:
    _check(cases[name])


def test_java_string_hash_matches_java() -> None:
    # Java: "".hashCode() == 0, "a".hashCode() == 97, "hello".hashCode() == 99162322,
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE; a non-BMP character hashes its surrogates.
    assert java_string_hash("") == "h0"
    assert java_string_hash("a") == "h97"
    assert java_string_hash("hello") == "h99162322"
    assert java_string_hash("polygenelubricants") == "h-2147483648"
    assert java_string_hash("\U0001f600") == f"h{0xD83D * 31 + 0xDE00}"


def test_keep_recent_tail_keeps_the_next_parts_text() -> None:
    full = SimRequest(("p0", "p1", "p2", "p3"), 0, (10, 10, 10, 10))
    kept = keep_recent_tail(full, 25)
    # The newest two parts fit; each contributes its tokens but the text one position later.
    assert kept == SimRequest(("p3", ""), 0, (10, 10))
