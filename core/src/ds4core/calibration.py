"""Estimator calibration against provider-reported input tokens (spec §1.4, DS4 0.3.10
`analyzeModelCalibration` / `detectTokenDrift`).

A calibration sample pairs DS4's estimate for one request (estimator tokens) with the input
tokens the provider reported (input + cache read + cache write). The robust median of
actual/estimated ratios becomes the `appliedRatio` that budgets and category ceilings are divided
by (spec §1.5; see `ds4core.budgets`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ds4core.jsjson import round6

__all__ = [
    "DEFAULT_MODEL_AWARENESS_CONFIG",
    "CacheMetrics",
    "CalibrationDrift",
    "ModelAwarenessConfig",
    "ModelCalibration",
    "ModelProfileOverride",
    "analyze_model_calibration",
    "detect_token_drift",
    "is_valid_sample",
    "median",
]

_MAX_SAFE_INTEGER = 2**53 - 1


def median(values: Sequence[float]) -> float | None:
    """Median of `values` (mean of the two middle values for an even count); None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def _camel(name: str) -> str:
    """DS4's JSON name of a Python field name (`recent_tail_tokens` -> `recentTailTokens`).
    Shared with `ds4core.budgets`."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _fields_from_json(cls: type, data: Mapping[str, Any], what: str) -> dict[str, Any]:
    """`data`'s DS4 JSON names mapped to the field names of dataclass `cls` (values unchanged).
    Raises ValueError `unknown <what> keys: [...]` on a key that names no field. Shared with
    `ds4core.budgets`."""
    names = {_camel(f.name): f.name for f in fields(cls)}
    unknown = set(data) - set(names)
    if unknown:
        raise ValueError(f"unknown {what} keys: {sorted(unknown)}")
    return {names[k]: v for k, v in data.items()}


@dataclass(frozen=True)
class ModelProfileOverride:
    """One entry of DS4's `modelAwareness.overrides` (keys `"*"`, `"provider/*"`,
    `"provider/model"`). Every field is optional; None means "not overridden". Token fields are
    estimator tokens; `context_window`, `max_output_tokens` and `safety_margin_tokens` are
    provider tokens."""

    token_estimator: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    safety_margin_tokens: int | None = None
    recent_tail_tokens: int | None = None
    max_retrieved_history_tokens: int | None = None
    max_project_tokens: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelProfileOverride:
        """Build from DS4's JSON names (`contextWindow`, `recentTailTokens`, ...).
        Raises ValueError on an unknown key."""
        return cls(**_fields_from_json(cls, data, "modelAwareness override"))

    def merged(self, other: ModelProfileOverride) -> ModelProfileOverride:
        """Field-by-field merge where `other`'s set fields win (JS object spread)."""
        return ModelProfileOverride(
            **{
                f.name: getattr(other, f.name)
                if getattr(other, f.name) is not None
                else getattr(self, f.name)
                for f in fields(self)
            }
        )


@dataclass(frozen=True)
class ModelAwarenessConfig:
    """DS4's `modelAwareness` settings with DS4's defaults (config.ts @0.3.10).

    `calibration_window` and `minimum_calibration_samples` are sample counts; the ratio bounds are
    actual/estimated ratios. `auto_tune` is the opt-in 0.3.10 ceiling expansion (off by default).
    """

    enabled: bool = True
    auto_tune: bool = False
    calibration_window: int = 24
    minimum_calibration_samples: int = 3
    calibration_ratio_lower_bound: float = 0.5
    calibration_ratio_upper_bound: float = 2.0
    overrides: Mapping[str, ModelProfileOverride] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelAwarenessConfig:
        """Defaults overlaid with DS4's JSON (`calibrationWindow`, `overrides`, ...).
        Raises ValueError on an unknown key."""
        values = _fields_from_json(cls, data, "modelAwareness")
        if "overrides" in values:
            values["overrides"] = {
                key: ModelProfileOverride.from_json(value)
                for key, value in values["overrides"].items()
            }
        return cls(**values)


DEFAULT_MODEL_AWARENESS_CONFIG = ModelAwarenessConfig()
"""DS4's default `modelAwareness` configuration."""


@dataclass(frozen=True)
class CacheMetrics:
    """Provider cache usage summed over the valid samples of the calibration window (tokens);
    shares are rounded to 6 decimals and 0 when the total is 0. `sample_count` is the count of
    valid samples, the evidence count the cache-aware gate uses (spec §1.4 step 7)."""

    sample_count: int
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    total_input_tokens: int
    cache_read_share: float
    cache_write_share: float

    def to_json(self) -> dict[str, Any]:
        """DS4's `ProviderCacheMetrics` JSON."""
        return {_camel(f.name): getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class ModelCalibration:
    """DS4's `ModelCalibrationAnalysis` (spec §1.4). Counts are samples; ratios are
    actual/estimated. `applied_ratio` is 1 unless `calibrated`. `hard_bound_samples` is reported
    only when > 0 and `median_ratio` only when an accepted median exists."""

    enabled: bool
    estimator: str
    window_size: int
    observed_samples: int
    bounded_samples: int
    accepted_samples: int
    rejected_samples: int
    outlier_samples: int
    hard_bound_samples: int
    minimum_samples: int
    lower_ratio_bound: float
    upper_ratio_bound: float
    median_ratio: float | None
    applied_ratio: float
    calibrated: bool
    cache: CacheMetrics

    def to_json(self) -> dict[str, Any]:
        """DS4's JSON, with optional fields omitted as DS4 omits them."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "hard_bound_samples" and value == 0:
                continue
            if f.name == "median_ratio" and value is None:
                continue
            out[_camel(f.name)] = value.to_json() if f.name == "cache" else value
        return out


@dataclass(frozen=True)
class CalibrationDrift:
    """DS4's `TokenDriftWarning`: a diagnostic only. `code` is `persistent-underestimate`,
    `persistent-overestimate` or `calibration-outliers`; `severity` is `warning` or `critical`;
    `sample_count` is the accepted count (or the outlier count for `calibration-outliers`)."""

    code: str
    severity: str
    sample_count: int
    median_ratio: float | None = None

    def to_json(self) -> dict[str, Any]:
        """DS4's JSON (`medianRatio` omitted when None)."""
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity,
            "sampleCount": self.sample_count,
        }
        if self.median_ratio is not None:
            out["medianRatio"] = self.median_ratio
        return out


def _safe_int(value: Any) -> bool:
    # Number.isSafeInteger; JSON numbers like 5.0 are integers in JavaScript.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not value.is_integer():
        return False
    return abs(value) <= _MAX_SAFE_INTEGER


def is_valid_sample(sample: Mapping[str, Any]) -> bool:
    """DS4's sample validity rule (spec §1.4 step 2): `estimatedTokens` and `actualInputTokens`
    are safe integers > 0; `inputTokens`, `cacheReadTokens`, `cacheWriteTokens` and `createdAt`
    are safe integers >= 0."""
    positive = ("estimatedTokens", "actualInputTokens")
    non_negative = ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "createdAt")
    return all(_safe_int(sample.get(k)) and sample[k] > 0 for k in positive) and all(
        _safe_int(sample.get(k)) and sample[k] >= 0 for k in non_negative
    )


def _cache_metrics(valid: Sequence[Mapping[str, Any]]) -> CacheMetrics:
    inp = int(sum(s["inputTokens"] for s in valid))
    read = int(sum(s["cacheReadTokens"] for s in valid))
    write = int(sum(s["cacheWriteTokens"] for s in valid))
    total = inp + read + write
    return CacheMetrics(
        sample_count=len(valid),
        input_tokens=inp,
        cache_read_tokens=read,
        cache_write_tokens=write,
        total_input_tokens=total,
        cache_read_share=round6(read / total) if total > 0 else 0,
        cache_write_share=round6(write / total) if total > 0 else 0,
    )


def analyze_model_calibration(
    samples: Sequence[Mapping[str, Any]],
    config: ModelAwarenessConfig = DEFAULT_MODEL_AWARENESS_CONFIG,
    estimator: str = "chars-v1",
) -> ModelCalibration:
    """DS4's `analyzeModelCalibration` (spec §1.4).

    `samples` are DS4 calibration records, newest first, as JSON mappings with
    `estimatedTokens`, `actualInputTokens` (> 0), `inputTokens`, `cacheReadTokens`,
    `cacheWriteTokens` (>= 0, tokens) and `createdAt` (>= 0, epoch ms). Records failing the
    safe-integer checks are ignored (they still count as observed). Window = first
    `calibration_window` samples; bounded ratios lie in [lower, upper]; accepted ratios are within
    max(0.05, 0.1·centre, 3·1.4826·MAD) of the bounded median; calibrated needs `enabled` and at
    least `minimum_calibration_samples` accepted. Never raises for bad sample values.
    """
    window = list(samples[: config.calibration_window])
    valid = [s for s in window if is_valid_sample(s)]
    ratios = [s["actualInputTokens"] / s["estimatedTokens"] for s in valid]
    lower, upper = config.calibration_ratio_lower_bound, config.calibration_ratio_upper_bound
    bounded = [r for r in ratios if math.isfinite(r) and lower <= r <= upper]
    center = median(bounded)
    accepted: list[float] = []
    if center is not None:
        mad = median([abs(r - center) for r in bounded]) or 0.0
        tolerance = max(0.05, center * 0.1, mad * 3 * 1.4826)
        accepted = [r for r in bounded if abs(r - center) <= tolerance]
    accepted_median = median(accepted)
    calibrated = (
        config.enabled
        and accepted_median is not None
        and len(accepted) >= config.minimum_calibration_samples
    )
    applied = min(upper, max(lower, accepted_median)) if calibrated and accepted_median is not None else 1
    return ModelCalibration(
        enabled=config.enabled,
        estimator=estimator,
        window_size=config.calibration_window,
        observed_samples=len(window),
        bounded_samples=len(bounded),
        accepted_samples=len(accepted),
        rejected_samples=len(window) - len(accepted),
        outlier_samples=len(bounded) - len(accepted),
        hard_bound_samples=len(valid) - len(bounded),
        minimum_samples=config.minimum_calibration_samples,
        lower_ratio_bound=lower,
        upper_ratio_bound=upper,
        median_ratio=round6(accepted_median) if accepted_median is not None else None,
        applied_ratio=round6(applied),
        calibrated=calibrated,
        cache=_cache_metrics(valid),
    )


def detect_token_drift(calibration: ModelCalibration) -> CalibrationDrift | None:
    """DS4's `detectTokenDrift` (spec §1.4 step 8): warn only on persistent evidence.

    Calibrated median ≥ 1.25 -> `persistent-underestimate` (critical at ≥ 1.6); ≤ 0.8 ->
    `persistent-overestimate` (critical at ≤ 0.625); otherwise `calibration-outliers` when
    outliers + hard-bound samples ≥ the minimum sample count. None when disabled or quiet.
    """
    if not calibration.enabled:
        return None
    ratio = calibration.median_ratio
    if calibration.calibrated and ratio is not None:
        if ratio >= 1.25:
            severity = "critical" if ratio >= 1.6 else "warning"
            return CalibrationDrift(
                "persistent-underestimate", severity, calibration.accepted_samples, ratio
            )
        if ratio <= 0.8:
            severity = "critical" if ratio <= 0.625 else "warning"
            return CalibrationDrift(
                "persistent-overestimate", severity, calibration.accepted_samples, ratio
            )
    outliers = calibration.outlier_samples + calibration.hard_bound_samples
    if outliers >= calibration.minimum_samples:
        return CalibrationDrift("calibration-outliers", "warning", outliers)
    return None
