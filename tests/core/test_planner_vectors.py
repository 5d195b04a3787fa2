"""Every case of ds4-vectors/planner.json (DS4 0.3.7 planner + 0.3.6 rescue, spec §3, §9):
selected/excluded metadata per message, planning block, groups and planned/sent order, compared
on the full expected structures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ds4core.budgets import (
    ContextBudget,
    ContextConfig,
    ModelDescriptor,
    calculate_context_budget,
    create_model_profile,
)
from ds4core.jsjson import stable_stringify
from ds4core.planner import ManagedContextPlan, SupplementalMessage, plan_managed_context
from tests.core.vectors import case_names, expand, load_cases

VECTORS = "ds4-vectors/planner.json"




@pytest.fixture(scope="module")
def cases(shared_dir: Path) -> dict[str, dict[str, Any]]:
    return load_cases(shared_dir, VECTORS)




def _budget(spec: dict[str, Any]) -> ContextBudget:
    if "model" in spec:
        profile = create_model_profile(ModelDescriptor.from_json(spec["model"]))
        return calculate_context_budget(profile, ContextConfig.from_json(spec.get("config", {})))
    return ContextBudget.from_json(spec)


def run_plan(inp: dict[str, Any]) -> ManagedContextPlan:
    """Run one planner vector input."""
    inp = expand(inp)
    assert inp["kind"] == "plan"
    return plan_managed_context(
        inp["messages"],
        fixed_tokens=inp["fixedTokens"],
        budget=_budget(inp["budget"]),
        config=ContextConfig.from_json(inp.get("config", {})),
        pinned_message_indices=inp.get("pinnedMessageIndices", ()),
        supplemental_messages=[
            SupplementalMessage.from_json(s) for s in inp.get("supplementalMessages", [])
        ],
        supplemental_selection_order=inp.get("supplementalSelectionOrder", ()),
        message_classifications=inp.get("messageClassifications"),
        message_privacy_reasons=inp.get("messagePrivacyReasons"),
        cache_aware_tail_tokens=inp.get("cacheAwareTailTokens"),
    )


def _ref(source: int | str) -> str:
    return f"n{source}" if isinstance(source, int) else f"s:{source}"


def plan_as_vector(plan: ManagedContextPlan) -> dict[str, Any]:
    """The plan in the vectors' `expected` shape."""
    data = plan.to_json()
    return {
        "mode": data["mode"],
        "selected": data["selected"],
        "excluded": data["excluded"],
        "planning": data["planning"],
        "plannedRefs": [_ref(s) for s in plan.planned_sources],
        "sentRefs": [_ref(s) for s in plan.sent_sources],
        # The oracle records groups without the derived startIndex/endIndex/reason fields.
        "groups": [
            {
                k: g[k]
                for k in ("id", "kind", "messageIndices", "estimatedTokens", "containsToolExchange")
            }
            for g in data["groups"]
        ],
    }


@pytest.mark.parametrize("name", case_names(VECTORS))
def test_planner_vector(cases: dict[str, dict[str, Any]], name: str) -> None:
    case = cases[name]
    plan = run_plan(case["input"])
    result = plan_as_vector(plan)
    assert result == case["expected"]
    # Type-exact as JavaScript sees it (True is not 1; 1.0 and 1 are the same number).
    assert stable_stringify(result) == stable_stringify(case["expected"])
    # The sent messages are the selected planned messages, in order.
    assert list(plan.messages) == [plan.original_messages[i.original_index] for i in plan.selected]
    for group in plan.groups:
        assert (group.start_index, group.end_index) == (
            group.message_indices[0],
            group.message_indices[-1],
        )


def test_all_planner_vectors_are_covered(cases: dict[str, dict[str, Any]]) -> None:
    assert len(cases) == 30
