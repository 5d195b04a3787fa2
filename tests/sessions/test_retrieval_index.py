"""The retrieval index and LiveRetrieval on real Pi session files (issue 5, done-when a-d):
(a) a turn the tail walk drops as oversized comes back as retrieval evidence, (b) entries of
another branch never appear, (c) the budget holds, (d) deleting the index and reopening gives
the same results. Plus incremental updates, schema-version rebuild and corruption recovery."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from ds4core.budgets import ContextConfig
from ds4core.estimate import message_tokens
from ds4core.retrieval import EVIDENCE_HEADER
from ds4sessions.agents.pi.live import open_snapshot
from ds4sessions.agents.pi.reader import read_session
from ds4sessions.derive.retrieval import LiveRetrieval, planning_inputs
from ds4sessions.derive.retrieval_index import SCHEMA_VERSION, RetrievalIndex, session_db_path

REQUEST = "Which test failed with ERR_TEST_FAILURE before the fix?"


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(state))
    return state


def oversized_session(sample01: Path, dest: Path, repeat: int = 70) -> Path:
    """Sample 01 with its first turn made oversized: the `npm test` tool result (fab69129,
    turn 1) holds its real output `repeat` times, and the last user message asks about it."""
    lines = []
    for line in sample01.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("id") == "fab69129":
            block = entry["message"]["content"][0]
            block["text"] = block["text"] * repeat
        if entry.get("id") == "955f9d3d":
            entry["message"]["content"] = [{"type": "text", "text": REQUEST}]
        lines.append(json.dumps(entry, ensure_ascii=False))
    dest.write_text("\n".join(lines) + "\n")
    return dest


def comparable(view) -> dict:
    out = view.to_json()
    for key in ("retrieveSeconds", "planSeconds", "index"):
        out.pop(key)
    return out


def test_oversized_turn_returns_as_evidence(sample01: Path, tmp_path: Path) -> None:
    path = oversized_session(sample01, tmp_path / "oversized.jsonl")
    snapshot = open_snapshot(path)
    inputs = planning_inputs(snapshot)
    live = LiveRetrieval()
    view = live.retrieve(snapshot, timestamp=0)

    # the nominal plan drops turn 1 (the tail walk closes on it: oversized, not the predecessor)
    assert inputs.config.recent_tail_tokens == 32000
    assert view.committed_count > 0
    nominal_excluded = [r for r in view.rows if r.entry_id == "fab69129"]
    assert nominal_excluded and nominal_excluded[0].selected
    # ... and retrieval brings the test output back as quoted evidence, which the final plan sends
    assert view.status == "complete"
    assert view.request_entry_id == "955f9d3d"
    assert view.result.descriptor.exact_identifiers == ("Which", "ERR_TEST_FAILURE")
    assert view.source_entry_ids[0] == "fab69129"
    assert view.plan.mode == "managed"
    assert view.plan.planning.oversized_turn_exclusions == 1
    sent = {view.plan.planned_sources[i.original_index]: i for i in view.plan.selected}
    item = sent["retrieval:fab69129"]
    assert item.kind == "retrieval" and item.retrieved_event_ids == ("fab69129",)
    evidence = view.result.selected[0]
    lines = evidence.text.split("\n")
    assert lines[:4] == [EVIDENCE_HEADER, 'Source entry: "fab69129"', "Date: 2026-03-02T08:41:18.907Z", 'Original role: "toolResult"']
    assert lines[5].startswith("Reason: exact identifier: ERR_TEST_FAILURE; FTS: ")
    assert lines[5].endswith("; active branch")
    assert "ERR_TEST_FAILURE" in json.loads(lines[7].removeprefix("Quoted content JSON: "))
    assert view.evidence_text.startswith(evidence.text)
    # the excerpt was cut to fit (the result is ~126 KB): at most 6000 units plus the ellipses
    assert evidence.excerpt.endswith("…") and len(evidence.excerpt) <= 6002
    assert item.tokens == message_tokens(evidence.message) == evidence.estimated_tokens


def test_unmodified_session_commits_everything(sample01: Path, tmp_path: Path) -> None:
    copy = tmp_path / "01.jsonl"
    shutil.copy(sample01, copy)
    view = LiveRetrieval().retrieve(open_snapshot(copy), timestamp=0)
    # a small session: the plan sends every entry, so nothing is repeated as evidence
    assert view.query_terms == ("Good", "Commit")
    assert view.source_entry_ids == ()
    assert {r.why for r in view.rows} == {"already sent by the plan"}


def test_other_branch_entries_never_appear(shared_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "04.jsonl"
    shutil.copy(shared_dir / "sessions-pi" / "04-tree-branches-labels.jsonl", path)
    snapshot = open_snapshot(path)
    branch = snapshot.context.branch_entry_ids
    before_request = branch[: branch.index("da2fafd3")]
    off_branch = {"c9ca3457", "0610a36e", "f096402f", "25f9d11b", "2a340972"}
    live = LiveRetrieval()
    nominal = live.retrieve(snapshot, timestamp=0)
    # nothing to exclude by the plan: retrieval with an empty exclusion set (DS4's history tool)
    open_view = live.retrieve(snapshot, committed=(), timestamp=0)
    for view in (nominal, open_view):
        alternates = {r.entry_id for r in view.rows if r.why == "alternate branch"}
        assert alternates == off_branch
        assert view.result.alternate_branch_candidates == 5
        assert not off_branch & set(view.source_entry_ids)
        assert set(view.source_entry_ids) <= set(before_request)
    assert nominal.source_entry_ids == ()
    assert open_view.source_entry_ids == ("27ae2e51", "c30a9cf4", "3485e938")  # rank order
    assert off_branch.isdisjoint(open_view.evidence_text.split('"'))


def test_budget_holds_on_the_large_session(shared_dir: Path) -> None:
    snapshot = open_snapshot(shared_dir / "sessions-pi" / "99-large.jsonl")
    index = RetrievalIndex()
    for budget in (300, 1200, 16000):
        view = LiveRetrieval(index, config=ContextConfig(max_retrieved_history_tokens=budget)).retrieve(snapshot, timestamp=0)
        assert view.max_tokens == budget
        assert view.selected_tokens == sum(message_tokens(e.message) for e in view.result.selected) <= budget
        sent_retrieval = [i for i in view.plan.selected if i.kind == "retrieval"]
        assert sum(i.tokens for i in sent_retrieval) <= budget
        assert 0 < len(view.result.selected) <= 12
        for row in view.rows:
            assert row.selected == (row.entry_id in view.source_entry_ids)
            assert row.selected or row.why
        if budget == 300:  # one small excerpt fits, the next candidates run out of budget
            assert any("maxRetrievedHistoryTokens" in r.why or "budget exhausted" in r.why for r in view.rows)


def test_delete_index_and_reopen_gives_same_results(sample01: Path, tmp_path: Path, _state_dir: Path) -> None:
    path = oversized_session(sample01, tmp_path / "oversized.jsonl")
    snapshot = open_snapshot(path)
    first = LiveRetrieval().retrieve(snapshot, timestamp=0)
    db = session_db_path(path)
    assert db.parent == _state_dir / "retrieval" and db.exists()
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    again = LiveRetrieval().retrieve(snapshot, timestamp=0)
    assert again.sync.added == first.sync.added == len(snapshot.reader.entries)
    assert comparable(again) == comparable(first)
    # the rebuild command empties the index; the next sync re-indexes everything
    index = RetrievalIndex()
    index.rebuild()
    third = LiveRetrieval(index).retrieve(snapshot, timestamp=0)
    assert third.sync.added == len(snapshot.reader.entries)
    assert comparable(third) == comparable(first)


def test_incremental_sync_indexes_only_new_entries(sample01: Path, tmp_path: Path) -> None:
    lines = sample01.read_bytes().splitlines(keepends=True)
    path = tmp_path / "growing.jsonl"
    path.write_bytes(b"".join(lines[:10]))
    index = RetrievalIndex(tmp_path / "ix.sqlite3")
    first = index.sync(read_session(path))
    assert (first.added, first.rebuilt, first.indexed_entries) == (9, False, 9)
    assert index.sync(read_session(path)).added == 0
    with path.open("ab") as f:
        f.write(b"".join(lines[10:]))
    grown = index.sync(read_session(path))
    assert (grown.added, grown.rebuilt, grown.indexed_entries) == (len(lines) - 10, False, len(lines) - 1)
    full = RetrievalIndex(tmp_path / "full.sqlite3")
    full.sync(read_session(path))
    assert index.indexed_entry_ids(grown.session_key) == full.indexed_entry_ids(1)
    search_a, search_b = index.search(grown.session_key), full.search(1)
    for needle in ("widget", "ERR_TEST_FAILURE", "404", "npm test"):
        assert search_a.search_exact(needle, 72) == search_b.search_exact(needle, 72)
    assert search_a.search_fts('"widget" OR "commit"', 72) == search_b.search_fts('"widget" OR "commit"', 72)
    # a rewritten file (the checkpoint entry moved) is re-indexed from scratch
    path.write_bytes(lines[0] + b"".join(lines[12:]))
    rewritten = index.sync(read_session(path))
    assert rewritten.rebuilt and rewritten.indexed_entries == len(lines) - 12


def test_exact_search_is_case_sensitive_substring(sample01: Path, tmp_path: Path) -> None:
    index = RetrievalIndex(tmp_path / "ix.sqlite3")
    key = index.sync(read_session(sample01)).session_key
    search = index.search(key)
    session = read_session(sample01)
    from ds4core.retrieval import indexed_text

    texts = {e.id: indexed_text(e.raw).text for e in session.entries}
    for needle in ("TypeError", "typeerror", "toJSON()", "404", "ok"):
        expected = sorted((i for i, t in texts.items() if needle in t), key=lambda i: (session.by_id[i].timestamp, i), reverse=True)
        assert [h.entry_id for h in search.search_exact(needle, 72)] == expected


def test_schema_mismatch_and_corruption_rebuild(sample01: Path, tmp_path: Path) -> None:
    db = tmp_path / "ix.sqlite3"
    index = RetrievalIndex(db)
    index.sync(read_session(sample01))
    index.close()
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    reopened = RetrievalIndex(db)
    assert reopened.sync(read_session(sample01)).added == 22  # rebuilt: everything again
    reopened.close()
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 100)
    recovered = RetrievalIndex(db)
    assert recovered.sync(read_session(sample01)).added == 22


def test_results_do_not_depend_on_other_indexed_sessions(sample01: Path, tmp_path: Path, shared_dir: Path) -> None:
    """Each session has its own index, so FTS5's corpus statistics are the session's own."""
    path = oversized_session(sample01, tmp_path / "oversized.jsonl")
    snapshot = open_snapshot(path)
    alone = LiveRetrieval().retrieve(snapshot, timestamp=0)
    for db in (_state_dir_of(path) / "retrieval").glob("*"):
        db.unlink()
    live = LiveRetrieval()
    live.retrieve(open_snapshot(shared_dir / "sessions-pi" / "99-large.jsonl"), timestamp=0)
    after_other = live.retrieve(snapshot, timestamp=0)
    assert comparable(after_other) == comparable(alone)


def _state_dir_of(path: Path) -> Path:
    return session_db_path(path).parent.parent
