"""Retrieval benchmark (issue 5): `uv run python bench/bench_retrieval.py [SESSION]`.

Prints medians (milliseconds) for `../shared/sessions-pi/99-large.jsonl` (or SESSION):
- index build: a full `RetrievalIndex.sync` of the whole file into an empty database;
- incremental update per appended entry: the file grows by one line, the reader is fed that
  line, `sync` indexes it (target ≤ 20 ms);
- query: `retrieve_history` over the index for the current request and for the user requests
  of the session (target ≤ 50 ms), and the whole `LiveRetrieval.retrieve` (sync + two plans).
The index lives in a temporary directory; nothing else is written.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from ds4core.retrieval import current_request_text, retrieve_history
from ds4sessions.agents.pi.live import open_snapshot
from ds4sessions.agents.pi.reader import PiSessionReader, read_session
from ds4sessions.derive.retrieval import LiveRetrieval, planning_inputs
from ds4sessions.derive.retrieval_index import RetrievalIndex

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "sessions-pi" / "99-large.jsonl"


def ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1000:8.2f} ms (median of {len(seconds)}, max {max(seconds) * 1000:.2f})"


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    raw = path.read_bytes()
    lines = raw.splitlines(keepends=True)
    print(f"session: {path.name}, {len(raw) / 2**20:.1f} MiB, {len(lines)} lines")
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        session = read_session(path)

        builds = []
        for run in range(3):
            index = RetrievalIndex(tmpdir / f"build{run}.sqlite3")
            started = time.perf_counter()
            index.sync(session)
            builds.append(time.perf_counter() - started)
            size = (tmpdir / f"build{run}.sqlite3").stat().st_size
            index.close()
        print(f"index build:          {ms(builds)}; database {size / 2**20:.1f} MiB")

        # Incremental: index the first lines, then append the last 200 lines one at a time.
        head = len(lines) - 200
        grow = tmpdir / "grow.jsonl"
        grow.write_bytes(b"".join(lines[:head]))
        reader = PiSessionReader(grow)
        offset = 0
        feed = []
        for number, line in enumerate(lines[:head], 1):
            feed.append((number, offset, line.rstrip(b"\n")))
            offset += len(line)
        reader.feed(feed)
        index = RetrievalIndex(tmpdir / "grow.sqlite3")
        index.sync(reader)
        steps = []
        for number, line in enumerate(lines[head:], head + 1):
            with grow.open("ab") as f:
                f.write(line)
            reader.feed([(number, offset, line.rstrip(b"\n"))])
            offset += len(line)
            started = time.perf_counter()
            result = index.sync(reader)
            steps.append(time.perf_counter() - started)
            assert result.added == 1 and not result.rebuilt
        print(f"incremental / entry:  {ms(steps)}  (target ≤ 20 ms)")

        snapshot = open_snapshot(path)
        inputs = planning_inputs(snapshot)
        key = index.sync(snapshot.reader).session_key
        requests = [current_request_text(inputs.messages)] + [
            current_request_text([e.message]) for e in session.entries if e.role == "user"
        ][:40]
        queries = []
        for request in requests:
            search = index.search(key)
            started = time.perf_counter()
            retrieve_history(
                search, request, active_branch_ids=snapshot.context.branch_entry_ids,
                committed_entry_ids=(), max_tokens=inputs.max_retrieved_history_tokens,
            )
            queries.append(time.perf_counter() - started)
        print(f"query:                {ms(queries)}  (target ≤ 50 ms)")

        live = LiveRetrieval(index)
        live.retrieve(snapshot)
        whole = []
        for _ in range(10):
            started = time.perf_counter()
            live.retrieve(snapshot)
            whole.append(time.perf_counter() - started)
        print(f"LiveRetrieval.retrieve (synced index, two plans): {ms(whole)}")
        index.close()


if __name__ == "__main__":
    main()
