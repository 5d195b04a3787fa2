"""The manifest shows the plan DS4 sends: retrieval evidence spliced in (spec §3.1, §3.6), on real
sessions run through `SessionPipeline` (retrieval, then `LivePlanner.plan(snapshot, supplements)`),
with the Retrieval tab's per-candidate outcome taken from the same plan."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ds4core.config import Ds4Config, apply_source
from ds4core.estimate import message_tokens
from ds4core.planner import SupplementalMessage
from ds4sessions.derive.ds4config import LoadedDs4Config
from ds4sessions.agents.pi.live import LiveSession, Snapshot
from ds4sessions.derive.pipeline import Derived, SessionPipeline
from ds4sessions.derive.planning import LivePlanner, PlanView, explain_lines, tokens_lines
from tests.conftest import ROOT

DEMO = ROOT / "ds4tui" / "data" / "demo-session.jsonl"
# The demo's current request asks about Markdown links; retrieval quotes these compacted entries,
# in the planner's order (category, then score).
DEMO_EVIDENCE = (
    "3b03bd69", "eaa63482", "5c8405d6", "180a8e13", "cf7be21e", "95144a25",
    "76726932", "6aa51149", "5f248833", "451ed806", "2ecd7c76", "3a84bdc7",
)


def _run(path: Path, context: dict | None = None, tmp_path: Path | None = None) -> tuple[Snapshot, Derived, Derived]:
    """One pipeline step on `path` (optionally with a `--config` file holding `context`): the
    exact snapshot, the first paint and the final `Derived`."""
    config_file = None
    if context is not None:
        assert tmp_path is not None
        config_file = tmp_path / "ds4-context.json"
        config_file.write_text(json.dumps({"context": context}), encoding="utf-8")
    pipe = SessionPipeline(path, config_file=config_file)
    _, exact, first, final = list(pipe.updates(now=0))
    assert isinstance(exact, Snapshot) and isinstance(first, Derived) and isinstance(final, Derived)
    assert final.errors == ()
    return exact, first, final


def _config(context: dict) -> LoadedDs4Config:
    ds4, _, applied = apply_source(Ds4Config(), {"context": context}, "test.json")
    assert applied
    return LoadedDs4Config(ds4)


def _assert_agree(derived: Derived) -> None:
    """The Retrieval tab says "selected" exactly for the evidence the manifest includes, with the
    planner's reason otherwise, and the same supplements and plan."""
    plan, retrieval = derived.plan, derived.retrieval
    assert plan is not None and retrieval is not None
    assert plan.supplements == retrieval.supplements
    assert retrieval.plan is plan.plan
    manifest = {item.key: item for item in plan.items if item.is_supplement}
    for row in retrieval.rows:
        item = manifest.get(f"retrieval:{row.entry_id}")
        if row.candidate.status != "selected" or plan.mode == "fallback":
            # Not fitted by retrieval (never handed to the planner), or dropped by a fallback.
            assert item is None and not row.selected
            continue
        assert item is not None and item.entry_id == row.entry_id
        assert row.selected == item.included
        if not item.included:
            assert row.why == f"planner: {item.reason}"
    assert retrieval.source_entry_ids == plan.retrieved_entry_ids


def test_demo_manifest_lists_the_retrieval_evidence_ds4_sends() -> None:
    exact, first, final = _run(DEMO)
    view = final.plan
    assert view is not None and view.mode == "managed" and not view.retrieval_pending
    supplements = final.retrieval.supplements  # type: ignore[union-attr]
    assert [s.source_ids[0] for s in supplements] == list(DEMO_EVIDENCE)

    rows = [item for item in view.items if item.is_supplement]
    assert [item.key for item in rows] == [f"retrieval:{e}" for e in DEMO_EVIDENCE]
    # Spliced before the current request (44 native messages, the last user message at 39).
    assert [item.group_id for item in rows] == [f"group:{i}-{i}" for i in range(39, 51)]
    assert [item.tokens for item in rows] == [778, 319, 582, 484, 1173, 106, 114, 112, 176, 194, 116, 755]
    for item, supplement in zip(rows, supplements):
        assert item.included and item.kind == "retrieval" and item.role == "user"
        assert item.entry_id == supplement.source_ids[0] and item.message_index is None
        assert item.tokens == message_tokens(supplement.message)
        assert item.score == supplement.score
        assert item.reason == f"{supplement.reason}; Conversation turn boundary"
        assert item.to_json()["supplementId"] == supplement.id and item.to_json()["sourceId"] == item.entry_id
    # Included in sent order: the evidence sits between older history and the current turn.
    sent = [item.kind for item in view.items if item.included]
    assert sent.index("retrieval") > sent.index("recent") and sent.index("current") > len(sent) - 8 - 1

    # Totals: the nominal 10,821 estimated tokens plus the 4,909 of evidence, equal to the items.
    nominal = first.plan
    assert nominal is not None and nominal.retrieval_pending and nominal.totals.estimated_input_tokens == 10_821
    assert "retrieval" not in nominal.totals.by_kind and nominal.supplements == ()
    assert view.totals.by_kind["retrieval"] == 4_909
    assert view.totals.estimated_input_tokens == 15_730 == sum(i.tokens for i in view.items if i.included)
    assert view.totals.message_count == 44 + 12
    assert view.plan.planning.original_message_count == 44  # native only (spec §3.12)
    assert view.plan.planning.selected_group_count == 19 and view.plan.planning.excluded_group_count == 0
    assert view.to_json()["retrievedEventIds"] == list(DEMO_EVIDENCE)

    tokens = tokens_lines(view)
    assert "  Historical retrieval   4,909" in tokens
    assert "  Historical retrieval   pending" in tokens_lines(nominal)
    explain = explain_lines(view)
    assert "Retrieval evidence  12 selected (4,909 tokens), 0 excluded" in explain
    assert "Selected groups     19" in explain
    assert "Retrieval evidence  pending" in explain_lines(nominal)

    _assert_agree(final)
    # The final plan equals a cold live planner's plan with the same supplements.
    cold = LivePlanner(SessionPipeline(DEMO).config).plan(exact, supplements)
    assert cold.items == view.items and cold.totals == view.totals


def test_diff_notices_evidence_and_a_pending_first_paint_does_not_drop_it(tmp_path: Path) -> None:
    lines = DEMO.read_bytes().splitlines(keepends=True)
    path = tmp_path / DEMO.name
    path.write_bytes(b"".join(lines[:-1]))  # without the final assistant reply
    pipe = SessionPipeline(path)
    *_, before = list(pipe.updates(now=0))
    with path.open("ab") as f:
        f.write(lines[-1])
    *_, first, final = list(pipe.updates(now=0))
    assert before.plan is not None and first.plan is not None and final.plan is not None
    assert len([i for i in before.plan.items if i.is_supplement and i.included]) == 12

    # The first paint (no evidence yet) against the previous final plan: the evidence is not "left".
    pending = first.plan.diff(before.plan)
    assert pending.retrieval_pending and all(not c.key.startswith("retrieval:") for c in pending.left)
    assert "Historical retrieval pending: its evidence is not planned yet." in pending.lines()
    # Final against final: the reply entered the current turn, and the newly indexed reply moved
    # the FTS ranking: one evidence item was swapped for another.
    diff = final.plan.diff(before.plan)
    assert not diff.retrieval_pending
    assert [(c.key, c.kind, c.before) for c in diff.entered] == [
        ("retrieval:2ecd7c76", "retrieval", "absent"),
        ("ae471f8c#0", "current", "absent"),
    ]
    assert [(c.key, c.after, c.tokens) for c in diff.left] == [("retrieval:924f2aea", "absent", 110)]
    assert diff.left[0].reason.startswith("no longer retrieved (was: Historical evidence: FTS: suite, test;")
    assert "  1 × included → absent, 110 tok: retrieval:924f2aea" in diff.lines()
    # Against the nominal plan of the same snapshot, the evidence is what entered.
    entered = final.plan.diff(dataclasses.replace(first.plan, retrieval_pending=False)).entered
    assert [c.key for c in entered] == [f"retrieval:{e}" for e in DEMO_EVIDENCE]
    assert {c.before for c in entered} == {"absent"} and sum(c.tokens for c in entered) == 4_909


def test_planner_budget_excludes_evidence_and_both_tabs_say_so(tmp_path: Path) -> None:
    # A 200k window at 0.074875 leaves a 12,603-token message target: 8,449 native tokens plus
    # 4,154 of evidence; the last item (755 tokens) no longer fits the active input budget.
    _, _, final = _run(DEMO, {"targetFillRatio": 0.074875}, tmp_path)
    view = final.plan
    assert view is not None and view.plan.planning.message_target_tokens == 12_603
    rows = {item.entry_id: item for item in view.items if item.is_supplement}
    assert [e for e, item in rows.items() if item.included] == list(DEMO_EVIDENCE[:-1])
    dropped = rows["3a84bdc7"]
    assert not dropped.included and dropped.tokens == 755 and dropped.kind == "retrieval"
    assert dropped.reason == "Excluded by retrieved-history or active input budget; Conversation turn boundary"
    assert view.totals.by_kind["retrieval"] == 4_154
    assert view.plan.planning.excluded_group_count == 1
    assert "Retrieval evidence  11 selected (4,154 tokens), 1 excluded" in explain_lines(view)
    _assert_agree(final)
    row = next(r for r in final.retrieval.rows if r.entry_id == "3a84bdc7")  # type: ignore[union-attr]
    assert not row.selected and row.why.startswith("planner: Excluded by retrieved-history")
    assert "3a84bdc7" not in final.retrieval.source_entry_ids  # type: ignore[union-attr]
    assert final.retrieval.evidence_text.count("[DS4 HISTORICAL EVIDENCE") == 11  # type: ignore[union-attr]


def test_fallback_sends_no_evidence(tmp_path: Path) -> None:
    _, _, final = _run(DEMO, {"targetFillRatio": 0.01, "softLimitRatio": 0.015, "hardLimitRatio": 0.02}, tmp_path)
    view = final.plan
    assert view is not None and view.mode == "fallback"
    assert view.fallback_reason == "mandatory current and pinned groups exceed the hard message budget"
    assert len(view.supplements) == 12
    assert not any(item.is_supplement for item in view.items) and "retrieval" not in view.totals.by_kind
    assert "Supplements         12 dropped by the fallback" in explain_lines(view)
    _assert_agree(final)
    assert all(
        r.why == f"planner fell back to Pi's context: {view.fallback_reason}"
        for r in final.retrieval.rows  # type: ignore[union-attr]
        if r.candidate.status == "selected"
    )


def test_oversized_exclusions_leave_supplement_groups_out(tmp_path: Path) -> None:
    # The demo's evidence planned under a 700-token tail and a 600-token retrieval cap: the 778-,
    # 1,173- and 755-token evidence groups are excluded turns >= the tail limit, but supplements,
    # which DS4 does not count as oversized turns (spec §3.12).
    _, _, final = _run(DEMO)
    supplements = final.retrieval.supplements  # type: ignore[union-attr]
    snapshot = LiveSession(DEMO).refresh()
    assert snapshot is not None
    view = LivePlanner(_config({"recentTailTokens": 700, "maxRetrievedHistoryTokens": 600})).plan(snapshot, supplements)
    planning = view.plan.planning
    assert view.mode == "managed" and planning.recent_tail_token_limit == 700
    excluded = {i.entry_id: i.tokens for i in view.items if i.is_supplement and not i.included}
    assert (excluded["3b03bd69"], excluded["cf7be21e"], excluded["3a84bdc7"]) == (778, 1173, 755)
    assert len(view.oversized_exclusions) == planning.oversized_turn_exclusions
    assert all(not g.id.startswith(tuple(f"group:{i}-" for i in range(39, 51))) for g in view.oversized_exclusions)
    assert 0 < sum(i.tokens for i in view.items if i.is_supplement and i.included) <= 600


def _appended(source: Path, tmp_path: Path, first: int) -> list[Snapshot]:
    lines = source.read_bytes().splitlines(keepends=True)
    path = tmp_path / source.name
    path.write_bytes(b"".join(lines[:first]))
    live = LiveSession(path)
    snapshots = [live.refresh()]
    with path.open("ab") as f:
        for line in lines[first:]:
            f.write(line)
            f.flush()
            snapshots.append(live.refresh())
    return [s for s in snapshots if s is not None]


def _without_timings(view: PlanView) -> PlanView:
    return dataclasses.replace(view, duration_ms=0.0, planner_ms=0.0, estimated_messages=0)


def test_alternating_nominal_and_supplemented_plans_equal_cold_plans(tmp_path: Path) -> None:
    """One `LivePlanner` re-planning each appended line twice (nominal, then with the demo's
    evidence) gives the cold planner's plans, estimates only the new messages, and keeps the
    supplemented grouping between supplemented plans of one turn."""
    _, _, final = _run(DEMO)
    supplements: tuple[SupplementalMessage, ...] = final.retrieval.supplements  # type: ignore[union-attr]
    planner = LivePlanner()
    previous_count = None
    previous: PlanView | None = None
    extended = 0
    snapshots = _appended(DEMO, tmp_path, 40)
    assert len(snapshots) == 57
    for snapshot in snapshots:
        nominal = planner.plan(snapshot)
        supplemented = planner.plan(snapshot, supplements)
        assert supplemented.estimated_messages == 0  # the nominal plan estimated the new messages
        count = nominal.plan.planning.original_message_count
        if previous_count is not None and count >= previous_count:  # an append (not the compaction)
            assert nominal.estimated_messages == count - previous_count
        previous_count = count
        assert _without_timings(nominal) == _without_timings(LivePlanner().plan(snapshot))
        cold = LivePlanner().plan(snapshot, supplements)
        assert _without_timings(supplemented) == _without_timings(cold)
        assert supplemented.plan.planning.original_message_count == count
        # Two managed plans of one request (the evidence at the same place): the later one only
        # grouped the appended messages, so untouched groups are the same objects. (A plan with
        # an in-flight tool call falls back to the native messages, spec §3.8.)
        if previous is not None and previous.mode == supplemented.mode == "managed":
            if _insertion(previous) == _insertion(supplemented):
                assert supplemented.plan.groups[0] is previous.plan.groups[0]
                extended += 1
        previous = supplemented
    assert extended == 9


def _insertion(view: PlanView) -> int:
    return next(i for i, source in enumerate(view.plan.planned_sources) if isinstance(source, str))


def test_no_user_message_drops_supplements(sample01: Path) -> None:
    snapshot = LiveSession(sample01).refresh()
    assert snapshot is not None
    evidence = SupplementalMessage(
        "retrieval:x", {"role": "user", "content": "quoted", "timestamp": 0}, "retrieval", (), 85.0, "Historical evidence: x"
    )
    # A supplement without source ids is dropped (spec §3.1 step 2): the plan is the nominal one.
    view = LivePlanner().plan(snapshot, [evidence])
    assert view.supplements == (evidence,)
    nominal = LivePlanner().plan(snapshot)
    assert view.items == nominal.items and view.totals == nominal.totals


@pytest.mark.parametrize("name", ["99-large", "03-compaction"])
def test_shared_sessions_totals_equal_items_with_evidence(shared_dir: Path, name: str) -> None:
    _, first, final = _run(shared_dir / "sessions-pi" / f"{name}.jsonl")
    view = final.plan
    assert view is not None and view.mode == "managed"
    evidence = [i for i in view.items if i.is_supplement]
    assert evidence and all(i.kind == "retrieval" for i in evidence)
    assert view.totals.estimated_input_tokens == sum(i.tokens for i in view.items if i.included)
    assert view.totals.excluded_tokens == sum(i.tokens for i in view.items if not i.included)
    assert view.totals.by_kind["retrieval"] == sum(i.tokens for i in evidence if i.included)
    assert first.plan is not None
    assert view.totals.estimated_input_tokens == first.plan.totals.estimated_input_tokens + view.totals.by_kind["retrieval"]
    _assert_agree(final)
    if name == "99-large":
        # 8 evidence items (1,066 tokens) next to the rescued 24,884-token predecessor.
        assert len(evidence) == 8 and view.totals.by_kind["retrieval"] == 1_066
        assert view.rescued_predecessor is not None and view.rescued_predecessor.tokens == 24_884
        assert view.totals.estimated_input_tokens == 50_464


def _slow_excluded_entry_ids(plan: PlanView) -> frozenset[str]:
    """`PlanView.excluded_entry_ids` by its definition, on the made manifest items."""
    items = plan.items
    sent = {i.entry_id for i in items if i.included and i.entry_id and i.message_index is not None}
    return frozenset(i.entry_id for i in items if not i.included and i.entry_id and i.entry_id not in sent)


def test_map_marks_come_without_making_the_manifest(tmp_path: Path, shared_dir: Path) -> None:
    """A re-plan does not make its manifest items (one per message); the map's marks
    (`excluded_entry_ids`) come from the plan's items and the planned messages' entry ids, and
    equal the definition on the made items: with retrieval evidence spliced in (the demo), and on
    every real Pi sample (compactions, branches, Pi's own exclusions)."""
    paths = [DEMO] + sorted((shared_dir / "sessions-pi").glob("0*.jsonl"))
    checked = 0
    for path in paths:
        copy = tmp_path / path.name
        copy.write_bytes(path.read_bytes())
        seen: set[int] = set()  # a first paint and its final plan may share one manifest (no evidence)
        for derived in [u for u in SessionPipeline(copy).updates(now=0) if isinstance(u, Derived)]:
            plan = derived.plan
            if plan is None or id(plan.manifest) in seen:
                continue
            seen.add(id(plan.manifest))
            assert not plan.manifest.items.made  # not made by the plan, the cache view or retrieval
            fast = plan.excluded_entry_ids
            assert not plan.manifest.items.made  # nor by the marks
            assert fast == _slow_excluded_entry_ids(plan)
            checked += 1
    assert checked >= len(paths)
