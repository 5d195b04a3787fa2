"""The category list's rendering rules, the demo replay, and every shared sample in the app."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from ds4core.categories import Breakdown, CategoryRow
from ds4tui.app import Ds4App
from ds4tui.cli import demo_session_path, replay
from ds4tui.render import category_lines
from tests.app.test_dashboard import settle
from tests.conftest import SHARED, shared_params


def test_children_sorted_by_weight_30_shown_then_the_rest_counted() -> None:
    children = [(f"tool{i:02d}", 1000 - i) for i in range(35)]
    rows = [CategoryRow("tool_results", "Tool results", sum(t for _, t in children), children)]
    bd = Breakdown("chars-v1", rows, [], [], rows[0].tokens, 200_000, 0, 200_000 - rows[0].tokens)
    lines = [line.plain for line in category_lines(bd, width=40)]
    assert lines[0].startswith("■ Tool results") and lines[0].endswith("34.4k")
    assert lines[1].strip().startswith("tool00") and lines[30].strip().startswith("tool29")
    assert lines[31].strip() == f"+5 more ({sum(t for _, t in children[30:]) / 1000:.1f}k)"
    assert all(len(line) <= 40 for line in lines)


def test_demo_replay_appends_the_bundled_session_line_by_line_dated_now(tmp_path: Path) -> None:
    from ds4tui.demo import line_time, shift_line

    target = tmp_path / "demo.jsonl"
    stop = threading.Event()
    source = demo_session_path()
    before = source.read_bytes()
    replay(source, target, speed=1e9, stop=stop, now=lambda: 1_900_000_000.0)
    assert source.read_bytes() == before  # the packaged file is only read
    got = target.read_bytes().splitlines(keepends=True)
    want = before.splitlines(keepends=True)
    assert len(got) == len(want)
    for mine, theirs in zip(got, want):
        when = line_time(theirs)
        assert mine == (shift_line(theirs, 1_900_000_000.0 - when) if when is not None else theirs)
        if when is not None:
            assert line_time(mine) == 1_900_000_000.0
    # Only the timestamps moved: the messages are the same.
    first = json.loads(want[5]), json.loads(got[5])
    first[1]["timestamp"] = first[0]["timestamp"]
    if isinstance(first[0].get("message"), dict):
        first[1]["message"]["timestamp"] = first[0]["message"]["timestamp"]
    assert first[0] == first[1]


def test_demo_copy_is_warm_and_never_the_packaged_file(tmp_path: Path) -> None:
    from ds4sessions.derive.cache import cache_view
    from ds4sessions.agents.pi.live import open_snapshot
    from ds4tui.demo import DEMO_AGE_S, demo_copy, line_time

    now = 1_900_000_000.0
    copy = demo_copy(demo_session_path(), tmp_path / "demo.jsonl", now=now)
    times = [t for t in map(line_time, copy.read_bytes().splitlines()) if t is not None]
    assert max(times) == pytest.approx(now - DEMO_AGE_S, abs=0.002)
    view = cache_view(open_snapshot(copy), now)
    assert view.state_at(now).status == "warm"
    assert view.state_at(now + 3600).status == "cold"


async def test_pin_in_the_default_demo_writes_to_the_copy_only(tmp_path: Path) -> None:
    """Issue 17: `p`, `y` in the demo appended to the packaged demo-session.jsonl."""
    import os
    import time

    from ds4tui.demo import demo_copy
    from tests.app.test_dashboard import open_pin_dialog

    packaged = demo_session_path().read_bytes()
    copy = demo_copy(demo_session_path(), tmp_path / "demo.jsonl")
    old = time.time() - 60
    os.utime(copy, (old, old))  # idle: the writer accepts it
    size = copy.stat().st_size
    app = Ds4App(copy, demo=True, watch=False, retrieval=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        app.dashboard._select_message(3, sync_turns=True)
        await open_pin_dialog(pilot, app)
        await pilot.press("y")
        for _ in range(200):
            await pilot.pause(0.02)
            if copy.stat().st_size > size:
                break
    assert copy.stat().st_size > size  # the label went to the copy
    assert demo_session_path().read_bytes() == packaged


async def test_small_terminal_hides_the_map_but_keeps_the_numbers(sample01: Path) -> None:
    app = Ds4App(sample01, watch=False, retrieval=False)
    async with app.run_test(size=(60, 18)) as pilot:
        await settle(pilot, app)
        assert not app.query_one("#map").display
        assert app.query_one("#categories").display


SAMPLES = sorted(p.name for p in (SHARED / "sessions-pi").glob("*.jsonl")) if SHARED else []


@pytest.mark.parametrize("name", shared_params(SAMPLES))
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
