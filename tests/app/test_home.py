"""The home screen over a home directory of Pi, Claude Code and Codex samples (tests/fixtures, the `samples` fixture) moved to a
fixed instant: order, countdown ticks, notices, filtering, a typed path, Enter/Esc with the real
dashboard, and SVG snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import DataTable, Input, Label

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
        "pi-warm": place_pi(samples, tmp_path, "01-tools-and-image", latest_at=NOW - 100, mtime=NOW - 20,
                            session_id="3f2a9c1e-0000-4000-8000-000000000001").path,
        # the same session copied, two hours earlier: same name, same project (told apart by time and id)
        "pi-twin": place_pi(samples, tmp_path, "01-tools-and-image", latest_at=NOW - 7200, mtime=NOW - 7200,
                            session_id="b71d04c9-0000-4000-8000-000000000002").path,
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


def cell(table: DataTable, path: Path | str, column: str) -> str:  # type: ignore[type-arg]
    """The text of one cell, by column key ("agent", "state", "cache", "context", "today",
    "when", "session")."""
    return str(table.get_cell(str(path), column))


async def _filled(pilot) -> HomeScreen:  # type: ignore[no-untyped-def]
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, HomeScreen)
    return screen


async def test_rows_live_first_soonest_expiry_first(home: dict[str, Path]) -> None:
    clock = Clock(NOW)
    app = HomeApp(clock)
    async with app.run_test(size=(160, 30)) as pilot:
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
        warm = home["pi-warm"]
        expires = screen.summaries[str(warm)].cache.expires_at_s
        assert cell(table, warm, "cache") == f"● warm · {_mmss(expires - NOW)} left"
        assert cell(table, warm, "state") == "live" and cell(table, warm, "agent") == "pi"
        assert cell(table, warm, "context").endswith("3%")  # 5,089 of 200k
        assert cell(table, warm, "today") == "$0.0353"  # Σ recorded cost of 01-tools-and-image, all today
        assert cell(table, warm, "when") == "03-10 11:58"  # its last entry, NOW - 100 s (UTC)
        ident = screen.summaries[str(warm)].session_id.replace("-", "")[:8]
        assert cell(table, warm, "session") == f"Fix 404 for unknown widget ids #{ident} · widget-service"
        assert cell(table, home["pi-idle"], "session") == "Document it in the README. · widget-service"  # no twin: no id
        # the countdown ticks with the clock
        clock.t += 10
        screen.tick()
        assert cell(table, warm, "cache") == f"● warm · {_mmss(expires - clock.t)} left"
        clock.t = expires - 42
        screen.tick()
        assert cell(table, warm, "cache") == "◐ expiring · 0:42 left"
        clock.t = expires + 1
        screen.tick()
        assert cell(table, warm, "cache") == "○ cold"
        assert cell(table, home["pi-old"], "today") == "—"  # nothing spent today


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
        assert set(visible_paths(screen)) == {str(home[k]) for k in ("pi-warm", "pi-twin", "pi-idle", "pi-old")}
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


@pytest.mark.parametrize("size", [(60, 40), (80, 24), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_home_snapshot(snap_compare, home: dict[str, Path], size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    async def filled(pilot) -> None:  # type: ignore[no-untyped-def]
        await _filled(pilot)

    assert snap_compare(HomeApp(Clock(NOW)), terminal_size=size, run_before=filled)


def test_home_snapshot_filtered_narrow(snap_compare, home: dict[str, Path]) -> None:  # type: ignore[no-untyped-def]
    async def filtered(pilot) -> None:  # type: ignore[no-untyped-def]
        screen = await _filled(pilot)
        screen.query_one(Input).value = "claude"
        await pilot.pause()

    assert snap_compare(HomeApp(Clock(NOW - 60)), terminal_size=(96, 16), run_before=filtered)


async def test_any_agents_session_opens_in_the_one_dashboard(sample01: Path) -> None:
    """Choosing another agent's session on the home screen shows it in this dashboard: the
    snapshot is that agent's, with its header and categories."""
    from ds4tui.app import Ds4App
    from tests.app.test_dashboard import settle
    from tests.conftest import FIXTURES

    claude = FIXTURES / "claude" / "manual-compact-diagnostics.jsonl"
    app = Ds4App(sample01, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        assert app.snapshot.agent == "pi"
        app.open_choice(claude)
        for _ in range(200):
            await pilot.pause(0.02)
            if app.snapshot is not None and app.snapshot.agent == "claude-code":
                break
        assert app.is_running and app.snapshot.agent == "claude-code"
        assert app.view.header.agent == "Claude Code"
        assert {r.id for r in app.snapshot.best.rows} >= {"system_prompt", "system_tools", "skills"}


@pytest.mark.parametrize("width, columns", [
    (60, ("agent", "cache", "when", "session")),
    (80, ("agent", "state", "cache", "context", "when", "session")),
    (100, ("agent", "state", "cache", "context", "today", "when", "session")),
    (160, ("agent", "state", "cache", "context", "today", "when", "session")),
])
async def test_every_width_tells_the_sessions_apart(home: dict[str, Path], width: int, columns: tuple[str, ...]) -> None:
    """At 60, 80, 100 and 160 columns every row reads differently (the two copies of one Pi
    session too: by time and the start of their ids), the session column keeps at least
    `SESSION_MIN` cells and shows each name's start, nothing scrolls sideways, and the
    narrow forms explain themselves in the status line."""
    from ds4tui.screens.home import SESSION_MIN

    app = HomeApp(Clock(NOW))
    async with app.run_test(size=(width, 40)) as pilot:
        screen = await _filled(pilot)
        table = screen.query_one(DataTable)
        assert tuple(table.columns) == columns
        assert table.virtual_size.width <= table.size.width  # nothing to scroll sideways
        assert table.columns["session"].get_render_width(table) - 2 >= SESSION_MIN  # type: ignore[index]
        rows = {p: " ".join(str(c) for c in table.get_row(p)) for p in visible_paths(screen)}
        assert len(set(rows.values())) == len(rows) == len(home)
        for path in rows:
            name = screen.summaries[path].name or Path(path).stem
            assert cell(table, path, "session")[:12] == name[:12]
        twins = [cell(table, home[k], "session") for k in ("pi-warm", "pi-twin")]
        assert twins[0] != twins[1] and all(" #" in t for t in twins)
        status = str(screen.query_one("#home-status", Label).content)
        if width < 147:
            assert "● warm ◐ expiring ○ cold" in status
            assert cell(table, home["pi-warm"], "cache").startswith("● ") and "left" not in cell(table, home["pi-warm"], "cache")
        else:
            assert cell(table, home["pi-warm"], "cache").endswith(" left")
        if width == 60:  # no state column: the time column says "live"
            assert cell(table, home["pi-warm"], "when") == "live" and cell(table, home["pi-twin"], "when") == "09:59"  # (its last entry, just before NOW - 2 h)
            assert cell(table, home["pi-old"], "when") == "03-07"


async def test_resizing_switches_the_layout(home: dict[str, Path]) -> None:
    """Narrowing and widening the terminal re-lays the columns (the rows are re-added)."""
    app = HomeApp(Clock(NOW))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _filled(pilot)
        table = screen.query_one(DataTable)
        assert "left" not in cell(table, home["pi-warm"], "cache")
        await pilot.resize_terminal(160, 30)
        await pilot.pause()
        await pilot.pause()
        assert cell(table, home["pi-warm"], "cache").endswith(" left")
        assert cell(table, home["pi-warm"], "agent") == "pi" and "today" in table.columns
        await pilot.resize_terminal(60, 24)
        await pilot.pause()
        await pilot.pause()
        assert "state" not in table.columns and cell(table, home["pi-warm"], "when") == "live"
        assert len(visible_paths(screen)) == len(home)
