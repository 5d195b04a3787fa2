"""Claude Code reader: every trap of docs/claude-code-format.md §8, on the shared 2.1.197 sample
(MAIN), on our agent-oracle fixtures (tests/fixtures/claude, same Claude Code version, the fake
returning `diagnostics.cache_miss_reason`) and on small hand-made lines."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ds4sessions.agents.claude.reader import ClaudeReader, miss_reason_of, read_transcript, usage_of
import pytest

from tests.conftest import SHARED, SKIP_NO_SHARED

FIX = Path(__file__).parents[1] / "fixtures" / "claude"
MAIN_REL = "sessions-claude/projects/-home-dev-proj-claude/af1a7763-5fb1-49c2-9069-d33ceb06acd6.jsonl"


def main_path() -> Path:
    if SHARED is None:
        pytest.skip(SKIP_NO_SHARED)
    return SHARED / MAIN_REL


def feed(rows: list[dict | str]) -> ClaudeReader:
    reader = ClaudeReader(Path("mem.jsonl"))
    lines = [(i + 1, 0, (r if isinstance(r, str) else json.dumps(r)).encode()) for i, r in enumerate(rows)]
    reader.feed(lines)
    return reader


def asst(uuid: str, parent: str | None, mid: str, block: dict, usage: dict, **extra) -> dict:
    return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "isSidechain": False, "sessionId": "s",
            "timestamp": "2026-12-02T01:00:00.000Z",
            "message": {"id": mid, "model": extra.pop("model", "claude-opus-4-8"), "role": "assistant",
                        "content": [block], "usage": usage, **extra.pop("message_extra", {})}, **extra}


def user(uuid: str, parent: str | None, text: str, ts: str = "2026-12-02T01:00:00.000Z") -> dict:
    return {"type": "user", "uuid": uuid, "parentUuid": parent, "isSidechain": False, "sessionId": "s",
            "timestamp": ts, "cwd": "/p", "message": {"role": "user", "content": text}}


U = {"input_tokens": 4, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 0, "output_tokens": 7,
     "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 0}}


def test_main_streamed_rows_count_once_and_context_now() -> None:
    conv = read_transcript(main_path())
    real = [r for r in conv.requests if not r.synthetic]
    # MAIN has 8 real responses over 14 assistant rows (6–8, 15–16, 24–25, 32–33 share ids)
    assert len(real) == 8
    assert real[0].usage.cache_write == 19337 and real[0].usage.input == 4 and real[0].usage.output == 80
    last = conv.last_request
    assert last is not None and last.usage.prompt_tokens == 19875  # MAIN:52 = 3 + 19,872 + 0 = CTX 19.9k
    assert [r.synthetic for r in conv.requests].count(True) == 2  # MAIN:49, 62 (<synthetic>)
    assert conv.cwd == "/home/dev/proj-claude" and conv.session_id == "af1a7763-5fb1-49c2-9069-d33ceb06acd6"


def test_main_context_starts_at_compact_boundary_with_summary_and_preserved() -> None:
    conv = read_transcript(main_path())
    roles = [m["role"] for m in conv.messages]
    assert roles[0] == "compactionSummary"
    ids = [m.entry_id for m in conv.meta]
    # preserved MAIN:32–33 (one message.id → one message) right after the summary
    assert ids[1] == "30bc8729-47b5-42e0-b5d4-5b4283a29498"
    assert [b["type"] for b in conv.messages[1]["content"]] == ["thinking", "text"]
    assert "1a77ea26-7c6a-46e5-899b-269eaf5cd3b2" not in ids  # pre-compaction prompt gone
    # the request of the preserved reply ran before the compaction: not on the current context
    assert conv.requests[6].message_index is None
    assert conv.compactions[0].kind == "manual" and conv.compactions[0].tokens_before == 19944
    sources = [m.source for m in conv.meta]
    assert "attachment:file" in sources and "attachment:skill_listing" in sources


def test_main_bookkeeping_rows_not_sent() -> None:
    conv = read_transcript(main_path())
    text = json.dumps(list(conv.messages))
    assert "queue-operation" not in text and "toolUseResult" not in text and "leafUuid" not in text


def test_local_command_output_is_a_user_message_with_its_wrapper() -> None:
    # Claude Code 2.1.197 `normalizeMessagesForAPI`: a system/local_command row is sent as a user
    # message of its content string, `<local-command-stdout>` wrapper included; isMeta rows stay
    stdout = "<local-command-stdout>## Context Usage\n\n| Messages | 2.2k |</local-command-stdout>"
    caveat = "<local-command-caveat>Caveat: …</local-command-caveat>"
    rows = [user("u1", None, "hi"), asst("a1", "u1", "m1", {"type": "text", "text": "hello"}, U),
            {**user("c1", "a1", caveat), "isMeta": True},
            user("c2", "c1", "<command-name>/context</command-name>"),
            {"type": "system", "subtype": "local_command", "uuid": "s1", "parentUuid": "c2", "isSidechain": False,
             "content": stdout, "level": "info", "isMeta": False, "timestamp": "2026-12-02T01:00:01.000Z"},
            {"type": "system", "subtype": "turn_duration", "uuid": "s2", "parentUuid": "s1", "isSidechain": False,
             "durationMs": 5}]
    conv = feed(rows).conversation()
    assert [m["role"] for m in conv.messages] == ["user", "assistant", "user", "user", "user"]
    assert conv.messages[-1]["content"] == [{"type": "text", "text": stdout}]
    assert [m.source for m in conv.meta][2:] == ["isMeta", None, "system:local_command"]
    assert conv.meta[-1].category is None  # a user message in /context's Messages
    # MAIN at its second /context run (the file as the first run left it): MAIN:58 is on the chain
    lines = main_path().read_bytes().splitlines(keepends=True)[:59]
    reader = ClaudeReader(main_path())
    reader.feed([(i + 1, 0, raw) for i, raw in enumerate(lines)])
    main = reader.conversation()
    assert main.meta[-1].source == "system:local_command" and main.meta[-1].entry_id.startswith("b35f4d83")
    assert main.messages[-1]["content"][0]["text"].startswith("<local-command-stdout>## Context Usage")


def test_subagent_is_its_own_session_and_result_is_the_agent_call_result() -> None:
    sub = main_path().with_suffix("") / "subagents" / "agent-a0d5c8a05277f74b7.jsonl"
    from ds4sessions.agents.claude.agent import ClaudeCodeAgent
    from ds4sessions.agents.claude.reader import read_lines

    reader = ClaudeCodeAgent().reader(sub)
    reader.feed(read_lines(sub))
    conv = reader.conversation()
    assert conv.parent == "af1a7763-5fb1-49c2-9069-d33ceb06acd6"
    assert conv.extra["parentToolUseId"] == "toolu_01oedWsMOA1gt6CyDHzfIYCXJH"  # MAIN:25's Agent call
    last = conv.last_request
    assert last is not None and last.usage.prompt_tokens == 11966  # SUB:6 (format doc §6.7)
    # parent side: the Agent call's tool result carries the subagent's answer (MAIN:26)
    fix = read_transcript(FIX / "manual-compact-diagnostics.jsonl")
    assert fix.requests  # fixture readable
    lines = main_path().read_text().splitlines()[:26]
    partial = feed(lines)  # up to MAIN:26, before the compaction
    conv_p = partial.conversation()
    agent_results = [(m, mt) for m, mt in zip(conv_p.messages, conv_p.meta) if mt.tool == "Agent"]
    assert len(agent_results) == 1
    message, meta = agent_results[0]
    assert meta.source == "subagent:a0d5c8a05277f74b7"
    assert "notes.txt has 3 lines." in message["content"][0]["text"]


def test_repeated_uuid_counts_once() -> None:
    rows = [user("u1", None, "hi"), asst("a1", "u1", "m1", {"type": "text", "text": "x"}, U)]
    reader = feed(rows + rows)
    conv = reader.conversation()
    assert len(conv.requests) == 1 and len(conv.messages) == 2
    assert any("repeated" in str(d) for d in conv.diagnostics)


def test_placeholder_input_takes_largest_copy() -> None:
    small = dict(U, input_tokens=1)
    rows = [user("u1", None, "hi"), asst("a1", "u1", "m1", {"type": "text", "text": "x"}, small),
            asst("a2", "a1", "m1", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}, U)]
    conv = feed(rows).conversation()
    assert len(conv.requests) == 1 and conv.requests[0].usage.input == 4
    assert len(conv.messages) == 2 and len(conv.messages[1]["content"]) == 2


def test_sidechain_replay_of_main_message_id_is_dropped() -> None:
    side = asst("b1", "u1", "m1", {"type": "text", "text": "x"}, dict(U, input_tokens=999))
    side["isSidechain"] = True
    rows = [user("u1", None, "hi"), asst("a1", "u1", "m1", {"type": "text", "text": "x"}, U), side]
    conv = feed(rows).conversation()
    assert len(conv.requests) == 1 and conv.requests[0].usage.input == 4 and not conv.requests[0].sidechain


def test_synthetic_and_api_error_never_set_last_usage() -> None:
    rows = [user("u1", None, "hi"), asst("a1", "u1", "m1", {"type": "text", "text": "x"}, U),
            user("u2", "a1", "again"),
            asst("a2", "u2", "m2", {"type": "text", "text": "err"}, dict(U, input_tokens=50), isApiErrorMessage=True),
            asst("a3", "a2", "m3", {"type": "text", "text": "No response requested."}, dict(U, input_tokens=0), model="<synthetic>")]
    conv = feed(rows).conversation()
    assert [r.synthetic for r in conv.requests] == [False, True, True]
    assert conv.last_request is not None and conv.last_request.entry_id == "a1"
    # their content stays in the context
    assert conv.messages[-1]["content"][0]["text"] == "No response requested."


def test_iterations_with_null_model_not_added() -> None:
    usage = dict(U, iterations=[{"model": None, "input_tokens": 1000}])
    conv = feed([user("u1", None, "hi"), asst("a1", "u1", "m1", {"type": "text", "text": "x"}, usage)]).conversation()
    assert conv.requests[0].usage.input == 4


def test_missing_request_id_keys_on_message_id() -> None:
    # no row of the sample has requestId; two rows, one message.id, no requestId → one request
    rows = [user("u1", None, "hi"), asst("a1", "u1", "m1", {"type": "text", "text": "x"}, U),
            asst("a2", "a1", "m1", {"type": "text", "text": "y"}, U)]
    assert len(feed(rows).conversation().requests) == 1


def test_post_tokens_is_not_the_next_context() -> None:
    conv = read_transcript(main_path())
    assert conv.extra["postTokens"] == 701
    assert conv.last_request is not None and conv.last_request.usage.prompt_tokens == 19875


def test_microcompact_clears_listed_tool_results_and_attachments() -> None:
    rows = [user("u1", None, "hi"),
            asst("a1", "u1", "m1", {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "x"}}, U),
            {"type": "user", "uuid": "r1", "parentUuid": "a1", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "A" * 4000}]}},
            {"type": "attachment", "uuid": "at1", "parentUuid": "r1", "attachment": {"type": "file", "filename": "f", "content": {}}},
            {"type": "system", "subtype": "microcompact_boundary", "uuid": "mc", "parentUuid": "at1",
             "microcompactMetadata": {"trigger": "auto", "preTokens": 2000, "compactedToolIds": ["t1"],
                                      "clearedAttachmentUUIDs": ["at1"]}},
            user("u2", "mc", "next")]
    conv = feed(rows).conversation()
    results = [m for m in conv.messages if m["role"] == "toolResult"]
    assert results[0]["content"][0]["text"] == "[Old tool result content cleared]"
    assert not any(mt.source == "attachment:file" for mt in conv.meta)
    assert any(c.kind == "micro" and c.tokens_before == 2000 for c in conv.compactions)


def test_miss_reason_parsed_from_fixture_written_by_2_1_197() -> None:
    # Claude Code 2.1.197 copied the fake's message.diagnostics into the transcript
    conv = read_transcript(FIX / "manual-compact-diagnostics.jsonl")
    reasons = [r.miss_reason for r in conv.requests if not r.synthetic]
    assert reasons[-1] == "messages_changed" and reasons.count("messages_changed") == 1
    line = '{"message":{"diagnostics":{"cache_miss_reason":{"type":"system_changed","cache_missed_input_tokens":12}}}}'
    assert miss_reason_of(json.loads(line)["message"]) == "system_changed"
    assert miss_reason_of({"diagnostics": {"cache_miss_reason": None}}) is None


def test_auto_compaction_fixture() -> None:
    conv = read_transcript(FIX / "autocompact-diagnostics.jsonl")
    autos = [c for c in conv.compactions if c.kind == "auto"]
    assert len(autos) == 2 and all(c.tokens_before and c.tokens_before > 24000 for c in autos)
    assert conv.messages[0]["role"] == "compactionSummary"


def test_usage_split() -> None:
    u = usage_of({"input_tokens": 4, "cache_creation_input_tokens": 45, "cache_read_input_tokens": 19467,
                  "output_tokens": 46, "cache_creation": {"ephemeral_1h_input_tokens": 45, "ephemeral_5m_input_tokens": 0}})
    assert (u.cache_write, u.cache_write_1h, u.cache_write_5m, u.prompt_tokens) == (45, 45, 0, 19516)
    assert usage_of({"input_tokens": "x", "cache_creation": 5}).prompt_tokens == 0


def test_bad_lines_are_counted_not_raised() -> None:
    reader = feed(["not json", "[1,2]", '{"type":"assistant","uuid":"a","message":{"content":"x","usage":7}}',
                   '{"type":"user","uuid":"b","message":{"content":[null,5,{"type":"tool_result"}]}}'])
    reader.feed([(9, 0, b"\xff\xfe{}")])
    conv = reader.conversation()
    kinds = {str(d.kind) for d in conv.diagnostics}
    assert {"malformed", "non_object", "invalid_utf8"} <= kinds


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(
    st.binary(max_size=200),
    st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20)),
                 lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(
                     st.sampled_from(["type", "uuid", "parentUuid", "message", "content", "usage", "id", "model",
                                      "attachment", "subtype", "compactMetadata", "isSidechain", "leafUuid",
                                      "preservedMessages", "uuids", "input_tokens", "diagnostics", "tool_use_id"]),
                     c, max_size=6)), max_leaves=20).map(lambda v: json.dumps(v).encode())), max_size=12))
def test_reader_never_raises(lines: list[bytes]) -> None:
    reader = ClaudeReader(Path("fuzz.jsonl"))
    reader.feed([(i + 1, 0, raw) for i, raw in enumerate(lines)])
    conv = reader.conversation()
    assert len(conv.messages) == len(conv.meta)
    from ds4sessions.agents.claude.views import cache_report, context_map

    context_map(conv, {})
    cache_report(conv)


def test_incremental_feed_equals_whole_read() -> None:
    path = FIX / "autocompact-diagnostics.jsonl"
    whole = read_transcript(path)
    reader = ClaudeReader(path)
    raw = path.read_bytes().splitlines(keepends=True)
    offset = 0
    for i in range(0, len(raw), 7):  # as a tailer would, a few lines at a time
        chunk = []
        for j, line in enumerate(raw[i:i + 7], i + 1):
            chunk.append((j, offset, line))
            offset += len(line)
        reader.feed(chunk)
        reader.conversation()
    inc = reader.conversation()
    assert inc.requests == whole.requests and list(inc.messages) == list(whole.messages)
    assert inc.last_request is not None and inc.last_request.usage.prompt_tokens == whole.last_request.usage.prompt_tokens


def test_a_line_over_the_cap_is_never_whole_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`read_transcript` streams lines with the reader's cap: a 16 MB line over a 1,000-byte cap
    is reported and only its head is read (the file iterator read it whole first)."""
    from tests.conftest import traced_peak

    from ds4sessions.agents.claude import reader as claude_reader

    monkeypatch.setattr(claude_reader, "MAX_LINE_BYTES", 1000)
    lines = (FIX / "manual-compact-diagnostics.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[:5]) + b'{"type":"user","x":"' + b"y" * 16_000_000 + b'"}\n' + b"".join(lines[5:]))
    conversation, peak = traced_peak(lambda: read_transcript(path))
    assert ("line longer than 1000 bytes, not read", 6) in [(d.message, d.line_no) for d in conversation.diagnostics]
    assert peak < 6_000_000, peak  # (read chunks; the whole line: 32 MB)
