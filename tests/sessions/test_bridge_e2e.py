"""End to end: the REAL Pi (1.6.0 on Node 22, `scripts/install_pi.sh`) runs with the ds4tui bridge
installed by `ds4sessions.bridge.install`, talking to a fake OpenAI chat-completions server on
127.0.0.1 (a provider defined in the temporary agent dir's `models.json`), in RPC mode.

After two turns, ds4tui pins, collapses and compacts through the channel. Checked: (a) Pi
appended the entries itself (ids reported by the bridge = the new lines of the file); (b) Pi's
next request, as the fake server received it, carries the change; (c) Pi's own SessionManager
(`tests/pi_context.mjs`) and `ds4sessions.agents.pi.build_context` give the same context from the file;
(d) a command with a stale leaf is refused and nothing is written; plus: the request metadata
fingerprints equal DS4's fingerprints of our own context, and no message content is left in the
channel. Skips with the reason when Node 22 or Pi is absent.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from ds4core.cache_policy import message_fingerprint
from ds4core.estimate import system_prompt_tokens, tool_tokens
from ds4sessions.bridge import channel as bridge
from ds4sessions.agents.pi.discovery import agent_dir
from ds4sessions.agents.pi import build_context, convert_to_llm, read_session
from ds4sessions.steering.steer import plan_collapse
from ds4sessions.steering.writer import Expected, WriteRefused, read_state

from tests.sessions.test_real_pi import NODE, NODE_REASON, PI_PACKAGE, SCRIPT

pytestmark = pytest.mark.slow  # runs Node subprocesses

SUMMARY_MARK = "FAKE-COMPACTION-SUMMARY"


class FakeModel:
    """OpenAI chat-completions streaming server on 127.0.0.1: records each request body and
    answers `answer <n>`, or, for Pi's compaction call (its system prompt names the context
    summarization assistant), a summary with `SUMMARY_MARK`. Clear `release` to hold replies
    (`received` is set when a request arrives)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.received = threading.Event()
        self.release = threading.Event()
        self.release.set()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                fake.received.set()
                fake.release.wait(30)
                n = len(fake.requests)
                text = f"## Goal\n{SUMMARY_MARK} {n}" if fake.is_summary(body) else f"answer {n}"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 1, "model": body.get("model")}
                for chunk in (
                    {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
                    {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                    {**base, "choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 6, "total_tokens": 126}},
                ):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @staticmethod
    def is_summary(body: dict[str, Any]) -> bool:
        return "context summarization assistant" in json.dumps(body.get("messages", [])[:1])

    def agent_requests(self) -> list[dict[str, Any]]:
        """The conversation requests (not compaction summary calls)."""
        return [b for b in self.requests if not self.is_summary(b)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class PiRpc:
    """Pi in `--mode rpc` as a child process; JSONL records on stdin/stdout (Pi rpc.md)."""

    def __init__(self, node: str, agent: Path, cwd: Path) -> None:
        env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent), "PI_OFFLINE": "1"}
        env.pop("PI_CACHE_RETENTION", None)
        cli = PI_PACKAGE / "dist" / "bundle" / "cli.js"
        self.proc = subprocess.Popen(
            [node, str(cli), "--mode", "rpc", "--provider", "fake", "--model", "fake-model", "--offline",
             "--no-context-files", "--no-skills", "--no-prompt-templates"],
            cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.seq = 0
        self.seen: list[str] = []
        self.records: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def send(self, record: dict[str, Any]) -> str:
        self.seq += 1
        record = {"id": f"t{self.seq}", **record}
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(record) + "\n").encode())
        self.proc.stdin.flush()
        return record["id"]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # Pi frames records on LF only (rpc.md, Framing)
            self.records.put(json.loads(line))
        self.records.put(None)

    def until(self, want: Any, timeout: float = 30.0) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            try:
                record = self.records.get(timeout=left)
            except queue.Empty:
                break
            if record is None:
                break
            self.seen.append(json.dumps(record)[:200])
            if want(record):
                return record
        raise AssertionError(f"Pi did not answer in {timeout} s; last records: {self.seen[-5:]}; stderr: {self.stderr_tail()}")

    def prompt(self, text: str) -> None:
        rid = self.send({"type": "prompt", "message": text})
        assert self.until(lambda r: r.get("id") == rid)["success"]
        self.until(lambda r: r.get("type") == "agent_settled")

    def call(self, record: dict[str, Any]) -> dict[str, Any]:
        rid = self.send(record)
        reply = self.until(lambda r: r.get("id") == rid)
        assert reply["success"], reply
        return reply.get("data") or {}

    def stderr_tail(self) -> str:
        if self.proc.poll() is None:
            return "(running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")[-2000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def pi_setup(tmp_path: Path) -> Iterator[tuple[PiRpc, FakeModel, Path]]:
    if NODE is None:
        pytest.skip(NODE_REASON)
    if not (PI_PACKAGE / "package.json").exists():
        pytest.skip(f"Pi is not installed in {PI_PACKAGE} (run scripts/install_pi.sh; needs npm and the npm registry)")
    fake = FakeModel()
    agent = agent_dir()  # the per-test temporary agent dir (tests/conftest.py)
    (agent / "models.json").write_text(json.dumps({"providers": {"fake": {
        "baseUrl": fake.base, "api": "openai-completions", "apiKey": "test-key",
        "models": [{"id": "fake-model", "contextWindow": 100000, "maxTokens": 1000,
                    "cost": {"input": 1, "output": 2, "cacheRead": 0.1, "cacheWrite": 1.25}}],
    }}}))
    # a tiny kept tail, so the two short turns leave something to compact
    (agent / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 10}}))
    installed = bridge.install(agent)
    assert installed.previous == "none" and installed.path == agent / "extensions" / "ds4tui-bridge.ts"
    cwd = tmp_path / "project"
    cwd.mkdir()
    pi = PiRpc(NODE, agent, cwd)
    try:
        yield pi, fake, agent
    finally:
        pi.close()
        fake.close()


def _request_text(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"], ensure_ascii=False)


def _turns(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of each non-system message of an OpenAI chat request."""
    out = []
    for m in body["messages"]:
        content = m.get("content")
        text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content or ())
        if m["role"] != "system":
            out.append((m["role"], text))
    return out


def _wait_live(session_id: str, agent: Path, timeout: float = 10.0) -> bridge.BridgeStatus:
    end = time.monotonic() + timeout
    while True:
        state = bridge.status(session_id, agent)
        if state.live or time.monotonic() > end:
            return state
        time.sleep(0.1)


def _new_lines(path: Path, offset: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes()[offset:].splitlines()]


def test_bridge_steers_real_pi(pi_setup: tuple[PiRpc, FakeModel, Path], tmp_path: Path) -> None:
    pi, fake, agent = pi_setup
    pi.prompt("first question")
    pi.prompt("second question")
    state = pi.call({"type": "get_state"})
    path, session_id = Path(state["sessionFile"]), state["sessionId"]
    live = _wait_live(session_id, agent)
    assert live.state == "live" and live.header == "bridge: live" and live.installed, live.reason
    assert live.heartbeat is not None and live.heartbeat.pid == pi.proc.pid
    assert len(fake.requests) == 2

    # --- pin: Pi appends the label itself -------------------------------------------------------
    before = read_state(path)
    first_answer = next(e for e in before.session.entries if e.role == "assistant")
    size = path.stat().st_size
    result = bridge.bridge_pin(path, first_answer.id, agent=agent)
    assert result.status == "applied", result.reason
    (label,) = _new_lines(path, size)
    assert result.entry_ids == (label["id"],)
    assert label["type"] == "label" and label["targetId"] == first_answer.id and label["label"] == "ds4:pin"
    assert label["parentId"] == before.leaf_id == result.leaf_before and result.leaf_after == label["id"]
    assert result.describe().startswith("via Pi bridge: pin applied")

    # --- (d) a stale leaf is refused and nothing is written --------------------------------------
    size = path.stat().st_size
    with pytest.raises(WriteRefused) as early:  # ds4tui's own check against the file
        bridge.bridge_pin(path, first_answer.id, clear=True, expected=Expected(leaf_id=before.leaf_id), agent=agent)
    assert early.value.code == "leaf_changed"
    # the bridge's check against Pi's leaf (the file moved on after ds4tui looked)
    stale = bridge.send_command(session_id, "unpin", {"targetId": first_answer.id}, before.leaf_id, agent=agent)
    assert stale.status == "refused"
    assert stale.reason == f"leaf changed: you saw {before.leaf_id}, Pi is at {label['id']}"
    assert path.stat().st_size == size and stale.entry_ids == ()

    # --- collapse: Pi moves its leaf and appends ds4tui's summary, no model call ------------------
    plan = plan_collapse(read_state(path), 1)
    requests_before = len(fake.requests)
    result = bridge.bridge_collapse(path, 1, agent=agent)
    assert result.status == "applied", result.reason
    (summary,) = _new_lines(path, size)
    assert result.entry_ids == (summary["id"],)
    assert summary["type"] == "branch_summary" and summary["parentId"] == plan.anchor_id
    assert summary["fromId"] == plan.from_id == label["id"] and summary["fromHook"] is True
    assert summary["summary"] == plan.entry["summary"] and summary["details"] == plan.entry["details"]
    assert len(fake.requests) == requests_before  # no summarisation call
    assert not list((agent / "ds4tui" / session_id).glob("*.private.json"))

    # (b) the next request carries the collapse
    pi.prompt("third question")
    turns = _turns(fake.requests[-1])
    assert turns[:2] == [("user", "first question"), ("assistant", "answer 1")]
    assert turns[2][0] == "user" and turns[2][1].startswith(
        "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
    )
    assert plan.entry["summary"] in turns[2][1]
    assert turns[3:] == [("user", "third question")]  # the second turn is gone

    # --- compaction: Pi's own call, with the user's instructions ---------------------------------
    size = path.stat().st_size
    result = bridge.bridge_compact(path, instructions="Keep the pinned answer verbatim", agent=agent, timeout=30)
    assert result.status == "applied", result.reason
    new = _new_lines(path, size)
    assert result.entry_ids == tuple(e["id"] for e in new)
    compaction = next(e for e in new if e["type"] == "compaction")
    summary_call = fake.requests[-1]
    assert fake.is_summary(summary_call) and "Keep the pinned answer verbatim" in _request_text(summary_call)
    assert SUMMARY_MARK in compaction["summary"]

    pi.prompt("fourth question")
    turns = _turns(fake.requests[-1])
    assert turns[0][1].startswith("The conversation history before this point was compacted into the following summary:")
    assert SUMMARY_MARK in turns[0][1]
    assert ("user", "first question") not in turns and turns[-1] == ("user", "fourth question")

    # --- (c) Pi's SessionManager and our builder agree on the file --------------------------------
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(path, copy)
    out = subprocess.run([NODE, str(SCRIPT), str(copy), str(PI_PACKAGE)], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    theirs = json.loads(out.stdout)
    session = read_session(path)
    ours = build_context(session)
    got = ours.to_json()
    for key in ("leafId", "branchEntryIds", "contextEntryIds", "labels", "model", "messages"):
        assert got[key] == theirs[key], key
    assert convert_to_llm(ours.messages) == theirs["llmMessages"]
    assert theirs["labels"] == {first_answer.id: "ds4:pin"}

    # --- request metadata: one line per conversation request, fingerprints = ours -----------------
    metas = bridge.read_requests(session_id, agent)
    assert len(metas) == len(fake.agent_requests()) == 4
    last = metas[-1]
    assert (last.provider, last.model, last.api, last.cache_retention) == ("fake", "fake-model", "openai-completions", "short")
    assert last.tool_names == ("read", "bash", "edit", "write")
    wire = fake.requests[-1]
    assert wire["messages"][0]["role"] == "system"
    assert last.system_tokens == system_prompt_tokens(wire["messages"][0]["content"])
    assert last.tool_tokens == sum(tool_tokens(t["function"]) for t in wire["tools"])
    prompt_entry = next(e for e in reversed(session.entries) if e.role == "user")
    sent_context = build_context(session, leaf_id=prompt_entry.id)
    assert [m.fp for m in last.messages] == [message_fingerprint(m) for m in sent_context.messages]
    assert bridge.prefix_change(metas[0], metas[1]) is None  # turn 2 extends turn 1
    assert bridge.prefix_change(metas[1], metas[2]) is not None  # the collapse changed the prefix

    # --- no message content in the channel ---------------------------------------------------------
    channel = bridge.channel_dir(session_id, agent)
    blob = b"".join(p.read_bytes() for p in channel.iterdir())
    for text in ("first question", "second question", "answer 1", SUMMARY_MARK, "Keep the pinned answer"):
        assert text.encode() not in blob, text
    results = bridge.read_results(session_id, agent)
    assert [r.status for r in results.values()] == ["applied", "refused", "applied", "applied"]

    # --- Pi gone: the heartbeat is stale, commands are not sent -----------------------------------
    pi.close()
    gone = bridge.status(session_id, agent)
    assert gone.state == "stale" and gone.reason == f"Pi (pid {pi.proc.pid}) is no longer running"
    with pytest.raises(bridge.BridgeUnavailable):
        bridge.bridge_pin(path, first_answer.id, clear=True, agent=agent)


def test_command_waits_for_the_turn_to_end(pi_setup: tuple[PiRpc, FakeModel, Path]) -> None:
    """A command sent mid-turn is applied only once the agent is idle: with the leaf seen
    mid-turn it is refused then (the turn moved the leaf), with the current leaf it applies."""
    pi, fake, agent = pi_setup
    pi.prompt("first question")
    state = pi.call({"type": "get_state"})
    path, session_id = Path(state["sessionFile"]), state["sessionId"]
    assert _wait_live(session_id, agent).live
    answer = next(e for e in read_state(path).session.entries if e.role == "assistant")

    fake.release.clear()
    fake.received.clear()
    pi.send({"type": "prompt", "message": "slow question"})
    assert fake.received.wait(10)
    mid = read_state(path)
    assert mid.session.by_id[mid.leaf_id].role == "user"  # the prompt is written, the answer is not
    label = bridge.pin_label(mid.session, answer.id)
    command = bridge.submit(session_id, "pin", {"targetId": answer.id, "label": label}, mid.leaf_id, agent=agent)
    time.sleep(1.0)  # several bridge polls while the turn runs
    assert bridge.read_results(session_id, agent) == {}
    fake.release.set()
    result = bridge.wait_result(session_id, command.id, agent=agent, timeout=15)
    after = read_state(path)
    assert after.session.by_id[after.leaf_id].role == "assistant"
    assert result.status == "refused"
    assert result.reason == f"leaf changed: you saw {mid.leaf_id}, Pi is at {after.leaf_id}"
    assert after.size == path.stat().st_size and "label" not in {e.type for e in after.session.entries}

    pinned = bridge.bridge_pin(path, answer.id, note="kept", agent=agent)
    assert pinned.applied and read_session(path).labels == {answer.id: "ds4:pin kept"}
    unpinned = bridge.bridge_pin(path, answer.id, clear=True, agent=agent)
    assert unpinned.applied and read_session(path).labels == {answer.id: "kept"}  # the note stays as a plain label
    assert [e["type"] for e in _new_lines(path, after.size)] == ["label", "label"]
