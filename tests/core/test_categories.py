"""Categories of context tokens and the pixel map's cells."""

from __future__ import annotations

import json
from typing import Any
from pathlib import Path

import pytest

from ds4core.categories import (
    Segment,
    calibrate,
    calibrated,
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


def test_map_cells_follow_context_order_and_draw_each_category_at_its_share() -> None:
    segments = [
        Segment("system_prompt", 1000, 0, "a"),
        Segment("user", 10, 1, "b"),  # smaller than a cell: its category still shows one cell
        Segment("tool_results", 2500, 2, "c"),
    ]
    cells = map_cells(segments, total_cells=20, tokens_per_cell=500)
    assert len(cells) == 20
    # 3,510 tokens fill round(3510 / 500) = 7 cells; the user's cell is taken from the
    # category drawn most above its share (tool results: 5 cells for 4.99 cells' worth).
    assert [c.entry_id for c in cells[:8]] == ["a", "a", "b", "c", "c", "c", "c", None]
    owners = [c.entry_id for c in cells if c.entry_id]
    assert owners == sorted(owners)  # context order
    assert cells[-1].category == "free"
    assert sum(1 for c in cells if c.category == "tool_results") == 4


def test_a_small_category_is_drawn_at_its_share_not_one_cell() -> None:
    # issue 17: "Unattributed 1.6k is drawn as one cell" (200 tok per cell: 8 cells).
    segments = [Segment("user", 40, i, f"e{i}") for i in range(200)]  # 8k in 200 small messages
    segments.append(Segment("images", 1600, 200, "img"))
    cells = map_cells(segments, total_cells=1000, tokens_per_cell=200)
    assert sum(1 for c in cells if c.category == "images") == 8
    assert sum(1 for c in cells if c.category == "user") == 40
    assert sum(1 for c in cells if c.category != "free") == round(9600 / 200)


def test_map_never_overflows() -> None:
    segments = [Segment("user", 1, i, f"e{i}") for i in range(100)]
    cells = map_cells(segments, total_cells=10, tokens_per_cell=1000)
    assert len(cells) == 10 and cells[0].category == "user" and cells[1].category == "free"
    big = map_cells([Segment("user", 50_000, 0, "x"), Segment("tools", 50_000, 1, "y")], total_cells=10, tokens_per_cell=1000)
    assert len(big) == 10 and [c.category for c in big] == ["user"] * 5 + ["tools"] * 5


def test_tokens_per_cell_follows_1_2_5_and_is_kept_while_it_fits() -> None:
    assert tokens_per_cell(200_000, 1000) == 200
    assert tokens_per_cell(200_000, 900) == 500  # 250 is not in the 1-2-5 series
    assert tokens_per_cell(200_000, 624) == 500
    assert tokens_per_cell(1_000_000, 1000) == 1000
    assert tokens_per_cell(128_000, 2000) == 100
    assert tokens_per_cell(100, 1000) == 1
    # Kept while the window is the same and it still fits (the legend grew, the map shrank)...
    assert tokens_per_cell(200_000, 1100, keep=200) == 200
    assert tokens_per_cell(200_000, 5000, keep=200) == 200
    # ...and replaced once it no longer fits.
    assert tokens_per_cell(200_000, 900, keep=200) == 500


def test_calibrate_spreads_the_provider_total_in_proportion() -> None:
    assert calibrate({"a": 300, "b": 100}, 200) == {"a": 150, "b": 50}
    got = calibrate({"a": 1, "b": 1, "c": 1}, 10)
    assert sum(got.values()) == 10 and sorted(got.values()) == [3, 3, 4]
    assert calibrate({"a": 5, "z": 0}, 7) == {"a": 7, "z": 0}
    with pytest.raises(ValueError):
        calibrate({"a": 0}, 5)
    with pytest.raises(ValueError):
        calibrate({"a": 1}, -1)


def test_calibrated_rows_add_up_to_the_window_and_the_provider(sample01: Path) -> None:
    ctx = json.loads(sample01.with_name("01-tools-and-image.context.json").read_text())
    ledger = TokenLedger(CharsV1Counter(), message_parts)
    raw = breakdown(ctx["messages"], ctx["contextEntryIds"], ledger, context_window=200_000, provider_tokens=None)
    # The estimate above the provider (issue 17: 201.1k of tool results + 17k free in 200k).
    over = breakdown(ctx["messages"], ctx["contextEntryIds"], ledger, context_window=200_000, provider_tokens=raw.estimate // 2)
    cal = calibrated(over, raw.estimate // 2)
    assert cal.used == raw.estimate // 2 and cal.source == "provider"
    assert sum(r.tokens for r in cal.rows) == 200_000
    assert sum(r.tokens for r in cal.rows if r.id != "free") == cal.used == sum(s.tokens for s in cal.segments)
    assert cal.free == 200_000 - cal.used and cal.estimate == raw.estimate
    assert all(sum(t for _, t in r.children) == r.tokens for r in cal.rows if r.children)
    # The estimate below the provider: unattributed is spread over the categories.
    under = breakdown(ctx["messages"], ctx["contextEntryIds"], ledger, context_window=200_000, provider_tokens=raw.estimate + 900)
    assert under.unattributed == 900
    cal = calibrated(under, raw.estimate + 900)
    assert "unattributed" not in [r.id for r in cal.rows] and cal.used == raw.estimate + 900
    assert round(cal.factor, 6) == round((raw.estimate + 900) / raw.estimate, 6)
    # Without a provider the estimate stands, capped at the window.
    small = calibrated(breakdown(ctx["messages"], ctx["contextEntryIds"], ledger, context_window=1000))
    assert small.capped and small.used == 1000 and small.free == 0
    assert sum(r.tokens for r in small.rows) == 1000


def test_images_are_their_own_category() -> None:
    png = {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
    msg = {"role": "user", "content": [{"type": "text", "text": "look"}, png]}
    assert message_parts(msg) == [("user", None, "look"), ("images", "user", png)]
    result = {"role": "toolResult", "toolName": "read", "content": [png]}
    assert message_parts(result) == [("images", "read", png)]
    ledger = TokenLedger(CharsV1Counter(), message_parts)
    bd = breakdown([msg], ["e1"], ledger, context_window=200_000)
    assert {r.id: r.tokens for r in bd.rows}["images"] == 1024  # DS4's flat rule (chars-v1)


def _map_cells_reference(segments: list[Segment], total_cells: int, tokens_per_cell: int) -> list[tuple]:
    """The O(segments) layout `map_cells` had before `MapIndex` (commit 1963b22), kept as the
    reference the index-based layout must equal."""
    from ds4core.categories import _largest_remainder

    if total_cells <= 0 or tokens_per_cell <= 0:
        return []
    used = sum(max(s.tokens, 0) for s in segments)
    if used <= 0:
        return [("free", None, None)] * total_cells
    filled = min(total_cells, max(1, (2 * used + tokens_per_cell) // (2 * tokens_per_cell)))
    order: list[str] = []
    totals: dict[str, int] = {}
    for seg in segments:
        if seg.tokens > 0:
            if seg.category not in totals:
                order.append(seg.category)
            totals[seg.category] = totals.get(seg.category, 0) + seg.tokens
    quotas = dict(zip(order, _largest_remainder([totals[c] for c in order], filled)))
    if filled >= len(order):
        for cat in order:
            while quotas[cat] == 0:  # (the donor can spare a cell: the rule since the Codex map's fix)
                donors = [c for c in order if quotas[c] > 1]
                if not donors:
                    break
                donor = max(donors, key=lambda c: (quotas[c] - totals[c] * filled / used, quotas[c]))
                quotas[donor] -= 1
                quotas[cat] += 1
    seen: dict[str, int] = {}
    cells: list[tuple] = []
    for seg in segments:
        if seg.tokens <= 0:
            continue
        cat, total, quota = seg.category, totals[seg.category], quotas[seg.category]
        before = seen.get(cat, 0)
        after = before + seg.tokens
        seen[cat] = after
        want = (2 * after * quota + total) // (2 * total) - (2 * before * quota + total) // (2 * total)
        cells.extend([(cat, seg.entry_id, seg.message_index)] * want)
    cells.extend([("free", None, None)] * (total_cells - len(cells)))
    return cells[:total_cells]


def test_map_cells_through_the_index_equal_the_reference_layout() -> None:
    """`map_cells` (now `MapIndex.layout`, O(cells log segments)) lays out exactly what the
    O(segments) walk did, on 3,000 random segment lists, scales and sizes."""
    import random

    rng = random.Random(1)
    cats = ["user", "assistant", "tools", "tool_results", "system_prompt", "thinking", "images", "unattributed"]
    for _ in range(3000):
        segments = [
            Segment(rng.choice(cats), rng.choice([0, 1, 3, 50, 400, 2000, rng.randint(0, 90_000)]), i, f"e{i}")
            for i in range(rng.randint(0, 60))
        ]
        total, per = rng.randint(0, 300), rng.choice([1, 10, 100, 1000, 5000])
        got = [(c.category, c.entry_id, c.message_index) for c in map_cells(segments, total, per)]
        assert got == _map_cells_reference(segments, total, per)


def test_map_index_extended_by_appends_lays_out_what_a_fresh_index_does() -> None:
    """An index extended segment batch by segment batch (the append path) equals one built at
    once, shares its prefix objects, and a changed prefix (a compaction) starts afresh."""
    import random

    from ds4core.categories import MapIndex

    rng = random.Random(7)
    cats = ["user", "assistant", "tool_results", "thinking"]
    segments = [Segment(rng.choice(cats), rng.randint(1, 5000), i, f"e{i}") for i in range(400)]
    index = None
    for end in range(0, 401, 37):
        grown = MapIndex.of(segments[:end] + [Segment("unattributed", 99, None, None)], index)
        fresh = MapIndex.of(segments[:end])
        totals = {c: t * 2 for c, t in fresh.totals().items()}  # calibrated totals: any shares
        for cells, per in ((200, 1000), (1000, 200)):
            assert [(c.category, c.entry_id) for c in grown.layout(totals, cells, per)] == \
                [(c.category, c.entry_id) for c in fresh.layout(totals, cells, per)]
        if index is not None and index.cells:
            assert grown.cells[: len(index.cells)] == index.cells and grown.cells[0] is index.cells[0]
        index = grown
    index = MapIndex.of(segments, index)
    assert MapIndex.of(segments + [Segment("unattributed", 5, None, None)], index) is index  # nothing new
    changed = [Segment("user", 7, 0, "other")] + segments[1:]
    assert MapIndex.of(changed, index).cells[0].entry_id == "other"


def test_an_older_map_index_is_unchanged_by_later_extensions() -> None:
    """Extensions share their predecessor's lists (no copies): the predecessor keeps laying out
    exactly what it did, and extending an index that is no longer the newest starts afresh."""
    import random

    from ds4core.categories import MapIndex

    rng = random.Random(11)
    cats = ["user", "assistant", "tool_results"]
    segments = [Segment(rng.choice(cats), rng.randint(1, 3000), i, f"e{i}") for i in range(300)]
    first = MapIndex.of(segments[:100])
    totals = first.totals()
    before = [(c.category, c.entry_id) for c in first.layout(totals, 300, 500)]
    second = MapIndex.of(segments[:200], first)
    assert second._store is first._store  # extended in place
    third = MapIndex.of(segments, second)
    assert [(c.category, c.entry_id) for c in first.layout(totals, 300, 500)] == before
    assert first.totals() == totals and len(first.cells) < len(second.cells) < len(third.cells)
    # `first` is no longer the newest index of its store: extending it again builds a new one
    branch = MapIndex.of(segments[:100] + [Segment("user", 5, 999, "other")], first)
    assert branch._store is not first._store
    fresh = MapIndex.of(segments[:100] + [Segment("user", 5, 999, "other")])
    assert branch.totals() == fresh.totals() and branch.cells == fresh.cells
    assert [(c.category, c.entry_id) for c in second.layout(second.totals(), 400, 300)] == \
        [(c.category, c.entry_id) for c in MapIndex.of(segments[:200]).layout(second.totals(), 400, 300)]


def test_every_category_with_tokens_gets_a_cell_when_there_are_enough() -> None:
    """A small category that just got its one cell is over-served, but has no cell to spare: the
    next small category's cell comes from a big one (a Codex map showed 4 of 7 categories)."""
    from ds4core.categories import _quotas

    totals = {"system_prompt": 4505, "tools": 5141, "user": 102, "assistant_text": 44, "thinking": 31,
              "compaction": 123, "custom": 667}
    order = ["tools", "system_prompt", "user", "custom", "compaction", "thinking", "assistant_text"]
    quotas = _quotas(order, totals, 21, sum(totals.values()))
    assert all(q >= 1 for q in quotas.values()) and sum(quotas.values()) == 21
    assert quotas["tools"] >= quotas["system_prompt"] >= quotas["custom"] >= 1


def test_map_index_after_a_replaced_tail_equals_a_fresh_index(monkeypatch: Any) -> None:
    """An append that replaces the last message's segments (Claude Code's second row of a
    streamed reply) keeps the shared prefix (copied, not rebuilt) and indexes the rest: the
    result equals a fresh index (source, cells, per-category totals, layouts) on 500 random
    edits, and the earlier index still shows what it showed (another thread may be drawing it)."""
    import random

    import ds4core.categories as categories
    from ds4core.categories import MapIndex

    calls = []
    real = categories._truncated
    monkeypatch.setattr(categories, "_truncated", lambda *a: calls.append(1) or real(*a))
    rng = random.Random(11)
    cats = ["user", "assistant", "tool_results", "thinking", "unattributed"]
    fixed = [Segment("system_prompt", 3000, None, None), Segment("tools", 9000, None, None)]
    segments = fixed + [Segment(rng.choice(cats), rng.choice([0, 5, rng.randint(1, 5000)]), i, f"e{i}") for i in range(300)]
    index = MapIndex.of(segments)
    for _ in range(500):
        before_cells, before_totals = index.cells, index.totals()
        cut = rng.randint(max(len(segments) - 6, 0), len(segments))
        tail = [Segment(rng.choice(cats), rng.choice([0, rng.randint(1, 5000)]), 10_000 + rng.randint(0, 99), f"n{rng.randint(0, 99)}")
                for _ in range(rng.randint(0, 5))]
        # the fixed rows re-made (equal values, new objects), as an accountant makes them
        segments = [Segment(s.category, s.tokens, None, None) for s in fixed] + segments[len(fixed):cut] + tail
        grown = MapIndex.of(segments, index)
        fresh = MapIndex.of(segments)
        assert grown.source == fresh.source
        assert grown.cells == fresh.cells
        assert grown.totals() == fresh.totals() and grown.order == fresh.order
        totals = {c: t * 3 for c, t in fresh.totals().items()}
        for cells, per in ((120, 1000), (700, 100)):
            assert grown.layout(totals, cells, per) == fresh.layout(totals, cells, per)
        assert index.cells == before_cells and index.totals() == before_totals  # the earlier one is intact
        index = grown
    assert len(calls) > 100  # the copy path ran


def test_map_index_columns_are_arrays_until_a_token_count_is_not_an_int() -> None:
    """Issue 32: the map index keeps its running totals and cell positions as `array('q')`; a
    segment whose tokens are not an int (a plug-in's float) turns them into lists, which give
    the same totals and cells (here: an extension by such a segment, and a fresh index)."""
    from array import array

    from ds4core.categories import MapIndex, Segment

    ints = [Segment("user", 3, 0, "a"), Segment("tools", 5, 1, "b"), Segment("user", 2, 2, "c")]
    index = MapIndex.of(ints)
    assert all(type(c) is array for c in index._store.cum.values())
    assert index.totals() == {"user": 5, "tools": 5}
    more = ints + [Segment("tools", 1.5, 3, "d")]
    extended = MapIndex.of(more, index)
    assert all(type(c) is list for c in extended._store.cum.values())
    assert extended.totals() == MapIndex.of(more).totals() == {"user": 5, "tools": 6.5}
    assert extended.cells == MapIndex.of(more).cells and index.totals() == {"user": 5, "tools": 5}
