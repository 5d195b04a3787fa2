"""`LivePlanner` reuse between plans (issue 3): a planner kept across tail updates gives exactly the
plan and manifest a fresh planner gives, on Pi-written sessions appended line by line, across
compactions and branch moves, while estimating only the new messages and keeping untouched
groups."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ds4sessions.agents.pi.live import LiveSession, Snapshot
from ds4sessions.derive.planning import LivePlanner, PlanView

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pi" / "01-tools-and-image.jsonl"


def _without_timings(view: PlanView) -> PlanView:
    return dataclasses.replace(view, duration_ms=0.0, planner_ms=0.0, estimated_messages=0)


def _assert_same_as_cold(warm: PlanView, snapshot: Snapshot) -> None:
    cold = LivePlanner().plan(snapshot)
    assert _without_timings(warm) == _without_timings(cold)
    assert warm.items == cold.items and warm.totals == cold.totals
    assert warm.selected_groups == cold.selected_groups and warm.excluded_groups == cold.excluded_groups


def _appended(source: Path, tmp_path: Path, first: int, step: int) -> list[Snapshot]:
    """Snapshots of `source` written `first` lines at once, then `step` lines at a time."""
    lines = source.read_bytes().splitlines(keepends=True)
    path = tmp_path / source.name
    path.write_bytes(b"".join(lines[:first]))
    live = LiveSession(path)
    snapshots = [live.refresh()]
    with path.open("ab") as f:
        for start in range(first, len(lines), step):
            f.write(b"".join(lines[start : start + step]))
            f.flush()
            snapshots.append(live.refresh())
    return [s for s in snapshots if s is not None]


def test_fixture_appended_line_by_line(tmp_path: Path) -> None:
    planner = LivePlanner()
    previous: PlanView | None = None
    for snapshot in _appended(FIXTURE, tmp_path, 3, 1):
        view = planner.plan(snapshot)
        _assert_same_as_cold(view, snapshot)
        natives = [m for m in snapshot.context.messages if m.get("role") != "system"]
        if previous is not None:
            # Only the appended messages are estimated.
            assert view.estimated_messages == len(natives) - previous.plan.planning.original_message_count
        previous = view
    assert previous is not None and previous.plan.planning.original_message_count == 18


@pytest.mark.parametrize(
    "name",
    ["02-abort-error-bash", "03-compaction", "04-tree-branches-labels", "05-extensions-models", "06-fork", "07-old-scope-0.73", "08-legacy-v1"],
)
def test_pi_samples_appended_line_by_line(shared_dir: Path, tmp_path: Path, name: str) -> None:
    planner = LivePlanner()
    for snapshot in _appended(shared_dir / "sessions-pi" / f"{name}.jsonl", tmp_path, 2, 1):
        _assert_same_as_cold(planner.plan(snapshot), snapshot)


def test_compaction_line_rebuilds_and_later_appends_extend(shared_dir: Path, tmp_path: Path) -> None:
    source = shared_dir / "sessions-pi" / "03-compaction.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    compaction = next(i for i, line in enumerate(lines) if b'"type":"compaction"' in line)
    snapshots = _appended(source, tmp_path, compaction, 1)
    planner = LivePlanner()
    before = planner.plan(snapshots[0])
    at = planner.plan(snapshots[1])  # the compaction entry itself
    assert snapshots[1].context.messages[1]["role"] == "compactionSummary"
    _assert_same_as_cold(at, snapshots[1])
    # The compaction replaced the context's prefix; the estimates of the kept messages were reused.
    assert at.estimated_messages < at.plan.planning.original_message_count
    assert at.plan.planning.original_message_count < before.plan.planning.original_message_count
    after = planner.plan(snapshots[2])
    _assert_same_as_cold(after, snapshots[2])
    assert after.estimated_messages == 1
    # Groups the appended message does not touch are the previous plan's objects.
    assert after.plan.groups[0] is at.plan.groups[0]


def test_99_large_in_chunks_across_its_compactions(shared_dir: Path, tmp_path: Path) -> None:
    source = shared_dir / "sessions-pi" / "99-large.jsonl"
    total = len(source.read_bytes().splitlines())
    planner = LivePlanner()
    compactions = 0
    snapshots = _appended(source, tmp_path, 40, 97)
    for snapshot in snapshots:
        view = planner.plan(snapshot)
        _assert_same_as_cold(view, snapshot)
        compactions += snapshot.context.messages[1].get("role") == "compactionSummary"
    assert compactions > 0
    # ... and its last lines one at a time (another reader: equal, not identical, messages):
    # each plan estimates at most the one new message.
    (tmp_path / "tail").mkdir()
    tail = _appended(source, tmp_path / "tail", total - 12, 1)
    _assert_same_as_cold(planner.plan(tail[0]), tail[0])
    for snapshot in tail[1:]:
        view = planner.plan(snapshot)
        _assert_same_as_cold(view, snapshot)
        assert view.estimated_messages <= 1


def test_unchanged_snapshot_replans_identically(sample01: Path) -> None:
    from ds4sessions.agents.pi.live import open_snapshot

    snapshot = open_snapshot(sample01)
    planner = LivePlanner()
    first = planner.plan(snapshot)
    second = planner.plan(snapshot)
    assert _without_timings(first) == _without_timings(second)
    assert second.estimated_messages == 0
    assert all(a is b for a, b in zip(first.plan.groups, second.plan.groups))


def test_group_lists_are_made_when_read_and_equal_a_cold_plans(tmp_path: Path) -> None:
    """The explain panel's group lists (`selected_groups`, ...) are not built by a re-plan (one
    `GroupRef` per group: ~1.5 ms of each re-plan at 1,000 groups); read later, even after
    newer plans were made, they are those of their own plan, and an unchanged group keeps its
    `GroupRef` object from one read plan to the next."""
    planner = LivePlanner()
    views = [planner.plan(snap) for snap in _appended(FIXTURE, tmp_path, 12, 1)]
    assert all(v.group_refs is not None and not v.group_refs.made for v in views)
    (tmp_path / "again").mkdir()
    snapshots = _appended(FIXTURE, tmp_path / "again", 12, 1)
    for view, snap in zip(views[:3], snapshots[:3]):  # the oldest first, after all were planned
        cold = LivePlanner().plan(snap)
        assert (view.selected_groups, view.excluded_groups, view.oversized_exclusions, view.rescued_predecessor) == \
            (cold.selected_groups, cold.excluded_groups, cold.oversized_exclusions, cold.rescued_predecessor)
        assert view.selected_groups  # a user turn is always selected
    fresh = LivePlanner()
    a = fresh.plan(snapshots[-2])
    first = {g.id: g for g in a.selected_groups + a.excluded_groups}
    b = fresh.plan(snapshots[-1])
    reused = [g for g in b.selected_groups + b.excluded_groups if first.get(g.id) is g]
    assert reused, "no GroupRef was reused between consecutive plans"


def test_pi_excluded_rows_with_duplicate_ids_appended_line_by_line(shared_dir: Path, tmp_path: Path) -> None:
    """Issue 32: the planner keeps no set of every context entry id while the session has no
    duplicate id; the rows of the entries Pi leaves out stay those of a cold plan when one
    appears (an entry re-using an id of the context, and one re-using an id off it) and after."""
    import json

    source = shared_dir / "sessions-pi" / "04-tree-branches-labels.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    entries = [json.loads(line) for line in lines[1:] if line.strip()]
    leaf = entries[-1]["id"]
    on_context = [e["id"] for e in entries if e.get("type") == "message"][1]
    more = []
    for n, reused in enumerate([on_context, "zz-new-1", leaf, "zz-new-2"]):
        entry = {"type": "message", "id": reused, "parentId": leaf, "timestamp": "2026-01-02T00:00:00.000Z",
                 "message": {"role": "user", "content": [{"type": "text", "text": f"again {n}"}], "timestamp": 1767312000000 + n}}
        more.append((json.dumps(entry) + "\n").encode())
        leaf = reused
    path = tmp_path / "dup.jsonl"
    path.write_bytes(b"".join(lines) + b"".join(more))
    (tmp_path / "out").mkdir()
    planner = LivePlanner()
    excluded, kept = 0, []
    for snapshot in _appended(path, tmp_path / "out", 2, 1):
        view = planner.plan(snapshot)
        _assert_same_as_cold(view, snapshot)
        excluded = max(excluded, sum(1 for i in view.items if i.kind == "pi-excluded"))
        kept.append(planner._pi_excluded._in_context is not None)
    assert excluded > 0 and not kept[0] and kept[-1]  # (the set only once an id came twice)
