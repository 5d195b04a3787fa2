"""Quitting: a key pressed after `q` opens nothing (it crashed the app with a traceback: `q`
then `o`, a new-user trial), and the CLI ends the process at once when the dashboard returns
(`launch.leave`: output flushed, the exit code kept)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ds4tui.app import Ds4App
from ds4tui.screens.home import HomeScreen
from tests.app.test_dashboard import settle


async def test_a_key_after_quit_opens_no_screen(sample01: Path) -> None:
    app = Ds4App(sample01, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app, derived=False)
        app.exit()
        app.dashboard.action_open_session()  # `o` handled after `q`
        assert not isinstance(app.screen, HomeScreen)


async def test_a_home_screen_mounted_without_its_widgets_does_not_fail(sample01: Path) -> None:
    app = Ds4App(sample01, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app, derived=False)
        screen = HomeScreen()
        screen.on_mount()  # before compose (what a push during shutdown did): nothing to set up, no error


def test_leave_flushes_and_keeps_the_exit_code() -> None:
    code = "import sys\nfrom ds4tui.launch import leave\nsys.stdout.write('bye')\nsys.stderr.write('err')\nleave(3)\nprint('never')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (3, "bye", "err")


async def test_escape_hides_the_keys(sample01: Path) -> None:
    app = Ds4App(sample01, watch=False, retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app, derived=False)
        await pilot.press("question_mark")
        await pilot.pause()
        assert app.screen.query("HelpPanel")
        await pilot.press("escape")
        await pilot.pause()
        assert not app.screen.query("HelpPanel")
