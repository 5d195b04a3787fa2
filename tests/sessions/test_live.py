"""The live session: tail → read → context → counts, driven with real files."""

from __future__ import annotations

import shutil
from pathlib import Path

from ds4sessions.ingest.live import LiveSession, open_snapshot


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_snapshot_of_a_pi_session(sample01: Path) -> None:
    snap = open_snapshot(sample01, exact=True)
    assert snap.model_key == "anthropic/claude-sonnet-4-5"
    assert snap.context_window == 200_000
    assert len(snap.context.messages) == 19
    assert snap.provider is not None
    # The anchor is the last assistant reply; its prompt = input + cacheRead + cacheWrite.
    last = snap.context.messages[snap.provider.anchor_index]
    usage = last["usage"]
    assert snap.provider.prompt_tokens == usage["input"] + usage["cacheRead"] + usage["cacheWrite"]
    assert snap.provider.anchor_index == 18 and snap.provider.later_messages == 0
    assert snap.exact is not None and snap.exact.counter == "cl100k"
    assert sum(t.tokens for t in snap.turns) == sum(snap.exact.message_tokens)
    assert [t.index for t in snap.turns] == [0, 1, 2, 3]
    assert not snap.system_inferred


def test_one_append_counts_only_the_new_message(tmp_path: Path, sample01: Path) -> None:
    lines = _lines(sample01)
    target = tmp_path / "s.jsonl"
    target.write_bytes(b"".join(lines[:-1]))
    live = LiveSession(target)
    first = live.refresh()
    assert first is not None and live.refresh() is None  # nothing new, no snapshot
    counted = live._fast.counted
    with target.open("ab") as f:
        f.write(lines[-1])
    second = live.refresh()
    assert second is not None and second.version == first.version + 1
    assert len(second.context.messages) == len(first.context.messages) + 1
    assert live._fast.counted == counted + 1
    assert target.read_bytes() == b"".join(lines)  # never written by us


def test_torn_line_waits_for_its_newline(tmp_path: Path, sample01: Path) -> None:
    lines = _lines(sample01)
    target = tmp_path / "s.jsonl"
    target.write_bytes(b"".join(lines[:-1]) + lines[-1][:50])
    live = LiveSession(target)
    snap = live.refresh()
    assert snap.pending_bytes == 50 and len(snap.context.messages) == 18
    with target.open("ab") as f:
        f.write(lines[-1][50:])
    snap = live.refresh()
    assert snap.pending_bytes == 0 and len(snap.context.messages) == 19


def test_replacement_by_rename_reloads(tmp_path: Path, sample01: Path, shared_dir: Path) -> None:
    target = tmp_path / "s.jsonl"
    shutil.copy(sample01, target)
    live = LiveSession(target)
    assert len(live.refresh().context.messages) == 19
    other = tmp_path / "other.jsonl"
    shutil.copy(shared_dir / "sessions-pi" / "03-compaction.jsonl", other)
    other.replace(target)
    snap = live.refresh()
    assert len(snap.context.messages) == 12
    assert snap.context.messages[1]["role"] == "compactionSummary"


def test_inferred_system_prompt_for_0x_sessions(shared_dir: Path) -> None:
    snap = open_snapshot(shared_dir / "sessions-pi" / "07-old-scope-0.73.jsonl")
    assert snap.system_inferred
    row = snap.breakdown.rows[0]
    assert row.id == "system_prompt" and row.inferred and row.tokens > 0


def test_provider_anchor_after_compaction(shared_dir: Path) -> None:
    snap = open_snapshot(shared_dir / "sessions-pi" / "03-compaction.jsonl")
    assert snap.provider is not None
    anchor = snap.context.messages[snap.provider.anchor_index]
    assert anchor["role"] == "assistant" and anchor["stopReason"] not in ("aborted", "error")
    # The anchor is the newest valid reply; the later messages are estimated.
    assert snap.provider.anchor_index == len(snap.context.messages) - 1


def test_turns_keep_their_branch_numbers_after_compaction(shared_dir: Path) -> None:
    snap = open_snapshot(shared_dir / "sessions-pi" / "03-compaction.jsonl")
    prompts = [t for t in snap.turns if t.index]
    assert [t.index for t in prompts] == [6]  # six prompts on the branch; the last one is kept
    assert prompts[0].prompt == "Document it in the README."
    assert snap.turns[0].index == 0 and snap.turns[0].prompt == "(before the first prompt)"
