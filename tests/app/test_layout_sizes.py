"""What matters gets the rows at every size (issue 31 item 3), on the one dashboard of every
agent: the largest category is on screen at 80×24, 70×50, 60×40 and 160×48; the Manifest tab
shows at least 8 plan rows at 80×24; `?` at 80×24 floats over the dashboard instead of
squeezing it; below 60×24 one notice says what size is needed; `[demo]` stays at 60 columns.
Real app (`run_test`), real sessions; what is asserted is the text on screen."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.text import Text

from ds4tui.app import Ds4App
from ds4tui.header import HeaderFacts, compose_header
from ds4tui.render import fitted_category_lines
from tests.app.test_dashboard import settle
from tests.app.test_snapshots import CLAUDE, CODEX
from tests.conftest import FIXTURES

SESSIONS = {"pi": FIXTURES / "pi" / "01-tools-and-image.jsonl", "claude-code": CLAUDE, "codex": CODEX}
SIZES = [(80, 24), (70, 50), (60, 40), (160, 48)]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("agent", sorted(SESSIONS))
async def test_the_largest_category_is_on_screen(agent: str, size: tuple[int, int]) -> None:
    app = Ds4App(SESSIONS[agent], watch=False, retrieval=False)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        await pilot.pause(0.2)
        rows = [r for r in app.view.legend.calibrated.rows if r.tokens > 0]
        largest = max((r for r in rows if r.id != "free"), key=lambda r: r.tokens)
        legend = app.dashboard.query_one("#categories-scroll")
        text = app.export_screenshot().replace("&#160;", " ")
        assert largest.label.replace("&", "&amp;") in text, f"{largest.label} not on screen"
        assert legend.max_scroll_y == 0  # the legend fits its panel: nothing hidden below


async def test_the_manifest_shows_eight_rows_at_80x24() -> None:
    from textual.widgets import DataTable

    app = Ds4App(SESSIONS["pi"], watch=False, retrieval=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("M")
        await pilot.pause(0.3)
        table = app.dashboard.query_one("#manifest-table", DataTable)
        visible = table.scrollable_content_region.height - 1  # the header row
        assert min(visible, table.row_count) >= 8
        await pilot.press("t")  # the map comes back with the Turns tab
        await pilot.pause(0.2)
        assert app.dashboard.query_one("#left").display


async def test_help_floats_over_the_dashboard_at_80x24() -> None:
    app = Ds4App(SESSIONS["pi"], watch=False, retrieval=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        before = app.dashboard.query_one("#main").region
        await pilot.press("question_mark")
        await pilot.pause(0.3)
        panel = app.screen.query_one("HelpPanel")
        assert app.dashboard.query_one("#main").region == before  # not squeezed
        assert panel.region.right == 80 and panel.region.width >= 40


@pytest.mark.parametrize(("size", "small"), [((59, 30), True), ((80, 23), True), ((60, 24), False)])
async def test_below_60x24_a_notice_says_so(size: tuple[int, int], small: bool) -> None:
    app = Ds4App(SESSIONS["pi"], watch=False, retrieval=False)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app, derived=False)
        text = app.export_screenshot().replace("&#160;", " ")
        assert ("needs at least 60×24" in text) is small
        assert app.dashboard.query_one("#main").display is not small


def test_demo_stays_in_a_narrow_header() -> None:
    facts = HeaderFacts(status="session", used=5100, window=200_000, measured=True, model="anthropic/claude-sonnet-4-5",
                        name="a long session name that takes room", demo=True, agent="Pi")
    for width in (60, 40, 30):
        assert "[demo]" in compose_header(facts, width).plain


def test_where_space_is_short_the_largest_categories_stay() -> None:
    from ds4core.categories import Breakdown, CategoryRow, calibrated

    rows = [CategoryRow("system_prompt", "System prompt", 500), CategoryRow("tools", "Tools", 600, [("read", 300), ("bash", 300)]),
            CategoryRow("user", "User messages", 200), CategoryRow("assistant", "Assistant text", 700),
            CategoryRow("thinking", "Thinking", 100), CategoryRow("tool_results", "Tool results", 170_000),
            CategoryRow("free", "Free space", 27_900)]
    bd = Breakdown("cl100k", rows, [], [], 172_100, 200_000, 0, 27_900)
    cal = calibrated(bd, None)
    extra = [Text("provider … estimate …")]
    roomy = fitted_category_lines(cal, width=40, room=None, extra=extra)
    assert len(roomy) == 7 + 2 + 1  # rows, Tools' two children, the extra line
    no_children = [t.plain for t in fitted_category_lines(cal, width=40, room=8, extra=extra)]
    assert len(no_children) == 8 and no_children[-1].startswith("provider")
    short = [t.plain for t in fitted_category_lines(cal, width=40, room=4, extra=extra)]
    # the three largest, in the table's order
    assert [next(label for label in ("Assistant text", "Tool results", "Free space") if label in line) for line in short[:3]] \
        == ["Assistant text", "Tool results", "Free space"]
    assert short[3].startswith("+4 smaller:")
