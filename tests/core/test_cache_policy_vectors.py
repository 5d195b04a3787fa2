"""The DS4 0.3.7 cache-aware policy against every case of `ds4-vectors/cache-policy.json`.

Every comparison is exact: DS4 rounds costs, and the ratio and share of an eligible decision, to 6
decimals, and the raw values of an ineligible decision come from the same IEEE division in both
languages. Hand-computed checks of the epoch model and the hysteresis follow the vectors.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ds4core.budgets import (
    ContextConfig,
    ModelCost,
    ModelDescriptor,
    calculate_context_budget,
    create_model_profile,
)
from ds4core.cache_policy import (
    CacheAwareConfig,
    CacheAwareRuntimeState,
    CacheAwareTurn,
    CachePricing,
    CandidatePlan,
    HysteresisState,
    advance_hysteresis,
    candidate_epoch,
    compare_epoch_costs,
    count_common_prefix,
    decide_cache_aware_tail,
    epoch_cost_usd,
    estimate_request_cost,
    js_to_fixed,
    reusable_prefix_tokens,
    run_cache_aware_turn,
)
from tests.conftest import SHARED, SKIP_NO_SHARED
from tests.core.vectors import expand, load_cases

PRICING = CachePricing(0.22, 0.007, 0.22, 0.66)


def _cases() -> list[dict[str, Any]]:
    return [] if SHARED is None else list(load_cases(SHARED, "ds4-vectors/cache-policy.json").values())


def _params(kinds: set[str]) -> list[Any]:
    """The vector cases of the given kinds, with the case names as ids (a skip when ../shared is absent)."""
    selected = [pytest.param(case, id=case["name"]) for case in _cases() if case["input"]["kind"] in kinds]
    return selected or [
        pytest.param(None, id="cache-policy-vectors", marks=pytest.mark.skip(reason=SKIP_NO_SHARED))
    ]


@pytest.mark.parametrize("case", _params({"prefix"}))
def test_prefix_vector(case: dict[str, Any]) -> None:
    spec = case["input"]
    previous, current = spec["previous"], spec["current"]
    actual = {
        "length": count_common_prefix(previous, current),
        "tokens": reusable_prefix_tokens(previous, current, spec.get("tokens", [])),
    }
    assert actual == case["expected"]


@pytest.mark.parametrize("case", _params({"request-cost"}))
def test_request_cost_vector(case: dict[str, Any]) -> None:
    spec = case["input"]
    cost = estimate_request_cost(
        spec["input"]["totalInputTokens"],
        spec["input"]["reusablePrefixTokens"],
        CachePricing.from_json(spec["pricing"]),
        spec["input"].get("outputTokens", 0),
    )
    assert cost.to_json() == case["expected"]


@pytest.mark.parametrize("case", _params({"cache-decision"}))
def test_decision_vector(case: dict[str, Any]) -> None:
    spec = case["input"]["input"]
    decision = decide_cache_aware_tail(
        config=CacheAwareConfig.from_json(spec["config"]),
        pricing=CachePricing.from_json(spec["pricing"]),
        observed_cache_read_share=spec.get("observedCacheReadShare"),
        sample_count=spec["sampleCount"],
        nominal_recent_tail_tokens=spec["nominalRecentTailTokens"],
        active_input_budget=spec["activeInputBudget"],
    )
    assert decision.to_json() == case["expected"]
    # The gates are recorded even when DS4 stops early; in mode auto their failures are the reasons.
    failed = [gate.reason for gate in decision.gates if not gate.passed]
    if spec["config"]["mode"] == "auto":
        assert tuple(failed) == (() if decision.eligible else decision.reasons)




def _replay(case: dict[str, Any]) -> list[tuple[CacheAwareTurn, Any]]:
    """Runtime steps 1-6 over a vector's sequence of context events, with the real planner and the
    chars-v1 estimator; returns each turn with the final planner result. No supplements, so the
    final plan is the nominal or the extended dedup plan."""
    planner = pytest.importorskip(
        "ds4core.planner", reason="ds4core.planner (the managed planner) is not available"
    )
    spec = case["input"]
    context_config = ContextConfig.from_json(
        {**spec["budget"]["config"], "cacheAware": spec["config"]["cacheAware"]}
    )
    budget = calculate_context_budget(
        create_model_profile(ModelDescriptor.from_json(spec["budget"]["model"])), context_config
    )
    model_key = f"{spec['model']['provider']}/{spec['model']['id']}"
    pricing = CachePricing.from_model_cost(spec["model"].get("cost"))
    state = CacheAwareRuntimeState()
    replay = []
    for turn in spec["turns"]:
        messages = expand(turn["messages"])
        plans: dict[int | None, Any] = {}

        def plan(
            tail: int | None, messages: list[Any] = messages, plans: dict[int | None, Any] = plans
        ) -> CandidatePlan:
            plans[tail] = planner.plan_managed_context(
                messages,
                fixed_tokens=spec["fixedTokens"],
                budget=budget,
                config=context_config,
                cache_aware_tail_tokens=tail,
            )
            return CandidatePlan.from_plan(plans[tail])

        result, state = run_cache_aware_turn(
            state,
            config=context_config.cache_aware,
            model_key=model_key,
            pricing=pricing,
            calibration_sample_count=turn["calibrationCache"]["sampleCount"],
            calibration_cache_read_share=turn["calibrationCache"]["cacheReadShare"],
            nominal_recent_tail_tokens=turn["nominalRecentTailTokens"],
            active_input_budget=budget.active_input_budget,
            plan=plan,
        )
        replay.append((result, plans[result.selection.cache_aware_tail_tokens]))
    return replay


@pytest.mark.parametrize("case", _params({"runtime-sequence"}))
def test_runtime_sequence_vector(case: dict[str, Any]) -> None:
    actual = []
    for result, final in _replay(case):
        planning = final.planning.to_json()
        if result.block is not None:
            planning["cacheAware"] = result.block.to_json()
        sent_native = [source for source in final.sent_sources if isinstance(source, int)]
        actual.append({**result.to_json(), "planning": planning, "sentNativeIndices": sent_native})
    assert actual == case["expected"]["turns"]


def test_runtime_switch_details() -> None:
    """The display details of the switching turn, checked by hand against the vector's numbers."""
    cases = {case["name"]: case for case in _cases()}
    if "runtime-switch-to-cache-aware" not in cases:
        pytest.skip(SKIP_NO_SHARED)
    (first, _), (second, final) = _replay(cases["runtime-switch-to-cache-aware"])
    assert first.selection.decision is not None and not first.selection.decision.eligible
    assert [gate.passed for gate in first.selection.decision.gates] == [True, True, False, False]
    selection = second.selection
    nominal, extended = selection.nominal_epoch, selection.extended_epoch
    assert nominal is not None and extended is not None and selection.comparison is not None
    # The previous final plan sent native 4..10; neither candidate starts with native 4: nothing reusable.
    assert (nominal.reusable_prefix_tokens, extended.reusable_prefix_tokens) == (0, 0)
    assert (nominal.tail_tokens, nominal.sliding) == (64_000, True)
    assert (extended.tail_tokens, extended.sliding) == (350_000, False)
    # Extended: 10 fixed + 120,191 message tokens; cold = 120201·0.22e-6, warm = 120201·0.007e-6,
    # stable epoch = cold + 15·warm.
    assert (extended.total_tokens, extended.cold.total, extended.warm.total) == (120_201, 0.026444, 0.000841)
    assert extended.epoch_cost == 0.039059
    assert selection.comparison.winner == "cache-aware"
    assert selection.comparison.threshold == 0.057952 * 0.95
    assert selection.hysteresis_before == HysteresisState()
    assert selection.hysteresis_after == HysteresisState(stick_extended=True, loss_streak=0)
    assert final.planning.recent_tail_token_limit == 350_000
    detail = json.loads(json.dumps(selection.to_json()))
    assert detail["decision"]["candidateTailTokens"] == 350_000
    assert detail["comparison"]["extendedWon"] is True


# --- Hand-computed checks ----------------------------------------------------------------------


def test_decision_gates_are_all_evaluated_in_mode_off() -> None:
    decision = decide_cache_aware_tail(
        config=CacheAwareConfig(mode="off"),
        pricing=CachePricing(input_per_million=1, cache_read_per_million=0.5),
        observed_cache_read_share=0.25,
        sample_count=1,
        nominal_recent_tail_tokens=64_000,
        active_input_budget=400_000,
    )
    assert decision.reasons == ("off-or-insufficient-evidence",)
    assert [(g.name, g.passed, g.value, g.reason) for g in decision.gates] == [
        ("mode", False, "off", "off-or-insufficient-evidence"),
        ("missHitRatio", False, 2.0, "miss-hit-ratio-below-threshold:2.00"),
        ("cacheReadShare", False, 0.25, "cache-read-share-below-threshold:0.2500"),
        ("sampleCount", False, 1, "insufficient-samples:1"),
    ]
    assert decision.candidate_tail_tokens == 200_000  # floor(400000 * 0.5), shown though not requested


def test_to_fixed_rounds_ties_away_from_zero_like_js() -> None:
    assert js_to_fixed(0.125, 2) == "0.13"  # Python's format gives "0.12"
    assert js_to_fixed(1.005, 2) == "1.00"  # the double is 1.00499999999999989...
    assert js_to_fixed(-0.0, 4) == "0.0000"


def _plan(tokens: tuple[int, ...], hashes: tuple[str, ...], original: int, tail: int) -> CandidatePlan:
    return CandidatePlan(True, hashes, tokens, 10, original, tail, sum(tokens))


def test_epoch_cost_stable_and_sliding() -> None:
    # total = 10 fixed + 1,000 message tokens; 600 reusable with the previous hashes.
    plan = _plan((600, 400), ("a", "b"), original=1_000, tail=64_000)
    epoch = candidate_epoch(
        plan, previous_hashes=("a", "x"), pricing=PRICING, requests_per_turn=4, turns_per_epoch=4
    )
    assert epoch is not None
    assert (epoch.total_tokens, epoch.reusable_prefix_tokens, epoch.sliding) == (1_010, 600, False)
    # cold = 410·0.22e-6 + 600·0.007e-6 = 0.0000944 ; warm = 1010·0.007e-6 = 0.00000707
    assert (epoch.cold.total, epoch.warm.total) == (0.000094, 0.000007)
    assert epoch.epoch_cost == 0.000199  # stable: cold + (R·E - 1)·warm = 0.000094 + 15·0.000007
    sliding = _plan((600, 400), ("a", "b"), original=70_000, tail=64_000)
    epoch = candidate_epoch(
        sliding, previous_hashes=(), pricing=PRICING, requests_per_turn=4, turns_per_epoch=4
    )
    assert epoch is not None and epoch.sliding and epoch.reusable_prefix_tokens == 0
    # cold = 1010·0.22e-6 = 0.0002222 ; sliding: (cold + 3·warm)·4 = (0.000222 + 0.000021)·4
    assert epoch.epoch_cost == epoch_cost_usd(
        0.000222, 0.000007, sliding=True, requests_per_turn=4, turns_per_epoch=4
    )
    assert epoch.epoch_cost == 0.000972
    assert (
        candidate_epoch(plan, previous_hashes=(), pricing=None, requests_per_turn=4, turns_per_epoch=4)
        is None
    )


def test_candidate_comparison_is_strict() -> None:
    assert compare_epoch_costs(1.0, 0.9, 0.1).extended_won is False  # 0.9 < 0.9 is false
    won = compare_epoch_costs(0.057952, 0.039059, 0.05)
    assert won.extended_won and won.winner == "cache-aware"
    assert won.improvement_ratio == pytest.approx(0.326012, abs=1e-6)  # display only
    assert compare_epoch_costs(None, 0.1, 0.1).extended_won is False


def test_hysteresis_drops_the_extended_tail_after_two_losses() -> None:
    state = HysteresisState()
    assert advance_hysteresis(state, extended_won=False, stickiness_epochs=2) == state  # not sticking
    state = advance_hysteresis(state, extended_won=True, stickiness_epochs=2)
    assert state == HysteresisState(stick_extended=True, loss_streak=0)
    state = advance_hysteresis(state, extended_won=False, stickiness_epochs=2)
    assert state == HysteresisState(stick_extended=True, loss_streak=1)
    state = advance_hysteresis(state, extended_won=True, stickiness_epochs=2)
    assert state.loss_streak == 0
    state = advance_hysteresis(state, extended_won=False, stickiness_epochs=2)
    state = advance_hysteresis(state, extended_won=False, stickiness_epochs=2)
    assert state == HysteresisState(stick_extended=False, loss_streak=0)


def test_pricing_from_model_cost() -> None:
    pi_cost = {"input": 0.22, "output": 0.66, "cacheRead": 0.007, "cacheWrite": 0.22}
    assert CachePricing.from_model_cost(pi_cost) == PRICING
    assert CachePricing.from_model_cost(ModelCost(0.22, 0.66, 0.007, 0.22)) == PRICING
    assert CachePricing.from_model_cost(None) is None
