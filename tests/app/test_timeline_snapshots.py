"""SVG snapshots of the Timeline tab (issue 33): a Pi session with compactions and a Claude Code
session, at 160×48 and 80×24, live and scrubbed. Update with `--snapshot-update` after looking
at the new SVGs (`uv run python scripts/screenshots.py --png FILE.svg`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4tui.app import Ds4App
from tests.app.test_dashboard import settle
from tests.conftest import FIXTURES

PI = FIXTURES / "pi" / "03-compaction.jsonl"
CLAUDE = FIXTURES / "claude" / "autocompact-diagnostics.jsonl"
SIZES = [(160, 48), (80, 24)]


def app(path: Path) -> Ds4App:
    """The dashboard with a fixed clock and no file watcher (deterministic screens)."""
    return Ds4App(path, watch=False, retrieval=False, now=lambda: 1.9e9)


async def timeline(pilot) -> None:  # type: ignore[no-untyped-def]
    await settle(pilot, pilot.app)
    await pilot.press("T")
    await pilot.pause(0.5)
    await settle(pilot, pilot.app)


async def scrubbed(pilot) -> None:  # type: ignore[no-untyped-def]
    await timeline(pilot)
    await pilot.press("left_curly_bracket", "left_square_bracket")  # the request before the last compaction
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("path", [PI, CLAUDE], ids=["pi-compactions", "claude-code"])
def test_timeline_tab(snap_compare, path: Path, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(path), terminal_size=size, run_before=timeline)


@pytest.mark.parametrize("path", [PI, CLAUDE], ids=["pi-compactions", "claude-code"])
def test_timeline_scrubbed(snap_compare, path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(path), terminal_size=(160, 48), run_before=scrubbed)
