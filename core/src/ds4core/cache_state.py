"""Prompt-cache state, countdown and per-request cache history (pure; no clock, no I/O).

Sources of the rules:

- Pi session format §6 (Usage): the prompt of a request is `input + cacheRead + cacheWrite`
  tokens; `cacheWrite1h` is the part written with 1-hour retention (Anthropic); `cost` is what Pi
  recorded in USD.
- Pi session format §10: a model's `promptCache {short, long}` is the best-effort cache lifetime
  in seconds per retention tier (unset = unknown); requests use `short` unless
  `PI_CACHE_RETENTION=long` (or `none`: not cached); cache warming re-sends the last request and
  records a `usage` entry of kind `cache_warm`.

Everything is a function of its arguments. Times are seconds since the Unix epoch; "now" is always
passed in. The sessions layer turns a Pi branch into `CacheEvent`s
(`ds4sessions.derive.cache.cache_events`) and supplies the prefix comparison for the miss explainer.

- `CacheEvent`: one provider request as the cache saw it (a reply, or a cache warm).
- `resolve_tier`, `cache_clock` → `CacheClock`: the last refresh, tier and lifetime of the current
  model; `CacheClock.state(now)` → `CacheState` (warm / expiring / cold / unknown + countdown).
- `cache_history` → `CacheHistory`: per request the cache-read share, tokens read and written,
  catalog cost cross-checked with Pi's recorded cost, and a `MissExplanation` per cold request.
- `cached_prefix_end`: where the cached prefix of the last request ends among context messages.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ds4core.epoch import dated_ahead, fmt_gap
from ds4core.models import Pricing
from ds4core.usage import Usage

__all__ = [
    "DEFAULT_EXPIRING_SECONDS",
    "DEFAULT_PARTIAL_MISS_RATIO",
    "CacheClock",
    "CacheEvent",
    "CacheFacts",
    "CacheHistory",
    "CacheState",
    "MissExplanation",
    "PrefixChange",
    "PriceCheck",
    "RequestRecord",
    "TierChoice",
    "cache_clock",
    "cache_history",
    "cached_prefix_end",
    "fmt_duration",
    "price_check",
    "resolve_tier",
]

#: A warm cache with less than this many seconds left is "expiring" (issue 4; configurable).
DEFAULT_EXPIRING_SECONDS = 60.0
#: A request is cold when it read less than (1 − this) of the previous request's prompt.
DEFAULT_PARTIAL_MISS_RATIO = 0.1
#: Catalog and recorded cost agree within max(absolute, relative × larger) USD.
PRICE_ABSOLUTE_TOLERANCE = 1e-6
PRICE_RELATIVE_TOLERANCE = 0.005

Status = Literal["warm", "expiring", "cold", "unknown"]
Cause = Literal["first request", "TTL lapse", "prefix changed", "unexplained"]


def fmt_duration(seconds: float) -> str:
    """Countdown text for a non-negative duration: `"4:59"`, `"59:59"`, `"1:00:00"` (seconds
    rounded up, so a cache with 0.2 s left shows `"0:01"`). Negative values show as `"0:00"`."""
    total = max(0, math.ceil(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


# --- Events ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)  # (one per request: issue 32)
class CacheEvent:
    """One provider request that may have touched the prompt cache.

    - `time_s`: when the request was made, seconds since the epoch (an assistant message's
      `timestamp`, which Pi sets at request start; a `usage` entry's entry timestamp);
    - `usage`: its normalised usage (tokens; `usage.partial` for aborted/error replies);
    - `kind`: `"reply"` (assistant message), `"cache_warm"` (a `usage` entry; other usage kinds
      are treated alike, Pi session format §5) or `"compaction_call"` (a billed request that made
      a compaction, e.g. Codex's remote compaction: it may refresh the cache, it is never judged
      as a hit or a miss);
    - `entry_id`: the session entry; `model_key`: `provider/model` of the request (None if unknown).
    """

    time_s: float
    usage: Usage
    kind: Literal["reply", "cache_warm", "compaction_call"]
    entry_id: str | None
    model_key: str | None

    @property
    def refreshes(self) -> bool:
        """True when the request refreshed the cache: cacheRead + cacheWrite > 0 and it was not an
        aborted or error reply (issue 4: those do not count)."""
        return not self.usage.partial and self.usage.cache_read + self.usage.cache_write > 0

    @property
    def counted(self) -> bool:
        """True for a complete reply with a non-empty prompt: the requests the miss explainer
        compares (aborted/error replies and cache warms are shown but not judged)."""
        return self.kind == "reply" and not self.usage.partial and self.usage.prompt_tokens > 0


# --- Tier, lifetime and countdown ------------------------------------------------------------


@dataclass(frozen=True)
class TierChoice:
    """The retention tier in use (`"short"`, `"long"` or `"none"`) and why, in words."""

    tier: str
    source: str


def resolve_tier(events: Sequence[CacheEvent], retention: str | None = None) -> TierChoice:
    """The retention tier of the cache (Pi session format §6, §10).

    Detected `long` when the latest request that wrote to the cache reported 1-hour writes
    (`cacheWrite1h` > 0); otherwise `retention` (the `PI_CACHE_RETENTION` value the caller read):
    `"long"`, `"none"` or `"short"`; otherwise Pi's default `short`.
    """
    for event in reversed(events):
        if not event.usage.partial and event.usage.cache_write > 0:
            if event.usage.cache_write_1h > 0:
                return TierChoice("long", "detected: the provider reported 1-hour cache writes")
            break
    value = (retention or "").strip().lower()
    if value in ("long", "none", "short"):
        return TierChoice(value, f"PI_CACHE_RETENTION={value}")
    return TierChoice("short", "Pi default (short retention)")


@dataclass(frozen=True)
class CacheState:
    """The cache at one instant.

    - `status`: `warm`, `expiring` (warm with less than the threshold left), `cold` (expired or
      nothing cached yet for this model) or `unknown` (no lifetime: no countdown possible);
    - `remaining_s`: seconds until expiry (negative once expired), None without a countdown;
    - `expires_at_s` / `last_refresh_s`: epoch seconds, None when unknown;
    - `reason`: one sentence saying why (always set; for `unknown` it says why there is no
      countdown).
    """

    status: Status
    remaining_s: float | None
    expires_at_s: float | None
    last_refresh_s: float | None
    lifetime_s: int | None
    tier: str
    reason: str

    @property
    def countdown(self) -> str | None:
        """`"m:ss"` left while warm or expiring; None otherwise."""
        if self.status in ("warm", "expiring") and self.remaining_s is not None:
            return fmt_duration(self.remaining_s)
        return None

    @property
    def words(self) -> str:
        """The state in words: `"warm · 4:12 left"`, `"expiring · 0:42 left"`, `"cold"`,
        `"no countdown"`."""
        if self.countdown is not None:
            return f"{self.status} · {self.countdown} left"
        return "no countdown" if self.status == "unknown" else "cold"

    def to_json(self) -> dict[str, Any]:
        """JSON: status, words, remainingSeconds, expiresAt, lastRefresh, lifetimeSeconds, tier,
        reason (times in epoch seconds)."""
        return {
            "status": self.status,
            "words": self.words,
            "remainingSeconds": self.remaining_s,
            "expiresAt": self.expires_at_s,
            "lastRefresh": self.last_refresh_s,
            "lifetimeSeconds": self.lifetime_s,
            "tier": self.tier,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class CacheClock:
    """What the countdown needs, fixed for one session state; `state(now)` is pure.

    `refresh` is the latest refreshing event of the current model (None: nothing cached yet);
    `lifetime_s` the model's lifetime for `tier` (seconds); `no_countdown` says why there is no
    lifetime (None when there is one).
    """

    model_key: str | None
    refresh: CacheEvent | None
    tier: TierChoice
    lifetime_s: int | None
    no_countdown: str | None

    @property
    def expires_at_s(self) -> float | None:
        """Epoch seconds when the cache expires (last refresh + lifetime), None when unknown."""
        if self.refresh is None or self.lifetime_s is None:
            return None
        return self.refresh.time_s + self.lifetime_s

    def state(self, now: float, expiring_s: float = DEFAULT_EXPIRING_SECONDS) -> CacheState:
        """The cache at `now` (epoch seconds); `expiring_s` is the expiring threshold (seconds)."""
        last = self.refresh.time_s if self.refresh else None
        tier = self.tier.tier
        if self.no_countdown is not None:
            return CacheState("unknown", None, None, last, None, tier, self.no_countdown)
        assert self.lifetime_s is not None
        lifetime = f"lifetime {self.lifetime_s} s, {tier} retention ({self.tier.source})"
        expires = self.expires_at_s
        if expires is None:
            return CacheState("cold", None, None, None, self.lifetime_s, tier,
                              f"nothing cached yet for {self.model_key}; {lifetime}")
        remaining = expires - now
        ahead = dated_ahead(last, now)
        if ahead is not None:
            return CacheState("unknown", None, None, last, self.lifetime_s, tier, f"{ahead}; {lifetime}")
        if remaining <= 0:
            return CacheState("cold", remaining, expires, last, self.lifetime_s, tier,
                              f"expired {fmt_gap(-remaining)} ago; {lifetime}")
        status: Status = "expiring" if remaining < expiring_s else "warm"
        via = "cache warming" if self.refresh and self.refresh.kind == "cache_warm" else "a reply"
        return CacheState(status, remaining, expires, last, self.lifetime_s, tier,
                          f"refreshed {fmt_gap(now - (last or now))} ago by {via}; {lifetime}")


def cache_clock(
    events: Sequence[CacheEvent],
    *,
    model_key: str | None,
    prompt_cache: Mapping[str, int] | None,
    retention: str | None = None,
) -> CacheClock:
    """Build the clock for the current model `model_key` from the branch's events (in order).

    `prompt_cache` is the model's `promptCache` lifetimes in seconds (`ModelInfo.prompt_cache`;
    empty when unset), or None when the model is not in the model table. `retention` is the
    `PI_CACHE_RETENTION` value. The last refresh is the newest refreshing event of this model
    (`CacheEvent.refreshes`); issue 4 / Pi session format §10.
    """
    tier = resolve_tier(events, retention)
    refresh = next(
        (e for e in reversed(events) if e.refreshes and (model_key is None or e.model_key in (None, model_key))),
        None,
    )
    lifetime = None
    if model_key is None:
        reason: str | None = "no model in this session yet: cache lifetime unknown"
    elif prompt_cache is None:
        reason = f"{model_key} is not in the model table: cache lifetime unknown"
    elif tier.tier == "none":
        reason = f"{tier.source}: requests are not cached"
    elif not prompt_cache:
        reason = f"{model_key} declares no prompt-cache lifetime (promptCache unset), so no countdown"
    elif tier.tier not in prompt_cache:
        reason = f"{model_key} declares no {tier.tier}-retention cache lifetime, so no countdown"
    else:
        reason = None
        lifetime = int(prompt_cache[tier.tier])
    return CacheClock(model_key, refresh, tier, lifetime, reason)


# --- History ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)  # (one per request: issue 32)
class PriceCheck:
    """Catalog cost (from the model table's prices) against the cost Pi recorded, USD.

    `agrees` is None when either is unknown; `pricing_source` names the price data used.
    """

    catalog_usd: float | None
    recorded_usd: float | None
    agrees: bool | None
    pricing_source: str | None

    @property
    def difference_usd(self) -> float | None:
        """recorded − catalog, USD (None when either is unknown)."""
        if self.catalog_usd is None or self.recorded_usd is None:
            return None
        return self.recorded_usd - self.catalog_usd

    def to_json(self) -> dict[str, Any]:
        """JSON: catalogUsd, recordedUsd, agrees, differenceUsd, pricingSource."""
        return {
            "catalogUsd": self.catalog_usd,
            "recordedUsd": self.recorded_usd,
            "agrees": self.agrees,
            "differenceUsd": self.difference_usd,
            "pricingSource": self.pricing_source,
        }


def price_check(usage: Usage, pricing: Pricing | None, pricing_source: str | None = None) -> PriceCheck:
    """Cross-check one request's cost (Pi session format §6: catalog cost = tokens × price per
    million / 10⁶ per bucket, tiers and 1-hour writes included, see `Pricing.cost`).

    They agree when |recorded − catalog| ≤ max(1e-6, 0.5 % of the larger) USD.
    """
    catalog = usage.cost(pricing)
    recorded = usage.recorded_cost
    agrees = None
    if catalog is not None and recorded is not None:
        tolerance = max(PRICE_ABSOLUTE_TOLERANCE, PRICE_RELATIVE_TOLERANCE * max(abs(catalog), abs(recorded)))
        agrees = abs(recorded - catalog) <= tolerance
    return PriceCheck(catalog, recorded, agrees, pricing_source if pricing is not None else None)


@dataclass(frozen=True)
class PrefixChange:
    """The first thing that differs between a request's prompt and the previous request's.

    `kind`: `compaction`, `branch summary`, `model change`, `context edit`, `system prompt`,
    `branch switch` or `edited context`; `entry_id` the entry responsible (None when unknown);
    `message_index` the index of the first differing message in the request's context (None for
    a model change); `description` one sentence naming it.
    """

    kind: str
    entry_id: str | None
    message_index: int | None
    description: str

    def to_json(self) -> dict[str, Any]:
        """JSON: kind, entryId, messageIndex, description."""
        return {
            "kind": self.kind,
            "entryId": self.entry_id,
            "messageIndex": self.message_index,
            "description": self.description,
        }


@dataclass(frozen=True, slots=True)  # (one per request: issue 32)
class MissExplanation:
    """Why a cold request missed the cache (issue 4).

    `cause`: `first request`, `TTL lapse` (the gap since the last refresh exceeded the lifetime),
    `prefix changed` (`change` names the first differing entry) or `unexplained` (prefix
    unchanged and, as far as known, within the lifetime). `gap_s` is the time since the last
    refresh of the same model (seconds, None if none), `lifetime_s` the lifetime then.
    """

    cause: Cause
    detail: str
    gap_s: float | None
    lifetime_s: int | None
    change: PrefixChange | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON: cause, detail, gapSeconds, lifetimeSeconds, change."""
        return {
            "cause": self.cause,
            "detail": self.detail,
            "gapSeconds": self.gap_s,
            "lifetimeSeconds": self.lifetime_s,
            "change": self.change.to_json() if self.change else None,
        }


@dataclass(frozen=True, slots=True)  # (one per request: issue 32)
class RequestRecord:
    """One request of the history. `number` is 1-based over the history; `share` is
    cacheRead / (input + cacheRead + cacheWrite) (None for an empty prompt); `cold` marks a
    counted request that missed; `miss` explains it."""

    number: int
    event: CacheEvent
    share: float | None
    price: PriceCheck
    cold: bool
    miss: MissExplanation | None

    def to_json(self) -> dict[str, Any]:
        """JSON of the row (tokens, share, cost check, miss)."""
        usage = self.event.usage
        return {
            "number": self.number,
            "entryId": self.event.entry_id,
            "kind": self.event.kind,
            "time": self.event.time_s,
            "model": self.event.model_key,
            "counted": self.event.counted,
            "input": usage.input,
            "cacheRead": usage.cache_read,
            "cacheWrite": usage.cache_write,
            "cacheWrite1h": usage.cache_write_1h,
            "output": usage.output,
            "cacheReadShare": self.share,
            "cost": self.price.to_json(),
            "cold": self.cold,
            "miss": self.miss.to_json() if self.miss else None,
        }


@dataclass(frozen=True)
class CacheHistory:
    """Every request on the branch, in order (see `RequestRecord`). `resume` is what
    `cache_history(..., resume=this)` needs to extend it (not part of equality)."""

    records: tuple[RequestRecord, ...]
    resume: Any = field(default=None, compare=False, repr=False)

    @property
    def misses(self) -> tuple[RequestRecord, ...]:
        """The cold requests."""
        return tuple(r for r in self.records if r.cold)

    @property
    def disagreements(self) -> tuple[RequestRecord, ...]:
        """Requests whose recorded cost disagrees with the catalog cost."""
        return tuple(r for r in self.records if r.price.agrees is False)

    @property
    def overall_share(self) -> float | None:
        """Σ cacheRead / Σ prompt tokens over all requests (None when nothing was sent)."""
        prompt = sum(r.event.usage.prompt_tokens for r in self.records)
        return sum(r.event.usage.cache_read for r in self.records) / prompt if prompt else None

    @property
    def catalog_usd(self) -> float | None:
        """Σ catalog cost (USD) over requests with a known one; None when none is known."""
        costs = [r.price.catalog_usd for r in self.records if r.price.catalog_usd is not None]
        return sum(costs) if costs else None

    @property
    def recorded_usd(self) -> float | None:
        """Σ recorded cost (USD) over requests with one; None when none is recorded."""
        costs = [r.price.recorded_usd for r in self.records if r.price.recorded_usd is not None]
        return sum(costs) if costs else None

    def to_json(self) -> dict[str, Any]:
        """JSON: totals and every record."""
        return {
            "requests": len(self.records),
            "misses": len(self.misses),
            "overallCacheReadShare": self.overall_share,
            "catalogUsd": self.catalog_usd,
            "recordedUsd": self.recorded_usd,
            "costDisagreements": len(self.disagreements),
            "records": [r.to_json() for r in self.records],
        }


def _is_cold(event: CacheEvent, previous: CacheEvent | None, partial_miss_ratio: float) -> bool:
    """Counted and read nothing, or read less than (1 − ratio) of the previous prompt (the rest
    had to be written again: "a large write")."""
    if not event.counted:
        return False
    if event.usage.cache_read == 0:
        return True
    return previous is not None and event.usage.cache_read < previous.usage.prompt_tokens * (1 - partial_miss_ratio)


def _explain(
    event: CacheEvent,
    previous: CacheEvent | None,
    last_refresh: CacheEvent | None,
    lifetime: int | None,
    change: PrefixChange | None,
) -> MissExplanation:
    """Issue 4's explainer: first request, else TTL lapse, else prefix changed, else unexplained.
    A model change is a prefix change (the new model has its own cache) and is checked first."""
    gap = event.time_s - last_refresh.time_s if last_refresh is not None else None
    if previous is None:
        return MissExplanation("first request", "nothing was cached before this request", gap, lifetime)
    if previous.model_key != event.model_key:
        change = change or PrefixChange(
            "model change", None, None, f"model changed from {previous.model_key} to {event.model_key}"
        )
        return MissExplanation("prefix changed", change.description, gap, lifetime, change)
    if gap is not None and lifetime is not None and gap > lifetime:
        return MissExplanation(
            "TTL lapse",
            f"idle {fmt_gap(gap)} since the last refresh; the cache lives {lifetime} s",
            gap, lifetime,
        )
    if change is not None:
        return MissExplanation("prefix changed", change.description, gap, lifetime, change)
    if lifetime is None:
        idle = f"idle {fmt_gap(gap)} since the last refresh" if gap is not None else "no refresh seen"
        detail = f"prefix unchanged; {idle} and the model declares no cache lifetime (likely expiry)"
    else:
        idle = fmt_gap(gap) if gap is not None else "?"
        detail = f"prefix unchanged and within the lifetime (idle {idle} of {lifetime} s): evicted early"
    return MissExplanation("unexplained", detail, gap, lifetime)


def cache_history(
    events: Sequence[CacheEvent],
    *,
    pricing_for: Callable[[str | None], tuple[Pricing | None, str | None]],
    prompt_cache_for: Callable[[str | None], Mapping[str, int] | None],
    retention: str | None = None,
    prefix_change: Callable[[CacheEvent, CacheEvent], PrefixChange | None] | None = None,
    partial_miss_ratio: float = DEFAULT_PARTIAL_MISS_RATIO,
    resume: "CacheHistory | None" = None,
) -> CacheHistory:
    """Per-request cache history of a branch (`events` in branch order), issue 4.

    - `pricing_for(model_key)` → (prices in USD per million, or None; a name of the price data);
    - `prompt_cache_for(model_key)` → lifetimes in seconds per tier (None/empty: unknown);
    - `prefix_change(previous, request)` → the first difference between the two prompts, or None
      (called only for cold requests that follow another counted request);
    - a counted request is cold when it read nothing from the cache, or less than
      (1 − `partial_miss_ratio`) of the previous counted request's prompt tokens.

    The lifetime for the TTL check is that of the request's model for the tier in force then
    (`resolve_tier` over the earlier events).

    `resume`: an earlier history made with the same callbacks; when `events` starts with the
    events it covered (the same objects, compared in C: a branch that grew), only the new
    events are recorded (each record depends on the events up to it only), so an append costs
    O(new requests) instead of O(requests).
    """
    records: list[RequestRecord] = []
    previous: CacheEvent | None = None
    last_refresh: dict[str | None, CacheEvent] = {}
    start = 0
    state = resume.resume if resume is not None else None
    if state is not None:
        seen, prev_event, refreshes = state
        n = len(seen)
        if len(events) >= n and (n == 0 or events[n - 1] is seen[-1]) and list(events[:n]) == seen:
            records = list(resume.records)
            previous, last_refresh, start = prev_event, dict(refreshes), n
    for index in range(start, len(events)):
        event = events[index]
        pricing, source = pricing_for(event.model_key)
        cold = _is_cold(event, previous, partial_miss_ratio)
        miss = None
        if cold:
            tier = resolve_tier(events[:index], retention).tier
            lifetimes = prompt_cache_for(event.model_key) or {}
            lifetime = lifetimes.get(tier) if tier != "none" else None
            change = prefix_change(previous, event) if prefix_change is not None and previous is not None else None
            miss = _explain(event, previous, last_refresh.get(event.model_key), lifetime, change)
        records.append(
            RequestRecord(
                number=index + 1,
                event=event,
                share=event.usage.cache_read_share,
                price=price_check(event.usage, pricing, source),
                cold=cold,
                miss=miss,
            )
        )
        if event.counted:
            previous = event
        if event.refreshes:
            last_refresh[event.model_key] = event
    return CacheHistory(tuple(records), (list(events), previous, last_refresh))


@dataclass(frozen=True)
class CacheFacts:
    """The prompt cache of one session state as an agent plug-in sees it, before any DS4
    decision: `model_key`, the countdown's basis (`clock`), every request once (`history`),
    where the last request's cached prefix ends among the context messages
    (`cached_prefix_end`, exclusive; 0: none), where the prices come from (`pricing_source`)
    and the expiring threshold (`expiring_s`, seconds). The sessions layer wraps it into the
    view the screen shows (`ds4sessions.derive.cache.CacheView`)."""

    model_key: str | None
    clock: CacheClock
    history: CacheHistory
    cached_prefix_end: int = 0
    pricing_source: str | None = None
    expiring_s: float = DEFAULT_EXPIRING_SECONDS


# --- The cached prefix on the map ------------------------------------------------------------


def cached_prefix_end(
    message_tokens: Sequence[int],
    *,
    request_index: int,
    unchanged_prefix: int,
    cached_tokens: int,
    prompt_tokens: int,
    fixed_tokens: int = 0,
) -> int:
    """End (exclusive) of the context messages held in the cache after the last request.

    The last request sent `messages[:request_index]` (after `fixed_tokens` of system prompt and
    tools); `unchanged_prefix` of them are still the same now; the provider reported
    `cached_tokens` (cacheRead + cacheWrite) of its `prompt_tokens`. When part of the prompt was
    not cached, the cached share of the estimated prompt (`message_tokens`, any estimator) is
    laid over the messages and a message counts as cached when its middle lies inside it.
    Returns 0 when nothing was cached.
    """
    limit = max(0, min(request_index, unchanged_prefix, len(message_tokens)))
    if cached_tokens <= 0 or prompt_tokens <= 0 or limit == 0:
        return 0
    if cached_tokens >= prompt_tokens:
        return limit
    estimated = fixed_tokens + sum(message_tokens[:request_index])
    target = estimated * cached_tokens / prompt_tokens
    running = fixed_tokens
    for index in range(limit):
        if running + message_tokens[index] / 2 > target:
            return index
        running += message_tokens[index]
    return limit
