"""Compaction: Pi's cut point (vectors from Pi 1.6.0's own prepareCompaction), settings, and the
summary request against a REAL HTTP server on 127.0.0.1 (stdlib http.server in a thread) that
checks the replayed prefix and answers; failures leave the session byte-identical."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from ds4core.models import ModelTable
from ds4sessions.steering.compaction import (
    CompactionFailed,
    CompactionSettings,
    Endpoint,
    compact,
    load_compaction_settings,
    pi_estimate_tokens,
    preview_compaction,
    provider_request,
)
from ds4sessions.agents.pi.system import current_system_message, system_prompt_text
from ds4sessions.agents.pi import build_context, read_session
from ds4sessions.steering.writer import Journal, WriteRefused, read_state

from tests.conftest import FIXTURES, SKIP_NO_SHARED
from tests.sessions.test_writer import copy_old

KEY = "sk-test-SECRET-0123456789"

# What Pi 1.6.0's prepareCompaction(branch, {keepRecentTokens}) returned for these samples
# (`node tests/pi_context.mjs SESSION "" KEEP`; test_real_pi.py re-checks them live when Pi is installed).
PI_VECTORS = [
    ("01-tools-and-image", 0, "7060d0dd", 5089, True, ["src/lib/store.js"], ["src/routes/widgets.js"], 14, 3),
    ("01-tools-and-image", 100, "df7b9f64", 5089, True, ["src/lib/store.js"], ["src/routes/widgets.js"], 12, 1),
    ("01-tools-and-image", 500, "cb42aabc", 5089, True, ["src/lib/store.js"], ["src/routes/widgets.js"], 0, 12),
    ("01-tools-and-image", 2000, "79adb059", 5089, True, ["src/lib/store.js", "src/routes/widgets.js"], [], 0, 7),
    ("01-tools-and-image", 20000, None, None, None, None, None, None, None),
    ("03-compaction", 0, "4f819359", 2561, True,
     ["src/lib/http.js", "src/lib/store.js", "src/lib/validate.js", "src/server.js", "test/widgets.test.js"],
     ["README.md", "src/lib/cache.js", "src/lib/etag.js", "src/routes/widgets.js", "test/widgets-cache.test.js"], 4, 5),
    ("03-compaction", 100, "31d3b3e9", 2561, True,
     ["README.md", "src/lib/http.js", "src/lib/store.js", "src/lib/validate.js", "src/server.js", "test/widgets.test.js"],
     ["src/lib/cache.js", "src/lib/etag.js", "src/routes/widgets.js", "test/widgets-cache.test.js"], 4, 3),
    ("03-compaction", 500, None, None, None, None, None, None, None),
    ("04-tree-branches-labels", 100, "d1728720", 2276, True, ["src/server.js"], [], 4, 1),
    ("04-tree-branches-labels", 500, "27ae2e51", 2276, True, ["src/server.js"], [], 0, 3),
    ("05-extensions-models", 500, "b36e007a", 2851, True, ["src/routes/widgets.js", "src/server.js"], [], 4, 4),
    ("05-extensions-models", 2000, "f7ef708c", 2851, False, [], [], 1, 0),
    ("02-abort-error-bash", 500, "f2ff485a", 4360, True, ["docs/architecture.png", "src/server.js"],
     ["README.md", "src/routes/widgets.js"], 12, 3),
    ("02-abort-error-bash", 2000, "b2ab9905", 4360, True, ["README.md", "src/server.js"], [], 0, 4),
]


def _sample(name: str, shared: Path | None) -> Path:
    if name == "01-tools-and-image":
        return FIXTURES / "pi" / f"{name}.jsonl"
    if shared is None:
        pytest.skip(SKIP_NO_SHARED)
    return shared / "sessions-pi" / f"{name}.jsonl"


@pytest.mark.parametrize(("name", "keep", "first_kept", "before", "split", "read", "modified", "n_sum", "n_prefix"), PI_VECTORS)
def test_preview_equals_pi_prepare_compaction(
    name: str, keep: int, first_kept: str | None, before: int | None, split: bool | None,
    read: list[str] | None, modified: list[str] | None, n_sum: int | None, n_prefix: int | None,
) -> None:
    from tests.conftest import SHARED

    state = read_state(_sample(name, SHARED))
    settings = CompactionSettings(keep_recent_tokens=keep)
    if first_kept is None:
        with pytest.raises(WriteRefused, match="Nothing to compact"):
            preview_compaction(state, settings)
        return
    p = preview_compaction(state, settings)
    assert (p.first_kept_entry_id, p.tokens_before, p.is_split_turn) == (first_kept, before, split)
    assert (p.read_files, p.modified_files) == (read, modified)
    assert (len(p.messages_to_summarize), len(p.turn_prefix_messages)) == (n_sum, n_prefix)


def test_preview_tokens_cost_and_threshold(sample01: Path) -> None:
    model = ModelTable.bundled().get("anthropic", "claude-sonnet-4-5")
    state = read_state(sample01)
    p = preview_compaction(state, CompactionSettings(keep_recent_tokens=100), model, now=1772441000.0)
    assert p.context_window == 200_000 and not p.over_threshold
    assert p.kept_tokens == sum(pi_estimate_tokens(m) for m in p.kept_messages)
    system = current_system_message(build_context(state.session).messages)
    assert p.tokens_after == pi_estimate_tokens(system) + p.summary_tokens + p.kept_tokens
    cost = p.cost
    assert cost is not None
    last = build_context(state.session).messages[-1]
    u = last["usage"]
    assert cost.prefix_tokens == u["input"] + u["cacheRead"] + u["cacheWrite"]
    assert cost.cache_ttl_seconds == 300
    assert cost.cache_age_seconds == pytest.approx(1772441000.0 - last["timestamp"] / 1000)
    assert not cost.cache_probably_cold
    assert cost.cached_usd == pytest.approx(
        (cost.fresh_tokens * 3 + cost.prefix_tokens * 0.3 + cost.output_tokens * 15) / 1e6
    )
    assert cost.cold_usd == pytest.approx((cost.cold_tokens * 3 + cost.output_tokens * 15) / 1e6)
    later = preview_compaction(state, CompactionSettings(keep_recent_tokens=100), model, now=1772441000.0 + 3600)
    assert later.cost is not None and later.cost.cache_probably_cold
    assert later.cost.cached_usd == pytest.approx(
        (later.cost.fresh_tokens * 3 + later.cost.prefix_tokens * 3.75 + later.cost.output_tokens * 15) / 1e6
    )
    big = preview_compaction(state, CompactionSettings(reserve_tokens=196_000, keep_recent_tokens=100), model)
    assert big.over_threshold


def test_settings_global_project_and_model_override(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "settings.json").write_text(json.dumps({"compaction": {"reserveTokens": 20000, "keepRecentTokens": 30000}}))
    project = tmp_path / "proj"
    (project / ".pi").mkdir(parents=True)
    (project / ".pi" / "settings.json").write_text(json.dumps(
        {"compaction": {"keepRecentTokens": 8000, "modelOverrides": {"anthropic/claude-sonnet-4-5": {"reserveTokens": 4096}}}}
    ))
    assert load_compaction_settings(None, None, agent) == CompactionSettings(20000, 30000)
    assert load_compaction_settings(str(project), "openai/gpt-5", agent) == CompactionSettings(20000, 8000)
    assert load_compaction_settings(str(project), "anthropic/claude-sonnet-4-5", agent) == CompactionSettings(4096, 8000)
    assert load_compaction_settings(str(tmp_path / "none"), None, tmp_path / "missing") == CompactionSettings(16384, 20000)
    (agent / "settings.json").write_text("{not json")
    assert load_compaction_settings(None, None, agent) == CompactionSettings()


def test_endpoint_from_env() -> None:
    e = Endpoint.from_env({"provider": "anthropic", "modelId": "claude-sonnet-4-5"}, {"ANTHROPIC_API_KEY": KEY})
    assert (e.api, e.url, e.model) == ("anthropic", "https://api.anthropic.com/v1/messages", "claude-sonnet-4-5")
    assert KEY not in repr(e)
    e = Endpoint.from_env({"provider": "deepseek", "modelId": "m"}, {
        "DS4TUI_SUMMARY_BASE_URL": "http://127.0.0.1:9/v1/", "DS4TUI_SUMMARY_API_KEY": KEY, "DS4TUI_SUMMARY_MODEL": "x"})
    assert (e.api, e.url, e.model) == ("openai", "http://127.0.0.1:9/v1/chat/completions", "x")
    with pytest.raises(CompactionFailed, match="no API key"):
        Endpoint.from_env({"provider": "openai", "modelId": "gpt-5"}, {})
    with pytest.raises(CompactionFailed, match="must be openai or anthropic"):
        Endpoint.from_env(None, {"DS4TUI_SUMMARY_API": "grpc", "DS4TUI_SUMMARY_API_KEY": KEY})


# --------------------------------------------------------------------------------------------
# The loopback server


class Server:
    """A real HTTP server on 127.0.0.1; `respond(request) -> (status, body bytes, extra)`."""

    def __init__(self, respond: Callable[[dict[str, Any]], tuple[int, bytes, dict[str, Any]]]) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                request = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": json.loads(raw)}
                outer.requests.append(request)
                status, body, extra = respond(request)
                time.sleep(extra.get("delay", 0))
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(extra.get("length", len(body))))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                if "length" in extra:
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def openai_reply(text: str = "## Goal\nFix 404 for unknown widget ids.", finish: str = "stop") -> bytes:
    return json.dumps({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 7000, "completion_tokens": 60, "prompt_tokens_details": {"cached_tokens": 6500}},
    }).encode()


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Journal:
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))
    return Journal()


@pytest.fixture
def session(sample01: Path, tmp_path: Path) -> Iterator[Path]:
    yield copy_old(sample01, tmp_path)


SETTINGS = CompactionSettings(keep_recent_tokens=100)


def _prefix_messages(api: str, path: Path) -> list[dict[str, Any]]:
    """What the previous request (the one answered by the last assistant reply) carried."""
    messages = build_context(read_session(path)).messages
    return provider_request(api, "m", messages[:-1])["messages"]


def test_openai_compaction_replays_the_prefix_and_appends(session: Path, journal: Journal) -> None:
    original = session.read_bytes()
    expected_prefix = _prefix_messages("openai", session)

    def respond(req: dict[str, Any]) -> tuple[int, bytes, dict[str, Any]]:
        body = req["body"]
        ok = (
            req["path"] == "/v1/chat/completions"
            and req["headers"]["authorization"] == f"Bearer {KEY}"
            and body["messages"][: len(expected_prefix)] == expected_prefix
        )
        return (200, openai_reply(), {}) if ok else (400, b'{"error":"prefix mismatch"}', {})

    model = ModelTable.bundled().get("anthropic", "claude-sonnet-4-5")
    with Server(respond) as server:
        outcome = compact(session, endpoint=Endpoint("openai", server.base, "m", KEY), model=model,
                          settings=SETTINGS, journal=journal)
    [request] = server.requests
    body = request["body"]
    msgs = body["messages"]
    # the prefix, checked by hand too: replayed system prompt, the three prompts, tool results
    assert outcome.prefix_messages == len(expected_prefix) == 18
    assert msgs[0]["role"] == "system" and msgs[0]["content"].startswith("You are a coding assistant running inside pi")
    assert msgs[0]["content"] == system_prompt_text(current_system_message(build_context(read_session(session)).messages))
    assert [m["role"] for m in msgs[:3]] == ["system", "user", "assistant"]
    assert msgs[1]["content"][0]["text"].startswith("GET /widgets/:id returns a 500")
    assert [c["id"] for c in msgs[2]["tool_calls"]] == [m["tool_call_id"] for m in msgs[3:6]]
    assert msgs[17]["role"] == "tool" and msgs[17]["tool_call_id"] == msgs[16]["tool_calls"][0]["id"] == "toolu_01CVBtIiV0dhJJYVhOq9Xo5X"
    assert msgs[18]["role"] == "assistant" and msgs[18]["content"].startswith("Committed as")
    assert msgs[-1]["role"] == "user" and "## Goal" in msgs[-1]["content"]
    assert "except its last 5 messages" in msgs[-1]["content"]
    assert body["tool_choice"] == "none" and {t["function"]["name"] for t in body["tools"]} == {"read", "bash", "edit", "write"}

    entry = outcome.write.entries[0]
    assert list(entry) == ["type", "id", "parentId", "timestamp", "summary", "firstKeptEntryId", "tokensBefore",
                           "details", "usage", "systemMessage"]
    assert entry["parentId"] == "7060d0dd" and entry["firstKeptEntryId"] == "df7b9f64" and entry["tokensBefore"] == 5089
    assert entry["summary"] == (
        "## Goal\nFix 404 for unknown widget ids.\n\n<read-files>\nsrc/lib/store.js\n</read-files>\n\n"
        "<modified-files>\nsrc/routes/widgets.js\n</modified-files>"
    )
    assert entry["details"] == {"readFiles": ["src/lib/store.js"], "modifiedFiles": ["src/routes/widgets.js"]}
    assert entry["usage"]["input"] == 500 and entry["usage"]["cacheRead"] == 6500 and entry["usage"]["output"] == 60
    assert entry["usage"]["cost"]["total"] == pytest.approx((500 * 3 + 6500 * 0.3 + 60 * 15) / 1e6)
    assert entry["systemMessage"]["role"] == "system" and "toolsAdded" in entry["systemMessage"]
    data = session.read_bytes()
    assert data[: len(original)] == original
    after = build_context(read_session(session))
    assert [m["role"] for m in after.messages] == ["system", "compactionSummary", "assistant", "user", "assistant", "toolResult", "assistant"]
    assert after.context_entry_ids[:2] == [entry["id"], "df7b9f64"]
    # the key went nowhere but the request header
    assert KEY.encode() not in data
    with sqlite3.connect(journal.path) as db:
        assert KEY not in json.dumps(db.execute("SELECT * FROM writes").fetchall())
    [record] = journal.list(session)
    assert record.action == "compaction" and record.undo == {"kind": "leaf", "leafId": "7060d0dd"}


def test_anthropic_compaction(session: Path) -> None:
    expected_prefix = _prefix_messages("anthropic", session)
    last_block = expected_prefix[-1]["content"][-1]
    assert last_block["cache_control"] == {"type": "ephemeral"} and last_block["type"] == "tool_result"

    def respond(req: dict[str, Any]) -> tuple[int, bytes, dict[str, Any]]:
        body = req["body"]
        ok = (
            req["path"] == "/v1/messages" and req["headers"]["x-api-key"] == KEY
            and body["messages"][: len(expected_prefix)] == expected_prefix
        )
        reply = {"content": [{"type": "text", "text": "## Goal\nSummary."}], "stop_reason": "end_turn",
                 "usage": {"input_tokens": 300, "output_tokens": 40, "cache_read_input_tokens": 6000, "cache_creation_input_tokens": 0}}
        return (200, json.dumps(reply).encode(), {}) if ok else (400, b'{"error":"prefix mismatch"}', {})

    with Server(respond) as server:
        outcome = compact(session, endpoint=Endpoint("anthropic", server.base, "claude-sonnet-4-5", KEY), settings=SETTINGS)
    body = server.requests[0]["body"]
    assert body["system"][0]["text"].startswith("You are a coding assistant running inside pi")
    breakpoints = [b for m in body["messages"] for b in m["content"] if "cache_control" in b]
    assert breakpoints == [last_block]  # one breakpoint, where the previous request ended
    assert body["messages"][-1]["content"][-1]["text"].endswith("Preserve exact file paths, function names, and error messages.")
    assert outcome.write.entries[0]["usage"] == {"input": 300, "output": 40, "cacheRead": 6000, "cacheWrite": 0, "totalTokens": 6340}


@pytest.mark.parametrize(
    ("status", "body", "extra", "timeout", "why"),
    [
        (500, b'{"error":"overloaded"}', {}, 5.0, "answered HTTP 500"),
        (401, f'{{"error":"bad key {KEY}"}}'.encode(), {}, 5.0, "answered HTTP 401"),
        (200, openai_reply(), {"delay": 1.5}, 0.3, "timed out after 0.3 s"),
        (200, openai_reply()[:40], {"length": 400}, 5.0, "cut off"),
        (200, openai_reply()[:40], {}, 5.0, "truncated or not JSON"),
        (200, openai_reply(finish="length"), {}, 5.0, "hit the token cap"),
        (200, openai_reply(text="   "), {}, 5.0, "no summary text"),
    ],
)
def test_failures_leave_the_session_untouched(
    session: Path, journal: Journal, status: int, body: bytes, extra: dict, timeout: float, why: str
) -> None:
    before = session.read_bytes()
    with Server(lambda req: (status, body, extra)) as server:
        with pytest.raises(CompactionFailed, match=why) as err:
            compact(session, endpoint=Endpoint("openai", server.base, "m", KEY), settings=SETTINGS,
                    journal=journal, timeout=timeout)
    assert KEY not in str(err.value)
    assert session.read_bytes() == before
    assert journal.list() == []


def test_file_changed_during_the_request_is_refused(session: Path) -> None:
    before_size = session.stat().st_size

    def respond(req: dict[str, Any]) -> tuple[int, bytes, dict[str, Any]]:
        with session.open("ab") as f:  # the agent appends while the summary is computed
            f.write(b'{"type":"label","id":"0badc0de","parentId":"7060d0dd","timestamp":"2026-03-02T09:00:00.000Z","targetId":"5e3b26a7","label":"x"}\n')
        return 200, openai_reply(), {}

    with Server(respond) as server:
        with pytest.raises(WriteRefused, match="changed since") as err:
            compact(session, endpoint=Endpoint("openai", server.base, "m", KEY), settings=SETTINGS)
    assert err.value.code == "changed"
    assert read_session(session).leaf_id == "0badc0de" and session.stat().st_size > before_size


def test_dry_run_sends_nothing(session: Path) -> None:
    with Server(lambda req: (200, openai_reply(), {})) as server:
        outcome = compact(session, endpoint=Endpoint("openai", server.base, "m", KEY), settings=SETTINGS, dry_run=True)
    assert server.requests == [] and outcome.write is None and outcome.preview.first_kept_entry_id == "df7b9f64"


def test_refused_before_any_request_when_busy(sample01: Path, tmp_path: Path) -> None:
    from tests.sessions.test_writer import _truncated

    path = _truncated(sample01, tmp_path, 21)
    with Server(lambda req: (200, openai_reply(), {})) as server:
        with pytest.raises(WriteRefused, match="mid-turn"):
            compact(path, endpoint=Endpoint("openai", server.base, "m", KEY), settings=SETTINGS)
    assert server.requests == []


def _anthropic_reply(req: dict[str, Any]) -> tuple[int, bytes, dict[str, Any]]:
    reply = {"content": [{"type": "text", "text": "## Goal\nS."}], "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}
    return 200, json.dumps(reply).encode(), {}


def test_anthropic_breakpoint_without_a_valid_usage(tmp_path: Path) -> None:
    """No reply with usable usage: the whole context is the 'previous request'; the instruction
    still goes last and the single breakpoint sits on the last replayed block."""
    header = '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-10T09:00:00.000Z","cwd":"/tmp"}'
    user = ('{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-10T09:00:01.000Z",'
            '"message":{"role":"user","content":[{"type":"text","text":"Hello there."}],"timestamp":1768035601000}}')
    reply = ('{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-10T09:00:02.000Z","message":{"role":"assistant",'
             '"content":[{"type":"text","text":"Hi."}],"provider":"anthropic","model":"m","stopReason":"stop","timestamp":1768035602000,'
             '"usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0}}}')
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join([header, user, reply]) + "\n")
    copy = copy_old(path, tmp_path, "old.jsonl")
    with Server(_anthropic_reply) as server:
        outcome = compact(copy, endpoint=Endpoint("anthropic", server.base, "m", KEY), settings=CompactionSettings(keep_recent_tokens=0))
    messages = server.requests[0]["body"]["messages"]
    assert outcome.prefix_messages == 2
    assert messages[0] == {"role": "user", "content": [{"type": "text", "text": "Hello there."}]}
    assert messages[1] == {"role": "assistant", "content": [{"type": "text", "text": "Hi.", "cache_control": {"type": "ephemeral"}}]}
    assert messages[2]["role"] == "user" and messages[2]["content"][0]["text"].startswith("Do NOT continue the conversation.")
    assert outcome.write.entries[0]["firstKeptEntryId"] == "a1" and outcome.write.entries[0]["tokensBefore"] == 4  # ceil(12/4) + ceil(3/4)


def test_anthropic_instruction_merges_into_a_trailing_prompt(shared_dir: Path, tmp_path: Path) -> None:
    """B10: the anchor is l0000002 (the zero and missing usages do not count), the aborted reply
    is dropped on the wire, so the instruction joins the trailing user message."""
    path = copy_old(shared_dir / "bad-inputs" / "B10-usage-missing-or-zero.jsonl", tmp_path)
    with Server(_anthropic_reply) as server:
        outcome = compact(path, endpoint=Endpoint("anthropic", server.base, "m", KEY),
                          settings=CompactionSettings(keep_recent_tokens=0))
    messages = server.requests[0]["body"]["messages"]
    assert outcome.prefix_messages == 1
    assert messages[0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    last = messages[-1]["content"]
    assert len(last) == 2 and last[1]["text"].startswith("Do NOT continue the conversation.")
    assert sum("cache_control" in b for m in messages for b in m["content"]) == 1
