"""Provider truth: prompt size, anchor selection, cost (bad inputs B09 and B10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ds4core.models import ModelTable
from ds4core.usage import find_anchor, usage_of


def _messages(path: Path) -> list[dict]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [e["message"] for e in lines if e.get("type") == "message"]


def test_cache_read_is_part_of_the_prompt_b09(shared_dir: Path) -> None:
    messages = _messages(shared_dir / "bad-inputs" / "B09-cacheread-in-context.jsonl")
    anchor = find_anchor(messages)
    assert anchor is not None
    assert anchor.usage.prompt_tokens == 51_320
    assert anchor.usage.total == 51_384
    assert anchor.usage.cache_read_share == pytest.approx(51_200 / 51_320)


def test_anchor_skips_zero_missing_and_aborted_usage_b10(shared_dir: Path) -> None:
    path = shared_dir / "bad-inputs" / "B10-usage-missing-or-zero.jsonl"
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    messages = [e["message"] for e in entries if e.get("type") == "message"]
    ids = [e["id"] for e in entries if e.get("type") == "message"]
    anchor = find_anchor(messages)
    assert anchor is not None and ids[anchor.message_index] == "l0000002"
    assert anchor.usage.total == 10_090
    assert len(messages) - anchor.message_index - 1 == 6  # later messages to be estimated
    pricing = ModelTable.bundled().get("anthropic", "claude-sonnet-4-5").pricing
    by_id = dict(zip(ids, messages))
    assert usage_of(by_id["l0000002"]).cost(pricing) == pytest.approx(0.01065)
    assert usage_of(by_id["l0000004"]).is_zero and usage_of(by_id["l0000004"]).cost(pricing) is None
    assert usage_of(by_id["l0000006"]).missing and usage_of(by_id["l0000006"]).cost(pricing) is None
    assert usage_of(by_id["l0000008"]).partial


def test_anchor_ignores_usage_before_the_compaction() -> None:
    old = {"role": "assistant", "stopReason": "stop", "usage": {"input": 10, "output": 5, "cacheRead": 90, "cacheWrite": 0}}
    summary = {"role": "compactionSummary", "summary": "s", "tokensBefore": 100}
    assert find_anchor([summary, old], first_fresh_index=2) is None
    assert find_anchor([summary, old], first_fresh_index=0).usage.prompt_tokens == 100


HOSTILE_COUNTS = [1e308, float("nan"), float("inf"), -float("inf"), 10**30, 2**53 + 1, -1, "12", True, None, [1], {"a": 1}]


@pytest.mark.parametrize("value", HOSTILE_COUNTS, ids=repr)
def test_a_count_that_is_not_one_never_reaches_the_pricing(value: object) -> None:
    """Issue 30: `cacheWrite1h: 1e308` became `int(1e308)` and `Pricing.cost` raised
    OverflowError ("internal error" from `ds4tui cache`). A count outside 0..2**53 (or not a
    number) counts as 0 in `usage_of`, and `Pricing.cost` prices it as 0 whatever it is given."""
    from ds4core.models import Pricing, count_or_none

    pricing = Pricing(3.0, 15.0, 0.3, 3.75)
    for key in ("input", "output", "cacheRead", "cacheWrite", "cacheWrite1h", "totalTokens"):
        usage = usage_of({"role": "assistant", "usage": {"input": 1000, "output": 10, "cacheRead": 0, "cacheWrite": 100,
                                                          "cacheWrite1h": 0, key: value}})
        cost = usage.cost(pricing)
        assert cost is not None and cost == cost and cost < 1, (key, cost)
    assert count_or_none(value) is None
    assert pricing.cost(input=value, output=value, cache_read=value, cache_write=value, cache_write_1h=value) == 0.0  # type: ignore[arg-type]
    recorded = usage_of({"usage": {"cost": {"total": value}}}).recorded_cost
    assert recorded is None or (recorded == recorded and abs(recorded) <= 2**53)


def test_counts_in_range_are_kept() -> None:
    from ds4core.models import count_or_none

    assert [count_or_none(v) for v in (0, 5, 2**53, 7.9, 0.0)] == [0, 5, 2**53, 7, 0]
