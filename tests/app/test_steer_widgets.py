"""The steering dialogs in a small app of their own: keys, decisions, and SVG snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ds4core.models import ModelTable
from ds4sessions.steering.compaction import CompactionSettings, preview_compaction
from ds4sessions.steering.steer import collapse, list_pins, pin
from ds4sessions.steering.writer import Expected, Holder, Journal, read_state
from ds4tui.widgets.steer import CollapseDecision, CollapseScreen, CompactionScreen, PinScreen, PinsScreen, WriteDecision
from tests.conftest import FIXTURES
from tests.sessions.test_writer import copy_old

SAMPLE = FIXTURES / "pi" / "01-tools-and-image.jsonl"
SONNET = ModelTable.bundled().get("anthropic", "claude-sonnet-4-5")
NOW = 1772441000.0  # a minute after the sample's last reply


class DialogApp(App):
    """Pushes one dialog on mount and keeps what it returned."""

    def __init__(self, screen: ModalScreen) -> None:
        super().__init__()
        self.dialog = screen
        self.results: list[Any] = []

    def compose(self) -> ComposeResult:
        yield Static("session view")

    def on_mount(self) -> None:
        self.push_screen(self.dialog, self.results.append)


def text_of(app: App, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))
    return copy_old(SAMPLE, tmp_path)


async def test_pin_dialog_confirms_with_the_state_seen(session: Path) -> None:
    state = read_state(session)
    app = DialogApp(PinScreen(state, "5e3b26a7", "GET /widgets/:id returns a 500"))
    async with app.run_test(size=(100, 30)) as pilot:
        assert text_of(app, "#title") == "Pin entry 5e3b26a7?"
        assert 'Appends a label entry with label "ds4:pin" for 5e3b26a7' in text_of(app, "#facts")
        await pilot.press("y")
    assert app.results == [WriteDecision(Expected(26539, "7060d0dd"), False)]
    # the app then writes with the decision's expected state
    pin(session, "5e3b26a7", expected=app.results[0].expected)
    app = DialogApp(PinScreen(read_state(session), "5e3b26a7"))
    async with app.run_test(size=(100, 30)) as pilot:
        assert text_of(app, "#title") == "Unpin entry 5e3b26a7?"
        assert "a cleared label (no label field)" in text_of(app, "#facts")
        await pilot.press("escape")
    assert app.results == [None]


async def test_pins_list_returns_the_chosen_entry(session: Path) -> None:
    journal = Journal()
    pin(session, "5e3b26a7", journal=journal)
    pin(session, "955f9d3d", note="commit step", journal=journal)
    pins = list_pins(read_state(session).session)
    app = DialogApp(PinsScreen(pins, {"5e3b26a7": "GET /widgets/:id returns a 500"}))
    async with app.run_test(size=(100, 30)) as pilot:
        assert text_of(app, "#title") == "Pins (2)"
        await pilot.press("down", "enter")
    assert app.results == ["955f9d3d"]


async def test_collapse_dialog_chooses_turns_and_confirms(session: Path) -> None:
    app = DialogApp(CollapseScreen(read_state(session), SONNET))
    async with app.run_test(size=(110, 40)) as pilot:
        assert text_of(app, "#title") == "Collapse the last 1 turn(s)?"
        await pilot.press("right", "right", "right")  # capped at the 3 available turns
        assert text_of(app, "#title") == "Collapse the last 3 turn(s)?"
        assert "Turns: ◀ 3 ▶ of 3" in text_of(app, "#facts")
        await pilot.press("left")
        assert "Turns: ◀ 2 ▶ of 3" in text_of(app, "#facts")
        assert "Prompt cache: the span's cached prefix is lost" in text_of(app, "#facts")
        assert text_of(app, "#body-text").startswith("Collapsed by ds4tui")
        await pilot.press("y")
    [decision] = app.results
    assert decision == CollapseDecision(Expected(26539, "7060d0dd"), False, 2)
    result = collapse(session, decision.turns, expected=decision.expected, force=decision.force)
    assert result.entries[0]["parentId"] == "cb42aabc"


async def test_collapse_dialog_refuses_while_open_unless_forced(session: Path) -> None:
    app = DialogApp(CollapseScreen(read_state(session), SONNET, holders=[Holder(4242, "node")]))
    async with app.run_test(size=(110, 40)) as pilot:
        assert "open in pid 4242 (node)" in text_of(app, "#warning")
        assert app.screen.query_one("#confirm", Button).disabled
        await pilot.press("y")
        assert app.results == []
        await pilot.press("f")
        assert "[force ON]" in text_of(app, "#warning")
        await pilot.press("y")
    assert app.results == [CollapseDecision(Expected(26539, "7060d0dd"), True, 1)]


async def test_collapse_dialog_in_flight(sample01: Path, tmp_path: Path) -> None:
    from tests.sessions.test_writer import _truncated

    app = DialogApp(CollapseScreen(read_state(_truncated(sample01, tmp_path, 21))))
    async with app.run_test(size=(110, 40)) as pilot:
        assert "Cannot collapse: the last turn is still in flight" in text_of(app, "#warning")
        await pilot.press("y", "n")
    assert app.results == [None]


async def test_compaction_dialog(session: Path) -> None:
    state = read_state(session)
    preview = preview_compaction(state, CompactionSettings(keep_recent_tokens=100), SONNET, now=NOW)
    app = DialogApp(CompactionScreen(preview, path=str(session), endpoint="openai m @ http://127.0.0.1:9"))
    async with app.run_test(size=(110, 40)) as pilot:
        body = text_of(app, "#body-text")
        assert "Cut point: keep from df7b9f64 (splits a turn)" in body
        assert "Tokens: 5,089 before → ~" in body
        assert "Pi compacts on its own above 183,616 of 200,000" in body
        assert "vs cold $" in text_of(app, "#facts")
        await pilot.press("y")
    assert app.results == [WriteDecision(Expected(26539, "7060d0dd"), False)]
    # Nothing to compact: the dialog offers only a way out (issue 17: `y` did nothing, `q` too).
    for key in ("escape", "q", "enter", "n"):
        app = DialogApp(CompactionScreen(None, refusal="Nothing to compact"))
        async with app.run_test(size=(110, 40)) as pilot:
            assert text_of(app, "#warning") == "Cannot compact: Nothing to compact"
            assert not app.screen.query_one("#confirm").display
            assert str(app.screen.query_one("#cancel").label) == "Close (Esc)"
            await pilot.press("y")  # no write
            assert app.results == []
            await pilot.press(key)
            await pilot.pause()
        assert app.results == [None], key


def test_collapse_dialog_snapshot(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = copy_old(SAMPLE, tmp_path)

    async def choose(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("right")
        await pilot.pause()

    app = DialogApp(CollapseScreen(read_state(path), SONNET, holders=[Holder(4242, "node")], path_label="~/session.jsonl"))
    assert snap_compare(app, terminal_size=(110, 40), run_before=choose)


def test_compaction_dialog_snapshot(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = copy_old(SAMPLE, tmp_path, "session.jsonl")
    preview = preview_compaction(read_state(path), CompactionSettings(keep_recent_tokens=100), SONNET, now=NOW)
    app = DialogApp(CompactionScreen(preview, path="~/.pi/agent/sessions/demo/session.jsonl", endpoint="anthropic claude-sonnet-4-5 @ https://api.anthropic.com"))
    assert snap_compare(app, terminal_size=(110, 32))
