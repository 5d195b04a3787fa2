"""The live session: tail → read → context → counts, driven with real files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ds4sessions.agents.pi.live import LiveSession, _c, open_snapshot


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


def test_usage_before_a_compaction_does_not_infer_the_system_prompt(tmp_path: Path) -> None:
    """Issue 17's held-back case: a reply measured 188k before a compaction; after it the context
    is a summary and one prompt: a few dozen tokens, not 188k (94%)."""
    import json

    ts = "2026-03-03T13:20:05.000Z"
    usage = {"input": 6, "output": 50, "cacheRead": 180_000, "cacheWrite": 8_000, "totalTokens": 188_056}
    lines = [
        {"type": "session", "version": 3, "id": "s-usage-before-compaction", "timestamp": ts, "cwd": "/tmp/x"},
        {"type": "model_change", "id": "m1", "parentId": None, "timestamp": ts, "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
        {"type": "message", "id": "u1", "parentId": "m1", "timestamp": ts, "message": {"role": "user", "content": "Read everything.", "timestamp": 1}},
        {"type": "message", "id": "a1", "parentId": "u1", "timestamp": ts, "message": {
            "role": "assistant", "content": [{"type": "text", "text": "Done."}], "provider": "anthropic",
            "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "stop", "timestamp": 2}},
        {"type": "compaction", "id": "c1", "parentId": "a1", "timestamp": ts, "summary": "Read the repo.",
         "firstKeptEntryId": "u1", "tokensBefore": 188_056},
        {"type": "message", "id": "u2", "parentId": "c1", "timestamp": ts, "message": {"role": "user", "content": "Now fix the test.", "timestamp": 3}},
    ]
    path = tmp_path / "usage-before-compaction.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    snap = open_snapshot(path)
    assert not snap.system_inferred and snap.provider is None
    # The kept reply a1 is in context, but its usage measured the pre-compaction context.
    assert [m["role"] for m in snap.context.messages] == ["compactionSummary", "user", "assistant", "user"]
    assert 10 < snap.best.estimate < 80, snap.best.estimate
    # The same file built by appends (the incremental path) agrees.
    live = LiveSession(tmp_path / "grown.jsonl")
    grown = tmp_path / "grown.jsonl"
    for line in path.read_bytes().splitlines(keepends=True):
        with grown.open("ab") as out:
            out.write(line)
        live.refresh()
    assert live.last is not None and not live.last.system_inferred
    assert live.last.best.estimate == snap.best.estimate


def test_turn_local_time_equals_astimezone_across_zones_and_dst_changes() -> None:
    """`_local_time` (a turn's time: one shared zone object per offset and name) equals
    `fromtimestamp(ms / 1000, utc).astimezone()` in value, ISO text, zone name and offset, at
    every half hour (and ±fractions of a millisecond) around two years of DST changes in zones
    with odd offsets; run in child processes so that TZ is set before anything reads it."""
    import os
    import subprocess
    import sys

    code = """
import datetime as dt, os, sys, time
time.tzset()
from ds4sessions.agents.pi.live import _local_time
bad = n = 0
for year in (2025, 2026):
    for month in (3, 4, 10, 11):
        base = dt.datetime(year, month, 1, tzinfo=dt.timezone.utc).timestamp() * 1000
        for k in range(31 * 48):
            for frac in (0, -0.3, 0.7):
                ms = base + k * 1_800_000 + frac
                a = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).astimezone()
                b = _local_time(ms)
                n += 1
                bad += (a, a.isoformat(), a.tzname(), a.utcoffset()) != (b, b.isoformat(), b.tzname(), b.utcoffset())
print(n, bad)
"""
    for zone in ("UTC", "America/New_York", "Australia/Lord_Howe", "America/St_Johns", "Asia/Kolkata"):
        if zone != "UTC" and not Path("/usr/share/zoneinfo", zone).exists():
            continue
        env = {**os.environ, "TZ": zone}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        n, bad = map(int, out.split())
        assert (n, bad) == (2 * 4 * 31 * 48 * 3, 0), zone


@pytest.mark.skipif(_c is None,
                    reason="the C extension _cprep is not built (or DS4TUI_PURE_PYTHON=1): nothing to compare")
def test_turn_local_time_in_c_equals_python_at_range_edges_and_across_zones() -> None:
    """`_cprep.local_time` (what the turns call) equals `_local_time_py` (fromtimestamp,
    localtime, astimezone): same value, ISO text and zone object, or None alike, for ints and
    floats at the ends of datetime's range (both sides of UTC), half-microsecond roundings,
    ints past 2**53, NaN and infinities; run in child processes, one per zone."""
    import os
    import subprocess
    import sys

    code = """
import random, time
time.tzset()
from ds4sessions.agents.pi.live import _c, _local_time, _local_time_py
assert _c is not None
edges = [253402300799999, 253402300800000, -62135596800000, -62135596800001, 0, -1, 1]
values = []
for e in edges:
    values += [e + d for d in range(-3, 4)] + [e + 0.0005, e - 0.0005, e + 0.0015, float(e)]
values += [2**53, 2**53 + 1, -2**53, -2**53 - 1, 10**30, -10**30, float("nan"), float("inf"), -float("inf"), 1e300]
rng = random.Random(7)
values += [rng.uniform(-7e13, 2.6e14) for _ in range(20000)] + [rng.randrange(-63 * 10**12, 254 * 10**12) for _ in range(20000)]
values += [round(rng.uniform(0, 2e12), 4) for _ in range(20000)]
bad = nones = 0
for v in values:
    a, b = _local_time(v), _local_time_py(v)
    nones += a is None
    if a != b or (a is not None and (a.isoformat(), a.tzinfo) != (b.isoformat(), b.tzinfo)) or (a is None) != (b is None):
        bad += 1
print(len(values), nones, bad)
"""
    for zone in ("UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago", "Australia/Lord_Howe", "America/St_Johns"):
        if zone != "UTC" and not Path("/usr/share/zoneinfo", zone).exists():
            continue
        env = {**os.environ, "TZ": zone}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        n, nones, bad = map(int, out.split())
        assert bad == 0 and nones >= 20, (zone, n, nones, bad)


def test_force_reads_the_file_again_from_its_start(sample01: Path, tmp_path: Path) -> None:
    """`refresh(force=True)` (the TUI's `r`) reads the whole file again: a rewrite in place that
    kept the size and the modification time is invisible to the tail, not to a re-read."""
    import os

    path = tmp_path / sample01.name
    path.write_bytes(sample01.read_bytes())
    live = LiveSession(path)
    first = live.refresh()
    assert first is not None and first.model_key == "anthropic/claude-sonnet-4-5"
    stat = path.stat()
    data = path.read_bytes()
    assert data.count(b"claude-sonnet-4-5") > 0
    path.write_bytes(data.replace(b"claude-sonnet-4-5", b"claude-sonnet-4-0"))  # same length
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size
    assert live.refresh() is None  # the tail sees nothing new
    again = live.refresh(force=True)
    assert again is not None and again.model_key == "anthropic/claude-sonnet-4-0"
    assert again.context.messages == open_snapshot(path).context.messages
    assert again.lineage is not None and again.lineage[0] != first.lineage[0]  # a new epoch


def test_a_whole_read_holds_a_bounded_number_of_lines(tmp_path: Path, sample01: Path, monkeypatch) -> None:
    """`refresh()` without a limit reads the file in polls of at most `POLL_LINES` lines (a file
    of 8M blank lines took 1.35 GB as one poll's lines) and makes the snapshot one poll makes:
    the same map, turns and diagnostics, one snapshot."""
    from tests.conftest import traced_peak

    from ds4sessions.ingest import tailer
    from ds4tui.mapdata import dumps_map, map_json

    lines = sample01.read_bytes().split(b"\n")[:-1]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(lines[:3] + [b""] * 150_000 + lines[3:] + [b" "] * 150_000) + b"\n")
    one = LiveSession(path).refresh()
    monkeypatch.setattr(tailer, "POLL_LINES", 5_000)
    live = LiveSession(path)
    snap, peak = traced_peak(live.refresh)
    assert snap is not None and snap.unread_bytes == 0 and snap.version == one.version
    assert dumps_map(map_json(snap)).replace(str(path), "") == dumps_map(map_json(one)).replace(str(path), "")
    assert live.reader.last_line_no == len(lines) + 300_000 and live.reader.end_offset == path.stat().st_size
    assert peak < 8 << 20, peak  # 300,000 lines in one poll: ~40 MB


def test_a_file_replaced_between_two_slices_of_a_whole_read_is_read_from_its_start(
        tmp_path: Path, sample01: Path, monkeypatch) -> None:
    """A read to the end in slices (`Tailer.polls`) that meets a reset in a later slice starts
    over from it: the snapshot is the new file's, as a fresh read makes it."""
    from ds4sessions.ingest import tailer
    from ds4tui.mapdata import dumps_map, map_json

    lines = sample01.read_bytes().split(b"\n")[:-1]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(lines[:3] + [b""] * 50 + lines[3:]) + b"\n")
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"\n".join(lines[:12]) + b"\n")
    expected = LiveSession(other).refresh()
    monkeypatch.setattr(tailer, "POLL_LINES", 20)
    polls: list[int] = []
    poll = tailer.Tailer.poll

    def poll_then_replace(self, *args):  # type: ignore[no-untyped-def]
        batch = poll(self, *args)
        polls.append(len(batch.lines))
        if len(polls) == 2:
            staged = tmp_path / "staged.jsonl"
            shutil.copy(other, staged)
            staged.replace(path)
        return batch

    monkeypatch.setattr(tailer.Tailer, "poll", poll_then_replace)
    snap = LiveSession(path).refresh()
    assert polls[:2] == [20, 20] and len(polls) == 3  # the third poll saw the replacement: 12 lines
    assert snap is not None and len(snap.context.messages) == len(expected.context.messages)
    assert dumps_map(map_json(snap)).replace(str(path), "") == dumps_map(map_json(expected)).replace(str(other), "")
