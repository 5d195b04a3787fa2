"""The safe writer: append-only, parent = current leaf, refusals leave the file byte-identical.

Works on copies of Pi-written files in tmp_path (never on the originals). Copies get an mtime in
the past so the "grew in the last few seconds" check does not fire unless a test wants it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ds4sessions.agents.pi import build_context, read_session
from ds4sessions.steering.writer import (
    Expected,
    Journal,
    WriteRefused,
    agent_busy,
    append_entries,
    iso_now,
    new_entry_id,
    open_holders,
    serialize_entry,
    state_dir,
)

ID_RE = re.compile(r"^[0-9a-f]{8}$")
TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def copy_old(src: Path, dst_dir: Path, name: str | None = None) -> Path:
    """Copy `src` into `dst_dir` with an mtime one hour ago."""
    dst = dst_dir / (name or src.name)
    shutil.copyfile(src, dst)
    past = time.time() - 3600
    os.utime(dst, (past, past))
    return dst


def label(target: str, text: str | None = "ds4:pin") -> list[dict]:
    draft = {"type": "label", "targetId": target}
    if text:
        draft["label"] = text
    return [draft]


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Journal:
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))
    return Journal()


def test_append_label_is_byte_identical_prefix_and_child_of_leaf(sample01: Path, tmp_path: Path, journal: Journal) -> None:
    path = copy_old(sample01, tmp_path)
    before = path.read_bytes()
    result = append_entries(path, lambda st: label("5e3b26a7"), action="pin", journal=journal)
    after = path.read_bytes()
    assert after[: len(before)] == before
    assert result.offset == len(before) == 26539
    assert len(after) == len(before) + result.length
    line = after[len(before) :]
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    entry = json.loads(line)
    assert list(entry) == ["type", "id", "parentId", "timestamp", "targetId", "label"]
    assert entry["type"] == "label" and entry["targetId"] == "5e3b26a7" and entry["label"] == "ds4:pin"
    assert entry["parentId"] == "7060d0dd"  # the file's leaf, not the target
    assert ID_RE.match(entry["id"]) and entry["id"] not in read_session(sample01).by_id
    assert TS_RE.match(entry["timestamp"])
    assert result.entry_ids == [entry["id"]]
    assert result.describe() == (
        f"appended label {entry['id']} to {path} at byte 26539 ({result.length} bytes) (journal #{result.journal_id})"
    )
    session = read_session(path)
    assert session.labels["5e3b26a7"] == "ds4:pin" and session.leaf_id == entry["id"]
    # the context is unchanged (a label adds nothing)
    assert build_context(session).messages == build_context(read_session(sample01)).messages


def test_b03_label_parent_is_the_metadata_leaf(shared_dir: Path, tmp_path: Path) -> None:
    """B03: a label on a1000004 gets parentId a1000007 (the last entry) and the context stays."""
    path = copy_old(shared_dir / "bad-inputs" / "B03-metadata-leaf.jsonl", tmp_path)
    before = build_context(read_session(path))
    result = append_entries(path, lambda st: label("a1000004"), action="pin")
    assert result.entries[0]["parentId"] == "a1000007"
    after = build_context(read_session(path))
    assert after.messages == before.messages and len(after.messages) == 2
    assert after.branch_entry_ids == ["a1000001", "a1000002", "a1000007", result.entry_ids[0]]


def test_partial_last_line_refused_and_file_untouched(shared_dir: Path, tmp_path: Path) -> None:
    path = copy_old(shared_dir / "sessions-pi" / "09-partial-last-line.jsonl", tmp_path)
    before = path.read_bytes()
    with pytest.raises(WriteRefused, match="partial line") as err:
        append_entries(path, lambda st: label("5e3b26a7"), action="pin", force=True)
    assert err.value.code == "partial_last_line"
    assert path.read_bytes() == before


def test_changed_since_the_user_looked(sample01: Path, tmp_path: Path) -> None:
    path = copy_old(sample01, tmp_path)
    before = path.read_bytes()
    with pytest.raises(WriteRefused) as err:
        append_entries(path, lambda st: label("5e3b26a7"), action="pin", expected=Expected(size=26000))
    assert err.value.code == "changed" and "26000 → 26539 bytes" in str(err.value)
    with pytest.raises(WriteRefused) as err:
        append_entries(path, lambda st: label("5e3b26a7"), action="pin", expected=Expected(26539, "9ad29052"))
    assert err.value.code == "leaf_changed" and "9ad29052 → 7060d0dd" in str(err.value)
    assert path.read_bytes() == before
    append_entries(path, lambda st: label("5e3b26a7"), action="pin", expected=Expected(26539, "7060d0dd"))
    assert path.stat().st_size > 26539


def _truncated(sample01: Path, tmp_path: Path, lines: int) -> Path:
    path = tmp_path / f"first{lines}.jsonl"
    path.write_bytes(b"".join(sample01.read_bytes().splitlines(keepends=True)[:lines]))
    past = time.time() - 3600
    os.utime(path, (past, past))
    return path


@pytest.mark.parametrize(
    ("lines", "why"),
    [
        (5, "the last message (5e3b26a7) is a user prompt"),
        (6, "the last message (ec3de58a) has tool call(s) without results"),
        (9, "the last message (7d2e2763) is a tool result"),
        (20, "the last message (955f9d3d) is a user prompt"),
    ],
)
def test_mid_turn_refused_unless_forced(sample01: Path, tmp_path: Path, lines: int, why: str) -> None:
    path = _truncated(sample01, tmp_path, lines)
    before = path.read_bytes()
    with pytest.raises(WriteRefused, match=re.escape(why)) as err:
        append_entries(path, lambda st: label("5e3b26a7"), action="pin")
    assert err.value.code == "busy"
    assert path.read_bytes() == before
    append_entries(path, lambda st: label("5e3b26a7"), action="pin", force=True)
    assert path.read_bytes()[: len(before)] == before


def test_finished_turns_are_not_busy(sample01: Path, tmp_path: Path) -> None:
    assert agent_busy(read_session(sample01)) is None
    assert agent_busy(read_session(_truncated(sample01, tmp_path, 16))) is None  # ends with stop
    assert agent_busy(read_session(_truncated(sample01, tmp_path, 17))) is None  # session_info after it


def test_recent_growth_refused_except_after_our_own_write(sample01: Path, tmp_path: Path, journal: Journal) -> None:
    path = tmp_path / "fresh.jsonl"
    shutil.copyfile(sample01, path)  # mtime = now
    with pytest.raises(WriteRefused) as err:
        append_entries(path, lambda st: label("5e3b26a7"), action="pin", journal=journal)
    assert err.value.code == "recent_growth"
    os.utime(path, (time.time() - 60, time.time() - 60))
    append_entries(path, lambda st: label("5e3b26a7"), action="pin", journal=journal)
    # the file was just written, but by us (the journal knows its end): a second action goes through
    append_entries(path, lambda st: label("75b6494e"), action="pin", journal=journal)
    assert journal.ends_with_our_write(path, path.stat().st_size)
    # without the journal the same state is "recently grown"
    with pytest.raises(WriteRefused):
        append_entries(path, lambda st: label("955f9d3d"), action="pin")


def test_open_by_another_process(sample01: Path, tmp_path: Path) -> None:
    path = copy_old(sample01, tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys,time; f=open(sys.argv[1]); print('open', flush=True); time.sleep(60)", str(path)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        holders = open_holders(path)
        assert [h.pid for h in holders] == [holder.pid]
        assert holders[0].name.startswith("python")
        before = path.read_bytes()
        with pytest.raises(WriteRefused) as err:
            append_entries(path, lambda st: label("5e3b26a7"), action="collapse", refuse_when_open=True)
        assert err.value.code == "open_by_process" and f"pid {holder.pid}" in str(err.value)
        assert path.read_bytes() == before
        # issue 13: every direct write (a pin too) is refused while an agent holds the file open
        # (the bridge is the way to steer a running agent); forced writes go through
        with pytest.raises(WriteRefused) as err:
            append_entries(path, lambda st: label("5e3b26a7"), action="pin")
        assert err.value.code == "open_by_process"
        append_entries(path, lambda st: label("5e3b26a7"), action="pin", force=True)
        append_entries(path, lambda st: label("75b6494e"), action="collapse", refuse_when_open=True, force=True)
    finally:
        holder.kill()
        holder.wait()
    assert open_holders(path) == []


def test_not_a_session_and_v1_refused(shared_dir: Path, tmp_path: Path) -> None:
    for name, code in (("bad-inputs/B02-corrupt-header.jsonl", "not_a_session"), ("sessions-pi/08-legacy-v1.jsonl", "migrated")):
        path = copy_old(shared_dir / name, tmp_path)
        before = path.read_bytes()
        with pytest.raises(WriteRefused) as err:
            append_entries(path, lambda st: label("x"), action="pin", force=True)
        assert err.value.code == code
        assert path.read_bytes() == before


def test_explicit_parent_must_exist(sample01: Path, tmp_path: Path) -> None:
    path = copy_old(sample01, tmp_path)
    with pytest.raises(WriteRefused) as err:
        append_entries(path, lambda st: [{"type": "custom", "parentId": "deadbeef", "customType": "x", "data": 1}], action="x")
    assert err.value.code == "unknown_entry"
    result = append_entries(
        path,
        lambda st: [{"type": "custom", "parentId": "9ad29052", "customType": "x", "data": 1}, {"type": "custom", "customType": "y", "data": 2}],
        action="x",
    )
    first, second = result.entries
    assert first["parentId"] == "9ad29052" and second["parentId"] == first["id"]
    assert read_session(path).leaf_id == second["id"]


def test_ids_and_timestamps() -> None:
    taken = {"aaaaaaaa"}
    ids = {new_entry_id(taken) for _ in range(200)}
    assert all(ID_RE.match(i) for i in ids) and "aaaaaaaa" not in ids

    class AllShortTaken:
        def __contains__(self, item: object) -> bool:
            return isinstance(item, str) and len(item) == 8

    fallback = new_entry_id(AllShortTaken())  # type: ignore[arg-type]
    assert re.match(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$", fallback)
    assert iso_now(1772440873.7269) == "2026-03-02T08:41:13.726Z"
    assert iso_now(0) == "1970-01-01T00:00:00.000Z"


def test_serialize_entry_is_json_stringify() -> None:
    entry = {"type": "label", "id": "0a1b2c3d", "parentId": None, "targetId": "x", "label": "ds4:pin café ✓ \"q\"\n"}
    assert serialize_entry(entry) == (
        '{"type":"label","id":"0a1b2c3d","parentId":null,"targetId":"x","label":"ds4:pin café ✓ \\"q\\"\\n"}\n'
    ).encode()


def test_journal_records_and_state_dir(sample01: Path, tmp_path: Path, journal: Journal) -> None:
    assert state_dir() == tmp_path / "state"
    assert journal.path == tmp_path / "state" / "journal.sqlite"
    path = copy_old(sample01, tmp_path)
    r1 = append_entries(path, lambda st: label("5e3b26a7"), action="pin", journal=journal,
                        undo=lambda st, e: {"kind": "label", "targetId": "5e3b26a7", "label": None})
    records = journal.list(path)
    assert [r.id for r in records] == [r1.journal_id]
    rec = records[0]
    assert rec.action == "pin" and rec.offset == 26539 and rec.length == r1.length
    assert rec.leaf_before == "7060d0dd" and rec.entry_ids == tuple(r1.entry_ids)
    assert rec.undo == {"kind": "label", "targetId": "5e3b26a7", "label": None}
    assert rec.undone_by is None
    assert journal.list(tmp_path / "other.jsonl") == []
    assert f"#{rec.id} " in rec.describe() and "pin: label" in rec.describe() and "→ 5e3b26a7" in rec.describe()
