"""Drive a session through ingest + derive as the dashboard's feed does, in one process.

    uv run python bench/mem_driver.py PATH [--appends N] [--tracemalloc TOP [--frames N]] [--no-derive]

What `ds4tui.feed.SessionFeed` runs for a session read without the forked copy (above 64 MiB,
or the copy refused): the first read in slices (4 MiB, doubling to 16 MiB), each slice's
snapshot turned into a view model (`viewmodel.build`), then the exact snapshot, its view model,
`LiveSession.prepare`, and the derive pass (`SessionPipeline.derive`: plan, cache, timeline,
retrieval) with a view model per `Derived`; then `--appends` appended lines, each read, viewed,
prepared and derived the same way. What the process keeps is what the feed keeps: the pipeline
and the newest (snapshot, derived, view model).

Prints one JSON line: peak RSS (`ru_maxrss`, bytes), RSS at the end (bytes), seconds, and with
`--tracemalloc TOP` the TOP allocation sites (file:line, bytes, count) still held at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def _rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def append_lines(path: Path, count: int) -> None:
    """Append `count` message entries that extend the leaf (a user prompt, a tool call, its
    result, a reply, repeated), as bench_screen does."""
    import orjson

    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - 65536))
        tail = f.read().splitlines()
    leaf = json.loads(tail[-1])["id"]
    usage = {"input": 3, "output": 40, "cacheRead": 1000, "cacheWrite": 60, "totalTokens": 1103}
    out = []
    t = 1_800_000_000_000
    for i in range(count):
        k = i % 4
        call = f"tapp_{i // 4:06d}"
        message = [
            {"role": "user", "content": [{"type": "text", "text": f"appended step {i}"}], "timestamp": t},
            {"role": "assistant", "content": [{"type": "toolCall", "id": call, "name": "read", "arguments": {"path": "a.py"}}],
             "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "toolUse", "timestamp": t},
            {"role": "toolResult", "toolCallId": call, "toolName": "read", "content": [{"type": "text", "text": "y = 2\n" * 30}],
             "isError": False, "timestamp": t},
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}], "provider": "anthropic",
             "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "stop", "timestamp": t},
        ][k]
        entry_id = f"app{i:07d}"
        out.append(orjson.dumps({"type": "message", "id": entry_id, "parentId": leaf,
                                 "timestamp": "2026-01-01T00:00:00.000Z", "message": message}) + b"\n")
        leaf = entry_id
        t += 1
    yield_lines = out
    for line in yield_lines:
        with open(path, "ab") as f:
            f.write(line)
        yield


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path", type=Path)
    ap.add_argument("--appends", type=int, default=0)
    ap.add_argument("--tracemalloc", type=int, default=0, metavar="TOP")
    ap.add_argument("--frames", type=int, default=1, metavar="N",
                    help="with --tracemalloc: group by the N innermost frames (who made it, and who asked)")
    ap.add_argument("--no-derive", action="store_true")
    ap.add_argument("--inspect", type=int, default=0, metavar="N",
                    help="also build the inspector's text for N entries spread over the session")
    args = ap.parse_args()
    if args.tracemalloc:
        import tracemalloc

        tracemalloc.start(max(1, args.frames))
    try:  # what `ds4tui.launch.run_tui` does first (issue 32: cl100k without tiktoken's Python ranks)
        from ds4tui.launch import run_tui  # noqa: F401
        from ds4tui.mapjson import _load_cl100k_lean

        if "LEAN_CL100K()" in open(run_tui.__code__.co_filename).read():  # (as the ds4tui script sets it)
            _load_cl100k_lean()
    except ImportError:
        pass
    from ds4sessions.derive.pipeline import SessionPipeline
    from ds4sessions.runtime import GcPacer
    from ds4tui import viewmodel
    from ds4tui.feed import FIRST_SLICE_BYTES, MAX_SLICE_BYTES

    pacer = GcPacer()
    pacer.start()
    started = time.perf_counter()
    pipeline = SessionPipeline(args.path)
    built: list = [None, None, None]

    def publish(snapshot=None, derived=None) -> None:  # noqa: ANN001
        snap = snapshot or built[0]
        last = derived or built[1]
        view = viewmodel.build(snap, last, previous=built[2])
        built[:] = [snap, last, view]

    def derive(snap) -> None:  # noqa: ANN001
        if args.no_derive:
            return
        for derived in pipeline.derive(snap, now=time.time(), checkpoint=pacer.at_checkpoint):
            publish(derived=derived)
        found = pacer.after_pass()
        if os.environ.get("MEM_DRIVER_GC_TRACE"):
            print("pass", pacer._passes, "found", found, "full", gc.collect(), "rss", _rss_now() >> 20, file=sys.stderr)

    limit: int | None = FIRST_SLICE_BYTES
    while True:
        snap = None
        for snap in pipeline.snapshots(limit=limit):
            publish(snapshot=snap)
        if snap is not None and snap.unread_bytes:
            limit = min(2 * limit, MAX_SLICE_BYTES) if limit else None
            continue
        break
    phases = {"read": _rss_now() >> 20, "frozen": gc.get_freeze_count()}
    pipeline.prepare()
    derive(built[0])
    phases["derived"] = _rss_now() >> 20
    opened = time.perf_counter() - started
    peak_open = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    for _ in append_lines(args.path, args.appends) if args.appends else ():
        for snap in pipeline.snapshots():
            publish(snapshot=snap)
        pipeline.prepare()
        derive(built[0])
    if args.inspect:
        view = built[2]
        snap = built[0]
        n = len(snap.session.entries)
        for i in range(args.inspect):
            entry = snap.session.entries[(i * 7919) % n]
            viewmodel.inspector_lines(snap, entry.id) if hasattr(viewmodel, "inspector_lines") else None
    gc.collect()
    result = {
        "path": str(args.path),
        "bytes": args.path.stat().st_size,
        "seconds_open": round(opened, 2),
        "seconds": round(time.perf_counter() - started, 2),
        "peak_open_rss": peak_open,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "end_rss": _rss_now(),
        "entries": len(built[0].session.entries),
        "phases_mib": phases,
    }
    if args.tracemalloc:
        import tracemalloc

        snapshot = tracemalloc.take_snapshot()
        stats = snapshot.statistics("lineno" if args.frames <= 1 else "traceback")
        result["traced"] = sum(s.size for s in stats)
        result["top"] = [(" <- ".join(f"{f.filename.split('/src/')[-1]}:{f.lineno}" for f in s.traceback), s.size, s.count)
                         for s in stats[: args.tracemalloc]]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
