"""The home screen over a home directory of Pi, Claude Code and Codex samples (tests/fixtures, the `samples` fixture) moved to a
fixed instant: order, countdown ticks, notices, filtering, a typed path, Enter/Esc with the real
dashboard, and SVG snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import DataTable, Input

from ds4sessions.agents.registry import all_agents
from ds4sessions.overview.scanner import Overview
from ds4sessions.overview.summary import OverviewSettings
from ds4tui.app import Ds4App
from ds4tui.screens.home import HomeScreen, visible_paths
from tests.overview_home import env_for, place_claude, place_codex, place_pi

NOW = 1773144000.0  # 2026-03-10T12:00:00Z: fixed, so the snapshots do not move
AGENTS = {a.name for a in all_agents()}


class Clock:
    """An injectable clock (epoch seconds) the test moves by hand."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def home(tmp_path: Path, samples: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    for key, value in env_for(tmp_path).items():
        monkeypatch.setenv(key, value)
    placed = {
        "pi-warm": place_pi(samples, tmp_path, "01-tools-and-image", latest_at=NOW - 100, mtime=NOW - 20).path,
        "pi-idle": place_pi(samples, tmp_path, "03-compaction", latest_at=NOW - 250, mtime=NOW - 250).path,
        "pi-old": place_pi(samples, tmp_path, "05-extensions-models", latest_at=NOW - 3 * 86400, mtime=NOW - 3 * 86400).path,
    }
    if "claude-code" in AGENTS:
        main, *subs = place_claude(samples, tmp_path, latest_at=NOW - 200, mtime=NOW - 10)
        placed["claude"] = main.path
        placed["claude-sub"] = subs[0].path
    if "codex" in AGENTS:
        placed["codex"] = place_codex(samples, tmp_path, "rollout-*-7ef9-*.jsonl", latest_at=NOW - 30, mtime=NOW - 30).path
    return placed


def _overview(clock: Clock) -> Overview:
    return Overview(settings=OverviewSettings(retention={"codex": 300}), now=clock)


class HomeApp(App[None]):
    """Only the home screen (the snapshot tests)."""

    def __init__(self, clock: Clock, **options: object) -> None:
        super().__init__()
        self.clock = clock
        self.options = options
        self.chosen: list[Path | None] = []
        self.bells = 0

    def on_mount(self) -> None:
        screen = HomeScreen(_overview(self.clock), now=self.clock, poll_s=None, **self.options)  # type: ignore[arg-type]
        self.push_screen(screen, self.chosen.append)

    def bell(self) -> None:
        self.bells += 1


async def _filled(pilot) -> HomeScreen:  # type: ignore[no-untyped-def]
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, HomeScreen)
    return screen


async def test_rows_live_first_soonest_expiry_first(home: dict[str, Path]) -> None:
    clock = Clock(NOW)
    app = HomeApp(clock)
    async with app.run_test(size=(140, 30)) as pilot:
        screen = await _filled(pilot)
        order = visible_paths(screen)
        assert set(order) == {str(p) for p in home.values()}
        summaries = [screen.summaries[p] for p in order]
        live = [s for s in summaries if s.live]
        assert summaries[: len(live)] == live  # live first
        running = [s.cache_at(NOW).remaining_s for s in live if s.cache_at(NOW).status in ("warm", "expiring")]
        assert running == sorted(running) and len(running) >= 1  # soonest expiry first
        assert summaries[0].live and summaries[0].cache_at(NOW).remaining_s == running[0]
        table = screen.query_one(DataTable)
        warm_row = table.get_row(str(home["pi-warm"]))
        expires = screen.summaries[str(home["pi-warm"])].cache.expires_at_s
        assert str(warm_row[2]) == f"● warm · {_mmss(expires - NOW)} left"
        assert str(warm_row[1]) == "live" and str(warm_row[0]) == "pi"
        assert str(warm_row[3]).endswith("3%")  # 5,089 of 200k
        assert str(warm_row[4]) == "$0.0353"  # Σ recorded cost of 01-tools-and-image, all today
        assert str(warm_row[5]) == "widget-service · Fix 404 for unknown widget ids"
        # the countdown ticks with the clock
        clock.t += 10
        screen.tick()
        assert str(table.get_row(str(home["pi-warm"]))[2]) == f"● warm · {_mmss(expires - clock.t)} left"
        clock.t = expires - 42
        screen.tick()
        assert str(table.get_row(str(home["pi-warm"]))[2]) == "◐ expiring · 0:42 left"
        clock.t = expires + 1
        screen.tick()
        assert str(table.get_row(str(home["pi-warm"]))[2]) == "○ cold"
        assert str(table.get_row(str(home["pi-old"]))[4]) == "—"  # nothing spent today


def _mmss(seconds: float) -> str:
    import math

    total = math.ceil(seconds)
    return f"{total // 60}:{total % 60:02d}"


async def test_the_expiry_notice_is_a_notification_and_a_bell_once(home: dict[str, Path]) -> None:
    clock = Clock(NOW)
    app = HomeApp(clock)
    async with app.run_test(size=(140, 30), notifications=True) as pilot:
        screen = await _filled(pilot)
        warm = screen.summaries[str(home["pi-warm"])]
        expires = warm.cache.expires_at_s
        clock.t = expires - 61
        screen.tick()
        assert not any("prompt cache expires" in n.message for n in app._notifications)
        clock.t = expires - 59
        screen.tick()
        screen.tick()
        await pilot.pause()
        notes = [n.message for n in app._notifications if "Fix 404" in n.message]
        assert notes == ["pi · Fix 404 for unknown widget ids: prompt cache expires in 0:59 (at "
                         + _clock(expires) + ")"]
        assert app.bells >= 1
        bells = app.bells
        clock.t = expires - 30
        screen.tick()
        assert app.bells == bells  # once per expiry
        # the idle Pi session (03) is not announced by default
        idle = screen.summaries[str(home["pi-idle"])]
        assert idle.live is False
        assert not any("PATCH" in n.message for n in app._notifications)


def _clock(seconds: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(seconds).strftime("%H:%M:%S")


async def test_filter_and_typed_path(home: dict[str, Path], tmp_path: Path) -> None:
    clock = Clock(NOW)
    app = HomeApp(clock)
    async with app.run_test(size=(140, 30)) as pilot:
        screen = await _filled(pilot)
        assert screen.focused is screen.query_one(Input)  # typing goes into the box at once
        await pilot.press(*"widget")
        await pilot.pause()
        assert set(visible_paths(screen)) == {str(home[k]) for k in ("pi-warm", "pi-idle", "pi-old")}
        screen.query_one(Input).value = "no-such/file.jsonl"
        await pilot.press("enter")
        await pilot.pause()
        assert app.chosen == [] and visible_paths(screen) == []
        screen.query_one(Input).value = str(home["pi-old"])
        await pilot.press("enter")
        await pilot.pause()
        assert app.chosen == [home["pi-old"]]


def _notices(app: App) -> list[str]:  # type: ignore[type-arg]
    return [n.message for n in app._notifications]


async def test_o_then_typing_goes_into_the_box_and_a_bad_path_says_why(home: dict[str, Path], tmp_path: Path) -> None:
    """A new-user trial: `o`, then a typed path. The box has the focus (and letters typed in the
    table go there too, never to the dashboard's keys); Enter on a missing file, a directory or
    a file no agent reads says why in one line, and the home screen stays."""
    app = Ds4App(home["pi-idle"], watch=False, retrieval=False, now=Clock(NOW))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await pilot.press("o")
        screen = await _filled(pilot)
        box = screen.query_one(Input)
        assert screen.focused is box
        assert "o" not in screen.active_bindings and "m" not in screen.active_bindings  # no dashboard keys here
        await pilot.press(*"/no/such.jsonl", "enter")
        await pilot.pause()
        assert box.value == "/no/such.jsonl"
        assert _notices(app)[-1] == "no such file: /no/such.jsonl"
        box.value = str(tmp_path)
        await pilot.press("enter")
        await pilot.pause()
        assert _notices(app)[-1] == f"is a directory: {tmp_path}"
        notes = tmp_path / "notes.txt"
        notes.write_text("hello\n")
        box.value = str(notes)
        await pilot.press("enter")
        await pilot.pause()
        assert _notices(app)[-1] == f"not a session file: {notes}"
        box.value = "zzzz-nothing"
        await pilot.press("enter")
        await pilot.pause()
        assert _notices(app)[-1] == "no session matches 'zzzz-nothing' (and no such file)"
        assert isinstance(app.screen, HomeScreen) and app.session_path == home["pi-idle"]
        box.value = ""
        await pilot.press("down")
        assert screen.focused is screen.query_one(DataTable)
        await pilot.press("q", "o")  # letters typed in the table: into the box, not Quit / Open
        await pilot.pause()
        assert app.is_running and box.value == "qo" and screen.focused is box
        assert app.screen is screen and len(app.screen_stack) == 2


async def test_enter_opens_the_dashboard_and_esc_comes_back(home: dict[str, Path]) -> None:
    clock = Clock(NOW)
    app = Ds4App(home["pi-idle"], watch=False, retrieval=False, now=clock)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await pilot.press("o")
        screen = await _filled(pilot)
        assert isinstance(app.screen, HomeScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HomeScreen) and app.session_path == home["pi-idle"]
        await pilot.press("o")
        screen = await _filled(pilot)
        table = screen.query_one(DataTable)
        target = visible_paths(screen).index(str(home["pi-warm"]))
        table.move_cursor(row=target)
        table.focus()
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not isinstance(app.screen, HomeScreen)
        assert app.session_path == home["pi-warm"]


def test_home_snapshot(snap_compare, home: dict[str, Path]) -> None:  # type: ignore[no-untyped-def]
    async def filled(pilot) -> None:  # type: ignore[no-untyped-def]
        await _filled(pilot)

    assert snap_compare(HomeApp(Clock(NOW)), terminal_size=(150, 24), run_before=filled)


def test_home_snapshot_filtered_narrow(snap_compare, home: dict[str, Path]) -> None:  # type: ignore[no-untyped-def]
    async def filtered(pilot) -> None:  # type: ignore[no-untyped-def]
        screen = await _filled(pilot)
        screen.query_one(Input).value = "claude"
        await pilot.pause()

    assert snap_compare(HomeApp(Clock(NOW - 60)), terminal_size=(96, 16), run_before=filtered)


async def test_a_claude_code_row_ends_the_dashboard_with_its_path(sample01: Path) -> None:
    """Choosing another agent's session on the home screen never shows it in the Pi dashboard:
    the app ends with the path, and the CLI opens that agent's read-only view (`launch.open_any`)."""
    from ds4tui.app import Ds4App
    from tests.conftest import FIXTURES

    claude = FIXTURES / "claude" / "manual-compact-diagnostics.jsonl"
    app = Ds4App(sample01, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.open_choice(sample01)  # a Pi session stays in the dashboard
        await pilot.pause()
        assert app.is_running
        app.open_choice(claude)
        await pilot.pause()
    assert app.return_value == claude


async def test_at_80_columns_every_row_still_names_its_session(home: dict[str, Path]) -> None:
    """80×24: compact columns (short agent names, "warm 4:12", a 4-cell bar, "~" for typical)
    so the session column is on screen without a horizontal scrollbar; widening the terminal
    brings the full columns back (and narrowing it again the compact ones)."""
    clock = Clock(NOW)
    app = HomeApp(clock)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _filled(pilot)
        table = screen.query_one(DataTable)
        assert table.virtual_size.width <= table.size.width  # nothing to scroll sideways
        for path in visible_paths(screen):
            row = [str(c) for c in table.get_row(path)]
            summary = screen.summaries[path]
            assert row[0] in ("pi", "claude", "codex") and "left" not in row[2]
            assert row[5].startswith((summary.project or "").rstrip("/").rsplit("/", 1)[-1])
            assert row[5].endswith((summary.name or Path(summary.path).stem, "…"))  # whole, or cut with "…"
        assert any(str(table.get_row(p)[5]).endswith("…") for p in visible_paths(screen))
        codex = [p for p in visible_paths(screen) if screen.summaries[p].agent == "codex"]
        if codex:
            assert str(table.get_row(codex[0])[2]).endswith(" ~")
        assert str(table.get_row(str(home["pi-warm"]))[2]).startswith("● warm ")
        session_x = sum(c.get_render_width(table) for c in list(table.columns.values())[:-1])
        assert session_x + 16 <= table.size.width  # at least 16 cells of the session's name show
        await pilot.resize_terminal(150, 30)
        await pilot.pause()
        await pilot.pause()
        assert str(table.get_row(str(home["pi-warm"]))[2]).endswith(" left")
        assert str(table.get_row(str(home["pi-warm"]))[0]) == "pi"
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        assert "left" not in str(table.get_row(str(home["pi-warm"]))[2])
        assert len(visible_paths(screen)) == len(home)
