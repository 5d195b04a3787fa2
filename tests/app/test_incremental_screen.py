"""An appended line touches what it changed on screen (issue 10): the turn list keeps the
rendered lines of unchanged turns, the map keeps its cell objects for unchanged rows, and the
plan of the previous snapshot stays until the new one arrives."""

from __future__ import annotations

import json
from pathlib import Path

from ds4tui.app import Ds4App
from ds4tui.widgets.pixel_map import PixelMap
from ds4tui.widgets.turns import TurnList
from tests.app.test_dashboard import settle


def copy_of(sample: Path, tmp_path: Path) -> Path:
    """A copy of `sample` in `tmp_path` (the app may be shown appends to it)."""
    path = tmp_path / sample.name
    path.write_bytes(sample.read_bytes())
    return path


def _reply(parent: str, entry_id: str, text: str) -> bytes:
    entry = {
        "type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-03-02T08:44:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1772441040000},
    }
    return (json.dumps(entry) + "\n").encode()


async def test_an_append_keeps_unchanged_lines_and_cells(sample01: Path, tmp_path: Path) -> None:
    path = copy_of(sample01, tmp_path)
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        turns = app.query_one(TurnList)
        pixel_map = app.query_one(PixelMap)
        before_rows = turns._rows
        before_lines = {key[0]: strip for key, (row, strip) in turns._rendered.items()}
        before_cells = list(pixel_map.cells)
        before_plan = app.view.plan
        leaf = app.snapshot.context.branch_entry_ids[-1]
        with path.open("ab") as f:
            f.write(_reply(leaf, "apptest1", "one more question about the widgets"))
        app.refresh_session()
        for _ in range(200):  # the snapshot first, before its plan
            await pilot.pause(0.01)
            if app.view.version > 0 and len(app.view.turns) == len(before_rows) + 1:
                break
        view = app.view
        assert len(view.turns) == len(before_rows) + 1 and view.turns[-1].plan in ("", "kept")
        # the previous turns (but the last, which an append may extend) are the same row
        # objects, so their lines are not drawn again
        assert all(a is b for a, b in zip(view.turns[:-2], before_rows[:-1]))
        await pilot.pause()
        again = {key[0]: strip for key, (row, strip) in turns._rendered.items()}
        kept = [id(r) for r in before_rows if id(r) in before_lines and id(r) in again]
        assert kept and all(again[k] is before_lines[k] for k in kept)
        # the map: the cells of the old messages are the same objects (MapIndex shares them)
        after_cells = pixel_map.cells
        same = sum(1 for a, b in zip(before_cells, after_cells) if a is b and a.category != "free")
        assert same >= sum(1 for c in before_cells if c.category != "free") - 2
        # the plan: the previous one until this snapshot's arrives, then this snapshot's
        if view.plan_version is not None and view.plan_version < view.version:
            assert view.plan is before_plan
        await settle(pilot, app)
        assert app.view.plan_version == app.view.version


async def test_an_append_repaints_only_the_legend_lines_that_changed(sample01: Path, tmp_path: Path) -> None:
    """The legend, header and inspector keep one rendered strip per line (TextLines): an append
    re-renders only the lines whose text changed and the rest are the same strip objects."""
    from ds4tui.widgets.panels import CategoryList

    path = copy_of(sample01, tmp_path)
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        legend = app.query_one(CategoryList)
        before_texts = [t.plain for t in legend.texts]
        before = list(legend._strips)
        assert len(before) >= 5
        leaf = app.snapshot.context.branch_entry_ids[-1]
        with path.open("ab") as f:
            f.write(_reply(leaf, "apptest2", "a user prompt that adds tokens to the user category " * 20))
        app.refresh_session()
        await settle(pilot, app)
        after_texts = [t.plain for t in legend.texts]
        after = list(legend._strips)
        assert len(after) == len(before) and after_texts != before_texts
        changed = [y for y, (a, b) in enumerate(zip(before_texts, after_texts)) if a != b]
        same = [y for y in range(len(after)) if y not in changed]
        assert changed and same
        # an unchanged line keeps its strip; a changed one got a new one that shows the new text
        assert all(after[y] is before[y] for y in same)
        assert all(after[y] is not before[y] and after[y].text.rstrip() == after_texts[y].rstrip() for y in changed)


async def test_a_hidden_tab_is_drawn_when_shown(sample01: Path, tmp_path: Path) -> None:
    """The manifest, cache, retrieval and diagnostics tabs are not redrawn per append while
    hidden; showing one draws the newest plan / cache view / diagnostics."""
    from ds4tui.widgets.manifest import ManifestView
    from textual.widgets import DataTable

    path = copy_of(sample01, tmp_path)
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        table = app.query_one(ManifestView).query_one(DataTable)
        assert table.row_count == 0 and "manifest" in app.dashboard._stale_tabs  # hidden: not drawn yet
        app.dashboard.action_show_tab("manifest")
        await pilot.pause()
        assert "manifest" not in app.dashboard._stale_tabs
        assert table.row_count == len(app.derived.plan.items) > 0


async def test_the_map_repaints_only_rows_whose_drawing_changed(sample01: Path, tmp_path: Path) -> None:
    """Moving the highlight (it follows the newest message on every append) and changing the
    overlays (plan, cached prefix, cache status) repaint only some rows of the map, and every
    row not repainted draws exactly as before: what Textual keeps of it on screen stays right.
    200 random changes in the "ds4" view (where ▒ and ◆ show), each checked row by row."""
    import random

    path = copy_of(sample01, tmp_path)
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        pixel_map = app.query_one(PixelMap)
        pixel_map.set_view("ds4")
        await pilot.pause()
        messages = len(app.snapshot.context.messages)
        width = pixel_map.size.width
        rows = -(-len(pixel_map.cells) // width)
        assert messages > 10 and rows > 3
        refreshed: list[tuple[object, ...]] = []
        real_refresh = pixel_map.refresh

        def spy(*regions: object, **kwargs: object) -> object:
            refreshed.append(regions)
            return real_refresh(*regions, **kwargs)  # type: ignore[arg-type]

        pixel_map.refresh = spy  # type: ignore[method-assign]
        rng = random.Random(10)
        partial = repainted_rows = 0
        for _ in range(200):
            before = [pixel_map.render_line(y) for y in range(rows)]
            refreshed.clear()
            if rng.random() < 0.5:
                pixel_map.highlight_message(rng.choice([None, *range(messages)]))
            else:
                pixel_map.set_overlays(
                    excluded=frozenset(rng.sample(range(messages), rng.randint(0, 3))),
                    pinned=frozenset(rng.sample(range(messages), rng.randint(0, 2))),
                    cached_end=rng.choice([None, *range(messages + 1)]),
                    cache_status=rng.choice([None, "warm", "expiring", "cold", "unknown"]),
                )
            if any(not regions for regions in refreshed):
                continue  # the whole map was repainted (the border's cache legend changed)
            partial += 1
            repainted = {region.y for regions in refreshed for region in regions}  # type: ignore[attr-defined]
            repainted_rows += len(repainted)
            after = [pixel_map.render_line(y) for y in range(rows)]
            assert [y for y in range(rows) if y not in repainted and after[y] != before[y]] == []
        assert partial > 100 and 0 < repainted_rows < partial * rows / 2


async def test_turn_numbers_past_9999_keep_every_digit(sample01: Path, tmp_path: Path) -> None:
    """The turn list's number column widens for turn 10,000 and on (it was 4 cells: 10,090 was
    drawn ` 1008`; found by a new-user trial on a 10,000-turn session)."""
    import dataclasses

    path = copy_of(sample01, tmp_path)
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        turns = app.query_one(TurnList)
        view = app.view
        big = dataclasses.replace(view, turns=tuple(dataclasses.replace(r, index=10_087 + k) for k, r in enumerate(view.turns)))
        turns.show(big)
        await pilot.pause()
        last = len(big.turns) - 1
        line = "".join(seg.text for seg in turns.render_line(last + 1 - int(turns.scroll_offset.y)))
        assert f"{10_087 + last}" in line, line
        assert turns._widths[0] == 5


async def test_the_inspector_follows_the_newest_message_unless_moved(sample01: Path, tmp_path: Path) -> None:
    """While following, the inspector shows the newest message after each append (it stayed on
    the one that was newest at start: found by a new-user trial); a message the user selected
    stays selected."""
    path = copy_of(sample01, tmp_path)
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        assert app.dashboard.following and app.dashboard._selected == len(app.snapshot.context.messages) - 1
        for k, moved in ((1, False), (2, True)):
            if moved:
                app.dashboard._select_message(0, sync_turns=True)
            leaf = app.snapshot.context.branch_entry_ids[-1]
            count = len(app.snapshot.context.messages)
            with path.open("ab") as f:
                f.write(_reply(leaf, f"follow{k}", f"question {k}"))
            app.refresh_session()
            for _ in range(200):
                await pilot.pause(0.01)
                if len(app.snapshot.context.messages) > count:
                    break
            newest = len(app.snapshot.context.messages) - 1
            assert app.dashboard._selected == (0 if moved else newest)


def test_snapshot_turn_numbers_past_9999(snap_compare, sample01: Path) -> None:  # type: ignore[no-untyped-def]
    """The turn list with five-digit turn numbers (the number column widens to fit them)."""
    import dataclasses

    from textual.app import App, ComposeResult

    from ds4sessions.agents.pi.live import open_snapshot
    from ds4tui import viewmodel

    view = viewmodel.build(open_snapshot(sample01, exact=True))
    big = dataclasses.replace(view, turns=tuple(dataclasses.replace(r, index=10_087 + k) for k, r in enumerate(view.turns)))

    class TurnsApp(App):
        def compose(self) -> ComposeResult:
            yield TurnList()

        def on_mount(self) -> None:
            # after the first layout, as the dashboard shows its first snapshot (the columns
            # are fitted to the widget's width)
            self.call_after_refresh(self.query_one(TurnList).show, big)

    assert snap_compare(TurnsApp(), terminal_size=(100, 8))
