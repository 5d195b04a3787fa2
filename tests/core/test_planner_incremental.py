"""`AtomicGrouper` reuse (issue 3): plans built with a grouper kept between calls equal cold plans,
message for message, on Pi's own contexts grown one message at a time, after a compaction, and
on adversarial tool-call orders; untouched groups are the very same objects."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from ds4core.budgets import ContextBudget, ContextConfig
from ds4core.estimate import message_tokens
from ds4core.planner import (
    AtomicGrouper,
    SupplementalMessage,
    build_atomic_groups,
    plan_managed_context,
    tool_relations,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pi" / "01-tools-and-image.context.json"


def _budget(window: int, target: int, hard: int) -> ContextBudget:
    return ContextBudget(
        context_window=window,
        output_reserve=0,
        safety_margin=0,
        model_input_hard_limit=hard,
        soft_input_limit=hard,
        hard_input_limit=hard,
        preferred_input_target=target,
        active_input_budget=target,
    )


ROOMY = _budget(200_000, 150_000, 190_000)
TIGHT = _budget(8_000, 1_500, 2_500)  # excludes older turns, rescues, falls back when too small


def _native(path: Path) -> list[Any]:
    """The messages DS4 plans: Pi's context minus its `system` messages."""
    messages = json.loads(path.read_text(encoding="utf-8"))["messages"]
    return [m for m in messages if m.get("role") != "system"]


def _contexts(shared_dir: Path) -> dict[str, list[Any]]:
    return {p.name: _native(p) for p in sorted((shared_dir / "sessions-pi").glob("*.context.json"))}


def _assert_grouping_matches(grouper: AtomicGrouper, messages: list[Any]) -> None:
    tokens = [message_tokens(m) for m in messages]
    groups, relations = grouper.update(messages, tokens)
    assert groups == build_atomic_groups(messages)
    cold = tool_relations(messages)
    assert relations.calls == cold.calls and list(relations.calls) == list(cold.calls)
    assert relations.results == cold.results and list(relations.results) == list(cold.results)


def _plan_json(messages: list[Any], **kwargs: Any) -> dict[str, Any]:
    return plan_managed_context(messages, fixed_tokens=300, **kwargs).to_json()


def test_fixture_grown_one_message_at_a_time_groups_like_a_cold_build() -> None:
    messages = _native(FIXTURE)
    grouper = AtomicGrouper()
    for end in range(len(messages) + 1):
        _assert_grouping_matches(grouper, messages[:end])
    groups, _ = grouper.update(messages, [message_tokens(m) for m in messages])
    assert [(g.id, g.kind, g.contains_tool_exchange) for g in groups] == [
        ("group:0-11", "turn", True),
        ("group:12-13", "turn", False),
        ("group:14-17", "turn", True),
    ]


def test_pi_contexts_grown_one_message_at_a_time_plan_like_cold_plans(shared_dir: Path) -> None:
    for name, messages in _contexts(shared_dir).items():
        for budget in (ROOMY, TIGHT):
            grouper = AtomicGrouper()
            for end in range(len(messages) + 1):
                warm = _plan_json(messages[:end], budget=budget, grouper=grouper)
                assert warm == _plan_json(messages[:end], budget=budget), (name, budget.context_window, end)


def test_tight_budget_on_99_large_exercises_exclusions_and_still_matches(shared_dir: Path) -> None:
    messages = _contexts(shared_dir)["99-large.context.json"]
    grouper = AtomicGrouper()
    modes = set()
    for end in range(len(messages) - 30, len(messages) + 1):
        warm = plan_managed_context(messages[:end], fixed_tokens=300, budget=TIGHT, grouper=grouper)
        cold = plan_managed_context(messages[:end], fixed_tokens=300, budget=TIGHT)
        assert warm == cold
        modes.add(warm.mode)
        if warm.mode == "managed":
            assert warm.excluded  # the budget really excludes history
    assert "managed" in modes


def test_compaction_replaces_the_prefix_and_the_grouper_starts_over(shared_dir: Path) -> None:
    contexts = _contexts(shared_dir)
    before = contexts["01-tools-and-image.context.json"]
    after = contexts["03-compaction.context.json"]
    assert after[0]["role"] == "compactionSummary"
    grouper = AtomicGrouper()
    _assert_grouping_matches(grouper, before)
    _assert_grouping_matches(grouper, after)
    # ... and keeps growing from the compacted context.
    _assert_grouping_matches(grouper, after + before[:4])
    # A compaction of the grouper's own array: a summary replaces the first turns.
    summary = {"role": "compactionSummary", "summary": "earlier work", "tokensBefore": 1000}
    _assert_grouping_matches(grouper, [summary, *after[5:]])


def test_untouched_groups_are_reused_objects() -> None:
    messages = _native(FIXTURE)
    tokens = [message_tokens(m) for m in messages]
    grouper = AtomicGrouper()
    first, _ = grouper.update(messages[:-1], tokens[:-1])
    second, _ = grouper.update(messages, tokens)
    assert len(second) >= 2
    assert all(a is b for a, b in zip(first[:-1], second[:-1]))
    # An unchanged array regroups nothing.
    third, _ = grouper.update(list(messages), list(tokens))
    assert all(a is b for a, b in zip(second, third))


def _call(call_id: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "toolCall", "id": call_id, "name": "read", "arguments": {}}]}


def _result(call_id: str) -> dict[str, Any]:
    return {"role": "toolResult", "toolCallId": call_id, "toolName": "read", "content": [{"type": "text", "text": "ok"}]}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


ADVERSARIAL: dict[str, list[Any]] = {
    # A result in a later turn ties that turn to the call's turn (non-contiguous merge).
    "late result": [_user("a"), _call("x"), _user("b"), _call("y"), _result("y"), _user("c"), _result("x"), _user("d")],
    # A result before its call.
    "result first": [_user("a"), _result("x"), _user("b"), _call("x"), _user("c")],
    # The id of a call that already has a result is re-used by a later call (last call wins:
    # the first exchange's link moves to the new call, which a prefix extension cannot undo).
    "re-used id": [_user("a"), _call("x"), _result("x"), _user("b"), _call("x"), _user("c"), _result("x")],
    # A re-used id whose first call had no result yet: extended in place.
    "re-used pending id": [_user("a"), _call("x"), _user("b"), _call("x"), _result("x"), _user("c")],
    # Calls without results, orphan results, non-dict messages, prefix and summaries.
    "odd shapes": [
        {"role": "assistant", "content": "hello"},
        _result("orphan"),
        {"role": "branchSummary", "summary": "s"},
        "not a message",
        _user("a"),
        _call("pending"),
        {"role": "compactionSummary", "summary": "t"},
        {"role": "custom", "content": "x"},
        _user("b"),
        {"role": "assistant", "content": [{"type": "toolCall", "id": 7}, {"type": "toolCall", "id": "z"}, "x"]},
        _result("z"),
    ],
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_tool_orders_group_and_plan_like_cold(name: str) -> None:
    messages = ADVERSARIAL[name]
    grouper = AtomicGrouper()
    for end in range(len(messages) + 1):
        _assert_grouping_matches(grouper, messages[:end])
    planner_grouper = AtomicGrouper()
    for end in range(len(messages) + 1):
        for budget in (ROOMY, TIGHT):
            warm = _plan_json(messages[:end], budget=budget, grouper=planner_grouper)
            assert warm == _plan_json(messages[:end], budget=budget), (end, budget.context_window)


def test_late_result_merges_two_turns_into_one_group() -> None:
    messages = ADVERSARIAL["late result"]
    groups = AtomicGrouper().update(messages, [message_tokens(m) for m in messages])[0]
    assert [(g.id, g.message_indices, g.contains_tool_exchange) for g in groups] == [
        ("group:0-6", (0, 1, 5, 6), True),
        ("group:2-4", (2, 3, 4), True),
        ("group:7-7", (7,), False),
    ]


def test_random_tool_sessions_match_cold_builds_at_every_length() -> None:
    rng = random.Random(20260103)
    roles = ["user", "assistant", "call", "result", "summary"]
    for _ in range(60):
        ids: list[str] = []
        messages: list[Any] = []
        for _ in range(rng.randrange(1, 40)):
            role = rng.choices(roles, weights=[3, 2, 4, 4, 1])[0]
            if role == "call":
                # Mostly fresh ids, sometimes a re-used one.
                call_id = rng.choice(ids) if ids and rng.random() < 0.15 else f"c{len(ids)}"
                ids.append(call_id)
                messages.append(_call(call_id))
            elif role == "result":
                messages.append(_result(rng.choice(ids) if ids and rng.random() < 0.9 else "nowhere"))
            elif role == "summary":
                messages.append({"role": "compactionSummary", "summary": "s"})
            else:
                messages.append({"role": role, "content": "x" * rng.randrange(0, 400)})
        grouper = AtomicGrouper()
        step = rng.choice([1, 2, 5])
        for end in [*range(0, len(messages), step), len(messages)]:
            _assert_grouping_matches(grouper, messages[:end])


def test_supplements_pins_and_privacy_with_a_grouper_plan_like_cold(shared_dir: Path) -> None:
    messages = _contexts(shared_dir)["04-tree-branches-labels.context.json"]
    memory = SupplementalMessage(
        id="memory:m1",
        message={"role": "user", "content": "Remember: tests run with uv."},
        kind="memory",
        source_ids=("m1",),
        score=90.5,
        reason="Durable memory",
    )
    grouper = AtomicGrouper()
    config = ContextConfig(recent_tail_tokens=0, rescue_immediate_predecessor=False)
    for end in range(1, len(messages) + 1):
        kwargs: dict[str, Any] = {
            "budget": ROOMY,
            "config": config,
            "pinned_message_indices": [0],
            "supplemental_messages": [memory],
            "message_privacy_reasons": ["redacted"] + [None] * (end - 1),
        }
        warm = _plan_json(messages[:end], grouper=grouper, **kwargs)
        assert warm == _plan_json(messages[:end], **kwargs), end
