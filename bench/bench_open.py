"""Benchmark the hot path of issue 2: cold open of a large session, one append, peak memory.

    uv run python bench/bench_open.py [SESSION.jsonl] [--runs 5] [--appends 30] [--groups 1000,10000]

Default session: ../shared/sessions-pi/99-large.jsonl (30 MB, 2,501 lines). Prints medians.

- cold open: a fresh process reads the whole file through `LiveSession.refresh()` (tailer →
  reader → context → chars-v1 counts → categories → turns: the computed map); then the exact
  cl100k refinement is timed separately (it runs in the background in the app).
- append: a copy of the file holding all but the last `appends` lines is opened; each remaining
  line is appended and `refresh()` timed until the updated snapshot exists.
- peak RSS: `ru_maxrss` of the cold-open process, as a ratio to the file size.
- synthetic appends: the same append measure on synthetic sessions of 1,000 and 10,000 turns
  (`bench_planner.synthetic_session`: 4 context messages per turn, so ~4k and ~40k context
  messages), plus the cl100k refinement of each appended snapshot (`LiveSession.refine`).
Targets (issue 2): cold open ≤ 1.5 s, append-to-update ≤ 100 ms median, peak RSS ≤ 4× file size.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "sessions-pi" / "99-large.jsonl"


def cold_open_child(path: str) -> None:
    """Run in a fresh process: time one cold open and the exact refinement; print JSON."""
    from ds4sessions.agents.pi.live import LiveSession

    t0 = time.perf_counter()
    live = LiveSession(Path(path))
    snap = live.refresh()
    t1 = time.perf_counter()
    live.refine(snap)
    t2 = time.perf_counter()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    print(json.dumps({"open_s": t1 - t0, "exact_s": t2 - t1, "rss_bytes": rss, "messages": len(snap.context.messages)}))


def bench_append(path: Path, appends: int, refine: bool = False) -> tuple[list[float], list[float]]:
    """Seconds per append-to-updated-snapshot for the last `appends` lines of `path`, and (with
    `refine`) seconds of the cl100k refinement of each of those snapshots."""
    from ds4sessions.agents.pi.live import LiveSession

    lines = path.read_bytes().splitlines(keepends=True)
    times: list[float] = []
    refines: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / path.name
        target.write_bytes(b"".join(lines[:-appends]))
        live = LiveSession(target)
        snap = live.refresh()
        if refine and snap is not None:
            live.refine(snap)
        for raw in lines[-appends:]:
            with target.open("ab") as f:
                f.write(raw)
            t0 = time.perf_counter()
            snap = live.refresh()
            times.append(time.perf_counter() - t0)
            assert snap is not None
            if refine:
                t0 = time.perf_counter()
                live.refine(snap)
                refines.append(time.perf_counter() - t0)
    return times, refines


def bench_synthetic_append(groups: int, appends: int) -> tuple[int, list[float], list[float]]:
    """`bench_append` (with refinement) on a synthetic session of `groups` turns; returns its
    context message count and the two timing lists."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_planner import synthetic_session

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"synthetic-{groups}.jsonl"
        synthetic_session(path, groups)
        times, refines = bench_append(path, appends, refine=True)
    return groups * 4, times, refines


def main() -> None:
    """Parse arguments, run the benchmarks, print medians and ratios to the targets."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("session", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--appends", type=int, default=30)
    parser.add_argument("--groups", default="1000,10000", help="synthetic session sizes in turns ('' to skip)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        cold_open_child(args.child)
        return
    path: Path = args.session
    if not path.exists():
        sys.exit(f"no session file at {path} (pass one, or put ../shared next to the project)")
    size = path.stat().st_size
    runs = []
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from userenv import user_env, warm_bytecode

    warm_bytecode()  # (each child starts as a user's second start does: bench/userenv.py)
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, __file__, "--child", str(path)], capture_output=True, text=True,
                             check=True, env=user_env())
        runs.append(json.loads(out.stdout))
    open_med = statistics.median(r["open_s"] for r in runs)
    exact_med = statistics.median(r["exact_s"] for r in runs)
    rss_max = max(r["rss_bytes"] for r in runs)
    appends, _ = bench_append(path, args.appends)
    app_med = statistics.median(appends)
    print(f"machine: {platform.machine()} · {os.cpu_count()} cores · Python {platform.python_version()} · {platform.platform()}")
    print(f"session: {path.name} · {size / 2**20:.1f} MiB · {runs[0]['messages']} context messages")
    print(f"cold open to computed map  median {open_med * 1000:7.1f} ms  (target 1500 ms, ratio {open_med / 1.5:.2f})")
    print(f"exact cl100k refinement    median {exact_med * 1000:7.1f} ms  (background)")
    print(f"append to updated map      median {app_med * 1000:7.1f} ms  (target 100 ms, ratio {app_med / 0.1:.2f}; "
          f"min {min(appends) * 1000:.1f}, max {max(appends) * 1000:.1f}, n={len(appends)})")
    print(f"peak RSS                   {rss_max / 2**20:7.1f} MiB  ({rss_max / size:.2f}× file size; target ≤ 4×)")
    for groups in (int(g) for g in args.groups.split(",") if g.strip()):
        messages, times, refines = bench_synthetic_append(groups, args.appends)
        print(f"synthetic {groups:>6,} turns (~{messages:,} messages): append to updated map median "
              f"{statistics.median(times) * 1000:7.1f} ms (max {max(times) * 1000:.1f}); "
              f"cl100k refine median {statistics.median(refines) * 1000:.1f} ms (max {max(refines) * 1000:.1f})")


if __name__ == "__main__":
    main()
