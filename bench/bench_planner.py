#!/usr/bin/env python3
"""Planner timings (issue 3): DS4 re-plan cost at 100 / 1,000 / 10,000 atomic groups, and the
re-plan after one appended line of `../shared/sessions-pi/99-large.jsonl`.

    uv run python bench/bench_planner.py [--runs 7] [--sizes 100,1000,10000] [--app-gc]

Synthetic sessions are Pi JSONL files of N turns (user prompt, assistant tool call, tool result,
assistant answer: one atomic group each) with a 200k-token model. Reported, as medians over
`--runs` runs in milliseconds:
- `planner`: `plan_managed_context` alone, with precomputed estimates (`native_tokens`) and a cold
  grouping (no `AtomicGrouper` kept between calls);
- `append`: `LivePlanner.plan` of the snapshot after one more line was appended to the session
  (the file is written without its last `--runs` lines, then they are appended one at a time):
  what each tail update costs besides reading the file. This is the issue's "re-plan";
- `unchanged`: `LivePlanner.plan` again on the same snapshot;
- `cold plan`: a fresh `LivePlanner` (every message estimated and grouped).
Growth ratios compare each size with the previous one (10x the groups: linear is x10).
For 99-large: `refresh` (LiveSession.refresh of one more line) and `plan` (LivePlanner.plan of
the new snapshot), over the last `--runs` lines appended one at a time.
`pipeline` (issue 10): the whole derive step of `SessionPipeline.updates()` (retrieval off) after
one appended line at 1,000 groups, with the planner runs it made (`plan_managed_context` calls)
per append. `cpu` columns are this process's CPU time (`time.process_time`), steadier than wall
time on a shared machine. `--sizes 100,1000` limits the synthetic sizes. `--app-gc` runs with
the dashboard's collector thresholds (`ds4sessions.runtime.THRESHOLD`; the app collects the young
generation between paints, so a plan does not pay for it); the default is Python's.
The load average (1 min) is printed before and after: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ds4core.estimate import message_tokens
from ds4core.planner import plan_managed_context
from ds4sessions.agents.pi.live import LiveSession, Snapshot
from ds4sessions.derive.planning import LivePlanner

ROOT = Path(__file__).resolve().parents[1]
LARGE = Path(os.environ.get("DS4TUI_SHARED", ROOT.parent / "shared")) / "sessions-pi" / "99-large.jsonl"
SIZES = (100, 1_000, 10_000)


def synthetic_session(path: Path, groups: int) -> None:
    """Write a Pi session of `groups` turns (4 messages each) to `path`."""
    lines = [
        {"type": "session", "version": 3, "id": "bench", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp/bench"},
        {"type": "model_change", "id": "m0", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
         "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
    ]
    parent = "m0"
    t = 1_767_225_600_000
    for g in range(groups):
        call = f"toolu_{g:06d}"
        usage = {"input": 3, "output": 40, "cacheRead": 1000 + 60 * g, "cacheWrite": 60, "totalTokens": 1103 + 60 * g}
        messages = [
            {"role": "user", "content": [{"type": "text", "text": f"step {g}: look at file_{g}.py and fix the failing check"}], "timestamp": t},
            {"role": "assistant", "content": [{"type": "toolCall", "id": call, "name": "read", "arguments": {"path": f"src/file_{g}.py"}}],
             "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "toolUse", "timestamp": t + 1},
            {"role": "toolResult", "toolCallId": call, "toolName": "read", "content": [{"type": "text", "text": "x = 1\n" * (20 + g % 50)}],
             "isError": False, "timestamp": t + 2},
            {"role": "assistant", "content": [{"type": "text", "text": f"Fixed file_{g}.py."}], "provider": "anthropic",
             "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "stop", "timestamp": t + 3},
        ]
        for k, message in enumerate(messages):
            entry_id = f"e{g:06d}{k}"
            lines.append({"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z", "message": message})
            parent = entry_id
        t += 10
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def median_ms(fn, runs: int) -> float:  # type: ignore[no-untyped-def]
    """Median wall time of `fn()` over `runs` calls, in milliseconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def appended_plans(path: Path, lines: list[bytes], runs: int) -> tuple[list[float], int, LivePlanner, Snapshot]:
    """Write `lines` without the last `runs`, plan, then append those one at a time and time
    `LivePlanner.plan` of each new snapshot. Returns (plan ms per append, most messages estimated
    by one of those plans, the planner, the last snapshot)."""
    path.write_bytes(b"".join(lines[:-runs]))
    live = LiveSession(path)
    planner = LivePlanner()
    planner.plan(live.refresh())
    plan_ms, estimated = [], []
    snap = None
    with path.open("ab") as f:
        for line in lines[-runs:]:
            f.write(line)
            f.flush()
            snap = live.refresh()
            assert snap is not None
            start, cpu = time.perf_counter(), time.process_time()
            view = planner.plan(snap)
            plan_ms.append(((time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000))
            estimated.append(view.estimated_messages)
    assert snap is not None
    return plan_ms, max(estimated), planner, snap  # type: ignore[return-value]


def bench_sizes(runs: int, workdir: Path, sizes: tuple[int, ...] = SIZES) -> list[tuple[int, float, float, float, float, int, float]]:
    """(groups, planner ms, append re-plan ms, unchanged re-plan ms, cold plan ms, most messages
    estimated per append, append re-plan cpu ms) per synthetic size."""
    rows = []
    for groups in sizes:
        path = workdir / f"synthetic-{groups}.jsonl"
        synthetic_session(path, groups)
        append_ms, estimated, planner, snap = appended_plans(path, path.read_bytes().splitlines(keepends=True), runs)
        view = planner.plan(snap)
        assert len(view.plan.groups) == groups, (len(view.plan.groups), groups)
        native = [m for m in snap.context.messages if m.get("role") != "system"]
        tokens = [message_tokens(m) for m in native]
        raw = median_ms(lambda: plan_managed_context(native, fixed_tokens=view.fixed_tokens, budget=view.budget,
                                                     config=view.awareness.context_config, native_tokens=tokens), runs)
        unchanged = median_ms(lambda: planner.plan(snap), runs)
        cold = median_ms(lambda: LivePlanner().plan(snap), max(3, runs // 2))
        wall = statistics.median(w for w, _ in append_ms)
        cpu = statistics.median(c for _, c in append_ms)
        rows.append((groups, raw, wall, unchanged, cold, estimated, cpu))
    return rows


def bench_pipeline(runs: int, workdir: Path, groups: int = 1_000) -> tuple[float, float, float]:
    """(median wall ms, median cpu ms, median planner runs) of `SessionPipeline.updates()` after
    one appended line, retrieval off, on a synthetic session of `groups` turns."""
    import ds4core.planner as core_planner
    from ds4sessions.derive.pipeline import SessionPipeline

    original = core_planner.plan_managed_context
    calls = [0]

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return original(*args, **kwargs)

    patched = [m for m in list(sys.modules.values()) if getattr(m, "plan_managed_context", None) is original]
    for module in patched:
        module.plan_managed_context = counted
    try:
        path = workdir / f"pipeline-{groups}.jsonl"
        synthetic_session(path, groups)
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-runs]))
        pipe = SessionPipeline(path, retrieval=False)
        now = 1_767_225_600.0 + 10 * groups
        list(pipe.updates(now=now))
        wall, cpu, runs_per = [], [], []
        with path.open("ab") as f:
            for line in lines[-runs:]:
                f.write(line)
                f.flush()
                calls[0] = 0
                start, c0 = time.perf_counter(), time.process_time()
                list(pipe.updates(now=now))
                wall.append((time.perf_counter() - start) * 1000)
                cpu.append((time.process_time() - c0) * 1000)
                runs_per.append(calls[0])
        return statistics.median(wall), statistics.median(cpu), statistics.median(runs_per)
    finally:
        for module in patched:
            module.plan_managed_context = original


def bench_append(runs: int, workdir: Path) -> tuple[float, float, int, int]:
    """(median refresh ms, median plan ms, groups, messages estimated per append) on 99-large."""
    lines = LARGE.read_bytes().splitlines(keepends=True)
    path = workdir / "99-large.jsonl"
    path.write_bytes(b"".join(lines[:-runs]))
    live = LiveSession(path)
    planner = LivePlanner()
    planner.plan(live.refresh())
    refresh_ms, plan_ms, estimated = [], [], []
    groups = 0
    with path.open("ab") as f:
        for line in lines[-runs:]:
            f.write(line)
            f.flush()
            start = time.perf_counter()
            snap = live.refresh()
            refresh_ms.append((time.perf_counter() - start) * 1000)
            assert snap is not None
            start = time.perf_counter()
            view = planner.plan(snap)
            plan_ms.append((time.perf_counter() - start) * 1000)
            estimated.append(view.estimated_messages)
            groups = len(view.plan.groups)
    return statistics.median(refresh_ms), statistics.median(plan_ms), groups, max(estimated)


def gc_thresholds() -> str:
    """The cyclic collector's thresholds, as `gc.get_threshold()` prints them."""
    import gc

    return str(gc.get_threshold())


def main() -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description="DS4 planner timings")
    parser.add_argument("--runs", type=int, default=7, help="runs per measurement (median)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="synthetic sizes (groups), comma-separated")
    parser.add_argument("--app-gc", action="store_true",
                        help="the dashboard's collector thresholds (ds4sessions.runtime.THRESHOLD): there the young "
                             "collections run between paints (GcPacer), not inside a plan")
    args = parser.parse_args()
    sizes = tuple(int(x) for x in args.sizes.split(",") if x)
    if args.app_gc:
        import gc

        from ds4sessions.runtime import THRESHOLD

        gc.set_threshold(*THRESHOLD)
    print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}; collector thresholds {gc_thresholds()}")
    with tempfile.TemporaryDirectory() as tmp:
        rows = bench_sizes(args.runs, Path(tmp), sizes)
        print(f"Planner time, median of {args.runs} runs (ms)")
        print(f"{'groups':>8} {'planner':>9} {'append':>9} {'append cpu':>11} {'unchanged':>10} {'cold plan':>10}   estimated/append")
        for groups, raw, append, unchanged, cold, estimated, cpu in rows:
            print(f"{groups:>8,} {raw:>9.2f} {append:>9.2f} {cpu:>11.2f} {unchanged:>10.2f} {cold:>10.2f}   {estimated}")
        for (small, *a), (large, *b) in zip(rows, rows[1:]):
            ratios = ", ".join(f"{name} x{after / before:.1f}" for name, before, after in
                               zip(("planner", "append", "unchanged", "cold plan"), a[:4], b[:4]))
            print(f"growth {small:,} -> {large:,} groups: {ratios}")
        wall, cpu, planner_runs = bench_pipeline(args.runs, Path(tmp))
        print(f"\npipeline: SessionPipeline.updates() after one appended line, 1,000 groups, retrieval off, median of {args.runs}")
        print(f"  wall {wall:8.2f} ms   cpu {cpu:8.2f} ms   planner runs per append {planner_runs:g}")
        if LARGE.exists():
            refresh, plan, groups, estimated = bench_append(args.runs, Path(tmp))
            print(f"\n99-large.jsonl, one appended line ({groups} groups in context), median of {args.runs} appends (ms)")
            print(f"  LiveSession.refresh  {refresh:8.2f}")
            print(f"  LivePlanner.plan     {plan:8.2f}   (messages estimated per append: at most {estimated})")
        else:
            print(f"\n{LARGE} is absent: append benchmark skipped", file=sys.stderr)
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
