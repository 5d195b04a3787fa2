"""Gemini CLI sessions (issue 34): the reader replays the records as the CLI's loader does, and
what it says the CLI sent equals what the CLI put on the wire, request by request, in real files
(tests/fixtures/gemini: the real `@google/gemini-cli` 0.61.0 against a scripted fake; the fake's
log is the oracle, `expected.json`).

Small hand-made lines pin down one loader rule at a time (an upsert keeps the first place, a
rewind to an unknown id drops everything, a snapshot replaces the list), each checked against
the CLI's own `loadConversationRecord` (cited in `ds4sessions.agents.gemini.reader`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ds4sessions.agents.gemini import discovery, models
from ds4sessions.agents.gemini.agent import GeminiCliAgent, looks_like_gemini
from ds4sessions.agents.gemini.reader import GeminiReader, read_session
from ds4sessions.ingest.limits import iter_lines
from tests.conftest import FIXTURES

GEMINI = FIXTURES / "gemini"
MAIN_HOME = GEMINI / "main" / "home"
EXTRA_HOME = GEMINI / "extra" / "home"
MAIN = MAIN_HOME / ".gemini/tmp/proj-gemini/chats/session-2026-12-07T19-24-3adf0510.jsonl"
ORPHAN = MAIN_HOME / ".gemini/tmp/proj-gemini/chats/session-2026-12-07T19-25-3adf0510.jsonl"
EXTRA = EXTRA_HOME / ".gemini/tmp/proj-extra/chats/session-2026-12-07T19-25-81c32c5f.jsonl"
SUBAGENT = EXTRA_HOME / ".gemini/tmp/proj-extra/chats/81c32c5f-14b4-4271-90e7-ce815626dcfb/e5cd4300-a404-4028-9ad2-f6ede724714c.jsonl"
REWIND = EXTRA_HOME / ".gemini/tmp/proj-rewind/chats/session-2026-12-07T19-26-cc82b997.jsonl"


def expected() -> list[tuple[Path, dict[str, Any]]]:
    """(session file, its expected answers from the wire) for every file of both runs."""
    out = []
    for run in ("main", "extra"):
        data = json.loads((GEMINI / run / "expected.json").read_text(encoding="utf-8"))
        out += [(GEMINI / run / "home" / rel, answers) for rel, answers in data["files"].items()]
    return out


FILES = expected()
IDS = [p.name[:24] for p, _ in FILES]

ROLE = {"user": "user", "custom": "user", "compactionSummary": "user", "toolResult": "user", "assistant": "model"}
KIND = {"text": "text", "image": "inlineData", "toolCall": "functionCall"}


def wire_shape(messages: Any) -> list[list[Any]]:
    """What the Gemini API receives for these messages: consecutive messages of one role are one
    `Content` (the CLI's history alternates roles), each with its parts' kinds."""
    out: list[list[Any]] = []
    for m in messages:
        if m["role"] == "toolResult":
            kinds = ["functionResponse"] + [KIND[b["type"]] for b in m["content"] if b["type"] == "image"]
        elif m["role"] == "compactionSummary":
            kinds = ["text"]
        else:
            kinds = [KIND[b["type"]] for b in m["content"]]
        if out and out[-1][0] == ROLE[m["role"]]:
            out[-1][1].extend(kinds)
        else:
            out.append([ROLE[m["role"]], kinds])
    return out


def replay(path: Path) -> tuple[GeminiReader, dict[str, list[list[Any]]]]:
    """Feed `path` one line at a time, as the live view does; the wire shape of what each request
    carried, taken when its reply first appears."""
    reader = GeminiReader(path)
    carried: dict[str, list[list[Any]]] = {}
    with open(path, "rb") as f:
        for no, offset, raw, _ in iter_lines(f):
            reader.feed([(no, offset, raw)])
            conv = reader.conversation()
            for r in conv.requests:
                if r.entry_id not in carried and r.message_index is not None:
                    carried[r.entry_id] = wire_shape(conv.messages[: r.message_index])
    return reader, carried


@pytest.mark.parametrize(("path", "answers"), FILES, ids=IDS)
def test_every_request_as_the_wire_saw_it(path: Path, answers: dict[str, Any]) -> None:
    """Each request once, in order, with the usage the model gave it (input = prompt − cached,
    cache read = cached, output = candidates + thoughts), and what the reader says it carried
    has the shape the CLI sent: across resumes (second headers, a fresh file in a later minute),
    the compression, the rewind, the subagent, the failed tool call and the picture."""
    reader, carried = replay(path)
    conv = reader.conversation()
    wire = answers["requests"]
    assert len(conv.requests) == len(wire) >= 2
    for request, want in zip(conv.requests, wire):
        u = request.usage
        assert (u.prompt_tokens, u.cache_read, u.input) == (want["prompt"], want["cached"], want["prompt"] - want["cached"])
        assert (u.output, u.reasoning) == (want["output"] + want["thoughts"], want["thoughts"])
        assert carried[request.entry_id] == want["shape"], request.entry_id


def _distinct_replies_with_tokens(path: Path) -> set[str]:
    ids = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for m in [row, *((row.get("$set") or {}).get("messages") or [])]:
            if isinstance(m, dict) and m.get("type") == "gemini" and isinstance(m.get("tokens"), dict):
                ids.add(m["id"])
    return ids


@pytest.mark.parametrize(("path", "answers"), FILES, ids=IDS)
def test_a_request_is_counted_once(path: Path, answers: dict[str, Any]) -> None:
    """Replies appended again (an upsert with the tool calls) and kept in `$set.messages`
    snapshots with their tokens are one request each: as many as distinct reply ids with tokens."""
    conv = read_session(path).conversation()
    ids = [r.entry_id for r in conv.requests]
    assert len(ids) == len(set(ids)) == len(_distinct_replies_with_tokens(path))
    copies = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if '"tokens"' in line and '"$set"' not in line)
    assert copies > len(ids) if path in (MAIN, EXTRA, SUBAGENT) else copies == len(ids)  # (tool calls repeat a reply)


def test_the_context_after_resumes_and_a_compression() -> None:
    """The shared scenario: a compression replaced the history by the session context, the
    `<state_snapshot>` and the model's acknowledgement, then the kept tail (new ids); the
    compression is recorded with the prompt the CLI compared with its threshold; the last
    request is on the context; thoughts of the compressed reply are gone from it."""
    conv = read_session(MAIN).conversation()
    cats = [m.category for m in conv.meta]
    assert cats[:3] == ["session_context", "state_snapshot", "state_snapshot"]
    assert conv.messages[1]["role"] == "compactionSummary" and conv.messages[1]["summary"].startswith("<state_snapshot>")
    assert conv.messages[2]["role"] == "assistant" and conv.messages[2]["content"][0]["text"] == "Got it. Thanks for the additional context!"
    assert len(conv.compactions) == 1
    (compaction,) = conv.compactions
    assert compaction.tokens_before == 12227 == conv.requests[5].usage.prompt_tokens
    assert [r.message_index is not None for r in conv.requests] == [False] * 6 + [True, True]
    assert conv.extra["contextTokens"] == 12109 == conv.requests[-1].usage.prompt_tokens
    assert conv.extra["startTimes"] and len(conv.extra["startTimes"]) == 4  # three resumes in the same minute
    assert conv.extra["thoughtsTokens"] == 0 and conv.context_window == 1_048_576
    assert conv.title == "LIST-FILES: list the files here"  # (the session's first prompt, as the CLI names it)


def test_thoughts_are_billed_but_not_sent() -> None:
    """Before the compression, the THINK-ONLY reply's thought (23 tokens) is recorded and billed
    (output 7 + 23), listed beside the context, never in a message the CLI sends."""
    lines = MAIN.read_bytes().split(b"\n")
    reader = GeminiReader(MAIN)
    reader.feed([(i + 1, 0, raw) for i, raw in enumerate(lines[:33])])  # up to the THINK-ONLY reply
    conv = reader.conversation()
    think = conv.requests[-1]
    assert (think.usage.output, think.usage.reasoning) == (30, 23)
    assert conv.extra["thoughtsTokens"] == 23
    assert not any(b.get("type") == "thinking" for m in conv.messages for b in m.get("content") or () if isinstance(b, dict))


def test_the_rewind_drops_the_later_messages_and_the_requests_stay() -> None:
    """Interactive `/rewind` to TWO: `$rewindTo` drops TWO and THREE, the CLI's new history
    (without the session context) replaces the list; every request stays counted (they were
    paid for), the rewound ones off the context; the next request's miss says why."""
    conv = read_session(REWIND).conversation()
    prompts = [m["content"][0]["text"] for m, meta in zip(conv.messages, conv.meta) if meta.source == "prompt"]
    assert prompts == ["ONE: say something", "AGAIN: after the rewind"]
    assert not any(m.category == "session_context" for m in conv.meta)
    assert [r.message_index is not None for r in conv.requests] == [True, False, False, True]
    assert conv.extra["rewinds"] == 1 and conv.extra["missCauses"] == {"3": ["context edit", conv.extra["missCauses"]["3"][1]]}
    assert "rewound" in conv.extra["missCauses"]["3"][1]


def test_failed_tool_picture_and_subagent() -> None:
    """The failed read_file is an error result with the CLI's words; the @-included picture is an
    image block in the prompt; the invoke_agent call names the subagent's session."""
    conv = read_session(EXTRA).conversation()
    failed = next(m for m in conv.messages if m["role"] == "toolResult" and m["toolName"] == "read_file")
    assert failed["isError"] and failed["content"][0]["text"].startswith("File not found:")
    picture = next(m for m in conv.messages if m["role"] == "user" and any(b["type"] == "image" for b in m["content"]))
    image = next(b for b in picture["content"] if b["type"] == "image")
    assert image["mimeType"] == "image/png" and image["data"].startswith("iVBOR")
    assert conv.extra["subagents"] == {"e5cd4300-a404-4028-9ad2-f6ede724714c": "invoke_agent"}
    sub = GeminiCliAgent().reader(SUBAGENT)
    sub.feed([(i + 1, 0, raw) for i, raw in enumerate(SUBAGENT.read_bytes().split(b"\n"))])
    sconv = sub.conversation()
    assert sconv.parent == "81c32c5f-14b4-4271-90e7-ce815626dcfb" and sconv.extra["kind"] == "subagent"
    assert [b["name"] for m in sconv.messages if m["role"] == "assistant" for b in m["content"]] == ["run_shell_command", "complete_task"]


# --- the loader's rules, one at a time ------------------------------------------------------

HEADER = {"sessionId": "s-1", "projectHash": "h", "startTime": "2026-12-07T10:00:00.000Z", "kind": "main"}


def lines_of(*rows: Any) -> list[tuple[int, int, bytes]]:
    out, offset = [], 0
    for i, row in enumerate(rows):
        raw = row if isinstance(row, bytes) else json.dumps(row).encode()
        out.append((i + 1, offset, raw))
        offset += len(raw) + 1
    return out


def user(mid: str, text: str) -> dict[str, Any]:
    return {"id": mid, "timestamp": "2026-12-07T10:00:01.000Z", "type": "user", "content": [{"text": text}]}


def reply(mid: str, text: str, prompt: int = 0, cached: int = 0, **more: Any) -> dict[str, Any]:
    row = {"id": mid, "timestamp": "2026-12-07T10:00:02.000Z", "type": "gemini", "content": text, "thoughts": [],
           "model": "gemini-2.5-flash", **more}
    if prompt:
        row["tokens"] = {"input": prompt, "output": 5, "cached": cached, "thoughts": 0, "tool": 0, "total": prompt + 5}
    return row


def read(*rows: Any) -> Any:
    reader = GeminiReader(Path("/nonexistent/session.jsonl"))
    reader.feed(lines_of(*rows))
    return reader.conversation()


def texts(conv: Any) -> list[str]:
    return [b.get("text") or b.get("name") for m in conv.messages for b in m.get("content") or () if isinstance(b, dict)]


def test_an_upsert_keeps_the_first_place_and_the_last_copy() -> None:
    conv = read(HEADER, user("u1", "one"), reply("g1", "first", 100), user("u2", "two"),
                reply("g1", "changed", 100, toolCalls=[{"id": "c1", "name": "ls", "args": {}}]))
    assert texts(conv) == ["one", "changed", "ls", "two"]
    assert len(conv.requests) == 1 and conv.requests[0].message_index == 1


def test_a_rewind_drops_that_message_and_every_later_one() -> None:
    conv = read(HEADER, user("u1", "one"), reply("g1", "a", 100), user("u2", "two"), reply("g2", "b", 120),
                {"$rewindTo": "u2"}, user("u3", "again"))
    assert texts(conv) == ["one", "a", "again"]
    assert [r.message_index for r in conv.requests] == [1, None] and conv.extra["rewinds"] == 1


def test_a_kept_reply_with_its_calls_in_the_parts_is_not_doubled() -> None:
    """After a resume the CLI's snapshot keeps an existing reply as `{...existing, content:
    parts}` (chatRecordingService.ts `updateMessagesFromHistory`): its `toolCalls` are still
    there and its parts now hold the same calls; they are sent once."""
    call = {"id": "c1", "name": "read_file", "args": {"file_path": "x"}}
    kept = {**reply("g1", "", 100, toolCalls=[{**call, "result": [{"functionResponse": {"id": "c1", "name": "read_file"}}]}]),
            "content": [{"functionCall": call}]}
    conv = read(HEADER, user("u1", "one"), {"$set": {"messages": [user("u1", "one"), kept]}})
    assert texts(conv) == ["one", "read_file"]


def test_a_rewind_to_an_unknown_id_drops_everything() -> None:
    conv = read(HEADER, user("u1", "one"), reply("g1", "a", 100), {"$rewindTo": "nope"}, user("u2", "two"))
    assert texts(conv) == ["two"]
    assert [d.kind for d in conv.diagnostics] == ["rewind_unknown"]
    assert len(conv.requests) == 1 and conv.requests[0].message_index is None


def test_a_snapshot_replaces_the_list_and_keeps_the_requests_once() -> None:
    conv = read(HEADER, user("u1", "one"), reply("g1", "a", 100),
                {"$set": {"messages": [user("u1", "one"), {**reply("g1", "a", 100), "content": [{"text": "a"}]},
                                       reply("g9", "from the snapshot", 0)]}},
                {"$set": {"lastUpdated": "x"}})
    assert texts(conv) == ["one", "a", "from the snapshot"]
    assert [r.entry_id for r in conv.requests] == ["g1"]


def test_local_commands_and_screen_messages_are_not_sent() -> None:
    conv = read(HEADER, user("u1", "/stats"), {"id": "i1", "type": "info", "content": "Context compressed"},
                {"id": "e1", "type": "error", "content": "API error"}, user("u2", "real"))
    assert texts(conv) == ["real"]
    assert conv.extra["screenMessages"] == {"info": 1, "error": 1}


def test_bad_lines_are_counted_not_fatal() -> None:
    big = {"input": 10, "cached": 99, "output": 1}
    conv = read(HEADER, b"{not json", b"[1, 2]", {"what": 1}, reply("g1", "x", 0, tokens={"input": "many"}),
                reply("g2", "y", 0, tokens=big))
    assert sorted(d.kind for d in conv.diagnostics) == ["bad_tokens", "malformed", "non_object", "unknown_record"]
    (request,) = conv.requests
    assert (request.usage.input, request.usage.cache_read) == (0, 10)  # cached beyond input: capped, never negative


def test_recognition() -> None:
    assert looks_like_gemini(MAIN.read_bytes()[:65536]) and looks_like_gemini(SUBAGENT.read_bytes()[:4096])
    assert not looks_like_gemini(b'{"type":"session","version":3,"id":"x"}\n')
    assert not looks_like_gemini(b'{"id":"m1","sessionId":"s","projectHash":"h"}\n')
    assert not looks_like_gemini(b"\xff\xfe garbage")
    from ds4sessions.agents.registry import agent_for_path, agent_labels

    assert agent_for_path(MAIN).name == "gemini-cli" and agent_for_path(ORPHAN).name == "gemini-cli"
    assert "Gemini CLI" in agent_labels()  # ("not a session file of Pi, Claude Code, Codex or Gemini CLI")


# --- where sessions are, and the CLI's numbers ----------------------------------------------


def test_discovery_lists_what_the_cli_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    """Main sessions with resumable content and subagents (parent: the folder), not a resume's
    header-only file; project names from projects.json; `$GEMINI_CLI_HOME` wins over `$HOME`."""
    monkeypatch.setenv("HOME", str(EXTRA_HOME))
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)
    found = {i.path.name: i for i in discovery.discover()}
    assert set(found) == {EXTRA.name, SUBAGENT.name, REWIND.name}
    assert found[SUBAGENT.name].parent == "81c32c5f-14b4-4271-90e7-ce815626dcfb"
    assert found[EXTRA.name].project.endswith("/proj-extra") and found[EXTRA.name].title == "FAIL-TOOL: show missing.txt"
    assert found[EXTRA.name].model == "gemini-2.5-flash" and found[EXTRA.name].session_id.startswith("81c32c5f")
    monkeypatch.setenv("GEMINI_CLI_HOME", str(MAIN_HOME))
    assert [i.path for i in discovery.discover()] == [MAIN]


def test_the_compression_threshold_as_the_cli_computes_it(tmp_path: Path) -> None:
    """`model.compressionThreshold` × `tokenLimit(model)`; without the setting the CLI's default
    0.5 (chatCompressionService.ts), from the generated table."""
    assert discovery.compression_setting(MAIN_HOME / ".gemini") == 0.005
    assert discovery.compression_setting(EXTRA_HOME / ".gemini") is None
    assert models.compression_default() == 0.5
    main = GeminiCliAgent().reader(MAIN)
    main.feed(lines_of(*[json.loads(x) for x in MAIN.read_text().splitlines()]))
    assert main.conversation().extra["compression"]["threshold"] == int(0.005 * 1_048_576) == 5242
    extra = read_session(EXTRA).conversation()
    assert extra.extra["compression"]["threshold"] == 524_288
    assert extra.extra["compression"]["tokensUntil"] == 524_288 - 12_247


def test_model_facts_are_data_with_a_source() -> None:
    data = models.table()
    assert data["source"]["cli"] == "@google/gemini-cli 0.61.0" and data["source"]["generated"]
    assert models.context_window("gemini-2.5-flash") == (1_048_576, "@google/gemini-cli 0.61.0 tokenLimit()")
    assert models.context_window("gemma-4-31b-it")[0] == 256_000  # the CLI's own limit (LiteLLM says 262,144)
    assert models.context_window("some-future-model")[0] == 1_048_576  # tokenLimit()'s default, as the CLI
    price = GeminiCliAgent().price("gemini-2.5-flash")
    from ds4sessions.agents.base import Usage

    assert price is not None and "litellm" in price.source
    assert price.cost(Usage(input=1_000_000, cache_read=1_000_000, output=1_000_000)) == pytest.approx(0.30 + 0.03 + 2.50)
    pro = models.pricing("gemini-2.5-pro")
    assert pro is not None and pro.cost(input=300_000, output=0, cache_read=0, cache_write=0) == pytest.approx(0.75)  # 2.50/M above 200k
    assert GeminiCliAgent().price("not-a-gemini-model") is None


BUNDLE_CORE = '''
// packages/core/dist/src/config/models.js
var PREVIEW_GEMINI_MODEL = "gemini-3-pro-preview";
var DEFAULT_GEMINI_MODEL = "gemini-2.5-pro";
var BASE_GEMINI_FLASH_MODEL = "gemini-3.5-flash";
var DEFAULT_GEMINI_FLASH_MODEL = BASE_GEMINI_FLASH_MODEL;
var GEMMA_4_31B_IT_MODEL = "gemma-4-31b-it";

// packages/core/dist/src/core/tokenLimits.js
var DEFAULT_TOKEN_LIMIT = 1048576;
var GEMMA_4_TOKEN_LIMIT = 256e3;
function tokenLimit(model) {
  switch (model) {
    case GEMMA_4_31B_IT_MODEL:
      return GEMMA_4_TOKEN_LIMIT;
    case PREVIEW_GEMINI_MODEL:
    case DEFAULT_GEMINI_FLASH_MODEL:
      return 1048576;
    default:
      return DEFAULT_TOKEN_LIMIT;
  }
}

// packages/core/dist/src/context/chatCompressionService.js
var DEFAULT_COMPRESSION_TOKEN_THRESHOLD = 0.5;
function f() { return "gemini-2.5-flash" + "gemini-9001-super-duper"; }
// packages/core/dist/src/next.js
'''


def test_the_model_table_generator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make_models` reads the CLI's bundle (its model constants, aliases resolved; the
    `tokenLimit()` switch; the compression default; the settings schema's default) and LiteLLM's
    rows (the Gemini API's first); a literal LiteLLM does not list and the CLI does not name as
    a model is left out; the wire's request shapes are kept per kind."""
    from ds4sessions.agents.gemini import make_models

    deps = tmp_path / "deps"
    bundle = deps / "node_modules" / "@google" / "gemini-cli" / "bundle"
    bundle.mkdir(parents=True)
    (bundle.parent / "package.json").write_text('{"version": "9.9.9"}')
    (bundle / "gemini.js").write_text('import "./chunk-CORE.js";\nimport { x } from "./chunk-CLI.js";\n')
    (bundle / "chunk-CORE.js").write_text(BUNDLE_CORE)
    (bundle / "chunk-CLI.js").write_text("compressionThreshold: {\n type: 'number',\n default: 0.5,\n}")
    litellm = tmp_path / "prices.json"
    row = {"mode": "chat", "max_input_tokens": 1048576, "max_output_tokens": 65536, "input_cost_per_token": 1.25e-06,
           "output_cost_per_token": 1e-05, "cache_read_input_token_cost": 1.25e-07,
           "input_cost_per_token_above_200k_tokens": 2.5e-06, "output_cost_per_token_above_200k_tokens": 1.5e-05}
    litellm.write_text(json.dumps({"gemini/gemini-2.5-pro": row, "gemini-2.5-pro": {**row, "input_cost_per_token": 9},
                                   "gemini/gemini-2.5-flash": {**row, "input_cost_per_token": 3e-07}}))
    wire = tmp_path / "fake.jsonl"
    body = {"systemInstruction": {"parts": [{"text": "x" * 10}]},
            "tools": [{"functionDeclarations": [{"name": "ls"}, {"name": "complete_task"}]}]}
    wire.write_text(json.dumps({"path": "/v1beta/models/m:streamGenerateContent", "body": body}) + "\n")
    out = tmp_path / "gemini-models.json"
    monkeypatch.setattr("sys.argv", ["make_models", "--deps", str(deps), "--litellm-json", str(litellm), "--wire", str(wire),
                                     "--date", "2026-12-07", "--out", str(out)])
    make_models.main()
    data = json.loads(out.read_text())
    assert data["cli"]["version"] == "9.9.9" and data["cli"]["defaultTokenLimit"] == 1_048_576
    assert data["cli"]["tokenLimits"] == {"gemma-4-31b-it": 256_000, "gemini-3-pro-preview": 1_048_576, "gemini-3.5-flash": 1_048_576}
    assert (data["cli"]["compressionThresholdDefault"], data["cli"]["settingsSchemaDefault"]) == (0.5, 0.5)
    assert set(data["models"]) == {"gemini-3-pro-preview", "gemini-2.5-pro", "gemini-3.5-flash", "gemma-4-31b-it", "gemini-2.5-flash"}
    pro = data["models"]["gemini-2.5-pro"]
    assert pro["prices"] == {"input": 1.25, "output": 10.0, "cacheRead": 0.125} and pro["priceSource"].endswith("gemini/gemini-2.5-pro")
    assert pro["tiers"] == [{"inputTokensAbove": 200_000, "input": 2.5, "output": 15.0}]
    assert data["models"]["gemma-4-31b-it"] == {"contextWindow": 256_000, "windowSource": "@google/gemini-cli 9.9.9 tokenLimit()",
                                                "known": False, "priceSource": "not in litellm (prices.json)"}
    assert data["request"]["subagent"]["toolDeclarations"] == {"ls": len('{"name": "ls"}'), "complete_task": len('{"name": "complete_task"}')}
    assert data["request"]["subagent"]["systemInstructionChars"] == len(json.dumps(body["systemInstruction"]))
