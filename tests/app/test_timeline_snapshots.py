"""SVG snapshots of the Timeline tab (issue 33): a Pi session with compactions and a Claude Code
session, at 160×48 and 80×24, live and scrubbed. Update with `--snapshot-update` after looking
at the new SVGs (`uv run python scripts/screenshots.py --png FILE.svg`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4tui.app import Ds4App
from tests.app.test_dashboard import settle
from tests.conftest import FIXTURES

PI = FIXTURES / "pi" / "03-compaction.jsonl"
CLAUDE = FIXTURES / "claude" / "autocompact-diagnostics.jsonl"
SIZES = [(160, 48), (80, 24)]


def app(path: Path) -> Ds4App:
    """The dashboard with a fixed clock and no file watcher (deterministic screens)."""
    return Ds4App(path, watch=False, retrieval=False, now=lambda: 1.9e9)


async def drawn(pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait until the Timeline panel has mounted its plots and drawn its timeline at its cursor
    (the plots mount and draw in later frames: a fixed pause raced them on a loaded machine)."""
    from ds4tui.widgets.timeline import TimelinePanel

    for _ in range(500):
        await pilot.pause(0.02)
        panel = pilot.app.screen.query_one(TimelinePanel)
        tl = panel.timeline
        if tl is not None and panel._ready and panel._drawn[:1] == (id(tl),) and panel._drawn[2:] == (panel.cursor,):
            await pilot.pause()
            await pilot.pause()
            return
    raise AssertionError("the timeline was not drawn")


async def timeline(pilot) -> None:  # type: ignore[no-untyped-def]
    await settle(pilot, pilot.app)
    await pilot.press("T")
    await settle(pilot, pilot.app)
    await drawn(pilot)


async def scrubbed(pilot) -> None:  # type: ignore[no-untyped-def]
    await timeline(pilot)
    await pilot.press("left_curly_bracket", "left_square_bracket")  # the request before the last compaction
    await drawn(pilot)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("path", [PI, CLAUDE], ids=["pi-compactions", "claude-code"])
def test_timeline_tab(snap_compare, path: Path, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(path), terminal_size=size, run_before=timeline)


@pytest.mark.parametrize("path", [PI, CLAUDE], ids=["pi-compactions", "claude-code"])
def test_timeline_scrubbed(snap_compare, path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(path), terminal_size=(160, 48), run_before=scrubbed)


async def test_the_live_marks_stay_off_a_scrubbed_map() -> None:
    """While scrubbed, the dashboard's periodic checks (the bridge poll re-marks the cached prefix
    when the countdown's status changed) leave the map of the past request unmarked; End puts the
    live marks back."""
    from ds4tui.widgets.pixel_map import PixelMap

    app_ = app(PI)
    async with app_.run_test(size=(160, 48)) as pilot:
        await scrubbed(pilot)
        pixel_map = app_.screen.query_one(PixelMap)
        assert pixel_map._cached_end is None and pixel_map._cache_status is None
        app_.dashboard._poll_bridge()  # (every 2 s: the countdown says "cold", the map None)
        await pilot.pause()
        assert pixel_map._cached_end is None and pixel_map._cache_status is None
        await pilot.press("end")
        await drawn(pilot)
        assert pixel_map._cache_status == "cold"
