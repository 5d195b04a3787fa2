"""Pin, collapse and undo on copies of Pi-written sessions (ds4sessions.steering.steer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ds4core.models import ModelTable
from ds4sessions.agents.pi import build_context, convert_to_llm, read_session
from ds4sessions.steering.steer import (
    collapse,
    collapsible_turns,
    is_pin,
    list_pins,
    pin,
    plan_collapse,
    toggle_pin,
    undo,
)
from ds4sessions.steering.writer import (
    Expected,
    Journal,
    WriteRefused,
    append_entries,
    read_state,
)

from tests.sessions.test_writer import _truncated, copy_old


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Journal:
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))
    return Journal()


def test_is_pin() -> None:
    assert is_pin("ds4:pin") and is_pin("  DS4:PIN rate-limit task ") and is_pin("ds4:pin\tx")
    assert not is_pin("ds4:pinned") and not is_pin("scratch") and not is_pin(None) and not is_pin("")


def test_list_pins_sample_04(shared_dir: Path) -> None:
    session = read_session(shared_dir / "sessions-pi" / "04-tree-branches-labels.jsonl")
    pins = list_pins(session)
    assert [(p.target_id, p.label, p.on_branch) for p in pins] == [
        ("a5eb5dae", "ds4:pin rate-limit task (compare variants)", True),
        ("e63932ef", "ds4:pin sliding-window (chosen)", True),
    ]


def test_pin_unpin_toggle_and_undo(shared_dir: Path, tmp_path: Path, journal: Journal) -> None:
    path = copy_old(shared_dir / "sessions-pi" / "04-tree-branches-labels.jsonl", tmp_path)
    original = path.read_bytes()
    # f096402f carries the plain label "fixed-window done": the pin keeps it as its note
    r1 = pin(path, "f096402f", journal=journal)
    entry = r1.entries[0]
    assert entry["label"] == "ds4:pin fixed-window done" and entry["parentId"] == "9d3f5d84"
    assert read_session(path).labels["f096402f"] == "ds4:pin fixed-window done"
    with pytest.raises(WriteRefused) as err:
        pin(path, "f096402f", journal=journal)
    assert err.value.code == "nothing_to_do"
    # unpin writes the note back as a plain label
    r2 = pin(path, "f096402f", clear=True, journal=journal)
    assert r2.entries[0]["label"] == "fixed-window done"
    # a bare pin is cleared by a label entry without "label"
    r3 = toggle_pin(path, "c93293c7", journal=journal)
    assert r3.entries[0]["label"] == "ds4:pin"
    r4 = toggle_pin(path, "c93293c7", journal=journal)
    assert "label" not in r4.entries[0] and r4.entries[0]["targetId"] == "c93293c7"
    assert "c93293c7" not in read_session(path).labels
    # undo the unpin of #2: the pin comes back
    u = undo(r2.journal_id, journal=journal)
    assert u.entries[0]["label"] == "ds4:pin fixed-window done"
    assert journal.get(r2.journal_id).undone_by == u.journal_id
    with pytest.raises(WriteRefused, match="already undone"):
        undo(r2.journal_id, journal=journal)
    # undoing the undo restores the plain label
    uu = undo(u.journal_id, journal=journal)
    assert uu.entries[0]["label"] == "fixed-window done"
    with pytest.raises(WriteRefused) as err:
        pin(path, "nope0000", journal=journal)
    assert err.value.code == "unknown_entry"
    # context never changed; bytes before the first write never changed
    assert build_context(read_session(path)).messages == build_context(read_session(shared_dir / "sessions-pi" / "04-tree-branches-labels.jsonl")).messages
    assert path.read_bytes()[: len(original)] == original
    assert [r.action for r in journal.list(path)] == ["pin", "unpin", "pin", "unpin", "undo", "undo"]


def test_collapse_plan_and_write(shared_dir: Path, tmp_path: Path, journal: Journal) -> None:
    src = shared_dir / "sessions-pi" / "02-abort-error-bash.jsonl"
    path = copy_old(src, tmp_path)
    original_ctx = build_context(read_session(src))
    state = read_state(path)
    assert collapsible_turns(state.session) == 5
    model = ModelTable.bundled().get("anthropic", "claude-opus-4-5")
    plan = plan_collapse(state, 2, model)
    prompts = [eid for m, eid in zip(original_ctx.messages, original_ctx.message_entry_ids) if m["role"] == "user"]
    assert plan.first_prompt_id == prompts[-2]
    assert plan.anchor_id == read_session(src).by_id[prompts[-2]].parent_id == "f2ff485a"
    assert plan.from_id == "e24cdd5d" and plan.expected == Expected(27934, "e24cdd5d")
    assert plan.span_entry_ids[0] == prompts[-2] and plan.span_entry_ids[-1] == "e24cdd5d"
    assert plan.cost.saved_tokens == plan.cost.span_tokens - plan.cost.summary_tokens > 0
    assert plan.cost.next_with_usd is not None and plan.cost.cache_loss_usd is not None
    assert plan.entry["details"] == {"readFiles": [], "modifiedFiles": ["test/widgets.test.js"]}

    result = collapse(path, 2, expected=plan.expected, model=model, journal=journal)
    entry = result.entries[0]
    assert list(entry) == ["type", "id", "parentId", "timestamp", "fromId", "summary", "details", "usage"]
    assert entry["parentId"] == "f2ff485a" and entry["fromId"] == "e24cdd5d"
    assert entry["summary"] == plan.summary.text
    span_start = original_ctx.message_entry_ids.index(prompts[-2])
    span_usage = [m["usage"] for m in original_ctx.messages[span_start:] if m["role"] == "assistant"]
    assert entry["usage"]["output"] == sum(u["output"] for u in span_usage)
    assert entry["usage"]["cacheRead"] == sum(u["cacheRead"] for u in span_usage)

    after = build_context(read_session(path))
    assert after.leaf_id == entry["id"]
    assert after.messages[:-1] == original_ctx.messages[:span_start]
    assert after.messages[-1]["role"] == "branchSummary" and after.messages[-1]["fromId"] == "e24cdd5d"
    assert convert_to_llm(after.messages)[-1]["content"][0]["text"].startswith(
        "The following is a summary of a branch that this conversation came back from:\n\n<summary>\nCollapsed by ds4tui"
    )
    assert path.read_bytes()[:27934] == src.read_bytes()

    # undo: a custom entry under the old leaf brings the old branch back
    u = undo(result.journal_id, journal=journal)
    assert u.entries[0]["type"] == "custom" and u.entries[0]["parentId"] == "e24cdd5d"
    assert u.entries[0]["customType"] == "ds4tui.undo"
    assert u.entries[0]["data"] == {"undoes": entry["id"], "action": "collapse", "journalId": result.journal_id}
    restored = build_context(read_session(path))
    assert restored.messages == original_ctx.messages
    # undo the undo: the collapsed branch again
    undo(u.journal_id, journal=journal)
    assert build_context(read_session(path)).messages == after.messages


def test_collapse_refusals(shared_dir: Path, sample01: Path, tmp_path: Path) -> None:
    b03 = copy_old(shared_dir / "bad-inputs" / "B03-metadata-leaf.jsonl", tmp_path)
    with pytest.raises(WriteRefused, match="nothing precedes the first prompt"):
        plan_collapse(read_state(b03), 1)
    assert collapsible_turns(read_state(b03).session) == 0
    with pytest.raises(WriteRefused, match="only 3 turn"):
        plan_collapse(read_state(copy_old(sample01, tmp_path)), 4)
    with pytest.raises(WriteRefused, match="at least one"):
        plan_collapse(read_state(copy_old(sample01, tmp_path)), 0)
    busy = _truncated(sample01, tmp_path, 21)  # ends with a tool call without result
    with pytest.raises(WriteRefused, match="still in flight") as err:
        plan_collapse(read_state(busy), 1)
    assert err.value.code == "cannot_collapse"
    assert collapsible_turns(read_state(busy).session) == 0
    before = busy.read_bytes()
    with pytest.raises(WriteRefused):
        collapse(busy, 1, force=True)
    assert busy.read_bytes() == before


def test_collapse_stays_after_the_last_compaction(shared_dir: Path, tmp_path: Path) -> None:
    path = copy_old(shared_dir / "sessions-pi" / "03-compaction.jsonl", tmp_path)
    with pytest.raises(WriteRefused, match="only 1 turn.* after the last compaction"):
        plan_collapse(read_state(path), 2)
    before = build_context(read_session(path))
    result = collapse(path, 1)
    assert result.entries[0]["parentId"] == "107b9405"  # the compaction: its kept tail stays
    after = build_context(read_session(path))
    assert after.messages[:-1] == before.messages[: before.message_entry_ids.index("e0173bb3")]
    assert after.messages[0]["role"] == "system" and after.messages[1]["role"] == "compactionSummary"


def test_undo_refused_when_the_conversation_went_on(sample01: Path, tmp_path: Path, journal: Journal) -> None:
    path = copy_old(sample01, tmp_path)
    result = collapse(path, 1, journal=journal)
    user = {"type": "message", "message": {"role": "user", "content": "next", "timestamp": 1}}
    append_entries(path, lambda st: [user], action="test", force=True)
    with pytest.raises(WriteRefused, match="continued after") as err:
        undo(result.journal_id, journal=journal, force=True)
    assert err.value.code == "not_undoable"
    with pytest.raises(WriteRefused, match="no journal record #999"):
        undo(999, journal=journal)


def test_collapse_written_file_reads_back_as_json_lines(sample01: Path, tmp_path: Path) -> None:
    path = copy_old(sample01, tmp_path)
    collapse(path, 2)
    lines = path.read_bytes().splitlines()
    assert len(lines) == 24 and all(json.loads(line) for line in lines)
    assert read_session(path).diagnostics.total == 0
