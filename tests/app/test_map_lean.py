"""`ds4tui map --json` reads through the lean path (`open_map_snapshot`: `SlimReader` stand-ins,
cl100k-only counting, the file streamed) and must print exactly what the full path
(`open_snapshot`, the TUI's reader) gives: issue 14.

Compared byte for byte (`dumps_map(map_json(...))`, chars-v1 and cl100k) on every shared Pi
sample and bad input (skipped with the shared folder's reason when it is absent) and, always, on
the shipped fixture, generated synthetic sessions and hand-made sessions that reach each rule of
the stand-ins: previews cut at a space, image-only prompts, string and null content, context
edits of a slimmed message, duplicate ids, compactions before the first measurement (chars-v1
re-read from the file), custom messages, bash runs, v2 `hookMessage`, a torn last line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ds4sessions.agents.pi.discovery import load_model_table
from ds4sessions.agents.pi.slim import SlimReader
from ds4sessions.agents.pi.live import open_map_snapshot, open_snapshot
from ds4tui.mapdata import dumps_map, map_json

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from bench_planner import synthetic_session  # noqa: E402


def _both(path: Path, exact: bool) -> tuple[str, str]:
    models = load_model_table()
    full = dumps_map(map_json(open_snapshot(path, models, exact=exact)))
    lean = dumps_map(map_json(open_map_snapshot(path, models, exact=exact)))
    return full, lean


def _assert_same(path: Path) -> None:
    for exact in (False, True):
        full, lean = _both(path, exact)
        assert lean == full, f"{path.name} ({'cl100k' if exact else 'chars-v1'}): lean map differs"


def _shared_files(sub: str) -> list[str]:
    from tests.conftest import SHARED

    if SHARED is None:
        return []
    return sorted(p.name for p in (SHARED / sub).glob("*.jsonl"))


@pytest.mark.parametrize("name", _shared_files("sessions-pi") or ["(shared folder absent)"])
def test_lean_map_equals_full_on_shared_pi_samples(name: str, shared_dir: Path) -> None:
    _assert_same(shared_dir / "sessions-pi" / name)


@pytest.mark.parametrize("name", _shared_files("bad-inputs") or ["(shared folder absent)"])
def test_lean_map_equals_full_on_bad_inputs(name: str, shared_dir: Path) -> None:
    _assert_same(shared_dir / "bad-inputs" / name)


def test_lean_map_equals_full_on_the_fixture(sample01: Path) -> None:
    _assert_same(sample01)


@pytest.mark.parametrize("turns", [1, 7, 300])
def test_lean_map_equals_full_on_synthetic_sessions(turns: int, tmp_path: Path) -> None:
    path = tmp_path / f"synthetic-{turns}.jsonl"
    synthetic_session(path, turns)
    _assert_same(path)


# --- hand-made sessions --------------------------------------------------------------------

TS = "2026-01-01T00:00:00.000Z"


def _write(path: Path, entries: list[dict[str, Any]], header: dict[str, Any] | None = None, tail: str = "") -> Path:
    head = header or {"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/tmp"}
    path.write_text("".join(json.dumps(e) + "\n" for e in [head, *entries]) + tail, encoding="utf-8")
    return path


def _msg(eid: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": TS, "message": message}


def _reply(text: str, t: int, usage: int = 5000, calls: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    content: list[dict[str, Any]] = [{"type": "thinking", "thinking": "hmm " * 10}, {"type": "text", "text": text}]
    content += [{"type": "toolCall", "id": c, "name": "bash", "arguments": {"command": f"ls {c}", "n": 1.5}} for c in calls]
    return {"role": "assistant", "content": content, "provider": "anthropic", "model": "claude-sonnet-4-5",
            "usage": {"input": 3, "output": 40, "cacheRead": usage, "cacheWrite": 60, "totalTokens": usage + 103,
                      "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.3}},
            "stopReason": "toolUse" if calls else "stop", "timestamp": t}


def _hand_made(tmp_path: Path) -> list[Path]:
    long_prompt = ("word " * 15 + "x" * 5 + " tail") * 3  # a space at character 80 of the preview
    exact80 = "a" * 80 + " b"
    sessions: dict[str, list[dict[str, Any]]] = {
        "previews": [
            _msg("u1", None, {"role": "user", "content": long_prompt, "timestamp": 1}),
            _msg("a1", "u1", _reply("ok", 2, calls=["c1", "c2"])),
            _msg("r1", "a1", {"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "isError": False,
                              "content": [{"type": "text", "text": "out\n" * 40}], "details": {"diff": "x" * 500},
                              "timestamp": 3}),
            _msg("r2", "r1", {"role": "toolResult", "toolCallId": "c2", "toolName": "bash",
                              "content": [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}], "timestamp": 4}),
            _msg("u2", "r2", {"role": "user", "content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}], "timestamp": 5}),
            _msg("u3", "u2", {"role": "user", "content": [{"type": "text", "text": exact80}, {"type": "text", "text": "  more\t\n"}], "timestamp": 6}),
            _msg("u4", "u3", {"role": "user", "content": "", "timestamp": 7}),
            _msg("a4", "u4", {"role": "assistant", "content": "a plain string reply", "usage": {"input": 1}, "stopReason": "stop", "timestamp": 8}),
            _msg("a5", "a4", {"role": "assistant", "content": None, "stopReason": "error", "timestamp": 9}),
            _msg("b1", "a5", {"role": "bashExecution", "command": "ls", "output": "a\nb", "exitCode": 1, "timestamp": 10}),
            _msg("b2", "b1", {"role": "bashExecution", "command": "secret", "output": "x", "excludeFromContext": True, "timestamp": 11}),
            {"type": "custom_message", "id": "cm", "parentId": "b2", "timestamp": TS, "customType": "note", "content": "hello", "display": True},
            _msg("u5", "cm", {"role": "user", "content": "last", "timestamp": 12}),
        ],
        "edits-and-duplicates": [
            _msg("u1", None, {"role": "user", "content": "first prompt", "timestamp": 1}),
            _msg("a1", "u1", _reply("first answer " * 30, 2)),
            _msg("u2", "a1", {"role": "user", "content": "second prompt", "timestamp": 3}),
            _msg("a2", "u2", _reply("second answer", 4, usage=9000)),
            {"type": "context_edit", "id": "e1", "parentId": "a2", "timestamp": TS, "targetId": "a1",
             "replacement": {"content": [{"type": "text", "text": "short"}]}},
            {"type": "context_edit", "id": "e2", "parentId": "e1", "timestamp": TS, "targetId": "u2", "replacement": None},
            _msg("u3", "e2", {"role": "user", "content": "third", "timestamp": 5}),
            _msg("u3", "u3", {"role": "user", "content": "third again, same id", "timestamp": 6}),
            _msg("a3", "u3", _reply("third answer", 7, usage=12000)),
        ],
        "compaction-before-measurement": [
            _msg("u1", None, {"role": "user", "content": "old prompt " * 50, "timestamp": 1}),
            _msg("a1", "u1", _reply("old answer, cut by the compaction, never counted " * 100, 2, usage=80000)),
            _msg("u2", "a1", {"role": "user", "content": "kept prompt " * 40, "timestamp": 3}),
            _msg("r0", "u2", {"role": "toolResult", "toolCallId": "c0", "toolName": "read",
                              "content": [{"type": "text", "text": "a long kept result\n" * 400}], "timestamp": 3}),
            _msg("a2", "r0", {"role": "assistant", "content": [{"type": "text", "text": "kept, aborted " * 30}],
                              "usage": {"input": 0, "output": 0}, "stopReason": "aborted", "timestamp": 4}),
            {"type": "compaction", "id": "k1", "parentId": "a2", "timestamp": TS, "summary": "summary " * 100,
             "firstKeptEntryId": "u2", "tokensBefore": 90000},
            _msg("u3", "k1", {"role": "user", "content": "after the compaction", "timestamp": 5}),
            _msg("r3", "u3", {"role": "toolResult", "toolCallId": "c3", "toolName": "read",
                              "content": [{"type": "text", "text": "a long fresh result\n" * 400}], "timestamp": 5}),
            _msg("a3", "r3", _reply("fresh answer", 6, usage=337)),  # prompt 400 < chars-v1 before it
            _msg("u4", "a3", {"role": "user", "content": "next", "timestamp": 7}),
            _msg("a4", "u4", _reply("fresh answer 2", 8, usage=1500)),
        ],
    }
    paths = [_write(tmp_path / f"{name}.jsonl", entries) for name, entries in sessions.items()]
    paths.append(_write(tmp_path / "torn.jsonl", sessions["previews"][:4], tail='{"type":"message","id":"z"'))
    paths.append(_write(tmp_path / "whole-tail.jsonl", sessions["previews"][:4], tail=json.dumps(
        _msg("u9", "r1", {"role": "user", "content": "unterminated but whole", "timestamp": 99}))))
    paths.append(_write(
        tmp_path / "v2-hook.jsonl",
        [_msg("u1", None, {"role": "user", "content": "hi", "timestamp": 1}),
         _msg("h1", "u1", {"role": "hookMessage", "customType": "hook", "content": "from a hook " * 20, "timestamp": 2}),
         _msg("a1", "h1", _reply("answer", 3))],
        header={"type": "session", "version": 2, "id": "s", "timestamp": TS, "cwd": "/tmp"},
    ))
    return paths


def test_lean_map_equals_full_on_hand_made_sessions(tmp_path: Path) -> None:
    for path in _hand_made(tmp_path):
        _assert_same(path)


def test_compaction_before_the_measurement_reads_the_kept_messages_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`system_inferred` needs chars-v1 of the context before the first measurement: the kept
    messages from before the compaction are read again from the file; when that is impossible
    (the file changed), the whole snapshot comes from the full path, with the same numbers."""
    path = next(p for p in _hand_made(tmp_path) if p.name == "compaction-before-measurement.jsonl")
    calls: list[str | None] = []
    original = SlimReader.full_message

    def spy(self: SlimReader, slim: Any, entry_id: str | None) -> Any:
        calls.append(entry_id)
        return original(self, slim, entry_id)

    monkeypatch.setattr(SlimReader, "full_message", spy)
    full, lean = _both(path, True)
    assert lean == full and calls == ["u2", "r0", "a2", "u3", "r3"]
    assert json.loads(lean)["systemInferred"] is False  # the stand-ins' own counts would infer one
    monkeypatch.setattr(SlimReader, "full_message", lambda self, slim, entry_id: None)
    full, lean = _both(path, True)
    assert lean == full


def test_lean_snapshot_keeps_no_entries_or_messages(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    synthetic_session(path, 20)
    snap = open_map_snapshot(path, load_model_table(), exact=True)
    assert len(snap.session.entries) == 0 and snap.context.messages == []
    assert len(snap.turns) == 20 and snap.exact is snap.best


def test_long_lines_are_counted_when_a_snapshot_needs_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines over `DEFER_BYTES` are counted only when in the context (read again then); a line
    that no longer matches sends the whole open to the full path, with the same numbers."""
    path = next(p for p in _hand_made(tmp_path) if p.name == "compaction-before-measurement.jsonl")
    offsets: list[int] = []
    original = SlimReader.reread

    def spy(self: SlimReader, slim: Any, offset: int, length: int) -> Any:
        offsets.append(offset)
        return original(self, slim, offset, length)

    monkeypatch.setattr(SlimReader, "reread", spy)
    full, lean = _both(path, True)
    assert lean == full
    lines = path.read_bytes().split(b"\n")
    starts = [sum(len(x) + 1 for x in lines[:i]) for i in range(len(lines))]
    reread = {lines[starts.index(o)].split(b'"id": "')[1][:2] for o in offsets}
    assert reread == {b"u2", b"r0", b"a2", b"u3", b"r3"}  # never a1, the long reply the compaction cut
    monkeypatch.setattr(SlimReader, "reread", lambda self, slim, offset, length: None)
    for exact in (False, True):
        full, lean = _both(path, exact)
        assert lean == full


# --- the two-process read (slim.read_whole_file) ------------------------------------------


def _odd_session(tmp_path: Path) -> Path:
    """A v3 session whose later lines take every route of the reader: blank, malformed,
    non-object, second header, extra keys, wrong-typed fields, a lone surrogate, a missing and
    a duplicate id, a null content, an oversized line (with a small cap), a label and a name."""
    entries = [_msg(f"p{i}", f"p{i - 1}" if i else None, {"role": "user", "content": f"prompt {i} " * 9, "timestamp": i})
               for i in range(30)]
    lines = [json.dumps(e) for e in entries]
    odd = [
        "",
        "{not json",
        "[1, 2]",
        json.dumps({"type": "session", "version": 3, "id": "again"}),
        json.dumps({**_msg("x1", "p29", _reply("extra key", 40)), "extra": 1}),
        json.dumps(_msg("x2", "x1", {"role": "user", "content": [{"type": "text", "text": 12345}], "timestamp": 41})),
        json.dumps(_msg("x3", "x2", {"role": "user", "content": "lone \ud800 surrogate", "timestamp": 42})),
        json.dumps({"type": "message", "parentId": "x3", "timestamp": TS, "message": {"role": "user", "content": "no id"}}),
        json.dumps(_msg("x2", "x3", {"role": "user", "content": "duplicate id", "timestamp": 43})),
        json.dumps(_msg("x4", "x2", {"role": "assistant", "content": None, "stopReason": "error", "timestamp": 44})),
        json.dumps(_msg("x5", "x4", {"role": "user", "content": "y" * 3000, "timestamp": 45})),
        json.dumps({"type": "label", "id": "l1", "parentId": "x5", "timestamp": TS, "targetId": "x1", "label": "here"}),
        json.dumps({"type": "session_info", "id": "n1", "parentId": "l1", "timestamp": TS, "name": " named "}),
        json.dumps(_msg("x6", "n1", _reply("after it all", 46, calls=["c9"]))),
        json.dumps(_msg("x7", "missing", {"role": "user", "content": "orphan", "timestamp": 47})),
    ]
    lines += odd + [json.dumps(_msg(f"q{i}", "x7" if i == 0 else f"q{i - 1}", _reply(f"reply {i}", 50 + i))) for i in range(20)]
    head = json.dumps({"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/tmp"})
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join([head, *lines]) + "\n" + '{"type":"message","id":"torn"', encoding="utf-8")
    return path


@pytest.mark.parametrize("share", [0.1, 0.48, 0.9])
def test_two_process_read_equals_full(share: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the split threshold at 1 byte every v3 file is read by two processes, split at
    another line for each share; the map equals the full read's (which never splits)."""
    from ds4sessions.agents.pi import reader as reader_module
    from ds4sessions.agents.pi import slim
    from ds4sessions.ingest import limits

    for module in (limits, reader_module, slim):
        monkeypatch.setattr(module, "MAX_LINE_BYTES", 2048)
    monkeypatch.setattr(slim, "SPLIT_BYTES", 1)
    monkeypatch.setattr(slim, "CHILD_SHARE", share)
    splits: list[int | None] = []
    original = slim._line_start
    monkeypatch.setattr(slim, "_line_start", lambda *a: splits.append(original(*a)) or splits[-1])
    synthetic = tmp_path / "synthetic-300.jsonl"
    synthetic_session(synthetic, 300)
    for path in [_odd_session(tmp_path), synthetic, *_hand_made(tmp_path)]:
        splits.clear()
        _assert_same(path)
        if path in (synthetic,) or path.name == "odd.jsonl":
            assert len(splits) == 2 and None not in splits  # read by two processes, in both modes


def test_two_process_read_falls_back_when_the_copy_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The forked copy fails (here: it raises before sending anything): this process reads the
    rest itself, with the same numbers."""
    from ds4sessions.agents.pi import slim

    monkeypatch.setattr(slim, "SPLIT_BYTES", 1)

    def boom(*args: Any) -> Any:
        raise RuntimeError("the copy fails")

    monkeypatch.setattr(slim, "_prepare_into", boom)
    _assert_same(_odd_session(tmp_path))
    path = tmp_path / "synthetic-50.jsonl"
    synthetic_session(path, 50)
    _assert_same(path)


def test_two_process_read_without_a_process_or_a_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No process can be forked, or no temporary file made: one process reads, same numbers."""
    import os
    import tempfile

    from ds4sessions.agents.pi import slim

    monkeypatch.setattr(slim, "SPLIT_BYTES", 1)

    def refuse(*args: Any) -> Any:
        raise OSError("no more processes")

    path = _odd_session(tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(os, "fork", refuse)
        _assert_same(path)
    with monkeypatch.context() as patch:
        patch.setattr(tempfile, "TemporaryFile", refuse)
        _assert_same(path)


def test_two_process_read_goes_on_after_a_chunk_that_does_not_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy's records are added a chunk at a time; when a later chunk cannot be read, this
    process reads on from the first line not added, with the same numbers."""
    import pickle

    from ds4sessions.agents.pi import slim

    monkeypatch.setattr(slim, "SPLIT_BYTES", 1)
    monkeypatch.setattr(slim, "CHUNK_LINES", 5)
    loads: list[int] = []
    original = pickle.load

    def flaky(file: Any) -> Any:
        loads.append(1)
        if len(loads) % 3 == 0:
            raise pickle.UnpicklingError("a damaged chunk")
        return original(file)

    monkeypatch.setattr(pickle, "load", flaky)
    path = tmp_path / "synthetic-40.jsonl"
    synthetic_session(path, 40)
    for sample in (_odd_session(tmp_path), path):
        loads.clear()
        _assert_same(sample)
        assert len(loads) >= 3  # a chunk failed in each mode


def _agent_files() -> list[Path]:
    from tests.conftest import FIXTURES, SHARED

    found = sorted((FIXTURES / "claude").rglob("*.jsonl"))[:3] + sorted((FIXTURES / "codex").rglob("rollout-*.jsonl"))[:2]
    found += sorted((FIXTURES / "gemini").rglob("session-*.jsonl"))[:1]
    if SHARED is not None:
        found += sorted((SHARED / "sessions-claude").rglob("*.jsonl"))[:1] + sorted((SHARED / "sessions-codex").rglob("*.jsonl"))[:1]
    return found


@pytest.mark.parametrize("path", _agent_files(), ids=lambda p: p.name[-28:])
@pytest.mark.parametrize("flags", [[], ["--fast"]], ids=["exact", "fast"])
def test_other_agents_map_without_typer_prints_what_the_cli_prints(path: Path, flags: list[str]) -> None:
    """Issue 36: `ds4tui map --json` on a Claude Code / Codex / … file skips Typer
    (`mapjson._agent_map`) and prints the Typer command's bytes, exit status and stderr."""
    import subprocess

    from ds4tui.mapjson import _agent_map_args

    argv = ["map", "--json", *flags, str(path)]
    assert _agent_map_args(argv) is not None
    fast = subprocess.run([sys.executable, "-c", "import sys; from ds4tui.mapjson import main; sys.argv[1:] = "
                           f"{argv!r}; main()"], capture_output=True)
    typer = subprocess.run([sys.executable, "-m", "ds4tui.cli", *argv], capture_output=True)
    assert (fast.returncode, fast.stdout, fast.stderr) == (typer.returncode, typer.stdout, typer.stderr)
    assert fast.returncode == 0 and fast.stdout.startswith(b"{")
