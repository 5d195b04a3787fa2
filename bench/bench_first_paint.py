#!/usr/bin/env python3
"""First paint of the TUI (issue 14): process start → the context map drawn, on a large session.

    uv run python bench/bench_first_paint.py [SESSION.jsonl] [--runs 5]

Default session: `99-large.jsonl` from `$DS4TUI_SHARED`, `../shared` or `../../shared` (copied
to bench/out/ first). Each run is a fresh process (`--child`) that starts the dashboard as
`ds4tui PATH` does (`launch.run_tui`: the model table, then `launch.dashboard`, which forks
the copy that reads the file for the first paint before Textual is imported), runs it headless
(Textual's `run_test`, 160×50 cells; file watcher and DS4 retrieval off, so nothing is written)
and notes the first frame the compositor paints (`App._display`) while the pixel map holds the
session's cells (from the copy's view model or the app's own snapshot, whichever is first; a
file above 64 MiB has no copy: its first read comes in slices, the first painted with "reading
N%"), and the first frame with the whole file on screen ("whole file on screen").
`--no-copy`: without the forked copy (the app reads the file itself, as before). Time is CLOCK_MONOTONIC (shared by all processes) from just before the
parent starts the child to that moment: interpreter start, imports, reading the file, the
chars-v1 snapshot and the paint. Prints the median, min and max; target ≤ 0.5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def child(path: Path, copy: bool = True) -> None:
    """In a fresh process: start the app, print CLOCK_MONOTONIC when the map is drawn: the first
    compositor frame (`App._display`, called by every frame, also headless) painted while the
    pixel map holds the session's cells."""
    from ds4sessions.agents.pi.discovery import load_model_table

    from ds4tui.launch import dashboard

    models = load_model_table()
    if copy:
        app = dashboard(path, models, watch=False, retrieval=False)
    else:
        from ds4tui.app import Ds4App

        app = Ds4App(path, models=models, watch=False, retrieval=False)
    from textual.app import App

    from ds4tui.widgets.pixel_map import PixelMap

    painted: list[float] = []
    complete: list[float] = []
    display = App._display

    def timed_display(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = display(self, *args, **kwargs)
        if not complete:
            maps = app.query(PixelMap)
            if maps and any(c.category != "free" for c in maps.first().cells):
                if not painted:
                    painted.append(time.monotonic())
                if app.view.header.reading is None:  # the whole file (not a slice of a first read)
                    complete.append(time.monotonic())
        return result

    App._display = timed_display  # type: ignore[method-assign]

    async def run() -> tuple[float, float]:
        async with app.run_test(size=(160, 50)):
            while not complete:
                await asyncio.sleep(0.002)
            return painted[0], complete[0]

    print(*asyncio.run(run()))


def main() -> int:
    """Run `--runs` fresh children and print the first-paint times."""
    from bench_cold import OUT, copy_of, large_session

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("session", nargs="?", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-copy", action="store_true", help="without the forked copy for the first paint")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, copy=not args.no_copy)
        return 0
    source = args.session or large_session()
    if source is None:
        print("bench_first_paint: 99-large.jsonl not found (set DS4TUI_SHARED or pass a file)", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    path = copy_of(source)
    from userenv import user_env, warm_bytecode

    warm_bytecode()  # (each child starts as a user's second start does: bench/userenv.py)
    times, whole = [], []
    for _ in range(args.runs):
        start = time.monotonic()
        argv = [sys.executable, __file__, "--child", str(path)] + (["--no-copy"] if args.no_copy else [])
        out = subprocess.run(argv, capture_output=True, text=True, check=True, env=user_env())
        first, done = (float(x) for x in out.stdout.strip().splitlines()[-1].split())
        times.append(first - start)
        whole.append(done - start)
    print(f"first paint {source.name}{' (no copy)' if args.no_copy else ''}: median {statistics.median(times):.2f} s (min {min(times):.2f}, "
          f"max {max(times):.2f}; {args.runs} runs; load {os.getloadavg()[0]:.2f}; target 0.5 s); "
          f"whole file on screen: median {statistics.median(whole):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
