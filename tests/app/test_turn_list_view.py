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
