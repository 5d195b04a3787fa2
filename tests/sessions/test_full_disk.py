"""Issue 30 item 1: a write that fails half-way leaves nothing behind.

A full disk during `pin`, `collapse` and `compact` (the real CLI, as a process): the short write
is taken back under the lock (`writer.write_whole` / `take_back`), the journal record is marked
abandoned, the command says "nothing written", the session file is byte-identical to before,
and the agent's next `O_APPEND` line (written once there is room again) is a line of its own,
on the branch. Two real mechanisms:

- a small tmpfs (mounted here when the test runs as root; skipped with the reason otherwise),
  filled so that ~100 bytes are left: the kernel's own short write, then ENOSPC;
- `RLIMIT_FSIZE` (Python ignores SIGXFSZ): the file may grow only ~100 bytes, the write is
  short and the next one fails with EFBIG. Runs everywhere.

And the journal on a full disk: nothing is written to the session, one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from ds4sessions.agents.pi import build_context, read_session

from tests.conftest import FIXTURES, ROOT
from tests.sessions.test_compaction import Server, openai_reply
from tests.sessions.test_writer import copy_old

SAMPLE = FIXTURES / "pi" / "01-tools-and-image.jsonl"
ROOM = 100
"""Bytes the file may still grow by when the write is attempted."""
PAGE = 4096
KEY = "sk-test-full-disk-0123456789"


@contextlib.contextmanager
def tmpfs(where: Path, size: str = "64k") -> Iterator[Path]:
    """A fresh tmpfs mounted at `where`; skips the test when this process may not mount one."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the RLIMIT_FSIZE variant of this test runs instead)")
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({out.stderr.strip() or out.returncode}); the RLIMIT_FSIZE variant runs")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def padded_session(folder: Path, slack: int, at_least: int = 0) -> Path:
    """A copy of the fixture ending with a `custom` entry (an extension's, never in context) sized
    so that the file ends `slack` bytes before a page boundary (and is at least `at_least` bytes)."""
    path = copy_old(SAMPLE, folder, "s.jsonl")
    data = path.read_bytes()
    leaf = json.loads(data.splitlines()[-1])["id"]

    def line(pad: int) -> bytes:
        entry = {"type": "custom", "id": "0pad0pad", "parentId": leaf, "timestamp": "2026-03-02T08:44:00.000Z",
                 "customType": "test.pad", "data": {"pad": "x" * pad}}
        return (json.dumps(entry, separators=(",", ":")) + "\n").encode()

    base = len(data) + len(line(0))
    target = max(base, at_least)
    target += (-target - slack) % PAGE
    path.write_bytes(data + line(target - base))
    past = os.stat(SAMPLE).st_mtime - 3600
    os.utime(path, (past, past))
    assert path.stat().st_size % PAGE == PAGE - slack
    return path


def fill(folder: Path) -> None:
    """Fill the file system of `folder` (a filler file, written until ENOSPC)."""
    with open(folder / "filler", "wb", buffering=0) as f:
        chunk = b"\0" * PAGE
        while True:
            try:
                f.write(chunk)
            except OSError:
                break


AGENT_LINE = (
    '{{"type":"message","id":"{id}","parentId":"0pad0pad","timestamp":"2026-03-02T08:45:00.000Z","message":'
    '{{"role":"user","content":[{{"type":"text","text":"the agent\'s next prompt"}}],"timestamp":1772441100000}}}}\n'
)


def agent_appends(path: Path) -> str:
    """What Pi's `appendFileSync` does: one `O_APPEND` write of a whole line, parented on the leaf
    the agent holds in memory (the padding entry). Returns the new entry's id."""
    entry_id = uuid.uuid4().hex[:8]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, AGENT_LINE.format(id=entry_id).encode())
    finally:
        os.close(fd)
    return entry_id


def cli(*args: str, env: dict[str, str], fsize: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run([sys.executable, "-m", "ds4tui.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env}, cwd=ROOT, preexec_fn=limit, check=False)


ACTIONS = {
    "pin": lambda path: ["pin", str(path), "7060d0dd", "--force", "--note", "n" * 2000],
    "collapse": lambda path: ["collapse", str(path), "--turns", "1", "--yes", "--force"],
    "compaction": lambda path: ["compact", str(path), "--yes", "--force"],
}


def run_action(action: str, path: Path, env: dict[str, str], fsize: int | None = None) -> subprocess.CompletedProcess:
    if action != "compaction":
        return cli(*ACTIONS[action](path), env=env, fsize=fsize)
    agent = Path(os.environ["PI_CODING_AGENT_DIR"])  # (the test's own, conftest)
    (agent / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 100}}))
    summary = "## Goal\n" + "Keep the widget API's 404s. " * 200  # ~5.6 KB: far more than the room left
    with Server(lambda req: (200, openai_reply(summary), {})) as server:
        env = {**env, "DS4TUI_SUMMARY_API": "openai", "DS4TUI_SUMMARY_BASE_URL": server.base,
               "DS4TUI_SUMMARY_API_KEY": KEY, "DS4TUI_SUMMARY_MODEL": "m"}
        return cli(*ACTIONS[action](path), env=env, fsize=fsize)


def check_nothing_written(out: subprocess.CompletedProcess, path: Path, before: bytes, state: Path, env: dict[str, str]) -> None:
    """The command refused in one line, the file is as it was, the journal record is abandoned
    and `journal undo` says it wrote nothing; then the agent's next line is intact."""
    assert out.returncode == 1, (out.returncode, out.stdout[-500:], out.stderr[-1500:])
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("ds4tui: refused, nothing written: ") and "nothing written (the file is back to its" in line, line
    assert "short write" in line or "the write failed" in line, line
    assert path.read_bytes() == before
    with sqlite3.connect(state / "journal.sqlite") as db:
        rows = db.execute("SELECT id, status, note FROM writes").fetchall()
    assert [(r[0], r[1]) for r in rows] == [(1, "abandoned")] and rows[0][2].startswith("nothing written: "), rows
    undo = cli("journal", "undo", "1", env=env)
    assert undo.returncode == 1 and "#1 wrote nothing" in undo.stderr, undo.stderr
    agent_id = agent_appends(path)
    assert path.read_bytes() == before + AGENT_LINE.format(id=agent_id).encode()
    session = read_session(path)
    assert session.diagnostics.total == 0 and session.leaf_id == agent_id
    ctx = build_context(session)
    assert ctx.messages[-1]["content"][0]["text"] == "the agent's next prompt"
    context = cli("context", str(path), env=env)
    assert context.returncode == 0 and "malformed" not in context.stdout + context.stderr, context.stderr


@pytest.mark.slow
@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_a_full_tmpfs_leaves_the_file_byte_identical(action: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {"DS4TUI_STATE_DIR": str(state)}
    with tmpfs(tmp_path / "disk") as disk:
        path = padded_session(disk, ROOM)
        fill(disk)
        before = path.read_bytes()
        out = run_action(action, path, env)
        assert f"short write ({ROOM} of " in out.stderr, out.stderr
        (disk / "filler").unlink()  # room again: the agent goes on
        check_nothing_written(out, path, before, state, env)


@pytest.mark.slow
@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_a_file_size_limit_leaves_the_file_byte_identical(action: str, tmp_path: Path) -> None:
    """RLIMIT_FSIZE: the session may grow only ROOM bytes (it is padded to 4 MB so that no other
    file the command writes — journal, caches — is near the limit)."""
    state = tmp_path / "state"
    env = {"DS4TUI_STATE_DIR": str(state)}
    path = padded_session(tmp_path, ROOM, at_least=4 << 20)
    before = path.read_bytes()
    out = run_action(action, path, env, fsize=len(before) + ROOM)
    assert f"short write ({ROOM} of " in out.stderr, out.stderr
    check_nothing_written(out, path, before, state, env)


def test_take_back_cuts_our_partial_line_from_under_the_agents(tmp_path: Path) -> None:
    """The agent's line landed after our partial bytes (between our short write and the take
    back): ours are cut out, the agent's line moved back in place, the file is old + agent line."""
    from ds4sessions.steering.writer import take_back

    path = padded_session(tmp_path, ROOM)
    before = path.read_bytes()
    ours = b'{"type":"label","id":"abcd1234","parentId":"0pad0pad","timestamp":"2026-03-02T08:4'
    agent = AGENT_LINE.format(id="a6e47a11").encode()
    with open(path, "ab") as f:
        f.write(ours + agent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        take_back(fd, path, len(before), ours)
        assert path.read_bytes() == before + agent
        take_back(fd, path, len(before), ours)  # not there any more: nothing changes
        assert path.read_bytes() == before + agent
    finally:
        os.close(fd)


@pytest.mark.slow
def test_a_full_disk_under_the_journal_writes_nothing(tmp_path: Path) -> None:
    """The state dir on a full tmpfs: the journal cannot record the intent, so the session is not
    touched (one line, no traceback); once there is room the same pin goes through."""
    session = copy_old(SAMPLE, tmp_path)
    before = session.read_bytes()
    with tmpfs(tmp_path / "state-disk", "256k") as disk:
        state = disk / "state"
        env = {"DS4TUI_STATE_DIR": str(state)}
        first = cli("journal", "list", env=env)  # the journal exists, then the disk fills up
        assert first.returncode == 0, first.stderr
        fill(disk)
        out = cli("pin", str(session), "7060d0dd", "--force", "--note", "n" * 20_000, env=env)
        assert out.returncode in (1, 2) and "Traceback" not in out.stderr and "internal error" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and "nothing was written" in out.stderr, out.stderr
        assert "its disk is full" in out.stderr, out.stderr
        assert session.read_bytes() == before
        (disk / "filler").unlink()
        again = cli("pin", str(session), "7060d0dd", "--force", "--note", "n" * 20_000, env=env)
        assert again.returncode == 0, again.stderr
        assert session.read_bytes().startswith(before) and read_session(session).diagnostics.total == 0
