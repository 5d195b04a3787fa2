"""Benchmark the Codex reader: whole read of a long rollout, and one append (incremental feed).

    uv run python bench/bench_codex.py [--turns 2000] [--runs 5]

The rollout is synthetic: the real sample MAIN (tests/fixtures/codex/sample) with its turn rows
(MAIN:23-38, one READ-NOTES turn: 2 requests) repeated `turns` times, totals advanced so no row
is a re-emit. Prints medians: whole read (feed + conversation()), conversation() alone,
map_json (chars-v1, fresh `MapState`), and one appended turn with the kept reader and state.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from ds4sessions.agents.codex import view
from ds4sessions.agents.codex.reader import CodexReader, iter_lines

MAIN = Path(__file__).resolve().parents[1] / "tests/fixtures/codex/sample/sessions/2026/12/02/rollout-2026-12-02T01-10-23-01a2344d-7ef9-7e61-a841-8556539ac489.jsonl"


def synthetic(turns: int) -> tuple[bytes, list[bytes]]:
    lines = MAIN.read_bytes().splitlines(keepends=True)
    head, turn = lines[:22], lines[22:38]
    out = list(head)
    total = 20243
    for n in range(turns):
        for raw in turn:
            row = json.loads(raw)
            p = row.get("payload") or {}
            if p.get("type") == "token_count" and p.get("info"):
                last = p["info"]["last_token_usage"]["total_tokens"]
                total += last
                p["info"]["total_token_usage"]["total_tokens"] = total
                p["info"]["total_token_usage"]["input_tokens"] = total
            out.append((json.dumps(row) + "\n").encode())
    return b"".join(out[:-len(turn)]), out[-len(turn):]


def median(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    body, last_turn = synthetic(args.turns)
    whole, conv_only, mapping, append = [], [], [], []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        reader = CodexReader(MAIN)
        reader.feed(iter_lines(body))
        conv = reader.conversation()
        t1 = time.perf_counter()
        conv = reader.conversation()
        t2 = time.perf_counter()
        state = view.MapState(exact=False)
        view.map_json(conv, state=state)
        t3 = time.perf_counter()
        base = body.count(b"\n")
        reader.feed([(base + i + 1, 0, raw) for i, raw in enumerate(last_turn)])
        view.map_json(reader.conversation(), state=state)
        t4 = time.perf_counter()
        whole.append(t1 - t0)
        conv_only.append(t2 - t1)
        mapping.append(t3 - t2)
        append.append(t4 - t3)
    print(f"rollout: {len(body):,} bytes, {body.count(chr(10).encode()):,} lines, {len(conv.requests):,} requests, "
          f"{len(conv.messages):,} context messages")
    print(f"whole read (feed + conversation): {median(whole)}")
    print(f"conversation() again:             {median(conv_only)}")
    print(f"map_json, fresh chars-v1 ledger:  {median(mapping)}")
    print(f"append one turn + map_json:       {median(append)}")


if __name__ == "__main__":
    main()
