"""`slim.attribute_fast` (issue 14): the attribution loop in C equals
`ds4core.categories.attribute` on every shared sample (full messages with the live ledgers, and
the map's stand-ins with the counts they carry), on generated message lists with arbitrary counts
(zero and negative parts, children, runs of one category, lists instead of tuples, odd roles),
and raises what the Python loop raises."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4core.categories import Segment, attribute, message_parts
from ds4core.tokens import CharsV1Counter, Cl100kCounter, MessageCount, PartCount, TokenLedger
from ds4sessions.agents.pi import slim
from ds4sessions.agents.pi.entries import StandIn
from ds4sessions.agents.pi.slim import SlimReader, StandInLedger, attribute_fast
from ds4sessions.agents.pi.live import open_snapshot
from ds4sessions.agents.pi.context import build_context
from tests.conftest import ROOT
from tests.sessions.test_slim_blocks import sample_files

sys.path.insert(0, str(ROOT / "bench"))
from bench_planner import synthetic_session  # noqa: E402

needs_c = pytest.mark.skipif(slim._cprep is None, reason="the C extension _cprep is not built (no C compiler at install)")


def _same(a: Any, b: Any) -> None:
    assert a.counter == b.counter
    assert list(a.totals.items()) == list(b.totals.items())
    assert [(k, list(v.items())) for k, v in a.children.items()] == [(k, list(v.items())) for k, v in b.children.items()]
    assert a.segments == b.segments and all(type(x) is Segment for x in a.segments)
    assert a.message_tokens == b.message_tokens and a.total == b.total


@needs_c
def test_equal_on_every_sample_with_full_messages(tmp_path: Path) -> None:
    for path in sample_files(tmp_path, large=True):
        snap = open_snapshot(path, exact=False)
        ctx = snap.context
        for counter in (CharsV1Counter(), Cl100kCounter()):
            expected = attribute(ctx.messages, ctx.message_entry_ids, TokenLedger(counter, message_parts))
            got = attribute_fast(ctx.messages, ctx.message_entry_ids, TokenLedger(counter, message_parts))
            _same(got, expected)


@needs_c
def test_equal_on_every_sample_with_stand_ins(tmp_path: Path) -> None:
    """The map's reader keeps stand-ins with their counts: C reads the count a stand-in
    carries, Python asks `StandInLedger.count`; deferred counts (a long line) are read again
    from the file by both."""
    for path in sample_files(tmp_path, large=True):
        for counter in (CharsV1Counter(), Cl100kCounter(digest_above=256)):
            ledger = StandInLedger(counter, message_parts)
            reader = SlimReader(path, ledger)
            slim.read_whole_file(reader, path)
            ctx = build_context(reader)
            expected = attribute(ctx.messages, ctx.message_entry_ids, ledger)
            _same(attribute_fast(ctx.messages, ctx.message_entry_ids, ledger), expected)
            assert any(type(m) is StandIn for m in ctx.messages) or not ctx.messages


class _Ledger(TokenLedger):
    """A ledger answering each message with the count it was given (by identity)."""

    def __init__(self, counts: dict[int, Any]) -> None:
        super().__init__(CharsV1Counter(), message_parts)
        self.counts = counts
        self.asked = 0

    def count(self, message: Mapping[str, Any]) -> Any:
        self.asked += 1
        return self.counts[id(message)]


class _Mapping(Mapping[str, Any]):
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Any:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


CATEGORIES = ["user", "tool_calls", "tool_results", "images", "other"]
ROLES = ["user", "assistant", "toolResult", "system", "custom", "bashExecution", "branchSummary",
         "compactionSummary", "hookMessage", None, 5, ""]


@st.composite
def _cases(draw: Any) -> tuple[list[Any], list[Any], dict[int, Any]]:
    messages: list[Any] = []
    counts: dict[int, Any] = {}
    for _ in range(draw(st.integers(0, 12))):
        fields: dict[str, Any] = {}
        role = draw(st.sampled_from(ROLES + ["(absent)"]))
        if role != "(absent)":
            fields["role"] = role
        if role == "bashExecution" and draw(st.booleans()):
            fields["excludeFromContext"] = draw(st.sampled_from([True, False, 0, 1, None, "", "x"]))
        message: Any = draw(st.sampled_from([dict, StandIn, _Mapping]))(fields)
        parts = [
            (draw(st.sampled_from(CATEGORIES)), draw(st.sampled_from([None, "read", "bash"])), draw(st.integers(-3, 2**70)))
            for _ in range(draw(st.integers(0, 4)))
        ]
        made = [PartCount(*p) if draw(st.booleans()) else list(p) for p in parts]
        total = draw(st.integers(0, 10**6))
        count: Any = MessageCount(total, tuple(made)) if draw(st.booleans()) else [total, made]
        counts[id(message)] = count
        messages.append(message)
    ids = [draw(st.one_of(st.none(), st.text(max_size=3))) for _ in range(draw(st.integers(0, len(messages))))]
    return messages, ids, counts


@needs_c
@settings(max_examples=400, deadline=None)
@given(_cases())
def test_equal_on_generated_lists(case: tuple[list[Any], list[Any], dict[int, Any]]) -> None:
    messages, ids, counts = case
    expected = attribute(messages, ids, _Ledger(counts))
    ledger = _Ledger(counts)
    _same(attribute_fast(messages, ids, ledger), expected)
    assert ledger.asked == sum(1 for m in messages if _in_context(m))


def _in_context(message: Mapping[str, Any]) -> bool:
    from ds4core.categories import in_llm_context

    return in_llm_context(message)


@needs_c
def test_raises_what_python_raises() -> None:
    unhashable = {"role": ["user"]}  # `role in {...}`: TypeError
    with pytest.raises(TypeError):
        attribute([unhashable], [None], _Ledger({}))
    with pytest.raises(TypeError):
        attribute_fast([unhashable], [None], _Ledger({}))
    short = {"role": "user"}
    for bad in ([1, 2, 3], MessageCount(1, ((("user", None),),))):
        for run in (attribute, attribute_fast):
            with pytest.raises(ValueError):
                run([short], ["e"], _Ledger({id(short): bad}))
    stand_in = StandIn({"role": "user"})
    stand_in.counted = ("chars-v1", MessageCount(3, (PartCount("user", None, 3),)))  # another counter's
    for run in (attribute, attribute_fast):
        with pytest.raises(ValueError, match="no count by cl100k"):
            run([stand_in], ["e"], StandInLedger(Cl100kCounter(), message_parts))


@needs_c
def test_the_map_counts_through_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`open_map_snapshot` attributes through `_cprep.attribute`, and reads each stand-in's
    count itself: `StandInLedger.count` is not called."""
    from ds4sessions.agents.pi.live import open_map_snapshot

    path = tmp_path / "s.jsonl"
    synthetic_session(path, 30)
    calls: list[int] = []
    original = slim._cprep.attribute
    monkeypatch.setattr(slim._cprep, "attribute", lambda *a: calls.append(len(a[0])) or original(*a), raising=False)
    asked: list[int] = []
    original_count = StandInLedger.count
    monkeypatch.setattr(StandInLedger, "count", lambda self, m: asked.append(1) or original_count(self, m))
    open_map_snapshot(path, exact=True)
    assert calls == [120] and asked == []
