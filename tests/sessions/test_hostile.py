"""Issue 13: hostile input and shared machines. Every read command ends with exit 0 or 2 and one
line; the journal is write-ahead and undo checks the file; state is private; secrets redacted."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from ds4sessions.agents.pi import build_context, read_session
from ds4sessions.ingest.diagnostics import Problem
from ds4sessions.ingest.limits import MAX_DEPTH, json_depth
from ds4sessions.ingest.tailer import Tailer
from ds4sessions.safety import NotRegularFile, open_in, pid_is_agent, redact
from ds4sessions.steering.journal import Journal, JournalError
from ds4sessions.steering.steer import pin, undo
from ds4sessions.steering.writer import WriteRefused, read_state

from tests.conftest import FIXTURES, ROOT
from tests.sessions.test_writer import copy_old

SAMPLE = FIXTURES / "pi" / "01-tools-and-image.jsonl"
HEADER = '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/x"}'
USER = {"role": "user", "content": "hi", "timestamp": 1}
ASSISTANT = {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "provider": "anthropic",
             "model": "claude-sonnet-4-5", "stopReason": "stop", "timestamp": 2,
             "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15}}


def _msg(i: int, parent: str | None, message: dict) -> str:
    return json.dumps({"type": "message", "id": f"e{i}", "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z",
                       "message": message})


HOSTILE = {
    "surrogate": [_msg(1, None, {**USER, "content": "\ud800 lone"}), _msg(2, "e1", ASSISTANT)],
    "deep": [_msg(1, None, USER), '{"type":"message","id":"e2","parentId":"e1","message":' + "[" * 100_000 + "]" * 100_000 + "}"],
    "timestamps": [_msg(1, None, {**USER, "timestamp": 10**19}), _msg(2, "e1", {**ASSISTANT, "timestamp": -1e20}),
                   _msg(3, "e2", {**USER, "timestamp": 1e308}), '{"type":"message","id":"e4","parentId":"e3","timestamp":"+275760-09-13T00:00:00.001Z","message":{"role":"user","content":"x","timestamp":"0000-00-00"}}'],
    "text_numbers": [_msg(1, None, {**USER, "content": [{"type": "text", "text": 12345}]}),
                     _msg(2, "e1", {**ASSISTANT, "content": [{"type": "text", "text": 3.5}, {"type": "thinking", "thinking": 7}]})],
    "content_scalars": [_msg(1, None, {**USER, "content": 1.5}), _msg(2, "e1", {**ASSISTANT, "content": True}),
                        _msg(3, "e2", {**USER, "content": False})],
    "toolcall_dict_id": [_msg(1, None, USER), _msg(2, "e1", {**ASSISTANT, "stopReason": "toolUse", "content": [
        {"type": "toolCall", "id": {"x": 1}, "name": ["bash"], "arguments": 5}]}),
        _msg(3, "e2", {"role": "toolResult", "toolCallId": {"x": 1}, "toolName": "bash", "content": [{"type": "text", "text": "r"}], "isError": False, "timestamp": 3})],
    "usage_huge": [_msg(1, None, USER), _msg(2, "e1", {**ASSISTANT, "usage": {"input": 2**70, "output": 2**70, "cacheRead": -2**70,
                                                                          "cacheWrite": 1e308, "totalTokens": 2**70, "cost": {"total": 1e308}}})],
    "odd_entries": ['{"type":"branch_summary","id":"b","parentId":null,"summary":{"x":1},"fromId":3}',
                    '{"type":"custom_message","id":"c","parentId":"b","content":5,"customType":7,"display":"x"}',
                    '{"type":"compaction","id":"k","parentId":"c","firstKeptEntryId":{"a":1},"summary":7,"tokensBefore":"x"}',
                    '{"type":"model_change","id":"m","parentId":"k","provider":{"a":1},"modelId":[1]}'],
}


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / f"{name}.jsonl"
    path.write_text(HEADER + "\n" + "\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    return path


def _cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ds4tui.cli", *args], capture_output=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=ROOT, check=False)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_json_reads_without_a_traceback(name: str, tmp_path: Path) -> None:
    path = _write(tmp_path, name, HOSTILE[name])
    session = read_session(path)
    ctx = build_context(session)
    json.dumps(ctx.to_json(), ensure_ascii=False).encode("utf-8")  # printable as UTF-8
    assert session.diagnostics.total >= 1  # every oddity is counted, never silent
    if name == "deep":
        assert session.diagnostics.count(Problem.TOO_DEEP) == 1


@pytest.mark.slow
@pytest.mark.parametrize("command", [["map", "--json"], ["map"], ["context"], ["plan", "--json"], ["cache", "--json"], ["retrieve", "--json"]])
def test_read_commands_exit_0_or_2_on_hostile_files(command: list[str], tmp_path: Path) -> None:
    env = {"DS4TUI_STATE_DIR": str(tmp_path / "state")}
    for name in ("surrogate", "deep", "timestamps", "content_scalars", "toolcall_dict_id", "usage_huge", "odd_entries"):
        out = _cli(*command, str(_write(tmp_path, name, HOSTILE[name])), env=env)
        assert out.returncode in (0, 2) and b"Traceback" not in out.stderr, (name, out.stderr[-600:])


def test_depth_check_ignores_brackets_in_strings() -> None:
    assert json_depth(b'{"a":"[[[[[[[[","b":[1]}' + b" " * 10) <= MAX_DEPTH
    deep_in_string = b'{"a":"' + b"[" * 1000 + b'\\"' + b'"}'
    assert json_depth(deep_in_string) == 1
    assert json_depth(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)) > MAX_DEPTH


def test_oversized_line_is_skipped_with_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with path.open("wb") as f:
        f.write(HEADER.encode() + b"\n")
        f.write(b'{"type":"message","id":"e1","parentId":null,"message":{"role":"user","content":"')
        f.write(b"a" * (48 << 20))
        f.write(b'"}}\n')
        f.write(_msg(2, None, USER).encode() + b"\n")
    # VmHWM: the child's own peak (ru_maxrss would carry the parent's peak across fork + exec)
    code = ("import re,sys; from ds4sessions.agents.pi import read_session; s=read_session(sys.argv[1]);"
            "hwm=re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1);"
            "print(len(s.entries), s.diagnostics.count('oversized'), hwm)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True, timeout=120)
    entries, oversized, rss_kb = map(int, out.stdout.split())
    assert (entries, oversized) == (1, 1)
    assert rss_kb < 200_000  # the 48 MB line is never held: the cap is 32 MiB
    tailer = Tailer(path)
    lines = tailer.poll().lines
    assert [len(line.raw) for line in lines][1] == 80 and lines[2].offset == path.stat().st_size - len(lines[2].raw) - 1


@pytest.mark.parametrize("kind", ["fifo", "device", "socket"])
def test_non_regular_files_are_refused_by_name(kind: str, tmp_path: Path) -> None:
    if kind == "fifo":
        path = tmp_path / "s.jsonl"
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    else:
        path = tmp_path / "s.jsonl"
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
    with pytest.raises(NotRegularFile):
        read_session(path)
    with pytest.raises(NotRegularFile):
        Tailer(path).poll()
    with pytest.raises(WriteRefused):
        pin(path, "abc")
    out = _cli("map", str(path), timeout=60)
    assert out.returncode == 2 and b"not a session file; refused" in out.stderr and out.stderr.count(b"\n") == 1


# --- journal -----------------------------------------------------------------------------------


def test_read_only_journal_means_nothing_is_written(tmp_path: Path) -> None:
    path = copy_old(SAMPLE, tmp_path)
    journal = Journal(tmp_path / "state" / "journal.sqlite")
    before = path.read_bytes()
    os.chmod(journal.path, 0o400)
    if os.access(journal.path, os.W_OK):
        pytest.skip("running as a user that ignores file modes")
    with pytest.raises(WriteRefused) as err:
        pin(path, read_state(path).session.entries[2].id, journal=journal, force=True)
    assert err.value.code == "journal" and path.read_bytes() == before


def test_corrupt_journal_has_a_message_and_a_reset(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "journal.sqlite").write_bytes(b"this is not a database" * 100)
    with pytest.raises(JournalError) as err:
        Journal(state / "journal.sqlite")
    assert err.value.corrupt and "ds4tui journal reset" in str(err.value)
    out = _cli("journal", "list", env={"DS4TUI_STATE_DIR": str(state)})
    assert out.returncode == 2 and b"corrupt" in out.stderr and out.stderr.count(b"\n") == 1
    out = _cli("journal", "reset", env={"DS4TUI_STATE_DIR": str(state)})
    assert out.returncode == 0 and b"broken-" in out.stdout
    assert Journal(state / "journal.sqlite").list() == []


def test_unwritable_state_dir_is_one_line(tmp_path: Path) -> None:
    path = copy_old(SAMPLE, tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = _cli("pin", str(path), read_state(path).session.entries[2].id, "--force",
               env={"DS4TUI_STATE_DIR": str(blocker / "state")})
    assert out.returncode == 2 and b"Traceback" not in out.stderr and out.stderr.count(b"\n") == 1
    assert b"journal" in out.stderr


def test_read_only_session_file_is_refused(tmp_path: Path) -> None:
    path = copy_old(SAMPLE, tmp_path)
    os.chmod(path, 0o444)
    if os.access(path, os.W_OK):
        pytest.skip("running as a user that ignores file modes")
    with pytest.raises(WriteRefused) as err:
        pin(path, read_state(path).session.entries[2].id, force=True)
    assert err.value.code == "read_only"


def test_undo_refuses_after_a_relabel_and_after_a_replace(tmp_path: Path) -> None:
    path = copy_old(SAMPLE, tmp_path)
    journal = Journal(tmp_path / "state" / "journal.sqlite")
    target = read_state(path).session.entries[2].id
    first = pin(path, target, journal=journal, force=True)
    # another writer relabels the same entry
    leaf = read_state(path).leaf_id
    with path.open("ab") as f:
        f.write((json.dumps({"type": "label", "id": "0ther0ne", "parentId": leaf, "timestamp": "2026-12-02T00:00:00.000Z",
                             "targetId": target, "label": "theirs"}) + "\n").encode())
    with pytest.raises(WriteRefused) as err:
        undo(first.journal_id, journal=journal, force=True)
    assert "relabelled" in str(err.value) and read_session(path).labels[target] == "theirs"
    # the file is replaced by another one: the journaled bytes are gone
    second = pin(path, read_state(path).session.entries[3].id, journal=journal, force=True)
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(SAMPLE.read_bytes())
    os.replace(replacement, path)
    with pytest.raises(WriteRefused) as err:
        undo(second.journal_id, journal=journal, force=True)
    assert "replaced" in str(err.value) and path.read_bytes() == SAMPLE.read_bytes()


# --- permissions, channel, heartbeat, redaction ------------------------------------------------------


def test_state_is_private_whatever_the_umask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = os.umask(0o022)
    try:
        from ds4sessions.derive.retrieval_index import RetrievalIndex, session_db_path

        monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))
        journal = Journal()
        db = session_db_path(SAMPLE)
        index = RetrievalIndex(db)
        index.close() if hasattr(index, "close") else None
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(os.stat(p).st_mode)  # noqa: E731
    assert mode(tmp_path / "state") == 0o700 and mode(tmp_path / "state" / "retrieval") == 0o700
    assert mode(journal.path) == 0o600 and mode(db.parent) == 0o700
    assert all(mode(p) == 0o600 for p in (tmp_path / "state" / "retrieval").iterdir())


def test_channel_files_refuse_symlinks_and_escapes(tmp_path: Path) -> None:
    from ds4sessions.bridge import channel as bridge

    agent = tmp_path / "agent"
    session = "01a2298b-7440-7087-a742-b3c429074251"
    folder = bridge.channel_dir(session, agent)
    folder.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (folder / "inbox.jsonl").symlink_to(victim)
    with pytest.raises((OSError, ValueError)):
        bridge.submit(session, "pin", {"entryId": "e1"}, None, agent=agent)
    assert victim.read_text() == "keep"
    (folder / "inbox.jsonl").unlink()
    (folder / "inbox.jsonl").symlink_to(folder / "outbox.jsonl")  # inside the folder: O_NOFOLLOW refuses
    (folder / "outbox.jsonl").write_text("")
    with pytest.raises(OSError):
        bridge.submit(session, "pin", {"entryId": "e1"}, None, agent=agent)
    assert (folder / "outbox.jsonl").read_text() == ""
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    with pytest.raises(ValueError):
        open_in(folder, "../victim", os.O_RDONLY)


def test_heartbeat_from_the_future_or_pid_1_is_not_live(tmp_path: Path) -> None:
    from ds4sessions.bridge import channel as bridge

    agent = tmp_path / "agent"
    session = "01a2298b-7440-7087-a742-b3c429074251"
    folder = bridge.channel_dir(session, agent)
    folder.mkdir(parents=True)
    import time

    for pid, offset in ((1, 0.0), (os.getpid(), 3600.0), (os.getpid(), 0.0)):
        (folder / "heartbeat.json").write_text(json.dumps({"v": 1, "pid": pid, "sessionId": session,
                                                           "timeMs": int((time.time() + offset) * 1000)}))
        assert bridge.status(session, agent).state == "stale", (pid, offset)
    assert pid_is_agent(os.getpid()) is False  # python, not node/pi


def test_secrets_are_redacted() -> None:
    text = redact("POST https://me:sk-live-0123456789abcdef@api.example.com/v1?key=AIzaSECRET&x=1 "
                  "Authorization: Bearer abc.def.0123456789 {'x-api-key': 'k-123'}")
    for secret in ("sk-live", "AIzaSECRET", "abc.def", "k-123", "me:"):
        assert secret not in text
    assert "api.example.com/v1?key=***&x=1" in text


def test_compaction_errors_redact_the_base_url() -> None:
    from ds4sessions.steering.compaction import CompactionFailed

    assert "secret" not in str(CompactionFailed("request to https://u:secret@h/v1?api_key=secret failed"))


def test_sessions_listing_skips_a_fifo_by_name(tmp_path: Path) -> None:
    folder = tmp_path / "sessions" / "--x--"
    folder.mkdir(parents=True)
    (folder / "ok.jsonl").write_bytes(SAMPLE.read_bytes())
    os.mkfifo(folder / "fifo.jsonl")
    out = _cli("sessions", env={"PI_CODING_AGENT_SESSION_DIR": str(tmp_path / "sessions")}, timeout=60)
    assert out.returncode == 0 and b"ok.jsonl" in out.stdout
    assert b"fifo.jsonl" in out.stderr and b"FIFO" in out.stderr


def test_json_depth_of_a_parsed_line_equals_the_depth_on_its_bytes() -> None:
    """A line with more than MAX_DEPTH brackets is measured on its parsed value (orjson); that
    depth equals the one counted on the bytes with strings blanked out, strings full of
    brackets, quotes and backslashes included, on both sides of the limit."""
    import json
    import random

    from ds4sessions.ingest.limits import MAX_DEPTH, _bytes_depth, json_depth

    rng = random.Random(3)

    def nested(depth: int) -> object:
        if depth == 0:
            return rng.choice(["x]{[", "}", 1, None, '\\"[', "a\\\\", "]]]]"])
        kids = [nested(depth - 1)] + [rng.choice(["[[", "}}", 2, '\\\\"]']) for _ in range(rng.randint(0, 2))]
        rng.shuffle(kids)
        return kids if rng.random() < 0.5 else {f"k{i}[": kid for i, kid in enumerate(kids)}

    seen = set()
    for _ in range(400):
        raw = json.dumps(nested(rng.randint(150, 260))).encode()
        assert raw.count(b"[") + raw.count(b"{") > MAX_DEPTH  # the parsed path is taken
        got = json_depth(raw)
        assert min(got, MAX_DEPTH + 1) == min(_bytes_depth(raw, MAX_DEPTH), MAX_DEPTH + 1)
        seen.add(got > MAX_DEPTH)
    assert seen == {True, False}
    # not JSON, or deeper than orjson's own 1,024 levels: measured on the bytes
    assert json_depth(b"[" * 5000 + b"]" * 5000) == MAX_DEPTH + 1
    assert json_depth(b"[" * 300 + b"NaN" + b"]" * 300) == MAX_DEPTH + 1


def test_json_depth_sees_a_deep_value_hidden_by_a_duplicate_key() -> None:
    """orjson keeps the last of duplicate keys, so a deep earlier value is not in the parsed
    value; the stdlib parser still recurses into it. Such a line is measured on its bytes."""
    import json

    from ds4sessions.ingest.limits import MAX_DEPTH, json_depth

    deep = b"[" * 1020 + b"1" + b"]" * 1020
    raw = b'{"type":"session","x":' + deep + b',"x":1}'
    assert json_depth(raw) > MAX_DEPTH
    shallow = b"[" * 150 + b"1" + b"]" * 150
    raw = b'{"a":' + shallow + b',"b":"' + b"[{" * 60 + b'","a":' + shallow + b"}"
    assert json_depth(raw) == 151  # a duplicate that drops no deeper value: the exact depth
    raw = b'{"s":"' + b"[" * 250 + b"\\u005b" * 300 + b'","v":[[1]]}'
    assert json.loads(raw)["s"].count("[") == 550
    assert json_depth(raw) == 3  # the parsed path: brackets written as escapes are string characters


def test_a_line_measured_on_its_parse_is_parsed_once_and_read_as_the_stdlib_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reader reuses the parse the depth bound made of a line with more than MAX_DEPTH
    brackets (one parse per line, not two; with the C scan the bound parses nothing), and the
    entries and diagnostics are those a reader
    that parses every line with the stdlib gets; lines whose parse cannot be trusted or made
    (a duplicate key, a lone surrogate, NaN, invalid UTF-8) still take the general parse."""
    import json

    import ds4sessions.agents.pi.reader as reader_module
    import ds4sessions.ingest.limits as limits
    from ds4sessions.agents.pi.reader import PiSessionReader

    def message(i: int, text: str) -> bytes:
        return json.dumps({
            "type": "message", "id": f"m{i}", "parentId": f"m{i - 1}" if i else None, "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1767225600000 + i},
        }).encode()

    source = "def f(x):\n    return [x[i] for i in range(len(x))] + [{'a': [1]}]\n" * 20  # 100 brackets
    lines = [json.dumps({"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}).encode()]
    lines += [message(i, source * (3 + i % 3)) for i in range(6)]  # six plain large lines
    lines.append(b'{"type":"message","id":"m6","parentId":"m5","timestamp":"x","message":{"role":"user","content":"'
                 + b"[" * 300 + b'","content":"' + b"[" * 300 + b'"}}')  # a duplicate key: not trusted
    lines.append(message(7, "\ud800" + "[" * 300))  # a lone surrogate escape: orjson refuses it
    lines.append(message(8, "[" * 300)[:-2] + b',"n":NaN}}')  # NaN: refused by both, malformed
    lines.append(message(9, "caf\xe9 " + "{" * 300).replace(b"\\u00e9", "\xe9".encode()))  # UTF-8 é: parsed once
    lines.append(message(10, "caf\xe9 " + "{" * 300).replace(b"\\u00e9", b"\xff"))  # invalid UTF-8
    assert all(line.count(b"[") + line.count(b"{") > limits.MAX_DEPTH for line in lines[1:])

    def read() -> PiSessionReader:
        reader = PiSessionReader(None)
        offset = 0
        for no, raw in enumerate(lines, 1):
            reader.feed([(no, offset, raw)])
            offset += len(raw) + 1
        return reader

    parses: list[object] = []

    def counting(real):  # type: ignore[no-untyped-def]
        def loads(data):  # type: ignore[no-untyped-def]
            parses.append(data)
            return real(data)
        return loads

    monkeypatch.setattr(limits, "_orjson_loads", counting(limits._orjson_loads))
    monkeypatch.setattr(reader_module, "_fast_loads", counting(reader_module._fast_loads))
    fast = read()
    if limits._c_bytes_depth() is not None:
        # the depth bound scans the bytes in C and parses nothing: every line is parsed once,
        # by the reader
        assert len(parses) == 1 + 6 + 1 + 4
    else:
        # header 1, plain 6 × 1, é 1; duplicate key, surrogate, NaN, invalid UTF-8: 2 each
        assert len(parses) == 1 + 6 + 1 + 4 * 2
    # the stdlib route (no orjson at all) reads the same entries and diagnostics
    def refuse(data: object) -> object:
        raise ValueError("no orjson")

    monkeypatch.setattr(limits, "_orjson_loads", refuse)
    monkeypatch.setattr(reader_module, "_fast_loads", None)
    slow = read()
    assert len(fast.entries) == 10 and [(e.id, e.raw) for e in fast.entries] == [(e.id, e.raw) for e in slow.entries]
    assert [(d.kind, d.line_no, d.message) for d in fast.diagnostics.items] == [(d.kind, d.line_no, d.message) for d in slow.diagnostics.items]
