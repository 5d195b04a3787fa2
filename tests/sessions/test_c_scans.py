"""The branch and context scans in C (issue 14): `_cprep.branch_scan` (turn numbers and the
last compaction on the branch), `_cprep.role_counts` (the facts' system and user messages) and
`_cprep.tool_pairing` (the unpaired tool results) give what their Python loops give on every
shared sample (full messages and the map's stand-ins) and on generated lists, hand back the
shapes they do not read, and raise what the Python loops raise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4core.categories import message_parts
from ds4core.tokens import CharsV1Counter
from ds4sessions.agents.pi import context as context_module
from ds4sessions.agents.pi import slim
from ds4sessions.agents.pi.context import _tool_pairing_warnings, build_context
from ds4sessions.agents.pi.entries import Entry, StandIn
from ds4sessions.agents.pi.slim import SlimReader, StandInLedger
from ds4sessions.agents.pi import live
from ds4sessions.agents.pi.live import _branch_scan, _full_facts, open_snapshot
from tests.sessions.test_slim_blocks import sample_files

needs_c = pytest.mark.skipif(slim._cprep is None, reason="the C extension _cprep is not built (no C compiler at install)")


def _python(monkeypatch: pytest.MonkeyPatch, run: Any) -> Any:
    """`run()` with the Python loops (the C module hidden from both modules)."""
    with monkeypatch.context() as m:
        m.setattr(live, "_c", None)
        m.setattr(context_module, "_cprep", None)
        return run()


def _contexts(tmp_path: Path) -> list[tuple[Any, Any]]:
    made = []
    for path in sample_files(tmp_path, large=True):
        snap = open_snapshot(path, exact=False)
        made.append((snap.context, _reader_of(path)))
        reader = SlimReader(path, StandInLedger(CharsV1Counter(), message_parts))
        slim.read_whole_file(reader, path)
        made.append((build_context(reader), reader))
    return made


def _reader_of(path: Path) -> Any:
    from ds4sessions.agents.pi.reader import PiSessionReader, feed_whole_file

    reader = PiSessionReader(path, slim.c_parser())
    feed_whole_file(reader, path)
    return reader


@needs_c
def test_equal_on_every_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for ctx, reader in _contexts(tmp_path):
        assert slim._cprep.branch_scan(ctx.branch_entry_ids, reader.by_id, Entry, StandIn) is not None
        assert _branch_scan(ctx, reader) == _python(monkeypatch, lambda: _branch_scan(ctx, reader))
        assert _full_facts(ctx, reader) == _python(monkeypatch, lambda: _full_facts(ctx, reader))
        got = build_context(reader)
        assert got.warnings == _python(monkeypatch, lambda: build_context(reader)).warnings
        assert got.warnings == ctx.warnings
    warned = [ctx for ctx, _ in _contexts(tmp_path) if any(w.kind == "tool_pairing" for w in ctx.warnings)]
    assert len(warned) >= 2  # (the odd file's unpaired tool results, in both readers)


class _Str(str):
    """A str subclass: the C scans hand such a role back."""


ROLES = ["user", "assistant", "toolResult", "system", None, 3, _Str("toolResult"), _Str("user"), "(absent)"]
BLOCKS = [{"type": "toolCall", "id": "a"}, {"type": "toolCall", "id": "b"}, {"type": "toolCall"},
          {"type": "toolCall", "id": None}, {"type": "text", "text": "x"}, "s", 3, StandIn({"type": "toolCall", "id": "a"})]


@st.composite
def _lists(draw: Any) -> Any:
    messages = []
    for _ in range(draw(st.integers(0, 9))):
        message: dict[str, Any] = {}
        role = draw(st.sampled_from(ROLES))
        if role != "(absent)":
            message["role"] = role
        if draw(st.booleans()):
            message["toolCallId"] = draw(st.sampled_from(["a", "b", None, 7]))
        content = draw(st.sampled_from(["list", "tuple", "none", "absent"]))
        blocks = draw(st.lists(st.sampled_from(BLOCKS), max_size=3))
        if content == "list":
            message["content"] = blocks
        elif content == "tuple":
            message["content"] = tuple(blocks)
        elif content == "none":
            message["content"] = None
        messages.append(draw(st.sampled_from([dict, StandIn]))(message))
    ids = [draw(st.sampled_from([None, "", "e1", "e2"])) for _ in range(len(messages) + draw(st.integers(-2, 1)))]
    calls = draw(st.sampled_from([None, set(), {"a"}, frozenset({"b", None})]))
    return messages, ids, calls


def _outcome(run: Any) -> Any:
    try:
        return run()
    except Exception as error:  # noqa: BLE001 - both routes must raise the same
        return type(error), str(error)


@needs_c
@settings(max_examples=600, deadline=None)
@given(_lists())
def test_tool_pairing_equal_on_generated_lists(case: Any) -> None:
    messages, ids, calls = case
    got = _outcome(lambda: _tool_pairing_warnings(messages, ids, calls))
    saved = context_module._cprep
    context_module._cprep = None
    try:
        expected = _outcome(lambda: _tool_pairing_warnings(messages, ids, calls))
    finally:
        context_module._cprep = saved
    assert got == expected


@needs_c
def test_tool_pairing_raises_what_python_raises() -> None:
    unhashable = [{"role": "assistant", "content": [{"type": "toolCall", "id": ["x"]}]}, {"role": "toolResult"}]
    with pytest.raises(TypeError):
        slim._cprep.tool_pairing(unhashable, None, StandIn)
    result = [{"role": "toolResult", "toolCallId": ["x"]}]
    with pytest.raises(TypeError):
        slim._cprep.tool_pairing(result, None, StandIn)


@needs_c
@settings(max_examples=300, deadline=None)
@given(_lists())
def test_role_counts_equal_on_generated_lists(case: Any) -> None:
    messages = case[0]
    got = slim._cprep.role_counts(messages, StandIn)
    if any(type(m.get("role")) is _Str for m in messages):
        assert got is None
        return
    assert got == (any(m.get("role") == "system" for m in messages), sum(1 for m in messages if m.get("role") == "user"))


@needs_c
def test_branch_scan_hands_back_what_it_does_not_read() -> None:
    entry = Entry("message", "e1", None, "", {"message": {"role": _Str("user")}}, 1, 0, 10)
    assert slim._cprep.branch_scan(["e1"], {"e1": entry}, Entry, StandIn) is None
    odd = Entry("message", "e1", None, "", _Mapping({"message": {"role": "user"}}), 1, 0, 10)
    assert slim._cprep.branch_scan(["e1"], {"e1": odd}, Entry, StandIn) is None
    plain = Entry("message", "e1", None, "", {"message": {"role": "user"}}, 1, 0, 10)
    compaction = Entry("compaction", "c1", "e1", "", {}, 2, 10, 10)
    assert slim._cprep.branch_scan(["e1", None, "zz", "c1"], {"e1": plain, "c1": compaction}, Entry, StandIn) == \
        (3, {"e1": 1})


class _Mapping(dict):  # type: ignore[type-arg]
    pass


PARENTS = ["(previous)", "(previous)", "(previous)", None, "", "e1", "e3", "zz", 7]


@st.composite
def _sessions(draw: Any) -> list[bytes]:
    """A small version-3 session: mostly a chain (each parent the entry before), with ids drawn
    from a small pool (so some repeat), odd parents, entries without ids, compactions and
    non-message entries."""
    import json

    lines = [json.dumps({"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"})]
    previous: Any = draw(st.sampled_from([None, None, "zz", "e4"]))  # the first parent
    for k in range(draw(st.integers(1, 8))):
        eid = draw(st.sampled_from([f"e{k}"] * 4 + ["e1", None, 5]))
        parent = draw(st.sampled_from(PARENTS)) if k else previous
        parent = previous if parent == "(previous)" else parent
        kind = draw(st.sampled_from(["user", "assistant", "user", "compaction", "model_change", "custom_message",
                                     "branch_summary", "context_edit", "message without content"]))
        entry: dict[str, Any] = {"id": eid, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z"}
        if kind == "compaction":
            entry.update(type="compaction", summary="s", firstKeptEntryId=draw(st.sampled_from(["e0", "e2"])), tokensBefore=10)
        elif kind == "model_change":
            entry.update(type="model_change", provider="p", modelId="m")
        elif kind == "custom_message":
            entry.update(type="custom_message", customType="c", content="x", display=True)
        elif kind == "branch_summary":
            entry.update(type="branch_summary", summary="s", fromId="e0")
        elif kind == "context_edit":
            entry.update(type="context_edit", targetId=draw(st.sampled_from(["e0", "e1"])), replacement={"role": "user", "content": "r"})
        elif kind == "message without content":
            content = draw(st.sampled_from([None, "(absent)", "text"]))
            message: dict[str, Any] = {"role": draw(st.sampled_from(["assistant", "user", "toolResult"])), "timestamp": k}
            if content != "(absent)":
                message["content"] = content
            entry.update(type="message", message=message)
        else:
            entry.update(type="message", message={"role": kind, "content": [{"type": "text", "text": f"t{k}"}], "timestamp": k})
        lines.append(json.dumps(entry))
        previous = eid
    return [line.encode() + b"\n" for line in lines]


@needs_c
@settings(max_examples=400, deadline=None)
@given(_sessions())
def test_one_chain_path_equals_the_walk_on_generated_sessions(lines: list[bytes]) -> None:
    """`_cprep.linear_path` (a session that is one chain: its whole list, no id lookups) and the
    branch scan over `SessionContext.chain` give the contexts, facts and turn numbers of the
    walk by ids, and `_cprep.context_messages` the messages of the Python loop, on both
    readers; a session is taken as one chain exactly when the walk from
    its last entry meets all its entries, no id repeats and the first entry's parent is no id."""
    import tempfile

    from ds4sessions.agents.pi.context import branch_path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.jsonl"
        path.write_bytes(b"".join(lines))
        for reader in (_reader_of(path), _slim_reader(path)):
            saved = live._c, context_module._cprep
            live._c = context_module._cprep = None
            try:
                walked = build_context(reader)
                expected = _branch_scan(walked, reader), _full_facts(walked, reader)
                walk = branch_path(reader)
            finally:
                live._c, context_module._cprep = saved
            got = build_context(reader)
            assert got == walked and got.warnings == walked.warnings
            assert [type(m) for m in got.messages] == [type(m) for m in walked.messages]
            assert (_branch_scan(got, reader), _full_facts(got, reader)) == expected
            assert branch_path(reader) == walk
            ids = [e.id for e in reader.entries]
            root_parent = reader.entries[0].parent_id
            one_chain = len(walk) == len(reader.entries) and None not in ids and len(set(ids)) == len(ids) and (
                root_parent is None or root_parent not in ids  # (else a cycle through the whole file: walked)
            )
            assert (got.chain is not None) == one_chain
            assert walked.chain is None


def _slim_reader(path: Path) -> Any:
    reader = SlimReader(path, StandInLedger(CharsV1Counter(), message_parts))
    slim.read_whole_file(reader, path)
    return reader


@needs_c
def test_one_chain_is_taken_without_id_lookups_and_a_cycle_is_not(tmp_path: Path) -> None:
    """The chain answer is the session's entry list (a copy) for a plain session; a first entry
    whose parent is a later entry's id (a cycle through the whole file) is walked instead."""
    def entry(eid: str, parent: str | None) -> Entry:
        return Entry("message", eid, parent, "", StandIn({"role": "user", "content": "x"}), 1, 0, 1)

    a, b, c = entry("a", None), entry("b", "a"), entry("c", "b")
    assert slim._cprep.linear_path([a, b, c], {"a": a, "b": b, "c": c}, Entry) == [a, b, c]
    assert slim._cprep.linear_path([entry("a", "zz"), b], {"a": a, "b": b}, Entry) is not None  # (a missing parent: a root)
    cyclic = entry("a", "c")
    assert slim._cprep.linear_path([cyclic, b, c], {"a": cyclic, "b": b, "c": c}, Entry) is None
    assert slim._cprep.linear_path([a, c], {"a": a, "c": c}, Entry) is None  # (c's parent is not a)
    assert slim._cprep.linear_path([a, b, b], {"a": a, "b": b}, Entry) is None  # (an id twice)
    assert slim._cprep.linear_path([], {}, Entry) is None
