"""`ds4tui PATH` on a Codex rollout: the read-only live view (real Textual app via `run_test`)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from ds4tui.codex_app import CodexApp

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
