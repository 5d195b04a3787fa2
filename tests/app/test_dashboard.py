"""The dashboard, driven as a user would (real Textual app via `run_test`, real files)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from ds4tui.app import Ds4App
from ds4tui.screens.dashboard import DashboardScreen
from ds4tui.widgets.panels import TurnList
from ds4tui.widgets.pixel_map import PixelMap


async def settle(pilot, app: Ds4App, *, exact: bool = True, derived: bool = True, tries: int = 500) -> None:
    """Wait until the ingest worker has posted a snapshot (with exact counts, and the derived
    plan/cache/retrieval views, when asked)."""
    for _ in range(tries):
        await pilot.pause(0.02)
        snap = app.snapshot
        if snap is None or (exact and snap.exact is None):
            continue
        done = app.derived
        if derived and exact and (done is None or done.version != snap.version or (app.dashboard.feed.with_retrieval and done.retrieval is None and not done.errors)):
            continue
        await pilot.pause()
        return
    raise AssertionError("no snapshot arrived")


async def open_pin_dialog(pilot, app: Ds4App) -> None:
    """Press `p` and wait until the pin dialog is up (its state is read in a worker)."""
    from ds4tui.widgets.steer import PinScreen

    await pilot.press("p")
    for _ in range(100):
        await pilot.pause(0.02)
        if isinstance(app.screen, PinScreen):
            return
    raise AssertionError("the pin dialog did not open")


def _line(obj: dict) -> bytes:
    return (json.dumps(obj) + "\n").encode()


async def test_opens_a_session_and_shows_its_map_turns_and_inspector(sample01: Path) -> None:
    app = Ds4App(sample01, watch=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        snap = app.snapshot
        assert snap.model_key == "anthropic/claude-sonnet-4-5"
        table = app.query_one(TurnList)
        assert table.row_count == len(snap.turns) == 4
        pixel_map = app.query_one(PixelMap)
        assert pixel_map.cells and pixel_map.cells[-1].category == "free"
        owners = [c.entry_id for c in pixel_map.cells if c.entry_id]
        assert set(owners) <= set(snap.context.message_entry_ids)
        # Selecting a cell shows its entry in the inspector.
        pixel_map.focus()
        await pilot.press("right", "right", "right")
        await pilot.pause()
        cell = pixel_map.cells[pixel_map.cursor]
        assert app.dashboard._selected == cell.message_index
        # The turn list follows the map selection.
        turn = snap.turns[table.cursor_row]
        assert turn.first_message <= cell.message_index <= turn.last_message


async def test_follows_appends_live(tmp_path: Path, sample01: Path) -> None:
    lines = sample01.read_bytes().splitlines(keepends=True)
    target = tmp_path / "live.jsonl"
    target.write_bytes(b"".join(lines[:8]))
    app = Ds4App(target)  # with the real watcher
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app, exact=False)
        before = len(app.snapshot.context.messages)
        with target.open("ab") as f:
            f.write(b"".join(lines[8:]))
        for _ in range(300):
            await pilot.pause(0.02)
            if app.snapshot and len(app.snapshot.context.messages) > before:
                break
        assert len(app.snapshot.context.messages) == 19
        # Pause: new data is held, then applied on resume.
        await pilot.press("f")
        assert not app.dashboard.following
        await pilot.press("f")
        assert app.dashboard.following
    assert target.read_bytes() == b"".join(lines)


async def test_session_content_is_shown_literally(tmp_path: Path) -> None:
    """Terminal injection: markup and escape sequences in a tool result are shown as text."""
    hostile = "\x1b[2J\x1b]0;pwned\x07[bold red]not markup[/bold red] \x9b31m done"
    entries = [
        {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp/x"},
        {"type": "message", "id": "a0000001", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
         "message": {"role": "user", "content": "[link=file:///etc]click[/link] \x1b[5mblink", "timestamp": 1767225601000}},
        {"type": "message", "id": "a0000002", "parentId": "a0000001", "timestamp": "2026-01-01T00:00:02.000Z",
         "message": {"role": "toolResult", "toolCallId": "t", "toolName": "bash\x1b[31m",
                     "content": [{"type": "text", "text": hostile}], "isError": False, "timestamp": 1767225602000}},
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"".join(_line(e) for e in entries))
    app = Ds4App(path, watch=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        app.dashboard._select_message(1, sync_turns=True)
        await pilot.pause()
        svg = app.export_screenshot()
        turns_text = str(app.query_one(TurnList).get_row_at(0)[2])
    assert "\x1b" not in svg and "\x07" not in svg and "\x9b" not in svg
    assert "[bold red]not markup[/bold red]" in svg.replace("&#160;", " ")
    assert "\\x1b]0;pwned\\x07" in svg
    assert turns_text.startswith("[link=file:///etc]click[/link] \\x1b[5mblink")


async def test_a_cut_prompt_ends_in_an_ellipsis(tmp_path: Path) -> None:
    """A new-user trial: the turn list cut prompts at the column's edge with no sign of it."""
    prompt = "Please read every file under src and explain " + "the architecture " * 8 + "END"
    entries = [
        {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp/x"},
        {"type": "message", "id": "a0000001", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
         "message": {"role": "user", "content": prompt, "timestamp": 1767225601000}},
    ]
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"".join(_line(e) for e in entries))
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        turns = app.query_one(TurnList)
        row = next(i for i, r in enumerate(turns._rows) if r.prompt.startswith("Please read"))
        line = "".join(segment.text for segment in turns.render_line(1 + row))
    shown, mark, _ = line.partition("…")
    assert mark and "END" not in line
    head = shown.split("Please read", 1)[1]
    assert prompt.startswith("Please read" + head) and len(head) > 3  # the prompt's start, then the mark


@pytest.mark.parametrize("size", [(160, 48), (200, 50)])
async def test_the_manifest_columns_fit_and_the_score_shows_whole(sample01: Path, size: tuple[int, int]) -> None:
    """A new-user trial: at 160×48 the Manifest's Score column was clipped (Entry and Reason
    took the room). Every column now fits the table's width, the numbers whole; a long reason
    is cut with "…" (the line under the table shows it in full)."""
    from textual.widgets import DataTable

    from ds4tui.widgets.manifest import column_widths

    app = Ds4App(sample01, watch=False, retrieval=False)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        await pilot.press("M")
        await pilot.pause()
        await pilot.pause()
        table = app.query_one("#manifest-table", DataTable)
        assert table.virtual_size.width <= table.scrollable_content_region.width  # no sideways scroll
        rows = app.query_one("ManifestView").rows
        scores = [f"{item.score:.3f}" for item in rows if item.score is not None]
        assert scores and all(len(s) <= table.columns["score"].width for s in scores)  # type: ignore[index]
        screen = app.export_screenshot().replace("&#160;", " ")
        for score in scores:
            assert score in screen
        assert "…" in screen
    assert column_widths(74)["reason"] == 10 and sum(column_widths(74).values()) + 14 == 74
    assert column_widths(40)["score"] == 8  # never the numbers


@pytest.mark.parametrize(
    "name",
    ["B01-torn-tail", "B02-corrupt-header", "B03-metadata-leaf", "B04-compaction-inside-tool-pair",
     "B06-fork-child", "B08-unknown-entry-types", "B09-cacheread-in-context", "B10-usage-missing-or-zero",
     "B13-huge-session-sample"],
)
async def test_bad_inputs_open_without_a_crash(name: str, shared_dir: Path, tmp_path: Path) -> None:
    src = shared_dir / "bad-inputs" / f"{name}.jsonl"
    copy = tmp_path / src.name
    shutil.copy(src, copy)
    app = Ds4App(copy, watch=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await pilot.press("d")  # the diagnostics tab
        await pilot.pause()
        assert app.snapshot is not None
    assert copy.read_bytes() == src.read_bytes()


async def test_diagnostics_list_malformed_lines_with_line_numbers(shared_dir: Path) -> None:
    app = Ds4App(shared_dir / "sessions-pi" / "09-partial-last-line.jsonl", watch=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        diag = app.snapshot.reader.diagnostics
        assert app.snapshot.pending_bytes > 0 or diag.total > 0
        await pilot.press("d")
        await pilot.pause()
        assert app.query_one("#tabs").active == "diagnostics"


async def test_inspector_shows_tokens_by_both_estimators(sample01: Path) -> None:
    app = Ds4App(sample01, watch=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        app.dashboard._select_message(2, sync_turns=True)
        await pilot.pause()
        text = app.export_screenshot().replace("&#160;", " ")
        assert "chars-v1" in text and "cl100k" in text
        assert f"entry {app.snapshot.context.message_entry_ids[2]}" in text


async def test_every_action_is_in_the_command_palette(sample01: Path) -> None:
    app = Ds4App(sample01, watch=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app, exact=False)
        titles = {cmd.title for cmd in app.get_system_commands(app.screen)}
        for binding in DashboardScreen.BINDINGS:
            assert binding.description in titles
        follow = next(c for c in app.get_system_commands(app.screen) if c.title == "Follow")
        await follow.callback()
        assert app.dashboard.following is False


async def test_manifest_row_selects_the_entry_on_the_map(sample01: Path) -> None:
    from ds4tui.widgets.manifest import ManifestView

    app = Ds4App(sample01, watch=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        snap = app.snapshot
        target = snap.context.message_entry_ids[5]
        await pilot.press("M")  # the manifest tab
        app.query_one(ManifestView).post_message(ManifestView.EntrySelected(target, None))
        await pilot.pause()
        assert app.dashboard._selected == 5
        # An entry outside the context (none here) is shown from the file instead.
        app.query_one(ManifestView).post_message(ManifestView.EntrySelected("nope", None))
        await pilot.pause()
        assert app.dashboard._selected == 5


@pytest.mark.parametrize(("later", "status"), [(120, "warm"), (3600, "cold")])
async def test_the_cache_overlay_keeps_the_category_colour(sample01: Path, later: int, status: str) -> None:
    """Issue 17: a cold cache no longer greys every cell; the boundary cell (where the cached
    prefix ends) carries the state, each cell keeps its category's colour."""
    from ds4tui.palette import BOUNDARY, COLOURS

    last_request = 1772441024.433
    app = Ds4App(sample01, watch=False, now=lambda: last_request + later)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        await pilot.pause(1.2)  # one countdown tick
        app.dashboard._apply_overlays()
        pixel_map = app.query_one(PixelMap)
        assert app.derived.cache.cached_prefix_end == 18
        assert pixel_map.cache_status == status
        for index, cell in enumerate(pixel_map.cells):
            if cell.category != "free":
                assert pixel_map._style(cell, index).color.name == COLOURS[cell.category]
        boundary = pixel_map.boundary
        assert boundary is not None and pixel_map.cells[boundary].message_index <= 17
        assert pixel_map.cells[boundary + 1].category == "free" or pixel_map.cells[boundary + 1].message_index >= 18
        assert pixel_map._style(pixel_map.cells[boundary], boundary).bgcolor.name == BOUNDARY[status]
        assert f"cache {status}" in str(pixel_map.border_subtitle)


async def test_the_map_shows_what_pi_sends_and_v_switches_to_the_ds4_plan(sample01: Path) -> None:
    app = Ds4App(sample01, watch=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        pixel_map = app.query_one(PixelMap)
        assert pixel_map.view == "agent"  # DS4 is not installed for this session
        assert str(pixel_map.border_title).startswith("What Pi sends · 1 cell = ")
        glyphs = {pixel_map._glyph(c, i) for i, c in enumerate(pixel_map.cells)}
        assert "▒" not in glyphs and "◆" not in glyphs
        await pilot.press("v")
        await pilot.pause()
        assert pixel_map.view == "ds4" and str(pixel_map.border_title).startswith(("DS4 plan", "DS4 sends"))
        await pilot.press("v")
        assert pixel_map.view == "agent"


async def test_header_and_legend_agree_and_add_up_to_the_window(sample01: Path) -> None:
    from ds4tui.render import calibrated_of
    from ds4tui.text import fmt_tokens

    app = Ds4App(sample01, watch=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        snap = app.snapshot
        cal = calibrated_of(snap)
        assert snap.provider is not None and cal.used == snap.provider.context_tokens
        assert sum(r.tokens for r in cal.rows) == snap.context_window
        header = str(app.query_one("#header").content)
        assert f"{fmt_tokens(cal.used)} / {fmt_tokens(snap.context_window)}" in header
        legend = "\n".join(str(line) for line in app.query_one("#categories").content.renderables)
        assert f"provider {fmt_tokens(cal.used)}" in legend  # the legend's total
        assert "Images" in legend and "Unattributed" not in legend  # 01-tools-and-image carries an image
        filled = sum(1 for c in app.query_one(PixelMap).cells if c.category != "free")
        assert filled == round(cal.used / app.query_one(PixelMap).tokens_per_cell)


async def test_pin_from_the_keyboard_appends_a_label_and_reports_it(tmp_path: Path, sample01: Path) -> None:
    from ds4sessions.agents.pi import read_session
    from ds4tui.widgets.steer import PinScreen

    import os
    import time

    copy = tmp_path / "s.jsonl"
    shutil.copy(sample01, copy)
    old = time.time() - 60
    os.utime(copy, (old, old))  # an idle session (the writer refuses a file written seconds ago)
    original = copy.read_bytes()
    app = Ds4App(copy, watch=False, retrieval=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        app.dashboard._select_message(3, sync_turns=True)
        target = app.snapshot.context.message_entry_ids[3]
        await open_pin_dialog(pilot, app)
        assert isinstance(app.screen, PinScreen)
        await pilot.press("y")
        for _ in range(200):
            await pilot.pause(0.02)
            if target in app.snapshot.context.labels:
                break
        status = str(app.query_one("#status").render())
    data = copy.read_bytes()
    assert data[: len(original)] == original  # append-only: the old bytes are untouched
    session = read_session(copy)
    assert session.labels[target] == "ds4:pin"
    assert session.entries[-1].type == "label" and session.entries[-1].parent_id == "7060d0dd"
    assert status.startswith("direct write: appended label ") and f" to {copy.name} at byte {len(original)} " in status


async def test_a_refused_write_says_why_and_writes_nothing(tmp_path: Path, sample01: Path) -> None:

    copy = tmp_path / "s.jsonl"
    shutil.copy(sample01, copy)  # just written: an agent may be mid-append
    original = copy.read_bytes()
    app = Ds4App(copy, watch=False, retrieval=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        app.dashboard._select_message(3, sync_turns=True)
        os.utime(copy)  # written just now (on a loaded machine the copy may be seconds old by here)
        await open_pin_dialog(pilot, app)
        os.utime(copy)  # "just written" at the moment of the write, however slow the set-up was
        await pilot.press("y")
        for _ in range(100):
            await pilot.pause(0.02)
            if "nothing written" in str(app.query_one("#status").render()):
                break
        status = str(app.query_one("#status").render())
    assert status.startswith("nothing written:") and "written" in status
    assert copy.read_bytes() == original


async def test_a_file_that_cannot_be_read_is_reported(tmp_path: Path, sample01: Path) -> None:
    copy = tmp_path / "s.jsonl"
    shutil.copy(sample01, copy)
    app = Ds4App(copy, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        copy.unlink()
        copy.mkdir()  # the path now names a directory: reading fails
        app.refresh_session()
        for _ in range(100):
            await pilot.pause(0.02)
            if "cannot read" in str(app.query_one("#status").render()):
                break
        status = str(app.query_one("#status").render())
    assert status.startswith(f"cannot read {copy.name}: ")


async def test_r_rereads_the_file_and_says_what_it_read(tmp_path: Path, sample01: Path) -> None:
    """A new-user trial: `r` re-read the file with no feedback. A notice now names the session
    and what the snapshot holds (the file's size, its lines) once the pass ends."""
    from ds4tui.text import fmt_bytes

    copy = tmp_path / "s.jsonl"
    shutil.copy(sample01, copy)
    app = Ds4App(copy, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        with copy.open("ab") as f:
            f.write(b"\n")  # one more line: the notice counts what this pass read
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        name = app.snapshot.session.session_name or copy.name
        lines = copy.read_bytes().count(b"\n")
        notices = [n.message for n in app._notifications]
    assert notices[-1] == f"re-read {name}: {fmt_bytes(copy.stat().st_size)}, {lines:,} lines"


async def test_hidden_tabs_do_not_steal_the_selection(shared_dir: Path) -> None:
    app = Ds4App(shared_dir / "sessions-pi" / "03-compaction.jsonl", watch=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        await pilot.pause(0.2)
        assert app.query_one("#tabs").active == "turns"
        screen = app.export_screenshot().replace("&#160;", " ")
        assert "not in the current context" not in screen  # not a retrieval source from a hidden tab
        assert f"entry {app.snapshot.context.message_entry_ids[app.dashboard._selected]}" in screen


async def test_updates_reach_the_dashboard_while_a_dialog_is_open(tmp_path: Path, sample01: Path) -> None:
    from ds4tui.widgets.steer import PinScreen

    lines = sample01.read_bytes().splitlines(keepends=True)
    target = tmp_path / "live.jsonl"
    target.write_bytes(b"".join(lines[:-1]))
    app = Ds4App(target, watch=False, retrieval=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        app.dashboard._select_message(3, sync_turns=True)
        await open_pin_dialog(pilot, app)
        with target.open("ab") as f:
            f.write(lines[-1])
        app.refresh_session()
        for _ in range(200):
            await pilot.pause(0.02)
            if app.snapshot and len(app.snapshot.context.messages) == 19:
                break
        assert len(app.snapshot.context.messages) == 19
        assert isinstance(app.screen, PinScreen)  # the dialog stays; nothing was written
        await pilot.press("n")
    assert target.read_bytes() == b"".join(lines)


@pytest.mark.parametrize("first", ["M", "R"])
async def test_every_tab_key_works_from_every_tab(first: str, sample01: Path) -> None:
    app = Ds4App(sample01, watch=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        tabs = app.query_one("#tabs")
        for key, tab in [(first, {"M": "manifest", "R": "retrieval"}[first]), ("K", "cache"), (first, None), ("d", "diagnostics"), ("t", "turns")]:
            await pilot.press(key)
            await pilot.pause()
            assert tabs.active == (tab or {"M": "manifest", "R": "retrieval"}[first])


async def test_the_scale_stays_while_the_session_grows(tmp_path: Path, sample01: Path) -> None:
    """Issue 17: the scale jumped from 200 to 250 tokens per cell while live."""
    lines = sample01.read_bytes().splitlines(keepends=True)
    target = tmp_path / "live.jsonl"
    target.write_bytes(b"".join(lines[:6]))
    app = Ds4App(target, watch=False, retrieval=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app, exact=False, derived=False)
        pixel_map = app.query_one(PixelMap)
        scale = pixel_map.tokens_per_cell
        assert scale in (100, 200, 500, 1000)  # the 1-2-5 series
        for count in range(7, len(lines) + 1, 3):
            target.write_bytes(b"".join(lines[:count]))
            app.refresh_session()
            for _ in range(100):
                await pilot.pause(0.02)
                if app.snapshot is not None and app.snapshot.file_size == target.stat().st_size:
                    break
            await pilot.pause()
            assert pixel_map.tokens_per_cell == scale
            assert str(pixel_map.border_title).endswith(f"1 cell = {scale:,} tok")


async def test_the_map_opens_on_the_ds4_plan_when_ds4_is_active(tmp_path: Path, sample01: Path) -> None:
    """DS4's configuration file is in use: the map starts on DS4's plan (title names it)."""
    config = tmp_path / "ds4-context.json"
    config.write_text(json.dumps({"context": {}}))
    app = Ds4App(sample01, watch=False, retrieval=False, config_file=config)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        pixel_map = app.query_one(PixelMap)
        assert app.derived.config is not None and app.derived.config.loaded_files == (config,)
        assert pixel_map.view == "ds4" and str(pixel_map.border_title).startswith(("DS4 plan", "DS4 sends"))
        await pilot.press("v")
        assert pixel_map.view == "agent"
        app.refresh_session(force=True)  # a later update keeps the user's choice
        await settle(pilot, app)
        assert pixel_map.view == "agent"


def _out_of_range_times(sample01: Path, target: Path, stamp: float) -> Path:
    """sample01 with every message's `timestamp` (Unix ms) set to `stamp`, a time `datetime`
    cannot hold (before year 1 or after 9999)."""
    lines = []
    for raw in sample01.read_bytes().splitlines():
        obj = json.loads(raw)
        if obj.get("type") == "message":
            obj["message"]["timestamp"] = stamp
        lines.append(_line(obj))
    target.write_bytes(b"".join(lines))
    return target


OUT_OF_RANGE = [253402300800000, -62135596800001, 1e300]
"""Message times (Unix ms) `datetime` cannot hold: year 10000, year 0, far beyond."""


@pytest.mark.parametrize("stamp", OUT_OF_RANGE)
def test_map_shows_message_times_out_of_range_as_unknown(stamp: float, sample01: Path, tmp_path: Path) -> None:
    """`ds4tui map` and `map --json` (both readers) print the map of a session whose message
    times are out of range, with unknown turn times (it was "internal error (ValueError: year
    10000 is out of range)")."""
    import subprocess
    import sys

    path = _out_of_range_times(sample01, tmp_path / "s.jsonl", stamp)
    before = path.read_bytes()
    ds4tui = Path(sys.executable).parent / "ds4tui"  # the console script a user runs
    for args in ([], ["--json"], ["--json", "--fast"]):
        done = subprocess.run([str(ds4tui), "map", *args, str(path)], capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 0 and not done.stderr, (args, done.stderr)
        if args:
            turns = json.loads(done.stdout)["turns"]
            assert len(turns) == 4 and all(t["time"] is None for t in turns), turns
    assert path.read_bytes() == before


@pytest.mark.parametrize("stamp", OUT_OF_RANGE)
async def test_message_times_out_of_range_are_shown_as_unknown(stamp: float, sample01: Path, tmp_path: Path) -> None:
    """The dashboard opens a session whose message times are out of range, with unknown turn
    times, and every tab draws (it was "ingest failed" and a screen stuck on "reading…")."""
    path = _out_of_range_times(sample01, tmp_path / "s.jsonl", stamp)
    before = path.read_bytes()
    app = Ds4App(path, watch=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        assert [t.time for t in app.snapshot.turns] == [None] * len(app.snapshot.turns) and app.snapshot.turns
        for key in ("M", "R", "K", "d", "t"):  # (a tab that raises ends the app: the press never returns)
            await asyncio.wait_for(pilot.press(key), 30)
            await pilot.pause()
            assert app.query_one("#tabs").active
        assert app.snapshot is not None and not app.derived.errors
    assert path.read_bytes() == before
