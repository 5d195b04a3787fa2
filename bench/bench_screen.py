"""Benchmark what the user sees: one appended line, from `write()` to the screen showing it.

    uv run python bench/bench_screen.py [--appends 30] [--pace 100,300] [--sizes 99-large,1000,10000]
    uv run python bench/bench_screen.py --sizes claude:10000,codex:10000   # other agents (issue 28)

Drives the real app (`Ds4App` under `App.run_test()`, headless, 120×40 cells, with its file
watcher, DS4 plan, cache view and retrieval as a user runs it) on a COPY of each session, and
appends `--appends` valid Pi message entries at the agent's pace (one every 100–300 ms, seeded):
a user prompt, an assistant tool call with usage, its tool result, an assistant reply with usage,
repeated, each one's `parentId` the previous leaf, so every line extends the branch.

Per appended line, the time runs from the `write()` (+ flush) until the map, the legend
(category list), the turn list and the header have all been given a snapshot that contains the
line, AND the screen's compositor has painted after that (`App._display` is called by every
compositor refresh, also headless; it renders each dirty widget's lines). The widgets' update
points are hooked (`HOOKS`: the methods that hand each widget its data), and the snapshot the
app holds at that call tells which lines it contains; the dashboard's `_show` is hooked too: it
hands each widget only what changed, so once it returns every widget shows its snapshot (a line
that changes only the provider's usage leaves the map's cells as they were). Later derived views (plan, cache,
retrieval) are not waited for, but they run on the same UI thread and so delay later lines.

Sizes: `99-large` ($DS4TUI_SHARED or ../shared: sessions-pi/99-large.jsonl, 30 MiB) and synthetic sessions of
1,000 and 10,000 turns (`bench_planner.synthetic_session`). `claude:N` and `codex:N`: a synthetic
Claude Code transcript or Codex rollout of N turns (`synthetic_agents.py`), appended to with the
rows those CLIs write for a turn. `claude-sample:MB` and `codex-sample:MB` (`-nc`: without the
sample's compaction): the shared sample repeated with fresh ids to MB MiB (`repeat_sample.py`,
issue 36), appended to with the next copy's lines one by one. Also first paint: from constructing the app to the first
painted map with data.

A line counts as shown once the widgets hold a snapshot that read the file past that line's end
(`Snapshot.file_size`): the same rule for every agent.

Prints, per size, `append→screen median X ms p95 Y ms`. Targets (issue 10): median ≤ 16 ms,
p95 ≤ 50 ms at every size; first paint ≤ 0.5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("DS4TUI_SHARED") or next(
    (p for p in (ROOT.parent / "shared", ROOT.parents[1] / "shared") if p.is_dir()), ROOT.parent / "shared"))
LARGE = SHARED / "sessions-pi" / "99-large.jsonl"
SIZE = (120, 40)

# (module, class, method): the calls that hand each on-screen widget its data. The app's
# snapshot at the call says which lines that widget now shows.
HOOKS: dict[str, tuple[str, str, str]] = {
    "header": ("ds4tui.widgets.panels", "SessionHeader", "show"),
    "legend": ("ds4tui.widgets.panels", "CategoryList", "show"),
    "turns": ("ds4tui.widgets.panels", "TurnList", "show"),
    "map": ("ds4tui.widgets.pixel_map", "PixelMap", "set_data"),
}


def _last_entry(lines: list[bytes]) -> tuple[str, dict[str, Any] | None]:
    """The id of the file's last entry (Pi's leaf) and the usage of its last assistant reply."""
    leaf = ""
    usage = None
    for raw in reversed(lines):
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if not leaf and isinstance(entry, dict) and entry.get("id"):
            leaf = entry["id"]
        message = entry.get("message") if isinstance(entry, dict) else None
        if isinstance(message, dict) and message.get("role") == "assistant" and isinstance(message.get("usage"), dict):
            usage = message["usage"]
            break
    return leaf, usage


def synthetic_lines(leaf: str, usage: dict[str, Any] | None, count: int) -> list[tuple[str, bytes]]:
    """`count` Pi message entries continuing the branch from `leaf`: (entry id, line bytes)."""
    base = 1000
    if usage:
        base = int(usage.get("input", 0)) + int(usage.get("cacheRead", 0)) + int(usage.get("cacheWrite", 0))
    t = int(time.time() * 1000)
    out: list[tuple[str, bytes]] = []
    parent = leaf
    for k in range(count):
        g, step = divmod(k, 4)
        call = f"toolu_bench_{g:04d}"
        prompt_tokens = base + 300 * (g + 1)
        use = {"input": 3, "output": 60, "cacheRead": prompt_tokens - 3 - 200, "cacheWrite": 200,
               "totalTokens": prompt_tokens + 60, "cost": {"total": 0.01}}
        message: dict[str, Any]
        if step == 0:
            message = {"role": "user", "content": [{"type": "text", "text": f"bench step {g}: read module_{g}.py and fix it"}], "timestamp": t}
        elif step == 1:
            message = {"role": "assistant", "content": [{"type": "toolCall", "id": call, "name": "read",
                                                         "arguments": {"path": f"src/module_{g}.py"}}],
                       "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                       "usage": use, "stopReason": "toolUse", "timestamp": t}
        elif step == 2:
            message = {"role": "toolResult", "toolCallId": call, "toolName": "read",
                       "content": [{"type": "text", "text": f"def f_{g}(x):\n    return x + {g}\n" * 40}],
                       "isError": False, "timestamp": t}
        else:
            message = {"role": "assistant", "content": [{"type": "text", "text": f"Fixed module_{g}.py: f_{g} now adds {g}."}],
                       "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                       "usage": dict(use, cacheRead=prompt_tokens + 600 - 3 - 200), "stopReason": "stop", "timestamp": t}
        entry_id = f"bench{k:05d}"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t / 1000))
        entry = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": stamp, "message": message}
        out.append((entry_id, (json.dumps(entry) + "\n").encode()))
        parent = entry_id
        t += 1000
    return out


class Probe:
    """Hooks the widgets' update points and the compositor's paint; turns them into latencies."""

    def __init__(self, app: Any, ends: list[int]) -> None:
        self.app = app
        self.ends = ends  # the file offset where each appended line ends (ascending)
        self.shown: dict[str, int] = {name: -1 for name in HOOKS}  # widget → last appended line it holds
        self.written: dict[int, float] = {}
        self.latency: dict[int, float] = {}
        self.first_map_paint: float | None = None
        self._map_data = False
        self._undo: list[tuple[Any, str, Any]] = []

    def covered(self, snap: Any) -> int:
        """The last appended line `snap` contains (-1: none): the last whose end offset it read."""
        if snap is None:
            return -1
        from bisect import bisect_right

        return bisect_right(self.ends, snap.file_size) - 1

    def install(self) -> None:
        import importlib

        from textual.app import App

        from ds4tui.screens.dashboard import DashboardScreen

        original_show = DashboardScreen._show

        def show(screen: Any, message: Any, _original: Any = original_show) -> Any:
            # `_show` hands each widget what changed: a widget it leaves alone already shows
            # this snapshot's data (e.g. the map after a usage-only line), so all are current
            result = _original(screen, message)
            covered = self.covered(message.snapshot)
            for name in self.shown:
                self.shown[name] = max(self.shown[name], covered)
            return result

        DashboardScreen._show = show  # type: ignore[method-assign]
        self._undo.append((DashboardScreen, "_show", original_show))
        for name, (module, cls_name, method) in HOOKS.items():
            cls = getattr(importlib.import_module(module), cls_name)
            original = getattr(cls, method)

            def hooked(widget: Any, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
                result = _original(widget, *args, **kwargs)
                snap = self.app.snapshot
                self.shown[_name] = max(self.shown[_name], self.covered(snap))
                if _name == "map" and snap is not None and snap.context.messages:
                    self._map_data = True
                return result

            setattr(cls, method, hooked)
            self._undo.append((cls, method, original))
        original_display = App._display

        def display(app: Any, *args: Any, **kwargs: Any) -> Any:
            result = original_display(app, *args, **kwargs)
            now = time.perf_counter()
            if self._map_data and self.first_map_paint is None:
                self.first_map_paint = now
            done = min(self.shown.values())
            for k, t0 in list(self.written.items()):
                if k <= done:
                    self.latency[k] = now - t0
                    del self.written[k]
            return result

        App._display = display  # type: ignore[method-assign]
        self._undo.append((App, "_display", original_display))

    def remove(self) -> None:
        for cls, method, original in reversed(self._undo):
            setattr(cls, method, original)
        self._undo.clear()


async def drive(path: Path, appends: int, pace: tuple[float, float], seed: int, more: Any = None,
                tab: str | None = None) -> tuple[list[float], float, int]:
    """Open `path` (a copy) in the app, append `appends` lines at `pace` seconds apart (Pi
    entries, or `more`: the lines of another agent, bytes each); returns the latencies
    (seconds, one per line; a line never shown counts as the whole wait), the first-paint time
    (seconds) and the snapshot's context message count. `tab`: the key that shows a tab before
    the appends (e.g. "T": the Timeline tab, which then redraws with every derived pass)."""
    from ds4tui.app import Ds4App

    if more is None:
        lines = path.read_bytes().splitlines(keepends=True)
        leaf, usage = _last_entry(lines)
        new = [raw for _, raw in synthetic_lines(leaf, usage, appends)]
    else:
        new = list(itertools.islice(more, appends))
    ends, offset = [], path.stat().st_size
    for raw in new:
        offset += len(raw)
        ends.append(offset)
    rng = random.Random(seed)
    t_start = time.perf_counter()
    app = Ds4App(path, now=time.time)
    probe = Probe(app, ends)
    probe.install()
    try:
        async with app.run_test(size=SIZE) as pilot:
            # wait for the first map paint and for the derived views (plan, cache, retrieval)
            deadline = time.perf_counter() + 120
            while probe.first_map_paint is None and time.perf_counter() < deadline:
                await asyncio.sleep(0.005)
            first_paint = (probe.first_map_paint or time.perf_counter()) - t_start
            while time.perf_counter() < deadline:
                derived = app.derived
                if derived is not None and app.snapshot is not None and derived.version == app.snapshot.version \
                        and (derived.retrieval is not None or "retrieval" in dict(derived.errors)
                             or not app.snapshot.capabilities.retrieval) \
                        and app.snapshot.exact is not None:
                    break
                await asyncio.sleep(0.02)
            await pilot.pause()
            if tab:
                await pilot.press(tab)
                await asyncio.sleep(1.0)
            await asyncio.sleep(0.5)
            messages = len(app.snapshot.context.messages) if app.snapshot else 0
            with path.open("ab") as f:
                for k, raw in enumerate(new):
                    f.write(raw)
                    f.flush()
                    probe.written[k] = time.perf_counter()
                    await asyncio.sleep(rng.uniform(*pace))
            deadline = time.perf_counter() + 30
            while probe.written and time.perf_counter() < deadline:
                await asyncio.sleep(0.01)
            for k, t0 in probe.written.items():  # never shown: count the whole wait
                probe.latency[k] = time.perf_counter() - t0
    finally:
        probe.remove()
    return [probe.latency[k] for k in sorted(probe.latency)], first_paint, messages


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]


def main() -> int:
    """Parse arguments, run each size, print medians and p95."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=30)
    parser.add_argument("--pace", default="0.1,0.3", help="seconds between appends: min,max")
    parser.add_argument("--sizes", default="99-large,1000,10000")
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--tab", default=None, help="a key pressed before the appends (T: the Timeline tab)")
    args = parser.parse_args()
    pace = tuple(float(x) for x in args.pace.split(","))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_planner import synthetic_session

    print(f"machine: {platform.machine()} · {os.cpu_count()} cores · Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DS4TUI_STATE_DIR"] = str(Path(tmp) / "state")  # the retrieval index goes here
        for size in (s.strip() for s in args.sizes.split(",") if s.strip()):
            path = Path(tmp) / f"{size.replace(':', '-')}.jsonl"
            more = None
            if size.split(":")[0] in ("claude-sample", "codex-sample", "claude-sample-nc", "codex-sample-nc"):
                import repeat_sample

                kind, _, mb = size.partition(":")
                agent = kind.split("-")[0]
                repeater, copies = repeat_sample.write_repeated(agent, path, float(mb), repeat_sample.shared_dir(),
                                                                compaction=not kind.endswith("-nc"))
                more = (line.encode() + b"\n" for n in itertools.count(copies)
                        for line in repeater.copy(n).splitlines())
                label = f"{kind} {float(mb):g} MiB"
            elif ":" in size:
                import synthetic_agents

                agent, _, turns = size.partition(":")
                state = synthetic_agents.write(agent, path, int(turns))
                more = (line.encode() + b"\n" for line in synthetic_agents.lines(agent, args.appends, state))
                label = f"{agent} {int(turns):,} turns"
            elif size == "99-large":
                if not LARGE.exists():
                    print(f"{size}: skipped (no {LARGE})")
                    continue
                path.write_bytes(LARGE.read_bytes())
                label = "99-large"
            else:
                synthetic_session(path, int(size))
                label = f"{int(size):,} turns"
            latencies, first, messages = asyncio.run(drive(path, args.appends, pace, args.seed, more, args.tab))
            ms = [x * 1000 for x in latencies]
            print(f"{label:>20} ({messages:,} messages): append→screen median {statistics.median(ms):.1f} ms "
                  f"p95 {p95(ms):.1f} ms (max {max(ms):.1f}, n={len(ms)}) · first paint {first * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
