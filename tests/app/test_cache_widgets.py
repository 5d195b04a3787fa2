"""CacheCountdown and CachePanel in a small test App with a controllable clock (sample 01:
claude-sonnet-4-5, short lifetime 300 s, last refresh by reply 7060d0dd at request start
1772441024.433)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll

from ds4sessions.derive.cache import CacheView, cache_view
from ds4sessions.agents.pi.live import open_snapshot
from ds4tui.widgets.cache import CacheCountdown, CachePanel
from tests.conftest import FIXTURES

SAMPLE = FIXTURES / "pi" / "01-tools-and-image.jsonl"
REFRESH = 1772441024.433


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class CacheApp(App[None]):
    def __init__(self, view: CacheView | None, clock: Clock, *, bell: bool = False, notify: bool = False) -> None:
        super().__init__()
        self.view_data = view
        self.clock = clock
        self.bell_options = (bell, notify)
        self.bells = 0
        self.notes: list[str] = []

    def compose(self) -> ComposeResult:
        bell, notify = self.bell_options
        yield CacheCountdown(now=self.clock, bell=bell, notify=notify)
        with VerticalScroll():
            yield CachePanel()

    def on_mount(self) -> None:
        self.query_one(CacheCountdown).show(self.view_data)
        self.query_one(CachePanel).show(self.view_data)

    def bell(self) -> None:
        self.bells += 1

    def notify(self, message: str, **kwargs) -> None:  # type: ignore[no-untyped-def, override]
        self.notes.append(message)


@pytest.fixture(scope="module")
def view01() -> CacheView:
    return cache_view(open_snapshot(SAMPLE), now=REFRESH)


async def test_countdown_ticks_and_alerts_once(view01: CacheView) -> None:
    clock = Clock(REFRESH + 10)
    app = CacheApp(view01, clock, bell=True, notify=True)
    async with app.run_test() as pilot:
        countdown = app.query_one(CacheCountdown)
        assert countdown.state is not None and countdown.state.words == "warm · 4:50 left"
        clock.now = REFRESH + 11
        await pilot.pause(1.3)  # the interval ticks by itself, no new view
        assert countdown.state.words == "warm · 4:49 left"
        assert app.bells == 0
        clock.now = REFRESH + 245
        countdown.tick()
        assert countdown.state.words == "expiring · 0:55 left"
        assert app.bells == 1 and app.notes == ["Prompt cache expires in 0:55"]
        clock.now = REFRESH + 246
        countdown.tick()
        assert app.bells == 1 and len(app.notes) == 1  # once per threshold crossing
        clock.now = REFRESH + 301
        countdown.tick()
        assert countdown.state.status == "cold" and countdown.state.words == "cold"


async def test_countdown_without_lifetime(tmp_path: Path) -> None:
    # sample 01 with the model switched to openai/gpt-5.1 (no promptCache in Pi's catalog)
    text = SAMPLE.read_text(encoding="utf-8").replace(
        '"provider":"anthropic","modelId":"claude-sonnet-4-5"', '"provider":"openai","modelId":"gpt-5.1"')
    text = text.replace('"provider":"anthropic","model":"claude-sonnet-4-5"', '"provider":"openai","model":"gpt-5.1"')
    path = tmp_path / "gpt.jsonl"
    path.write_text(text, encoding="utf-8")
    view = cache_view(open_snapshot(path), now=REFRESH)
    assert view.model_key == "openai/gpt-5.1"
    app = CacheApp(view, Clock(REFRESH + 10))
    async with app.run_test():
        state = app.query_one(CacheCountdown).state
        assert state is not None and state.status == "unknown" and state.words == "no countdown"
        assert state.reason == "openai/gpt-5.1 declares no prompt-cache lifetime (promptCache unset), so no countdown"


async def test_waiting_without_view() -> None:
    app = CacheApp(None, Clock(0))
    async with app.run_test():
        assert app.query_one(CacheCountdown).state is None


@pytest.mark.parametrize(("offset", "label"), [(30, "warm"), (265, "expiring"), (400, "cold")])
def test_snapshot(snap_compare, view01: CacheView, offset: float, label: str) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(CacheApp(view01, Clock(REFRESH + offset)), terminal_size=(110, 48))


def test_snapshot_of_reply_times_past_year_9999(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Replies dated year 10000: the countdown says why there is none, and the request times
    are unknown ("—"); the tab drew a traceback before."""
    import json

    lines = []
    for raw in SAMPLE.read_bytes().splitlines():
        obj = json.loads(raw)
        if obj.get("type") == "message":
            obj["message"]["timestamp"] = 253402300800000
        lines.append(json.dumps(obj).encode())
    path = tmp_path / "y10k.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    view = cache_view(open_snapshot(path), now=REFRESH)
    assert snap_compare(CacheApp(view, Clock(REFRESH)), terminal_size=(110, 40))
