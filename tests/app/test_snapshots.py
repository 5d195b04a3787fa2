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


CLAUDE = FIXTURES / "claude" / "manual-compact-diagnostics.jsonl"
CODEX = FIXTURES / "codex" / "sample" / "sessions" / "2026" / "12" / "02" / "rollout-2026-12-02T01-10-23-01a2344d-7ef9-7e61-a841-8556539ac489.jsonl"
AGENT_SAMPLES = {"claude-code": (CLAUDE, 1796176009.596 + 120), "codex": (CODEX, 1796173827.307 + 120)}
"""Every agent on the one dashboard (issue 28): a Claude Code transcript and a Codex rollout,
with a clock two minutes after their last request."""
AGENT_SIZES = [(100, 30), (80, 24), (160, 48), (70, 50), (60, 40)]


@pytest.mark.parametrize("size", AGENT_SIZES, ids=[f"{w}x{h}" for w, h in AGENT_SIZES])
@pytest.mark.parametrize("agent", sorted(AGENT_SAMPLES))
def test_dashboard_of_every_agent(snap_compare, agent: str, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    path, now = AGENT_SAMPLES[agent]
    assert snap_compare(Ds4App(path, watch=False, retrieval=False, now=lambda: now), terminal_size=size, run_before=_ready)


@pytest.mark.parametrize("agent", sorted(AGENT_SAMPLES))
async def test_every_agent_gets_the_cockpit(agent: str) -> None:
    """At 100×30: a pixel map with at least five category colours, the turns, the inspector,
    and the Cache and Diagnostics tabs with the agent's numbers (issue 28)."""
    from ds4tui.palette import colour_of
    from ds4tui.widgets.cache import CachePanel
    from ds4tui.widgets.panels import DiagnosticsView, EntryInspector
    from ds4tui.widgets.pixel_map import PixelMap
    from ds4tui.widgets.turns import TurnList

    path, now = AGENT_SAMPLES[agent]
    app = Ds4App(path, watch=False, retrieval=False, now=lambda: now)
    async with app.run_test(size=(100, 30)) as pilot:
        await _ready(pilot)
        assert app.snapshot.agent == agent
        pixel_map = app.query_one(PixelMap)
        roles = app.view.map.roles
        colours = {colour_of(c.category, roles) for c in pixel_map.cells if c.category != "free"}
        assert len(colours) >= 5, colours
        assert app.query_one(TurnList).row_count == len(app.snapshot.turns) >= 2
        assert "entry " in str(app.query_one(EntryInspector).render_line(0).text)
        await pilot.press("K")
        await pilot.pause()
        cache_text = "\n".join(app.query_one(CachePanel).render_line(y).text for y in range(3))
        assert f"{len(app.derived.cache.history.records)} requests" in cache_text
        await pilot.press("d")
        await pilot.pause()
        diagnostics = "".join(app.query_one(DiagnosticsView).render_line(y).text.strip() for y in range(3))
        assert str(path) in diagnostics
