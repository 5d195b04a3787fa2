"""A resize lays the dashboard out for the new size, whatever sizes came before (found by a
new-user trial: after 160×48 → 80×24 → 160×48 the stacked layout and a coarser map scale
stayed)."""

from __future__ import annotations

from pathlib import Path

from ds4tui.app import Ds4App
from ds4tui.widgets.pixel_map import PixelMap
from tests.app.test_dashboard import settle
from tests.app.test_incremental_screen import copy_of


async def test_a_round_trip_of_sizes_ends_as_a_fresh_start(sample01: Path, tmp_path: Path) -> None:
    app = Ds4App(copy_of(sample01, tmp_path), watch=False, retrieval=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app)
        fresh = (app.default_screen.classes, app.query_one(PixelMap).size, app.query_one(PixelMap).border_title)
        assert "-narrow" not in fresh[0]
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.3)
        assert "-narrow" in app.default_screen.classes  # the new size's layout, at once
        await pilot.resize_terminal(160, 48)
        await pilot.pause(0.3)
        again = (app.default_screen.classes, app.query_one(PixelMap).size, app.query_one(PixelMap).border_title)
        assert again == fresh
