"""DS4's user configuration (`ds4-context.json`) as pydantic models, and DS4's merge rule.

Pure: no file I/O (reading the files, trust and precedence live in `ds4sessions.derive.ds4config`).

DS4 (config-loader.ts, 0.3.x) applies each configuration source over the current configuration
in two steps, paraphrased here:

1. **Merge of known keys** (`merge_known`): every key of the source is compared with the default
   configuration. An unknown key is ignored with the warning
   `Unknown configuration key ignored: <path>`; a value whose JavaScript type differs from the
   default's (number, boolean, string, object), or a non-finite number, is ignored with
   `Invalid configuration value ignored: <path> has the wrong type` (objects: `must be an
   object`). Objects merge recursively, except `modelAwareness.overrides`, which merges by key
   (a later source replaces a whole `provider/model` entry), and sections whose default is an
   empty object, which are taken as given.
2. **Validation** of the merged result (`Ds4Config.model_validate`): ratios in (0, 1] and
   ordered, non-negative integer token limits, a valid `mode`, calibration settings within
   DS4's ranges and well-formed overrides. If it fails, DS4 ignores the **whole source** with
   `configuration ignored: <reason>`; so does this module's caller.

Only the sections the planner uses are modelled field by field (`enabled`, `context` with
`cacheAware`, `modelAwareness`); DS4's other sections (compaction, retrieval, project, memory,
artifacts, privacy, diagnostics, storage) do not change a plan and are accepted as given.
Defaults are DS4 0.3.7's (see `ds4core.budgets.ContextConfig`, `ds4core.calibration`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from ds4core.budgets import CacheAwareConfig, ContextConfig
from ds4core.calibration import ModelAwarenessConfig, ModelProfileOverride

__all__ = [
    "CacheAwareSection",
    "ContextSection",
    "Ds4Config",
    "ModelAwarenessSection",
    "ModelOverride",
    "apply_source",
    "default_config_json",
    "merge_known",
]

_MAX_OVERRIDE_TOKENS = 10_000_000
_CA = CacheAwareConfig()
_CTX = ContextConfig()
"""DS4's defaults live once, in `ds4core.budgets`; the sections below only validate."""


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, strict=True
    )


def _non_negative_int(value: float, name: str) -> float:
    if isinstance(value, float) and not value.is_integer() or value < 0:
        raise ValueError(f"{name} must be a non-negative integer")
    return value


class CacheAwareSection(_Model):
    """`context.cacheAware` (DS4 0.3.7, spec §4.1): shares and ratios are fractions, counts are
    samples, requests, turns or epochs."""

    mode: Literal["off", "auto"] = _CA.mode  # type: ignore[assignment]
    minimum_cache_sample_count: int = Field(_CA.minimum_cache_sample_count, ge=0)
    minimum_cache_read_share: float = Field(_CA.minimum_cache_read_share, ge=0, le=1)
    minimum_miss_hit_ratio: float = Field(_CA.minimum_miss_hit_ratio, ge=0)
    minimum_improvement_ratio: float = Field(_CA.minimum_improvement_ratio, ge=0, le=1)
    max_tail_budget_share: float = Field(_CA.max_tail_budget_share, ge=0, le=1)
    expected_requests_per_turn: int = Field(_CA.expected_requests_per_turn, ge=1)
    expected_turns_per_epoch: int = Field(_CA.expected_turns_per_epoch, ge=1)
    stickiness_epochs: int = Field(_CA.stickiness_epochs, ge=0)


class ContextSection(_Model):
    """`context`: ratios are fractions of the context window; token limits are estimator tokens
    (output reserves: provider tokens). Validation follows DS4's `validateConfig`."""

    mode: Literal["observer", "managed"] = _CTX.mode  # type: ignore[assignment]
    target_fill_ratio: float = _CTX.target_fill_ratio
    soft_limit_ratio: float = _CTX.soft_limit_ratio
    hard_limit_ratio: float = _CTX.hard_limit_ratio
    minimum_output_reserve: float = _CTX.minimum_output_reserve
    preferred_output_reserve: float = _CTX.preferred_output_reserve
    recent_tail_tokens: float = _CTX.recent_tail_tokens
    rescue_immediate_predecessor: bool = _CTX.rescue_immediate_predecessor
    max_pinned_tokens: float = _CTX.max_pinned_tokens
    max_memory_tokens: float = _CTX.max_memory_tokens
    max_retrieved_history_tokens: float = _CTX.max_retrieved_history_tokens
    max_project_tokens: float = _CTX.max_project_tokens
    max_summary_tokens: float = _CTX.max_summary_tokens
    cache_aware: CacheAwareSection = Field(default_factory=CacheAwareSection)

    @field_validator("target_fill_ratio", "soft_limit_ratio", "hard_limit_ratio")
    @classmethod
    def _ratio(cls, value: float, info: Any) -> float:
        if not 0 < value <= 1:
            raise ValueError(f"context.{to_camel(info.field_name)} must be greater than 0 and at most 1")
        return value

    @field_validator(
        "minimum_output_reserve",
        "preferred_output_reserve",
        "recent_tail_tokens",
        "max_pinned_tokens",
        "max_memory_tokens",
        "max_retrieved_history_tokens",
        "max_project_tokens",
        "max_summary_tokens",
    )
    @classmethod
    def _tokens(cls, value: float, info: Any) -> float:
        return _non_negative_int(value, f"context.{to_camel(info.field_name)}")

    @model_validator(mode="after")
    def _ordered(self) -> ContextSection:
        if not self.target_fill_ratio <= self.soft_limit_ratio <= self.hard_limit_ratio:
            raise ValueError(
                "context ratios must satisfy targetFillRatio <= softLimitRatio <= hardLimitRatio"
            )
        if self.preferred_output_reserve < self.minimum_output_reserve:
            raise ValueError("context.preferredOutputReserve must be at least context.minimumOutputReserve")
        return self


class ModelOverride(_Model):
    """One `modelAwareness.overrides` entry. `contextWindow`, `maxOutputTokens` (provider tokens)
    are positive integers ≤ 10,000,000; the other token fields non-negative integers ≤ 10,000,000;
    `maxOutputTokens` may not exceed `contextWindow` (DS4 config-loader.ts)."""

    token_estimator: str | None = None
    context_window: float | None = None
    max_output_tokens: float | None = None
    safety_margin_tokens: float | None = None
    recent_tail_tokens: float | None = None
    max_retrieved_history_tokens: float | None = None
    max_project_tokens: float | None = None

    @field_validator("context_window", "max_output_tokens")
    @classmethod
    def _positive(cls, value: float | None) -> float | None:
        if value is not None and (not float(value).is_integer() or not 0 < value <= _MAX_OVERRIDE_TOKENS):
            raise ValueError("context/output limits must be positive integers at most 10000000")
        return value

    @field_validator(
        "safety_margin_tokens", "recent_tail_tokens", "max_retrieved_history_tokens", "max_project_tokens"
    )
    @classmethod
    def _limit(cls, value: float | None) -> float | None:
        if value is not None and (not float(value).is_integer() or not 0 <= value <= _MAX_OVERRIDE_TOKENS):
            raise ValueError("token limits must be non-negative integers at most 10000000")
        return value

    @model_validator(mode="after")
    def _window(self) -> ModelOverride:
        if (
            self.context_window is not None
            and self.max_output_tokens is not None
            and self.max_output_tokens > self.context_window
        ):
            raise ValueError("maxOutputTokens must not exceed contextWindow")
        return self

    def to_core(self) -> ModelProfileOverride:
        """The `ds4core.calibration.ModelProfileOverride` (integers)."""

        def whole(value: float | None) -> int | None:
            return None if value is None else int(value)

        return ModelProfileOverride(
            token_estimator=self.token_estimator,
            context_window=whole(self.context_window),
            max_output_tokens=whole(self.max_output_tokens),
            safety_margin_tokens=whole(self.safety_margin_tokens),
            recent_tail_tokens=whole(self.recent_tail_tokens),
            max_retrieved_history_tokens=whole(self.max_retrieved_history_tokens),
            max_project_tokens=whole(self.max_project_tokens),
        )


class ModelAwarenessSection(_Model):
    """`modelAwareness` (DS4 0.3.10 ranges): `calibrationWindow` 3–200 samples,
    `minimumCalibrationSamples` 1–window, ratio bounds 0.25 ≤ lower < upper ≤ 4; override keys are
    `*`, `provider/*` or `provider/model`."""

    enabled: bool = True
    auto_tune: bool = False
    calibration_window: float = 24
    minimum_calibration_samples: float = 3
    calibration_ratio_lower_bound: float = 0.5
    calibration_ratio_upper_bound: float = 2.0
    overrides: dict[str, ModelOverride] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _ranges(self) -> ModelAwarenessSection:
        window = self.calibration_window
        if not float(window).is_integer() or not 3 <= window <= 200:
            raise ValueError("modelAwareness.calibrationWindow must be an integer between 3 and 200")
        minimum = self.minimum_calibration_samples
        if not float(minimum).is_integer() or not 1 <= minimum <= window:
            raise ValueError("modelAwareness.minimumCalibrationSamples must be between 1 and calibrationWindow")
        lower, upper = self.calibration_ratio_lower_bound, self.calibration_ratio_upper_bound
        if not (math.isfinite(lower) and math.isfinite(upper) and 0.25 <= lower < upper <= 4):
            raise ValueError("modelAwareness calibration ratio bounds must satisfy 0.25 <= lower < upper <= 4")
        for key in self.overrides:
            trimmed = key.strip()
            slash = trimmed.find("/")
            if trimmed != key or (
                trimmed != "*" and (slash <= 0 or slash == len(trimmed) - 1 or trimmed[:slash] == "*")
            ):
                raise ValueError(f"modelAwareness override {key} must be provider/model, provider/*, or *")
        return self


class Ds4Config(_Model):
    """A whole `ds4-context.json` after merging (DS4's `Ds4ContextConfig`, planner subset).

    Sections that do not affect planning are kept as plain JSON objects."""

    enabled: bool = True
    context: ContextSection = Field(default_factory=ContextSection)
    model_awareness: ModelAwarenessSection = Field(default_factory=ModelAwarenessSection)
    compaction: dict[str, Any] = Field(default_factory=dict)
    retrieval: dict[str, Any] = Field(default_factory=dict)
    project: dict[str, Any] = Field(default_factory=dict)
    memory: dict[str, Any] = Field(default_factory=dict)
    artifacts: dict[str, Any] = Field(default_factory=dict)
    privacy: dict[str, Any] = Field(default_factory=dict)
    diagnostics: dict[str, Any] = Field(default_factory=dict)
    storage: dict[str, Any] = Field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """DS4's JSON names; integral token values as ints."""
        return _ints(self.model_dump(by_alias=True, exclude_none=True))

    def context_config(self) -> ContextConfig:
        """The planner's `ContextConfig` (integers for token fields)."""
        c = self.context
        return ContextConfig(
            mode=c.mode,
            target_fill_ratio=c.target_fill_ratio,
            soft_limit_ratio=c.soft_limit_ratio,
            hard_limit_ratio=c.hard_limit_ratio,
            minimum_output_reserve=int(c.minimum_output_reserve),
            preferred_output_reserve=int(c.preferred_output_reserve),
            recent_tail_tokens=int(c.recent_tail_tokens),
            rescue_immediate_predecessor=c.rescue_immediate_predecessor,
            max_pinned_tokens=int(c.max_pinned_tokens),
            max_memory_tokens=int(c.max_memory_tokens),
            max_retrieved_history_tokens=int(c.max_retrieved_history_tokens),
            max_project_tokens=int(c.max_project_tokens),
            max_summary_tokens=int(c.max_summary_tokens),
            cache_aware=CacheAwareConfig(**c.cache_aware.model_dump()),
        )

    def awareness_config(self) -> ModelAwarenessConfig:
        """The `ds4core.calibration.ModelAwarenessConfig`."""
        m = self.model_awareness
        return ModelAwarenessConfig(
            enabled=m.enabled,
            auto_tune=m.auto_tune,
            calibration_window=int(m.calibration_window),
            minimum_calibration_samples=int(m.minimum_calibration_samples),
            calibration_ratio_lower_bound=m.calibration_ratio_lower_bound,
            calibration_ratio_upper_bound=m.calibration_ratio_upper_bound,
            overrides={key: value.to_core() for key, value in m.overrides.items()},
        )


def _ints(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def default_config_json() -> dict[str, Any]:
    """DS4's default configuration in DS4's JSON names (the base every source merges onto)."""
    return Ds4Config().to_json()


_MERGED_BY_KEY = {"modelAwareness.overrides"}


def _js_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "object"


def merge_known(
    base: Mapping[str, Any], source: Mapping[str, Any], warnings: list[str], prefix: str = ""
) -> dict[str, Any]:
    """DS4's `mergeKnown`: `source` over `base`, known keys only (see the module docstring).

    Appends one warning per ignored key or value to `warnings`; never raises. Optional override
    fields absent from the defaults are handled by `modelAwareness.overrides` being merged by
    key and validated afterwards.
    """
    result = dict(base)
    for key, incoming in source.items():
        path = f"{prefix}.{key}" if prefix else key
        if key not in base:
            warnings.append(f"Unknown configuration key ignored: {path}")
            continue
        expected = base[key]
        if isinstance(expected, Mapping):
            if not isinstance(incoming, Mapping):
                warnings.append(f"Invalid configuration value ignored: {path} must be an object")
                continue
            if path in _MERGED_BY_KEY:
                result[key] = {**expected, **incoming}
            elif not expected:
                result[key] = dict(incoming)
            else:
                result[key] = merge_known(expected, incoming, warnings, path)
            continue
        if _js_type(incoming) != _js_type(expected) or (
            isinstance(incoming, float) and not math.isfinite(incoming)
        ):
            warnings.append(f"Invalid configuration value ignored: {path} has the wrong type")
            continue
        result[key] = incoming
    return result


def apply_source(
    base: Ds4Config, source: Any, label: str
) -> tuple[Ds4Config, list[str], bool]:
    """Apply one parsed configuration source (`label`: its path, for the warnings) over `base`.

    Returns `(config, warnings, applied)`. A source that is not a JSON object, or whose merged
    result fails validation, is ignored as a whole (`applied` False) with the warning
    `<label>: configuration ignored: <reason>`, as DS4's loader does. Never raises.
    """
    if not isinstance(source, Mapping):
        return base, [f"{label}: configuration ignored: top-level JSON value must be an object"], False
    warnings: list[str] = []
    merged = merge_known(base.to_json(), source, warnings)
    try:
        config = Ds4Config.model_validate(merged)
    except ValidationError as exc:
        return base, [f"{label}: configuration ignored: {_first_error(exc)}"], False
    return config, [f"{label}: {w}" for w in warnings], True


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message
