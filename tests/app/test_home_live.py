"""Issue 15's done-when, replayed: two agents (Claude Code and Codex) write their sessions line by
line at the pace the agent-oracle recorded (the samples of shared/sessions-claude and -codex, copied into tests/fixtures),
into the folders the home screen watches, while the real home screen runs with the real folder
watcher. Both rows must appear, go live and follow every appended line; the countdown ticks with
the (injected) clock, and the expiry notice fires once for each while the agents still hold their
sessions open (Claude Code's `sessions/<pid>.json`, Codex's thread-writer lock: the records the
real CLIs keep, see tests/agent-oracle/run_live_two.sh), then both go cold.

The live counterpart with the real CLIs is `tests/agent-oracle/run_live_two.sh` (needs root and
npm; see docs/performance.md, issue 15).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import fcntl
import json
import os
import time
import uuid
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import DataTable

from ds4sessions.agents.registry import all_agents
from ds4sessions.overview.scanner import Overview
from ds4sessions.overview.summary import OverviewSettings
from ds4tui.screens.home import HomeScreen, row_cells
from tests.overview_home import env_for, place_claude, place_codex, shifted_copy

AGENTS = {a.name for a in all_agents()}
pytestmark = pytest.mark.skipif(not {"claude-code", "codex"} <= AGENTS, reason="needs the Claude Code and Codex plug-ins")


class Clock:
    """An injectable clock (epoch seconds) the test moves by hand."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class HomeApp(App[None]):
    def __init__(self, clock: Clock, lead_s: float) -> None:
        super().__init__()
        self.clock = clock
        self.lead_s = lead_s
        self.bells = 0

    def on_mount(self) -> None:
        overview = Overview(settings=OverviewSettings(retention={"codex": 300}), now=self.clock)
        self.push_screen(HomeScreen(overview, now=self.clock, poll_s=None, lead_s=self.lead_s, watch=True))

    def bell(self) -> None:
        self.bells += 1


def _stamp(raw: bytes) -> float | None:
    try:
        value = json.loads(raw).get("timestamp")
    except (ValueError, AttributeError):
        return None
    if isinstance(value, str):
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return None


def _timed_lines(path: Path) -> list[tuple[float, bytes]]:
    """(recorded time, line with its newline) per line; an untimed line takes its predecessor's."""
    out: list[tuple[float, bytes]] = []
    last = 0.0
    for raw in path.read_bytes().splitlines(keepends=True):
        last = _stamp(raw) or last
        out.append((last, raw))
    return out


async def _until(pilot, condition, timeout: float = 10.0, why=lambda: "") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for the home screen: {why()}")
        await asyncio.sleep(0.01)
    await pilot.pause()


async def test_two_agents_writing_live_both_rows_update_and_the_notice_fires(
        tmp_path: Path, samples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in env_for(tmp_path).items():
        monkeypatch.setenv(key, value)
    t0 = time.time()
    # Each agent was used earlier today in the same project (their folders exist and are watched).
    place_claude(samples, tmp_path, latest_at=t0 - 3 * 3600, mtime=t0 - 3 * 3600, subagents=False)
    earlier = place_codex(samples, tmp_path, "rollout-*-7ef9-*.jsonl", latest_at=t0 - 3 * 3600, mtime=t0 - 3 * 3600)

    # The recorded sessions, their times moved so Claude Code starts at t0 and Codex 2 s later.
    stage = tmp_path / "stage"
    claude_src = next((samples / "sessions-claude" / "projects").glob("*/*.jsonl"))
    codex_src = next((samples / "sessions-codex" / "sessions").glob("*/*/*/rollout-*-7ef9-*.jsonl"))
    claude_id, codex_id = str(uuid.uuid4()), str(uuid.uuid4())
    spans = {}
    for src, new_id, start in ((claude_src, claude_id, t0), (codex_src, codex_id, t0 + 2)):
        stamps = [t for t, _ in _timed_lines(src) if t]
        spans[new_id] = (max(stamps) - min(stamps))
        shifted_copy(src, stage / f"{new_id}.jsonl", latest_at=start + spans[new_id],
                     ids={claude_src.stem: claude_id, codex_src.stem[-36:]: codex_id})
    claude = tmp_path / "claude" / "projects" / claude_src.parent.name / f"{claude_id}.jsonl"
    codex = earlier.path.parent / f"rollout-{dt.datetime.fromtimestamp(t0, dt.timezone.utc):%Y-%m-%dT%H-%M-%S}-{codex_id}.jsonl"
    events = sorted(
        [(t, 0, i, claude, raw) for i, (t, raw) in enumerate(_timed_lines(stage / f"{claude_id}.jsonl"))]
        + [(t, 1, i, codex, raw) for i, (t, raw) in enumerate(_timed_lines(stage / f"{codex_id}.jsonl"))])

    # What the running CLIs keep while the sessions are open (seen with Claude Code 2.1.197 and
    # Codex 0.171.0): Claude's pid record, Codex's flock()ed thread-writer lock.
    (tmp_path / "claude" / "sessions").mkdir(parents=True)
    (tmp_path / "claude" / "sessions" / f"{os.getpid()}.json").write_text(json.dumps(
        {"pid": os.getpid(), "sessionId": claude_id, "cwd": "/home/dev/proj-claude", "kind": "interactive"}))
    locks = tmp_path / "codex" / "thread-writer-locks"
    locks.mkdir(parents=True)
    lock = (locks / f"{codex_id}.lock").open("wb")
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)

    clock = Clock(t0 - 5)
    app = HomeApp(clock, lead_s=60)
    try:
        async with app.run_test(size=(160, 30), notifications=True) as pilot:
            screen = app.screen
            assert isinstance(screen, HomeScreen)
            await _until(pilot, lambda: screen._complete and len(screen._order) == 2)
            table = screen.query_one(DataTable)
            written = {claude: 0, codex: 0}
            seen: dict[Path, list[str]] = {claude: [], codex: []}
            for t, _, _, path, raw in events:
                clock.t = max(clock.t, t)
                with path.open("ab") as f:  # the agent appends one line
                    f.write(raw)
                written[path] += len(raw)
                os.utime(path, (clock.t, clock.t))
                key = str(path)
                # the watcher names the file, the poll reads the appended bytes, the row follows
                await _until(pilot, lambda: key in screen.summaries and screen.summaries[key].offset == written[path]
                             and key in screen._order,
                             why=lambda: (path.name, written[path], screen._dirty, screen._retry, screen._last_scan - clock.t, screen._watcher and screen._watcher.folders, screen._complete))
                summary = screen.summaries[key]
                cells = [str(c) for c in table.get_row(key)]
                expected = [str(c) for c in row_cells(summary, clock.t, dt.datetime.fromtimestamp(clock.t).strftime("%Y-%m-%d"),
                                                      screen.overview_settings_expiring(), screen.column_layout,
                                                      screen._session_width, key in screen._twins)]
                assert cells == expected, (path.name, dict(zip(screen.columns, cells)))
                if not seen[path] or seen[path][-1] != cells[3] + cells[4]:
                    seen[path].append(cells[3] + cells[4])
            # both rows are live, went through several states (context and cost grew as they wrote)
            assert {screen.summaries[str(p)].live for p in (claude, codex)} == {True}
            assert len(seen[claude]) >= 3 and len(seen[codex]) >= 3, seen
            assert screen._order[:2] == sorted([str(claude), str(codex)],
                                               key=lambda k: screen.summaries[k].cache.expires_at_s)
            # every row equals a fresh read of the finished files
            fresh = {s.path: s for s in Overview(settings=OverviewSettings(retention={"codex": 300}), now=clock).load_all()}
            for p in (claude, codex):
                mine, theirs = screen.summaries[str(p)], fresh[str(p)]
                assert (mine.context_tokens, mine.requests, mine.usage, mine.cache) == (
                    theirs.context_tokens, theirs.requests, theirs.usage, theirs.cache)
            # the countdown ticks; 4 minutes later (a rescan included) the sessions are still open,
            # so each gets one notice and one bell at 60 s before its expiry
            expiries = {p: screen.summaries[str(p)].cache.expires_at_s for p in (claude, codex)}
            assert all(e is not None and e - clock.t > 200 for e in expiries.values())
            before = str(table.get_cell(str(claude), "cache"))
            clock.t += 1
            screen.tick()
            assert str(table.get_cell(str(claude), "cache")) != before and "warm" in before
            for p in sorted(expiries, key=expiries.get):
                clock.t = expiries[p] - 59.5
                screen.poll_now()  # the periodic poll: a re-scan (15 s passed) refreshes liveness
                await app.workers.wait_for_complete()
                await pilot.pause()
                assert screen.summaries[str(p)].live, p.name
                screen.tick()
                screen.tick()
                await pilot.pause()
            notes = [n.message for n in app._notifications if "prompt cache expires in" in n.message]
            assert len(notes) == 2 and app.bells == 2, notes
            assert any(n.startswith("claude-code · ") for n in notes) and any(n.startswith("codex · ") for n in notes)
            assert "◐ expiring" in str(table.get_cell(str(codex), "cache")) or "◐ expiring" in str(table.get_cell(str(claude), "cache"))
            clock.t = max(expiries.values()) + 1
            screen.tick()
            assert str(table.get_cell(str(claude), "cache")) == "○ cold"
            assert str(table.get_cell(str(codex), "cache")) == "○ cold (typical)"
            assert app.bells == 2  # once per expiry
    finally:
        lock.close()


async def test_a_session_in_a_brand_new_project_folder_appears_without_waiting_for_the_rescan(
        tmp_path: Path, samples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude Code makes `projects/<new project>/` for a project it has not seen: the home screen
    watches the folders' parents for new folders, so the new session is listed at once (the
    clock stays well inside the 15 s re-scan period)."""
    for key, value in env_for(tmp_path).items():
        monkeypatch.setenv(key, value)
    t0 = time.time()
    place_claude(samples, tmp_path, latest_at=t0 - 3600, mtime=t0 - 3600, subagents=False)
    clock = Clock(t0)
    app = HomeApp(clock, lead_s=60)
    async with app.run_test(size=(160, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, HomeScreen)
        await _until(pilot, lambda: screen._complete and len(screen._order) == 1 and screen._watcher is not None)
        clock.t += 2  # > NEW_FILE_RESCAN_S, < RESCAN_S
        source = next((samples / "sessions-claude" / "projects").glob("*/*.jsonl"))
        new_id = str(uuid.uuid4())
        target = tmp_path / "claude" / "projects" / "-home-dev-proj-elsewhere" / f"{new_id}.jsonl"
        shifted_copy(source, target, latest_at=clock.t - 1, ids={source.stem: new_id})  # makes the folder
        await _until(pilot, lambda: str(target) in screen._order and screen.summaries[str(target)].offset > 0,
                     why=lambda: (screen._order, screen._new_folders, screen._dirty))
        assert screen.summaries[str(target)].live and screen.summaries[str(target)].requests > 0
        assert clock.t - t0 < 15
