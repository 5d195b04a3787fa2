"""Every case of ds4-vectors/budgets.json (DS4 differential oracle, spec §9): budgets, the tail
table, the estimator, calibration and model awareness, compared on the full expected structures."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ds4core.budgets import (
    ContextConfig,
    ModelDescriptor,
    adaptive_recent_tail_limit,
    calculate_context_budget,
    create_model_profile,
    resolve_model_awareness,
)
from ds4core.calibration import ModelAwarenessConfig, analyze_model_calibration
from ds4core.estimate import message_tokens, text_tokens
from ds4core.jsjson import stable_stringify
from tests.core.vectors import case_names, load_cases

VECTORS = "ds4-vectors/budgets.json"




@pytest.fixture(scope="module")
def cases(shared_dir: Path) -> dict[str, dict[str, Any]]:
    return load_cases(shared_dir, VECTORS)


def _run(inp: dict[str, Any]) -> dict[str, Any]:
    kind = inp["kind"]
    if kind == "budget":
        profile = create_model_profile(ModelDescriptor.from_json(inp["model"]))
        config = ContextConfig.from_json(inp.get("config", {}))
        cal = inp.get("calibration")
        calibration = (
            SimpleNamespace(
                calibrated=cal["calibrated"],
                applied_ratio=cal["appliedRatio"],
                accepted_samples=cal["acceptedSamples"],
            )
            if cal
            else None
        )
        budget = calculate_context_budget(profile, config, calibration)
        return {"profile": profile.to_json(), "budget": budget.to_json()}
    if kind == "tail-limits":
        return {"values": [adaptive_recent_tail_limit(w, c) for w, c, _ in inp["pairs"]]}
    if kind == "estimate":
        return {
            "text": [text_tokens(t) for t in inp.get("texts", [])],
            "messages": [message_tokens(m) for m in inp.get("messages", [])],
        }
    if kind == "calibration":
        return analyze_model_calibration(inp["samples"]).to_json()
    if kind == "awareness":
        config = ContextConfig.from_json(inp.get("config", {}))
        awareness = resolve_model_awareness(
            ModelDescriptor.from_json(inp["model"]),
            config,
            ModelAwarenessConfig.from_json(inp.get("modelAwareness", {})),
            inp.get("samples", []),
        )
        return {
            "profile": awareness.profile.to_json(),
            "overrideKeys": list(awareness.override_keys),
            "calibration": awareness.calibration.to_json(),
            "drift": awareness.drift.to_json() if awareness.drift else None,
            "limits": awareness.limits.to_json(),
            "budget": calculate_context_budget(
                awareness.profile, awareness.context_config, awareness.calibration
            ).to_json(),
        }
    raise AssertionError(f"unknown vector kind {kind}")


@pytest.mark.parametrize("name", case_names(VECTORS))
def test_budget_vector(cases: dict[str, dict[str, Any]], name: str) -> None:
    case = cases[name]
    result = _run(case["input"])
    assert result == case["expected"]
    # Type-exact as JavaScript sees it (True is not 1; 1.0 and 1 are the same number).
    assert stable_stringify(result) == stable_stringify(case["expected"])


def test_all_budget_vectors_are_covered(cases: dict[str, dict[str, Any]]) -> None:
    assert len(cases) == 16
