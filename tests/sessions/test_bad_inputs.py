"""The bad inputs of shared/bad-inputs, reader and context side (each `.expected.md` gives the rule).

Token counts, cost and lineage totals (B06 cost, B09, B10) belong to the provider-totals code;
here B09/B10 only check that the reader keeps usage exactly as stored (a missing usage stays
missing, zeros stay zeros). B13 checks that a file with a 40 KB line reads intact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ds4sessions.ingest.diagnostics import Problem
from ds4sessions.agents.pi import PiSessionReader, build_context, read_session


@pytest.fixture(scope="module")
def bad(shared_dir: Path) -> Path:
    return shared_dir / "bad-inputs"


def _lines(path: Path) -> list[tuple[int, int, bytes]]:
    """Complete lines as the tailer delivers them; a torn tail is left out."""
    out, offset = [], 0
    for line_no, line in enumerate(path.read_bytes().split(b"\n")[:-1], start=1):
        out.append((line_no, offset, line))
        offset += len(line) + 1
    return out


def _texts(messages: list[dict]) -> list[str]:
    return [m["content"][0]["text"] if "content" in m else m["summary"] for m in messages]


# B01 — unterminated last line


def test_b01_final_read_reports_torn_tail(bad: Path) -> None:
    path = bad / "B01-torn-tail.jsonl"
    session = read_session(path)
    assert session.status == "session"
    assert [e.id for e in session.entries] == ["a1000001", "b2000002"]
    assert session.diagnostics.count(Problem.MALFORMED) == 0
    [torn] = session.diagnostics.of_kind(Problem.PARTIAL_LAST_LINE)
    assert torn.line_no == 4
    assert "162 bytes" in torn.message
    assert session.end_offset == path.stat().st_size - 162  # committed offset: end of line 3
    assert session.leaf_id == "b2000002"  # an append must name the last *valid* entry as parent
    assert [m["role"] for m in build_context(session).messages] == ["user", "assistant"]


def test_b01_pending_tail_then_completion_parses_once(bad: Path) -> None:
    path = bad / "B01-torn-tail.jsonl"
    data = path.read_bytes()
    reader = PiSessionReader(path)
    assert len(reader.feed(_lines(path))) == 2
    reader.set_pending_tail(len(data) - reader.end_offset)
    assert reader.diagnostics.pending is not None
    assert (reader.diagnostics.pending.line_no, reader.diagnostics.pending.length) == (4, 162)
    assert reader.diagnostics.total == 0  # pending while the file may grow: not malformed
    fragment = data[reader.end_offset :]
    completed = fragment + b'me alpha.txt to a.txt."}],"timestamp":1768035605000}}'
    new = reader.feed([(4, reader.end_offset, completed)])
    assert [e.id for e in new] == ["c3000003"]
    assert [e.id for e in reader.entries] == ["a1000001", "b2000002", "c3000003"]
    assert reader.diagnostics.pending is None and reader.diagnostics.total == 0


def test_b01_variant_complete_object_without_newline(bad: Path, tmp_path: Path) -> None:
    """Valid JSON missing only the newline: an entry at the final read (Pi parses it too)."""
    data = (bad / "B01-torn-tail.jsonl").read_bytes()
    head = data[: data.rindex(b"\n") + 1]
    whole = json.dumps({"type": "message", "id": "c3000003", "parentId": "b2000002",
                        "timestamp": "2026-01-10T09:00:05.000Z",
                        "message": {"role": "user", "content": "Now rename them.", "timestamp": 1768035605000}})
    path = tmp_path / "variant.jsonl"
    path.write_bytes(head + whole.encode())
    session = read_session(path)
    assert [e.id for e in session.entries] == ["a1000001", "b2000002", "c3000003"]
    assert session.entries[-1].length == len(whole)  # no newline counted
    assert session.diagnostics.total == 0


# B02 — corrupt header


def test_b02_header_invalid_salvage_read_only(bad: Path) -> None:
    session = read_session(bad / "B02-corrupt-header.jsonl")
    assert session.status == "not_a_session"
    assert session.header is None and session.session_id is None
    [diag] = session.diagnostics.of_kind(Problem.NOT_A_SESSION)
    assert diag.line_no == 1
    assert diag.message.startswith("header invalid at line 1")
    assert "version 3 assumed" in diag.message and "never append" in diag.message
    assert [(e.id, e.role) for e in session.entries] == [("a1000001", "user"), ("b2000002", "assistant")]
    assert len(build_context(session).messages) == 2


def test_b02_zero_byte_file_is_empty_session(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    session = read_session(path)
    assert session.status == "empty"
    assert session.diagnostics.total == 0 and session.entries == []


# B03 — metadata entry as leaf


def test_b03_metadata_leaf(bad: Path) -> None:
    session = read_session(bad / "B03-metadata-leaf.jsonl")
    context = build_context(session)
    assert context.leaf_id == "a1000007"
    assert context.branch_entry_ids == ["a1000001", "a1000002", "a1000007"]
    assert _texts(context.messages) == ["Create a config file.", "Created config.toml."]
    assert context.session_name == "config work"
    [warning] = context.warnings
    assert warning.kind == "metadata_leaf"
    assert warning.entry_ids == ("a1000003", "a1000004", "a1000005", "a1000006")
    assert "4 newer message entries (a1000003–a1000006) are on an inactive branch" in warning.message


def test_b03_label_appended_at_leaf_keeps_context(bad: Path, tmp_path: Path) -> None:
    source = bad / "B03-metadata-leaf.jsonl"
    before = build_context(read_session(source))
    leaf = read_session(source).leaf_id
    label = {"type": "label", "id": "a1000008", "parentId": leaf, "timestamp": "2026-01-10T09:04:00.000Z",
             "targetId": "a1000004", "label": "ds4:pin"}
    path = tmp_path / "B03.jsonl"
    path.write_bytes(source.read_bytes() + json.dumps(label).encode() + b"\n")
    after = build_context(read_session(path))
    assert leaf == "a1000007"
    assert after.messages == before.messages
    assert after.labels == {"a1000004": "ds4:pin"}


# B04 — compaction between a tool call and its result


def test_b04_only_newest_compaction_counts(bad: Path) -> None:
    context = build_context(read_session(bad / "B04-compaction-inside-tool-pair.jsonl"))
    assert context.leaf_id == "d000000b"
    assert context.message_entry_ids == [
        "d000000a", "d0000004", "d0000006", "d0000007", "d0000008", "d0000009", "d000000b"
    ]
    assert context.messages[0]["role"] == "compactionSummary"
    assert context.messages[0]["summary"].startswith("S2: ")
    assert context.messages[2]["toolCallId"] == "call_du1"
    assert "d0000005" not in context.message_entry_ids  # older compaction: no message
    assert context.warnings == []  # the result directly follows its call in context


# B06 — fork copies the parent's entries


def test_b06_child_is_self_contained(bad: Path) -> None:
    child = read_session(bad / "B06-fork-child.jsonl")
    parent = read_session(bad / "B06-fork-parent.jsonl")
    assert child.parent_session == "/tmp/demo-sessions/B06-fork-parent.jsonl"
    context = build_context(child)
    assert context.leaf_id == "g0000007"
    assert context.message_entry_ids == ["g0000003", "g0000002", "g0000004", "g0000005", "g0000006", "g0000007"]
    assert context.messages[0]["summary"] == "Refactor planned in two steps."
    assert [e.id for e in child.entries if e.type == "compaction"] == ["g0000003"]
    shared = set(child.by_id) & set(parent.by_id)
    assert shared == {"g0000001", "g0000002", "g0000003", "g0000004", "g0000005"}
    for entry_id in shared:  # same id, same timestamp, same content: a copy, not a new turn
        assert child.by_id[entry_id].raw == parent.by_id[entry_id].raw


# B08 — unknown entry types in the parent chain


def test_b08_unknown_types_are_opaque_nodes(bad: Path) -> None:
    session = read_session(bad / "B08-unknown-entry-types.jsonl")
    context = build_context(session)
    assert context.leaf_id == "j0000006"
    assert context.branch_entry_ids == ["j0000001", "j0000002", "j0000003", "j0000004", "j0000005", "j0000006"]
    assert context.message_entry_ids == ["j0000002", "j0000003", "j0000005", "j0000006"]
    assert context.messages[0]["content"][0]["text"] == "Explain the build script."
    assert session.diagnostics.unknown_types == {"title_change": 1, "service_tier_change": 1}
    assert [w.message for w in context.warnings] == [
        "entry j0000001 (title_change): not in context (unknown type)",
        "entry j0000004 (service_tier_change): not in context (unknown type)",
    ]
    assert session.by_id["j0000004"].raw["serviceTier"] == "priority"
    assert "unknown entry types (kept, not in context): service_tier_change ×1, title_change ×1" in (
        session.diagnostics.summary()
    )


# B09 / B10 — usage kept exactly as stored


def test_b09_usage_kept(bad: Path) -> None:
    session = read_session(bad / "B09-cacheread-in-context.jsonl")
    usage = session.by_id["k0000002"].message["usage"]
    assert {k: usage[k] for k in ("input", "output", "cacheRead", "cacheWrite", "totalTokens")} == {
        "input": 120, "output": 64, "cacheRead": 51200, "cacheWrite": 0, "totalTokens": 51384
    }
    assert usage["cost"]["cacheRead"] == 0.01536
    assert build_context(session).messages[1]["usage"] is usage


def test_b10_missing_zero_and_partial_usage(bad: Path) -> None:
    session = read_session(bad / "B10-usage-missing-or-zero.jsonl")
    assert session.diagnostics.total == 0
    messages = {e.id: e.message for e in session.entries}
    assert messages["l0000002"]["usage"]["totalTokens"] == 10090
    assert messages["l0000004"]["usage"]["totalTokens"] == 0
    assert set(messages["l0000004"]["usage"]) == {"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"}
    assert "usage" not in messages["l0000006"]  # missing stays missing, not zero
    assert messages["l0000008"]["stopReason"] == "aborted"
    assert messages["l0000008"]["usage"]["output"] == 3
    context = build_context(session)
    assert len(context.messages) == 8  # aborted/zero-usage messages stay in context (only adapters drop them)


# B13 — long lines


def test_b13_long_line_reads_intact(bad: Path) -> None:
    path = bad / "B13-huge-session-sample.jsonl"
    session = read_session(path)
    assert [e.id for e in session.entries] == ["o0000001", "o0000002", "o0000003", "o0000004"]
    result = session.by_id["o0000003"]
    assert result.length == 40251
    raw_line = path.read_bytes()[result.offset : result.offset + result.length]
    assert json.loads(raw_line)["message"] == result.message
    assert len(result.message["content"][0]["text"]) > 39_000
    assert session.diagnostics.total == 0
    assert len(build_context(session).messages) == 4
