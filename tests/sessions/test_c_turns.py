"""`build_turns` in C (issue 14): `_cprep.turns` makes the turns `_extend_turns` makes, field by
field, on every shared sample (full messages and the map's stand-ins), on generated message lists
(roles, timestamps of every type, contents and blocks of odd shapes, missing ids, turn numbers),
hands back what it does not read, and raises what the Python loop raises."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4core.categories import message_parts
from ds4core.tokens import Cl100kCounter
from ds4sessions.agents.pi import slim
from ds4sessions.agents.pi.context import build_context
from ds4sessions.agents.pi.entries import StandIn
from ds4sessions.agents.pi.slim import SlimReader, StandInLedger
from ds4sessions.agents.pi import live
from ds4sessions.agents.pi.live import Turn, _extend_turns, _preview, _turn_numbers, _zone, build_turns, open_snapshot
from tests.conftest import ROOT
from tests.sessions.test_slim_blocks import sample_files

sys.path.insert(0, str(ROOT / "bench"))
from bench_planner import synthetic_session  # noqa: E402

needs_c = pytest.mark.skipif(slim._cprep is None, reason="the C extension _cprep is not built (no C compiler at install)")


def _c(messages: list[Any], ids: list[Any], tokens: list[Any], numbers: dict[str, int]) -> Any:
    return slim._cprep.turns(messages, ids, tokens, numbers, Turn, _zone, _preview, StandIn)


def _python(messages: list[Any], ids: list[Any], tokens: list[Any], numbers: dict[str, int]) -> tuple[Turn, ...]:
    return _extend_turns((), messages, ids, tokens, numbers, 0)


def _same(got: Any, expected: tuple[Turn, ...]) -> None:
    assert type(got) is tuple and all(type(t) is Turn for t in got)
    assert got == expected
    for a, b in zip(got, expected):  # (equal values of the same types: 1 == 1.0 == True)
        assert [type(getattr(a, f)) for f in Turn.__slots__] == [type(getattr(b, f)) for f in Turn.__slots__]


@needs_c
def test_equal_on_every_sample(tmp_path: Path) -> None:
    taken = 0
    for path in sample_files(tmp_path, large=True):
        snap = open_snapshot(path, exact=False)
        ctx = snap.context
        numbers = _turn_numbers(ctx, snap.reader)
        tokens = list(snap.breakdown.message_tokens)
        expected = _python(ctx.messages, ctx.message_entry_ids, tokens, numbers)
        got = _c(ctx.messages, ctx.message_entry_ids, tokens, numbers)
        if got is not None:
            taken += 1
            _same(got, expected)
        assert build_turns(ctx.messages, ctx.message_entry_ids, tokens, numbers) == expected
        # the map's stand-ins
        reader = SlimReader(path, StandInLedger(Cl100kCounter(digest_above=256), message_parts))
        slim.read_whole_file(reader, path)
        ctx = build_context(reader)
        numbers = _turn_numbers(ctx, reader)
        tokens = [i * 7 for i in range(len(ctx.messages))]
        got = _c(ctx.messages, ctx.message_entry_ids, tokens, numbers)
        assert got is not None, path.name
        _same(got, _python(ctx.messages, ctx.message_entry_ids, tokens, numbers))
    assert taken >= 2


class _Mapping(dict):  # type: ignore[type-arg]
    """A dict subclass that is not a stand-in: the Python loop reads it."""


TIMESTAMPS = [None, 0, 1767225600000, 1767225600000.5, True, False, "2026-01-01", -1, 2**53, 1e300, float("nan")]
BLOCKS = [{"type": "toolCall", "id": "c"}, {"type": "text", "text": "hi there"}, {"type": "image"}, {}, "s", 3, None,
          _Mapping({"type": "toolCall"})]


@st.composite
def _messages(draw: Any) -> Any:
    messages: list[Any] = []
    for _ in range(draw(st.integers(0, 10))):
        message: dict[str, Any] = {}
        role = draw(st.sampled_from(["user", "assistant", "toolResult", "system", None, 5, "(absent)"]))
        if role != "(absent)":
            message["role"] = role
        if draw(st.booleans()):
            message["timestamp"] = draw(st.sampled_from(TIMESTAMPS))
        content = draw(st.sampled_from(["list", "tuple", "str", None, "(absent)", "dict"]))
        blocks = draw(st.lists(st.sampled_from(BLOCKS), max_size=3))
        if content == "list":
            message["content"] = blocks
        elif content == "tuple":
            message["content"] = tuple(blocks)
        elif content == "str":
            message["content"] = draw(st.sampled_from(["", "  a   b ", "x" * 100]))
        elif content == "dict":
            message["content"] = {"type": "toolCall"}
        elif content is None:
            message["content"] = None
        kind = draw(st.sampled_from([dict, dict, StandIn, _Mapping]))
        messages.append(kind(message))
    ids = [draw(st.sampled_from([None, "", "e1", "e2", "e3"])) for _ in range(draw(st.integers(0, len(messages) + 1)))]
    tokens = [draw(st.integers(-5, 2**70)) for _ in range(len(messages) + draw(st.integers(-1, 1)))]
    numbers = draw(st.dictionaries(st.sampled_from(["", "e1", "e2", "x"]), st.integers(0, 9)))
    return messages, ids, tokens, numbers


def _handed_back(messages: list[Any], tokens: list[Any]) -> bool:
    """What `_cprep.turns` leaves to the Python loop: a message that is neither a dict nor a
    stand-in, fewer tokens than messages, or an assistant message whose content is not absent,
    None, a string, list or tuple, or holds a block that is neither a plain dict nor a string."""
    if any(type(m) not in (dict, StandIn) for m in messages) or len(tokens) < len(messages):
        return True
    for m in messages:
        if m.get("role") != "assistant" or m.get("content") is None or type(m.get("content")) is str:
            continue
        if type(m["content"]) not in (list, tuple) or any(type(b) not in (dict, str) for b in m["content"]):
            return True
    return False


@needs_c
@settings(max_examples=600, deadline=None)
@given(_messages())
def test_equal_on_generated_lists(case: Any) -> None:
    messages, ids, tokens, numbers = case
    try:
        expected: Any = _python(messages, ids, tokens, numbers)
    except Exception as error:  # noqa: BLE001 - the C route must raise the same
        expected = error
    try:
        got = _c(messages, ids, tokens, numbers)
    except Exception as error:  # noqa: BLE001
        assert type(error) is type(expected) and str(error) == str(expected)
        return
    assert (got is None) == _handed_back(messages, tokens), messages
    if got is None:
        return
    assert not isinstance(expected, Exception), expected
    _same(got, expected)


@needs_c
def test_a_long_session_takes_the_c_route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    synthetic_session(path, 200)
    monkeypatch.setattr(live, "_extend_turns", lambda *a: pytest.fail("the Python loop ran"))
    snap = open_snapshot(path, exact=False)
    assert len(snap.turns) == 200 and [t.index for t in snap.turns] == list(range(1, 201))
    assert sum(t.tool_calls for t in snap.turns) == 200


def _rows_py(turns: Any) -> list[dict[str, Any]]:
    return [{"index": t.index, "time": t.time.isoformat() if t.time else None, "prompt": t.prompt,
             "toolCalls": t.tool_calls, "tokens": t.tokens, "entryIds": list(t.entry_ids)} for t in turns]


@needs_c
def test_map_rows_equal_the_python_rows(tmp_path: Path) -> None:
    """`_cprep.turn_rows` (the turns of `map --json`) makes the dicts the Python comprehension
    makes: on every sample's turns, and on times at the ends of datetime's range in fixed zones
    of odd offsets (seconds, negative, named) interleaved, with and without microseconds, and in
    a ZoneInfo zone, naive, or a datetime subclass (those by their own `isoformat`)."""
    import datetime as dt
    import zoneinfo

    from ds4tui.mapdata import turn_rows

    for path in sample_files(tmp_path, large=True):
        turns = open_snapshot(path, exact=False).turns
        assert turn_rows(turns) == _rows_py(turns)
    zones = [dt.timezone.utc, dt.timezone(dt.timedelta(hours=-3, minutes=-30)), dt.timezone(dt.timedelta(seconds=3723)),
             dt.timezone(dt.timedelta(hours=5, minutes=45), "X"), dt.timezone(dt.timedelta(seconds=-1))]
    times: list[Any] = []
    for zone in zones:
        for us in (0, 1, 999_999):
            times += [dt.datetime(1, 1, 1, 0, 0, 0, us, tzinfo=dt.timezone(dt.timedelta(0))),
                      dt.datetime(9999, 12, 31, 23, 59, 59, us, tzinfo=zone), dt.datetime(2026, 3, 8, 2, 30, 5, us, tzinfo=zone)]

    class Later(dt.datetime):
        def isoformat(self, *args: Any, **kwargs: Any) -> str:
            return "later"

    times += [dt.datetime(2026, 3, 8, 2, 30, 5, tzinfo=zoneinfo.ZoneInfo("America/New_York")),
              dt.datetime(2026, 3, 8, 2, 30, 5), Later(2026, 1, 1, tzinfo=dt.timezone.utc), None]
    turns = tuple(Turn(i, t, f"p{i}", i % 3, i * 7, 0, 0, ("a", str(i))) for i, t in enumerate(times))
    rows = slim._cprep.turn_rows(turns, Turn)
    assert rows == _rows_py(turns) and rows[-2]["time"] == "later" and rows[-1]["time"] is None
    assert slim._cprep.turn_rows(list(turns), Turn) == rows
