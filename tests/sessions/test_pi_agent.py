"""The Pi agent plug-in: its `Conversation` is Pi's own context, and every reply is one request.

For every Pi-written sample in shared/sessions-pi, the `Conversation.messages` built by
`PiAgent().reader(path)` equal the `messages` of the `<name>.context.json` Pi 1.6.0 built
(`buildSessionContext`), and `requests` hold each assistant `message` entry of the file exactly
once, with Pi's usage buckets and recorded cost.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ds4sessions.agents import base
from ds4sessions.agents.pi.agent import PiAgent
from ds4sessions.agents.registry import agent_for_path, agent_named
from tests.conftest import FIXTURES, SHARED, shared_params

SAMPLES = sorted(p for p in (SHARED / "sessions-pi").glob("*.jsonl")) if SHARED else []


def _lines(path: Path) -> list[tuple[int, int, bytes]]:
    out, offset = [], 0
    for line_no, line in enumerate(path.read_bytes().splitlines(keepends=True), start=1):
        if line.endswith(b"\n"):
            out.append((line_no, offset, line[:-1]))
        offset += len(line)
    return out


def _read(path: Path) -> base.Conversation:
    reader = PiAgent().reader(path)
    reader.feed(_lines(path))
    return reader.conversation()


def _assistant_lines(path: Path) -> list[dict]:
    out = []
    for raw in path.read_bytes().splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("type") == "message" and (obj.get("message") or {}).get("role") == "assistant":
            out.append(obj)
    return out


@pytest.mark.parametrize("path", shared_params(SAMPLES), ids=lambda p: p.stem)
def test_conversation_is_pis_context(path: Path) -> None:
    expected = json.loads(path.with_name(path.stem + ".context.json").read_text(encoding="utf-8"))
    conv = _read(path)
    assert conv.agent == "pi"
    assert [dict(m) for m in conv.messages] == expected["messages"]
    assert len(conv.meta) == len(conv.messages) == expected["messageCount"]
    assert conv.capabilities.ds4_plan and conv.capabilities.steering and not conv.capabilities.cache_ttl_recorded
    if "v1" not in path.stem:  # v1 ids are random per Pi load
        assert conv.leaf_id == expected["leafId"]
        context_ids = set(expected.get("contextEntryIds") or expected["branchEntryIds"])
        assert all(m.entry_id in context_ids for m in conv.meta)
    if expected["model"]:
        assert (conv.provider, conv.model) == (expected["model"]["provider"], expected["model"]["modelId"])


@pytest.mark.parametrize("path", shared_params(SAMPLES), ids=lambda p: p.stem)
def test_each_reply_is_one_request(path: Path) -> None:
    replies = _assistant_lines(path)
    conv = _read(path)
    assert len(conv.requests) == len(replies)
    assert [r.index for r in conv.requests] == list(range(len(replies)))
    for request, line in zip(conv.requests, replies):
        usage = line["message"].get("usage") or {}
        assert request.usage.input == int(usage.get("input") or 0)
        assert request.usage.output == int(usage.get("output") or 0)
        assert request.usage.cache_read == int(usage.get("cacheRead") or 0)
        assert request.usage.cache_write == int(usage.get("cacheWrite") or 0)
        cost = (usage.get("cost") or {}).get("total")
        assert request.cost_usd == (float(cost) if cost is not None else None)
        if "v1" not in path.stem:
            assert request.entry_id == line["id"]
        if request.message_index is not None:
            assert conv.messages[request.message_index] == line["message"]


def test_counts_on_sample01(sample01: Path) -> None:
    """Always runs (fixture copy): 01-tools-and-image has 4 replies, all on the context."""
    conv = _read(sample01)
    assert conv.session_id is not None and conv.context_window is not None
    assert len(conv.requests) == sum(1 for m in conv.messages if m.get("role") == "assistant")
    assert all(r.message_index is not None for r in conv.requests)
    tools = [m.tool for m in conv.meta if m.tool]
    assert tools, "tool results carry their tool name"
    last = conv.last_request
    assert last is not None and last.usage.prompt_tokens > 0


def test_incremental_equals_whole(sample01: Path) -> None:
    """Fed line by line, each conversation equals the one read from that prefix in one go."""
    lines = _lines(sample01)
    reader = PiAgent().reader(sample01)
    for i, line in enumerate(lines):
        reader.feed([line])
        got = reader.conversation()
        whole = PiAgent().reader(sample01)
        whole.feed(lines[: i + 1])
        want = whole.conversation()
        assert got.messages == want.messages and got.requests == want.requests and got.meta == want.meta


def test_recognizes_and_registry(sample01: Path, tmp_path: Path) -> None:
    agent = PiAgent()
    assert agent.recognizes(sample01.read_bytes()[:65536])
    assert agent.recognizes(b"\n garbage\n" + b'{"type":"session","id":"abc"}\n')
    assert not agent.recognizes(b'{"type":"session_meta","payload":{}}\n')
    assert not agent.recognizes(b'{"type":"user","uuid":"x"}\n')
    assert not agent.recognizes(b"")
    assert agent_named("pi") is not None
    assert agent_for_path(sample01).name == "pi"


def test_discover_marks_recent_files_live(sample01: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    folder = tmp_path / "sessions" / "--work--"
    folder.mkdir(parents=True)
    (folder / sample01.name).write_bytes(sample01.read_bytes())
    old = folder / "old.jsonl"
    old.write_bytes(sample01.read_bytes())
    import os

    os.utime(old, (1_000_000, 1_000_000))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    infos = PiAgent().discover()
    assert [i.path.name for i in infos] == [sample01.name, "old.jsonl"]
    assert [i.live for i in infos] == [True, False]
    assert all(i.agent == "pi" and i.session_id for i in infos)
