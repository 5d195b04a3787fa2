"""A large session's first read comes in slices (issue 14): the dashboard paints the part read so
far with "reading N%" in its header, reads on, plans only the whole file, and ends showing what
a read in one go shows."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import ds4sessions.ingest.tailer as tailer
import ds4tui.app as app_module
import ds4tui.feed as feed_module
from ds4tui.app import Ds4App
from ds4tui.widgets.cache import CacheCountdown
from ds4tui.widgets.panels import SessionHeader
from tests.app.test_dashboard import settle
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from bench_planner import synthetic_session  # noqa: E402


class _Recording(Ds4App):
    """The dashboard, noting each view it showed (its header's reading state and snapshot)."""

    CSS_PATH = Path(app_module.__file__).parent / Ds4App.CSS_PATH
    shown: list = []
    planned: list = []
    countdowns: list = []

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        show = self.dashboard._show  # (the dashboard screen renders each view)

        def recording(message) -> None:  # type: ignore[no-untyped-def]
            show(message)
            self._shown(message)

        self.dashboard._show = recording  # type: ignore[method-assign]

    def _shown(self, message) -> None:  # type: ignore[no-untyped-def]
        self.shown.append((message.view.header.reading, message.snapshot.unread_bytes, message.snapshot.version))
        if message.snapshot.unread_bytes and self.derived is None:
            self.countdowns.append(self.query_one(CacheCountdown).render_line(0).text)
        if message.derived is not None:
            self.planned.append(message.derived.version)


async def _open(path: Path) -> _Recording:
    app = _Recording(path, watch=False, retrieval=False)
    app.shown, app.planned, app.countdowns = [], [], []
    return app


async def test_a_large_first_read_is_painted_in_slices_then_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.jsonl"
    synthetic_session(path, 600)  # ~1 MB
    size = path.stat().st_size
    monkeypatch.setattr(feed_module, "FIRST_SLICE_BYTES", 64 << 10)
    monkeypatch.setattr(tailer, "CHUNK_BYTES", 16 << 10)  # (reads of 1 MiB would take the file at once)
    app = await _open(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app)
        readings = [r for r, _, _ in app.shown]
        partial = [r for r in readings if r is not None]
        assert len(partial) >= 2 and partial[0][1] == size and partial[0][0] < size
        assert [r[0] for r in partial] == sorted(r[0] for r in partial)  # it only moves forward
        assert readings[-1] is None and app.snapshot.unread_bytes == 0
        # never planned a partial state: every plan is of a snapshot with the whole file
        partial_versions = {version for _, unread, version in app.shown if unread}
        assert app.planned and not partial_versions & set(app.planned)
        assert "reading" not in app.query_one(SessionHeader).render_line(0).text
        assert app.countdowns and all("cache: reading…" in text for text in app.countdowns)
        final = app.view

    reference = Ds4App(path, watch=False, retrieval=False)
    monkeypatch.setattr(feed_module, "FIRST_SLICE_BYTES", 1 << 30)
    async with reference.run_test(size=(160, 48)) as pilot:
        await settle(pilot, reference)
        assert final.header == reference.view.header and final.turns == reference.view.turns
        assert final.legend == reference.view.legend


async def test_the_header_says_reading_while_it_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.jsonl"
    synthetic_session(path, 600)
    monkeypatch.setattr(feed_module, "FIRST_SLICE_BYTES", 64 << 10)
    monkeypatch.setattr(tailer, "CHUNK_BYTES", 16 << 10)  # (reads of 1 MiB would take the file at once)
    app = await _open(path)
    seen: list[str] = []
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(400):
            await pilot.pause(0.005)
            text = app.query_one(SessionHeader).render_line(0).text
            seen.append(text)
            if app.snapshot is not None and not app.snapshot.unread_bytes:
                break
        assert any("reading " in t and "% of " in t for t in seen)


@pytest.mark.parametrize("agent", ["claude", "codex"])
async def test_claude_code_and_codex_are_read_in_slices_too(agent: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: a large Claude Code transcript or Codex rollout is painted slice by slice with
    "reading N%" and its numbers marked as of that point ("as at N%"), and ends as a read in one go."""
    import synthetic_agents

    path = tmp_path / f"{agent}.jsonl"
    synthetic_agents.write(agent, path, 300)
    size = path.stat().st_size
    monkeypatch.setattr(feed_module, "FIRST_SLICE_BYTES", 64 << 10)
    monkeypatch.setattr(tailer, "CHUNK_BYTES", 16 << 10)
    app = await _open(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app)
        partial = [r for r, _, _ in app.shown if r is not None]
        assert len(partial) >= 2 and partial[0][1] == size and partial[0][0] < size
        assert [r[0] for r in partial] == sorted(r[0] for r in partial)
        assert app.shown[-1][0] is None and app.snapshot.unread_bytes == 0
        assert "reading" not in app.query_one(SessionHeader).render_line(0).text
        final = app.view

    reference = Ds4App(path, watch=False, retrieval=False)
    monkeypatch.setattr(feed_module, "FIRST_SLICE_BYTES", 1 << 30)
    async with reference.run_test(size=(160, 48)) as pilot:
        await settle(pilot, reference)
        assert final.header == reference.view.header and final.turns == reference.view.turns
        assert final.legend == reference.view.legend
