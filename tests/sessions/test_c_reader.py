"""The full reader's short route and counts in C (issue 14: the dashboard's first read): a
`PiSessionReader` given `slim.c_parser()` reads every file as the general route does, and a
`CountingLedger` counts every message as `TokenLedger` does, with the same ledger and counter
state. Run on every shared sample and bad input, the fixture, synthetic turns, mutated lines and
generated messages."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from ds4core.categories import message_parts
from ds4core.tokens import CharsV1Counter, Cl100kCounter, TokenLedger
from ds4sessions.agents.pi import slim
from ds4sessions.agents.pi.reader import PiSessionReader
from ds4sessions.agents.pi.schema import conform_entry
from ds4sessions.agents.pi.slim import CountingLedger, c_parser
from ds4sessions.ingest.limits import iter_lines
from ds4sessions.agents.pi.live import LiveSession
from tests.conftest import FIXTURES, ROOT, SHARED
from tests.sessions.test_slim_prepare import _base_entries, _messages, _mutated_line, _same

sys.path.insert(0, str(ROOT / "bench"))
from bench_planner import synthetic_session  # noqa: E402

needs_c = pytest.mark.skipif(slim._cprep is None, reason="the C extension _cprep is not built (no C compiler at install)")
HEADER = b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'


def _files() -> list[Path]:
    paths = [FIXTURES / "pi" / "01-tools-and-image.jsonl"]
    if SHARED is not None:
        paths += sorted((SHARED / "sessions-pi").glob("*.jsonl"))
        paths += sorted((SHARED / "bad-inputs").rglob("*.jsonl"))
    return paths


def _read(path: Path, parse: Any) -> PiSessionReader:
    """The whole file read as `LiveSession` reads it (complete lines, then a final tail)."""
    reader = PiSessionReader(path, parse)
    tail = None
    with path.open("rb") as f:
        for line_no, offset, raw, complete in iter_lines(f):
            if complete:
                reader.feed([(line_no, offset, raw)])
            else:
                tail = (line_no, offset, raw)
    if tail is not None:
        reader.feed_final_tail(*tail)
    return reader


def _state(reader: PiSessionReader) -> tuple[Any, ...]:
    d = reader.diagnostics
    return (
        reader.status, reader.version, reader.header, reader.leaf_id, reader.labels, reader.session_name,
        reader.last_line_no, reader.end_offset, list(reader.by_id), {k: [e.line_no for e in v] for k, v in reader._shadowed.items()},
        [(p.kind, p.message, p.line_no, p.offset, p.excerpt) for p in d.items], dict(d.counts), dict(d.unknown_types),
        {k: list(v) for k, v in d.missing_parents.items()},
    )


@needs_c
def test_the_short_route_reads_every_file_as_the_general_route(tmp_path: Path) -> None:
    synthetic = tmp_path / "synthetic.jsonl"
    synthetic_session(synthetic, 300)
    parse = c_parser()
    assert parse is not None
    for path in _files() + [synthetic]:
        fast, general = _read(path, parse), _read(path, None)
        assert len(fast.entries) == len(general.entries), path.name
        for a, b in zip(fast.entries, general.entries):
            assert (a.type, a.id, a.parent_id, a.timestamp, a.line_no, a.offset, a.length) == \
                (b.type, b.id, b.parent_id, b.timestamp, b.line_no, b.offset, b.length), (path.name, a.line_no)
            assert _same(a.raw, b.raw), (path.name, a.line_no)
        assert _state(fast) == _state(general), path.name
    # the short route is the common one: 4 lines a turn of the synthetic session, all plain
    counted = PiSessionReader(synthetic, parse)
    with synthetic.open("rb") as f:
        lines = [(n, o, r) for n, o, r, c in iter_lines(f) if c]
    calls = []
    counted._parse = lambda offset, raw: calls.append(parse(offset, raw)) or calls[-1]
    counted._feed_c = None  # (the per-line short route; the batch route below)
    counted.feed(lines)
    short = sum(1 for answer in calls if answer is not False)
    messages = sum(1 for _, _, raw in lines if json.loads(raw).get("type") == "message")
    assert short == messages == 1200  # every message line (not the header, not the model change)
    # the batch route (`feed_lines`): only the header and the model change are read in Python
    batched = PiSessionReader(synthetic, parse)
    general_lines: list[int] = []
    original = PiSessionReader._read_line
    batched._read_line = lambda n, *a: general_lines.append(n) or original(batched, n, *a)  # type: ignore[method-assign]
    assert len(batched.feed(lines)) == 1201 and general_lines == [1, 2]
    calls: list[int] = []
    paused = PiSessionReader(synthetic, parse)
    feed_c = paused._feed_c
    paused._feed_c = lambda *a: calls.append(a[3]) or feed_c(*a)
    assert len(paused.feed(lines)) == 1201 and len(calls) == 4  # after the model change: 3 calls of 500 (1,199 lines)


@needs_c
def test_the_short_route_reads_mutated_lines_as_the_general_route() -> None:
    entries = _base_entries()
    rng = random.Random(41)
    lines = [(1, 0, HEADER)]
    offset = len(HEADER) + 1
    for i in range(6000):
        raw = _mutated_line(entries, rng)
        lines.append((i + 2, offset, raw))
        offset += len(raw) + 1
    parse = c_parser()
    fast, general = PiSessionReader(None, parse), PiSessionReader(None)
    answers = [parse(o, r) for _, o, r in lines[1:]]
    fast.feed(lines)
    general.feed(lines)
    assert [(e.type, e.id, e.parent_id, e.timestamp, e.line_no) for e in fast.entries] == \
        [(e.type, e.id, e.parent_id, e.timestamp, e.line_no) for e in general.entries]
    assert all(_same(a.raw, b.raw) for a, b in zip(fast.entries, general.entries))
    assert _state(fast) == _state(general)
    taken = sum(1 for a in answers if a is not False)
    assert 1000 < taken < 5500, taken  # both routes exercised


def _lines_of(path: Path) -> tuple[list[tuple[int, int, bytes]], tuple[int, int, bytes] | None]:
    with path.open("rb") as f:
        lines = list(iter_lines(f))
    complete = [(n, o, r) for n, o, r, c in lines if c]
    tail = next(((n, o, r) for n, o, r, c in lines if not c), None)
    return complete, tail


@needs_c
@pytest.mark.parametrize(("batch", "most"), [(1, 500), (3, 500), (64, 7), (10**9, 500), (10**9, 1)])
def test_batches_read_every_file_as_the_general_route(batch: int, most: int, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`feed` of a list or tuple of lines (what the tailer delivers) takes the C route for
    whole runs (`feed_lines`, at most `C_LINES_PER_CALL` lines a call): the same entries,
    returned lists and state as the general route, line by line, whatever the batch size; the
    tailer's own line type reads the same."""
    from ds4sessions.agents.pi import reader as reader_module
    from ds4sessions.ingest.tailer import TailLine

    monkeypatch.setattr(reader_module, "C_LINES_PER_CALL", most)

    synthetic = tmp_path / "synthetic.jsonl"
    synthetic_session(synthetic, 300)
    parse = c_parser()
    from tests.sessions.test_slim_blocks import _odd_file  # (parents read later, duplicates, no ids, …)

    odd = [_odd_file(tmp_path / "odd-torn.jsonl", True), _odd_file(tmp_path / "odd.jsonl", False)]
    for path in _files() + [synthetic, _mutated_file(tmp_path), *odd]:
        lines, tail = _lines_of(path)
        fast, general = PiSessionReader(path, parse), PiSessionReader(path, None)
        assert fast._feed_c is not None and general._feed_c is None
        returned: list[Any] = []
        for k, start in enumerate(range(0, len(lines), batch)):
            part = lines[start : start + batch]
            made = [TailLine(*line) for line in part] if k % 3 == 2 else part
            returned += fast.feed(tuple(made) if k % 2 else made)
        expected = [e for line in lines for e in general.feed([line])]
        if tail is not None:
            fast.feed_final_tail(*tail)
            general.feed_final_tail(*tail)
        assert returned == expected[: len(returned)] and len(returned) == len(expected), path.name
        assert [(e.type, e.id, e.parent_id, e.timestamp, e.line_no, e.offset, e.length) for e in fast.entries] == \
            [(e.type, e.id, e.parent_id, e.timestamp, e.line_no, e.offset, e.length) for e in general.entries], path.name
        assert all(_same(a.raw, b.raw) for a, b in zip(fast.entries, general.entries)), path.name
        assert _state(fast) == _state(general), path.name


def _mutated_file(tmp_path: Path) -> Path:
    """A version-3 session of 3,000 mutated lines (duplicate and missing ids and parents, odd
    fields, bad JSON): both routes of the reader, interleaved."""
    entries = _base_entries()
    rng = random.Random(47)
    path = tmp_path / "mutated.jsonl"
    path.write_bytes(b"\n".join([HEADER] + [_mutated_line(entries, rng) for _ in range(3000)]) + b"\n")
    return path


def _ledger_pair(counter: str) -> tuple[CountingLedger, TokenLedger]:
    made = (lambda: Cl100kCounter()) if counter == "cl100k" else (lambda: CharsV1Counter())
    return CountingLedger(made()), TokenLedger(made(), message_parts)


def _same_ledgers(c: TokenLedger, py: TokenLedger) -> None:
    assert c.counted == py.counted
    if isinstance(c.counter, Cl100kCounter):
        assert c.counter.encodes == py.counter.encodes
        assert list(c.counter._known.items()) == list(py.counter._known.items())


def _messages_of(paths: list[Path]) -> list[dict[str, Any]]:
    messages = []
    for path in paths:
        for entry in _read(path, None).entries:
            message = entry.raw.get("message") if isinstance(entry.raw, dict) else None
            if isinstance(message, dict):
                messages.append(message)
    return messages


@needs_c
@pytest.mark.parametrize("counter", ["cl100k", "chars-v1"])
def test_counts_in_c_equal_the_ledgers_on_every_message(counter: str, tmp_path: Path) -> None:
    synthetic = tmp_path / "synthetic.jsonl"
    synthetic_session(synthetic, 300)
    paths = [p for p in _files() if p.name != "99-large.jsonl"] + [synthetic]
    entries = _base_entries()
    rng = random.Random(43)
    reader = PiSessionReader(None)  # the messages a reader keeps (conformed) of mutated lines
    reader.feed([(1, 0, HEADER)] + [(i + 2, 100 + i, _mutated_line(entries, rng)) for i in range(4000)])
    mutated = [e.raw["message"] for e in reader.entries if isinstance(e.raw.get("message"), dict)]
    # texts the C counter leaves to `Cl100kCounter.text` (longer than a chunk; a lone surrogate
    # above the digest length), each twice: tokenized, then from the Python memo
    for text in ("a b " * 17000, "x" * 300 + "\ud800"):
        mutated += [{"role": "user", "content": [{"type": "text", "text": text}]}] * 2
    c, py = _ledger_pair(counter)
    probe = _ledger_pair(counter)[0]._count_c  # which messages take the C route (its own state)
    assert c._count_c is not None and probe is not None
    in_c = 0
    for message in _messages_of(paths) + mutated:
        got = c.count(message)
        want = py.count(message)
        assert _same(got, want), (message, got, want)
        assert c.count(message) is got  # the identity memo, as TokenLedger's
        in_c += 1 if probe(message) is not False else 0
        _same_ledgers(c, py)
    assert in_c > 1000


@needs_c
@pytest.mark.parametrize("counter", ["cl100k", "chars-v1"])
def test_counts_in_c_equal_the_ledgers_on_generated_messages(counter: str) -> None:
    c, py = _ledger_pair(counter)

    @settings(max_examples=500, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(message=_messages())
    def check(message: dict[str, Any]) -> None:
        entry, _ = conform_entry({"type": "message", "id": "a", "message": message})  # as a reader keeps it
        message = entry["message"]
        assert _same(c.count(message), py.count(message)), message
        _same_ledgers(c, py)

    check()


@needs_c
def test_live_sessions_read_and_count_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard's reader and ledgers take the C routes, and a snapshot equals one made
    without the extension."""
    paths = [p for p in _files() if "sessions-pi" in str(p) or p.parent.name == "pi"]
    with_c = {p: LiveSession(p).refresh(force=True) for p in paths}
    live = LiveSession(paths[0])
    assert live._reader._parse is not None and live._fast._count_c is not None and live._exact._count_c is not None
    monkeypatch.setattr(slim, "_cprep", None)
    for path, snap in with_c.items():
        live = LiveSession(path)
        assert live._reader._parse is None and live._fast._count_c is None
        plain = live.refresh(force=True)
        assert snap.breakdown == plain.breakdown and snap.turns == plain.turns, path.name
        assert snap.context.message_entry_ids == plain.context.message_entry_ids, path.name
        assert _same(list(snap.context.messages), list(plain.context.messages)), path.name
        assert snap.session.diagnostics.counts == plain.session.diagnostics.counts, path.name


@needs_c
def test_runs_of_lines_c_cannot_read_take_no_c_call_each() -> None:
    """A file of scalars, arrays or text between messages (each line a diagnostic) is read by
    the general route without one `feed_lines` call per line (a 4M-line file of `1` read 20 %
    slower than line by line), blank lines by `feed_lines` in whole runs: the same entries and
    state as the general route."""
    message = b'{"type":"message","id":"m%d","parentId":%s,"timestamp":"2026-01-01T00:00:00.000Z",' \
              b'"message":{"role":"user","content":"hi","timestamp":1767225600000}}'
    raws = [HEADER, message % (1, b"null")] + [b"1", b"[2]", b"text", b"", b" ", b"\x1c"] * 300 + \
           [message % (2, b'"m1"'), b"null"]
    lines, offset = [], 0
    for number, raw in enumerate(raws, 1):
        lines.append((number, offset, raw))
        offset += len(raw) + 1
    fast, general = PiSessionReader(None, c_parser()), PiSessionReader(None)
    calls: list[int] = []
    feed_c = fast._feed_c
    fast._feed_c = lambda *a: calls.append(a[3]) or feed_c(*a)
    assert [e.id for e in fast.feed(lines)] == [e.id for line in lines for e in general.feed([line])] == ["m1", "m2"]
    assert _state(fast) == _state(general) and fast.diagnostics.total == general.diagnostics.total == 901
    assert len(calls) == 301, len(calls)  # m1, then one per run of blank lines (the last run reads m2 too); was 901


@pytest.mark.parametrize("route", ["c", "python"])
def test_repeated_values_of_messages_are_one_object(route: str, tmp_path: Path) -> None:
    """Issue 32: both routes of the full reader keep one object per repeated string value of
    a message entry (its `type`, the message's role / provider / model / stopReason / toolName,
    each block's `type` and a tool call's `name`) and a parentId read before is its parent's own
    id string: equal values (the tests above compare them), ~340 bytes less an entry."""
    if route == "c" and c_parser() is None:
        pytest.skip("the C extension _cprep is not built (no C compiler at install)")
    synthetic = tmp_path / "synthetic.jsonl"
    synthetic_session(synthetic, 50)
    lines, _ = _lines_of(synthetic)
    reader = PiSessionReader(synthetic, c_parser() if route == "c" else None)
    reader.feed(lines)
    messages = [e for e in reader.entries if e.type == "message"]
    assert len(messages) == 200
    seen: dict[Any, Any] = {}
    for entry in messages:
        raw, message = entry.raw, entry.raw["message"]
        values = [raw["type"], entry.type] + [message[k] for k in ("role", "provider", "model", "stopReason", "toolName")
                                              if k in message]
        for block in message["content"]:
            values.append(block["type"])
            if block["type"] == "toolCall":
                values.append(block["name"])
        for value in values:
            assert seen.setdefault(value, value) is value, value
        parent = reader.by_id.get(entry.parent_id)
        if parent is not None:
            assert raw["parentId"] is parent.id and entry.parent_id is parent.id
