"""Planner paths the DS4 vectors do not reach (summaries, prefixes, non-contiguous groups,
classifications, fallbacks without a user message), with values worked out by hand from spec §3."""

from __future__ import annotations

import pytest

from ds4core.budgets import ContextBudget, ContextConfig
from ds4core.planner import (
    SupplementalMessage,
    build_atomic_groups,
    plan_managed_context,
    tool_relations,
    validate_atomic_selection,
)

ROOMY = ContextBudget(
    context_window=128_000,
    output_reserve=4096,
    safety_margin=1024,
    model_input_hard_limit=10_000,
    hard_input_limit=10_000,
    soft_input_limit=10_000,
    preferred_input_target=10_000,
    active_input_budget=10_000,
)

WITH_SUMMARY = [
    {"role": "assistant", "content": [{"type": "text", "text": "orphan"}]},  # 17 tokens
    {"role": "compactionSummary", "summary": "s" * 40},  # 8 + 5 + 10 = 23
    {"role": "user", "content": "older"},  # 11
    {"role": "assistant", "content": [{"type": "text", "text": "reply"}]},  # 17
    {"role": "user", "content": "now"},  # 10
]


def test_summary_selected_and_prefix_excluded() -> None:
    plan = plan_managed_context(WITH_SUMMARY, fixed_tokens=0, budget=ROOMY)
    assert [(g.id, g.kind, g.estimated_tokens) for g in plan.groups] == [
        ("group:0-0", "prefix", 17),
        ("group:1-1", "summary", 23),
        ("group:2-3", "turn", 28),
        ("group:4-4", "turn", 10),
    ]
    assert [i.to_json() for i in plan.selected] == [
        {
            "originalIndex": 1,
            "groupId": "group:1-1",
            "kind": "summary",
            "tokens": 23,
            "score": 75.333333,
            "reason": "Selected active Pi summary within the summary and input budgets; "
            "Active Pi summary message",
        },
        {
            "originalIndex": 2,
            "groupId": "group:2-3",
            "kind": "recent",
            "tokens": 11,
            "score": 100.666667,
            "reason": "Selected by deterministic recent-turn ranking; Conversation turn boundary",
        },
        {
            "originalIndex": 3,
            "groupId": "group:2-3",
            "kind": "recent",
            "tokens": 17,
            "score": 100.666667,
            "reason": "Selected by deterministic recent-turn ranking; Conversation turn boundary",
        },
        {
            "originalIndex": 4,
            "groupId": "group:4-4",
            "kind": "current",
            "tokens": 10,
            "score": 1000.833333,
            "reason": "Mandatory current request turn; Conversation turn boundary",
        },
    ]
    assert [i.to_json() for i in plan.excluded] == [
        {
            "originalIndex": 0,
            "groupId": "group:0-0",
            "kind": "history",
            "tokens": 17,
            "score": 40.166667,
            "reason": "Excluded because managed planner does not select older background without "
            "retrieval evidence; Messages preceding the first user turn",
        }
    ]
    assert plan.planning.to_json() == {
        "mode": "managed",
        "originalMessageTokens": 78,
        "originalMessageCount": 5,
        "fixedTokens": 0,
        "messageTargetTokens": 10_000,
        "messageHardLimitTokens": 10_000,
        "recentTailTokenLimit": 24_000,
        "selectedGroupCount": 3,
        "excludedGroupCount": 1,
    }
    assert plan.messages == tuple(WITH_SUMMARY[1:])


def test_summary_over_its_budget_is_excluded() -> None:
    plan = plan_managed_context(
        WITH_SUMMARY, fixed_tokens=0, budget=ROOMY, config=ContextConfig(max_summary_tokens=22)
    )
    summary = [i for i in plan.excluded if i.original_index == 1]
    assert [(i.kind, i.score, i.reason) for i in summary] == [
        ("summary", 75.333333, "Excluded by summary or input budget; Active Pi summary message")
    ]


def test_tool_exchange_merges_non_contiguous_drafts() -> None:
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [{"type": "toolCall", "id": "x", "name": "read", "arguments": {}}]},
        {"role": "compactionSummary", "summary": "s"},
        {"role": "toolResult", "toolCallId": "x", "toolName": "read", "content": []},
        {"role": "user", "content": "b"},
    ]
    groups = build_atomic_groups(messages)
    assert [(g.id, g.kind, g.message_indices, g.contains_tool_exchange) for g in groups] == [
        ("group:0-3", "turn", (0, 1, 3), True),
        ("group:2-2", "summary", (2,), False),
        ("group:4-4", "turn", (4,), False),
    ]
    assert groups[0].reason == "Atomic conversation turn containing a complete tool call/result batch"


def test_validate_atomic_selection_messages() -> None:
    messages = [
        {"role": "assistant", "content": [
            {"type": "toolCall", "id": "a", "name": "t"},
            {"type": "toolCall", "id": "b", "name": "t"},
        ]},
        {"role": "toolResult", "toolCallId": "b", "content": []},
        {"role": "toolResult", "toolCallId": "b", "content": []},
        {"role": "toolResult", "toolCallId": "orphan", "content": []},
    ]
    relations = tool_relations(messages)
    assert validate_atomic_selection(relations, {0, 1, 3}) == [
        "selected tool call a has no result",
        "selected tool call b is missing one or more results",
        "selected tool result orphan has no selected call",
    ]
    assert validate_atomic_selection(relations, {1}) == ["selected tool result b has no selected call"]


def test_classifications_and_privacy_reasons() -> None:
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    plan = plan_managed_context(
        messages,
        fixed_tokens=0,
        budget=ROOMY,
        message_classifications=["internal", None],  # shorter than the messages
        message_privacy_reasons=[None, None, "secret redacted"],
    )
    assert [(i.classification, i.privacy_reason) for i in plan.selected] == [
        ("internal", None),
        ("normal", None),
        ("normal", "secret redacted"),
    ]
    assert "privacyReason" not in plan.selected[0].to_json()
    assert plan.selected[2].to_json()["privacyReason"] == "secret redacted"


def test_supplement_classification_turns_on_classifications() -> None:
    memory = SupplementalMessage(
        id="memory:m", message={"role": "user", "content": "m"}, kind="memory",
        source_ids=("m",), score=90, reason="memory", classification="internal",
    )
    plan = plan_managed_context(
        [{"role": "user", "content": "q"}], fixed_tokens=0, budget=ROOMY, supplemental_messages=[memory]
    )
    assert [(i.kind, i.classification) for i in plan.selected] == [
        ("memory", "internal"),
        ("current", "normal"),
    ]


def test_fixed_tokens_over_hard_limit_fail_open_without_supplements() -> None:
    memory = SupplementalMessage(
        id="memory:m", message={"role": "user", "content": "m"}, kind="memory",
        source_ids=("m",), score=90, reason="memory",
    )
    messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    plan = plan_managed_context(
        messages, fixed_tokens=10_001, budget=ROOMY, supplemental_messages=[memory]
    )
    assert plan.mode == "fallback"
    assert plan.planning.fallback_reason == (
        "mandatory system prompt and tool definitions exceed the hard input limit"
    )
    assert plan.planned_sources == (0, 1)
    assert plan.messages == tuple(messages)
    assert [(i.kind, i.score) for i in plan.selected] == [("recent", 100.333333), ("current", 1000.666667)]
    assert plan.planning.to_json()["messageTargetTokens"] == 0


def test_no_user_message_drops_supplements_and_keeps_last_group() -> None:
    memory = SupplementalMessage(
        id="memory:m", message={"role": "user", "content": "m"}, kind="memory",
        source_ids=("m",), score=90, reason="memory",
    )
    messages = [{"role": "assistant", "content": "x"}]
    plan = plan_managed_context(messages, fixed_tokens=0, budget=ROOMY, supplemental_messages=[memory])
    assert plan.mode == "managed"
    assert plan.planned_sources == (0,)
    assert [(i.kind, i.reason) for i in plan.selected] == [
        ("current", "Mandatory current request turn; Messages preceding the first user turn")
    ]


def test_precomputed_native_tokens_are_used() -> None:
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    plan = plan_managed_context(messages, fixed_tokens=0, budget=ROOMY, native_tokens=[100, 200])
    assert [i.tokens for i in plan.selected] == [100, 200]
    assert plan.planning.original_message_tokens == 300
    with pytest.raises(ValueError, match="2 messages"):
        plan_managed_context(messages, fixed_tokens=0, budget=ROOMY, native_tokens=[1])
