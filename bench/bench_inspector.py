#!/usr/bin/env python3
"""Opening the inspector on an entry (issue 32): the map's cursor lands on a message's cell → the
frame that shows that message in the inspector.

    uv run python bench/bench_inspector.py [--sizes 10000,50000] [--picks 40] [--seed 3]

Drives the real app (`Ds4App` under `App.run_test()`, headless, 160×48 cells, as `ds4tui PATH`
opens it: watcher, DS4 plan, cache view and retrieval on) on a synthetic Pi session per size
(`bench_planner.synthetic_session`, made once in bench/out/). Once the session is read and
planned, it selects `--picks` context messages spread over the whole context (the first, the
last, evenly spaced and seeded random ones, each visited once, in shuffled order) the way the
map's cursor does (`PixelMap.CellSelected` for the message's cell), and times each from posting
that message until the compositor has painted a frame (`App._display`) after the inspector was
handed the message (`EntryInspector.show`). Prints, per size, the median, p95 and max in ms.
Target (issue 32): ≤ 50 ms for any entry.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
OUT = ROOT / "bench" / "out"


def session(turns: int) -> Path:
    """bench/out/synthetic-N.jsonl (made once; `bench_cold.synthetic`)."""
    from bench_cold import synthetic

    OUT.mkdir(parents=True, exist_ok=True)
    return synthetic(turns)


async def measure(path: Path, picks: int, seed: int) -> list[float]:
    """Seconds from selecting each picked message to the frame that shows it in the inspector."""
    from textual.app import App

    from ds4tui.app import Ds4App
    from ds4tui.widgets.panels import EntryInspector
    from ds4tui.widgets.pixel_map import PixelMap

    shown: dict[str, Any] = {"index": None, "painted": None}
    display, show = App._display, EntryInspector.show

    def timed_show(self: Any, snap: Any, index: Any, *args: Any, **kwargs: Any) -> Any:
        result = show(self, snap, index, *args, **kwargs)
        shown["index"], shown["painted"] = index, None
        return result

    def timed_display(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = display(self, *args, **kwargs)
        if shown["index"] is not None and shown["painted"] is None:
            shown["painted"] = time.perf_counter()
        return result

    EntryInspector.show = timed_show  # type: ignore[method-assign]
    App._display = timed_display  # type: ignore[method-assign]
    times: list[float] = []
    try:
        app = Ds4App(path, now=time.time)
        async with app.run_test(size=(160, 48)) as pilot:
            for _ in range(6000):  # read and planned (≤ 10 min)
                await pilot.pause(0.1)
                if app.snapshot is not None and not app.snapshot.unread_bytes and app.derived is not None \
                        and app.derived.plan is not None:
                    break
            await pilot.pause(1.0)
            n = len(app.snapshot.context.messages)
            rng = random.Random(seed)
            chosen = {0, n - 1, *(round(i * (n - 1) / (picks // 2)) for i in range(picks // 2))}
            while len(chosen) < picks and len(chosen) < n:
                chosen.add(rng.randrange(n))
            order = sorted(chosen)
            rng.shuffle(order)
            pixel_map = app.screen.query_one(PixelMap)
            ids = app.snapshot.context.message_entry_ids
            for index in order:
                shown["index"], shown["painted"] = None, None
                start = time.perf_counter()
                pixel_map.post_message(PixelMap.CellSelected(ids[index], index, pixel_map, "user"))
                while not (shown["index"] == index and shown["painted"] is not None):
                    await asyncio.sleep(0.0005)
                    if time.perf_counter() - start > 10:
                        raise SystemExit(f"bench_inspector: message {index} was not shown within 10 s")
                times.append(shown["painted"] - start)
                await pilot.pause(0.05)
    finally:
        EntryInspector.show = show  # type: ignore[method-assign]
        App._display = display  # type: ignore[method-assign]
    return times


def main() -> int:
    """Command line (module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,50000")
    ap.add_argument("--picks", type=int, default=40)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("DS4TUI_STATE_DIR", str(OUT / "state-inspector"))
    for size in (int(s) for s in args.sizes.split(",") if s):
        path = session(size)
        ms = sorted(t * 1000 for t in asyncio.run(measure(path, args.picks, args.seed)))
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        print(f"{size:>7,} turns: inspector on an entry median {statistics.median(ms):.1f} ms p95 {p95:.1f} ms "
              f"(max {ms[-1]:.1f}, n={len(ms)}; load {os.getloadavg()[0]:.2f}; target ≤ 50 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
