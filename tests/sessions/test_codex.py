"""The Codex rollout reader, token rules and discovery, on real Codex CLI 0.171.0 rollouts.

Fixtures (tests/fixtures/codex/): `sample/` = the shared rollouts (MAIN: 6 CLI calls, a spawned
subagent, one auto-compaction; SUB: the subagent), `home/` = rollouts made by
tests/agent-oracle/run_codex_extra.sh (rate-limit headers, a fork, an archived session).
Synthetic rows (built below) cover what 0.171 does not write here: `info: null`, an old-style
fork replay, a remote compaction, unknown types, a rollback.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4sessions.agents.base import Usage
from ds4sessions.agents.codex import CodexAgent, looks_like_rollout, read_rollout
from ds4sessions.agents.codex.discovery import discover, rollout_files
from ds4sessions.agents.codex.reader import CodexReader, iter_lines
from ds4sessions.agents.codex.tokens import RawUsage, percent_left, usable_window, window_note
from ds4sessions.agents.registry import agent_for_path

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
DAY = FIX / "sample" / "sessions" / "2026" / "12" / "02"
MAIN = DAY / "rollout-2026-12-02T01-10-23-01a2344d-7ef9-7e61-a841-8556539ac489.jsonl"
SUB = DAY / "rollout-2026-12-02T01-10-24-01a2344d-82dc-7482-b89c-38db012a18b9.jsonl"
HOME = FIX / "home"
PARENT = HOME / "sessions/2026/12/02/rollout-2026-12-02T01-48-04-01a2346f-feba-7773-bb08-ef2cfc95dbfe.jsonl"
FORK = HOME / "sessions/2026/12/02/rollout-2026-12-02T01-48-07-01a23470-08a5-76a1-af97-29f0a2f643d5.jsonl"
ARCHIVED = HOME / "archived_sessions/rollout-2026-12-02T01-48-09-01a23470-0fa8-7311-a1dd-fe2676c76fe6.jsonl"
MAIN_ID = "01a2344d-7ef9-7e61-a841-8556539ac489"
SUB_ID = "01a2344d-82dc-7482-b89c-38db012a18b9"


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def feed(rows: list[bytes | dict], path: Path = Path("rollout-x.jsonl"), **options) -> CodexReader:
    reader = CodexReader(path, **options)
    raw = [r if isinstance(r, bytes) else (json.dumps(r) + "\n").encode() for r in rows]
    reader.feed([(i + 1, 0, r) for i, r in enumerate(raw)])
    return reader


def meta(thread: str = "t-1", **extra) -> dict:
    return {"timestamp": "2026-12-02T00:00:00.000Z", "type": "session_meta",
            "payload": {"id": thread, "cwd": "/w", "cli_version": "0.171.0", "model_provider": "openai",
                        "base_instructions": {"text": "You are Codex."}, **extra}}


def usage(inp: int, cached: int, out: int, reasoning: int = 0) -> dict:
    return {"input_tokens": inp, "cached_input_tokens": cached, "cache_write_input_tokens": 0, "output_tokens": out,
            "reasoning_output_tokens": reasoning, "total_tokens": inp + out}


def token_count(total: dict, last: dict, window: int = 258_400, limits: dict | None = None) -> dict:
    return {"timestamp": "2026-12-02T00:00:01.000Z", "type": "event_msg",
            "payload": {"type": "token_count", "info": {"total_token_usage": total, "last_token_usage": last,
                                                         "model_context_window": window}, "rate_limits": limits}}


def user(text: str) -> dict:
    return {"timestamp": "2026-12-02T00:00:00.500Z", "type": "response_item",
            "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}}


# ------------------------------------------------------------------ tokens


def test_nested_usage_becomes_disjoint_buckets() -> None:
    # MAIN:20 last_token_usage: input 10,117 of which 9,920 cached; output 56 (codex-rs protocol.rs TokenUsage)
    raw = RawUsage.parse(usage(10117, 9920, 56))
    assert raw is not None and raw.total_tokens == 10173
    assert raw.to_usage() == Usage(input=197, cache_read=9920, cache_write=0, output=56, reasoning=0)
    # reasoning ⊂ output: MAIN:16 output 131 holds reasoning 25, never added on top
    first = RawUsage.parse(usage(9939, 0, 131, 25)).to_usage()
    assert (first.output, first.reasoning, first.prompt_tokens) == (131, 25, 9939)
    # a missing total is input + output (reasoning is inside output)
    assert RawUsage.parse({"input_tokens": 10, "output_tokens": 5, "reasoning_output_tokens": 3}).total_tokens == 15


def test_percent_left_is_codex_formula() -> None:
    # codex-rs protocol.rs percent_of_context_window_remaining, BASELINE_TOKENS = 12000
    assert percent_left(10_613, 190_000) == 100  # MAIN:104 below the baseline
    assert percent_left(101_000, 190_000) == 50  # (178,000 − 89,000) / 178,000
    assert percent_left(190_000, 190_000) == 0
    assert percent_left(300_000, 190_000) == 0
    assert percent_left(5_000, 12_000) == 0  # window ≤ baseline
    assert percent_left(12_000 + 89, 190_000) == 100  # 99.95 rounds up, as Rust's round()


def test_95_percent_window_rule() -> None:
    assert usable_window(272_000) == 258_400  # openai/codex #40095
    assert usable_window(200_000) == 190_000  # the sample's config.toml vs model_context_window
    assert "95% of the configured 272,000" in window_note(258_400, 272_000)
    assert window_note(272_000, 272_000) is None
    assert window_note(190_000, None) is None


# ------------------------------------------------------------------ MAIN (real)


def test_main_requests_count_each_model_request_once() -> None:
    conv = read_rollout(MAIN).conversation()
    # 13 token_count rows: 11 requests, 1 re-emit (MAIN:65 = MAIN:61), 1 post-compaction estimate (MAIN:73)
    assert len(conv.requests) == 11
    assert conv.extra["eventTypes"]["token_count"] == 13
    assert conv.extra["eventTypes"]["token_count.reemit"] == 1
    assert conv.extra["eventTypes"]["token_count.estimate"] == 1
    # the sum of the requests equals Codex's own cumulative total at MAIN:104
    assert sum(r.usage.prompt_tokens for r in conv.requests) == 110_240
    assert sum(r.usage.cache_read for r in conv.requests) == 99_008
    assert sum(r.usage.output for r in conv.requests) == 986
    assert sum(r.usage.reasoning for r in conv.requests) == 63
    assert conv.requests[0].usage == Usage(input=9939, cache_read=0, output=131, reasoning=25)
    assert conv.requests[0].entry_id == "resp_d58f81262c1cf0a528108209e287b1fd"
    assert {r.model for r in conv.requests} == {"gpt-5-codex"} and conv.provider == "fake"


def test_main_context_and_window() -> None:
    reader = read_rollout(MAIN, configured_window=200_000)
    conv = reader.conversation()
    assert conv.extra["contextTokens"] == 10_613  # MAIN:104 last_token_usage.total_tokens
    assert conv.context_window == 190_000
    assert conv.extra["percentLeft"] == 100
    assert "95% of the configured 200,000" in conv.extra["windowNote"]
    assert conv.last_request is not None and conv.last_request.entry_id == "resp_e2bfbf916cfef9a7f35ed139b101f825"
    override = read_rollout(MAIN, context_window=50_000).conversation()
    assert override.context_window == 50_000 and override.extra["recordedWindow"] == 190_000
    assert override.extra["percentLeft"] == 100 - round(100 * 0 / 38_000)


def test_main_compaction_replaces_the_context() -> None:
    conv = read_rollout(MAIN).conversation()
    (compaction,) = conv.compactions
    assert compaction.entry_id == "resp_251535fa2cc936029122c1db43e190c6"
    assert compaction.tokens_before == 10_948  # MAIN:61, the last real request before it
    assert (compaction.kind, compaction.opaque) == ("auto", False)
    # the compaction call (MAIN:67-68) is billed but never the context anchor
    call = conv.requests[7]
    assert call.entry_id == compaction.entry_id and call.synthetic and call.message_index is None
    assert conv.extra["compactionCalls"] == [7]
    assert all(r.message_index is None for r in conv.requests[:8])
    assert [r.message_index for r in conv.requests[8:]] == [8, 11, 13]
    # after it: system prompt + the 6 replacement items + the 3 later turns' items
    roles = [m["role"] for m in conv.messages]
    assert roles[0] == "system" and conv.messages[0]["content"].startswith("You are a coding agent running in the Codex CLI")
    summaries = [m for m in conv.messages if "Summary: the user listed the files" in json.dumps(m)]
    assert len(summaries) == 1  # MAIN:66 (compaction_output) is not added a second time
    assert summaries[0]["ds4Category"] == "compaction" and summaries[0]["customType"] == "compaction.summary"
    users = [m["content"][0]["text"] for m in conv.messages if m["role"] == "user"]
    assert users == ["LIST-FILES: what files are in this directory?", "READ-NOTES: show me notes.txt",
                     "DELEGATE: use a subagent to count the lines of notes.txt", "THINK-ONLY: what is 17 times 3?",
                     "AFTER-COMPACT: what do you remember about notes.txt?", "THINK-ONLY: once more, 17 times 3?"]
    assert len(conv.messages) == len(conv.meta) == 15


def test_count_after_compaction_is_unknown_until_the_next_request() -> None:
    raw = lines_of(MAIN)
    reader = CodexReader(MAIN)
    reader.feed(iter_lines(b"".join(raw[:73])))
    conv = reader.conversation()
    assert conv.extra["contextTokens"] is None
    assert conv.extra["contextState"] == "unknown after compaction"
    assert conv.extra["codexEstimate"] == 6_108  # MAIN:73, Codex's own placeholder
    assert conv.extra["percentLeft"] is None
    reader.feed([(i + 1, 0, line) for i, line in enumerate(raw[73:82], start=73)])
    assert reader.conversation().extra["contextTokens"] == 10_358  # MAIN:82


def test_reasoning_summary_shown_encrypted_counted_opaque() -> None:
    conv = read_rollout(MAIN).conversation()
    thinking = [(m, mm) for m, mm in zip(conv.messages, conv.meta) if m["content"] and isinstance(m["content"], list)
                and m["content"][0].get("type") == "thinking"]
    assert len(thinking) == 2
    message, meta = thinking[-1]
    assert message["content"][0]["thinking"] == "**Plan**\n\n17 * 3 = 51."
    assert meta.opaque and message["content"][0]["opaqueBytes"] == len("ZmFrZS1lbmNyeXB0ZWQt071e54c294628993") * 3 // 4
    assert conv.extra["opaque"] == {"items": 3, "encryptedBytes": 81}


def test_tool_calls_and_results_per_tool() -> None:
    reader = read_rollout(MAIN)
    assert dict(reader.tools_seen) == {"exec_command": 2, "multi_agent_v1.spawn_agent": 1, "multi_agent_v1.wait_agent": 1}
    conv = CodexReader(MAIN)
    conv.feed(iter_lines(b"".join(lines_of(MAIN)[:20])))
    c = conv.conversation()
    results = [m for m in c.messages if m["role"] == "toolResult"]
    assert results[0]["toolName"] == "exec_command" and "hello.py\nnotes.txt" in results[0]["content"][0]["text"]
    calls = [b for m in c.messages if m["role"] == "assistant" for b in m["content"] if b["type"] == "toolCall"]
    assert calls[0]["arguments"] == {"cmd": "ls"} and calls[0]["id"] == results[0]["toolCallId"]


def test_subagent_linked_to_the_spawn_call() -> None:
    parent = read_rollout(MAIN).conversation()
    child = read_rollout(SUB).conversation()
    assert child.session_id == SUB_ID and child.parent == MAIN_ID  # keyed by id, not session_id (= root)
    assert child.extra["subagent"] == {"parentThreadId": MAIN_ID, "depth": 1, "nickname": "Linnaeus", "role": None,
                                       "spawnCallId": None}  # no way to find the parent without find_thread
    (spawned,) = parent.extra["spawnedAgents"]
    assert spawned["agentId"] == SUB_ID and spawned["nickname"] == "Linnaeus"
    call_ids = [json.loads(line)["payload"].get("call_id") for line in lines_of(MAIN)
                if b'"name": "spawn_agent"' in line or b'"name":"spawn_agent"' in line]
    assert spawned["callId"] == call_ids[0]
    assert child.extra["contextTokens"] == 7_341 and len(child.requests) == 2  # SUB:18
    linked = CodexAgent().reader(SUB)  # finds MAIN in the same Codex home
    linked.feed(iter_lines(SUB.read_bytes()))
    assert linked.conversation().extra["subagent"]["spawnCallId"] == spawned["callId"]


def test_incremental_feed_equals_whole_read() -> None:
    whole = read_rollout(MAIN).conversation()
    reader = CodexReader(MAIN)
    for item in iter_lines(MAIN.read_bytes()):
        reader.feed([item])
    step = reader.conversation()
    assert step.requests == whole.requests and step.messages == whole.messages and step.extra == whole.extra


# ------------------------------------------------------------------ generated (home/)


def test_rate_limits_kept_from_token_count() -> None:
    conv = read_rollout(PARENT).conversation()
    limits = conv.extra["rateLimits"]["limits"]
    assert limits["primary"] == {"used_percent": 19.0, "window_minutes": 300, "resets_at": 1796190000}
    assert limits["secondary"] == {"used_percent": 43.0, "window_minutes": 10080, "resets_at": 1796700000}
    assert conv.extra["rateLimits"]["time"] == dt.datetime(2026, 12, 2, 1, 48, 8, 281000, tzinfo=dt.UTC).timestamp()


def test_info_null_rows_carry_rate_limits_only() -> None:
    limits = {"primary": {"used_percent": 7.0, "window_minutes": 300, "resets_at": 1763483205},
              "secondary": {"used_percent": 77.0, "window_minutes": 10080, "resets_at": 1763606387}}
    reader = feed([meta(), {"timestamp": "2026-12-02T00:00:00.100Z", "type": "event_msg",
                            "payload": {"type": "token_count", "info": None, "rate_limits": limits}}])
    conv = reader.conversation()
    assert list(conv.requests) == [] and conv.extra["rateLimitRows"] == 1
    assert conv.extra["rateLimits"]["limits"] == limits


def test_real_fork_counts_only_its_own_request() -> None:
    fork = read_rollout(FORK).conversation()
    assert fork.parent == "01a2346f-feba-7773-bb08-ef2cfc95dbfe" and fork.extra["forkedFrom"] == fork.parent
    # its one token_count carries the parent's cumulative total (51,610): the request is the last usage only
    (request,) = fork.requests
    assert request.usage == Usage(input=10485, cache_read=0, output=119, reasoning=19)
    assert fork.extra["eventTypes"]["token_count.fork_baseline"] == 1
    assert fork.title == "THINK-ONLY: in the fork, what is 17 times 3?"


def test_real_fork_inherits_the_parents_history_without_its_requests() -> None:
    # 0.171 keeps the parent's rows in the parent's file: forked_from_ordinal_exclusive = 38 (FORK:1)
    reader = CodexAgent().reader(FORK)
    reader.feed(iter_lines(FORK.read_bytes()))
    fork = reader.conversation()
    assert fork.extra["inherited"] == {"parent": "01a2346f-feba-7773-bb08-ef2cfc95dbfe", "ordinalExclusive": 38,
                                       "path": str(PARENT), "rows": 38}
    users = [m["content"][0]["text"] for m in fork.messages if m["role"] == "user"]
    assert users == ["LIST-FILES: what files are in this directory?", "READ-NOTES: show me notes.txt",
                     "THINK-ONLY: in the fork, what is 17 times 3?"]
    (request,) = fork.requests  # the parent's 4 token_count rows are replay, not requests
    assert fork.extra["forkReplayedTokenRows"] == 4
    assert request.usage.prompt_tokens + request.usage.output == 10_604 == fork.extra["contextTokens"]
    assert fork.entries == 14 and fork.extra["eventTypes"]["token_count"] == 1
    assert fork.title == "THINK-ONLY: in the fork, what is 17 times 3?"
    assert request.message_index == 14  # the reply starts after the fork's own prompt


def test_fork_replay_of_the_parent_is_not_counted_twice() -> None:
    # old-style fork file (ccusage #1349/#1369): own meta, parent's meta + its token_count rows, own meta again
    rows = [meta("child", forked_from_id="parent"), meta("parent"),
            token_count(usage(1000, 0, 100), usage(1000, 0, 100)),
            token_count(usage(2200, 900, 150), usage(1200, 900, 50)),
            meta("child", forked_from_id="parent"), user("go on"),
            token_count(usage(3500, 2000, 230), usage(1300, 1100, 80))]
    conv = feed(rows).conversation()
    assert conv.extra["forkReplayedTokenRows"] == 2
    (request,) = conv.requests
    assert request.usage == Usage(input=200, cache_read=1100, output=80)  # the delta after the replayed total
    assert conv.extra["rowTypes"]["replayed_session_meta"] == 1


def test_reemitted_token_count_is_skipped() -> None:
    row = token_count(usage(1000, 0, 100), usage(1000, 0, 100))
    conv = feed([meta(), user("hi"), row, row, row]).conversation()
    assert len(conv.requests) == 1 and conv.extra["eventTypes"]["token_count.reemit"] == 2


def test_total_reset_falls_back_to_last_usage() -> None:
    rows = [meta(), user("a"), token_count(usage(5000, 0, 100), usage(5000, 0, 100)),
            token_count(usage(800, 0, 20), usage(800, 512, 20))]
    conv = feed(rows).conversation()
    assert [r.usage for r in conv.requests] == [Usage(input=5000, output=100), Usage(input=288, cache_read=512, output=20)]


def test_remote_compaction_is_opaque_and_labelled() -> None:
    blob = "A" * 400
    reply = {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                                  "content": [{"type": "output_text", "text": "done"}]}}
    rows = [meta(), user("first"), token_count(usage(5000, 0, 100), usage(5000, 0, 100)), reply,
            {"timestamp": "2026-12-02T00:00:02Z", "type": "compacted",
             "payload": {"message": "", "replacement_history": [
                 user("first")["payload"], {"type": "compaction", "encrypted_content": blob}]}}]
    conv = feed(rows).conversation()
    (compaction,) = conv.compactions
    assert (compaction.kind, compaction.opaque, compaction.tokens_before) == ("remote", True, 5100)
    last, meta_last = conv.messages[-1], conv.meta[-1]
    assert meta_last.opaque and meta_last.category == "compaction" and last["opaqueBytes"] == 300
    assert "opaque" in last["content"][0]["text"]


def test_recorded_dynamic_tools_count_as_tools() -> None:
    spec = {"name": "lookup", "namespace": "crm", "description": "Find a customer", "defer_loading": False,
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
    conv = feed([meta(dynamic_tools=[spec])]).conversation()
    system = conv.messages[0]
    assert system["toolsAdded"] == [{"name": "crm.lookup", "description": "Find a customer",
                                     "parameters": spec["input_schema"]}]
    assert conv.extra["toolsRecorded"] == ["crm.lookup"]
    from ds4core.categories import message_parts
    assert [(c, child) for c, child, _ in message_parts(system)] == [("system_prompt", None), ("tools", "crm.lookup")]
    assert read_rollout(MAIN).conversation().extra["toolsRecorded"] == []  # 0.171 exec records none


def test_turn_context_model_and_effort_per_turn() -> None:
    rows = [meta(), {"type": "turn_context", "timestamp": "2026-12-02T00:00:00Z",
                     "payload": {"turn_id": "a", "model": "gpt-5.4", "effort": "high"}},
            {"type": "turn_context", "timestamp": "2026-12-02T00:01:00Z",
             "payload": {"turn_id": "b", "model": "gpt-5.4-mini", "collaboration_mode": {"settings": {"reasoning_effort": "low"}}}}]
    conv = feed(rows).conversation()
    assert [(t["model"], t["effort"]) for t in conv.extra["turns"]] == [("gpt-5.4", "high"), ("gpt-5.4-mini", "low")]
    assert conv.model == "gpt-5.4-mini"


def test_unknown_types_are_counted_not_dropped() -> None:
    rows = [meta(), {"type": "brand_new_row", "payload": {}}, {"type": "event_msg", "payload": {"type": "brand_new_event"}},
            {"type": "response_item", "payload": {"type": "brand_new_item"}}, b"{not json\n", b"[1,2]\n", {"payload": 1}]
    conv = feed(rows).conversation()
    counts = conv.extra["diagnosticCounts"]
    assert counts == {"unknown_row_type": 1, "unknown_item_type": 1, "malformed": 1, "non_object": 1, "no_type": 1}
    assert conv.extra["rowTypes"]["brand_new_row"] == 1 and conv.extra["eventTypes"]["brand_new_event"] == 1
    assert any("brand_new_item" in str(d) for d in conv.diagnostics)


def test_rollback_drops_the_last_turns() -> None:
    rows = [meta(), user("one"), user("two"), user("three"),
            {"type": "event_msg", "payload": {"type": "thread_rolled_back", "num_turns": 2}}]
    conv = feed(rows).conversation()
    assert [m["content"][0]["text"] for m in conv.messages if m["role"] == "user"] == ["one"]


KEYS = st.sampled_from(["type", "payload", "info", "id", "role", "content", "total_token_usage", "last_token_usage",
                        "replacement_history", "call_id", "output", "summary", "encrypted_content", "num_turns",
                        "input_tokens", "forked_from_id", "source", "ordinal", "forked_from_ordinal_exclusive"])
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.sampled_from(
    ["session_meta", "response_item", "compacted", "event_msg", "token_count", "message", "reasoning", "function_call",
     "function_call_output", "compaction", "thread_rolled_back", "turn_context", "user", "assistant", "developer"])


def _nest(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=4)


JSON_ROWS = st.recursive(SCALARS, _nest, max_leaves=12).map(lambda v: (json.dumps(v) + "\n").encode())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=60), JSON_ROWS), max_size=12))
def test_reader_never_raises(lines: list[bytes]) -> None:
    reader = CodexReader(Path("rollout-fuzz.jsonl"))
    reader.feed([(i + 1, 0, raw) for i, raw in enumerate([(json.dumps(meta()) + "\n").encode(), *lines])])
    conv = reader.conversation()
    assert len(conv.messages) == len(conv.meta)
    json.dumps(conv.extra)  # JSON-safe
    from ds4sessions.agents.codex import view

    json.dumps([view.map_json(conv, exact=False), view.cache_json(conv, 0.0, 300.0), view.context_json(conv)])


# ------------------------------------------------------------------ discovery and recognition


def test_registry_and_recognition() -> None:
    assert agent_for_path(MAIN).name == "codex"
    assert looks_like_rollout(MAIN.read_bytes()[:65536])
    assert not looks_like_rollout(b'{"type":"session","version":3,"id":"x"}\n')
    assert not looks_like_rollout(b"garbage")
    assert looks_like_rollout(MAIN.read_bytes()[:4096])  # the 21,825-byte first line cut by the head
    assert not looks_like_rollout(b'{"timestamp":"x","type":"response_item","payload":{"a":"' + b"x" * 5000)
    assert CodexAgent().capabilities.steering is False and "only reads" in CodexAgent().capabilities.read_only_reason
    caps = CodexAgent().capabilities
    assert caps.cache_ttl_recorded is False and caps.ds4_plan is True and caps.ds4_exact is False  # DS4: a what-if


def test_discovery_sessions_copy_wins_over_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "codex"
    shutil.copytree(HOME, home)
    # the same rollout in both places: sessions/ wins
    dup = home / "archived_sessions" / PARENT.name
    dup.write_bytes(PARENT.read_bytes())
    (home / "session_index.jsonl").write_text(json.dumps({"id": "01a23470-0fa8-7311-a1dd-fe2676c76fe6", "thread_name": "named thread"}) + "\n")
    monkeypatch.setenv("CODEX_HOME", str(home))
    files = rollout_files()
    assert sorted(p.name for p in files) == sorted([PARENT.name, FORK.name, ARCHIVED.name])
    assert next(p for p in files if p.name == PARENT.name).parent.name == "02"
    infos = CodexAgent().discover()
    by_id = {i.session_id: i for i in infos}
    assert by_id["01a23470-0fa8-7311-a1dd-fe2676c76fe6"].title == "named thread"
    assert by_id["01a2346f-feba-7773-bb08-ef2cfc95dbfe"].title == "LIST-FILES: what files are in this directory?"
    assert by_id["01a23470-08a5-76a1-af97-29f0a2f643d5"].parent == "01a2346f-feba-7773-bb08-ef2cfc95dbfe"
    assert all(i.project == "/tmp/w12-agents/proj-codex" and i.model == "gpt-5-codex" and i.agent == "codex" for i in infos)
    assert not any(i.live for i in infos)  # copied files keep no open turn


def test_live_when_recent_and_a_turn_is_open(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    day = home / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True)
    rows = lines_of(MAIN)
    path = day / MAIN.name
    path.write_bytes(b"".join(rows[:30]))  # inside the second turn (task_started at MAIN:23)
    (info,) = discover(home)
    assert info.live
    os.utime(path, (time.time() - 3600, time.time() - 3600))
    assert not discover(home)[0].live
    path.write_bytes(b"".join(rows[:38]))  # task_complete at MAIN:38
    assert not discover(home)[0].live


def test_live_while_a_codex_process_holds_the_thread_writer_lock(tmp_path: Path) -> None:
    """Codex 0.171's TUI keeps `thread-writer-locks/<thread id>.lock` flock()ed while the thread
    is open (seen with the real CLI in tests/agent-oracle/run_live_two.sh): an old rollout whose
    turn is complete is live while the lock is held, idle once it is released or gone."""
    import fcntl

    from ds4sessions.agents.codex.discovery import locked_threads

    home = tmp_path / "codex"
    day = home / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True)
    path = day / MAIN.name
    path.write_bytes(b"".join(lines_of(MAIN)[:38]))  # task_complete at MAIN:38: no open turn
    os.utime(path, (time.time() - 3600, time.time() - 3600))
    thread = discover(home)[0].session_id
    assert thread and not discover(home)[0].live
    locks = home / "thread-writer-locks"
    locks.mkdir()
    (locks / ".coordination.lock").write_bytes(b"")
    lock = locks / f"{thread}.lock"
    lock.write_bytes(b"")
    with lock.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what Codex's app server does
        assert locked_threads(home) == {thread}
        assert discover(home)[0].live
        fcntl.flock(held, fcntl.LOCK_UN)
        if Path("/proc/locks").exists():  # Linux: a lock file nobody holds (a crash) is not live
            assert locked_threads(home) == set()
            assert not discover(home)[0].live
    lock.unlink()  # Codex removes it when the thread closes
    assert locked_threads(home) == set() and not discover(home)[0].live
    # no /proc/locks (not Linux): the file's presence counts
    lock.write_bytes(b"")
    assert locked_threads(home, proc_locks=tmp_path / "no-such-file") == {thread}


def test_shared_rollouts_match_the_fixture_copies(shared_dir: Path) -> None:
    root = shared_dir / "sessions-codex" / "sessions" / "2026" / "12" / "02"
    for path in (MAIN, SUB):
        shared = read_rollout(root / path.name, configured_window=200_000).conversation()
        local = read_rollout(path, configured_window=200_000).conversation()
        assert shared.requests == local.requests and shared.extra["contextTokens"] == local.extra["contextTokens"]


def test_map_state_append_equals_a_fresh_map() -> None:
    from ds4sessions.agents.codex import view

    state = view.MapState(exact=False)
    reader = CodexReader(MAIN)
    items = iter_lines(MAIN.read_bytes())
    for cut in (16, 40, 68, 69, 73, 90, len(items)):  # across the compaction (MAIN:69) too
        reader.feed(items[reader.entries:cut])
        conv = reader.conversation()
        assert view.map_json(conv, state=state) == view.map_json(conv, exact=False)


def test_a_bare_carriage_return_does_not_end_a_line() -> None:
    """Lines end at `\\n` only, as Codex reads a rollout back (codex-rs `load_rollout_items`:
    `str::lines`): two rows joined by a bare `\\r` are one malformed line (`bytes.splitlines`
    made two rows of them), and the line numbers after it stay the file's."""
    data = MAIN.read_bytes()
    joined = b'{"timestamp":"2026-12-02T01:10:30.000Z","type":"event_msg","payload":{"type":"x"}}\r' \
             b'{"timestamp":"2026-12-02T01:10:31.000Z","type":"event_msg","payload":{"type":"y"}}\r\n'
    lines = iter_lines(data + joined + b'{"torn"')
    assert len(lines) == data.count(b"\n") + 2 and lines[-1] == (len(lines), len(data) + len(joined), b'{"torn"')
    reader = CodexReader(MAIN)
    reader.feed(lines[:-1])
    whole = CodexReader(MAIN)
    whole.feed(iter_lines(data))
    assert reader.row_types == whole.row_types
    assert [(d.kind, d.line_no) for d in reader.diagnostics][-1] == ("malformed", data.count(b"\n") + 1)
    assert iter_lines(b"") == [] and iter_lines(b"a\n\nb") == [(1, 0, b"a"), (2, 2, b""), (3, 3, b"b")]


def test_read_rollout_streams_the_file(tmp_path: Path) -> None:
    """`read_rollout` and the CLI's `read_conversation` read the file a line at a time, with
    `iter_lines`' lines (they held the file's bytes and a list of every line: ~130 bytes a line
    for a file of blank lines)."""
    from tests.conftest import traced_peak

    path = tmp_path / "r.jsonl"
    data = MAIN.read_bytes()
    path.write_bytes(data[: len(data) // 2].rsplit(b"\n", 1)[0] + b"\n" + b"\n" * 200_000 + b"\r\n" +
                     data[len(data) // 2:].split(b"\n", 1)[1] + b'{"torn"')
    whole = CodexReader(path)
    whole.feed(iter_lines(path.read_bytes()))
    reader, peak = traced_peak(lambda: read_rollout(path))
    assert reader.row_types == whole.row_types and reader.diagnostics == whole.diagnostics
    assert reader.conversation().messages == whole.conversation().messages
    assert reader.diagnostics[-1].line_no == path.read_bytes().count(b"\n") + 1  # the torn line, by number
    assert peak < 4 << 20, peak  # (the file's bytes alone are 0.3 MB; the old list ~26 MB)
    # and the read `ds4tui map/cache/context` make (it read the bytes and listed every line)
    from ds4sessions.agents.codex import CodexAgent

    conversation, peak = traced_peak(lambda: CodexAgent()._read(path))
    assert conversation.messages == whole.conversation().messages and peak < 4 << 20, peak


def test_a_line_over_the_cap_is_reported_alike_by_map_and_the_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line longer than `MAX_LINE_BYTES` is one "oversized" diagnostic, not read, both in the
    one-shot read (`read_rollout`: it read the whole line) and in the view's tailer (its
    `OversizedLine` head was parsed and reported as bad JSON)."""
    from ds4sessions.ingest import limits, tailer

    for module in (limits, tailer):
        monkeypatch.setattr(module, "MAX_LINE_BYTES", 3000)
    data = MAIN.read_bytes()
    big = b'{"timestamp":"2026-12-02T01:10:30.000Z","type":"event_msg","payload":{"type":"x","t":"' + b"y" * 5000 + b'"}}\n'
    path = tmp_path / "r.jsonl"
    path.write_bytes(data + big)
    shown = CodexReader(path)
    shown.feed(tailer.Tailer(path).poll().lines)
    read = read_rollout(path)
    number = data.count(b"\n") + 1
    assert [(d.kind, d.message, d.line_no) for d in read.diagnostics] == \
        [(d.kind, d.message, d.line_no) for d in shown.diagnostics]
    assert (read.diagnostics[-1].kind, read.diagnostics[-1].line_no) == ("oversized", number)
    assert read.diagnostics[-1].message == "line of 5,089 bytes is longer than the 3,000-byte cap; not read"
