"""The view model after an append takes the O(new) route when the snapshot's lineage says the
context extends the previous one (`Snapshot.lineage`): no prefix of 40,000 ids, segments or turns
is compared item by item (issue 10: ~1 ms each per append at 10,000 turns). Whatever route it
takes, it must equal the view model built from nothing, plan marks included; a claim the
lineage cannot back (a full rebuild, another estimator) must take the careful route."""

from __future__ import annotations

import json
from pathlib import Path

from ds4core.categories import MapIndex, Segment
from ds4sessions.derive.pipeline import Derived, SessionPipeline
from ds4tui import viewmodel as vm


def _lines(start: int, count: int, parent: str) -> list[bytes]:
    out = []
    t = 1_767_225_600_000 + start * 10
    for k in range(start, start + count):
        g, step = divmod(k, 4)
        call = f"toolu_{g:05d}"
        usage = {"input": 3, "output": 40, "cacheRead": 900 + 70 * g, "cacheWrite": 60, "totalTokens": 1003 + 70 * g}
        message = [
            {"role": "user", "content": [{"type": "text", "text": f"step {g}: fix file_{g}.py"}], "timestamp": t},
            {"role": "assistant", "content": [{"type": "toolCall", "id": call, "name": "read", "arguments": {"path": f"f{g}"}}],
             "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "toolUse", "timestamp": t},
            {"role": "toolResult", "toolCallId": call, "toolName": "read", "content": [{"type": "text", "text": "x = 1\n" * (5 + g % 40)}],
             "isError": False, "timestamp": t},
            {"role": "assistant", "content": [{"type": "text", "text": f"fixed {g}"}], "provider": "anthropic",
             "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "stop", "timestamp": t},
        ][step]
        entry_id = f"e{k:06d}"
        out.append((json.dumps({"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
                                "message": message}) + "\n").encode())
        parent = entry_id
        t += 10
    return out


def _start(path: Path, turns: int) -> None:
    head = [
        {"type": "session", "version": 3, "id": "lineage", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp/lineage"},
        {"type": "model_change", "id": "m0", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
         "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
    ]
    path.write_bytes(b"".join((json.dumps(h) + "\n").encode() for h in head) + b"".join(_lines(0, 4 * turns, "m0")))


def _shown(model: vm.ViewModel) -> tuple[object, ...]:
    """What the widgets draw from a view model (the map as laid out cells)."""
    cells = [(c.category, c.entry_id, c.message_index) for c in model.map.cells(400, max(model.map.window // 400, 1))]
    return (model.version, model.header, model.legend, model.turns, model.map.totals, model.map.window,
            model.map.overlays, cells, model.excluded_entry_ids, model.pinned_entry_ids, model.plan_version)


def test_appends_take_the_lineage_route_and_equal_a_fresh_build(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _start(path, 60)
    pipeline = SessionPipeline(path, retrieval=False)
    snaps = list(pipeline.snapshots(force=True))
    model = vm.build(snaps[-1])
    fast = 0
    for k in range(240, 240 + 41):
        with path.open("ab") as f:
            f.write(_lines(k, 1, f"e{k - 1:06d}")[0])
        for snap in pipeline.snapshots():
            # the first 20 appends without a plan, then a plan for every snapshot: its marks
            # move on the extended map (`_moved_marks` with the shared positions)
            derived: Derived | None = [d for d in pipeline.derive(snap, now=0)][-1] if k >= 260 else None
            before = model
            model = vm.build(snap, derived, previous=before)
            fresh = vm.build(snap, derived)
            assert _shown(model) == _shown(fresh)
            assert model._lineage == snap.lineage is not None
            if before._lineage == snap.lineage:
                # the same epoch and estimator: the map's index grew in place, and without a
                # new plan the turn rows before the last are the previous view model's objects
                assert model.map.index._store is before.map.index._store
                if derived is None:
                    assert all(a is b for a, b in zip(model.turns[:-2], before.turns))
                fast += 1
    assert fast >= 30


def test_a_full_rebuild_is_a_new_lineage_and_is_not_extended_blindly(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _start(path, 20)
    pipeline = SessionPipeline(path, retrieval=False)
    first = list(pipeline.snapshots(force=True))[-1]
    model = vm.build(first)
    rebuilt = list(pipeline.snapshots(force=True))[-1]  # `force`: a full rebuild, a new epoch
    assert rebuilt.lineage is not None and rebuilt.lineage[0] != first.lineage[0]
    again = vm.build(rebuilt, previous=model)
    assert _shown(again) == _shown(vm.build(rebuilt))


def test_map_index_checks_the_ends_of_a_claimed_prefix() -> None:
    segments = [Segment("user" if i % 2 else "tool_results", 10 + i, i, f"e{i}") for i in range(600)]
    first = MapIndex.of(segments[:300])
    # a claim that `segments` extend the indexed ones, but the first segment differs: the full
    # comparison runs and a new store is made; the layout equals a fresh index's
    other = [Segment("system_prompt", 500, None, None)] + segments[1:]
    claimed = MapIndex.of(other, first, extends=True)
    assert claimed._store is not first._store
    assert claimed.cells == MapIndex.of(other).cells and claimed.totals() == MapIndex.of(other).totals()
    honest = MapIndex.of(segments, first, extends=True)
    assert honest._store is first._store and honest.cells == MapIndex.of(segments).cells
    assert first.cells == MapIndex.of(segments[:300]).cells  # the older index still sees its own prefix


def _agent_sessions() -> list[Path]:
    from tests.conftest import FIXTURES

    return sorted((FIXTURES / "claude").rglob("*.jsonl"))[:3] + sorted((FIXTURES / "codex").rglob("rollout-*.jsonl"))[:2]


def _grow_and_compare(source: Path, work: Path) -> tuple[int, int]:
    """Feed `source` into `work` line by line through the agent's live session; after every
    line the snapshot equals one read from nothing (turns, per-message tokens, map segments, rows,
    provider count, requests), the view model built on the previous one equals the one built from nothing, and when
    the lineage is kept the claims it makes hold; every other line is read with copies prepared
    ahead (`ConversationLive.prepare`, as the feed calls it). Returns (snapshots, kept lineages)."""
    from ds4sessions.agents.registry import agent_for_path

    agent = agent_for_path(source)
    work.write_bytes(b"")
    live = agent.live(work)
    model = None
    previous = None
    snaps = kept = 0
    for raw in source.read_bytes().splitlines(keepends=True):
        with work.open("ab") as f:
            f.write(raw)
        snap = live.refresh()
        if snap is None:
            continue
        snaps += 1
        fresh = agent.live(work).refresh()  # the same file read from nothing: what the appends must equal
        assert snap.turns == fresh.turns
        assert list(snap.breakdown.message_tokens) == list(fresh.breakdown.message_tokens)
        assert list(snap.breakdown.segments) == list(fresh.breakdown.segments)
        assert snap.breakdown.rows == fresh.breakdown.rows and snap.provider == fresh.provider
        assert list(snap.session.conversation.requests) == list(fresh.session.conversation.requests)
        built = vm.build(snap, None, previous=model)
        assert _shown(built) == _shown(vm.build(snap))
        if previous is not None and previous.lineage is not None and previous.lineage == snap.lineage:
            kept += 1
            n = len(previous.context.messages)
            assert all(a is b for a, b in zip(previous.context.messages, snap.context.messages[:n]))
            assert snap.context.message_entry_ids[:n] == previous.context.message_entry_ids
            assert all(a is b for a, b in zip(previous.turns[:-1], snap.turns))
        model, previous = built, snap
        if snaps % 2:
            live.prepare()  # as the feed does after a paint: the next append uses copies made now
    return snaps, kept


def test_claude_code_and_codex_appends_keep_a_lineage_the_view_model_can_trust(tmp_path: Path) -> None:
    """Claude Code and Codex (`ConversationLive`) keep their lineage while the conversation only
    grows: on the fixtures, line by line, and on a synthetic transcript whose replies come as
    one row per content block (the second row replaces the last message: a new epoch)."""
    import sys

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "bench"))
    import synthetic_agents

    total = 0
    for source in _agent_sessions():
        snaps, kept = _grow_and_compare(source, tmp_path / source.name)
        total += kept
    synthetic = tmp_path / "src" / "claude.jsonl"
    synthetic.parent.mkdir()
    synthetic_agents.write("claude", synthetic, 12)
    snaps, kept = _grow_and_compare(synthetic, tmp_path / "claude.jsonl")
    assert kept >= snaps * 3 // 5 - 2  # every line but a reply's second block row keeps it
    assert kept < snaps - 5  # and those start a new epoch
    assert total > 10
