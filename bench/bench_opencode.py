"""Benchmark an OpenCode session on screen: one write to its database, from the commit to the screen.

    uv run python bench/bench_opencode.py [--appends 30] [--pace 0.1,0.3] [--sizes 100,1000,5000]

`bench_screen.py` appends lines to a Pi file; an OpenCode session lives in a SQLite database
(issue 35), so this drives the same real app (`Ds4App` under `App.run_test()`, headless, 120×40,
with its watcher, DS4 plan and cache view) with the same probe (`bench_screen.Probe`: the
widgets' update points and the compositor's paint) on a COPY of a synthetic OpenCode database
(WAL, OpenCode 1.18.33's schema: `session`, `message`, `part`, `event`, `event_sequence`),
and writes `--appends` messages as OpenCode writes rows (`SyncEvent.run`: the rows, their events
and the sequence head in a `BEGIN IMMEDIATE` transaction; a user prompt with its text, an
assistant step with reasoning, text, a tool call and its output, `step-finish` tokens) at the
agent's pace, one transaction per message (OpenCode commits one per event; one commit per
message makes "the message is on screen" exact). Per message the time runs from its `COMMIT`
until the map, the legend, the turn list and the header hold a snapshot that contains it and
the screen painted.

Sizes: synthetic sessions of `--sizes` turns (a turn: a prompt, a tool step, a reply step).
Prints, per size, `write→screen median X ms p95 Y ms` and the first paint.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_screen import SIZE, Probe, p95  # noqa: E402

SCHEMA = """
CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL, vcs text, name text, icon_url text,
  icon_url_override text, icon_color text, time_created integer NOT NULL, time_updated integer NOT NULL,
  time_initialized integer, sandboxes text NOT NULL, commands text);
CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, workspace_id text, parent_id text,
  slug text NOT NULL, directory text NOT NULL, path text, title text NOT NULL, version text NOT NULL,
  share_url text, summary_additions integer, summary_deletions integer, summary_files integer,
  summary_diffs text, metadata text, cost real DEFAULT 0 NOT NULL, tokens_input integer DEFAULT 0 NOT NULL,
  tokens_output integer DEFAULT 0 NOT NULL, tokens_reasoning integer DEFAULT 0 NOT NULL,
  tokens_cache_read integer DEFAULT 0 NOT NULL, tokens_cache_write integer DEFAULT 0 NOT NULL, revert text,
  permission text, agent text, model text, time_created integer NOT NULL, time_updated integer NOT NULL,
  time_compacting integer, time_archived integer);
CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL,
  time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE event_sequence (aggregate_id text PRIMARY KEY, seq integer NOT NULL, owner_id text);
CREATE TABLE event (id text PRIMARY KEY, aggregate_id text NOT NULL, seq integer NOT NULL, type text NOT NULL,
  data text NOT NULL);
CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
CREATE INDEX part_message_id_id_idx ON part (message_id, id);
CREATE INDEX part_session_idx ON part (session_id);
CREATE UNIQUE INDEX event_aggregate_seq_idx ON event (aggregate_id, seq);
"""
"""OpenCode 1.18.33's tables that the reader reads (as its drizzle migrations create them)."""

SID = "ses_bench0000000000000000000000"
MODEL = {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}


class Writer:
    """Writes OpenCode rows and their events, one transaction per event (module doc)."""

    def __init__(self, db: Path) -> None:
        self.conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        self.seq = -1
        self.clock = 1_780_000_000_000
        self.n = 0
        self.prompt = 9_000
        self.tag = "bench"

    def _id(self, kind: str) -> str:
        self.n += 1
        return f"{kind}_{self.n:012x}{self.tag}"

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        self.seq += 1
        self.conn.execute("INSERT INTO event_sequence (aggregate_id, seq) VALUES (?, ?) ON CONFLICT(aggregate_id) "
                          "DO UPDATE SET seq = excluded.seq", (SID, self.seq))
        self.conn.execute("INSERT INTO event (id, aggregate_id, seq, type, data) VALUES (?,?,?,?,?)",
                          (self._id("evt"), SID, self.seq, kind, json.dumps(data)))

    def session(self) -> None:
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        c.execute("INSERT INTO project VALUES ('global', '/', NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, '[]', NULL)")
        c.execute("INSERT INTO session (id, project_id, slug, directory, title, version, model, time_created, time_updated) "
                  "VALUES (?, 'global', 'bench', '/bench', 'A long OpenCode session', '1.18.33', ?, ?, ?)",
                  (SID, json.dumps({"id": MODEL["modelID"], "providerID": MODEL["providerID"]}), self.clock, self.clock))
        self._event("session.created.1", {"sessionID": SID, "info": {"id": SID}})
        c.execute("COMMIT")

    def message(self, info: dict[str, Any], parts: list[dict[str, Any]], *, batch: bool = False,
                mid: str | None = None) -> str:
        """One message and its parts; one transaction per event as OpenCode commits them, or all in
        one (`batch`)."""
        c = self.conn
        mid = mid or self._id("msg")
        self.clock += 1000
        info = {**info, "time": {"created": self.clock}}
        c.execute("BEGIN IMMEDIATE")
        c.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)", (mid, SID, self.clock, self.clock, json.dumps(info)))
        self._event("message.updated.1", {"sessionID": SID, "info": {"id": mid, "sessionID": SID, **info}})
        for part in parts:
            if not batch:
                c.execute("COMMIT")
                c.execute("BEGIN IMMEDIATE")
            pid = self._id("prt")
            self.clock += 1
            c.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)", (pid, mid, SID, self.clock, self.clock, json.dumps(part)))
            self._event("message.part.updated.1", {"sessionID": SID, "part": {"id": pid, "sessionID": SID,
                                                                                "messageID": mid, **part}})
        c.execute("COMMIT")
        return mid

    def user(self, text: str, *, batch: bool = False, mid: str | None = None) -> str:
        return self.message({"role": "user", "agent": "build", "model": MODEL},
                            [{"type": "text", "text": text}], batch=batch, mid=mid)

    def step(self, parent: str, text: str, tool: bool, *, batch: bool = False, mid: str | None = None) -> str:
        self.prompt += 600
        tokens = {"total": self.prompt + 80, "input": 300, "output": 60, "reasoning": 20,
                  "cache": {"read": self.prompt - 300, "write": 0}}
        parts: list[dict[str, Any]] = [{"type": "step-start"}, {"type": "reasoning", "text": "Looking at the code."},
                                       {"type": "text", "text": text}]
        if tool:
            parts.append({"type": "tool", "tool": "read", "callID": self._id("call"),
                          "state": {"status": "completed", "input": {"filePath": "/bench/src/module.py"},
                                    "output": "def f(x):\n    return x + 1\n" * 40, "title": "read",
                                    "metadata": {}, "time": {"start": self.clock, "end": self.clock + 5}}})
        parts.append({"type": "step-finish", "reason": "tool-calls" if tool else "stop", "tokens": tokens, "cost": 0})
        info = {"role": "assistant", "parentID": parent, "mode": "build", "agent": "build", "cost": 0, "tokens": tokens,
                "modelID": MODEL["modelID"], "providerID": MODEL["providerID"], "path": {"cwd": "/bench", "root": "/"},
                "finish": "tool-calls" if tool else "stop"}
        return self.message(info, parts, batch=batch, mid=mid)


def synthetic_db(path: Path, turns: int) -> None:
    """An OpenCode database with one session of `turns` turns (WAL, as OpenCode sets it)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(SCHEMA)
    conn.close()
    w = Writer(path)
    w.session()
    for t in range(turns):
        user = w.user(f"Turn {t}: read module.py and fix the bug", batch=True)
        w.step(user, "Reading the module.", True, batch=True)
        w.step(user, f"Fixed in turn {t}.", False, batch=True)
    w.conn.close()


async def drive(db: Path, appends: int, pace: tuple[float, float], seed: int) -> tuple[list[float], float, int]:
    """Open the session in the app and write `appends` messages (module doc); returns the
    latencies (seconds), the first paint (seconds) and the context's message count."""
    from ds4tui.app import Ds4App

    handle = Path(f"{db}#{SID}")
    writer = Writer(db)
    with sqlite3.connect(db) as conn:
        writer.seq = conn.execute("SELECT seq FROM event_sequence").fetchone()[0]
        writer.tag = "live"  # (ids apart from the built ones)
        writer.clock = conn.execute("SELECT MAX(time_updated) FROM part").fetchone()[0] + 10_000
    rng = random.Random(seed)
    order: dict[str, int] = {}
    t_start = time.perf_counter()
    app = Ds4App(handle, now=time.time, retrieval=False)
    probe = Probe(app, order)
    probe.install()
    try:
        async with app.run_test(size=SIZE) as pilot:
            deadline = time.perf_counter() + 300
            while probe.first_map_paint is None and time.perf_counter() < deadline:
                await asyncio.sleep(0.005)
            first_paint = (probe.first_map_paint or time.perf_counter()) - t_start
            while time.perf_counter() < deadline:
                derived = app.derived
                if derived is not None and app.snapshot is not None and derived.version == app.snapshot.version:
                    break
                await asyncio.sleep(0.02)
            await pilot.pause()
            await asyncio.sleep(0.5)
            messages = len(app.snapshot.context.messages) if app.snapshot else 0
            parent = ""
            for k in range(appends):
                mid = writer._id("msg")
                order[mid] = k
                if k % 3 == 0:
                    parent = writer.user(f"Appended prompt {k}", batch=True, mid=mid)
                else:
                    writer.step(parent, f"Appended step {k}", k % 3 == 1, batch=True, mid=mid)
                probe.written[k] = time.perf_counter()  # right after the COMMIT (nothing paints before the await)
                await asyncio.sleep(rng.uniform(*pace))
            deadline = time.perf_counter() + 30
            while probe.written and time.perf_counter() < deadline:
                await asyncio.sleep(0.01)
            for k, t0 in probe.written.items():  # never shown: count the whole wait
                probe.latency[k] = time.perf_counter() - t0
    finally:
        probe.remove()
        writer.conn.close()
    return [probe.latency[k] for k in sorted(probe.latency)], first_paint, messages


def main() -> int:
    """Parse arguments, run each size, print medians and p95."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=30)
    parser.add_argument("--pace", default="0.1,0.3", help="seconds between messages: min,max")
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--seed", type=int, default=35)
    args = parser.parse_args()
    pace = tuple(float(x) for x in args.pace.split(","))
    print(f"machine: {platform.machine()} · {os.cpu_count()} cores · Python {platform.python_version()} · "
          f"SQLite {sqlite3.sqlite_version}")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DS4TUI_STATE_DIR"] = str(Path(tmp) / "state")
        for size in (int(s) for s in args.sizes.split(",") if s.strip()):
            db = Path(tmp) / f"opencode-{size}.db"
            synthetic_db(db, size)
            latencies, first, messages = asyncio.run(drive(db, args.appends, pace, args.seed))
            ms = [x * 1000 for x in latencies]
            mb = sum(p.stat().st_size for p in Path(tmp).glob(f"opencode-{size}.db*")) / 1e6
            print(f"{size:>6,} turns ({messages:,} messages, {mb:.1f} MB): write→screen median {statistics.median(ms):.1f} ms "
                  f"p95 {p95(ms):.1f} ms (max {max(ms):.1f}, n={len(ms)}) · first paint {first * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
