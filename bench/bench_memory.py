#!/usr/bin/env python3
"""Memory of a session on screen (issue 32): the dashboard's ingest + derive against Pi's own load.

    uv run python bench/bench_memory.py [--sizes 1000,10000,50000,200000] [--appends 30] [--no-pi]

Per size, in fresh processes (peak RSS = the child's own `ru_maxrss`, reported by
`/usr/bin/time -f %M`; the largest process, not a sum):

- ds4tui: `bench/mem_driver.py COPY --appends N`: the session read and derived as the
  dashboard's feed runs it (`SessionPipeline.snapshots` in the first read's slices, a view model
  per snapshot and per `Derived`, `LiveSession.prepare`, the derive pass: plan, cache, timeline,
  retrieval), then N appended lines each read, viewed, prepared and derived; what stays is what
  the feed keeps (the pipeline and the newest snapshot, derived views and view model). Textual
  is imported by the view model's module but no screen is drawn: the real TUI adds its widgets'
  few MiB (docs/performance.md, "Issue 32");
- Pi: `node bench/pi_open.mjs COPY` (Pi 1.6.0's `SessionManager.open` + `buildSessionContext`,
  the package's own load), when `scripts/install_pi.sh` installed it (`--no-pi` skips it).

Inputs: synthetic Pi sessions (`bench_planner.synthetic_session`, 4 messages a turn), written
once to bench/out/ (gitignored) and copied per run (the appends change the copy).

Prints per size: file MiB, ds4tui peak RSS MiB (and its ratio to the file), Pi's peak RSS, the
ds4tui seconds; then the growth per added turn between consecutive sizes (KiB per turn).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_cold import NODE, PI_PACKAGE, TIME, synthetic  # noqa: E402

MIB = 1 << 20


def peak_rss(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, float, str]:
    """(peak RSS bytes, wall seconds, stdout) of `argv` run to its end."""
    with tempfile.NamedTemporaryFile(suffix=".time") as report:
        start = time.perf_counter()
        proc = subprocess.run([str(TIME), "-f", "%M", "-o", report.name, *argv], capture_output=True, text=True,
                              env=env, check=False)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        return int(Path(report.name).read_text().split()[-1]) * 1024, wall, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,50000,200000")
    ap.add_argument("--appends", type=int, default=30)
    ap.add_argument("--no-pi", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    pi = not args.no_pi and NODE.exists() and PI_PACKAGE.exists()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        for turns in sizes:
            source = synthetic(turns)
            copy = Path(tmp) / f"s{turns}.jsonl"
            shutil.copyfile(source, copy)
            rss, wall, out = peak_rss([sys.executable, str(ROOT / "bench" / "mem_driver.py"), str(copy),
                                       "--appends", str(args.appends)])
            result = json.loads(out.strip().splitlines()[-1])
            pi_rss = None
            if pi:
                shutil.copyfile(source, copy)
                pi_rss, _, _ = peak_rss([str(NODE), str(ROOT / "bench" / "pi_open.mjs"), str(copy)])
            size = source.stat().st_size
            rows.append((turns, size, rss, pi_rss, wall, result))
            print(f"{turns:>7,} turns {size / MIB:7.1f} MiB: ds4tui peak {rss / MIB:7.0f} MiB "
                  f"({rss / size:5.1f}× the file) · Pi {pi_rss / MIB if pi_rss else float('nan'):5.0f} MiB · "
                  f"{wall:5.1f} s (open {result['seconds_open']} s; RSS after the read "
                  f"{result['phases_mib']['read']} MiB, after the derive pass {result['phases_mib']['derived']} MiB)",
                  flush=True)
    for (t0, _, r0, p0, _, _), (t1, _, r1, p1, _, _) in zip(rows, rows[1:]):
        pi_growth = f", Pi {(p1 - p0) / 1024 / (t1 - t0):.2f}" if p0 and p1 else ""
        print(f"growth {t0:,} → {t1:,} turns: ds4tui {(r1 - r0) / 1024 / (t1 - t0):.2f} KiB per turn{pi_growth}")


if __name__ == "__main__":
    main()
