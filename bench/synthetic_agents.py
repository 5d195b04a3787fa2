"""Synthetic Claude Code transcripts and Codex rollouts of N turns, for the benchmarks.

    uv run python bench/synthetic_agents.py claude OUT.jsonl --turns 10000
    uv run python bench/synthetic_agents.py codex OUT.jsonl --mb 100

Each turn is what the real CLIs write for "read a file and answer" (the shapes of the rows in
tests/fixtures/claude and tests/fixtures/codex, written by Claude Code 2.1.197 and Codex 0.171.0):

- Claude Code: a prompt row; the reply's rows, one per content block (text, tool_use) sharing a
  `message.id` and a full usage copy; the tool_result row; the answer row; every row chained by
  `parentUuid` with fresh uuids, a growing prompt cache (5 min writes, reads of the prefix);
- Codex: the fixture's `session_meta` line (its base instructions), then per turn a user
  message, a `function_call`, its `function_call_output`, the assistant message and a
  `token_count` event with Codex's running and last usage (`input_tokens` includes the cached).

`lines(agent, turns, start, state)` continues a file (the appends of bench_screen.py); every
line it makes extends the conversation the readers see.
"""

from __future__ import annotations

import argparse
import json
import uuid as uuidlib
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
CODEX_FIXTURE = ROOT / "tests" / "fixtures" / "codex" / "sample" / "sessions" / "2026" / "12" / "02" / \
    "rollout-2026-12-02T01-10-23-01a2344d-7ef9-7e61-a841-8556539ac489.jsonl"
START = 1796000000.0
"""Unix seconds of the first synthetic turn (2026-12-01)."""
TOOL_OUTPUT = "def handler(event):\n    return {'ok': True, 'items': [x for x in event['items'] if x]}\n" * 12


def _iso(seconds: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _uuid(n: int, salt: str) -> str:
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"ds4tui-bench/{salt}/{n}"))


class State:
    """Where a synthetic session stands: the last uuid (Claude Code), the running usage (Codex),
    the clock and the turn count."""

    def __init__(self) -> None:
        self.parent: str | None = None
        self.turn = 0
        self.t = START
        self.prompt = 20_000
        self.totals = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0}


def claude_turn(state: State, session: str = "bench-claude-session") -> Iterator[str]:
    """The rows of one Claude Code turn (see the module doc)."""
    g = state.turn
    common = {"isSidechain": False, "userType": "external", "entrypoint": "cli", "cwd": "/home/dev/bench",
              "sessionId": session, "version": "2.1.197", "gitBranch": "main"}

    def row(kind: str, body: dict[str, Any], dt: float) -> str:
        state.t += dt
        uid = _uuid(state.turn * 8 + len(ids), session)
        ids.append(uid)
        out = {"parentUuid": state.parent, **common, **body, "type": kind, "uuid": uid, "timestamp": _iso(state.t)}
        state.parent = uid
        return json.dumps(out)

    ids: list[str] = []
    usage = lambda read, write, out: {  # noqa: E731
        "input_tokens": 4, "cache_creation_input_tokens": write, "cache_read_input_tokens": read, "output_tokens": out,
        "service_tier": "standard", "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": write},
        "iterations": [], "speed": "standard"}
    yield row("user", {"message": {"role": "user", "content": f"bench step {g}: read module_{g}.py and fix the handler"}}, 30)
    tool = f"toolu_bench{g:06d}"
    msg = f"msg_bench{g:06d}a"
    use = usage(state.prompt - 300, 300, 60)
    for block in ({"type": "text", "text": f"Reading module_{g}.py."},
                  {"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": f"/home/dev/bench/module_{g}.py"}}):
        yield row("assistant", {"message": {"id": msg, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                                            "content": [block], "stop_reason": "tool_use", "stop_sequence": None, "usage": use}}, 1)
    yield row("user", {"message": {"role": "user", "content": [{"tool_use_id": tool, "type": "tool_result", "content": TOOL_OUTPUT}]},
                       "toolUseResult": {"type": "text"}}, 1)
    state.prompt += 400  # (about what a turn adds: ~1 KiB of tool output and a few lines)
    yield row("assistant", {"message": {"id": f"msg_bench{g:06d}b", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                                        "content": [{"type": "text", "text": f"Fixed module_{g}.py: the handler now drops empty items."}],
                                        "stop_reason": "end_turn", "stop_sequence": None, "usage": usage(state.prompt - 200, 200, 40)}}, 2)
    state.turn += 1


def codex_header() -> str:
    """The fixture rollout's first line (`session_meta`, with Codex's base instructions)."""
    with CODEX_FIXTURE.open("rb") as f:
        return f.readline().decode().rstrip("\n")


def codex_turn(state: State) -> Iterator[str]:
    """The lines of one Codex turn (see the module doc)."""
    g = state.turn

    def line(kind: str, payload: dict[str, Any], dt: float) -> str:
        state.t += dt
        return json.dumps({"timestamp": _iso(state.t), "type": kind, "payload": payload})

    call = f"call_bench{g:06d}"
    yield line("response_item", {"type": "message", "id": f"msg_u{g:06d}", "role": "user",
                                 "content": [{"type": "input_text", "text": f"bench step {g}: read module_{g}.py and fix the handler"}]}, 30)
    yield line("response_item", {"type": "function_call", "status": "completed", "id": f"fc_{g:06d}", "name": "exec_command",
                                 "arguments": json.dumps({"cmd": f"cat module_{g}.py"}), "call_id": call}, 1)
    yield line("response_item", {"type": "function_call_output", "id": f"fco_{g:06d}", "call_id": call, "output": TOOL_OUTPUT}, 1)
    yield line("response_item", {"type": "message", "status": "completed", "id": f"msg_a{g:06d}", "role": "assistant",
                                 "content": [{"type": "output_text", "text": f"Fixed module_{g}.py: the handler now drops empty items.",
                                              "annotations": []}]}, 2)
    state.prompt += 400  # (about what a turn adds: ~1 KiB of tool output and a few lines)
    last = {"input_tokens": state.prompt, "cached_input_tokens": state.prompt - 512, "cache_write_input_tokens": 0,
            "output_tokens": 40, "reasoning_output_tokens": 0, "total_tokens": state.prompt + 40}
    for key in ("input_tokens", "cached_input_tokens", "output_tokens"):
        state.totals[key] += last[key]
    total = {**state.totals, "cache_write_input_tokens": 0, "reasoning_output_tokens": 0,
             "total_tokens": state.totals["input_tokens"] + state.totals["output_tokens"]}
    yield line("event_msg", {"type": "token_count", "info": {"total_token_usage": total, "last_token_usage": last,
                                                             "model_context_window": 258400}, "rate_limits": None}, 0.01)
    state.turn += 1


def lines(agent: str, turns: int, state: State) -> Iterator[str]:
    """`turns` more turns of `agent` ("claude" or "codex") continuing `state`."""
    for _ in range(turns):
        yield from (claude_turn(state) if agent == "claude" else codex_turn(state))


def write(agent: str, path: Path, turns: int | None = None, mb: float | None = None) -> State:
    """Write a synthetic session of `turns` turns (or about `mb` MiB) to `path`; returns its state
    (to continue it with `lines`)."""
    state = State()
    limit = int(mb * (1 << 20)) if mb is not None else None
    size = 0
    with path.open("w", encoding="utf-8") as f:
        if agent == "codex":
            head = codex_header()
            f.write(head + "\n")
            size += len(head) + 1
        while (turns is not None and state.turn < turns) or (limit is not None and size < limit):
            for text in (claude_turn(state) if agent == "claude" else codex_turn(state)):
                f.write(text + "\n")
                size += len(text) + 1
    return state


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agent", choices=("claude", "codex"))
    parser.add_argument("out", type=Path)
    parser.add_argument("--turns", type=int)
    parser.add_argument("--mb", type=float)
    args = parser.parse_args()
    if args.turns is None and args.mb is None:
        parser.error("give --turns or --mb")
    state = write(args.agent, args.out, args.turns, args.mb)
    print(f"{args.out}: {state.turn:,} turns, {args.out.stat().st_size / (1 << 20):.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
