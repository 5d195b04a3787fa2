"""The first paint read on the other core (`ds4tui.firstview`, issue 14): a forked copy of the
process reads the session and sends the dashboard its first view model; the dashboard paints
it, then reads the file itself and shows the same numbers."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ds4sessions.derive.pipeline import SessionPipeline
from ds4tui import firstview, viewmodel
import ds4tui.app as app_module
from ds4tui.app import Ds4App
from ds4tui.firstview import first_view, start
from ds4tui.mapjson import _fast_open_path
from ds4tui.widgets.pixel_map import PixelMap
from tests.app.test_dashboard import settle
from tests.conftest import FIXTURES


def same_view(a: viewmodel.ViewModel, b: viewmodel.ViewModel) -> bool:
    """Equal view models: every compared field, the map's index by the segments it indexes
    (`MapIndex` compares by identity)."""
    return (
        replace(a, map=replace(a.map, index=None)) == replace(b, map=replace(b.map, index=None))
        and a.map.index.source == b.map.index.source
        and a.map.index.cells == b.map.index.cells
    )


def dashboards_first_view(path: Path) -> viewmodel.ViewModel:
    """The view model of the dashboard's own first snapshot (`Ds4App._publish`)."""
    snap = next(iter(SessionPipeline(path, retrieval=False).snapshots(force=True)))
    return viewmodel.build(snap, None, previous=None)


def pi_samples(shared: Path | None) -> list[Path]:
    paths = [FIXTURES / "pi" / "01-tools-and-image.jsonl"]
    if shared is not None:
        paths += sorted((shared / "sessions-pi").glob("*.jsonl"))
    return paths


def test_the_copys_view_equals_the_dashboards_first_view(shared_dir: Path) -> None:
    import pickle

    for path in pi_samples(shared_dir):
        ours = first_view(path)
        assert ours.version == 1 and ours.map.index.n_cells > 0, path.name
        assert same_view(ours, dashboards_first_view(path)), path.name
        assert same_view(pickle.loads(pickle.dumps(ours, protocol=pickle.HIGHEST_PROTOCOL)), ours), path.name
        # what the copy leaves out: the append state the dashboard's own read rebuilds
        assert ours._turn_inputs == () and ours._message_ids == () and ours._lineage is None


def test_a_forked_copy_sends_that_view(sample01: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(firstview, "MIN_BYTES", 0)
    handle = start(sample01, threads_ok=True)
    assert handle is not None
    view = handle.result()
    assert view is not None and same_view(view, dashboards_first_view(sample01))
    with pytest.raises(ChildProcessError):
        os.waitpid(handle.pid, os.WNOHANG)  # reaped
    assert handle.result() is None  # one answer only


def test_start_refuses_what_it_must_not_fork_for(tmp_path: Path, sample01: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert start(sample01, threads_ok=True) is None  # 26 KB: under MIN_BYTES
    monkeypatch.setattr(firstview, "MIN_BYTES", 0)
    monkeypatch.setattr(firstview, "MAX_BYTES", 1000)
    assert start(sample01, threads_ok=True) is None  # above MAX_BYTES
    monkeypatch.setattr(firstview, "MAX_BYTES", 64 << 20)
    assert start(tmp_path, threads_ok=True) is None  # a directory
    assert start(tmp_path / "missing.jsonl", threads_ok=True) is None
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    assert start(fifo, threads_ok=True) is None  # never opened
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert start(sample01) is None  # another thread runs: no fork
    finally:
        stop.set()
        other.join()


def test_a_failing_copy_gives_no_view_and_prints_nothing(sample01: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(firstview, "MIN_BYTES", 0)
    handle = start(sample01, models=object(), threads_ok=True)  # the copy's read raises
    assert handle is not None
    assert handle.result() is None
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    with pytest.raises(ChildProcessError):
        os.waitpid(handle.pid, os.WNOHANG)


def test_cancel_stops_the_copy_and_reaps_it(sample01: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(firstview, "MIN_BYTES", 0)
    handle = start(sample01, threads_ok=True)
    assert handle is not None
    handle.cancel()
    with pytest.raises(ChildProcessError):
        os.waitpid(handle.pid, os.WNOHANG)
    assert handle.result() is None
    handle.cancel()  # twice: nothing happens


def test_a_copy_too_slow_is_stopped(sample01: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(firstview, "MIN_BYTES", 0)
    handle = start(sample01, threads_ok=True)
    assert handle is not None
    started = time.monotonic()
    assert handle.result(timeout=0) is None  # no time at all: the dashboard reads without it
    assert time.monotonic() - started < 2
    with pytest.raises(ChildProcessError):
        os.waitpid(handle.pid, os.WNOHANG)


class _Recording(Ds4App):
    """The dashboard, noting what it showed from the copy and whether it had a snapshot then."""

    CSS_PATH = Path(app_module.__file__).parent / Ds4App.CSS_PATH  # (relative to the class's module)
    shown: list[tuple[viewmodel.ViewModel, bool, list]] = []

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        shown_by_the_screen = self.dashboard._show_first_view  # (the dashboard screen paints it)

        def recording(view: viewmodel.ViewModel) -> None:
            shown_by_the_screen(view)
            self._first_shown(view)

        self.dashboard._show_first_view = recording  # type: ignore[method-assign]

    def _first_shown(self, view: viewmodel.ViewModel) -> None:
        self.shown.append((view, self.snapshot is None, list(self.query_one(PixelMap).cells)))


async def test_the_dashboard_paints_the_copys_view_then_its_own(sample01: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(firstview, "MIN_BYTES", 0)
    path = tmp_path / sample01.name
    path.write_bytes(sample01.read_bytes())
    app = _Recording(path, watch=False, retrieval=False, first_view=start(path, threads_ok=True))
    app.shown = []
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        assert len(app.shown) == 1
        early, before_own_read, cells = app.shown[0]
        assert before_own_read  # painted before the dashboard's own snapshot
        assert any(c.category != "free" for c in cells)
        assert app.snapshot is not None and app.snapshot.version >= 1  # then its own read
        own = dashboards_first_view(path)
        assert same_view(early, own)
        assert app.dashboard._first_view is None


async def test_without_a_copy_the_dashboard_reads_as_before(sample01: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(firstview, "MIN_BYTES", 0)
    handle = start(sample01, models=object(), threads_ok=True)  # the copy fails
    app = _Recording(sample01, watch=False, retrieval=False, first_view=handle)
    app.shown = []
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        assert app.shown == [] and app.snapshot is not None and app.view.version >= 1


def test_the_cli_opens_a_session_file_without_typer(tmp_path: Path, sample01: Path) -> None:
    name = str(sample01)
    assert _fast_open_path([name]) == sample01
    assert _fast_open_path(["open", name]) == sample01
    assert _fast_open_path(["open", name, "--config", "x.toml"]) is None
    assert _fast_open_path(["--help"]) is None and _fast_open_path([]) is None
    assert _fast_open_path(["sessions"]) is None  # a command word
    assert _fast_open_path([str(tmp_path)]) is None  # a directory: the CLI says why
    assert _fast_open_path([str(tmp_path / "missing.jsonl")]) is None
    claude = next((FIXTURES / "claude").rglob("*.jsonl"))
    # another agent's file opens the same way (`launch.open_any` → `run_tui`), issue 36
    assert _fast_open_path([str(claude)]) == claude
    odd = tmp_path / "notes.txt"
    odd.write_text("not a session\n")
    assert _fast_open_path([str(odd)]) is None  # no agent reads it: the CLI says why


async def test_after_the_first_view_the_own_snapshot_draws_what_only_it_draws(sample01: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy's first view and the app's first snapshot have the same version: the diagnostics
    (drawn from a snapshot only) must still be drawn, and the turn list is on the newest turn
    from the first view on."""
    from ds4tui.widgets.panels import DiagnosticsView
    from ds4tui.widgets.turns import TurnList

    monkeypatch.setattr(firstview, "MIN_BYTES", 0)
    path = tmp_path / sample01.name
    path.write_bytes(sample01.read_bytes() + b"this line is not JSON\n")
    app = _Recording(path, watch=False, retrieval=False, first_view=start(path, threads_ok=True))
    app.shown = []
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        assert len(app.shown) == 1
        turns = app.query_one(TurnList)
        assert turns.cursor_row == turns.row_count - 1 > 0
        await pilot.press("d")
        await pilot.pause(0.1)
        lines = [app.query_one(DiagnosticsView).render_line(y).text for y in range(12)]
        assert any("line 24 (byte" in line and "not valid JSON" in line for line in lines), lines


class _PlanTitles(_Recording):
    """Notes the map's title in DS4's view when the first view is painted."""

    titles: list = []

    def _first_shown(self, view: viewmodel.ViewModel) -> None:
        super()._first_shown(view)
        self.query_one(PixelMap).set_view("ds4")
        self.titles.append(str(self.query_one(PixelMap).border_title))


async def test_the_plan_view_says_planning_until_a_plan_is_there(sample01: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(firstview, "MIN_BYTES", 0)
    path = tmp_path / sample01.name
    path.write_bytes(sample01.read_bytes())
    app = _PlanTitles(path, watch=False, retrieval=False, first_view=start(path, threads_ok=True))
    app.shown, app.titles = [], []
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        assert app.titles and "planning…" in app.titles[0]
        assert app.view.plan is not None and "▒ out" in str(app.query_one(PixelMap).border_title)
