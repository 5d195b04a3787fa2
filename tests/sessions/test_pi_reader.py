"""The Pi session reader: incremental feeding, header rules, migration, diagnostics (Pi format §3-§4, §8, §11)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ds4sessions.ingest.diagnostics import Problem
from ds4sessions.agents.pi import PiSessionReader, build_context, read_session
from ds4sessions.agents.pi.migrate import v1_entry_id
from tests.conftest import FIXTURES

SAMPLE_01 = FIXTURES / "pi" / "01-tools-and-image.jsonl"
HEADER = {"type": "session", "version": 3, "id": "s-1", "timestamp": "2026-01-10T09:00:00.000Z", "cwd": "/tmp/p"}


def _msg(entry_id: str, parent: str | None, role: str = "user", text: str = "hi", **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1768035601000}
    if role == "assistant":
        message.update(provider="anthropic", model="claude-sonnet-4-5", stopReason="stop")
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-10T09:00:01.000Z",
            "message": message, **extra}


def _lines(*objects: Any) -> bytes:
    return b"".join((o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n" for o in objects)


def _write(tmp_path: Path, data: bytes, name: str = "s.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _split(data: bytes) -> list[tuple[int, int, bytes]]:
    """Complete lines as the tailer delivers them: (line_no, offset, bytes without newline)."""
    out, offset = [], 0
    for line_no, line in enumerate(data.split(b"\n")[:-1], start=1):
        out.append((line_no, offset, line))
        offset += len(line) + 1
    return out


def test_entries_keep_position_and_raw() -> None:
    session = read_session(SAMPLE_01)
    data = SAMPLE_01.read_bytes()
    assert session.status == "session"
    assert session.session_id == "019cadb5-6afd-7157-b0b4-7bc363b502d2"
    assert session.cwd == "/home/dev/projects/widget-service"
    assert len(session.entries) == 22
    first = session.entries[0]
    assert (first.type, first.id, first.parent_id, first.line_no) == ("model_change", "1a860668", None, 2)
    for entry in session.entries:
        line = data[entry.offset : entry.offset + entry.length]
        assert line.endswith(b"\n")
        assert json.loads(line) == entry.raw
    assert session.entries[-1].offset + session.entries[-1].length == len(data) == session.end_offset
    assert session.leaf_id == "7060d0dd"
    assert session.session_name == "Fix 404 for unknown widget ids"
    assert [(e.type, e.role) for e in session.entries[:4]] == [
        ("model_change", None), ("thinking_level_change", None), ("message", "system"), ("message", "user")
    ]
    assert session.by_id["5e3b26a7"].message["timestamp"] == session.by_id["5e3b26a7"].raw["message"]["timestamp"]
    assert session.entries[0].message is None
    assert session.diagnostics.total == 0
    assert session.diagnostics.summary() == "no problems"


def test_incremental_feed_equals_whole_read() -> None:
    """Feeding the lines in several batches gives the same state and context as one read."""
    data = SAMPLE_01.read_bytes()
    lines = _split(data)
    reader = PiSessionReader()
    new_counts = [len(reader.feed(lines[i : i + 5])) for i in range(0, len(lines), 5)]
    assert sum(new_counts) == 22  # the header is no entry; nothing is read twice
    whole = read_session(SAMPLE_01)
    assert [e.raw for e in reader.entries] == [e.raw for e in whole.entries]
    assert reader.leaf_id == whole.leaf_id
    assert build_context(reader).to_json() == build_context(whole).to_json()


def test_feed_reads_only_new_lines() -> None:
    """A feed of one line touches only that line: earlier entries are the same objects."""
    lines = _split(SAMPLE_01.read_bytes())
    reader = PiSessionReader()
    reader.feed(lines[:-1])
    before = list(reader.entries)
    new = reader.feed(lines[-1:])
    assert [e.id for e in new] == ["7060d0dd"]
    assert all(a is b for a, b in zip(before, reader.entries))
    assert reader.leaf_id == "7060d0dd"


def test_pending_tail_then_completed_line() -> None:
    lines = _split(SAMPLE_01.read_bytes())
    reader = PiSessionReader()
    reader.feed(lines[:-1])
    reader.set_pending_tail(40)
    pending = reader.diagnostics.pending
    assert pending is not None
    assert (pending.line_no, pending.offset, pending.length) == (23, lines[-1][1], 40)
    assert "pending: partial line 23 (40 bytes" in reader.diagnostics.summary()
    assert reader.diagnostics.total == 0  # pending is not a problem
    reader.feed([])  # a poll without complete lines keeps the pending tail
    assert reader.diagnostics.pending == pending
    reader.feed(lines[-1:])
    assert reader.diagnostics.pending is None
    reader.set_pending_tail(12)
    reader.set_pending_tail(0)
    assert reader.diagnostics.pending is None


def test_crlf_and_blank_lines(tmp_path: Path) -> None:
    data = _lines(HEADER, _msg("a1", None)).replace(b"\n", b"\r\n") + b"\n  \n" + _lines(_msg("a2", "a1"))
    session = read_session(_write(tmp_path, data))
    assert [e.id for e in session.entries] == ["a1", "a2"]
    assert session.diagnostics.total == 0


def test_bom_is_reported_and_stripped(tmp_path: Path) -> None:
    session = read_session(_write(tmp_path, b"\xef\xbb\xbf" + _lines(HEADER, _msg("a1", None))))
    assert session.status == "session"
    assert [e.id for e in session.entries] == ["a1"]
    [bom] = session.diagnostics.of_kind(Problem.BOM)
    assert bom.line_no == 1 and bom.offset == 0
    assert "Pi itself rejects this file" in bom.message
    assert session.entries[0].offset == len(b"\xef\xbb\xbf") + len(json.dumps(HEADER)) + 1


def test_invalid_utf8_is_decoded_with_replacement(tmp_path: Path) -> None:
    bad = json.dumps(_msg("a1", None, text="caf@")).encode().replace(b"@", b"\xff")
    session = read_session(_write(tmp_path, _lines(HEADER, bad)))
    assert session.entries[0].message["content"][0]["text"] == "caf\ufffd"
    [diag] = session.diagnostics.of_kind(Problem.INVALID_UTF8)
    assert diag.line_no == 2


def test_malformed_and_non_object_lines(tmp_path: Path) -> None:
    data = _lines(HEADER, b'{"type":"message", broken', b"[1, 2]", b"null", b"NaN", _msg("a1", None))
    session = read_session(_write(tmp_path, data))
    d = session.diagnostics
    assert [x.line_no for x in d.of_kind(Problem.MALFORMED)] == [2, 5]  # NaN is not JSON (JS rejects it)
    assert [x.line_no for x in d.of_kind(Problem.NON_OBJECT)] == [3, 4]
    assert d.of_kind(Problem.MALFORMED)[0].excerpt == '{"type":"message", broken'
    assert [e.id for e in session.entries] == ["a1"]
    assert d.summary().splitlines() == ["malformed: 2 (lines 2, 5)", "non_object: 2 (lines 3, 4)"]


def test_excerpt_is_first_80_chars_shown_literally(tmp_path: Path) -> None:
    line = b'{"x":"' + b"\t" * 100
    session = read_session(_write(tmp_path, _lines(HEADER, line)))
    [diag] = session.diagnostics.of_kind(Problem.MALFORMED)
    assert diag.excerpt == line.decode()[:80]
    assert '\\t\\t' in str(diag)  # control characters stay visible


def test_missing_and_duplicate_ids(tmp_path: Path) -> None:
    no_id = {"type": "custom", "parentId": None, "timestamp": "2026-01-10T09:00:01.000Z", "customType": "x"}
    data = _lines(HEADER, _msg("a1", None, text="first"), no_id, _msg("a1", None, text="second"))
    session = read_session(_write(tmp_path, data))
    assert [e.id for e in session.entries] == ["a1", None, "a1"]
    assert session.by_id["a1"].message["content"][0]["text"] == "second"  # later duplicate wins
    assert [d.line_no for d in session.diagnostics.of_kind(Problem.MISSING_ID)] == [3]
    [dup] = session.diagnostics.of_kind(Problem.DUPLICATE_ID)
    assert dup.line_no == 4 and "line 2" in dup.message


def test_missing_parent_and_late_parent(tmp_path: Path) -> None:
    data = _lines(HEADER, _msg("a2", "a1"), _msg("a3", "zz"), _msg("a1", None))
    session = read_session(_write(tmp_path, data))
    # a1 appeared after its child: resolved; zz never appears
    assert session.diagnostics.count(Problem.MISSING_PARENT) == 1
    [orphan] = session.diagnostics.of_kind(Problem.MISSING_PARENT)
    assert orphan.line_no == 3 and "zz" in orphan.message
    # the leaf's path ends at the root; a3's parent is missing, so its path is just a3
    assert build_context(session).branch_entry_ids == ["a1"]
    assert build_context(session, "a3").branch_entry_ids == ["a3"]
    assert build_context(session, "a2").branch_entry_ids == ["a1", "a2"]


def test_extra_header_is_ignored(tmp_path: Path) -> None:
    session = read_session(_write(tmp_path, _lines(HEADER, _msg("a1", None), {**HEADER, "id": "other"})))
    assert session.session_id == "s-1"
    assert [e.id for e in session.entries] == ["a1"]
    assert session.diagnostics.count(Problem.EXTRA_HEADER) == 1


def test_malformed_lines_before_header_are_skipped(tmp_path: Path) -> None:
    session = read_session(_write(tmp_path, b"\n garbage\n" + _lines(HEADER, _msg("a1", None))))
    assert session.status == "session"
    assert session.diagnostics.count(Problem.MALFORMED) == 1
    assert session.diagnostics.count(Problem.NOT_A_SESSION) == 0


def test_header_without_string_id_is_not_a_session(tmp_path: Path) -> None:
    session = read_session(_write(tmp_path, _lines({**HEADER, "id": 7}, _msg("a1", None))))
    assert session.status == "not_a_session"
    assert session.header is None and session.session_id is None
    [diag] = session.diagnostics.of_kind(Problem.NOT_A_SESSION)
    assert diag.line_no == 1


def test_empty_file_is_an_empty_session(tmp_path: Path) -> None:
    session = read_session(_write(tmp_path, b""))
    assert session.status == "empty"
    assert session.entries == [] and session.leaf_id is None
    assert session.diagnostics.total == 0
    context = build_context(session)
    assert context.messages == [] and context.leaf_id is None and context.thinking_level == "off"


def test_labels_and_session_name_resolution(tmp_path: Path) -> None:
    def label(entry_id: str, parent: str, target: str, text: str | None) -> dict[str, Any]:
        entry = {"type": "label", "id": entry_id, "parentId": parent, "timestamp": "2026-01-10T09:00:02.000Z",
                 "targetId": target}
        return entry if text is None else {**entry, "label": text}

    def info(entry_id: str, parent: str, name: str) -> dict[str, Any]:
        return {"type": "session_info", "id": entry_id, "parentId": parent,
                "timestamp": "2026-01-10T09:00:02.000Z", "name": name}

    data = _lines(HEADER, _msg("a1", None), label("l1", "a1", "a1", "one"), label("l2", "l1", "a1", "two"),
                  label("l3", "l2", "zz", "x"), label("l4", "l3", "zz", None), label("l5", "l4", "a1", ""),
                  label("l6", "l5", "l1", "kept"), info("i1", "l6", "  Name  "))
    session = read_session(_write(tmp_path, data))
    assert session.labels == {"l1": "kept"}
    assert session.session_name == "Name"
    assert session.leaf_id == "i1"
    more = _lines(info("i2", "i1", ""))
    reader = PiSessionReader()
    reader.feed(_split(data + more))
    assert reader.session_name is None  # empty name clears (Pi session format §5, §8)


def test_v1_migration_is_deterministic_and_in_memory(shared_dir: Path) -> None:
    path = shared_dir / "sessions-pi" / "08-legacy-v1.jsonl"
    before = path.read_bytes()
    session = read_session(path)
    again = read_session(path)
    assert path.read_bytes() == before
    assert session.version == 1 and session.migrated
    assert "version" not in session.header  # the header is kept as stored
    assert session.parent_session.endswith("0b7e5d1c-92aa-4c6f-8f0e-5d1a7c3e9b20.jsonl")  # v1 branchedFrom
    ids = [e.id for e in session.entries]
    assert ids == [e.id for e in again.entries]
    assert ids == [v1_entry_id(n) for n in range(2, 15)]
    assert [e.parent_id for e in session.entries] == [None, *ids[:-1]]
    compaction = session.by_id[v1_entry_id(11)]
    assert compaction.raw["firstKeptEntryId"] == v1_entry_id(7)  # firstKeptEntryIndex 6, header = 0
    assert "firstKeptEntryIndex" not in compaction.raw
    assert session.by_id[v1_entry_id(10)].role == "custom"  # hookMessage renamed (v2 → v3)


def test_v1_incremental_equals_whole(shared_dir: Path) -> None:
    path = shared_dir / "sessions-pi" / "08-legacy-v1.jsonl"
    lines = _split(path.read_bytes())
    reader = PiSessionReader()
    for line in lines:
        reader.feed([line])
    assert build_context(reader).to_json() == build_context(read_session(path)).to_json()


def test_v2_renames_hook_message_only(tmp_path: Path) -> None:
    hook = _msg("h1", None)
    hook["message"] = {"role": "hookMessage", "customType": "t", "content": "x", "display": True, "timestamp": 1}
    session = read_session(_write(tmp_path, _lines({**HEADER, "version": 2}, hook)))
    assert session.entries[0].id == "h1"
    assert session.entries[0].role == "custom"
    assert build_context(session).messages[0]["role"] == "custom"


def test_reading_never_writes(tmp_path: Path, shared_dir: Path) -> None:
    """A torn last line stays torn: Pi would append a newline when it opens the file; we never do."""
    path = _write(tmp_path, (shared_dir / "sessions-pi" / "09-partial-last-line.jsonl").read_bytes())
    os.chmod(path, 0o444)
    stat = path.stat()
    session = read_session(path)
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert session.diagnostics.count(Problem.PARTIAL_LAST_LINE) == 1
    assert session.leaf_id == "92227d5c"


def test_cycle_and_unknown_leaf_warnings(tmp_path: Path) -> None:
    data = _lines(HEADER, _msg("a1", "a2"), _msg("a2", "a1", role="assistant"))
    session = read_session(_write(tmp_path, data))
    context = build_context(session)
    assert context.branch_entry_ids == ["a1", "a2"]
    assert [w.kind for w in context.warnings] == ["cycle"]
    fallback = build_context(session, "nope")
    assert fallback.leaf_id == "a2"
    assert [w.kind for w in fallback.warnings] == ["unknown_leaf", "cycle"]


def test_tool_pairing_warning(tmp_path: Path) -> None:
    call = _msg("a2", "a1", role="assistant")
    call["message"]["content"] = [{"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {}}]
    result = _msg("a4", "a3")
    result["message"] = {"role": "toolResult", "toolCallId": "call_1", "toolName": "bash", "content": [],
                         "isError": False, "timestamp": 2}
    data = _lines(HEADER, _msg("a1", None), call, _msg("a3", "a2", text="interrupting"), result)
    context = build_context(read_session(_write(tmp_path, data)))
    assert [m["role"] for m in context.messages] == ["user", "assistant", "user", "toolResult"]  # as Pi sends
    [warning] = context.warnings
    assert warning.kind == "tool_pairing" and warning.entry_ids == ("a4",)


def test_null_content_becomes_empty(tmp_path: Path) -> None:
    """Pi 1.x turns null content into "" (user) or [] (assistant) in built context."""
    user, assistant = _msg("a1", None), _msg("a2", "a1", role="assistant")
    user["message"]["content"] = None
    assistant["message"]["content"] = None
    session = read_session(_write(tmp_path, _lines(HEADER, user, assistant)))
    messages = build_context(session).messages
    assert [m["content"] for m in messages] == ["", []]
    assert session.entries[0].message["content"] is None


def test_unterminated_only_line_with_bom_is_the_header(tmp_path: Path) -> None:
    session = read_session(_write(tmp_path, b"\xef\xbb\xbf" + json.dumps(HEADER).encode()))
    assert session.status == "session"
    assert session.diagnostics.count(Problem.BOM) == 1
    assert session.diagnostics.count(Problem.PARTIAL_LAST_LINE) == 0


def test_a_deep_unterminated_last_line_is_too_deep_not_torn(tmp_path: Path) -> None:
    """An unterminated last line that is nested past the depth bound is said to be too deep (as
    the same line with a newline would be), not an interrupted writer's partial line."""
    deep = "[" * 100_000 + "]" * 100_000
    data = (json.dumps(HEADER) + "\n").encode() + b'{"type":"message","id":"d1","parentId":null,"x":' + deep.encode() + b"}"
    session = read_session(_write(tmp_path, data))
    assert session.diagnostics.count(Problem.TOO_DEEP) == 1
    assert session.diagnostics.count(Problem.PARTIAL_LAST_LINE) == 0
