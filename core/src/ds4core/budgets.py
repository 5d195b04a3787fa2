"""Model profile, context budget, adaptive category ceilings and model awareness (spec §2).

Units: `context_window`, output reserve, safety margin and `model_input_hard_limit` are provider
tokens; every limit the planner compares against (`hard_input_limit`, `active_input_budget`,
category ceilings) is in estimator tokens, i.e. provider tokens divided by the calibration ratio.

Budgets follow DS4 0.3.10 (`budget-manager.ts@0607238`): a calibration ratio below 1 never raises
the input limits (§2.3). Category ceilings follow `model-awareness.ts@0607238` (§2.4).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

from ds4core.calibration import (
    DEFAULT_MODEL_AWARENESS_CONFIG,
    CalibrationDrift,
    ModelAwarenessConfig,
    ModelCalibration,
    ModelProfileOverride,
    _camel,
    _fields_from_json,
    analyze_model_calibration,
    detect_token_drift,
    is_valid_sample,
)
from ds4core.jsjson import round6

__all__ = [
    "DEFAULT_CONTEXT_CONFIG",
    "AdaptiveModelLimits",
    "AppliedCalibration",
    "AutoTuneDecision",
    "CacheAwareConfig",
    "ContextBudget",
    "ContextConfig",
    "MessageBudget",
    "ModelCost",
    "ModelDescriptor",
    "ModelProfile",
    "ResolvedModelAwareness",
    "adaptive_recent_tail_limit",
    "automatic_history_retrieval_ceiling",
    "automatic_project_retrieval_ceiling",
    "automatic_recent_tail_ceiling",
    "calculate_context_budget",
    "create_model_profile",
    "default_safety_margin",
    "message_budget",
    "model_profile_key",
    "resolve_model_awareness",
]


# ---------------------------------------------------------------------------------------------
# Configuration


@dataclass(frozen=True)
class CacheAwareConfig:
    """DS4 0.3.7 `context.cacheAware` (spec §4.1) with DS4's defaults. Shares and ratios are
    fractions; counts are samples, requests, turns or epochs. The policy itself lives in
    `ds4core.cache_policy`."""

    mode: str = "off"
    minimum_cache_sample_count: int = 3
    minimum_cache_read_share: float = 0.5
    minimum_miss_hit_ratio: float = 20
    minimum_improvement_ratio: float = 0.1
    max_tail_budget_share: float = 0.5
    expected_requests_per_turn: int = 4
    expected_turns_per_epoch: int = 4
    stickiness_epochs: int = 2

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CacheAwareConfig:
        """Defaults overlaid with DS4's JSON names. Raises ValueError on an unknown key."""
        return cls(**_fields_from_json(cls, data, "context.cacheAware"))

    def to_json(self) -> dict[str, Any]:
        """DS4's JSON."""
        return {_camel(f.name): getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class ContextConfig:
    """DS4's `context` settings with DS4's defaults (`DEFAULT_CONFIG.context`, config.ts).

    Ratios are fractions of the context window; token fields are estimator tokens except the
    output reserves (provider tokens). `mode` is `"managed"` or `"observer"`.
    """

    mode: str = "managed"
    target_fill_ratio: float = 0.7
    soft_limit_ratio: float = 0.8
    hard_limit_ratio: float = 0.9
    minimum_output_reserve: int = 8192
    preferred_output_reserve: int = 32768
    recent_tail_tokens: int = 64000
    rescue_immediate_predecessor: bool = True
    max_pinned_tokens: int = 16000
    max_memory_tokens: int = 8000
    max_retrieved_history_tokens: int = 16000
    max_project_tokens: int = 20000
    max_summary_tokens: int = 12000
    cache_aware: CacheAwareConfig = field(default_factory=CacheAwareConfig)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ContextConfig:
        """Defaults overlaid with DS4's JSON names (`recentTailTokens`, `cacheAware`, ...).
        Raises ValueError on an unknown key."""
        values = _fields_from_json(cls, data, "context")
        if "cache_aware" in values:
            values["cache_aware"] = CacheAwareConfig.from_json(values["cache_aware"])
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        """DS4's JSON."""
        out = {_camel(f.name): getattr(self, f.name) for f in fields(self)}
        out["cacheAware"] = self.cache_aware.to_json()
        return out


DEFAULT_CONTEXT_CONFIG = ContextConfig()
"""DS4's default `context` configuration."""


# ---------------------------------------------------------------------------------------------
# Model profile


@dataclass(frozen=True)
class ModelCost:
    """Pi `Model.cost`: USD per million tokens for input, output, cache read and cache write
    (None when the model record lacks that rate)."""

    input: float | None
    output: float | None
    cache_read: float | None
    cache_write: float | None


@dataclass(frozen=True)
class ModelDescriptor:
    """The model as the runtime describes it (Pi `Model`): `context_window` and `max_tokens`
    (maximum output) in provider tokens; `input` lists modalities such as "text", "image"."""

    provider: str
    id: str
    context_window: float
    max_tokens: float | None = None
    reasoning: bool | None = None
    input: tuple[str, ...] | None = None
    cost: ModelCost | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelDescriptor:
        """Build from Pi/DS4 JSON (`contextWindow`, `maxTokens`, `cost.cacheRead`, ...); other
        keys of a Pi model record are ignored."""
        cost = data.get("cost")
        return cls(
            provider=data["provider"],
            id=data["id"],
            context_window=data["contextWindow"],
            max_tokens=data.get("maxTokens"),
            reasoning=data.get("reasoning"),
            input=tuple(data["input"]) if data.get("input") is not None else None,
            cost=ModelCost(
                input=cost.get("input"),
                output=cost.get("output"),
                cache_read=cost.get("cacheRead"),
                cache_write=cost.get("cacheWrite"),
            )
            if isinstance(cost, Mapping)
            else None,
        )


@dataclass(frozen=True)
class ModelProfile:
    """DS4's `ModelProfile` (provider tokens). `max_output_tokens` is None when the model states
    no output maximum."""

    provider: str
    model_id: str
    context_window: int
    max_output_tokens: int | None
    safety_margin_tokens: int
    supports_images: bool
    supports_tools: bool
    supports_thinking: bool
    token_estimator: str = "chars-v1"

    def to_json(self) -> dict[str, Any]:
        """DS4's JSON (`maxOutputTokens` omitted when None)."""
        return {
            _camel(f.name): getattr(self, f.name)
            for f in fields(self)
            if not (f.name == "max_output_tokens" and self.max_output_tokens is None)
        }


def default_safety_margin(context_window: int) -> int:
    """min(8192, max(1024, ceil(0.02 · window))) provider tokens (spec §2.1)."""
    return min(8192, max(1024, math.ceil(context_window * 0.02)))


def create_model_profile(
    model: ModelDescriptor,
    *,
    context_window: float | None = None,
    max_output_tokens: float | None = None,
    safety_margin_tokens: float | None = None,
) -> ModelProfile:
    """DS4's `createModelProfile` (spec §2.1); keyword arguments are override adjustments.

    The window must be finite and > 0 (floored); the output maximum is kept when > 0 and capped
    at the window; the safety margin defaults to `default_safety_margin` and is capped at the
    window. Raises ValueError for a non-positive window or a negative safety margin.
    """
    window = context_window if context_window is not None else model.context_window
    if not math.isfinite(window) or window <= 0:
        raise ValueError("Model context window must be a positive number")
    window = math.floor(window)
    output = max_output_tokens if max_output_tokens is not None else model.max_tokens
    margin = safety_margin_tokens if safety_margin_tokens is not None else default_safety_margin(window)
    if not math.isfinite(margin) or margin < 0:
        raise ValueError("Model safety margin must be a non-negative number")
    return ModelProfile(
        provider=model.provider,
        model_id=model.id,
        context_window=window,
        max_output_tokens=min(window, math.floor(output)) if output is not None and output > 0 else None,
        safety_margin_tokens=min(window, math.floor(margin)),
        supports_images="image" in (model.input or ()),
        supports_tools=True,
        supports_thinking=bool(model.reasoning),
    )


def model_profile_key(provider: str, model_id: str) -> str:
    """`"<provider>/<model id>"`, the key of overrides and calibration histories."""
    return f"{provider}/{model_id}"


# ---------------------------------------------------------------------------------------------
# Budget


class AppliedCalibration(Protocol):
    """What a budget needs from a calibration: DS4's `BudgetCalibration`
    (`ModelCalibration` satisfies it)."""

    calibrated: bool
    applied_ratio: float
    accepted_samples: int


_BUDGET_JSON_ORDER = (
    "context_window",
    "output_reserve",
    "safety_margin",
    "model_input_hard_limit",
    "nominal_hard_input_limit",
    "nominal_soft_input_limit",
    "nominal_preferred_input_target",
    "hard_input_limit",
    "soft_input_limit",
    "preferred_input_target",
    "active_input_budget",
    "calibration_ratio",
    "calibration_samples",
)


@dataclass(frozen=True)
class ContextBudget:
    """DS4's `ContextBudget` (spec §2.2-2.3).

    Provider tokens: `context_window`, `output_reserve`, `safety_margin`,
    `model_input_hard_limit` and the `nominal_*` limits. Estimator tokens: `hard_input_limit`,
    `soft_input_limit`, `preferred_input_target`, `active_input_budget` (the planner's target).
    The nominal fields and calibration fields are optional in DS4 (0.3.7 budgets lack them).
    """

    context_window: int
    output_reserve: int
    safety_margin: int
    model_input_hard_limit: int
    hard_input_limit: int
    soft_input_limit: int
    preferred_input_target: int
    active_input_budget: int
    nominal_hard_input_limit: int | None = None
    nominal_soft_input_limit: int | None = None
    nominal_preferred_input_target: int | None = None
    calibration_ratio: float | None = None
    calibration_samples: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ContextBudget:
        """Build from DS4's JSON names; optional fields may be missing. Raises ValueError on an
        unknown key and TypeError on a missing required one."""
        return cls(**_fields_from_json(cls, data, "budget"))

    def to_json(self) -> dict[str, Any]:
        """DS4's JSON in DS4's field order, optional fields omitted when None."""
        return {
            _camel(name): getattr(self, name)
            for name in _BUDGET_JSON_ORDER
            if getattr(self, name) is not None
        }


def calculate_context_budget(
    profile: ModelProfile,
    config: ContextConfig = DEFAULT_CONTEXT_CONFIG,
    calibration: AppliedCalibration | None = None,
) -> ContextBudget:
    """DS4's `calculateContextBudget` with the 0.3.10 calibration rule (spec §2.2-2.3).

    The output reserve is the preferred reserve capped by the model's output maximum (never below
    the capped minimum); the safety margin fits what the reserve leaves. The calibration ratio
    (when calibrated, finite and > 0) divides the limits, but only a ratio above 1 lowers them:
    an apparent overestimate never raises limits (0.3.10; 0.3.7 used the raw ratio).
    """
    window = profile.context_window
    output_ceiling = (
        profile.max_output_tokens
        if profile.max_output_tokens is not None
        else config.preferred_output_reserve
    )
    output_reserve = max(
        min(config.minimum_output_reserve, output_ceiling),
        min(config.preferred_output_reserve, output_ceiling),
    )
    safety_margin = min(profile.safety_margin_tokens, max(0, window - output_reserve))
    model_hard = max(0, window - output_reserve - safety_margin)
    nominal_hard = min(model_hard, math.floor(window * config.hard_limit_ratio))
    nominal_soft = min(nominal_hard, math.floor(window * config.soft_limit_ratio))
    nominal_preferred = math.floor(window * config.target_fill_ratio)
    ratio: float = 1
    if (
        calibration is not None
        and calibration.calibrated
        and math.isfinite(calibration.applied_ratio)
        and calibration.applied_ratio > 0
    ):
        ratio = calibration.applied_ratio
    conservative = max(1, ratio)

    def limit(provider_tokens: int) -> int:
        return 0 if provider_tokens <= 0 else max(0, math.floor(provider_tokens / conservative))

    hard = limit(nominal_hard)
    preferred = limit(nominal_preferred)
    return ContextBudget(
        context_window=window,
        output_reserve=output_reserve,
        safety_margin=safety_margin,
        model_input_hard_limit=model_hard,
        nominal_hard_input_limit=nominal_hard,
        nominal_soft_input_limit=nominal_soft,
        nominal_preferred_input_target=nominal_preferred,
        hard_input_limit=hard,
        soft_input_limit=min(hard, limit(nominal_soft)),
        preferred_input_target=preferred,
        active_input_budget=min(hard, preferred),
        calibration_ratio=ratio,
        calibration_samples=calibration.accepted_samples if calibration is not None else 0,
    )


@dataclass(frozen=True)
class MessageBudget:
    """The planner's message budget (estimator tokens): what the budget leaves after the fixed
    system prompt and tool definitions (spec §2.4)."""

    target_tokens: int
    hard_limit_tokens: int


def message_budget(budget: ContextBudget, fixed_tokens: int) -> MessageBudget:
    """`messageTargetTokens = max(0, activeInputBudget − fixed)` and
    `messageHardLimitTokens = max(0, hardInputLimit − fixed)` (spec §2.4)."""
    return MessageBudget(
        target_tokens=max(0, budget.active_input_budget - fixed_tokens),
        hard_limit_tokens=max(0, budget.hard_input_limit - fixed_tokens),
    )


# ---------------------------------------------------------------------------------------------
# Adaptive ceilings and model awareness


def _by_window(context_window: float, small: int, medium: int, large: int, huge: int) -> int:
    if context_window <= 40_000:
        return small
    if context_window <= 131_072:
        return medium
    if context_window <= 262_144:
        return large
    return huge


def automatic_recent_tail_ceiling(context_window: float) -> int:
    """Recent-tail ceiling by window (inclusive bounds 40,000 / 131,072 / 262,144):
    12k / 24k / 32k / 64k estimator tokens (spec §2.4). The code's boundary is > 262,144, not
    the "above 256k" of ADR-062 (spec §10.8)."""
    return _by_window(context_window, 12_000, 24_000, 32_000, 64_000)


def automatic_history_retrieval_ceiling(context_window: float) -> int:
    """Historical-retrieval ceiling by window: 4k / 8k / 16k / 32k estimator tokens (spec §2.4)."""
    return _by_window(context_window, 4_000, 8_000, 16_000, 32_000)


def automatic_project_retrieval_ceiling(context_window: float) -> int:
    """Project-snippet ceiling by window: 4k / 12k / 20k / 32k estimator tokens (spec §2.4)."""
    return _by_window(context_window, 4_000, 12_000, 20_000, 32_000)


def adaptive_recent_tail_limit(context_window: float, configured_limit: int) -> int:
    """The planner's own tail cap: max(0, min(configured, automatic ceiling(window))).

    Per DS4's code (spec §10.4) this re-caps even an explicit `recentTailTokens` override at the
    automatic ceiling, although ADR-062 documents overrides as a way past it; only a cache-aware
    tail override (`cache_aware_tail_tokens` of the planner) bypasses it.
    """
    return max(0, min(configured_limit, automatic_recent_tail_ceiling(context_window)))


@dataclass(frozen=True)
class AdaptiveModelLimits:
    """DS4's `AdaptiveModelLimits` (estimator tokens): nominal values before calibration and the
    effective values handed to the planner."""

    nominal_recent_tail_tokens: int
    nominal_retrieved_history_tokens: int
    nominal_project_tokens: int
    recent_tail_tokens: int
    max_retrieved_history_tokens: int
    max_project_tokens: int

    def to_json(self) -> dict[str, Any]:
        """DS4's JSON."""
        return {_camel(f.name): getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class AutoTuneDecision:
    """DS4 0.3.10 `AutoTuneDecision`: `status` is `disabled`, `insufficient-samples`,
    `no-headroom` or `expanded`; `high_watermark_ratio` = largest observed actual input / target;
    `boost_factor` multiplies non-overridden nominal ceilings (1.125 when expanded)."""

    status: str
    accepted_samples: int
    boost_factor: float
    high_watermark_ratio: float | None = None

    def to_json(self) -> dict[str, Any]:
        """DS4's JSON (`highWatermarkRatio` omitted when None)."""
        out: dict[str, Any] = {"status": self.status, "acceptedSamples": self.accepted_samples}
        if self.high_watermark_ratio is not None:
            out["highWatermarkRatio"] = self.high_watermark_ratio
        out["boostFactor"] = self.boost_factor
        return out


@dataclass(frozen=True)
class ResolvedModelAwareness:
    """DS4's `ResolvedModelAwareness`: the profile after overrides, calibration, drift warning,
    adaptive limits and the context config handed to the planner (with the effective limits)."""

    profile_key: str
    profile: ModelProfile
    override_keys: tuple[str, ...]
    calibration: ModelCalibration
    drift: CalibrationDrift | None
    auto_tune: AutoTuneDecision | None
    limits: AdaptiveModelLimits
    context_config: ContextConfig


def _decide_auto_tune(
    samples: Sequence[Mapping[str, Any]],
    calibration: ModelCalibration,
    awareness: ModelAwarenessConfig,
    profile: ModelProfile,
    context: ContextConfig,
) -> AutoTuneDecision:
    if not awareness.enabled or not awareness.auto_tune:
        return AutoTuneDecision("disabled", 0, 1)
    count = calibration.accepted_samples
    if not calibration.calibrated or count < 8:
        return AutoTuneDecision("insufficient-samples", count, 1)
    budget = calculate_context_budget(profile, context)
    target = min(budget.preferred_input_target, budget.hard_input_limit)
    # Ratio outliers are excluded from calibration, but their provider-reported occupancy still
    # counts: the high watermark is over every valid sample in the window.
    high_watermark = max(
        s["actualInputTokens"] for s in samples[: awareness.calibration_window] if is_valid_sample(s)
    )
    raw = high_watermark / target if target > 0 else math.inf
    expanded = raw <= 0.6
    return AutoTuneDecision(
        "expanded" if expanded else "no-headroom",
        count,
        1.125 if expanded else 1,
        round6(raw) if math.isfinite(raw) else None,
    )


def _calibrated_limit(value: int, ratio: float) -> int:
    if value <= 0:
        return 0
    return max(1, math.floor(value / max(0.000001, ratio)))


def resolve_model_awareness(
    model: ModelDescriptor,
    context: ContextConfig = DEFAULT_CONTEXT_CONFIG,
    awareness: ModelAwarenessConfig = DEFAULT_MODEL_AWARENESS_CONFIG,
    samples: Sequence[Mapping[str, Any]] = (),
) -> ResolvedModelAwareness:
    """DS4's `resolveModelAwareness` (spec §2.4, model-awareness.ts@0607238).

    1. Overrides `"*"`, `"provider/*"`, `"provider/model"` merge field by field, later winning;
       ignored when awareness is disabled.
    2. Nominal ceilings: tail = override ?? min(context tail, automatic ceiling); history and
       project likewise (only when awareness is enabled, else the config maxima).
    3. Optional 0.3.10 auto-tune (off by default) multiplies non-overridden nominals by 1.125.
    4. Effective = min(context maximum, floor(nominal / max(1e-6, appliedRatio))), at least 1 for
       positive nominals: the raw ratio is used, so these ceilings *can* grow when the ratio is
       below 1, but the configured `context.*` maxima stay hard caps, even over an override.
    `samples` are calibration records, newest first (see `analyze_model_calibration`).
    Raises ValueError for an invalid window or safety margin.
    """
    overrides = awareness.overrides if awareness.enabled else {}
    keys = tuple(
        k
        for k in ("*", f"{model.provider}/*", model_profile_key(model.provider, model.id))
        if k in overrides
    )
    override = ModelProfileOverride()
    for key in keys:
        override = override.merged(overrides[key])
    profile = create_model_profile(
        model,
        context_window=override.context_window,
        max_output_tokens=override.max_output_tokens,
        safety_margin_tokens=override.safety_margin_tokens,
    )
    estimator = (override.token_estimator or "chars-v1") if awareness.enabled else "chars-v1"
    calibration = analyze_model_calibration(samples, awareness, estimator)
    auto_tune = _decide_auto_tune(samples, calibration, awareness, profile, context)

    def boosted(nominal: int, cap: int, explicit: int | None) -> int:
        if explicit is None and auto_tune.status == "expanded":
            return min(cap, math.floor(nominal * auto_tune.boost_factor))
        return nominal

    window = profile.context_window
    nominal_tail = (
        override.recent_tail_tokens
        if override.recent_tail_tokens is not None
        else min(context.recent_tail_tokens, automatic_recent_tail_ceiling(window))
    )
    nominal_history = (
        override.max_retrieved_history_tokens
        if override.max_retrieved_history_tokens is not None
        else min(context.max_retrieved_history_tokens, automatic_history_retrieval_ceiling(window))
        if awareness.enabled
        else context.max_retrieved_history_tokens
    )
    nominal_project = (
        override.max_project_tokens
        if override.max_project_tokens is not None
        else min(context.max_project_tokens, automatic_project_retrieval_ceiling(window))
        if awareness.enabled
        else context.max_project_tokens
    )
    ratio = calibration.applied_ratio
    tail = min(
        context.recent_tail_tokens,
        _calibrated_limit(
            boosted(nominal_tail, context.recent_tail_tokens, override.recent_tail_tokens), ratio
        ),
    )
    history = min(
        context.max_retrieved_history_tokens,
        _calibrated_limit(
            boosted(
                nominal_history,
                context.max_retrieved_history_tokens,
                override.max_retrieved_history_tokens,
            ),
            ratio,
        ),
    )
    project = min(
        context.max_project_tokens,
        _calibrated_limit(
            boosted(nominal_project, context.max_project_tokens, override.max_project_tokens),
            ratio,
        ),
    )
    return ResolvedModelAwareness(
        profile_key=model_profile_key(model.provider, model.id),
        profile=profile,
        override_keys=keys,
        calibration=calibration,
        drift=detect_token_drift(calibration),
        auto_tune=auto_tune if awareness.auto_tune else None,
        limits=AdaptiveModelLimits(
            nominal_recent_tail_tokens=nominal_tail,
            nominal_retrieved_history_tokens=nominal_history,
            nominal_project_tokens=nominal_project,
            recent_tail_tokens=tail,
            max_retrieved_history_tokens=history,
            max_project_tokens=project,
        ),
        context_config=replace(
            context,
            recent_tail_tokens=tail,
            max_retrieved_history_tokens=history,
            max_project_tokens=project,
        ),
    )
