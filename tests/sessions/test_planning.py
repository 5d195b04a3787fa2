"""LivePlanner on Pi-written sessions: pins, totals, fixed tokens, calibration, incremental
estimates and plan diffs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ds4core.config import Ds4Config, apply_source
from ds4core.estimate import message_tokens
from ds4sessions.derive.ds4config import LoadedDs4Config
from ds4sessions.agents.pi.live import LiveSession, open_snapshot
from ds4sessions.derive.planning import PI_EXCLUDED_REASON, LivePlanner, explain_lines, is_pin_label, tokens_lines


def _config(source: dict) -> LoadedDs4Config:
    config, warnings, applied = apply_source(Ds4Config(), source, "test.json")
    assert applied and not warnings
    return LoadedDs4Config(config)


def _sample(shared_dir: Path, name: str) -> Path:
    return shared_dir / "sessions-pi" / f"{name}.jsonl"


def test_pin_label_rule() -> None:
    assert is_pin_label("ds4:pin")
    assert is_pin_label("  DS4:PIN rate-limit task ")
    assert is_pin_label("ds4:pin\tx")
    assert not is_pin_label("ds4:pinned")
    assert not is_pin_label("note ds4:pin")
    assert not is_pin_label(None)


def test_sample_04_pins_become_mandatory(shared_dir: Path) -> None:
    snap = open_snapshot(_sample(shared_dir, "04-tree-branches-labels"))
    # No tail and no rescue: without its pin, the older turn would be excluded.
    planner = LivePlanner(_config({"context": {"recentTailTokens": 0, "rescueImmediatePredecessor": False}}))
    view = planner.plan(snap)
    assert view.pinned_entry_ids == ("a5eb5dae", "e63932ef")
    assert view.unmapped_pins == ()
    by_entry = {i.entry_id: i for i in view.items if i.message_index is not None}
    pinned_turn = [i for i in view.items if i.group_id == "group:0-3"]
    assert [i.entry_id for i in pinned_turn] == ["a5eb5dae", "c30a9cf4", "3485e938", "27ae2e51"]
    assert all(i.included and i.kind == "pin" and i.score == 900.4 for i in pinned_turn)
    assert pinned_turn[0].reason.startswith("Mandatory explicit ds4:pin group; ")
    # e63932ef is in the current turn: a pinned current group stays `current`.
    assert by_entry["e63932ef"].kind == "current" and by_entry["e63932ef"].pinned
    assert view.mode == "managed"

    unpinned = dataclasses.replace(snap, context=dataclasses.replace(snap.context, labels={}))
    without = LivePlanner(_config({"context": {"recentTailTokens": 0, "rescueImmediatePredecessor": False}})).plan(unpinned)
    turn = [i for i in without.items if i.group_id == "group:0-3"]
    assert all(not i.included and i.kind == "recent" for i in turn)
    assert turn[0].reason.startswith("Excluded outside the contiguous recent-tail or input budget; ")
    diff = without.diff(view)
    assert {c.entry_id for c in diff.left} == {"a5eb5dae", "c30a9cf4", "3485e938", "27ae2e51"}
    assert diff.entered == ()


def _assert_totals(view) -> None:
    included = [i for i in view.items if i.included]
    excluded = [i for i in view.items if not i.included]
    assert view.totals.estimated_input_tokens == sum(i.tokens for i in included)
    assert view.totals.excluded_tokens == sum(i.tokens for i in excluded)
    assert view.totals.system_tokens + view.totals.tool_tokens == view.fixed_tokens
    assert view.totals.message_tokens == sum(i.tokens for i in view.plan.selected)
    assert view.totals.message_count == len(view.plan.selected)
    assert view.totals.excluded_count == len(excluded)
    assert sum(view.totals.by_kind.values()) == view.totals.message_tokens


def test_totals_equal_sum_of_items_03_compaction(shared_dir: Path) -> None:
    snap = open_snapshot(_sample(shared_dir, "03-compaction"))
    view = LivePlanner().plan(snap)
    _assert_totals(view)
    assert view.mode == "managed"
    assert view.fixed_source == "system"
    assert view.fixed_tokens == 1446
    assert view.totals.estimated_input_tokens == 2222
    # Entries compacted away are listed as Pi exclusions with 0 tokens.
    pi_excluded = [i for i in view.items if i.kind == "pi-excluded"]
    pi_context = json.loads((shared_dir / "sessions-pi" / "03-compaction.context.json").read_text())
    entries = [json.loads(line) for line in _sample(shared_dir, "03-compaction").read_text().splitlines()[1:]]
    left_out = [
        e["id"] for e in entries
        if e["type"] in ("message", "compaction", "branch_summary", "custom_message") and e["id"] not in pi_context["contextEntryIds"]
    ]
    assert [i.entry_id for i in pi_excluded] == left_out
    assert len(left_out) == 32
    assert all(i.tokens == 0 and i.reason == PI_EXCLUDED_REASON for i in pi_excluded)
    assert view.budget.context_window == 200_000


def test_totals_equal_sum_of_items_99_large(shared_dir: Path) -> None:
    snap = open_snapshot(_sample(shared_dir, "99-large"))
    view = LivePlanner().plan(snap)
    _assert_totals(view)
    assert view.mode == "managed"
    assert view.totals.estimated_input_tokens == 49398
    assert view.plan.planning.rescued_immediate_predecessor
    assert view.rescued_predecessor is not None and view.rescued_predecessor.id == "group:96-102"
    assert view.rescued_predecessor.tokens == 24884
    assert [g.id for g in view.selected_groups] == ["group:0-0", "group:96-102", "group:103-113"]
    assert len(view.excluded_groups) == 10
    # Eight ds4:pin labels, all on entries compacted away before the current context.
    assert len(view.unmapped_pins) == 8 and view.pinned_entry_ids == ()
    assert view.calibration_samples == 24  # the newest calibrationWindow replies
    assert view.awareness.calibration.accepted_samples == 24
    explain = explain_lines(view)
    assert explain[0] == "DS4 Context Plan"
    assert "Rescued predecessor  yes (group:96-102, 24,884 tokens)" in explain
    tokens = tokens_lines(view)
    assert tokens[0] == "DS4 Context Tokens (managed mode)"
    assert "Estimated provider input  49,398" in tokens


def test_fixed_tokens_inferred_without_system_message(shared_dir: Path) -> None:
    snap = open_snapshot(_sample(shared_dir, "07-old-scope-0.73"))
    view = LivePlanner().plan(snap)
    assert view.fixed_source == "inferred"
    system = [i for i in view.items if i.kind == "system"]
    assert len(system) == 1 and system[0].tokens == view.fixed_tokens == 1528
    _assert_totals(view)


def test_calibration_samples_come_from_fresh_replies(sample01: Path) -> None:
    snap = open_snapshot(sample01)
    view = LivePlanner().plan(snap)
    replies = [m for m in snap.context.messages if m.get("role") == "assistant" and m.get("usage")]
    assert view.calibration_samples == len([m for m in replies if m["usage"].get("input", 0) + m["usage"].get("cacheRead", 0) + m["usage"].get("cacheWrite", 0) > 0])
    assert view.awareness.calibration.observed_samples == view.calibration_samples


def test_one_append_estimates_only_the_new_message(shared_dir: Path, tmp_path: Path) -> None:
    lines = _sample(shared_dir, "03-compaction").read_bytes().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[:-1]))
    live = LiveSession(path)
    planner = LivePlanner()
    first = planner.plan(live.refresh())
    assert first.estimated_messages == len([m for m in live.last.context.messages if m.get("role") != "system"])
    with path.open("ab") as f:
        f.write(lines[-1])
    snap = live.refresh()
    assert snap is not None
    second = planner.plan(snap)
    added = len(snap.context.messages) - len(first.plan.original_messages) - sum(
        1 for m in snap.context.messages if m.get("role") == "system"
    )
    assert added == 1
    assert second.estimated_messages == 1
    assert planner.estimates == first.estimated_messages + 1
    # The cached estimates are the real ones.
    assert second.totals.estimated_input_tokens == LivePlanner().plan(snap).totals.estimated_input_tokens
    new = second.diff(first)
    assert [c.after for c in new.entered] == ["included"]
    assert new.entered[0].before == "absent"
    assert new.entered[0].tokens == message_tokens(snap.context.messages[-1])


def test_unknown_model_is_planned_with_defaults_and_a_warning(sample01: Path) -> None:
    snap = open_snapshot(sample01)
    view = LivePlanner().plan(dataclasses.replace(snap, model=None, model_key="acme/mystery"))
    assert view.model_assumed
    assert view.budget.context_window == 128_000
    assert view.warnings == (
        "model acme/mystery is not in the model table: planned with Pi's default limits "
        "(128,000-token window, 16,384 output)",
    )


def test_observer_mode_and_config_warnings_reach_the_view(sample01: Path) -> None:
    config, warnings, _ = apply_source(Ds4Config(), {"context": {"mode": "observer", "nope": 1}}, "g.json")
    view = LivePlanner(LoadedDs4Config(config, warnings=tuple(warnings))).plan(open_snapshot(sample01))
    assert view.warnings == ("g.json: Unknown configuration key ignored: context.nope",)
    assert explain_lines(view)[0] == "Latest context used observer mode; no managed-context selection was applied."
    assert tokens_lines(view)[0] == "DS4 Context Tokens (observer mode)"


@pytest.mark.parametrize("name", ["01-tools-and-image", "05-extensions-models", "08-legacy-v1"])
def test_json_has_no_message_content(shared_dir: Path, name: str) -> None:
    snap = open_snapshot(_sample(shared_dir, name))
    text = json.dumps(LivePlanner().plan(snap).to_json())
    for message in snap.context.messages:
        content = message.get("content")
        if isinstance(content, str) and len(content) > 20:
            assert content not in text
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and isinstance(block.get("text"), str) and len(block["text"]) > 20:
                assert json.dumps(block["text"])[1:-1] not in text
