"""ds4core.cache_state: tier, countdown states, history, miss explainer, cached prefix.

Values come from Pi's own samples (sessions-pi 01 and 02: Anthropic usage and costs recorded by
Pi 1.6.0) and from the bundled model table (claude-opus-4-5: promptCache short 300 s, long 3600 s).
"""

from __future__ import annotations

import pytest

from ds4core.cache_state import (
    CacheEvent,
    PrefixChange,
    cache_clock,
    cache_history,
    cached_prefix_end,
    fmt_duration,
    price_check,
    resolve_tier,
)
from ds4core.models import ModelTable
from ds4core.usage import Usage, usage_of

OPUS = "anthropic/claude-opus-4-5"
T0 = 1_772_446_053.508  # 02-abort-error-bash, request f2ff485a (ms timestamp / 1000)


def reply(time_s: float, *, read: int, write: int, input: int = 3, write_1h: int = 0,
          stop: str = "stop", model: str = OPUS, entry: str = "r") -> CacheEvent:
    usage = usage_of({"stopReason": stop, "usage": {
        "input": input, "output": 10, "cacheRead": read, "cacheWrite": write, "cacheWrite1h": write_1h}})
    return CacheEvent(time_s, usage, "reply", entry, model)


@pytest.fixture(scope="module")
def opus_cache() -> dict[str, int]:
    info = ModelTable.bundled().get("anthropic", "claude-opus-4-5")
    assert info is not None
    return dict(info.prompt_cache)


def test_bundled_lifetimes_are_data(opus_cache: dict[str, int]) -> None:
    assert opus_cache == {"short": 300, "long": 3600}


def test_fmt_duration() -> None:
    assert [fmt_duration(s) for s in (299.2, 60, 59.01, 0.2, 0, -5, 3600)] == [
        "5:00", "1:00", "1:00", "0:01", "0:00", "0:00", "1:00:00"]


def test_tier_detection_and_retention() -> None:
    short = [reply(T0, read=100, write=50)]
    long = [reply(T0, read=100, write=50, write_1h=50)]
    assert resolve_tier(short).tier == "short"
    assert resolve_tier(short, "long").tier == "long"
    assert resolve_tier(short, "long").source == "PI_CACHE_RETENTION=long"
    assert resolve_tier(long).tier == "long"
    assert resolve_tier(long).source.startswith("detected")
    assert resolve_tier(short, "none").tier == "none"
    assert resolve_tier(short, "bogus").tier == "short"


def test_countdown_warm_expiring_cold(opus_cache: dict[str, int]) -> None:
    clock = cache_clock([reply(T0, read=2369, write=1620)], model_key=OPUS, prompt_cache=opus_cache)
    assert clock.lifetime_s == 300 and clock.expires_at_s == pytest.approx(T0 + 300)
    warm = clock.state(T0 + 10)
    assert (warm.status, warm.countdown, warm.words) == ("warm", "4:50", "warm · 4:50 left")
    assert clock.state(T0 + 240).status == "warm"  # exactly 60 s left is not below 60
    expiring = clock.state(T0 + 240.5)
    assert (expiring.status, expiring.countdown) == ("expiring", "1:00")
    assert clock.state(T0 + 299.9).status == "expiring"
    cold = clock.state(T0 + 300)
    assert (cold.status, cold.countdown, cold.words) == ("cold", None, "cold")
    assert cold.reason.startswith("expired 0 s ago")
    assert clock.state(T0 + 200, expiring_s=120).status == "expiring"


def test_a_refresh_dated_in_the_future_starts_no_countdown(opus_cache: dict[str, int]) -> None:
    """A reply dated minutes ahead (another machine's clock) still counts down; one dated past
    the tolerance (a year-9999 timestamp showed "warm · 69890517:14:11 left") is unknown."""
    clock = cache_clock([reply(T0, read=2369, write=1620)], model_key=OPUS, prompt_cache=opus_cache)
    skewed = clock.state(T0 - 120)
    assert (skewed.status, skewed.countdown) == ("warm", "7:00")
    assert clock.state(T0 - 300).status == "warm"
    ahead = clock.state(T0 - 301)
    assert (ahead.status, ahead.countdown, ahead.words) == ("unknown", None, "no countdown")
    assert ahead.reason.startswith("the last refresh is dated 5 min 1 s in the future")
    far = cache_clock([reply(253402300800.0, read=1, write=1)], model_key=OPUS, prompt_cache=opus_cache).state(T0)
    assert far.status == "unknown" and far.remaining_s is None and "dated 2912382 d 13 h in the future" in far.reason


def test_long_tier_uses_long_lifetime(opus_cache: dict[str, int]) -> None:
    clock = cache_clock([reply(T0, read=10, write=50, write_1h=50)], model_key=OPUS, prompt_cache=opus_cache)
    assert clock.lifetime_s == 3600
    assert clock.state(T0 + 3000).status == "warm"


def test_error_aborted_do_not_refresh_but_cache_warm_does(opus_cache: dict[str, int]) -> None:
    events = [
        reply(T0, read=2369, write=1620, entry="good"),
        reply(T0 + 200, read=4000, write=10, stop="aborted", entry="aborted"),
        reply(T0 + 250, read=4000, write=0, stop="error", entry="error"),
    ]
    clock = cache_clock(events, model_key=OPUS, prompt_cache=opus_cache)
    assert clock.refresh is not None and clock.refresh.entry_id == "good"
    warm = CacheEvent(T0 + 270, Usage(cache_read=3989, output=1), "cache_warm", "w", OPUS)
    clock = cache_clock([*events, warm], model_key=OPUS, prompt_cache=opus_cache)
    assert clock.refresh is warm
    assert "cache warming" in clock.state(T0 + 300).reason


def test_no_lifetime_and_nothing_cached(opus_cache: dict[str, int]) -> None:
    events = [reply(T0, read=2048, write=0, model="openai/gpt-5.1")]
    unset = cache_clock(events, model_key="openai/gpt-5.1", prompt_cache={}).state(T0 + 1)
    assert unset.status == "unknown" and unset.words == "no countdown"
    assert unset.reason == "openai/gpt-5.1 declares no prompt-cache lifetime (promptCache unset), so no countdown"
    unknown = cache_clock(events, model_key="x/y", prompt_cache=None).state(T0)
    assert (unknown.status, unknown.reason) == ("unknown", "x/y is not in the model table: cache lifetime unknown")
    none = cache_clock(events, model_key=OPUS, prompt_cache=opus_cache, retention="none").state(T0)
    assert none.status == "unknown" and "not cached" in none.reason
    # Another model's refresh does not warm this model's cache.
    other = cache_clock(events, model_key=OPUS, prompt_cache=opus_cache).state(T0 + 1)
    assert other.status == "cold" and other.reason.startswith("nothing cached yet for anthropic/claude-opus-4-5")


def test_price_check_tolerance() -> None:
    info = ModelTable.bundled().get("anthropic", "claude-sonnet-4-5")
    assert info is not None and info.pricing is not None
    # Sample 01, first response (Pi session format §10): $0.006963 recorded.
    usage = usage_of({"usage": {"input": 6, "output": 91, "cacheRead": 0, "cacheWrite": 1488,
                                "cost": {"total": 0.0069630000000000004}}})
    check = price_check(usage, info.pricing, "bundled")
    assert check.catalog_usd == pytest.approx(0.006963, abs=1e-12) and check.agrees is True
    wrong = usage_of({"usage": {"input": 6, "output": 91, "cacheRead": 0, "cacheWrite": 1488, "cost": {"total": 0.0071}}})
    disagree = price_check(wrong, info.pricing, "bundled")
    assert disagree.agrees is False and disagree.difference_usd == pytest.approx(0.000137)
    assert price_check(usage, None).agrees is None


def _history(events: list[CacheEvent], opus_cache: dict[str, int], change: PrefixChange | None = None):
    return cache_history(
        events,
        pricing_for=lambda key: (None, None),
        prompt_cache_for=lambda key: opus_cache if key == OPUS else {},
        prefix_change=lambda previous, request: change,
    )


def test_history_causes(opus_cache: dict[str, int]) -> None:
    events = [
        reply(T0, read=0, write=1470, entry="first"),
        reply(T0 + 5, read=1473, write=500, entry="warm"),
        reply(T0 + 600, read=0, write=4097, entry="idle"),              # 595 s after the refresh
        reply(T0 + 610, read=1500, write=3000, entry="compacted"),      # read < 90 % of 4101
        reply(T0 + 620, read=4400, write=50, entry="unchanged"),
    ]
    change = PrefixChange("compaction", "c1", 1, "compaction c1 changed context message 1")
    history = _history(events, opus_cache, change)
    causes = [(r.event.entry_id, r.miss.cause if r.miss else None) for r in history.records]
    assert causes == [("first", "first request"), ("warm", None), ("idle", "TTL lapse"),
                      ("compacted", "prefix changed"), ("unchanged", None)]
    idle = history.records[2].miss
    assert idle is not None and idle.gap_s == pytest.approx(595) and idle.lifetime_s == 300
    assert history.records[3].miss is not None and history.records[3].miss.change == change
    assert [r.event.entry_id for r in history.misses] == ["first", "idle", "compacted"]
    # Without a prefix change and within the lifetime a miss stays unexplained.
    unexplained = _history(events, opus_cache, None).records[3].miss
    assert unexplained is not None and unexplained.cause == "unexplained"


def test_model_change_is_a_prefix_change(opus_cache: dict[str, int]) -> None:
    events = [reply(T0, read=0, write=1500), reply(T0 + 10, read=0, write=0, input=2057, model="openai/gpt-5.1")]
    miss = _history(events, opus_cache).records[1].miss
    assert miss is not None and miss.cause == "prefix changed"
    assert miss.detail == "model changed from anthropic/claude-opus-4-5 to openai/gpt-5.1"


def test_share_and_uncounted_rows(opus_cache: dict[str, int]) -> None:
    events = [
        reply(T0, read=0, write=1470),
        reply(T0 + 1, read=1473, write=512, input=5, stop="aborted"),
    ]
    history = _history(events, opus_cache)
    aborted = history.records[1]
    assert aborted.share == pytest.approx(1473 / 1990) and not aborted.cold and aborted.miss is None
    assert history.overall_share == pytest.approx(1473 / ((3 + 1470) + (5 + 1473 + 512)))


def test_cached_prefix_end() -> None:
    tokens = [100, 50, 50, 200, 10]
    # Whole prompt cached: everything before the request, bounded by what is unchanged now.
    assert cached_prefix_end(tokens, request_index=4, unchanged_prefix=5, cached_tokens=900, prompt_tokens=900) == 4
    assert cached_prefix_end(tokens, request_index=4, unchanged_prefix=2, cached_tokens=900, prompt_tokens=900) == 2
    # Half the prompt cached: estimated 400 → 200 cached; message 2 ends at 200, message 3's
    # middle lies at 300.
    assert cached_prefix_end(tokens, request_index=4, unchanged_prefix=5, cached_tokens=450, prompt_tokens=900) == 3
    assert cached_prefix_end(tokens, request_index=4, unchanged_prefix=5, cached_tokens=0, prompt_tokens=900) == 0


def test_long_gaps_are_shown_in_days() -> None:
    from ds4core.cache_state import fmt_gap

    assert (fmt_gap(45), fmt_gap(570), fmt_gap(7500), fmt_gap(260 * 86400 + 8 * 3600 + 5)) == (
        "45 s", "9 min 30 s", "2 h 5 min", "260 d 8 h",
    )
