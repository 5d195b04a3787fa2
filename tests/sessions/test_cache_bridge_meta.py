"""The prompt-cache monitor with the bridge's request metadata (issue 7 item 4, docs/bridge.md).

Sessions are Pi-written (sample 01 always; 03-compaction from ../shared); their
`requests.jsonl` is written as the bridge writes it: one line per reply, `leafId` = the reply's
parent, `time` 3 ms after the reply's request start, fingerprints = `message_fingerprint` of the
context `build_context(session, leaf_id=parent)` (the e2e test `test_bridge_e2e.py` checks real Pi
writes exactly these).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.app import App, ComposeResult

from ds4core.cache_policy import message_fingerprint
from ds4sessions.derive.cache import CacheMonitor, CacheView, cache_view
from ds4sessions.agents.pi.live import open_snapshot
from ds4sessions.agents.pi import build_context, read_session
from ds4tui.widgets.cache import CachePanel
from tests.conftest import FIXTURES

SAMPLE = FIXTURES / "pi" / "01-tools-and-image.jsonl"
SESSION_01 = "019cadb5-6afd-7157-b0b4-7bc363b502d2"
LAST_REQUEST_01 = 1772441024.433  # reply 7060d0dd's request start
SYSTEM_TOKENS, TOOL_TOKENS = 1800, 950

Tweak = Callable[[str, dict[str, Any]], None]


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary Pi agent dir (PI_CODING_AGENT_DIR)."""
    path = tmp_path / "agent"
    path.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(path))
    return path


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def request_lines(session_path: Path, tweak: Tweak | None = None) -> list[str]:
    """The bridge's `requests.jsonl` lines for every reply of the session, in time order;
    `tweak(reply_id, line)` may edit a line before it is written."""
    session = read_session(session_path)
    lines = []
    for entry in session.entries:
        if entry.role != "assistant":
            continue
        message = entry.message or {}
        sent = build_context(session, leaf_id=entry.parent_id)
        line: dict[str, Any] = {
            "v": 1, "seq": len(lines) + 1, "time": iso(message["timestamp"] + 3), "sessionId": session.session_id,
            "leafId": entry.parent_id, "provider": message["provider"], "model": message["model"],
            "api": message.get("api"), "cacheRetention": "short",
            "system": {"tokens": SYSTEM_TOKENS, "hash": "5" * 64},
            "tools": {"count": 4, "names": ["read", "bash", "edit", "write"], "tokens": TOOL_TOKENS, "hash": "7" * 64},
            "messages": [{"role": m.get("role"), "tokens": 10, "fp": message_fingerprint(m)} for m in sent.messages],
            "payload": {"bytes": 1000, "hash": "0" * 64},
        }
        if tweak is not None:
            tweak(entry.id or "", line)
        lines.append(json.dumps(line) + "\n")
    return lines


def requests_path(agent: Path, session_id: str = SESSION_01) -> Path:
    path = agent / "ds4tui" / session_id / "requests.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def with_cold_reply(tmp_path: Path) -> Path:
    """Sample 01 with reply b03a46cd (3 s after 79adb059, well within the 300 s lifetime) made
    cold: it read nothing and wrote its whole prompt. Pi's own file leaves this unexplained."""
    out = []
    for raw in SAMPLE.read_text(encoding="utf-8").splitlines():
        data = json.loads(raw)
        if data.get("id") == "b03a46cd":
            usage = data["message"]["usage"]
            usage["cacheWrite"] += usage["cacheRead"]
            usage["cacheRead"] = 0
        out.append(json.dumps(data))
    path = tmp_path / "01-cold.jsonl"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def change_fp(reply_id: str, index: int) -> Tweak:
    """Tweak: the request for `reply_id` sent message `index` differently from the session file
    (as an extension's `context` hook would)."""

    def tweak(entry_id: str, line: dict[str, Any]) -> None:
        if entry_id == reply_id:
            line["messages"][index]["fp"] = "f" * 64

    return tweak


def miss_of(view: CacheView, entry_id: str) -> Any:
    record = next(r for r in view.history.records if r.event.entry_id == entry_id)
    assert record.cold and record.miss is not None
    return record.miss


# --- The miss explainer ------------------------------------------------------------------------


def test_cold_request_is_explained_by_the_fingerprints(tmp_path: Path, agent: Path) -> None:
    path = with_cold_reply(tmp_path)
    without = miss_of(cache_view(open_snapshot(path), now=0), "b03a46cd")
    assert without.cause == "unexplained"  # the rebuilt prompts are identical
    requests_path(agent).write_text("".join(request_lines(path, change_fp("b03a46cd", 4))), encoding="utf-8")
    miss = miss_of(cache_view(open_snapshot(path), now=0), "b03a46cd")
    assert miss.cause == "prefix changed"
    assert miss.detail == "prefix changed at message 4 (bridge): edited context a40740f8 at 08:41:15"
    assert (miss.change.kind, miss.change.entry_id, miss.change.message_index) == ("edited context", "a40740f8", 4)
    assert miss.gap_s == pytest.approx(1772440881.841 - 1772440878.912)


def test_unchanged_fingerprints_keep_the_miss_unexplained(tmp_path: Path, agent: Path) -> None:
    path = with_cold_reply(tmp_path)
    requests_path(agent).write_text("".join(request_lines(path)), encoding="utf-8")
    view = cache_view(open_snapshot(path), now=0)
    assert miss_of(view, "b03a46cd").cause == "unexplained"
    assert (view.bridge_requests, view.bridge_matched) == (8, 8)


def test_changed_tool_schemas_change_the_prefix_at_message_0(tmp_path: Path, agent: Path) -> None:
    path = with_cold_reply(tmp_path)

    def tweak(entry_id: str, line: dict[str, Any]) -> None:
        if entry_id == "b03a46cd":
            line["tools"]["hash"] = "8" * 64

    requests_path(agent).write_text("".join(request_lines(path, tweak)), encoding="utf-8")
    miss = miss_of(cache_view(open_snapshot(path), now=0), "b03a46cd")
    assert miss.detail == "prefix changed at message 0 (bridge): the tool schemas changed"
    assert (miss.change.kind, miss.change.message_index) == ("tool schema", 0)


def test_compaction_named_by_the_bridge(shared_dir: Path, agent: Path) -> None:
    path = shared_dir / "sessions-pi" / "03-compaction.jsonl"
    session_id = read_session(path).session_id
    assert session_id is not None
    requests_path(agent, session_id).write_text("".join(request_lines(path)), encoding="utf-8")
    view = cache_view(open_snapshot(path), now=0)
    misses = view.history.misses
    assert [(r.event.entry_id, r.miss.cause) for r in misses] == [
        ("48a612bd", "first request"), ("9a9f182d", "prefix changed"), ("4ccd2e4f", "prefix changed")]
    assert misses[1].miss.detail == "prefix changed at message 0 (bridge): compaction d632457b at 13:27:43"
    assert misses[2].miss.change.entry_id == "107b9405"
    assert misses[2].miss.detail.startswith("prefix changed at message 0 (bridge): compaction 107b9405")


# --- The matching rule -------------------------------------------------------------------------


def test_matching_takes_the_nearest_line_on_the_reply_leaf_with_its_model(tmp_path: Path, agent: Path) -> None:
    path = with_cold_reply(tmp_path)
    lines = request_lines(path, change_fp("b03a46cd", 4))
    line = json.loads(next(x for x in lines if '"leafId": "68f6cec5"' in x))
    # A failed attempt on the same leaf 2 s earlier (changed at message 2), a line of another
    # model 1 ms from the reply, and one 61 s later: none of them is the reply's request.
    earlier = {**line, "time": iso(1772440881841 + 3 - 2000), "messages": [dict(m) for m in line["messages"]]}
    earlier["messages"][2]["fp"] = "e" * 64
    other_model = {**line, "time": iso(1772440881842), "model": "claude-haiku-4-5", "messages": earlier["messages"]}
    too_late = {**line, "time": iso(1772440881841 + 61_000), "messages": earlier["messages"]}
    extra = [json.dumps(x) + "\n" for x in (earlier, other_model, too_late)]
    requests_path(agent).write_text("".join(extra + lines), encoding="utf-8")
    view = cache_view(open_snapshot(path), now=0)
    assert miss_of(view, "b03a46cd").change.message_index == 4
    assert (view.bridge_requests, view.bridge_matched) == (11, 8)


def test_reply_of_another_model_is_not_matched(tmp_path: Path, agent: Path) -> None:
    path = with_cold_reply(tmp_path)

    def tweak(entry_id: str, line: dict[str, Any]) -> None:
        if entry_id == "b03a46cd":
            line["provider"] = "openai"
            line["messages"][4]["fp"] = "f" * 64

    requests_path(agent).write_text("".join(request_lines(path, tweak)), encoding="utf-8")
    view = cache_view(open_snapshot(path), now=0)
    assert miss_of(view, "b03a46cd").cause == "unexplained"  # the rebuilt prompts decide
    assert view.bridge_matched == 7


# --- The cached prefix on the map and the fixed tokens -----------------------------------------


def test_cached_prefix_end_follows_the_last_request_fingerprints(agent: Path) -> None:
    snapshot = open_snapshot(SAMPLE)
    baseline = cache_view(snapshot, now=LAST_REQUEST_01)
    assert baseline.cached_prefix_end == 18 and baseline.bridge_fixed_tokens is None
    path = requests_path(agent)
    path.write_text("".join(request_lines(SAMPLE)), encoding="utf-8")
    view = cache_view(snapshot, now=LAST_REQUEST_01)
    assert view.cached_prefix_end == 18  # the request sent context messages 0..17, all unchanged
    assert view.bridge_fixed_tokens == SYSTEM_TOKENS + TOOL_TOKENS
    # Pi sent message 7 of the last request differently: the cache holds messages 0..6 only.
    path.write_text("".join(request_lines(SAMPLE, change_fp("7060d0dd", 7))), encoding="utf-8")
    assert cache_view(snapshot, now=LAST_REQUEST_01).cached_prefix_end == 7


def test_cached_prefix_end_with_a_partly_cached_prompt_uses_the_fixed_tokens(agent: Path) -> None:
    snapshot = open_snapshot(SAMPLE)
    tokens = snapshot.breakdown.message_tokens
    usage = next(r.event.usage for r in cache_view(snapshot, now=0).history.records if r.event.entry_id == "7060d0dd")
    assert (usage.prompt_tokens, usage.cache_read + usage.cache_write) == (5071, 5065)

    def system(entry_id: str, line: dict[str, Any]) -> None:
        if entry_id == "7060d0dd":
            line["system"]["tokens"] = 200_000  # almost all of the estimate: the messages fall outside

    requests_path(agent).write_text("".join(request_lines(SAMPLE, system)), encoding="utf-8")
    # chars-v1 estimate of the prompt: 200,950 fixed + 4,693 for messages 0..17; 5065/5071 of it
    # (205,399.7) is cached. Message 14 starts at 200,950 + 4,402 = 205,352; its middle, 205,444,
    # lies past the mark, so messages 0..13 are cached.
    assert tokens[:18] == [1453, 52, 118, 330, 247, 75, 132, 500, 120, 31, 26, 131, 125, 1062, 184, 17, 48, 42]
    assert cache_view(snapshot, now=0).cached_prefix_end == 14
    requests_path(agent).write_text("".join(request_lines(SAMPLE)), encoding="utf-8")
    assert cache_view(snapshot, now=0).cached_prefix_end == 18  # 2,750 fixed tokens: all 18


# --- Missing, corrupt, incremental --------------------------------------------------------------


def test_missing_or_corrupt_metadata_changes_nothing(tmp_path: Path, agent: Path) -> None:
    path = with_cold_reply(tmp_path)
    snapshot = open_snapshot(path)
    baseline = cache_view(snapshot, now=LAST_REQUEST_01).to_json()
    assert baseline["bridgeFixedTokens"] is None and baseline["bridgeRequests"] == 0
    channel = requests_path(agent)
    assert cache_view(snapshot, now=LAST_REQUEST_01).to_json() == baseline  # folder, no file
    line = json.loads(request_lines(path)[0])
    corrupt = [
        b"not json", b"[1, 2]", b'"text"', b"\xff\xfe\x00", b"[" * 100_000,
        json.dumps({**line, "seq": "x"}).encode(), json.dumps({**line, "seq": 1e400}).encode(),
        json.dumps({**line, "leafId": ["a"]}).encode(), json.dumps({**line, "messages": [1]}).encode(),
        json.dumps({**line, "system": [584]}).encode(), json.dumps({**line, "messages": [{"role": "user"}]}).encode(),
    ]
    channel.write_bytes(b"\n".join(corrupt) + b"\n" + json.dumps(line).encode()[:-5])  # torn last line
    assert cache_view(snapshot, now=LAST_REQUEST_01).to_json() == baseline
    channel.unlink()
    channel.mkdir()  # a folder where the file should be
    assert cache_view(snapshot, now=LAST_REQUEST_01).to_json() == baseline


def test_session_without_a_usable_id(tmp_path: Path, agent: Path) -> None:
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    header["id"] = "../escape"
    path = tmp_path / "bad-id.jsonl"
    path.write_text(json.dumps(header) + "\n" + "".join(lines[1:]), encoding="utf-8")
    view = cache_view(open_snapshot(path), now=0)
    assert (view.bridge_requests, view.cached_prefix_end) == (0, 18)


def test_second_view_reads_only_new_lines(agent: Path) -> None:
    snapshot = open_snapshot(SAMPLE)
    lines = [line.encode() for line in request_lines(SAMPLE, change_fp("7060d0dd", 7))]
    path = requests_path(agent)
    path.write_bytes(b"".join(lines[:4]))
    monitor = CacheMonitor()
    first = monitor.view(snapshot, now=0)
    assert (first.bridge_requests, first.bridge_matched, first.cached_prefix_end) == (4, 4, 18)
    # Blank the lines already read (same bytes, same file) and append the rest, the last one torn.
    with path.open("r+b") as handle:
        handle.write(b"".join(b" " * (len(x) - 1) + b"\n" for x in lines[:4]))
        handle.seek(0, os.SEEK_END)
        handle.write(b"".join(lines[4:7]) + lines[7][:40])
    second = monitor.view(snapshot, now=0)
    assert (second.bridge_requests, second.bridge_matched) == (7, 7)  # the first 4 kept, not re-read
    with path.open("ab") as handle:
        handle.write(lines[7][40:])
    third = monitor.view(snapshot, now=0)
    assert (third.bridge_requests, third.bridge_matched, third.cached_prefix_end) == (8, 8, 7)
    # A replaced (or truncated) file is read again from the start.
    replacement = path.with_name("new.jsonl")
    replacement.write_bytes(b"".join(lines[:2]))
    os.replace(replacement, path)
    assert monitor.view(snapshot, now=0).bridge_requests == 2
    path.unlink()
    gone = monitor.view(snapshot, now=0)
    assert (gone.bridge_requests, gone.bridge_fixed_tokens, gone.cached_prefix_end) == (0, None, 18)


# --- The cache panel ---------------------------------------------------------------------------


class PanelApp(App[None]):
    def __init__(self, view: CacheView) -> None:
        super().__init__()
        self.view_data = view

    def compose(self) -> ComposeResult:
        yield CachePanel()

    def on_mount(self) -> None:
        self.query_one(CachePanel).show(self.view_data)


async def panel_text(view: CacheView) -> str:
    """The panel's text as drawn (its content rendered 200 columns wide)."""
    app = PanelApp(view)
    async with app.run_test(size=(200, 60)):
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(app.query_one(CachePanel).content)
        return console.export_text()


async def test_panel_shows_the_bridge_fixed_tokens(agent: Path) -> None:
    snapshot = open_snapshot(SAMPLE)
    assert "Bridge:" not in await panel_text(cache_view(snapshot, now=LAST_REQUEST_01))
    requests_path(agent).write_text("".join(request_lines(SAMPLE)), encoding="utf-8")
    text = await panel_text(cache_view(snapshot, now=LAST_REQUEST_01))
    assert "Bridge: fixed tokens 2,750 (system prompt + tools as Pi sent them in the last request, chars-v1)" in text
    assert "8 of 8 requests matched to 8 metadata lines" in text
