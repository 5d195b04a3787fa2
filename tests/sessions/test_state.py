"""The state directory: inventory, prune by age, the indexes' size cap (real SQLite indexes)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from ds4sessions import state
from ds4sessions.agents.pi.reader import read_session
from ds4sessions.derive.retrieval import open_session_index
from ds4sessions.derive.retrieval_index import session_db_path, state_dir
from tests.conftest import FIXTURES

SAMPLE = FIXTURES / "pi" / "01-tools-and-image.jsonl"


def _indexed_copy(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A copy of the sample at tmp_path/name, indexed; returns (session path, index path)."""
    session = tmp_path / name
    shutil.copyfile(SAMPLE, session)
    index = open_session_index(session)
    result = index.sync(read_session(session))
    index.close()
    assert result.indexed_entries > 0
    return session, session_db_path(session)


def _age(db: Path, days: float) -> None:
    stamp = time.time() - days * 86400
    os.utime(db, (stamp, stamp))


def test_inventory_lists_each_index_with_its_session_and_size(tmp_path: Path) -> None:
    a, db_a = _indexed_copy(tmp_path, "a.jsonl")
    b, db_b = _indexed_copy(tmp_path, "b.jsonl")
    (state_dir() / "notes.txt").write_text("x" * 10)
    report = state.inventory()
    assert report.state_dir == state_dir()
    assert {i.session_path for i in report.indexes} == {str(a.resolve()), str(b.resolve())}
    for info in report.indexes:
        on_disk = sum(p.stat().st_size for p in info.path.parent.glob(info.path.name + "*"))
        assert info.size == on_disk > 0 and info.session_exists
    assert report.other == ((state_dir() / "notes.txt", 10),)
    assert report.journal is None
    assert report.total == report.index_bytes + 10


def test_prune_removes_only_indexes_not_opened_for_n_days(tmp_path: Path) -> None:
    _, old = _indexed_copy(tmp_path, "old.jsonl")
    fresh_session, fresh = _indexed_copy(tmp_path, "fresh.jsonl")
    _age(old, 31)
    _age(fresh, 29)
    assert [i.path for i in state.prune(30, dry_run=True)] == [old]
    assert old.exists()
    assert [i.path for i in state.prune(30)] == [old]
    assert not old.exists() and not Path(str(old) + "-wal").exists()
    assert fresh.exists()
    # a session whose file is gone goes after a day, whatever the age limit
    fresh_session.unlink()
    _age(fresh, 2)
    assert [i.path for i in state.prune(30)] == [fresh]


def test_cap_evicts_least_recently_opened_first_and_never_the_one_opened(tmp_path: Path) -> None:
    made = [_indexed_copy(tmp_path, f"s{i}.jsonl") for i in range(3)]
    for days, (_, db) in zip((3, 2, 1), made):
        _age(db, days)
    one = max(i.size for i in state.list_indexes())
    # room for two: the oldest goes
    evicted = state.enforce_cap(2 * one + one // 2)
    assert [i.path for i in evicted] == [made[0][1]]
    # room for none, but the kept one stays
    evicted = state.enforce_cap(1, keep=made[1][1])
    assert [i.path for i in evicted] == [made[2][1]]
    assert [i.path for i in state.list_indexes()] == [made[1][1]]


def test_opening_an_index_marks_it_opened_and_applies_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, first = _indexed_copy(tmp_path, "first.jsonl")
    _age(first, 5)
    monkeypatch.setenv("DS4TUI_INDEX_CAP_MB", "0.0001")  # about 100 bytes: only the newest survives
    second_session, second = _indexed_copy(tmp_path, "second.jsonl")
    assert not first.exists() and second.exists()
    assert time.time() - second.stat().st_mtime < 60
    # the evicted index is rebuilt on demand, with the same contents
    index = open_session_index(tmp_path / "first.jsonl")
    again = index.sync(read_session(tmp_path / "first.jsonl"))
    index.close()
    assert again.added == again.indexed_entries > 0
    assert second_session.exists()


@pytest.mark.parametrize("raw", ["abc", "0", "-5"])
def test_bad_cap_setting_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("DS4TUI_INDEX_CAP_MB", raw)
    with pytest.raises(ValueError, match="DS4TUI_INDEX_CAP_MB"):
        state.index_cap_bytes()
