"""The category list's rendering rules, the demo replay, and every shared sample in the app."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from ds4core.categories import Breakdown, CategoryRow
from ds4tui.app import Ds4App
from ds4tui.cli import demo_session_path, replay
from ds4tui.render import category_lines
from tests.app.test_dashboard import settle
from tests.conftest import SHARED


def test_children_sorted_by_weight_30_shown_then_the_rest_counted() -> None:
    children = [(f"tool{i:02d}", 1000 - i) for i in range(35)]
    rows = [CategoryRow("tool_results", "Tool results", sum(t for _, t in children), children)]
    bd = Breakdown("chars-v1", rows, [], [], rows[0].tokens, 200_000, 0, 200_000 - rows[0].tokens)
    lines = [line.plain for line in category_lines(bd, width=40)]
    assert lines[0].startswith("■ Tool results") and lines[0].endswith("34.4k")
    assert lines[1].strip().startswith("tool00") and lines[30].strip().startswith("tool29")
    assert lines[31].strip() == f"+5 more ({sum(t for _, t in children[30:]) / 1000:.1f}k)"
    assert all(len(line) <= 40 for line in lines)


def test_demo_replay_appends_the_bundled_session_line_by_line(tmp_path: Path) -> None:
    target = tmp_path / "demo.jsonl"
    stop = threading.Event()
    replay(demo_session_path(), target, speed=1e9, stop=stop)
    assert target.read_bytes() == demo_session_path().read_bytes()


async def test_small_terminal_hides_the_map_but_keeps_the_numbers(sample01: Path) -> None:
    app = Ds4App(sample01, watch=False, retrieval=False)
    async with app.run_test(size=(60, 18)) as pilot:
        await settle(pilot, app)
        assert not app.query_one("#map").display
        assert app.query_one("#categories").display


SAMPLES = sorted(p.name for p in (SHARED / "sessions-pi").glob("*.jsonl")) if SHARED else []


@pytest.mark.parametrize("name", SAMPLES)
async def test_every_shared_sample_opens(name: str, shared_dir: Path, tmp_path: Path) -> None:
    src = shared_dir / "sessions-pi" / name
    copy = tmp_path / name
    shutil.copy(src, copy)
    app = Ds4App(copy, watch=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app, tries=1500)
        assert app.snapshot.context.messages
        assert app.derived is not None and app.derived.plan is not None
        assert app.derived.errors == ()
    assert copy.read_bytes() == src.read_bytes()
