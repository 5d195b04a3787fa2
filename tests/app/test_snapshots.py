"""SVG snapshots of the dashboard (pytest-textual-snapshot). Update with `--snapshot-update`
after looking at the new SVGs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4tui.app import Ds4App
from tests.app.test_dashboard import settle
from tests.conftest import FIXTURES

SAMPLE = FIXTURES / "pi" / "01-tools-and-image.jsonl"
LAST_REQUEST = 1772441024.433  # the last reply's request time in SAMPLE (Unix seconds)


def warm_clock() -> float:
    """Two minutes after the last request: the 5-minute prompt cache is still warm."""
    return LAST_REQUEST + 120.0


def app(path: Path = SAMPLE) -> Ds4App:
    """The dashboard with a fixed clock and no file watcher (deterministic screens)."""
    return Ds4App(path, watch=False, now=warm_clock)


async def _ready(pilot) -> None:  # type: ignore[no-untyped-def]
    await settle(pilot, pilot.app)


SIZES = [(120, 36), (80, 24), (100, 30), (160, 48), (200, 60), (70, 50), (60, 40)]
"""Full terminals, and side-by-side panes beside the agent (70×50, 60×40): issue 17."""


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_dashboard(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(), terminal_size=size, run_before=_ready)


def test_dashboard_cold_cache_keeps_the_colours(snap_compare) -> None:  # type: ignore[no-untyped-def]
    cold = Ds4App(SAMPLE, watch=False, now=lambda: LAST_REQUEST + 3600)

    async def tick(pilot) -> None:  # type: ignore[no-untyped-def]
        await _ready(pilot)
        await pilot.pause(1.2)  # one countdown tick: the boundary turns cold

    assert snap_compare(cold, terminal_size=(160, 48), run_before=tick)


def test_dashboard_ds4_plan_view(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def plan_view(pilot) -> None:  # type: ignore[no-untyped-def]
        await _ready(pilot)
        await pilot.press("v")
        await pilot.pause()

    assert snap_compare(app(), terminal_size=(100, 30), run_before=plan_view)


def test_dashboard_map_focused_with_cell_selected(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def select(pilot) -> None:  # type: ignore[no-untyped-def]
        await _ready(pilot)
        await pilot.press("m", "right", "right", "down")
        await pilot.pause()

    assert snap_compare(app(), terminal_size=(120, 36), run_before=select)


def test_waiting_for_a_file_that_does_not_exist_yet(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    async def wait(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause(0.3)

    assert snap_compare(app(tmp_path / "not-yet.jsonl"), terminal_size=(80, 24), run_before=wait)


def test_dashboard_highlight_moved_in_the_plan_view(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """The map after the highlight moved from the newest message to an earlier one in the
    "ds4" view: only the rows of the two messages are repainted (issue 10), so what Textual
    kept of the other rows must still be right on screen."""
    async def move(pilot) -> None:  # type: ignore[no-untyped-def]
        await _ready(pilot)
        await pilot.press("v")
        await pilot.pause()
        pilot.app.dashboard._select_message(3, sync_turns=True)
        await pilot.pause()

    assert snap_compare(app(), terminal_size=(120, 36), run_before=move)
