"""The view model (`ds4tui.viewmodel`) on real Pi sessions: one number per item everywhere it
appears (legend, turns, manifest), its estimator and calibration, overlays, reuse on append."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from ds4sessions.derive.pipeline import Derived, SessionPipeline
from ds4tui import viewmodel as vm


def _open(path: Path) -> tuple[SessionPipeline, object, Derived | None]:
    pipeline = SessionPipeline(path, retrieval=False)
    snap = derived = None
    for update in pipeline.updates(now=0):
        if isinstance(update, Derived):
            derived = update
        else:
            snap = update
    return pipeline, snap, derived


def test_no_textual_or_rich_in_the_view_model() -> None:
    tree = ast.parse(Path(vm.__file__).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert not {m for m in imported if m and m.split(".")[0] in ("textual", "rich")}


def test_loading_before_a_snapshot() -> None:
    model = vm.build(None)
    assert model.header.state == "loading" and model.turns == () and model.legend is None


def test_sample01_numbers(sample01: Path) -> None:
    _, snap, derived = _open(sample01)
    model = vm.build(snap, derived)
    h = model.header
    assert (h.state, h.used, h.measured, h.estimator, h.window) == ("ready", 5089, True, "cl100k", 200_000)
    assert h.name == "Fix 404 for unknown widget ids" and h.cwd_name == "widget-service" and h.problems == 0
    # calibration: the provider's 5,089 over our cl100k estimate of 3,538
    assert model.calibration.estimator == "cl100k"
    assert model.calibration.factor == pytest.approx(5089 / 3538)
    rows = {r.id: r for r in model.legend.rows}
    assert rows["system_prompt"].tokens.raw == 632 and rows["tool_results"].tokens.raw == 1466
    assert rows["tools"].tokens.raw == 625 and dict(rows["tools"].children)["edit"].raw == 248
    assert rows["unattributed"].tokens == vm.Tokens(1551, "cl100k")  # provider − estimate: not calibrated
    calibrated = sum(r.tokens.calibrated for r in model.legend.rows if r.tokens.is_calibrated)
    assert abs(calibrated - 5089) <= len(model.legend.rows)  # calibrated rows add up to the provider's count
    assert [(t.key, t.index, t.tool_calls, t.tokens.raw) for t in model.turns] == [
        ("0", 0, 0, 1257), ("1", 1, 6, 1917), ("13", 2, 0, 264), ("15", 3, 1, 100),
    ]
    assert all(t.plan == "kept" for t in model.turns)
    assert model.map.overlays.cached_end == 18 and model.map.window == 200_000


def test_one_number_per_item_everywhere(sample01: Path) -> None:
    """A message's figure in the manifest is the snapshot's cl100k count (as in the legend and
    the turn rows), not the planner's chars-v1 count; system prompt and tools match the legend."""
    _, snap, derived = _open(sample01)
    model = vm.build(snap, derived)
    manifest = {r.key: r for r in model.manifest}
    assert manifest["pi:system-prompt"].tokens.raw == 632 and manifest["pi:system-prompt"].planner_tokens == 719
    assert manifest["tool:edit"].tokens.raw == 248 and manifest["tool:edit"].planner_tokens == 299
    assert manifest["0e54e3c5#0"].tokens == vm.Tokens(344, "cl100k", model.calibration.factor)
    assert manifest["0e54e3c5#0"].planner_tokens == 330
    per_message = snap.best.message_tokens
    for row in model.manifest:
        if row.item.message_index is not None:
            assert row.tokens.raw == per_message[row.item.message_index]
            assert row.tokens.estimator == "cl100k"
    for turn in model.turns:  # a turn's figure is the sum of its messages' figures
        in_manifest = [r.tokens.raw for r in model.manifest
                       if r.item.message_index is not None and turn.first_message <= r.item.message_index <= turn.last_message]
        if turn.index:  # turn 0 holds the system prompt, which the manifest lists separately
            assert sum(in_manifest) == turn.tokens.raw
    rows = {r.id: r for r in model.legend.rows}
    tools = sum(r.tokens.raw for r in model.manifest if r.key.startswith("tool:"))
    assert tools == rows["tools"].tokens.raw == 625


def test_first_paint_is_chars_v1(sample01: Path) -> None:
    pipeline = SessionPipeline(sample01, retrieval=False)
    first = next(iter(pipeline.updates(now=0)))
    model = vm.build(first)
    assert model.header.estimator == "chars-v1" and model.calibration.estimator == "chars-v1"
    assert {r.tokens.estimator for r in model.legend.rows} == {"chars-v1"}
    assert model.manifest == () and model.plan is None


def test_pins_and_plan_states_on_a_branching_session(shared_dir: Path) -> None:
    _, snap, derived = _open(shared_dir / "sessions-pi" / "04-tree-branches-labels.jsonl")
    model = vm.build(snap, derived)
    assert model.map.overlays.pinned == frozenset({1, 9})
    assert [(t.key, t.pinned) for t in model.turns] == [("0", False), ("1", True), ("5", True)]
    # entries on the other branch are excluded from the plan but not in the context: no overlay
    assert len(model.excluded_entry_ids) == 16 and model.map.overlays.excluded == frozenset()
    manifest = {r.key: r for r in model.manifest}
    assert manifest["3485e938#0"].tokens.raw == 383 and manifest["3485e938#0"].planner_tokens == 368


def test_rows_are_reused_after_an_append(sample01: Path, tmp_path: Path) -> None:
    lines = sample01.read_bytes().splitlines(keepends=True)
    path = tmp_path / sample01.name
    path.write_bytes(b"".join(lines[:-2]))
    pipeline, snap, derived = _open(path)
    before = vm.build(snap, derived)
    with path.open("ab") as f:
        f.write(b"".join(lines[-2:]))
    snap2 = next(iter(pipeline.updates(now=0)))  # the new snapshot, before its plan
    assert snap2.exact is not None  # a small append: only the exact snapshot (one estimator on screen)
    after = vm.build(snap2, derived, previous=before)
    # the plan of the previous snapshot stays on screen until this one's arrives, and says so
    assert after.plan is before.plan and after.plan_version == before.version < after.version
    assert after.manifest is before.manifest and after.map.overlays is before.map.overlays
    kept = [a for a, b in zip(after.turns, before.turns) if a.key == b.key and a is b]
    assert len(kept) >= len(before.turns) - 1  # only the last turn can change
    assert all(row.plan == "" for row in after.turns[len(kept):] if row.key not in {b.key for b in before.turns})
    exact = [u for u in pipeline.updates(force=True, now=0)]
    snap3 = [u for u in exact if not isinstance(u, Derived)][-1]
    d3 = [u for u in exact if isinstance(u, Derived)][-1]
    m3 = vm.build(snap3, d3)
    m4 = vm.build(snap3, d3, previous=m3)
    assert all(a is b for a, b in zip(m3.turns, m4.turns)) and m4.manifest is m3.manifest
    assert [t.tokens.raw for t in m4.turns] == [1257, 1917, 264, 100]


def test_map_is_calibrated_to_the_provider_count(shared_dir: Path, tmp_path: Path) -> None:
    """The map carries the estimate calibrated to the provider's count (issue 17: up or down),
    the same total as the header and the legend."""
    src = shared_dir / "sessions-pi" / "03-compaction.jsonl"
    path = tmp_path / src.name
    shutil.copy(src, path)
    _, snap, derived = _open(path)
    model = vm.build(snap, derived)
    total = sum(s.tokens for s in model.map.segments if s.category not in ("free", "unattributed"))
    assert snap.provider is not None and snap.best.estimate != snap.provider.context_tokens
    assert abs(total - snap.provider.context_tokens) <= len(model.map.segments)
    assert model.header.used == model.legend.calibrated.used == snap.provider.context_tokens == 2561
