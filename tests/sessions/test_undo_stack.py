"""Issue 30 item 6: undo is a stack.

`pin X; unpin X; journal undo 2; journal undo 1` refused the last step ("X was relabelled after
#1") although that relabel was ds4tui's own undo; undoing 26 writes newest first left 2 pins.
Now a label write can be undone when every later label on its target is ds4tui's own and cancels
out (undone, or an undo in force), an undo of an undo redoes, and unwinding any mix of pins,
unpins, collapses and undos newest first brings the DS4 plan back to its first state.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ds4sessions.agents.pi import build_context, read_session
from ds4sessions.agents.pi.discovery import load_model_table
from ds4sessions.derive.ds4config import load_ds4_config
from ds4sessions.derive.planning import LivePlanner
from ds4sessions.agents.pi.live import open_snapshot
from ds4sessions.steering import steer
from ds4sessions.steering.steer import collapse, collapsible_turns, is_pin, pin, undo
from ds4sessions.steering.writer import Journal, WriteRefused, read_state
from ds4tui.cli import app

from tests.sessions.test_writer import copy_old

TURNS = 12


def make_session(path: Path, turns: int = TURNS) -> Path:
    """A finished Pi session of `turns` turns (prompt, tool call, tool result, answer), an hour old."""
    lines = [{"type": "session", "version": 3, "id": "u1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp/u"},
             {"type": "model_change", "id": "m0", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
              "provider": "anthropic", "modelId": "claude-sonnet-4-5"}]
    parent = "m0"
    for g in range(turns):
        usage = {"input": 3, "output": 40, "cacheRead": 1000 + 300 * g, "cacheWrite": 300, "totalTokens": 1343 + 300 * g}
        for k, message in enumerate([
            {"role": "user", "content": [{"type": "text", "text": f"step {g}: change module {g}"}], "timestamp": 1_767_225_600_000 + g},
            {"role": "assistant", "content": [{"type": "toolCall", "id": f"c{g}", "name": "read", "arguments": {"path": f"m{g}.py"}}],
             "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "toolUse",
             "timestamp": 1_767_225_600_100 + g},
            {"role": "toolResult", "toolCallId": f"c{g}", "toolName": "read",
             "content": [{"type": "text", "text": f"line {g}\n" * (40 + 17 * g)}], "isError": False, "timestamp": 1_767_225_600_200 + g},
            {"role": "assistant", "content": [{"type": "text", "text": f"done {g}"}], "provider": "anthropic",
             "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "stop", "timestamp": 1_767_225_600_300 + g},
        ]):
            entry_id = f"e{g:02d}{k}0000"[:8]
            lines.append({"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
                          "message": message})
            parent = entry_id
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return copy_old(path, path.parent, "session.jsonl")


def plan_of(path: Path) -> dict:
    """The DS4 plan (`ds4tui plan --json`'s manifest) of the session as it is now."""
    snapshot = open_snapshot(path, load_model_table())
    return LivePlanner(load_ds4_config(snapshot.reader.cwd)).plan(snapshot).to_json()


def comparable(plan: dict, ours: set[str]) -> dict:
    """The plan without what an unwound stack rightly leaves behind: the leaf's id (now an undo
    entry), the planning time, and ds4tui's own branch summaries now off the branch (listed as
    excluded by Pi's reconstruction, 0 tokens)."""
    excluded = [item for item in plan["excluded"] if item.get("sourceId") not in ours]
    assert all(item["tokens"] == 0 for item in plan["excluded"] if item.get("sourceId") in ours)
    return {
        **{k: v for k, v in plan.items() if k not in ("branchLeafId", "planning", "excluded", "composition")},
        "planning": {k: v for k, v in plan["planning"].items() if k != "durationMs"},
        "composition": {**plan["composition"], "excludedCount": len(excluded)},
        "excluded": excluded,
    }


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Journal:
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))
    return Journal()


def test_the_issues_pin_unpin_undo_undo(tmp_path: Path, journal: Journal) -> None:
    """The issue's steps through the CLI: the second undo goes through and X is as before #1."""
    path = make_session(tmp_path / "raw.jsonl")
    runner = CliRunner()
    steps = [["pin", str(path), "e0300000", "--force"], ["pin", str(path), "e0300000", "--clear", "--force"],
             ["journal", "undo", "2", "--force"], ["journal", "undo", "1", "--force"]]
    for step in steps:
        result = runner.invoke(app, step)
        assert result.exit_code == 0, (step, result.output)
    session = read_session(path)
    assert "e0300000" not in session.labels
    assert [r.action for r in journal.list(path)] == ["pin", "unpin", "undo", "undo"]
    assert not steer.in_force(journal, journal.get(1)) and not steer.in_force(journal, journal.get(2))
    # a relabel still in force keeps the refusal, naming what to undo first
    pin(path, "e0300000", journal=journal, force=True)  # 5
    pin(path, "e0300000", clear=True, journal=journal, force=True)  # 6
    with pytest.raises(WriteRefused, match="by #6 \\(unpin\\); undo #6 first"):
        undo(5, journal=journal, force=True)
    undo(6, journal=journal, force=True)
    undo(5, journal=journal, force=True)
    assert "e0300000" not in read_session(path).labels


def test_undo_of_an_undo_redoes_and_can_be_undone_again(tmp_path: Path, journal: Journal) -> None:
    path = make_session(tmp_path / "raw.jsonl")
    before = build_context(read_session(path)).message_entry_ids
    first = collapse(path, 2, journal=journal, force=True)
    collapsed = build_context(read_session(path)).message_entry_ids
    assert collapsed != before
    back = undo(first.journal_id, journal=journal, force=True)
    assert build_context(read_session(path)).message_entry_ids == before
    redo = undo(back.journal_id, journal=journal, force=True)
    assert build_context(read_session(path)).message_entry_ids == collapsed
    assert steer.in_force(journal, journal.get(first.journal_id)) and not steer.in_force(journal, journal.get(back.journal_id))
    undo(first.journal_id, journal=journal, force=True)
    assert build_context(read_session(path)).message_entry_ids == before
    with pytest.raises(WriteRefused, match="already undone"):
        undo(first.journal_id, journal=journal, force=True)
    assert redo.journal_id is not None


@pytest.mark.parametrize("seed", [3, 30])
def test_unwinding_a_stack_of_mixed_writes_restores_the_plan(tmp_path: Path, journal: Journal, seed: int) -> None:
    """24+ mixed writes (pins, unpins, collapses, undos of recent writes), then every write still
    in force undone, newest first: no refusal, and the DS4 plan is the first one again."""
    path = make_session(tmp_path / "raw.jsonl")
    first_plan = plan_of(path)
    first_labels = dict(read_session(path).labels)
    rng = random.Random(seed)
    ids = [e.id for e in read_session(path).entries if e.type == "message"]
    writes = collapses = undos = 0
    while writes < 24:
        state = read_state(path)
        kind = rng.choice(["pin", "pin", "unpin", "collapse", "undo"])
        try:
            if kind == "pin":
                target = rng.choice([i for i in ids if not is_pin(state.session.labels.get(i))])
                pin(path, target, note=rng.choice([None, f"note {writes}"]), journal=journal, force=True)
            elif kind == "unpin":
                pinned = [i for i in ids if is_pin(state.session.labels.get(i))]
                if not pinned:
                    continue
                pin(path, rng.choice(pinned), clear=True, journal=journal, force=True)
            elif kind == "collapse":
                available = collapsible_turns(state.session)
                if available < 2:
                    continue
                collapse(path, rng.randint(1, min(3, available - 1)), journal=journal, force=True)
                collapses += 1
            else:
                live = [r for r in journal.list(path) if steer.in_force(journal, r)]
                if not live:
                    continue
                undo(live[-1 - rng.randint(0, min(1, len(live) - 1))].id, journal=journal, force=True)
                undos += 1
        except WriteRefused as err:
            assert kind == "undo", err  # (an undo of the one-but-last write may be refused: it is not the top)
            continue
        writes += 1
    assert collapses >= 2 and undos >= 2
    assert plan_of(path) != first_plan
    for record in sorted(journal.list(path), key=lambda r: r.id, reverse=True):
        current = journal.get(record.id)
        if current is not None and steer.in_force(journal, current):
            undo(record.id, journal=journal, force=True)  # never refused
    ours = {entry_id for r in journal.list(path) for entry_id in r.entry_ids}
    assert comparable(plan_of(path), ours) == comparable(first_plan, ours)
    assert dict(read_session(path).labels) == first_labels
    assert not [p for p in read_session(path).labels.values() if is_pin(p)]
