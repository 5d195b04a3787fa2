"""The manifest view in a small app of its own: rows, filter, sort, selection message, diff,
and SVG snapshots."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from textual.app import App, ComposeResult
from textual.widgets import DataTable, Static

from ds4core.config import Ds4Config, apply_source
from ds4sessions.derive.ds4config import LoadedDs4Config
from ds4sessions.agents.pi.live import open_snapshot
from ds4sessions.derive.planning import LivePlanner, PlanView
from ds4tui.widgets.manifest import ManifestView
from tests.conftest import FIXTURES

SAMPLE = FIXTURES / "pi" / "01-tools-and-image.jsonl"


def _plan(path: Path, context: dict | None = None) -> PlanView:
    config = None
    if context is not None:
        ds4, _, applied = apply_source(Ds4Config(), {"context": context}, "test.json")
        assert applied
        config = LoadedDs4Config(ds4)
    view = LivePlanner(config).plan(open_snapshot(path))
    # Timings vary from run to run; fix them so snapshots are stable.
    return dataclasses.replace(view, duration_ms=2.5, planner_ms=0.4)


TIGHT = {"recentTailTokens": 1500, "rescueImmediatePredecessor": False}


class ManifestApp(App):
    """Shows `view` (and `previous` first, for the diff)."""

    def __init__(self, view: PlanView, previous: PlanView | None = None) -> None:
        super().__init__()
        self.plan_view = view
        self.previous = previous
        self.selected: list[str | None] = []

    def compose(self) -> ComposeResult:
        yield ManifestView(id="manifest")

    def on_mount(self) -> None:
        manifest = self.query_one(ManifestView)
        if self.previous is not None:
            manifest.show(self.previous)
        manifest.show(self.plan_view)
        self.query_one(DataTable).focus()

    def on_manifest_view_entry_selected(self, message: ManifestView.EntrySelected) -> None:
        self.selected.append(message.entry_id)


async def test_rows_filter_sort_and_selection() -> None:
    view = _plan(SAMPLE, TIGHT)
    app = ManifestApp(view)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        manifest = app.query_one(ManifestView)
        table = app.query_one(DataTable)
        assert table.row_count == len(view.items) == len(manifest.rows)
        assert [i.key for i in manifest.rows] == [i.key for i in view.items]
        assert manifest.rows[0].kind == "system"
        excluded = [i for i in view.items if not i.included]
        assert excluded, "the tight config must exclude something"

        # Highlighting a row posts EntrySelected with its entry id.
        await pilot.press("down", "down", "down", "down", "down")
        await pilot.pause()
        assert app.selected[-1] == manifest.rows[5].entry_id is not None

        # `/` focuses the filter; typing filters by state, kind, entry, group or reason.
        await pilot.press("slash")
        assert app.focused is app.query_one("#manifest-filter")
        await pilot.press(*"excluded outside")
        await pilot.pause()
        assert [i.key for i in manifest.rows] == [i.key for i in excluded if "excluded outside" in i.reason.lower()]
        assert table.row_count == len(manifest.rows) > 0
        await pilot.press("escape")
        await pilot.pause()
        assert table.row_count == len(view.items)

        # `s` cycles the sort: tokens (largest first), then score; `S` reverses (`r` stays the
        # app's Refresh: the manifest does not shadow it).
        assert "r" not in {b.key for b in ManifestView.BINDINGS}
        table.focus()
        await pilot.press("s")
        await pilot.pause()
        tokens = [i.tokens for i in manifest.rows]
        assert tokens == sorted(tokens, reverse=True)
        await pilot.press("S")
        await pilot.pause()
        assert [i.tokens for i in manifest.rows] == sorted(tokens)
        await pilot.press("s")
        await pilot.pause()
        scores = [i.score if i.score is not None else -1.0 for i in manifest.rows]
        assert scores == sorted(scores, reverse=True)

        # Clicking a header sorts by that column; clicking it again reverses.
        x = 0
        for key in ("state", "kind"):
            x += table.columns[key].get_render_width(table)  # type: ignore[index]
        await pilot.click(DataTable, offset=(x + 2, 0))
        await pilot.pause()
        entries = [i.entry_id or i.key for i in manifest.rows]
        assert entries == sorted(entries)
        await pilot.click(DataTable, offset=(x + 2, 0))
        await pilot.pause()
        assert [i.entry_id or i.key for i in manifest.rows] == sorted(entries, reverse=True)

        # Map -> table sync: select_entry moves the cursor without echoing a message.
        before = len(app.selected)
        target = excluded[0].entry_id
        assert target is not None
        assert manifest.select_entry(target)
        await pilot.pause()
        assert manifest.rows[table.cursor_row].entry_id == target
        assert len(app.selected) == before
        assert not manifest.select_entry("no-such-entry")


async def test_explain_panel_and_diff() -> None:
    previous = _plan(SAMPLE)
    view = _plan(SAMPLE, TIGHT)
    app = ManifestApp(view, previous)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        explain = str(app.query_one("#manifest-explain", Static).render())
        assert "DS4 Context Plan" in explain
        assert "Recent-tail limit    1,500" in explain
        assert "DS4 Context Tokens (managed mode)" in explain
        diff_text = str(app.query_one("#manifest-diff", Static).render())
        left = view.diff(previous).left
        assert left and f"Left: {len(left)} item(s), {sum(c.tokens for c in left):,} tok" in diff_text
        assert "Entered" not in diff_text


def test_snapshot_tight_plan_with_diff(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = ManifestApp(_plan(SAMPLE, TIGHT), _plan(SAMPLE))
    assert snap_compare(app, terminal_size=(140, 40))


def test_snapshot_filtered_and_sorted(snap_compare) -> None:  # type: ignore[no-untyped-def]
    view = _plan(FIXTURES / "pi" / "04-tree-branches-labels.jsonl", {"recentTailTokens": 0, "rescueImmediatePredecessor": False})

    async def filter_and_sort(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("slash", *"pin")
        await pilot.press("enter", "s")
        await pilot.pause()

    assert snap_compare(ManifestApp(view), terminal_size=(120, 32), run_before=filter_and_sort)


def test_snapshot_long_manifest_counts_the_rows_past_the_cap(snap_compare, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The note under the table when a plan has more rows than the table holds (`MAX_ROWS`)."""
    import ds4tui.widgets.manifest as manifest_module

    monkeypatch.setattr(manifest_module, "MAX_ROWS", 8)
    assert snap_compare(ManifestApp(_plan(SAMPLE, TIGHT)), terminal_size=(120, 24))


DEMO = Path(__file__).resolve().parents[2] / "ds4tui" / "data" / "demo-session.jsonl"


def _demo_steps(tmp_path: Path) -> tuple[PlanView, PlanView, PlanView]:
    """The demo without its last line through the pipeline (final plan), then with it: the
    first paint (retrieval pending) and the final plan with the retrieval evidence."""
    from ds4sessions.derive.pipeline import SessionPipeline

    lines = DEMO.read_bytes().splitlines(keepends=True)
    path = tmp_path / DEMO.name
    path.write_bytes(b"".join(lines[:-1]))
    pipe = SessionPipeline(path)
    *_, before = list(pipe.updates(now=0))
    with path.open("ab") as f:
        f.write(lines[-1])
    *_, first, final = list(pipe.updates(now=0))
    fixed = [dataclasses.replace(d.plan, duration_ms=2.5, planner_ms=0.4) for d in (before, first, final)]
    return fixed[0], fixed[1], fixed[2]


async def test_retrieval_rows_and_diff_against_the_previous_final_plan(tmp_path: Path) -> None:
    before, pending, final = _demo_steps(tmp_path)
    app = ManifestApp(final)
    async with app.run_test(size=(140, 40)) as pilot:
        manifest = app.query_one(ManifestView)
        for view in (before, pending, final):  # what the dashboard shows on two tail updates
            manifest.show(view)
        await pilot.pause()
        diff_text = str(app.query_one("#manifest-diff", Static).render())
        # Compared with the previous final plan, not with its own first paint.
        assert "Estimated input: 15,629 → 15,730 (+101)" in diff_text
        assert "1 × included → absent, 110 tok: retrieval:924f2aea" in diff_text
        explain = str(app.query_one("#manifest-explain", Static).render())
        assert "Historical retrieval   4,909" in explain
        assert "Retrieval evidence  12 selected (4,909 tokens), 0 excluded" in explain

        # A retrieval row selects the entry its evidence quotes.
        await pilot.press("slash", *"retrieval:3b03")
        await pilot.press("enter")
        await pilot.pause()
        assert [i.key for i in manifest.rows] == ["retrieval:3b03bd69"]
        assert manifest.select_entry("3b03bd69")
        detail = str(app.query_one("#manifest-detail", Static).render())
        assert detail.startswith("included · retrieval · retrieval:3b03bd69 from 3b03bd69 (user) · 778 tok")


def test_snapshot_retrieval_evidence(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    before, _, final = _demo_steps(tmp_path)

    async def sort_by_kind(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("s", "s", "s")  # tokens, score, kind
        await pilot.pause()

    assert snap_compare(ManifestApp(final, before), terminal_size=(140, 40), run_before=sort_by_kind)


async def test_a_long_manifest_holds_the_first_rows_and_counts_the_rest(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The table holds at most `MAX_ROWS` rows (40,000 items of a 10,000-turn plan froze the
    screen for seconds at every plan); the rest are counted under it, and a filter or a sort
    brings any row into the first ones."""
    from textual.widgets import Static

    import ds4tui.widgets.manifest as manifest_module

    monkeypatch.setattr(manifest_module, "MAX_ROWS", 8)
    view = _plan(SAMPLE, TIGHT)
    assert len(view.items) > 8
    app = ManifestApp(view)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        manifest = app.query_one(ManifestView)
        table = app.query_one(DataTable)
        more = app.query_one("#manifest-more", Static)
        assert table.row_count == 8 and [r.key for r in manifest.rows] == [i.key for i in view.items[:8]]
        assert more.display and f"8 of {len(view.items):,} rows shown" in str(more.render())
        last = view.items[-1]
        await pilot.press("slash", *(last.entry_id or last.key))
        await pilot.pause()
        assert last.key in [r.key for r in manifest.rows]
        if table.row_count < 8:  # the filter left fewer rows than the table holds: nothing is counted
            assert not more.display


async def test_a_slow_manifest_is_redrawn_at_most_every_few_draw_times() -> None:
    """While plans stream in, a manifest that took long to draw (`SLOW_REDRAW_S`) waits
    `SLOW_REDRAW_GAP` times its draw time before the next redraw, then draws the newest plan
    (the screen answers keys in between: a 10,000-turn manifest took 0.3-0.8 s per plan)."""
    import time

    first, second = _plan(SAMPLE), _plan(SAMPLE, TIGHT)
    app = ManifestApp(first)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        manifest = app.query_one(ManifestView)
        assert manifest.view is first and manifest._pending is None
        manifest._last_cost, manifest._last_drawn = 0.08, time.monotonic()  # as if it took 80 ms
        manifest.show(second)
        assert manifest._pending is not None
        drawn = lambda: [(r.key, r.included) for r in manifest.rows]  # noqa: E731
        assert drawn() != [(i.key, i.included) for i in second.items]  # the two plans differ
        assert drawn() == [(i.key, i.included) for i in first.items]  # not redrawn yet
        manifest.show(second)  # a newer plan while one waits: still one redraw
        await pilot.pause(0.45)
        assert manifest._pending is None and drawn() == [(i.key, i.included) for i in second.items]


class EmptyManifestApp(App):
    """A manifest no plan was shown in yet (the dashboard while a large session is read)."""

    def compose(self) -> ComposeResult:
        yield ManifestView(id="manifest")


async def test_before_the_plan_the_manifest_says_when_it_comes() -> None:
    """'No plan yet.' read as 'there is no plan' for the seconds a large session takes (a new
    user's trial): the placeholder says the plan comes once the session is read."""
    from textual.widgets import Static

    app = EmptyManifestApp()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        text = str(app.query_one("#manifest-explain", Static).render())
        assert text == "No plan yet: DS4 plans once the whole session is read (seconds on a large one)."
        assert app.query_one(DataTable).row_count == 0
