#!/usr/bin/env python3
"""Large Claude Code and Codex sessions beside the Pi path (issue 36): `map --json` and the
dashboard on files of the same size.

    DS4TUI_SHARED=/work/shared uv run python bench/bench_agents_large.py [--mb 95] [--rounds 5]
        [--no-compaction] [--no-dashboard] [--ds4tui PATH]

Makes (once, in bench/out/) a Claude Code transcript and a Codex rollout of `--mb` MiB by
repeating the shared samples with fresh ids (`repeat_sample.py`; `--no-compaction`: without the
samples' compaction, so the context is the whole file) and a Pi session of the same size
(`bench_planner.synthetic_session`). Then, `--rounds` times, in turn: `ds4tui map --json` on the
Claude Code file, on the Pi file, on the Codex file, on the Pi file (whole processes, each under
`/usr/bin/time -f %M` for its peak RSS; `os.wait4` would report the forking parent's), and
prints per agent the median wall time, the median of the ratios taken pair by pair (agent / the
Pi run next to it) with their min and max, and the peak RSS against the file's size.

Then (unless `--no-dashboard`) the dashboard, `--rounds` fresh processes per file in turn
(`bench_first_paint.py --child`: the app started as `ds4tui PATH` starts it, headless): the
first paint (the map drawn with the session's cells, the header saying "reading N%" for a slice)
and the whole file on screen, medians. Done-when (issue 36): map ≤ 1.2× the Pi path, peak RSS ≤
2× the file; the dashboard paints within 1 s and has the whole file on screen within 2× its
map --json time. Children run as a user's second start does: with the bytecode written
(`userenv.py`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
OUT = ROOT / "bench" / "out"

from userenv import user_env, warm_bytecode  # noqa: E402


def files(mb: float, compaction: bool) -> dict[str, Path]:
    """The three sessions of about `mb` MiB (made once, reused)."""
    import repeat_sample

    OUT.mkdir(parents=True, exist_ok=True)
    tag = f"{mb:g}{'' if compaction else '-nc'}"
    paths = {"claude": OUT / f"claude-{tag}.jsonl", "codex": OUT / f"codex-{tag}.jsonl", "pi": OUT / f"pi-{mb:g}.jsonl"}
    for agent, path in paths.items():
        if not path.exists():
            if agent == "pi":
                repeat_sample.write_pi(path, mb)
            else:
                repeat_sample.write_repeated(agent, path, mb, repeat_sample.shared_dir(), compaction)
    return paths


def run_map(ds4tui: str, path: Path) -> tuple[float, int]:
    """(wall seconds, peak RSS KiB) of one `ds4tui map --json PATH`, output thrown away."""
    timer = shutil.which("time") or "/usr/bin/time"
    start = time.monotonic()
    done = subprocess.run([timer, "-f", "%M", ds4tui, "map", "--json", str(path)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=True, env=user_env())
    wall = time.monotonic() - start
    return wall, int(done.stderr.strip().splitlines()[-1])


def first_paint(path: Path) -> tuple[float, float]:
    """(first paint, whole file on screen) seconds of one fresh dashboard process."""
    start = time.monotonic()
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_first_paint.py"), "--child", str(path)],
                         capture_output=True, text=True, check=True, env=user_env())
    first, done = (float(x) for x in out.stdout.strip().splitlines()[-1].split())
    return first - start, done - start


def main() -> int:
    """Command line (module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=95.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-compaction", action="store_true")
    ap.add_argument("--no-dashboard", action="store_true")
    ap.add_argument("--ds4tui", default=str(Path(sys.executable).parent / "ds4tui"))
    args = ap.parse_args()
    paths = files(args.mb, not args.no_compaction)
    warm_bytecode()  # (timed as a user's second start: bench/userenv.py)
    size = {a: p.stat().st_size for a, p in paths.items()}
    walls: dict[str, list[float]] = {a: [] for a in paths}
    rss: dict[str, list[int]] = {a: [] for a in paths}
    ratios: dict[str, list[float]] = {"claude": [], "codex": []}
    for _ in range(args.rounds):
        for agent in ("claude", "codex"):
            a_wall, a_rss = run_map(args.ds4tui, paths[agent])
            p_wall, p_rss = run_map(args.ds4tui, paths["pi"])
            walls[agent].append(a_wall)
            walls["pi"].append(p_wall)
            rss[agent].append(a_rss)
            rss["pi"].append(p_rss)
            ratios[agent].append(a_wall / p_wall)
    print(f"map --json, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}:")
    for agent in ("claude", "codex", "pi"):
        mib = max(rss[agent]) / 1024
        line = (f"  {agent:6} {size[agent] / (1 << 20):6.1f} MiB  wall {statistics.median(walls[agent]):.2f} s  "
                f"peak {mib:.0f} MiB ({mib * (1 << 20) / size[agent]:.2f}× the file)")
        if agent in ratios:
            r = ratios[agent]
            line += f"  / Pi {statistics.median(r):.2f} (min {min(r):.2f}, max {max(r):.2f}; target ≤ 1.2)"
        print(line)
    if args.no_dashboard:
        return 0
    paints: dict[str, list[tuple[float, float]]] = {a: [] for a in paths}
    for _ in range(args.rounds):
        for agent in ("claude", "codex", "pi"):
            paints[agent].append(first_paint(paths[agent]))
    print(f"dashboard, {args.rounds} runs each, load {os.getloadavg()[0]:.2f}:")
    for agent in ("claude", "codex", "pi"):
        first = statistics.median(p[0] for p in paints[agent])
        whole = statistics.median(p[1] for p in paints[agent])
        print(f"  {agent:6} first paint {first:.2f} s (target ≤ 1 s)  whole file on screen {whole:.2f} s "
              f"= {whole / statistics.median(walls[agent]):.2f}× its map --json (target ≤ 2)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
