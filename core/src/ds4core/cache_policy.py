"""DS4 0.3.7 cache-aware policy: tail decision, cost model, epoch comparison and hysteresis.

Pure reimplementation of DS4 `cache-policy.ts` and of the cache-aware part of `runtime.ts`
(`transformContext`) at release 0.3.7 (spec: ds4-planner-spec.md §4). Nothing here does I/O.

Units: tokens are `chars-v1` estimator units; prices are USD per million tokens; costs are USD.
DS4's rounding (`Math.round(x * 1e6) / 1e6`, `jsjson.round6`) and `Number.prototype.toFixed` are
reproduced exactly, so results compare equal to DS4's JSON. The configuration is
`ds4core.budgets.CacheAwareConfig` (DS4 `context.cacheAware`, spec §4.1), re-exported here.

Layers of the API, bottom up:

- prefix helpers: `count_common_prefix`, `reusable_prefix_tokens`, `message_fingerprint`;
- `estimate_request_cost` (one request, split into miss / cache read / output);
- `decide_cache_aware_tail` (the gates and the requested tail);
- `candidate_epoch` and `compare_epoch_costs` (the epoch model of the runtime);
- `advance_hysteresis` (the stick / loss-streak state machine);
- `select_cache_aware_tail` (runtime steps 2-3), `planning_cache_aware_block` (step 6) and
  `run_cache_aware_turn`, which chains them around a planner callable.

Beyond DS4's own fields, results carry what a UI needs to explain a decision: every gate with its
value and threshold (evaluated even when DS4 would stop early), both candidates' cold and warm
request costs, the improvement margin and the hysteresis state. DS4's decisions are unchanged.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ds4core.pause import pausing
from ds4core.budgets import CacheAwareConfig, ModelCost
from ds4core.estimate import CHARS_V1, Estimator
from ds4core.jsjson import js_to_fixed, number_to_string, round6, stable_stringify

if TYPE_CHECKING:
    from ds4core.planner import ManagedContextPlan

__all__ = [
    "CacheAwareBlock",
    "CacheAwareConfig",
    "CacheAwareDecision",
    "CacheAwareRuntimeState",
    "CacheAwareTurn",
    "CachePricing",
    "CandidateComparison",
    "CandidateEpoch",
    "CandidatePlan",
    "CandidateSelection",
    "GateCheck",
    "HysteresisState",
    "PrefixHistory",
    "RequestCost",
    "advance_hysteresis",
    "candidate_epoch",
    "compare_epoch_costs",
    "count_common_prefix",
    "decide_cache_aware_tail",
    "epoch_cost_usd",
    "estimate_request_cost",
    "js_to_fixed",
    "message_fingerprint",
    "planning_cache_aware_block",
    "reusable_prefix_tokens",
    "run_cache_aware_turn",
    "select_cache_aware_tail",
]

Number = int | float
Candidate = Literal["nominal", "cache-aware"]


# --- JavaScript number semantics -------------------------------------------------------------


def _is_number(value: object) -> bool:
    """True for int/float values (not bool), mirroring JS `typeof value === "number"`."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_finite(value: object) -> bool:
    """JS `Number.isFinite`: a number that is neither NaN nor infinite."""
    return _is_number(value) and math.isfinite(value)  # type: ignore[arg-type]


# --- Configuration and pricing ---------------------------------------------------------------


@dataclass(frozen=True)
class CachePricing:
    """Per-million-token prices in USD (DS4 `CachePricing`); None means unknown.

    `cache_write_per_million` is carried but never used by any DS4 0.3.7 formula (spec §10.6).
    """

    input_per_million: float | None = None
    cache_read_per_million: float | None = None
    cache_write_per_million: float | None = None
    output_per_million: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CachePricing:
        """From DS4 JSON: `inputPerMillion`, `cacheReadPerMillion`, `cacheWritePerMillion`,
        `outputPerMillion` (missing keys are unknown prices)."""
        return cls(
            input_per_million=data.get("inputPerMillion"),
            cache_read_per_million=data.get("cacheReadPerMillion"),
            cache_write_per_million=data.get("cacheWritePerMillion"),
            output_per_million=data.get("outputPerMillion"),
        )

    @classmethod
    def from_model_cost(cls, cost: ModelCost | Mapping[str, Any] | None) -> CachePricing | None:
        """From a model's `cost`: a `budgets.ModelCost` or Pi's JSON (`input`, `output`,
        `cacheRead`, `cacheWrite`), USD per million. None when the model has no cost (DS4
        runtime `cachePricing`).
        """
        if cost is None:
            return None
        if isinstance(cost, ModelCost):
            return cls(cost.input, cost.cache_read, cost.cache_write, cost.output)
        return cls(
            input_per_million=cost.get("input"),
            cache_read_per_million=cost.get("cacheRead"),
            cache_write_per_million=cost.get("cacheWrite"),
            output_per_million=cost.get("output"),
        )

    def to_json(self) -> dict[str, float]:
        """DS4 JSON; unknown prices are omitted."""
        fields = {
            "inputPerMillion": self.input_per_million,
            "cacheReadPerMillion": self.cache_read_per_million,
            "cacheWritePerMillion": self.cache_write_per_million,
            "outputPerMillion": self.output_per_million,
        }
        return {key: value for key, value in fields.items() if value is not None}


# --- Prefix helpers --------------------------------------------------------------------------


def count_common_prefix(previous_hashes: Sequence[str | None], current_hashes: Sequence[str | None]) -> int:
    """Number of equal leading message hashes (DS4 `commonMessagePrefixLength`).

    Stops at the first mismatch or the first None on either side: None never matches, not even
    another None (DS4 treats `undefined` as a distinct sentinel).
    """
    length = 0
    for left, right in zip(previous_hashes, current_hashes):
        if left is None or right is None or left != right:
            break
        length += 1
    return length


def reusable_prefix_tokens(
    previous_hashes: Sequence[str | None],
    current_hashes: Sequence[str | None],
    token_estimates: Sequence[Number | None],
) -> Number:
    """Tokens of the common message prefix (DS4 `estimateReusablePrefixTokens`).

    Sums `token_estimates[i]` over the common prefix, skipping estimates that are missing, None,
    non-finite or <= 0. `token_estimates` is aligned with `current_hashes`.
    """
    total: Number = 0
    for index in range(count_common_prefix(previous_hashes, current_hashes)):
        tokens = token_estimates[index] if index < len(token_estimates) else None
        if _is_finite(tokens) and tokens > 0:  # type: ignore[operator]
            total += tokens  # type: ignore[operator]
    return total


def message_fingerprint(message: Any) -> str:
    """SHA-256 hex of DS4's `stableStringify(message)` (DS4 `fingerprint`, `context-observer.ts`).

    Only equality of fingerprints matters to the policy (prefix matching); a lone surrogate is
    hashed as its own code unit rather than Node's U+FFFD. Raises TypeError for a value that is
    not JSON-shaped (see `ds4core.jsjson.stable_stringify`).
    """
    return hashlib.sha256(stable_stringify(message).encode("utf-8", "surrogatepass")).hexdigest()


# --- Request cost ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestCost:
    """One request's token split and cost (DS4 `EstimatedRequestCost`).

    `total` is USD rounded to 6 decimals, or None when a consumed price is unknown.
    """

    input_tokens: Number
    cache_read_tokens: Number
    output_tokens: Number
    total: float | None

    def to_json(self) -> dict[str, Number]:
        """DS4 JSON: `inputTokens`, `cacheReadTokens`, `outputTokens`, and `total` when known."""
        result: dict[str, Number] = {
            "inputTokens": self.input_tokens,
            "cacheReadTokens": self.cache_read_tokens,
            "outputTokens": self.output_tokens,
        }
        if self.total is not None:
            result["total"] = self.total
        return result


def _known_rate(rate: float | None) -> float | None:
    """A price counts as known when it is a finite number >= 0 (DS4 `hasConsumedRates`)."""
    return rate if _is_finite(rate) and rate >= 0 else None  # type: ignore[operator]


def estimate_request_cost(
    total_input_tokens: Number,
    reusable_prefix_tokens: Number,
    pricing: CachePricing,
    output_tokens: Number = 0,
) -> RequestCost:
    """Cost of one request given its reusable (cached) prefix (DS4 `estimateRequestCost`, spec §4.3).

    Miss tokens `max(0, total - reusable)` are billed at the input price, `min(total, reusable)`
    at the cache-read price, `max(0, output)` at the output price. `total` (USD, rounded to 6
    decimals) is None when a price that is actually consumed is unknown.
    """
    input_tokens = max(0, total_input_tokens - reusable_prefix_tokens)
    cache_read_tokens = min(total_input_tokens, reusable_prefix_tokens)
    output_tokens = max(0, output_tokens)
    input_rate = _known_rate(pricing.input_per_million)
    read_rate = _known_rate(pricing.cache_read_per_million)
    output_rate = _known_rate(pricing.output_per_million)
    if (
        (input_tokens > 0 and input_rate is None)
        or (cache_read_tokens > 0 and read_rate is None)
        or (output_tokens > 0 and output_rate is None)
    ):
        return RequestCost(input_tokens, cache_read_tokens, output_tokens, None)
    usd = (
        input_tokens * (input_rate or 0)
        + cache_read_tokens * (read_rate or 0)
        + output_tokens * (output_rate or 0)
    ) / 1_000_000
    return RequestCost(input_tokens, cache_read_tokens, output_tokens, round6(usd))


# --- The tail decision -----------------------------------------------------------------------


@dataclass(frozen=True)
class GateCheck:
    """One eligibility gate of `decide_cache_aware_tail`, always evaluated.

    `name` is `mode`, `missHitRatio`, `cacheReadShare` or `sampleCount`; `value` is the observed
    value (None when undefined), `threshold` the configured minimum (`"auto"` for the mode gate,
    which fails only for `"off"`, as in DS4's `decideCacheAwareTail`);
    `reason` is DS4's reason code when the gate fails (None when it passes).
    """

    name: str
    passed: bool
    value: Number | str | None
    threshold: Number | str
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        """JSON for display: name, passed, value, threshold, reason (null when passed)."""
        return {
            "name": self.name,
            "passed": self.passed,
            "value": self.value,
            "threshold": self.threshold,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class CacheAwareDecision:
    """Result of `decide_cache_aware_tail` (DS4 `CacheAwarePlanDecision`) plus display details.

    DS4 fields: `eligible`, `miss_hit_ratio` / `cache_read_share` (rounded to 6 decimals only when
    eligible, raw otherwise, None when undefined or in mode off), `sample_count`,
    `recent_tail_tokens` (requested tail, tokens), `tail_extended`, `reasons`.
    Extra: `gates` (all four gates with values) and `candidate_tail_tokens`, the tail an eligible
    decision requests: `max(nominal, floor(activeInputBudget * maxTailBudgetShare))` tokens.
    """

    eligible: bool
    miss_hit_ratio: float | None
    cache_read_share: float | None
    sample_count: Number
    recent_tail_tokens: Number
    tail_extended: bool
    reasons: tuple[str, ...]
    gates: tuple[GateCheck, ...]
    candidate_tail_tokens: Number

    def to_json(self) -> dict[str, Any]:
        """Exactly DS4's decision JSON (optional fields omitted when undefined)."""
        result: dict[str, Any] = {"eligible": self.eligible}
        if self.miss_hit_ratio is not None:
            result["missHitRatio"] = self.miss_hit_ratio
        if self.cache_read_share is not None:
            result["cacheReadShare"] = self.cache_read_share
        result.update(
            sampleCount=self.sample_count,
            recentTailTokens=self.recent_tail_tokens,
            tailExtended=self.tail_extended,
            reasons=list(self.reasons),
        )
        return result

    def to_detail_json(self) -> dict[str, Any]:
        """For display: `to_json()` plus `gates` (each gate's JSON, in gate order) and
        `candidateTailTokens` (tokens)."""
        return {
            **self.to_json(),
            "gates": [gate.to_json() for gate in self.gates],
            "candidateTailTokens": self.candidate_tail_tokens,
        }


def _miss_hit_ratio(pricing: CachePricing | None) -> float | None:
    """input / cacheRead price, or None if either is missing or non-finite, cacheRead <= 0 or input < 0."""
    if pricing is None:
        return None
    numerator, denominator = pricing.input_per_million, pricing.cache_read_per_million
    if not (_is_finite(numerator) and _is_finite(denominator)):
        return None
    if denominator <= 0 or numerator < 0:  # type: ignore[operator]
        return None
    return numerator / denominator  # type: ignore[operator]


def _evaluate_gates(
    config: CacheAwareConfig,
    ratio: float | None,
    share: float | None,
    sample_count: Number,
) -> tuple[GateCheck, ...]:
    """The four gates in DS4's reason order; a gate fails exactly when DS4 appends its reason."""
    if ratio is None:
        ratio_reason: str | None = "cache-pricing-incomplete"
    elif ratio < config.minimum_miss_hit_ratio:
        ratio_reason = f"miss-hit-ratio-below-threshold:{js_to_fixed(ratio, 2)}"
    else:
        ratio_reason = None
    if share is None:
        share_reason: str | None = "cache-share-unobserved"
    elif share < config.minimum_cache_read_share:
        share_reason = f"cache-read-share-below-threshold:{js_to_fixed(share, 4)}"
    else:
        share_reason = None
    samples_reason = (
        f"insufficient-samples:{number_to_string(sample_count)}"
        if sample_count < config.minimum_cache_sample_count
        else None
    )
    mode_reason = "off-or-insufficient-evidence" if config.mode == "off" else None
    return (
        GateCheck("mode", mode_reason is None, config.mode, "auto", mode_reason),
        GateCheck("missHitRatio", ratio_reason is None, ratio, config.minimum_miss_hit_ratio, ratio_reason),
        GateCheck(
            "cacheReadShare", share_reason is None, share, config.minimum_cache_read_share, share_reason
        ),
        GateCheck(
            "sampleCount",
            samples_reason is None,
            sample_count,
            config.minimum_cache_sample_count,
            samples_reason,
        ),
    )


def decide_cache_aware_tail(
    *,
    config: CacheAwareConfig,
    pricing: CachePricing | None,
    observed_cache_read_share: float | None,
    sample_count: Number,
    nominal_recent_tail_tokens: Number,
    active_input_budget: Number,
) -> CacheAwareDecision:
    """Decide the recent-tail size (DS4 0.3.7 `decideCacheAwareTail`, spec §4.2).

    - mode `off`: nominal tail, not eligible, reasons `["off-or-insufficient-evidence"]`.
    - Otherwise the gates miss/hit price ratio, observed cache-read share and sample count are
      checked; each failure appends its reason. Any failure: nominal tail, not eligible; the raw
      (unrounded) ratio and share are reported when defined.
    - All pass: tail `max(nominal, floor(active_input_budget * maxTailBudgetShare))` tokens,
      reason `cache-aware-tail:<tail>`, ratio and share rounded to 6 decimals.

    `observed_cache_read_share` is None when unobserved (no samples). Token arguments are tokens.
    """
    ratio = _miss_hit_ratio(pricing)
    share = observed_cache_read_share
    gates = _evaluate_gates(config, ratio, share, sample_count)
    candidate_tail = max(
        nominal_recent_tail_tokens, max(0, math.floor(active_input_budget * config.max_tail_budget_share))
    )
    if config.mode == "off":
        return CacheAwareDecision(
            eligible=False,
            miss_hit_ratio=None,
            cache_read_share=None,
            sample_count=sample_count,
            recent_tail_tokens=nominal_recent_tail_tokens,
            tail_extended=False,
            reasons=("off-or-insufficient-evidence",),
            gates=gates,
            candidate_tail_tokens=candidate_tail,
        )
    reasons = tuple(gate.reason for gate in gates[1:] if gate.reason is not None)
    if reasons:
        return CacheAwareDecision(
            eligible=False,
            miss_hit_ratio=ratio,
            cache_read_share=share,
            sample_count=sample_count,
            recent_tail_tokens=nominal_recent_tail_tokens,
            tail_extended=False,
            reasons=reasons,
            gates=gates,
            candidate_tail_tokens=candidate_tail,
        )
    assert ratio is not None and share is not None  # every gate passed
    return CacheAwareDecision(
        eligible=True,
        miss_hit_ratio=round6(ratio),
        cache_read_share=round6(share),
        sample_count=sample_count,
        recent_tail_tokens=candidate_tail,
        tail_extended=candidate_tail != nominal_recent_tail_tokens,
        reasons=(f"cache-aware-tail:{number_to_string(candidate_tail)}",),
        gates=gates,
        candidate_tail_tokens=candidate_tail,
    )


# --- Epoch model -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CandidatePlan:
    """The numbers of one planner result that the cache-aware runtime reads.

    `managed` is `plan.mode == "managed"`; `message_hashes` / `message_tokens` are
    `message_fingerprint` and the chars-v1 estimate of each sent message (`plan.messages`, in
    order); `fixed_tokens` (system prompt and tools), `original_message_tokens` and
    `recent_tail_token_limit` come from `plan.planning`; `selected_tokens` is
    `sum(item.tokens for item in plan.selected)`. All in tokens.
    """

    managed: bool
    message_hashes: tuple[str, ...]
    message_tokens: tuple[Number, ...]
    fixed_tokens: Number
    original_message_tokens: Number
    recent_tail_token_limit: Number
    selected_tokens: Number

    @classmethod
    def from_plan(
        cls,
        plan: ManagedContextPlan,
        estimator: Estimator = CHARS_V1,
        fingerprint: Callable[[Any], str] = message_fingerprint,
    ) -> CandidatePlan:
        """The numbers of a `ds4core.planner.ManagedContextPlan`, each sent message fingerprinted
        (`fingerprint`: `message_fingerprint` or a memo of it) and estimated with `estimator`
        (DS4 runtime: `estimateMessagesTokens([message])`)."""
        return cls(
            managed=plan.mode == "managed",
            message_hashes=tuple(map(fingerprint, pausing(plan.messages))),
            message_tokens=tuple(estimator.message_tokens(message) for message in pausing(plan.messages)),
            fixed_tokens=plan.planning.fixed_tokens,
            original_message_tokens=plan.planning.original_message_tokens,
            recent_tail_token_limit=plan.planning.recent_tail_token_limit,
            selected_tokens=sum(item.tokens for item in plan.selected),
        )

    @property
    def total_input_tokens(self) -> Number:
        """Fixed tokens plus every sent message's estimate (the epoch model's request size)."""
        return self.fixed_tokens + sum(self.message_tokens)

    @property
    def sliding(self) -> bool:
        """True when the conversation exceeds the tail limit, so each turn shifts the prefix."""
        return self.original_message_tokens > self.recent_tail_token_limit


@dataclass(frozen=True)
class CandidateEpoch:
    """Epoch cost of one candidate plan (DS4 runtime `cacheAwareEpochCost`, spec §4.4).

    `tail_tokens` is the plan's recent-tail limit; `total_tokens` = fixed + sent message tokens;
    `reusable_prefix_tokens` is the prefix shared with the previous final plan; `cold` is that
    request with only the reusable prefix cached, `warm` with everything cached; `epoch_cost` is
    USD rounded to 6 decimals, or None when either request cost is unknown.
    """

    tail_tokens: Number
    total_tokens: Number
    reusable_prefix_tokens: Number
    sliding: bool
    cold: RequestCost
    warm: RequestCost
    epoch_cost: float | None

    def to_json(self) -> dict[str, Any]:
        """JSON for display (camelCase)."""
        return {
            "tailTokens": self.tail_tokens,
            "totalTokens": self.total_tokens,
            "reusablePrefixTokens": self.reusable_prefix_tokens,
            "sliding": self.sliding,
            "cold": self.cold.to_json(),
            "warm": self.warm.to_json(),
            "epochCost": self.epoch_cost,
        }


def epoch_cost_usd(
    cold: float, warm: float, *, sliding: bool, requests_per_turn: Number, turns_per_epoch: Number
) -> float:
    """USD cost of an epoch of E turns of R requests each, rounded to 6 decimals (DS4 runtime).

    Sliding plan: every turn pays one cold request and R-1 warm ones: `(cold + max(0, R-1)·warm)·E`.
    Stable plan: one cold request, then all warm: `cold + max(0, R·E - 1)·warm`.
    """
    if sliding:
        return round6((cold + max(0, requests_per_turn - 1) * warm) * turns_per_epoch)
    return round6(cold + max(0, requests_per_turn * turns_per_epoch - 1) * warm)


def candidate_epoch(
    plan: CandidatePlan,
    *,
    previous_hashes: Sequence[str | None],
    pricing: CachePricing | None,
    requests_per_turn: Number,
    turns_per_epoch: Number,
) -> CandidateEpoch | None:
    """Epoch cost of `plan` against the previous final plan's hashes (spec §4.4 step 3).

    None (DS4 `undefined`) when pricing is missing or the plan is not managed.
    `previous_hashes` must already be `()` after a model switch. The fixed system/tool tokens are
    never reusable in the cold request, and fully cached in the warm one.
    """
    if pricing is None or not plan.managed:
        return None
    total = plan.total_input_tokens
    reusable = (
        reusable_prefix_tokens(previous_hashes, plan.message_hashes, plan.message_tokens)
        if previous_hashes
        else 0
    )
    cold = estimate_request_cost(total, reusable, pricing)
    warm = estimate_request_cost(total, total, pricing)
    cost = None
    if cold.total is not None and warm.total is not None:
        cost = epoch_cost_usd(
            cold.total,
            warm.total,
            sliding=plan.sliding,
            requests_per_turn=requests_per_turn,
            turns_per_epoch=turns_per_epoch,
        )
    return CandidateEpoch(plan.recent_tail_token_limit, total, reusable, plan.sliding, cold, warm, cost)


@dataclass(frozen=True)
class CandidateComparison:
    """Nominal versus extended epoch cost (DS4 runtime `extendedWon`).

    `threshold` = nominal·(1 - minimumImprovementRatio) USD; the extended tail wins when its epoch
    cost is strictly below it. `improvement_ratio` = (nominal - extended) / nominal is the saving
    actually offered (display only; None when undefined or nominal is 0).
    """

    nominal_epoch_cost: float | None
    extended_epoch_cost: float | None
    minimum_improvement_ratio: float
    threshold: float | None
    improvement_ratio: float | None
    extended_won: bool

    @property
    def winner(self) -> Candidate:
        """`cache-aware` when the extended tail won this comparison, else `nominal`."""
        return "cache-aware" if self.extended_won else "nominal"

    def to_json(self) -> dict[str, Any]:
        """JSON for display (camelCase)."""
        return {
            "nominalEpochCost": self.nominal_epoch_cost,
            "extendedEpochCost": self.extended_epoch_cost,
            "minimumImprovementRatio": self.minimum_improvement_ratio,
            "threshold": self.threshold,
            "improvementRatio": self.improvement_ratio,
            "extendedWon": self.extended_won,
            "winner": self.winner,
        }


def compare_epoch_costs(
    nominal_epoch_cost: float | None, extended_epoch_cost: float | None, minimum_improvement_ratio: float
) -> CandidateComparison:
    """Does the extended tail win? Both costs defined and `extended < nominal·(1 - ratio)` (strict)."""
    threshold = None if nominal_epoch_cost is None else nominal_epoch_cost * (1 - minimum_improvement_ratio)
    won = threshold is not None and extended_epoch_cost is not None and extended_epoch_cost < threshold
    improvement = None
    if nominal_epoch_cost and extended_epoch_cost is not None:
        improvement = (nominal_epoch_cost - extended_epoch_cost) / nominal_epoch_cost
    return CandidateComparison(
        nominal_epoch_cost, extended_epoch_cost, minimum_improvement_ratio, threshold, improvement, won
    )


# --- Hysteresis and runtime state ------------------------------------------------------------


@dataclass(frozen=True)
class HysteresisState:
    """DS4 runtime `cacheAwareStickExtended` / `cacheAwareExtendedLossStreak` (both reset per session).

    The streak counts planning passes (context events, tool-loop requests included), not epochs,
    and is not reset on a model switch (spec §10.3).
    """

    stick_extended: bool = False
    loss_streak: int = 0

    def to_json(self) -> dict[str, Any]:
        """`{"lossStreak": n, "stickExtended": b}`."""
        return {"lossStreak": self.loss_streak, "stickExtended": self.stick_extended}


def advance_hysteresis(
    state: HysteresisState, *, extended_won: bool, stickiness_epochs: int
) -> HysteresisState:
    """One comparison's effect on the hysteresis (spec §4.4 step 3).

    Won: streak 0, stick. Lost while sticking: streak + 1, and after `stickiness_epochs`
    consecutive losses stop sticking with streak 0. Lost while not sticking: unchanged.
    """
    if extended_won:
        return HysteresisState(stick_extended=True, loss_streak=0)
    if not state.stick_extended:
        return state
    streak = state.loss_streak + 1
    if streak >= stickiness_epochs:
        return HysteresisState(stick_extended=False, loss_streak=0)
    return HysteresisState(stick_extended=True, loss_streak=streak)


@dataclass(frozen=True)
class PrefixHistory:
    """The previous final plan's message hashes and tokens and its model key `provider/id`."""

    message_hashes: tuple[str, ...] = ()
    message_tokens: tuple[Number, ...] = ()
    model_key: str | None = None

    def previous_for(self, model_key: str | None) -> tuple[str, ...]:
        """The hashes to compare against: `()` when the model key is unknown or changed."""
        return self.message_hashes if model_key is not None and model_key == self.model_key else ()


@dataclass(frozen=True)
class CacheAwareRuntimeState:
    """Everything the DS4 runtime carries between context events for the cache-aware policy."""

    hysteresis: HysteresisState = field(default_factory=HysteresisState)
    history: PrefixHistory = field(default_factory=PrefixHistory)


# --- Runtime candidate selection (steps 2-3) -------------------------------------------------


@dataclass(frozen=True)
class CandidateSelection:
    """Outcome of runtime steps 2-3 (spec §4.4).

    `decision` is None when the gate did not open (mode off, no model cost, no budget).
    `extended_plan`, both epochs and `comparison` exist only when the decision is eligible and
    extended (otherwise DS4 computes none of them and the hysteresis is untouched).
    `cache_aware_tail_tokens` is the override passed to the final plan (None = nominal tail).
    """

    decision: CacheAwareDecision | None
    extended_plan: CandidatePlan | None
    nominal_epoch: CandidateEpoch | None
    extended_epoch: CandidateEpoch | None
    comparison: CandidateComparison | None
    hysteresis_before: HysteresisState
    hysteresis_after: HysteresisState
    cache_aware_tail_tokens: Number | None

    def to_json(self) -> dict[str, Any]:
        """Full detail for display: the DS4 decision plus `gates` and `candidateTailTokens`, both
        candidates' epochs, the comparison, the hysteresis before and after, and the override
        (null where DS4 computed nothing)."""
        return {
            "decision": self.decision.to_detail_json() if self.decision is not None else None,
            "nominal": self.nominal_epoch.to_json() if self.nominal_epoch else None,
            "extended": self.extended_epoch.to_json() if self.extended_epoch else None,
            "comparison": self.comparison.to_json() if self.comparison else None,
            "hysteresisBefore": self.hysteresis_before.to_json(),
            "hysteresisAfter": self.hysteresis_after.to_json(),
            "cacheAwareTailTokens": self.cache_aware_tail_tokens,
        }


def select_cache_aware_tail(
    hysteresis: HysteresisState,
    *,
    config: CacheAwareConfig,
    pricing: CachePricing | None,
    calibration_sample_count: int,
    calibration_cache_read_share: float,
    nominal_recent_tail_tokens: Number,
    active_input_budget: Number | None,
    nominal_plan: CandidatePlan,
    plan_extended: Callable[[Number], CandidatePlan],
    previous_hashes: Sequence[str | None],
) -> CandidateSelection:
    """Choose between the nominal and the cache-aware tail (DS4 runtime steps 2-3, spec §4.4).

    `pricing` is None when the model has no `cost`; `active_input_budget` None when there is no
    budget. The observed share is used only when `calibration_sample_count > 0`.
    `plan_extended(tail)` must plan the dedup candidate with `cacheAwareTailTokens = tail`; it is
    called once, only for an eligible, extended decision. `previous_hashes` are the previous final
    plan's hashes, already `()` after a model switch (see `PrefixHistory.previous_for`).
    """
    if config.mode != "auto" or pricing is None or active_input_budget is None:
        return CandidateSelection(None, None, None, None, None, hysteresis, hysteresis, None)
    decision = decide_cache_aware_tail(
        config=config,
        pricing=pricing,
        observed_cache_read_share=calibration_cache_read_share if calibration_sample_count > 0 else None,
        sample_count=calibration_sample_count,
        nominal_recent_tail_tokens=nominal_recent_tail_tokens,
        active_input_budget=active_input_budget,
    )
    if not (decision.eligible and decision.tail_extended):
        return CandidateSelection(decision, None, None, None, None, hysteresis, hysteresis, None)
    extended_plan = plan_extended(decision.recent_tail_tokens)

    def epoch(plan: CandidatePlan) -> CandidateEpoch | None:
        return candidate_epoch(
            plan,
            previous_hashes=previous_hashes,
            pricing=pricing,
            requests_per_turn=config.expected_requests_per_turn,
            turns_per_epoch=config.expected_turns_per_epoch,
        )

    nominal_epoch, extended_epoch = epoch(nominal_plan), epoch(extended_plan)
    comparison = compare_epoch_costs(
        nominal_epoch.epoch_cost if nominal_epoch else None,
        extended_epoch.epoch_cost if extended_epoch else None,
        config.minimum_improvement_ratio,
    )
    after = advance_hysteresis(
        hysteresis, extended_won=comparison.extended_won, stickiness_epochs=config.stickiness_epochs
    )
    override = decision.recent_tail_tokens if after.stick_extended else None
    return CandidateSelection(
        decision, extended_plan, nominal_epoch, extended_epoch, comparison, hysteresis, after, override
    )


# --- planning.cacheAware (step 6) ------------------------------------------------------------


@dataclass(frozen=True)
class CacheAwareBlock:
    """DS4 `planning.cacheAware` (spec §4.5); present only in mode auto on a managed plan.

    `tail_extended` means the override was applied (not `decision.tailExtended`);
    `reusable_prefix_tokens` (tokens) and `estimated_cost` (USD) refer to the final plan.
    """

    eligible: bool
    tail_extended: bool
    recent_tail_tokens: Number | None
    miss_hit_ratio: float | None
    cache_read_share: float | None
    sample_count: Number | None
    reusable_prefix_tokens: Number
    estimated_cost: float | None
    candidate: Candidate

    def to_json(self) -> dict[str, Any]:
        """Exactly DS4's block; optional fields omitted (reusablePrefixTokens only when > 0)."""
        result: dict[str, Any] = {"eligible": self.eligible, "tailExtended": self.tail_extended}
        optional = {
            "recentTailTokens": self.recent_tail_tokens,
            "missHitRatio": self.miss_hit_ratio,
            "cacheReadShare": self.cache_read_share,
            "sampleCount": self.sample_count,
            "reusablePrefixTokens": self.reusable_prefix_tokens if self.reusable_prefix_tokens > 0 else None,
            "estimatedCost": self.estimated_cost,
        }
        result.update((key, value) for key, value in optional.items() if value is not None)
        result["candidate"] = self.candidate
        return result


def planning_cache_aware_block(
    *,
    decision: CacheAwareDecision | None,
    cache_aware_tail_tokens: Number | None,
    final_plan: CandidatePlan,
    history: PrefixHistory,
    model_key: str | None,
    pricing: CachePricing | None,
) -> tuple[CacheAwareBlock, PrefixHistory]:
    """Build `planning.cacheAware` for the final plan and the history for the next event (step 6).

    Call only in mode auto with a managed final plan (raises ValueError otherwise: DS4 emits no
    block). The reusable prefix is measured against `history` when `model_key` is unchanged;
    `estimated_cost` = cost(fixed + Σ selected tokens, reusable), None without pricing.
    Returns the block and the new history (the final plan's hashes, tokens and `model_key`).
    """
    if not final_plan.managed:
        raise ValueError("planning.cacheAware exists only for a managed plan")
    reusable = reusable_prefix_tokens(
        history.previous_for(model_key), final_plan.message_hashes, final_plan.message_tokens
    )
    estimated_cost = None
    if pricing is not None:
        estimated_cost = estimate_request_cost(
            final_plan.fixed_tokens + final_plan.selected_tokens, reusable, pricing
        ).total
    block = CacheAwareBlock(
        eligible=decision.eligible if decision else False,
        tail_extended=cache_aware_tail_tokens is not None,
        recent_tail_tokens=decision.recent_tail_tokens if decision else None,
        miss_hit_ratio=decision.miss_hit_ratio if decision else None,
        cache_read_share=decision.cache_read_share if decision else None,
        sample_count=decision.sample_count if decision else None,
        reusable_prefix_tokens=reusable,
        estimated_cost=estimated_cost,
        candidate="cache-aware" if cache_aware_tail_tokens is not None else "nominal",
    )
    return block, PrefixHistory(final_plan.message_hashes, final_plan.message_tokens, model_key)


# --- One context event -----------------------------------------------------------------------


@dataclass(frozen=True)
class CacheAwareTurn:
    """Everything the cache-aware policy did on one context event.

    `selection` holds the decision, both candidates, the comparison and the hysteresis before and
    after; `final_plan` is the plan sent (planned with `selection.cache_aware_tail_tokens`);
    `block` is `planning.cacheAware` (None in mode off or for a non-managed final plan).
    """

    selection: CandidateSelection
    final_plan: CandidatePlan
    block: CacheAwareBlock | None

    def to_json(self) -> dict[str, Any]:
        """The runtime trace in the vectors' shape: decision, nominalEpoch, extendedEpoch,
        extendedWon, cacheAwareTailTokens, stateAfter (null where DS4 computed nothing)."""
        selection = self.selection
        return {
            "decision": selection.decision.to_json() if selection.decision else None,
            "nominalEpoch": selection.nominal_epoch.epoch_cost if selection.nominal_epoch else None,
            "extendedEpoch": selection.extended_epoch.epoch_cost if selection.extended_epoch else None,
            "extendedWon": selection.comparison.extended_won if selection.comparison else None,
            "cacheAwareTailTokens": selection.cache_aware_tail_tokens,
            "stateAfter": selection.hysteresis_after.to_json(),
        }


def run_cache_aware_turn(
    state: CacheAwareRuntimeState,
    *,
    config: CacheAwareConfig,
    model_key: str | None,
    pricing: CachePricing | None,
    calibration_sample_count: int,
    calibration_cache_read_share: float,
    nominal_recent_tail_tokens: Number,
    active_input_budget: Number | None,
    plan: Callable[[Number | None], CandidatePlan],
) -> tuple[CacheAwareTurn, CacheAwareRuntimeState]:
    """One DS4 0.3.7 context event's cache-aware planning when no supplements differ between the
    dedup plans and the final plan (no retrieval or project snippets), spec §4.4 steps 1-6.

    `plan(tail)` plans with `cacheAwareTailTokens = tail` (None = nominal). The final plan is the
    nominal plan, or the extended one when the override is applied (the planner is
    deterministic, so DS4's separate final planning gives the same result). Returns the turn and
    the state for the next event; the history only advances when a block is produced.
    """
    nominal_plan = plan(None)
    selection = select_cache_aware_tail(
        state.hysteresis,
        config=config,
        pricing=pricing,
        calibration_sample_count=calibration_sample_count,
        calibration_cache_read_share=calibration_cache_read_share,
        nominal_recent_tail_tokens=nominal_recent_tail_tokens,
        active_input_budget=active_input_budget,
        nominal_plan=nominal_plan,
        plan_extended=plan,
        previous_hashes=state.history.previous_for(model_key),
    )
    final_plan = nominal_plan
    if selection.cache_aware_tail_tokens is not None:
        assert selection.extended_plan is not None  # an override comes from an extended comparison
        final_plan = selection.extended_plan
    block, history = None, state.history
    if config.mode == "auto" and final_plan.managed:
        block, history = planning_cache_aware_block(
            decision=selection.decision,
            cache_aware_tail_tokens=selection.cache_aware_tail_tokens,
            final_plan=final_plan,
            history=state.history,
            model_key=model_key,
            pricing=pricing,
        )
    return CacheAwareTurn(selection, final_plan, block), CacheAwareRuntimeState(
        selection.hysteresis_after, history
    )
