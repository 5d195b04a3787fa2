#!/usr/bin/env python3
"""Save an SVG (and, with `rsvg-convert`, a PNG) of the home screen over the sessions the
environment points at, now: the real `HomeScreen`, Textual's headless driver, the real clock.

    uv run python scripts/screenshot_home.py screenshots/home-two-agents.svg [--size 150x24]

Point the agents' folders with their own variables first (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`,
`PI_CODING_AGENT_DIR`, `HOME`; `DS4TUI_STATE_DIR` for the index), e.g. at the folders of
`tests/agent-oracle/run_live_two.sh` while two real agents run. Unlike scripts/screenshots.py this
is not deterministic (live data, real time): it records what a person saw at one instant.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


async def render(out: Path, size: tuple[int, int]) -> None:
    """Run the home screen until every listed file is read, then save `out`."""
    from textual.app import App

    from ds4tui.screens.home import HomeScreen

    class Shot(App[None]):
        def on_mount(self) -> None:
            self.push_screen(HomeScreen(poll_s=None))

    app = Shot()
    async with app.run_test(size=size, notifications=True) as pilot:
        screen = app.screen
        for _ in range(1000):
            if isinstance(screen, HomeScreen) and screen._complete and not screen._pending:
                break
            await asyncio.sleep(0.01)
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen.tick()
        await pilot.pause()
        app.save_screenshot(filename=out.name, path=str(out.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", default="150x24", help="COLUMNSxROWS")
    args = parser.parse_args()
    width, height = (int(x) for x in args.size.lower().split("x"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(render(args.out, (width, height)))
    print(args.out)
    from screenshots import svg_to_png  # scripts/screenshots.py: the PNG keeps every space of the SVG

    png = svg_to_png(args.out)
    if png is not None:
        print(png)


if __name__ == "__main__":
    main()
