"""`ds4tui PATH` on a Codex rollout: the read-only live view (real Textual app via `run_test`)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from ds4tui.codex_app import CodexApp
from tests.app.view_keys import check_help_and_home

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
MAIN = FIX / "sample/sessions/2026/12/02/rollout-2026-12-02T01-10-23-01a2344d-7ef9-7e61-a841-8556539ac489.jsonl"


def shown(app: CodexApp) -> str:
    """The view's text as the last update drew it."""
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(app.rendered)
    return console.export_text()


async def test_follows_a_rollout_being_written(tmp_path: Path) -> None:
    lines = MAIN.read_bytes().splitlines(keepends=True)
    day = tmp_path / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True)
    path = day / MAIN.name
    path.write_bytes(b"".join(lines[:20]))  # through MAIN:20, the second request (10,173 tokens)
    app = CodexApp(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        text = shown(app)
        assert "context 10.2k / 190k · 100% left" in text
        assert "steering: off — Codex rollouts are Codex's own append-only record" in text
        with path.open("ab") as f:
            f.write(b"".join(lines[20:73]))  # through the compaction's placeholder (MAIN:73)
        app.refresh_view()
        await pilot.pause()
        assert "context: unknown after compaction (Codex estimate 6.1k)" in shown(app)
        with path.open("ab") as f:
            f.write(b"".join(lines[73:]))
        app.refresh_view()
        await pilot.pause()
        text = shown(app)
        assert "context 10.6k / 190k · 100% left" in text and "(compaction)" in text
        await pilot.press("q")


async def test_the_dashboards_keys_o_help_and_r(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A new-user trial: the Codex view answered only `q`. `o` shows the home screen, Esc comes
    back, a session chosen there ends the view with its path; `?` shows the keys; `r` re-reads
    the rollout from its start and says so."""
    from tests.conftest import FIXTURES
    from tests.overview_home import env_for

    for key, value in env_for(tmp_path).items():
        monkeypatch.setenv(key, value)
    pi = FIXTURES / "pi" / "01-tools-and-image.jsonl"
    app = CodexApp(MAIN)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        before = shown(app)
        await pilot.press("r")
        await pilot.pause()
        lines = len(MAIN.read_bytes().splitlines())
        size = MAIN.stat().st_size
        assert [n.message for n in app._notifications][-1] == f"re-read {MAIN.name}: {size / 1024:.1f} KiB, {lines:,} lines"
        assert shown(app) == before
        await check_help_and_home(pilot, app, pi)
    assert app.return_value == pi
