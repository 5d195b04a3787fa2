"""Benchmark the Timeline tab (issue 33): one scrub step, from the key to the painted frame.

    uv run python bench/bench_timeline.py [--turns 10000] [--steps 30]

Opens a synthetic Pi session of `--turns` turns (`bench_planner.synthetic_session`) in the real
app (`Ds4App` under `App.run_test()`, headless, 120×40), waits for the first derived pass (the
timeline), shows the Timeline tab (`T`), then presses `[` `--steps` times (one request back
each) and `]`, `{`, `}` a few times: per key, the time from the key's dispatch to the first
compositor refresh after the dashboard showed the new request (`App._display`, as
`bench_screen.py` hooks it). Prints median, p95 and max in ms, and the timeline's size.
Target (issue 33): ≤ 50 ms per step at 10,000 turns.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


async def drive(path: Path, steps: int) -> tuple[list[float], int]:
    from ds4tui.app import Ds4App

    app = Ds4App(path, now=time.time, watch=False)
    painted: list[float] = []
    original = type(app)._display

    def display(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = original(self, *args, **kwargs)
        painted.append(time.perf_counter())
        return out

    type(app)._display = display  # type: ignore[method-assign]
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            deadline = time.perf_counter() + 300
            while time.perf_counter() < deadline:
                derived = app.derived
                if derived is not None and derived.timeline is not None and app.snapshot is not None \
                        and derived.version == app.snapshot.version:
                    break
                await asyncio.sleep(0.05)
            await pilot.press("T")
            await asyncio.sleep(2.0)
            rows = len(app.derived.timeline.rows)
            keys = ["left_square_bracket"] * steps + ["right_square_bracket"] * 5 + ["left_curly_bracket"] * 3
            times: list[float] = []
            screen = app.dashboard
            for key in keys:
                before = screen._scrub
                t0 = time.perf_counter()
                n = len(painted)
                await pilot.press(key)
                while time.perf_counter() - t0 < 5 and (len(painted) == n or screen._scrub == before):
                    await asyncio.sleep(0.001)
                times.append(painted[-1] - t0)
                await asyncio.sleep(0.05)
    finally:
        type(app)._display = original  # type: ignore[method-assign]
    return times, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10000)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_planner import synthetic_session

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DS4TUI_STATE_DIR"] = str(Path(tmp) / "state")
        path = Path(tmp) / "session.jsonl"
        synthetic_session(path, args.turns)
        times, rows = asyncio.run(drive(path, args.steps))
    ms = sorted(t * 1000 for t in times)
    p95 = ms[min(len(ms) - 1, max(0, round(0.95 * len(ms)) - 1))]
    print(f"{args.turns:,} turns, {rows:,} timeline rows: scrub step median {statistics.median(ms):.1f} ms "
          f"p95 {p95:.1f} ms max {ms[-1]:.1f} ms (n={len(ms)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
