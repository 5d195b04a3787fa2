"""Categories of context tokens and the pixel map's cells."""

from __future__ import annotations

import json
from pathlib import Path

from ds4core.categories import (
    Segment,
    bash_execution_text,
    breakdown,
    map_cells,
    message_parts,
    tokens_per_cell,
)
from ds4core.estimate import message_tokens
from ds4core.tokens import CharsV1Counter, TokenLedger


def test_parts_follow_content_order_and_roles() -> None:
    assistant = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "plan"},
            {"type": "text", "text": "Reading it."},
            {"type": "toolCall", "id": "t1", "name": "read", "arguments": {"path": "a.py"}},
        ],
    }
    assert message_parts(assistant) == [
        ("thinking", None, "plan"),
        ("assistant_text", None, "Reading it."),
        ("tool_calls", "read", 'read{"path":"a.py"}'),
    ]
    result = {"role": "toolResult", "toolName": "bash", "content": [{"type": "text", "text": "ok"}]}
    assert message_parts(result) == [("tool_results", "bash", "ok")]
    assert message_parts({"role": "bashExecution", "command": "ls", "output": "", "excludeFromContext": True}) == []
    assert message_parts({"role": "mystery", "content": "x"}) == []
    summary = message_parts({"role": "compactionSummary", "summary": "S", "tokensBefore": 9})
    assert summary == [(
        "compaction", None,
        "The conversation history before this point was compacted into the following summary:\n\n<summary>\nS\n</summary>",
    )]


def test_bash_execution_text_matches_pi_convert_to_llm() -> None:
    msg = {"role": "bashExecution", "command": "git status", "output": "clean", "exitCode": 1, "cancelled": False, "truncated": False}
    assert bash_execution_text(msg) == "Ran `git status`\n```\nclean\n```\n\nCommand exited with code 1"
    assert bash_execution_text({"command": "true", "output": "", "exitCode": 0}) == "Ran `true`\n(no output)"


def test_bash_text_equals_pi_llm_messages(shared_dir: Path) -> None:
    ctx = json.loads((shared_dir / "sessions-pi" / "02-abort-error-bash.context.json").read_text())
    llm_texts = [
        m["content"][0]["text"] for m in ctx["llmMessages"]
        if m["role"] == "user" and isinstance(m["content"], list) and m["content"][0].get("text", "").startswith("Ran `")
    ]
    ours = [bash_execution_text(m) for m in ctx["messages"] if m["role"] == "bashExecution" and not m.get("excludeFromContext")]
    assert ours == llm_texts and ours


def test_chars_v1_breakdown_totals_equal_ds4_estimate(sample01: Path) -> None:
    ctx = json.loads(sample01.with_name("01-tools-and-image.context.json").read_text())
    ledger = TokenLedger(CharsV1Counter(), message_parts)
    bd = breakdown(ctx["messages"], ctx["contextEntryIds"], ledger, context_window=200_000)
    # DS4 charges the system prompt as fixed tokens, not as a message (spec §1.3): every other
    # message costs exactly DS4's estimate.
    system = [i for i, m in enumerate(ctx["messages"]) if m["role"] == "system"]
    assert system == [0]
    assert bd.message_tokens[1:] == [message_tokens(m) for m in ctx["messages"][1:]]
    assert bd.estimate == sum(bd.message_tokens)
    assert sum(r.tokens for r in bd.rows if r.id != "free") == bd.estimate
    assert bd.free == 200_000 - bd.estimate
    tool_rows = {r.id: r for r in bd.rows}
    assert [name for name, _ in tool_rows["tool_results"].children] == sorted(
        {m["toolName"] for m in ctx["messages"] if m["role"] == "toolResult"},
        key=lambda n: -dict(tool_rows["tool_results"].children)[n],
    )


def test_unattributed_is_provider_minus_estimate_when_positive(sample01: Path) -> None:
    ctx = json.loads(sample01.with_name("01-tools-and-image.context.json").read_text())
    ledger = TokenLedger(CharsV1Counter(), message_parts)
    plain = breakdown(ctx["messages"], ctx["contextEntryIds"], ledger, context_window=200_000)
    more = breakdown(ctx["messages"], ctx["contextEntryIds"], ledger, context_window=200_000, provider_tokens=plain.estimate + 500)
    less = breakdown(ctx["messages"], ctx["contextEntryIds"], ledger, context_window=200_000, provider_tokens=plain.estimate - 500)
    assert (more.unattributed, more.free) == (500, 200_000 - plain.estimate - 500)
    assert (less.unattributed, less.free) == (0, plain.free + 500)  # the provider's count wins
    inferred = breakdown(ctx["messages"], ctx["contextEntryIds"], ledger, context_window=200_000, inferred_fixed_tokens=3000)
    assert inferred.rows[0].label == "System prompt + tools (inferred)" and inferred.rows[0].inferred
    assert inferred.estimate == plain.estimate + 3000


def test_map_cells_follow_context_order_and_give_every_entry_a_cell() -> None:
    segments = [
        Segment("system_prompt", 1000, 0, "a"),
        Segment("user", 10, 1, "b"),  # smaller than a cell: still gets one
        Segment("tool_results", 2500, 2, "c"),
    ]
    cells = map_cells(segments, total_cells=20, tokens_per_cell=500)
    assert len(cells) == 20
    assert [c.entry_id for c in cells[:9]] == ["a", "a", "b", "c", "c", "c", "c", "c", None]
    owners = [c.entry_id for c in cells if c.entry_id]
    assert owners[0] == "a" and "b" in owners and owners[-1] == "c"
    assert owners == sorted(owners)  # context order
    assert cells[-1].category == "free"
    assert sum(1 for c in cells if c.category == "tool_results") == 5


def test_map_never_overflows() -> None:
    segments = [Segment("user", 1, i, f"e{i}") for i in range(100)]
    cells = map_cells(segments, total_cells=10, tokens_per_cell=1000)
    assert len(cells) == 10 and all(c.category == "user" for c in cells)


def test_tokens_per_cell_is_round_and_fits() -> None:
    assert tokens_per_cell(200_000, 1000) == 200
    assert tokens_per_cell(200_000, 900) == 250
    assert tokens_per_cell(200_000, 624) == 400
    assert tokens_per_cell(1_000_000, 1000) == 1000
    assert tokens_per_cell(128_000, 2000) == 80
    assert tokens_per_cell(100, 1000) == 1
