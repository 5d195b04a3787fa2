"""The turn list keeps its newest turn in view: no horizontal scroll bar hides the last row
(lines are cut to the width without the vertical bar), at 80×24 as at 160×48."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ds4tui.app import Ds4App
from ds4tui.widgets.turns import TurnList
from tests.app.test_dashboard import settle
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from bench_planner import synthetic_session  # noqa: E402


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_newest_turn_is_on_screen(tmp_path: Path, size: tuple[int, int]) -> None:
    path = tmp_path / "s.jsonl"
    synthetic_session(path, 60)
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app, derived=False)
        await pilot.pause(0.1)
        turns = app.query_one(TurnList)
        assert not turns.show_horizontal_scrollbar
        assert turns.cursor_row == turns.row_count - 1
        visible = [turns.render_line(y).text for y in range(turns.scrollable_content_region.height)]
        last = turns.get_row_at(turns.row_count - 1)[0]
        assert any(line.split()[:1] == [str(last)] for line in visible), (last, visible[-3:])
        assert all(len(line) <= turns.scrollable_content_region.width for line in visible)


class _FirstShow(Ds4App):
    """Notes, once the first snapshot's frame is painted, where the turn list's cursor is."""

    import ds4tui.app as _module

    CSS_PATH = Path(_module.__file__).parent / Ds4App.CSS_PATH
    seen: list = []

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        show = self.dashboard._show  # (the dashboard screen renders each view)

        def recording(message) -> None:  # type: ignore[no-untyped-def]
            first = self.snapshot is None
            show(message)
            self._shown(first)

        self.dashboard._show = recording  # type: ignore[method-assign]

    def _shown(self, first: bool) -> None:
        if first:
            turns = self.query_one(TurnList)
            note = lambda: self.seen.append((turns.cursor_row, turns.row_count, int(turns.scroll_offset.y), turns.scrollable_content_region.height))  # noqa: E731
            self.call_after_refresh(note)  # (runs after the list's own after-refresh scroll)


async def test_the_first_snapshot_shows_its_newest_turn(tmp_path: Path) -> None:
    """Rows added in the frame that moves the cursor are not laid out yet: the list must still
    end up on the newest turn in that first paint (it stayed at the top, turns 1–27)."""
    path = tmp_path / "s.jsonl"
    synthetic_session(path, 3000)
    app = _FirstShow(path, watch=False, retrieval=False)
    app.seen = []
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app, derived=False)
        cursor, rows, top, height = app.seen[0]
        assert cursor == rows - 1 and top <= cursor < top + height - 1 and top > 0, app.seen[0]


async def test_the_map_cursor_stays_on_the_selected_message_when_the_layout_changes(tmp_path: Path) -> None:
    """A new layout (here a resize; while a large file is read, each slice) kept the cursor's
    cell index, so the cursor, and with the next key the inspector, jumped to another message
    (a new-user trial)."""
    from ds4tui.widgets.pixel_map import PixelMap

    path = tmp_path / "s.jsonl"
    synthetic_session(path, 60)
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app, derived=False)
        pixel_map = app.query_one(PixelMap)
        pixel_map.focus()
        await pilot.pause()
        for _ in range(7):
            await pilot.press("right")
        await pilot.pause()
        selected = app.dashboard._selected
        assert selected is not None and pixel_map._cells[pixel_map.cursor].message_index == selected
        await pilot.resize_terminal(110, 40)
        await pilot.pause(0.2)
        assert app.dashboard._selected == selected
        # its first cell, or (a message too small for a cell at the new scale) the last one before it
        shown = [c.message_index for c in pixel_map._cells if c.message_index is not None]
        expected = selected if selected in shown else max(m for m in shown if m < selected)
        assert pixel_map._cells[pixel_map.cursor].message_index == expected
