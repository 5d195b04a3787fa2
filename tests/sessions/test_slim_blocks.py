"""The map's bulk read in blocks (issue 14): `slim.read_whole_file` reads most lines through the
C preparer's `feed_block` (one process), `prepare_block` (the forked copy) and `add_records`
(the copy's records added here), a block of bytes at a time. Whatever the block size, the split
or the route, the reader ends in the state a line-by-line `feed` (`feed_whole_file`) leaves:
the same entries, stand-ins and counts, diagnostics, ids, leaf, offsets, and the same counter,
ledger and preparer statistics. Run on every shared sample and bad input, the fixture, a
synthetic session and a hand-made file of the lines that leave the C route."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ds4core.categories import message_parts
from ds4core.tokens import CharsV1Counter, Cl100kCounter
from ds4sessions.agents.pi import reader as reader_module
from ds4sessions.agents.pi import slim
from ds4sessions.agents.pi.reader import feed_whole_file
from ds4sessions.agents.pi.slim import SlimReader, StandInLedger
from ds4sessions.ingest import limits
from tests.conftest import FIXTURES, ROOT, SHARED
from tests.sessions.test_c_reader import _state
from tests.sessions.test_slim_prepare import _same

sys.path.insert(0, str(ROOT / "bench"))
from bench_planner import synthetic_session  # noqa: E402

needs_c = pytest.mark.skipif(slim._cprep is None, reason="the C extension _cprep is not built (no C compiler at install)")
CAP = 3000
"""`MAX_LINE_BYTES` in these tests, so that an oversized line is cheap to write."""
TS = "2026-01-01T00:00:00.000Z"


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _message(entry_id: Any, parent: Any, text: str = "hello", role: str = "user") -> str:
    content: Any = [{"type": "text", "text": text}]
    return _line({"type": "message", "id": entry_id, "parentId": parent, "timestamp": TS,
                  "message": {"role": role, "content": content, "timestamp": 1767225600000}})


def _odd_file(path: Path, torn: bool) -> Path:
    """Lines that leave the C route, among plain message lines: a duplicate id, a parent not
    read yet (then a pending missing parent), no id, a numeric id, an empty parentId, a line
    longer than a 64-byte block, an oversized line, a line too deep, invalid UTF-8, blank
    lines (runs of every ASCII byte `str.strip` removes, Unicode whitespace, and bytes that are
    not whitespace: NUL, DEL), CRLF, a model change, a label, a second header, a null content,
    a parent never read; then blank lines and a torn last line (or a complete one)."""
    lines = [
        _line({"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}),
        _message("a1", None),
        _message("a2", "a1", "x" * 200),  # longer than a small block
        _message("a2", "a1", "again"),  # duplicate id
        _message("a3", "zz"),  # parent not read yet
        _message("a4", "a3"),  # (missing parents pending)
        _message("zz", None),  # the missing parent arrives
        _message("a5", "zz", "y" * (CAP + 10)),  # oversized
        _message(None, "a5"),  # no id
        _message(7, "a5"),  # a numeric id
        _message("a6", ""),  # empty parentId: a root
        "",
        " \t\r\x0b\x0c",
        "\x1c\x1d\x1e\x1f " * 20,  # (blank, and longer than a 64-byte block)
        "",
        "\u0085\u00a0\u3000",  # blank to `str.strip`, not ASCII: the general route
        "\x00",  # not blank: not valid JSON
        " \x7f ",
        "\t",
        _message("a7", "a6") + "\r",
        _line({"type": "model_change", "id": "m1", "parentId": "a7", "timestamp": TS, "provider": "p", "modelId": "m"}),
        _line({"type": "label", "id": "l1", "parentId": "m1", "timestamp": TS, "targetId": "a1", "label": "x"}),
        "[" * 300 + "]" * 300,
        _line({"type": "session", "version": 3, "id": "s2", "timestamp": TS, "cwd": "/w"}),
        _line({"type": "message", "id": "a8", "parentId": "l1", "timestamp": TS,
               "message": {"role": "user", "content": None, "timestamp": 1767225600000}}),
        _message("a9", "a8", "é ü 😀"),
        _message("a10", "a9", "z" * 90, role="toolResult"),
        _message("a13", "a10", "unpaired", role="toolResult"),  # a tool result without its call
        _message("a12", "nowhere"),  # a parent never read
        _message("a10", "a9"),  # a duplicate of the last id: the leaf again
    ]
    body = "\n".join(lines) + "\n"
    data = body.encode("utf-8").replace(b'"hello"}],"timestamp":1767225600000}}\n{"type":"message","id":"a6"',
                                         b'"hel\xfflo"}],"timestamp":1767225600000}}\n{"type":"message","id":"a6"')
    data += b"\n \n\r\n" + (_message("a11", "a13")[:-5] if torn else _message("a11", "a13") + "\n").encode()
    path.write_bytes(data)
    return path


def sample_files(tmp_path: Path, large: bool = False) -> list[Path]:
    """The inputs of the C routes' equality tests: the fixture, a synthetic session, the two odd
    files, every shared Pi sample (99-large only with `large`) and every bad input."""
    synthetic = tmp_path / "synthetic-40.jsonl"
    synthetic_session(synthetic, 40)
    paths = [FIXTURES / "pi" / "01-tools-and-image.jsonl", synthetic,
             _odd_file(tmp_path / "odd-torn.jsonl", True), _odd_file(tmp_path / "odd.jsonl", False)]
    if SHARED is not None:
        paths += sorted(p for p in (SHARED / "sessions-pi").glob("*.jsonl") if large or p.name != "99-large.jsonl")
        paths += sorted((SHARED / "bad-inputs").rglob("*.jsonl"))
    return paths


def _reader(path: Path, counter: str) -> SlimReader:
    made = Cl100kCounter(digest_above=256) if counter == "cl100k" else CharsV1Counter()
    return SlimReader(path, StandInLedger(made, message_parts))


def _full_state(reader: SlimReader) -> tuple[Any, ...]:
    ledger = reader._ledger
    counter = ledger.counter
    preparer = reader._prepare_c
    stats = (preparer.taken, preparer.rejected, preparer.handed_back) if preparer is not None else None
    return (
        _state(reader), ledger.counted, getattr(counter, "encodes", None), len(getattr(counter, "_known", ())),
        len(reader._shared), stats,
    )


def _assert_same_read(path: Path, counter: str, one_process: bool = True) -> None:
    """`read_whole_file` (as patched by the caller) against `feed_whole_file`. With two
    processes the copy counts its part (its ledger, counter and preparer statistics are its
    own): then the reader's state is compared without them."""
    general, blocks = _reader(path, counter), _reader(path, counter)
    feed_whole_file(general, path)
    size = slim.read_whole_file(blocks, path)
    assert size == path.stat().st_size, path.name
    assert len(blocks.entries) == len(general.entries), path.name
    for a, b in zip(blocks.entries, general.entries):
        assert (a.type, a.id, a.parent_id, a.timestamp, a.line_no, a.offset, a.length) == \
            (b.type, b.id, b.parent_id, b.timestamp, b.line_no, b.offset, b.length), (path.name, b.line_no)
        assert _same(a.raw, b.raw), (path.name, b.line_no)
        if a.parent_id is not None and a.parent_id in general.by_id:  # the parent's own id string
            assert (a.parent_id is blocks.by_id[a.parent_id].id) == (b.parent_id is general.by_id[b.parent_id].id)
    if one_process:
        assert _full_state(blocks) == _full_state(general), path.name
    else:
        assert _state(blocks) == _state(general), path.name


@pytest.fixture
def small_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (limits, reader_module, slim):
        monkeypatch.setattr(module, "MAX_LINE_BYTES", CAP)


@needs_c
@pytest.mark.parametrize("block", [1, 64, 1000, 1 << 20])
@pytest.mark.parametrize("counter", ["cl100k", "chars-v1"])
def test_one_process_reads_in_blocks_as_feed_does(block: int, counter: str, tmp_path: Path, small_cap: None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slim, "SPLIT_BYTES", 1 << 60)
    monkeypatch.setattr(slim, "BLOCK_BYTES", block)
    for path in sample_files(tmp_path):
        _assert_same_read(path, counter)


@needs_c
@pytest.mark.parametrize("block", [64, 1 << 20])
@pytest.mark.parametrize("share", [0.2, 0.7])
def test_two_processes_read_in_blocks_as_feed_does(block: int, share: float, tmp_path: Path, small_cap: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Split at another line per share: the parent's blocks stop at the split, the copy's
    records (`prepare_block`) are added by `add_records`; the copy's preparer statistics are
    its own, so those are left out here."""
    monkeypatch.setattr(slim, "SPLIT_BYTES", 1)
    monkeypatch.setattr(slim, "CHILD_SHARE", share)
    monkeypatch.setattr(slim, "BLOCK_BYTES", block)
    splits: list[int | None] = []
    original = slim._line_start
    monkeypatch.setattr(slim, "_line_start", lambda *a: splits.append(original(*a)) or splits[-1])
    for path in sample_files(tmp_path):
        splits.clear()
        _assert_same_read(path, "cl100k", one_process=False)
        if path.name.startswith(("odd", "synthetic")):
            assert None not in splits and len(splits) == 1, path.name  # read by two processes


@needs_c
def test_without_the_c_preparer_the_blocks_are_read_line_by_line(tmp_path: Path, small_cap: None,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slim, "c_preparer", lambda *a: None)
    monkeypatch.setattr(slim, "BLOCK_BYTES", 64)
    for split in (1 << 60, 1):
        monkeypatch.setattr(slim, "SPLIT_BYTES", split)
        for path in sample_files(tmp_path):
            _assert_same_read(path, "cl100k", one_process=split > 1)


@needs_c
def test_the_common_lines_are_added_in_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line of a synthetic session but the header and the model change is read by
    `feed_block` (one process) or `prepare_block` + `add_records` (two): only the model change
    (line 2) reaches the Python fallback."""
    path = tmp_path / "s.jsonl"
    synthetic_session(path, 300)
    fallbacks: list[int] = []
    original = SlimReader._line_after_c
    monkeypatch.setattr(SlimReader, "_line_after_c", lambda self, n, *a: fallbacks.append(n) or original(self, n, *a))
    original_add = SlimReader._add_prepared
    monkeypatch.setattr(SlimReader, "_add_prepared", lambda self, *a: fallbacks.append(a[3]) or original_add(self, *a))
    for split in (1 << 60, 1):
        fallbacks.clear()
        monkeypatch.setattr(slim, "SPLIT_BYTES", split)
        reader = _reader(path, "cl100k")
        slim.read_whole_file(reader, path)
        taken = reader._prepare_c.taken  # (with two processes: the lines this process read)
        assert len(reader.entries) == 1201 and (taken == 1200 if split > 1 else 0 < taken < 1200)
        assert fallbacks == [2]


@needs_c
def test_an_error_inside_a_block_leaves_the_reader_at_the_last_entry_added(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure in the middle of a C block (here the JSON writer of tool-call arguments raises)
    ends the read with its exception, and the reader's line, offset and leaf are those of the
    last entry it added."""
    def boom(value: Any) -> str:
        raise RuntimeError("the writer fails")

    monkeypatch.setattr(slim, "js_stringify", boom)
    assistant = _line({"type": "message", "id": "a2", "parentId": "a1", "timestamp": TS, "message": {
        "role": "assistant", "content": [{"type": "toolCall", "id": "t1", "name": "read", "arguments": {"f": 1.5}}],
        "timestamp": 1767225600001}})
    lines = [_line({"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}), _message("a1", None),
             assistant, _message("a3", "a2")]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(slim, "SPLIT_BYTES", 1 << 60)
    reader = _reader(path, "cl100k")
    with pytest.raises(RuntimeError, match="the writer fails"):
        slim.read_whole_file(reader, path)
    assert [e.id for e in reader.entries] == ["a1"] and reader.leaf_id == "a1"
    assert reader.last_line_no == 2 and reader.end_offset == len(lines[0]) + len(lines[1]) + 2


def _blank_file(path: Path, blanks: int) -> Path:
    """A header, then runs of `blanks` blank lines between three messages."""
    run = b" \n\n\t\r\n" * (blanks // 3)
    lines = [_line({"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}).encode() + b"\n",
             _message("a1", None).encode() + b"\n", run, _message("a2", "a1").encode() + b"\n", run,
             _message("a3", "a2").encode() + b"\n", run]
    path.write_bytes(b"".join(lines))
    return path


@needs_c
def test_blank_lines_are_passed_in_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of blank lines stay in C on every route: no Python call per line (a file of millions
    of blank lines read 2x slower than line by line when each one was handed back), with the
    state `feed` leaves: one process (`feed_block`), the copy's records (one per run, added by
    `add_records`) and the dashboard's reader (`feed_lines`)."""
    from ds4sessions.agents.pi.reader import PiSessionReader
    from tests.sessions.test_c_reader import _lines_of

    path = _blank_file(tmp_path / "blank.jsonl", 30_000)
    for split in (1 << 60, 1):
        monkeypatch.setattr(slim, "SPLIT_BYTES", split)
        _assert_same_read(path, "cl100k", one_process=split > 1)
    fallbacks: list[int] = []
    original = SlimReader._line_after_c
    monkeypatch.setattr(SlimReader, "_line_after_c", lambda self, n, *a: fallbacks.append(n) or original(self, n, *a))
    original_read = SlimReader._read_line
    monkeypatch.setattr(SlimReader, "_read_line", lambda self, n, *a: fallbacks.append(n) or original_read(self, n, *a))
    for split in (1 << 60, 1):
        monkeypatch.setattr(slim, "SPLIT_BYTES", split)
        fallbacks.clear()
        reader = _reader(path, "cl100k")
        slim.read_whole_file(reader, path)
        assert [e.id for e in reader.entries] == ["a1", "a2", "a3"] and reader.last_line_no == 90_004
        assert fallbacks == [1], (split, len(fallbacks))  # only the header is read in Python
    lines, _ = _lines_of(path)
    full = PiSessionReader(path, slim.c_parser())
    general: list[int] = []
    full._read_line = lambda n, *a: general.append(n) or PiSessionReader._read_line(full, n, *a)  # type: ignore[method-assign]
    assert [e.id for e in full.feed(lines)] == ["a1", "a2", "a3"] and general == [1]
    assert (full.last_line_no, full.end_offset) == (len(lines), path.stat().st_size)


@needs_c
def test_the_copy_writes_its_records_in_bounded_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The forked copy pickles at most `CHUNK_LINES` (+1) records at a time, even inside one
    block of a million tiny lines (it held ~1M records a block: 13x the peak memory), and its
    records, added by this process, give the state `feed` leaves."""
    import io
    import pickle

    monkeypatch.setattr(slim, "CHUNK_LINES", 1000)
    path = tmp_path / "tiny.jsonl"
    header = _line({"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}).encode() + b"\n"
    body = b"".join((b"1\n" * 7 + b"\n" * 5 + _message(f"m{i}", f"m{i - 1}" if i else None).encode() + b"\n")
                    for i in range(3000))
    path.write_bytes(header + body)
    reader = _reader(path, "cl100k")
    reader.feed(((1, 0, header[:-1]),))
    spool = io.BytesIO()
    slim._prepare_into(spool, reader, path, len(header))
    spool.seek(0)
    chunks = []
    while type(item := pickle.load(spool)) is list:
        chunks.append(item)
    assert item == (None, len(header) + len(body))
    assert max(len(c) for c in chunks) <= 1001 and len(chunks) >= 3000 * 9 // 1001
    kinds = sorted({len(r) for c in chunks for r in c})
    assert kinds == [3, 4, 6]  # a blank run, a line for the general route, a prepared message
    assert sum(len(r) == 6 for c in chunks for r in c) == 3000
    monkeypatch.setattr(slim, "SPLIT_BYTES", 1)
    _assert_same_read(path, "cl100k", one_process=False)
