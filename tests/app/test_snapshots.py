"""SVG snapshots of the dashboard (pytest-textual-snapshot). Update with `--snapshot-update`
after looking at the new SVGs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4tui.app import Ds4App
from tests.app.test_dashboard import settle
from tests.conftest import FIXTURES

SAMPLE = FIXTURES / "pi" / "01-tools-and-image.jsonl"


async def _ready(pilot) -> None:  # type: ignore[no-untyped-def]
    await settle(pilot, pilot.app)


@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=["120x36", "80x24"])
def test_dashboard(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(Ds4App(SAMPLE, watch=False), terminal_size=size, run_before=_ready)


def test_dashboard_map_focused_with_cell_selected(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def select(pilot) -> None:  # type: ignore[no-untyped-def]
        await _ready(pilot)
        await pilot.press("m", "right", "right", "down")
        await pilot.pause()

    assert snap_compare(Ds4App(SAMPLE, watch=False), terminal_size=(120, 36), run_before=select)


def test_waiting_for_a_file_that_does_not_exist_yet(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    async def wait(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause(0.3)

    app = Ds4App(tmp_path / "not-yet.jsonl", watch=False)
    assert snap_compare(app, terminal_size=(80, 24), run_before=wait)
