"""The incremental append path of `LiveSession` equals a full rebuild, line by line.

Every sample session is replayed one line at a time into a growing file; after each line the
live snapshot (extended from the previous one when the append only extends the branch) is
compared with a fresh full read of the same bytes (`open_snapshot`) and with a twin
`LiveSession` forced to rebuild in full: context, breakdowns (chars-v1 and cl100k), provider
view and turns must be equal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ds4sessions.agents.pi.live import LiveSession, Snapshot, open_snapshot

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pi" / "01-tools-and-image.jsonl"


def _breakdown(b: Any) -> tuple[Any, ...]:
    return (b.counter, b.rows, b.segments, b.message_tokens, b.estimate, b.context_window, b.unattributed, b.free)


def _same(snap: Snapshot, ref: Snapshot, exact: bool) -> None:
    assert snap.context.to_json() == ref.context.to_json()
    assert snap.context.message_entry_ids == ref.context.message_entry_ids
    assert snap.context.warnings == ref.context.warnings
    assert snap.context.context_edits == ref.context.context_edits
    assert (snap.model_key, snap.model, snap.system_inferred) == (ref.model_key, ref.model, ref.system_inferred)
    assert _breakdown(snap.breakdown) == _breakdown(ref.breakdown)
    if exact:
        assert snap.exact is not None and ref.exact is not None
        assert _breakdown(snap.exact) == _breakdown(ref.exact)
    assert snap.provider == ref.provider
    assert snap.turns == ref.turns


def _replay(
    source: Path, tmp: Path, *, twin_every: int = 1, reference_every: int = 1, refine_every: int = 1,
    prepare_every: int = 0,
) -> dict[str, int]:
    """Append `source` line by line to a live session; compare with the twin every `twin_every`
    lines and with `open_snapshot` every `reference_every` lines (and at the last line); refine
    every `refine_every` lines; copy ahead for the next append (`LiveSession.prepare`, as the app
    does after a paint) every `prepare_every` lines (0: never). Returns how many steps extended
    the previous snapshot (and, with `prepare_every`, how many prepared copies were used)."""
    lines = source.read_bytes().splitlines(keepends=True)
    live_path, twin_path, ref_path = tmp / "live.jsonl", tmp / "twin.jsonl", tmp / "ref.jsonl"
    for p in (live_path, twin_path):
        p.write_bytes(b"")
    live, twin = LiveSession(live_path), LiveSession(twin_path)
    stats = {"steps": 0, "extended": 0, "exact_extended": 0, "compared": 0}
    previous: Snapshot | None = None
    exact_before = None
    for number, raw in enumerate(lines, start=1):
        for p in (live_path, twin_path):
            with p.open("ab") as f:
                f.write(raw)
        snap = live.refresh()
        last = number == len(lines)
        if last and not raw.endswith(b"\n"):  # a torn last line: the final read takes it
            snap = live.finish() or snap
        assert snap is not None
        stats["steps"] += 1
        if previous is not None and previous._lineage and snap._lineage and previous._lineage.epoch == snap._lineage.epoch:
            stats["extended"] += 1
        previous = snap
        checked = number % twin_every == 0 or last
        if checked:
            ref_twin = twin.refresh(force=True)
            if last and not raw.endswith(b"\n"):
                ref_twin = twin.finish() or ref_twin
            assert ref_twin is not None
            _same(snap, ref_twin, exact=False)
        refine = number % refine_every == 0 or last
        if refine:
            share = live._exact_share
            counted = live._exact.counted
            refined = live.refine(snap)
            if share is not None and share[0] == snap._lineage.epoch:
                stats["exact_extended"] += 1
                # only the messages after the last refined prefix were candidates for counting
                assert live._exact.counted - counted <= len(snap.context.messages) - len(share[1].attribution.message_tokens)
            exact_before = refined
            if checked:
                _same(refined, twin.refine(ref_twin), exact=True)
        if prepare_every and number % prepare_every == 0:
            live.prepare()
        if number % reference_every == 0 or last:
            ref_path.write_bytes(b"".join(lines[:number]))
            _same(snap, open_snapshot(ref_path), exact=False)
            if refine:
                assert exact_before is not None
                _same(exact_before, open_snapshot(ref_path, exact=True), exact=True)
            stats["compared"] += 1
    if prepare_every:
        stats["copies_prepared_and_used"] = live._spares.taken
    return stats


def test_fixture_appended_line_by_line(tmp_path: Path) -> None:
    stats = _replay(FIXTURE, tmp_path)
    # 23 lines: the header, then 22 entries that each extend the branch (the first entry
    # has no previous leaf, so it is read in full like the header).
    assert stats == {"steps": 23, "extended": 21, "exact_extended": 21, "compared": 23}


def test_copies_prepared_ahead_give_the_same_snapshots(tmp_path: Path) -> None:
    """`LiveSession.prepare` after every line: each append extends prepared copies of the
    context's four lists and both counters' tokens and segments, and every snapshot still equals
    the full rebuild's (a copy used for the wrong list, or extended twice, would show here)."""
    stats = _replay(FIXTURE, tmp_path, prepare_every=1)
    # 21 extended appends after a prepare: 4 context lists + 3 per counter (segments, tokens,
    # the breakdown's segments) each; the first extension follows the full read of entry 1,
    # refined: prepared too
    assert stats == {"steps": 23, "extended": 21, "exact_extended": 21, "compared": 23, "copies_prepared_and_used": 21 * 10}
    (tmp_path / "half").mkdir()
    half = _replay(FIXTURE, tmp_path / "half", prepare_every=2)
    assert half["copies_prepared_and_used"] == 10 * 11  # lines 3, 5, ..., 23 follow a prepare


def test_refine_skipping_snapshots_extends_the_last_refined(tmp_path: Path) -> None:
    stats = _replay(FIXTURE, tmp_path, refine_every=4)
    assert stats == {"steps": 23, "extended": 21, "exact_extended": 5, "compared": 23}


TS = "2026-01-01T00:00:00.000Z"
LARGE = "99-large.jsonl"  # replayed by test_large_sample_appended_line_by_line (slow)


def _write(path: Path, entries: list[dict[str, Any]]) -> Path:
    header = {"type": "session", "version": 3, "id": "inc", "timestamp": TS, "cwd": "/tmp/inc"}
    path.write_text("".join(json.dumps(e) + "\n" for e in [header, *entries]), encoding="utf-8")
    return path


def _msg(entry_id: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": TS, "message": message}


def _user(entry_id: str, parent: str | None, text: str) -> dict[str, Any]:
    return _msg(entry_id, parent, {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1})


def _assistant(entry_id: str, parent: str, content: list[dict[str, Any]], prompt: int) -> dict[str, Any]:
    usage = {"input": prompt, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": prompt + 20}
    return _msg(entry_id, parent, {"role": "assistant", "content": content, "provider": "anthropic",
                                   "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "stop", "timestamp": 2})


def _meta(kind: str, entry_id: str, parent: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": entry_id, "parentId": parent, "timestamp": TS, **fields}


def test_edge_cases_of_the_incremental_path(tmp_path: Path) -> None:
    """Appends that extend the branch but change derived state, and appends that must rebuild."""
    call = {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.py"}}
    entries = [
        _meta("model_change", "m0", None, provider="anthropic", modelId="claude-sonnet-4-5"),
        _user("u1", "m0", "start"),
        # an edit of an entry that does not exist yet (reshaping: rebuilt in full)
        _meta("context_edit", "ce1", "u1", targetId="a9", replacement={"content": "edited later"}),
        _assistant("a1", "ce1", [call], 900),  # the first valid measurement: system prompt inferred
        _msg("t1", "a1", {"role": "toolResult", "toolCallId": "c1", "toolName": "read",
                          "content": [{"type": "text", "text": "x = 1\n"}], "isError": False, "timestamp": 3}),
        _msg("t2", "t1", {"role": "toolResult", "toolCallId": "zz", "toolName": "read",
                          "content": [{"type": "text", "text": "orphan"}], "isError": False, "timestamp": 3}),
        _meta("weird", "w1", "t2"),  # unknown type: a warning
        _meta("label", "l1", "w1", targetId="u1", label="start"),
        _meta("session_info", "si1", "l1", name="  demo  "),
        _meta("thinking_level_change", "tl1", "si1", thinkingLevel="high"),
        _user("a9", "tl1", "original"),  # the edit above applies to it
        _assistant("a2", "a9", [{"type": "text", "text": "done"}], 1200),
        _msg("sys1", "a2", {"role": "system", "content": "You are terse.", "timestamp": 4}),  # no more inference
        _user("u3", "sys1", "next"),
        _user("u1", "u3", "an old id reused"),  # duplicate id: rebuilt in full
        _assistant("a3", "u1", [{"type": "text", "text": "ok"}], 1500),
        _user("b1", "a2", "another branch"),  # branch switch: rebuilt in full
        _meta("custom", "cu1", "a3"),  # back on the first branch, metadata leaf: b1 is newer
        _meta("label", "lb3", "cu1", targetId="a3", label="here"),  # still a metadata leaf
        _meta("model_change", "m1", "lb3", provider="openai", modelId="gpt-5"),
        _user("u4", "m1", "fine"),  # a message leaf: the warning goes
        _meta("label", "lb4", "u4", targetId="u1", label=""),  # clears a label
    ]
    stats = _replay(_write(tmp_path / "edge.jsonl", entries), tmp_path)
    final = open_snapshot(tmp_path / "edge.jsonl")
    assert [w.kind for w in final.context.warnings] == ["cycle", "unknown_type", "tool_pairing"]
    assert final.context.session_name == "demo" and final.context.thinking_level == "high"
    assert final.context.model == {"provider": "openai", "modelId": "gpt-5"}
    edited = final.context.messages[final.context.message_entry_ids.index("a9")]
    assert edited["content"] == "edited later"
    assert final.context.labels == {"a3": "here"}
    # 23 lines; rebuilt in full: header, m0 (first entry), ce1, the reused id u1, b1, cu1
    assert stats == {"steps": 23, "extended": 17, "exact_extended": 17, "compared": 23}


def test_metadata_leaf_warning_follows_the_leaf(tmp_path: Path) -> None:
    entries = [
        _user("u1", None, "one"),
        _assistant("a1", "u1", [{"type": "text", "text": "1"}], 100),
        _user("b1", "u1", "a branch"),
        _meta("label", "l1", "a1", targetId="a1", label="x"),  # leaf on the first branch
        _meta("session_info", "s1", "l1", name="n"),
        _meta("custom", "c1", "s1"),
    ]
    stats = _replay(_write(tmp_path / "meta.jsonl", entries), tmp_path)
    final = open_snapshot(tmp_path / "meta.jsonl")
    assert [(w.kind, w.entry_ids) for w in final.context.warnings] == [("metadata_leaf", ("b1",))]
    assert "(custom)" in final.context.warnings[0].message
    assert stats == {"steps": 7, "extended": 3, "exact_extended": 3, "compared": 7}


def test_root_parent_appearing_rebuilds(tmp_path: Path) -> None:
    entries = [
        _user("u1", "ghost", "the root's parent is missing"),
        _assistant("a1", "u1", [{"type": "text", "text": "1"}], 100),
        _user("ghost", "a1", "now it exists: the chain loops"),
        _user("u2", "ghost", "after the loop"),
    ]
    stats = _replay(_write(tmp_path / "ghost.jsonl", entries), tmp_path)
    final = open_snapshot(tmp_path / "ghost.jsonl")
    assert [w.kind for w in final.context.warnings] == ["cycle"]
    assert stats == {"steps": 5, "extended": 2, "exact_extended": 2, "compared": 5}


def _samples() -> list[str]:
    from tests.conftest import SHARED

    if SHARED is None:
        return ["(none)"]
    return sorted(p.name for p in (SHARED / "sessions-pi").glob("*.jsonl") if p.name != LARGE)


@pytest.mark.parametrize("name", _samples())
def test_shared_sample_appended_line_by_line(shared_dir: Path, tmp_path: Path, name: str) -> None:
    source = shared_dir / "sessions-pi" / name
    stats = _replay(source, tmp_path, prepare_every=2)  # half the appends extend prepared copies
    assert stats["compared"] == stats["steps"] == len(source.read_bytes().splitlines())
    assert stats["extended"] == EXTENDED[name]
    assert stats["copies_prepared_and_used"] > 0


#: Appends that extended the previous snapshot, per sample (the rest rebuilt in full: the header
#: and first entry, compactions, branch switches, context edits).
EXTENDED = {
    "01-tools-and-image.jsonl": 21,
    "02-abort-error-bash.jsonl": 25,
    "03-compaction.jsonl": 42,
    "04-tree-branches-labels.jsonl": 33,
    "05-extensions-models.jsonl": 31,
    "06-fork.jsonl": 12,
    "07-old-scope-0.73.jsonl": 23,
    "08-legacy-v1.jsonl": 11,
    "09-partial-last-line.jsonl": 21,
}


@pytest.mark.slow
def test_large_sample_appended_line_by_line(shared_dir: Path, tmp_path: Path) -> None:
    """99-large (2,501 lines, 19 compactions): every line appended and refined; compared with the
    full-rebuild twin every 5 lines and with a fresh `open_snapshot` every 250 (a full read of up
    to 30 MB each); the extended state carries forward, so a wrong step stays visible."""
    stats = _replay(shared_dir / "sessions-pi" / LARGE, tmp_path, twin_every=5, reference_every=250)
    assert stats == {"steps": 2501, "extended": 2480, "exact_extended": 2480, "compared": 11}


def test_refine_out_of_order_and_across_sessions(tmp_path: Path) -> None:
    """Refining an older snapshot after a newer one, or a snapshot of another `LiveSession`,
    counts in full instead of extending a share that does not fit."""
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    path, other_path, ref = tmp_path / "s.jsonl", tmp_path / "o.jsonl", tmp_path / "ref.jsonl"
    path.write_bytes(b"".join(lines[:-3]))
    other_path.write_bytes(b"".join(lines[:-1]))
    live, other = LiveSession(path), LiveSession(other_path)
    older = live.refresh()
    with path.open("ab") as f:
        f.write(b"".join(lines[-3:]))
    newer = live.refresh()
    assert older is not None and newer is not None
    assert newer._lineage.epoch == older._lineage.epoch  # extended
    live.refine(newer)
    ref.write_bytes(b"".join(lines[:-3]))
    _same(live.refine(older), open_snapshot(ref, exact=True), exact=True)
    foreign = other.refresh()
    assert foreign is not None
    ref.write_bytes(b"".join(lines[:-1]))
    _same(live.refine(foreign), open_snapshot(ref, exact=True), exact=True)
