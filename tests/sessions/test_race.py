"""Issue 13: direct writes never take a line off the agent's branch.

- A fake agent process appends valid Pi entries every ~50 ms (each one `O_APPEND` write of a
  whole line, parented on its own previous entry, as Pi's `appendFileSync` with its in-memory
  leaf) while `pin` and `collapse` run 50 times each, forced (the unforced ones are refused for
  the recent growth). Afterwards every line is valid JSON, the old bytes are unchanged, every
  write that reported no race sits right after the leaf it was built on, and the REAL Pi
  (tests/pi_context.mjs) loads the file, and the file as it was after each of our label writes,
  with every agent entry on the branch.
- The lost race is made deterministic through the writer's test seam (`_before_write`): an
  agent line lands between the size check and our write; the writer reports it, re-attaches the
  branch (`ds4tui.rejoin`) and real Pi keeps the agent's entry on the branch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ds4sessions.agents.pi import build_context, read_session
from ds4sessions.steering import writer
from ds4sessions.steering.steer import collapse, pin
from ds4sessions.steering.writer import Journal, WriteRefused, WriteResult, read_state

from tests.conftest import FIXTURES
from tests.sessions.test_real_pi import pi_view
from tests.sessions.test_writer import copy_old

SAMPLE = FIXTURES / "pi" / "01-tools-and-image.jsonl"

AGENT = r'''
import json, os, sys, time, uuid
path, parent, stop, interval = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
ids = []
i, last = 0, None
while last is None or i < last:
    if last is None and os.path.exists(stop):
        last = i + 2 + i % 2  # two more entries, ending with an answer: the agent's line is the last
    i += 1
    eid = uuid.uuid4().hex[:8]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    if i % 2 == 1:
        message = {"role": "user", "content": [{"type": "text", "text": f"agent prompt {i}"}], "timestamp": int(time.time() * 1000)}
    else:
        message = {"role": "assistant", "content": [{"type": "text", "text": f"agent answer {i}"}], "api": "anthropic-messages",
                   "provider": "anthropic", "model": "claude-sonnet-4-5", "stopReason": "stop", "timestamp": int(time.time() * 1000),
                   "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}}
    line = json.dumps({"type": "message", "id": eid, "parentId": parent, "timestamp": stamp, "message": message}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, line.encode())
    os.close(fd)
    ids.append(eid)
    parent = eid
    time.sleep(interval)
print(json.dumps(ids))
'''


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Journal:
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))
    return Journal()


def _lines(path: Path) -> list[dict]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.splitlines()]  # every line is valid JSON


def _check_landing(path: Path, result: WriteResult) -> None:
    """A write without a reported race sits right after the leaf it was built on."""
    data = path.read_bytes()
    before = data[: result.offset]
    assert before.endswith(b"\n")
    previous = json.loads(before[:-1].rsplit(b"\n", 1)[-1])
    entry = result.entries[0]
    anchor = entry.get("fromId") if entry["type"] == "branch_summary" else entry["parentId"]
    if result.race is None:
        assert anchor == previous["id"], (result.describe(), previous)


def test_racing_agent_keeps_its_entries_on_the_branch(node: str, tmp_path: Path, journal: Journal) -> None:
    path = copy_old(SAMPLE, tmp_path)
    old = path.read_bytes()
    leaf = read_state(path).leaf_id
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, str(path), leaf, str(tmp_path / "stop"), "0.05"], stdout=subprocess.PIPE, text=True
    )
    results: list[WriteResult] = []
    refused: dict[str, int] = {}
    label_ends: list[int] = []
    try:
        targets = [e.id for e in read_state(path).session.entries if e.type == "message"][:6]
        for i in range(50):
            for action in ("pin", "collapse"):
                try:
                    if action == "pin":
                        target = targets[i % len(targets)]
                        current = read_state(path).session.labels.get(target)
                        result = pin(path, target, clear=bool(current), journal=journal, force=i % 5 != 0)
                        if result.race is None:  # (a raced label is followed by its rejoin: not a state to check)
                            label_ends.append(result.offset + result.length)
                    else:
                        result = collapse(path, 1, journal=journal, force=i % 5 != 0)
                except WriteRefused as err:
                    refused[err.code] = refused.get(err.code, 0) + 1
                    continue
                results.append(result)
                _check_landing(path, result)
            time.sleep(0.05)
    finally:
        (tmp_path / "stop").touch()
        out, _ = agent.communicate(timeout=120)
    agent_ids = json.loads(out)
    assert len(agent_ids) >= 40
    data = path.read_bytes()
    assert data.startswith(old)  # the old bytes are unchanged
    lines = _lines(path)
    written = {e["id"] for r in results for e in r.entries}
    assert sum(1 for r in results if r.entries[0]["type"] == "label") >= 25, refused
    assert any(r.entries[0]["type"] == "branch_summary" for r in results), refused
    assert {line["id"] for line in lines[1:]} >= set(agent_ids) | written
    # the journal recorded where each write really landed
    by_id = {r.id: r for r in journal.list(path)}
    for r in results:
        assert by_id[r.journal_id].offset == r.offset and by_id[r.journal_id].status == "done"
    # Pi loads the final file with every agent entry on the branch
    pi = pi_view(node, path, tmp_path)
    assert set(agent_ids) <= set(pi["branchEntryIds"])
    # ... and each state that ended with one of our labels (our build agrees; Pi checks a sample)
    sampled = label_ends[:: max(1, len(label_ends) // 4)]
    for end in label_ends:
        prefix = tmp_path / "prefix.jsonl"
        prefix.write_bytes(data[:end])
        present = {json.loads(line)["id"] for line in data[:end].splitlines()[1:]} & set(agent_ids)
        branch = set(build_context(read_session(prefix)).branch_entry_ids)
        assert present <= branch, end
        if end in sampled:
            assert present <= set(pi_view(node, prefix, tmp_path)["branchEntryIds"]), end


def test_lost_race_is_reported_and_rejoined(node: str, tmp_path: Path, journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
    path = copy_old(SAMPLE, tmp_path)
    old = path.read_bytes()
    leaf = read_state(path).leaf_id
    agent_line = {"type": "message", "id": "a9e2c0de", "parentId": leaf, "timestamp": "2026-12-02T02:00:00.000Z",
                  "message": {"role": "user", "content": [{"type": "text", "text": "racing prompt"}], "timestamp": 1}}

    def agent_appends(_path: Path) -> None:
        monkeypatch.setattr(writer, "_before_write", None)
        with open(path, "ab") as f:
            f.write((json.dumps(agent_line) + "\n").encode())

    monkeypatch.setattr(writer, "_before_write", agent_appends)
    target = read_state(path).session.entries[2].id
    result = pin(path, target, journal=journal, force=True)
    assert result.race is not None and "lost a race" in result.race and "ds4tui.rejoin" in result.race
    lines = _lines(path)
    assert path.read_bytes().startswith(old)
    assert [line["id"] for line in lines[-3:-1]] == ["a9e2c0de", result.entries[0]["id"]]
    assert result.offset == len(old) + len((json.dumps(agent_line) + "\n").encode())
    rejoin = lines[-1]
    assert rejoin["type"] == "custom" and rejoin["customType"] == "ds4tui.rejoin" and rejoin["parentId"] == "a9e2c0de"
    assert journal.get(result.journal_id).offset == result.offset  # the journal has the real offset
    pi = pi_view(node, path, tmp_path)
    assert "a9e2c0de" in pi["branchEntryIds"] and pi["leafId"] == rejoin["id"]
    assert pi["labels"][target] == "ds4:pin"  # the pin itself still applies (labels resolve file-wide)


def test_growth_before_the_write_rereads_the_tail(tmp_path: Path, journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent line landing after the read but before the size check: the writer reads again
    and builds on the new leaf (no race to repair)."""
    path = copy_old(SAMPLE, tmp_path)
    leaf = read_state(path).leaf_id
    line = json.dumps({"type": "message", "id": "b7b7b7b7", "parentId": leaf, "timestamp": "2026-12-02T02:00:00.000Z",
                       "message": {"role": "user", "content": "hi", "timestamp": 1}}) + "\n"
    original_begin = journal.begin
    calls = []

    def begin_then_agent(**kwargs):  # the agent appends while the intent is journaled
        calls.append(kwargs["offset"])
        if len(calls) == 1:
            with open(path, "ab") as f:
                f.write(line.encode())
        return original_begin(**kwargs)

    monkeypatch.setattr(journal, "begin", begin_then_agent)
    result = pin(path, read_state(path).session.entries[2].id, journal=journal, force=True)
    assert result.race is None and result.entries[0]["parentId"] == "b7b7b7b7"
    assert calls[1] == calls[0] + len(line)
    assert [r.status for r in Journal(journal.path).list()] == ["done"]  # the first intent was abandoned


@pytest.fixture(scope="module")
def node() -> str:
    from tests.sessions import test_real_pi

    if test_real_pi.NODE is None:
        pytest.skip(test_real_pi.NODE_REASON)
    if not (test_real_pi.PI_PACKAGE / "package.json").exists():
        pytest.skip(f"Pi is not installed in {test_real_pi.PI_PACKAGE}")
    return test_real_pi.NODE
