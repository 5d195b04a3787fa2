"""OpenCode 1.18.33 through its plug-in, on databases the real CLI wrote
(`tests/fixtures/opencode-1.18.33`, see its README): the steps counted once and by the wire's
rules, the context as OpenCode sends it (checked against what the fake model received), the
compaction trio, title generation apart, the window from `opencode.json`; and the live reader
following a database that grows as OpenCode grew it (`tests/opencode_fixture.Replayer`),
catching up in one poll, surviving a lock, a vacuum and a deleted session, woken by its `-wal`."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ds4sessions.agents.opencode import agent as agent_module
from ds4sessions.agents.opencode import config, discovery, store
from ds4sessions.agents.opencode.agent import OpenCodeAgent
from ds4sessions.agents.opencode.handle import make_handle, split_handle
from tests.opencode_fixture import (DB, FIX, FORK, MAIN, SECOND, SESSIONS, Replayer, digest, empty_copy, env,
                                    handle, requests_log, session_row, steps)


@pytest.fixture
def oc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> OpenCodeAgent:
    """The plug-in, with OpenCode's folders pointed at the fixture."""
    for key, value in env(tmp_path).items():
        monkeypatch.setenv(key, value)
    for key in ("OPENCODE_DB", "OPENCODE_CONFIG", "OPENCODE_CONFIG_CONTENT", "OPENCODE_MODELS_PATH",
                "OPENCODE_DISABLE_AUTOCOMPACT"):
        monkeypatch.delenv(key, raising=False)
    agent_module._limits.cache_clear()
    yield OpenCodeAgent()
    agent_module._limits.cache_clear()


def read(agent: OpenCodeAgent, path: str | Path) -> Any:
    """The conversation of one full read (a fresh tail and reader)."""
    reader = agent.reader(Path(path))
    reader.feed(agent.tailer(Path(path)).poll().lines)
    return reader.conversation()


def wire() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(request, reply) pairs of the fake's log."""
    log = requests_log()
    return [(log[i]["request"], log[i + 1]) for i in range(0, len(log), 2)]


def key_of(usage: Any) -> tuple[int, int, int, int]:
    """A step as the fake reported it: (prompt, cached, completion, reasoning) tokens."""
    return (usage.prompt_tokens, usage.cache_read, usage.output, usage.reasoning)


# --- handles ----------------------------------------------------------------------------------


def test_a_handle_names_a_database_and_a_session() -> None:
    assert split_handle(f"/x/opencode.db#{MAIN}") == (Path("/x/opencode.db"), MAIN)
    assert str(make_handle("/x/a#b.db", MAIN)) == f"/x/a#b.db#{MAIN}"
    assert split_handle(f"/x/a#b.db#{MAIN}") == (Path("/x/a#b.db"), MAIN)
    for text in ("/x/opencode.db", f"#{MAIN}", "/x/opencode.db#msg_1", "/x/opencode.db#ses_", "/x/s.jsonl#ses_a b"):
        assert split_handle(text) is None, text


# --- the steps ----------------------------------------------------------------------------------


@pytest.mark.parametrize("session", SESSIONS)
def test_each_step_is_one_request_and_the_sums_are_the_session_rows(oc: OpenCodeAgent, session: str) -> None:
    conv = read(oc, handle(session))
    found = steps(session)
    assert len(conv.requests) == len(found) > 0
    for request, step in zip(conv.requests, found):
        u = request.usage
        assert (u.input, u.cache_read, u.cache_write, u.output, u.reasoning) == (
            step["input"], step["cache"]["read"], step["cache"]["write"], step["output"] + step["reasoning"], step["reasoning"])
        assert request.sidechain == step["summary"]
    row = session_row(session)
    totals = {"input": row["tokens_input"], "output": row["tokens_output"], "reasoning": row["tokens_reasoning"],
              "cacheRead": row["tokens_cache_read"], "cacheWrite": row["tokens_cache_write"]}
    assert {k: conv.extra["stepTotals"][k] for k in totals} == totals
    assert {k: conv.extra["sessionTotals"][k] for k in totals} == totals


def test_the_steps_follow_the_wire_rules() -> None:
    """Every reply the fake sent (but the title generator's) is a step of the database, with
    input = prompt − cached, cache.read = cached, output = completion − reasoning (OpenCode's
    `Session.getUsage`); the title-generation calls are in no session."""
    agent = OpenCodeAgent()
    recorded = {key_of(r.usage) for s in SESSIONS for r in read(agent, handle(s)).requests}
    titles = 0
    for request, reply in wire():
        u = reply["usage"]
        key = (u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], u["completion_tokens"],
               u["completion_tokens_details"]["reasoning_tokens"])
        if request["system"].startswith("You are a title generator"):
            titles += 1
            assert key not in recorded
        else:
            assert key in recorded, reply["reply"]
    assert titles == 2


@pytest.mark.parametrize("session", SESSIONS)
def test_the_context_is_what_opencode_sent(oc: OpenCodeAgent, session: str) -> None:
    """For every step in the context, the messages before its reply have the roles of what the
    fake received for that request (system first; a tool result is OpenAI's `tool` message)."""
    conv = read(oc, handle(session))
    sent = {}
    for request, reply in wire():
        u = reply["usage"]
        sent[(u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], u["completion_tokens"],
              u["completion_tokens_details"]["reasoning_tokens"])] = request
    role = {"user": "u", "assistant": "a", "toolResult": "t"}
    checked = 0
    for request in conv.requests:
        if request.message_index is None or request.sidechain:
            continue
        wire_roles = "".join(r[0] for r in sent[key_of(request.usage)]["roles"])
        ours = "s" + "".join(role[m["role"]] for m in conv.messages[:request.message_index])
        assert ours == wire_roles, request.entry_id
        checked += 1
    assert checked >= 2


def test_the_compaction_trio_and_the_context_after_it(oc: OpenCodeAgent) -> None:
    conv = read(oc, handle(MAIN))
    (compaction,) = conv.compactions
    big = max(steps(MAIN), key=lambda s: s["total"])
    assert compaction.kind == "auto" and compaction.tokens_before == big["total"] > 195_904
    (fact,) = conv.extra["compactions"]
    summary = next(r for r in conv.requests if r.sidechain)
    after = conv.requests[summary.index + 1]
    assert fact["completed"] and fact["summaryMessageId"] == summary.entry_id
    assert fact["summaryTokens"] == summary.usage.output and fact["tokensAfter"] == after.usage.prompt_tokens
    sources = [m.source for m in conv.meta]
    assert sources[:3] == ["compaction", "compaction.summary", "synthetic"]
    assert conv.messages[0]["content"] == [{"type": "text", "text": "What did we do so far?"}]
    assert conv.messages[1]["ds4Category"] == "compaction" and conv.meta[1].category == "compaction"
    assert conv.messages[2]["content"][0]["text"].startswith("Continue if you have next steps")
    assert summary.message_index == 1  # the summary is in the context, but never its anchor
    prompts = [next(b["text"] for b in m["content"] if not b.get("synthetic"))
               for m, meta in zip(conv.messages, conv.meta) if meta.source == "prompt"]
    assert prompts == ['"AFTER-COMPACT: what do you remember?"', '"THINK-ONLY: what does the attached file say?"']
    # the attached text file: OpenCode's synthetic read of it is sent, the file part itself is not
    attached = [m for m, meta in zip(conv.messages, conv.meta) if meta.source == "prompt"][-1]
    assert any("alpha" in b.get("text", "") for b in attached["content"])


def test_title_generation_is_counted_apart(oc: OpenCodeAgent) -> None:
    calls = {s: read(oc, handle(s)).extra["titleGeneration"] for s in SESSIONS}
    assert calls[MAIN]["calls"] == calls[SECOND]["calls"] == 1 and calls[FORK]["calls"] == 0
    assert calls[MAIN]["tokens"] is None and str(FIX) in calls[MAIN]["source"]


def test_the_reader_agrees_with_opencode_export(oc: OpenCodeAgent) -> None:
    """`opencode export` (OpenCode's own view) and the rows ds4tui read hold the same messages
    and parts."""
    exported = json.loads((FIX / "export.json").read_text(encoding="utf-8"))
    reader = oc.reader(Path(handle(MAIN)))
    reader.feed(oc.tailer(Path(handle(MAIN))).poll().lines)
    assert [m["info"]["id"] for m in exported["messages"]] == reader.ordered()[:len(exported["messages"])]
    for message in exported["messages"]:
        mid = message["info"]["id"]
        ours = {k: v for k, v in reader.infos[mid].items() if k != "id"}
        assert ours == {k: v for k, v in message["info"].items() if k not in ("id", "sessionID")}
        theirs = {p["id"]: {k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")} for p in message["parts"]}
        assert {pid: {k: v for k, v in part.items() if k != "id"} for pid, part in reader.parts[mid].items()} == theirs


# --- the window -----------------------------------------------------------------------------------


def test_the_window_comes_from_opencode_json(oc: OpenCodeAgent, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    conv = read(oc, handle(MAIN))
    assert conv.context_window == 200_000
    assert conv.extra["window"]["source"] == str(FIX / "config" / "opencode" / "opencode.json")
    assert conv.extra["autocompact"] == {"enabled": True, "usable": 200_000 - 4_096, "reserved": None}

    project = tmp_path / "proj"
    (project / ".opencode").mkdir(parents=True)
    (project / "opencode.jsonc").write_text('{ // a comment\n "provider": {"fake": {"models": {"fake-model": '
                                             '{"limit": {"context": 100000, "output": 50000,},},},},}, }', encoding="utf-8")
    limits = config.model_limits("fake", "fake-model", str(project))
    assert (limits.context, limits.output, limits.usable(), limits.source) == (100_000, 50_000, 68_000, str(project / "opencode.jsonc"))
    monkeypatch.setenv("OPENCODE_CONFIG_CONTENT", '{"provider": {"fake": {"models": {"fake-model": {"limit": '
                                                  '{"context": 64000, "input": 60000, "output": 8000}}}}}, '
                                                  '"compaction": {"reserved": 5000}}')
    limits = config.model_limits("fake", "fake-model", str(project))
    assert (limits.context, limits.usable(), limits.source) == (64_000, 55_000, "$OPENCODE_CONFIG_CONTENT")
    monkeypatch.setenv("OPENCODE_CONFIG_CONTENT", '{"compaction": {"auto": false}}')
    assert config.model_limits("fake", "fake-model", str(project)).auto is False
    models = tmp_path / "models.json"
    models.write_text(json.dumps({"anthropic": {"models": {"claude-x": {"limit": {"context": 1_000_000, "output": 64_000}}}}}))
    monkeypatch.setenv("OPENCODE_MODELS_PATH", str(models))
    limits = config.model_limits("anthropic", "claude-x", str(project))
    assert (limits.context, limits.usable(), limits.source) == (1_000_000, 968_000, str(models))
    assert config.model_limits("nobody", "nothing", None).context is None


# --- discovery -------------------------------------------------------------------------------------


def test_discovery_lists_one_entry_per_session(oc: OpenCodeAgent, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    infos = oc.discover()
    assert [i.session_id for i in infos] == [FORK, SECOND, MAIN]  # newest first
    for info in infos:
        assert str(info.path) == handle(info.session_id) and info.agent == "opencode"
        assert oc.handle_stat(str(info.path)) == (info.size, info.modified)
        assert info.project.endswith("proj-opencode") and info.model == "fake-model" and info.parent is None
    tail = oc.tailer(infos[-1].path)
    batch = tail.poll()
    assert batch.size == infos[-1].size and tail.modified() == infos[-1].modified

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "nowhere"))
    assert oc.discover() == []
    monkeypatch.setenv("OPENCODE_DB", str(DB))  # absolute
    assert len(oc.discover()) == 3
    (tmp_path / "nowhere" / "opencode" / "sub").mkdir(parents=True)
    (tmp_path / "nowhere" / "opencode" / "sub" / "x.db").write_bytes(DB.read_bytes())
    monkeypatch.setenv("OPENCODE_DB", "sub/x.db")  # relative to the data folder
    assert {str(i.path).rpartition("#")[0] for i in oc.discover()} == {str(tmp_path / "nowhere/opencode/sub/x.db")}
    monkeypatch.delenv("OPENCODE_DB")
    (tmp_path / "nowhere" / "opencode" / "opencode-dev.db").write_bytes(DB.read_bytes())  # a channel's database
    assert len(oc.discover()) == 3


# --- bad databases ---------------------------------------------------------------------------------


def test_bad_databases_are_one_line(oc: OpenCodeAgent, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(DB.read_bytes()[:100] + b"\xff" * 8192)
    text = tmp_path / "text.db"
    text.write_text("not a database at all\n" * 10)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (x)")
    cases = {corrupt: "corrupt or not an SQLite database", text: "not an SQLite database", other: "not OpenCode's",
             tmp_path: "a directory, not an OpenCode database", DB.with_name("missing.db"): "No such file"}
    for db, why in cases.items():
        with pytest.raises(OSError) as error:
            oc.tailer(make_handle(db, MAIN)).poll()
        assert why in f"{error.value.filename}: {error.value.strerror}", db
    with pytest.raises(store.OpenCodeDbError, match="no session ses_nothere in this database"):
        oc.tailer(make_handle(DB, "ses_nothere")).poll()
    with pytest.raises(store.OpenCodeDbError, match=f"holds 3 sessions: give one as PATH#ses_… .*the newest: {DB}#{FORK}"):
        oc.tailer(DB)


def test_a_locked_database_is_one_line_first_and_a_note_while_following(oc: OpenCodeAgent, tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    db.write_bytes(DB.read_bytes())
    locker = sqlite3.connect(db, isolation_level=None)
    locker.execute("PRAGMA locking_mode = EXCLUSIVE")
    locker.execute("BEGIN EXCLUSIVE")
    locker.execute("UPDATE session SET title = title")
    try:
        start = time.monotonic()
        with pytest.raises(store.OpenCodeDbError, match="database is locked by another process"):
            oc.tailer(make_handle(db, MAIN)).poll()
        assert time.monotonic() - start < 5
    finally:
        locker.execute("COMMIT")
        locker.close()
    live = oc.live(make_handle(db, MAIN))
    first = live.refresh()
    assert first is not None and first.problems == []
    locker = sqlite3.connect(db, isolation_level=None)
    locker.execute("PRAGMA locking_mode = EXCLUSIVE")
    locker.execute("BEGIN EXCLUSIVE")
    locker.execute("UPDATE session SET title = title")
    try:
        locked = live.refresh()
        assert locked is not None and len(locked.turns) == len(first.turns)  # the last state, kept
        assert any("database is locked" in p for p in locked.problems) and locked.extras.header_note().startswith("database")
        assert live.refresh() is None  # the same problem is not news
    finally:
        locker.execute("COMMIT")
        locker.close()
    recovered = live.refresh()
    assert recovered is not None and recovered.problems == []


# --- following a database that grows ----------------------------------------------------------------


def signature(conv: Any) -> tuple[Any, ...]:
    """What must be equal between an incremental and a full read."""
    return (conv.messages, conv.meta, conv.requests, conv.compactions, conv.title, conv.model, conv.context_window,
            conv.extra["stepTotals"], conv.extra["sessionTotals"])


@pytest.mark.parametrize("open_tail", [24, 2])
def test_the_reader_follows_opencodes_writes_one_poll_each(oc: OpenCodeAgent, tmp_path: Path, open_tail: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The main session's 120-odd events replayed into a WAL copy, transaction by transaction:
    after each, one `refresh()` of the live session equals a fresh full read, and reads the new
    rows only (the tail delivers what changed); at the end, equal to the real database. (With
    `open_tail` 2 the kept attribution covers nearly all of this short context, so extending it
    is checked against counting from scratch at every write.)"""
    from ds4sessions.agents.opencode import cockpit

    monkeypatch.setattr(cockpit, "OPEN_TAIL", open_tail)
    db = tmp_path / "opencode.db"
    empty_copy(db)
    replayer = Replayer(db, MAIN)
    path = make_handle(db, MAIN)
    live = oc.live(path)
    events = iter(replayer)
    next(events)  # session.created: the session exists
    assert live.refresh() is not None
    delivered = 0
    for _ in events:
        before = digest(db)
        snap = live.refresh()
        assert digest(db) == before  # reading changes no byte of the database or its -wal
        assert snap is not None, "no new snapshot after a write"
        assert signature(snap.conversation) == signature(read(oc, path))
        fresh = oc.live(path).refresh()  # the kept attribution, extended, equals counting from scratch
        assert snap.best.message_tokens == fresh.best.message_tokens and snap.best.segments == fresh.best.segments
        assert [(r.id, r.tokens) for r in snap.best.rows] == [(r.id, r.tokens) for r in fresh.best.rows]
        assert snap.provider == fresh.provider
        delivered += snap.session.last_line_no
    replayer.close()
    final = live.last.conversation
    real = read(oc, handle(MAIN))
    assert (final.messages, final.requests, final.compactions) == (real.messages, real.requests, real.compactions)
    assert final.extra["stepTotals"] == real.extra["stepTotals"]
    assert live.refresh() is None  # nothing new: no snapshot


def test_a_poll_reads_the_new_rows_only(oc: OpenCodeAgent, tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    empty_copy(db)
    replayer = Replayer(db, MAIN)
    tail = oc.tailer(make_handle(db, MAIN))
    events = iter(replayer)
    next(events)
    first = tail.poll()
    assert [line.raw[:2] for line in first.lines] == [b"S\t"]
    sizes = []
    for _ in events:
        batch = tail.poll()
        assert batch.reset is None and 1 <= len(batch.lines) <= 2  # the changed row (and the session row)
        sizes.append(batch.size)
    replayer.close()
    assert sizes[-1] == discovery.handle_stat(db, MAIN)[0]


def test_vacuum_deletion_and_a_replaced_file_are_survived(oc: OpenCodeAgent, tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    db.write_bytes(DB.read_bytes())
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
    path = make_handle(db, SECOND)
    live = oc.live(path)
    first = live.refresh()
    assert first is not None and len(first.conversation.requests) == 2
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM session WHERE id = ?", (MAIN,))
        conn.execute("DELETE FROM message WHERE session_id = ?", (MAIN,))
        conn.execute("DELETE FROM part WHERE session_id = ?", (MAIN,))
    sqlite3.connect(db, isolation_level=None).execute("VACUUM")
    assert live.refresh() is None  # vacuumed, another session deleted: nothing changed for this one
    replaced = tmp_path / "new.db"
    replaced.write_bytes(DB.read_bytes())
    replaced.replace(db)  # a new file (inode) under the same name: read again
    again = live.refresh()
    assert again is not None and again.conversation.requests == first.conversation.requests
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM part WHERE session_id = ?", (SECOND,))
        conn.execute("DELETE FROM message WHERE session_id = ?", (SECOND,))
        conn.execute("DELETE FROM session WHERE id = ?", (SECOND,))
    gone = live.refresh()
    assert gone is not None and gone.deleted and len(gone.conversation.requests) == 2  # the last state, marked deleted
    db.unlink()
    assert live.refresh() is None


def test_the_watcher_wakes_on_the_write_ahead_log(oc: OpenCodeAgent, tmp_path: Path) -> None:
    """A write by another process goes to the `-wal`, not the database file: the session watcher
    of a handle watches both (`OpenCodeAgent.handle_files`)."""
    from ds4sessions.agents import registry
    from ds4sessions.ingest.watch import SessionWatcher

    db = tmp_path / "opencode.db"
    empty_copy(db)
    replayer = Replayer(db, MAIN)
    events = iter(replayer)
    next(events)
    path = make_handle(db, MAIN)
    assert registry.watched_files(path) == (db, Path(f"{db}-wal"))
    woke = threading.Event()
    with SessionWatcher(path, woke.set, poll_interval=30):  # events only: the poll would not run in time
        time.sleep(0.3)
        before = db.stat().st_mtime_ns
        next(events)
        assert woke.wait(5), "no wake-up for a write to the -wal"
        assert db.stat().st_mtime_ns == before  # (the database file itself did not change)
    replayer.close()


def test_the_kept_attribution_is_dropped_when_an_earlier_message_changes(oc: OpenCodeAgent, monkeypatch: pytest.MonkeyPatch) -> None:
    """A message before the open tail rewritten in place (an edit, a pruned tool output): the
    kept attribution is not extended, the counts are those of counting from scratch."""
    from dataclasses import replace

    from ds4sessions.agents.opencode import cockpit

    monkeypatch.setattr(cockpit, "OPEN_TAIL", 1)
    conv = read(oc, handle(MAIN))
    memo: dict[str, Any] = {}
    first = cockpit.account(conv, memo)
    edited = {**conv.messages[0], "content": [{"type": "text", "text": "What did we do so far? " * 50}]}
    changed = replace(conv, messages=(edited, *conv.messages[1:]))
    kept = cockpit.account(changed, memo)
    fresh = cockpit.account(changed, {})
    assert kept.breakdown.message_tokens == fresh.breakdown.message_tokens != first.breakdown.message_tokens
    assert kept.breakdown.segments == fresh.breakdown.segments


def test_hostile_rows_are_counted_never_raised(oc: OpenCodeAgent, tmp_path: Path) -> None:
    """Rows OpenCode would never write (not JSON, not an object, an unknown role or part type,
    wrong field types) and an event that names no row: diagnostics and a full read, never an
    exception; the rest of the session is read as usual."""
    db = tmp_path / "opencode.db"
    db.write_bytes(DB.read_bytes())
    path = make_handle(db, SECOND)
    live = oc.live(path)
    before = live.refresh()
    with sqlite3.connect(db) as conn:
        mid = conn.execute("SELECT id FROM message WHERE session_id = ? ORDER BY time_created LIMIT 1", (SECOND,)).fetchone()[0]
        reply = conn.execute("SELECT id FROM message WHERE session_id = ? AND data LIKE '%\"role\":\"assistant\"%' "
                             "ORDER BY time_created DESC LIMIT 1", (SECOND,)).fetchone()[0]
        rows = [("msg_zz1", "{not json"), ("msg_zz2", "[1, 2]"), ("msg_zz3", json.dumps({"role": "robot", "time": {"created": "x"}}))]
        for rid, data in rows:
            conn.execute("INSERT INTO message VALUES (?, ?, 9e15, 9e15, ?)", (rid, SECOND, data))
        parts = [("prt_zz1", mid, json.dumps({"type": "hologram"})), ("prt_zz2", mid, "\"text\""),
                 ("prt_zz3", reply, json.dumps({"type": "tool", "tool": 5, "state": {"status": "completed", "input": [1],
                                                                                  "output": None, "time": "now"}})),
                 ("prt_zz4", "msg_zz3", json.dumps({"type": "text", "text": 42}))]
        for rid, owner, data in parts:
            conn.execute("INSERT INTO part VALUES (?, ?, ?, 9e15, 9e15, ?)", (rid, owner, SECOND, data))
        seq = conn.execute("SELECT seq FROM event_sequence WHERE aggregate_id = ?", (SECOND,)).fetchone()[0] + 1
        conn.execute("UPDATE event_sequence SET seq = ? WHERE aggregate_id = ?", (seq, SECOND))
        conn.execute("INSERT INTO event VALUES ('evt_zz', ?, ?, 'message.part.updated.1', '{oops')", (SECOND, seq))
    snap = live.refresh()  # the event names no row: read again in full
    assert snap is not None and len(snap.conversation.requests) == len(before.conversation.requests)
    kinds = snap.session.diagnostics.counts
    assert kinds == {"malformed": 1, "non_object": 2, "bad_field": 2}
    assert any("unknown part type 'hologram'" in str(item) for item in snap.session.diagnostics.items)
    assert "bad_field: 2" in snap.problems
    assert len(snap.conversation.messages) == len(before.conversation.messages) + 1  # a tool part with odd fields: sent
    assert snap.conversation.messages[-1] == {"role": "toolResult", "toolCallId": "prt_zz3", "toolName": "5",
                                              "content": [{"type": "text", "text": ""}], "isError": False, "timestamp": None}
    data = oc.map_json(path)
    assert data["diagnostics"] == 5 and data["agent"] == "opencode"
