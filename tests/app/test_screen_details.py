"""Small things a new user met (issue 31 item 7), each on the real app: Enter shows a hidden
inspector; the DS4 view says what DS4 would send; right after a compaction the map's caption
says nothing of the new context is cached yet (instead of vanishing); the Diagnostics tab's
label says when there are findings."""

from __future__ import annotations

import json
from pathlib import Path

from ds4tui.app import Ds4App
from ds4tui.widgets.pixel_map import PixelMap
from tests.app.test_dashboard import settle
from tests.conftest import FIXTURES


async def test_enter_shows_the_hidden_inspector(sample01: Path) -> None:
    app = Ds4App(sample01, watch=False, retrieval=False)
    async with app.run_test(size=(80, 24)) as pilot:  # a short stacked screen starts without it
        await settle(pilot, app)
        assert app.dashboard.has_class("-no-inspector")
        app.dashboard.query_one("#turn-list").focus()
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert not app.dashboard.has_class("-no-inspector")
        await pilot.press("i")  # hidden again; Enter on the map shows it too
        await pilot.pause(0.1)
        assert app.dashboard.has_class("-no-inspector")
        pixel_map = app.dashboard.query_one(PixelMap)
        pixel_map.focus()
        pixel_map.cursor = 1
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert not app.dashboard.has_class("-no-inspector")


async def test_the_ds4_view_says_what_ds4_would_send(sample01: Path) -> None:
    app = Ds4App(sample01, watch=False, retrieval=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        plan = app.derived.plan
        sends = plan.fixed_tokens + sum(item.tokens for item in plan.plan.selected)
        assert sends == plan.totals.estimated_input_tokens  # DS4's own total of what it sends
        await pilot.press("v")
        await pilot.pause(0.2)
        from ds4core.tokens import fmt_tokens

        title = str(app.dashboard.query_one(PixelMap).border_title)
        assert title.startswith(f"DS4 sends {fmt_tokens(sends)}") and "▒ out" in title


async def test_right_after_a_compaction_the_caption_says_nothing_is_cached(tmp_path: Path) -> None:
    source = FIXTURES / "pi" / "03-compaction.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "compaction")
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[: cut + 1]))
    last_reply = max(json.loads(line)["message"]["timestamp"] for line in lines[:cut]
                     if json.loads(line).get("message", {}).get("role") == "assistant") / 1000
    app = Ds4App(path, watch=False, retrieval=False, now=lambda: last_reply + 60)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        await pilot.pause(0.2)
        pixel_map = app.dashboard.query_one(PixelMap)
        assert pixel_map.cache_status == "warm"
        assert "none of this context cached yet · cache warm" in str(pixel_map.border_subtitle)


async def test_the_diagnostics_tab_says_when_there_are_findings(tmp_path: Path, sample01: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = sample01.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:5]) + b"{not json\n" + b"".join(lines[5:]))
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        tab = app.dashboard.query_one("#tabs").get_tab("diagnostics")
        assert str(tab.label) == "Diagnostics ⚠ 1"
    clean = Ds4App(sample01, watch=False, retrieval=False)
    async with clean.run_test(size=(140, 40)) as pilot:
        await settle(pilot, clean)
        assert str(clean.dashboard.query_one("#tabs").get_tab("diagnostics").label) == "Diagnostics"
