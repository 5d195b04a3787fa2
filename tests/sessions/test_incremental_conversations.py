"""Readers that extend their previous conversation (issue 28: append → screen for every agent)
give, after every line, the conversation a fresh reader builds in full from the same lines,
and their `stable` prefix is the previous conversation's very objects. Fed line by line, on
every Claude Code and Codex fixture (and the shared samples when present)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ds4sessions.agents.registry import agent_for_path
from tests.conftest import FIXTURES, SHARED

ROOT = Path(__file__).resolve().parents[2]


def sessions() -> list[Path]:
    found = sorted((FIXTURES / "claude").rglob("*.jsonl")) + sorted((FIXTURES / "claude-2.1.337").rglob("*.jsonl"))
    found += sorted((FIXTURES / "codex").rglob("rollout-*.jsonl")) + sorted((FIXTURES / "codex-0.171.0").rglob("rollout-*.jsonl"))
    if SHARED is not None:
        found += sorted((SHARED / "sessions-claude").rglob("*.jsonl")) + sorted((SHARED / "sessions-codex").rglob("*.jsonl"))
    return found


def _lines(path: Path) -> list[tuple[int, int, bytes]]:
    out, offset = [], 0
    for n, raw in enumerate(path.read_bytes().split(b"\n")[:-1], 1):
        out.append((n, offset, raw))
        offset += len(raw) + 1
    return out


def _same(a, b) -> None:  # type: ignore[no-untyped-def]
    assert a.messages == b.messages
    assert a.meta == b.meta
    assert a.requests == b.requests
    assert a.compactions == b.compactions
    assert (a.leaf_id, a.model, a.context_window, a.entries, a.title) == (b.leaf_id, b.model, b.context_window, b.entries, b.title)
    assert [str(d) for d in a.diagnostics] == [str(d) for d in b.diagnostics]
    assert dict(a.extra) == dict(b.extra)


def _check(path: Path, step: int = 1) -> int:
    agent = agent_for_path(path)
    lines = _lines(path)
    live = agent.reader(path)
    previous = None
    extended = 0
    for end in range(step, len(lines) + step, step):
        live.feed(lines[end - step:end])
        got = live.conversation()
        fresh = agent.reader(path)
        fresh.feed(lines[:end])
        _same(got, fresh.conversation())
        if previous is not None:
            assert all(a is b for a, b in zip(got.messages[:got.stable], previous.messages[:got.stable]))
            assert got.stable <= len(previous.messages)
            extended += got.stable > 0
        previous = got
    return extended


@pytest.mark.parametrize("path", sessions(), ids=lambda p: p.name[-24:])
def test_line_by_line_equals_a_full_read(path: Path) -> None:
    _check(path)


def test_a_synthetic_claude_transcript_extends_at_every_line(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import synthetic_agents

    path = tmp_path / "c.jsonl"
    synthetic_agents.write("claude", path, 30)
    extended = _check(path)
    assert extended >= 30 * 5 - 2  # every line but the first extends the conversation


def _claude_sessions() -> list[Path]:
    return [p for p in sessions() if agent_for_path(p).name == "claude-code"]


@pytest.mark.parametrize("path", _claude_sessions(), ids=lambda p: p.name[-24:])
def test_claude_context_map_with_a_tally_equals_one_without(path: Path) -> None:
    """The `/context` map a live session keeps counts for (`MessageTally`, carried over every
    line) is, after every line, the map counted from scratch: rows, children, tools, order."""
    from ds4sessions.agents.claude.views import MessageTally, context_map

    agent = agent_for_path(path)
    lines = _lines(path)
    live = agent.reader(path)
    tally = MessageTally()
    env: dict[str, str] = {}
    for end in range(1, len(lines) + 1):
        live.feed(lines[end - 1:end])
        conv = live.conversation()
        with_tally = context_map(conv, env, tally=tally)
        without = context_map(conv, env)
        assert list(with_tally) == list(without)
        assert with_tally == without, f"line {end}"
        assert list(map(str, with_tally["categories"])) == list(map(str, without["categories"]))


@pytest.mark.parametrize("path", sessions(), ids=lambda p: p.name[-24:])
def test_cache_facts_with_a_memo_equal_those_without(path: Path, tmp_path: Path) -> None:
    _check_cache_memo(path, tmp_path)


def test_a_reply_whose_usage_grows_is_counted_again(tmp_path: Path) -> None:
    """Claude Code writes one row per content block of a reply; when a later block's row
    carries a larger usage (a streamed reply: the reader keeps the largest), the request is
    replaced, and the live cache view takes the new numbers (not the record made before)."""
    import json

    sys.path.insert(0, str(ROOT / "bench"))
    import synthetic_agents

    state = synthetic_agents.State()
    rows = [json.loads(line) for line in synthetic_agents.lines("claude", 3, state)]
    grown = [r for r in rows if r["type"] == "assistant" and r["message"]["content"][0]["type"] == "tool_use"]
    for r in grown:
        r["message"]["usage"] = dict(r["message"]["usage"], output_tokens=999)
    path = tmp_path / "src" / "grown.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    outputs = _check_cache_memo(path, tmp_path)
    assert 999 in outputs and 60 in outputs  # the reply was seen before and after it grew


def _check_cache_memo(path: Path, tmp_path: Path) -> set[int]:
    """The prompt cache a live session updates (the agent's `cache_facts` with the memo the
    cache stage keeps) equals, after every line, the one made from scratch: every request's
    record, the clock, the cached prefix; for Claude Code also `cache_report`'s JSON. The file
    grows line by line in a copy, as the agent writes it."""
    import json

    from ds4sessions.derive.cache import CacheView

    agent = agent_for_path(path)
    work = tmp_path / path.name
    work.write_bytes(b"")
    live = agent.live(work)
    memo: dict = {}
    report_memo: dict = {}
    checked = 0
    outputs: set[int] = set()
    for n, _offset, raw in _lines(path):
        with work.open("ab") as f:
            f.write(raw + b"\n")
        snap = live.refresh()
        if snap is None:
            continue
        now = 1.7e9
        with_memo = CacheView.of_facts(agent.cache_facts(snap, now, memo=memo), now, snap.agent).to_json()
        without = CacheView.of_facts(agent.cache_facts(snap, now), now, snap.agent).to_json()
        assert json.dumps(with_memo, sort_keys=True, default=str) == json.dumps(without, sort_keys=True, default=str), f"line {n}"
        checked += with_memo["history"]["requests"] > 0
        outputs.update(r["output"] for r in with_memo["history"]["records"])
        if agent.name == "claude-code":
            from ds4sessions.agents.claude.views import cache_report

            got = cache_report(snap.conversation, now, report_memo)
            assert json.dumps(got, default=str) == json.dumps(cache_report(snap.conversation, now), default=str), f"line {n}"
    assert checked > 0  # some update had requests to compare
    return outputs
