"""Codex token numbers: nested OpenAI usage → disjoint buckets, Codex's own "% left", the window.

Rules, each checked in the Codex source (openai/codex, `codex-rs`):

- `TokenUsage` fields nest: `cached_input_tokens` ⊂ `input_tokens` (and, in 0.171,
  `cache_write_input_tokens` ⊂ `input_tokens`), `reasoning_output_tokens` ⊂ `output_tokens`,
  `total_tokens = input_tokens + output_tokens` (codex-rs/protocol/src/protocol.rs `TokenUsage`:
  `non_cached_input() = input − cached`, `blended_total() = non-cached input + output`; sample
  MAIN:16: 9,939 + 131 = 10,070 with reasoning 25 inside the 131).
- The context Codex shows is `last_token_usage.total_tokens`
  (protocol.rs `TokenUsage::tokens_in_context_window`).
- "% left" = `percent_of_context_window_remaining` (protocol.rs): with `BASELINE_TOKENS = 12000`
  ("prompts, tools and space to call compact"), `eff = window − 12000`,
  `used = max(total − 12000, 0)`, `left = round(clamp((eff − used) / eff, 0, 1) × 100)`; 0 when
  `window ≤ 12000`.
- The window Codex records (`model_context_window`) is the usable window:
  `context_window × effective_context_window_percent / 100`, 95 by default
  (codex-rs/core/src/codex.rs `TurnContext::model_context_window`; `ModelInfo::
  usable_context_window` in codex-rs/protocol/src/openai_models.rs; `model_family.rs`: "95 %
  usable context window"). Hence 190,000 for a configured 200,000 (sample) and 258,400 for
  272,000 (openai/codex #40095).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ds4sessions.agents.base import Usage

BASELINE_TOKENS = 12_000
"""Tokens Codex assumes are always in the context (codex-rs/protocol/src/protocol.rs)."""

EFFECTIVE_CONTEXT_WINDOW_PERCENT = 95
"""Codex's default share of a model's window it lets the conversation use (codex-rs model_family.rs)."""

FIELDS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens",
          "reasoning_output_tokens", "total_tokens")
"""The fields of a Codex `TokenUsage` (0.171 adds `cache_write_input_tokens`)."""


@dataclass(frozen=True, slots=True)
class RawUsage:
    """One Codex `TokenUsage` as recorded (nested fields, tokens). Missing or non-integer fields
    read as 0; `total_tokens` missing reads as input + output (never + reasoning: it is inside
    output; ccusage #1460)."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    total_tokens: int = 0

    @classmethod
    def parse(cls, value: Any) -> "RawUsage | None":
        """The usage in `value` (a JSON object), or None when it is not an object."""
        if type(value) is not dict and not isinstance(value, Mapping):  # (dict first: the ABC check is slow)
            return None
        nums = []
        for name in FIELDS:
            v = value.get(name)
            if type(v) is int:  # (the usual field: its own test, the same answer as below)
                nums.append(v if abs(v) < 1e15 else 0)
            else:
                nums.append(int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) < 1e15 else 0)
        if not isinstance(value.get("total_tokens"), (int, float)):
            nums[5] = nums[0] + nums[3]  # (input + output)
        return cls(*nums)

    def minus(self, other: "RawUsage") -> "RawUsage":
        """Field-wise difference (may be negative: a reset)."""
        return RawUsage(*(getattr(self, f) - getattr(other, f) for f in FIELDS))

    @property
    def negative(self) -> bool:
        """True when any field is negative (a total that went back: a reset)."""
        return any(getattr(self, f) < 0 for f in FIELDS)

    @property
    def is_zero(self) -> bool:
        """True when every field is 0."""
        return all(getattr(self, f) == 0 for f in FIELDS)

    def to_usage(self) -> Usage:
        """Disjoint buckets: uncached input = input − cached − cache write (floored at 0), cache
        read = cached, cache write = cache write, output = output, reasoning ⊂ output."""
        cached = max(self.cached_input_tokens, 0)
        write = max(self.cache_write_input_tokens, 0)
        return Usage(
            input=max(self.input_tokens - cached - write, 0),
            cache_read=cached,
            cache_write=write,
            output=max(self.output_tokens, 0),
            reasoning=max(self.reasoning_output_tokens, 0),
        )

    def to_json(self) -> dict[str, int]:
        """The recorded field names and values."""
        return {f: getattr(self, f) for f in FIELDS}


def percent_left(context_tokens: int, window: int) -> int:
    """Codex's "% context left" for `context_tokens` in a `window` (both tokens), 0–100.

    codex-rs/protocol/src/protocol.rs `percent_of_context_window_remaining`, see module doc.
    """
    if window <= BASELINE_TOKENS:
        return 0
    effective = window - BASELINE_TOKENS
    used = max(context_tokens - BASELINE_TOKENS, 0)
    remaining = max(effective - used, 0)
    # Rust's f64::round rounds half away from zero; Python's round() is banker's rounding.
    value = min(max(remaining / effective, 0.0), 1.0) * 100.0
    return int(value + 0.5)


def usable_window(configured: int, percent: int = EFFECTIVE_CONTEXT_WINDOW_PERCENT) -> int:
    """The window Codex records for a model whose full window is `configured` tokens
    (`configured × percent // 100`, codex-rs core `TurnContext::model_context_window`)."""
    return configured * percent // 100


def window_note(recorded: int | None, configured: int | None) -> str | None:
    """One line when the recorded window is Codex's 95 % share of the configured/catalog window
    (e.g. 258,400 of 272,000, openai/codex #40095), else None."""
    if not recorded or not configured or recorded == configured:
        return None
    if usable_window(configured) == recorded:
        return (f"Codex records {recorded:,} tokens: {EFFECTIVE_CONTEXT_WINDOW_PERCENT}% of the configured "
                f"{configured:,} (effective_context_window_percent, codex-rs TurnContext::model_context_window)")
    return f"Codex records a {recorded:,}-token window; {configured:,} is configured"


def auto_compact(setting: int | None, configured_window: int | None) -> dict[str, Any] | None:
    """When Codex compacts on its own (tokens): `min(setting, 90 % of the full window)`, or
    either alone (codex-rs/protocol/src/openai_models.rs `ModelInfo::auto_compact_token_limit`:
    `context_window × 9 / 10`, capped by `model_auto_compact_token_limit`). Codex compares it
    with its own running count, which adds local growth since the last usage (openai/codex
    #43648), so it can fire before the displayed context reaches it. None when neither is known."""
    ninety = configured_window * 9 // 10 if configured_window else None
    limits = [v for v in (setting, ninety) if v]
    if not limits:
        return None
    return {"limit": min(limits), "setting": setting, "ninetyPercentOfWindow": ninety,
            "note": "Codex compares this with its own running count (last usage + local growth), not the displayed context"}
