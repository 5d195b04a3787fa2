"""Issue 30 item 7: the state directory is the user's own, and its derived files are what they
claim to be.

- A state dir owned by another user, or writable by its group or others, was used silently
  (another user could swap the journal `journal undo` acts on): now every command that uses it
  refuses in one line (exit 2) naming the folder, and writes nothing.
- A retrieval index replaced by a symbolic link made `retrieve` fail every time: a derived file
  that is a link, a FIFO or a folder is removed (a link never followed) and rebuilt. The journal
  is not derived: a linked journal is refused, with the way out.
- `retrieve` on an unreadable special file said "Input/output error" without the path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT
from tests.sessions.test_writer import copy_old

SAMPLE = FIXTURES / "pi" / "01-tools-and-image.jsonl"


def cli(*args: str, state: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ds4tui.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DS4TUI_STATE_DIR": str(state)}, cwd=ROOT, check=False)


def one_line(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout[-300:], out.stderr[-1500:])
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    [line] = out.stderr.strip().splitlines()
    return line


def refused_everywhere(state: Path, session: Path, why: str) -> None:
    """Every command that keeps state refuses with one line naming the folder; nothing written."""
    before = session.read_bytes()
    inside = sorted(p.name for p in state.rglob("*"))
    for args in (["journal", "list"], ["pin", str(session), "7060d0dd", "--force"], ["retrieve", str(session)],
                 ["state"], ["journal", "undo", "1"]):
        line = one_line(cli(*args, state=state))
        assert line.startswith(f"ds4tui: {state}") and why in line, (args, line)
    assert session.read_bytes() == before
    assert sorted(p.name for p in state.rglob("*")) == inside


def test_a_state_dir_writable_by_others_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    os.chmod(state, 0o777)
    refused_everywhere(state, copy_old(SAMPLE, tmp_path), "is writable by others (mode 0777)")
    os.chmod(state, 0o770)
    refused_everywhere(state, copy_old(SAMPLE, tmp_path), "is writable by its group (mode 0770)")
    os.chmod(state, 0o755)  # readable by others only: ours, made private on use
    out = cli("journal", "list", state=state)
    assert out.returncode == 0 and oct(state.stat().st_mode & 0o777) == "0o700"


def test_a_state_dir_of_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root (the writable-by-others case runs instead)")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, 65534, 65534)
    os.chmod(tmp_path, 0o755)
    refused_everywhere(state, copy_old(SAMPLE, tmp_path), "belongs to another user (uid 65534)")
    retrieval = tmp_path / "state2" / "retrieval"  # the index folder inside a state dir of ours
    retrieval.mkdir(parents=True, mode=0o700)
    os.chmod(retrieval.parent, 0o700)
    os.chown(retrieval, 65534, 65534)
    line = one_line(cli("retrieve", str(SAMPLE), state=retrieval.parent))
    assert line.startswith(f"ds4tui: {retrieval} belongs to another user"), line


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder", "dangling"])
def test_a_derived_index_that_is_not_a_file_is_rebuilt(tmp_path: Path, kind: str) -> None:
    state = tmp_path / "state"
    first = cli("retrieve", "--json", str(SAMPLE), state=state)
    assert first.returncode == 0, first.stderr
    [db] = (state / "retrieval").glob("*.sqlite3")
    for side in (state / "retrieval").iterdir():
        side.unlink()
    decoy = tmp_path / "decoy.sqlite3"
    decoy.write_bytes(b"not yours\n")
    if kind == "symlink":
        db.symlink_to(decoy)
    elif kind == "dangling":
        db.symlink_to(tmp_path / "nowhere" / "x.sqlite3")
    elif kind == "fifo":
        os.mkfifo(db)
    else:
        (db / "inner").mkdir(parents=True)
    expected = json.loads(first.stdout)
    for _ in range(2):  # rebuilt once, then used as it is
        out = cli("retrieve", "--json", str(SAMPLE), state=state)
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)
        assert (got["retrieval"], got["rows"], got["sourceEntryIds"]) == (
            expected["retrieval"], expected["rows"], expected["sourceEntryIds"])
    assert db.is_file() and not db.is_symlink()
    assert decoy.read_bytes() == b"not yours\n"
    assert not (tmp_path / "nowhere").exists()


def test_the_retrieve_warning_names_what_was_removed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert cli("retrieve", str(SAMPLE), state=state).returncode == 0
    [db] = (state / "retrieval").glob("*.sqlite3")
    db.unlink()
    db.symlink_to(SAMPLE)
    out = cli("retrieve", str(SAMPLE), state=state)
    assert out.returncode == 0, out.stderr
    assert f"ds4tui: removed {db} (a symbolic link) from the state dir; the index is rebuilt" in out.stderr
    assert SAMPLE.read_bytes().startswith(b'{"type":"session"')


def test_a_linked_journal_is_refused_not_followed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    elsewhere = tmp_path / "theirs.sqlite"
    elsewhere.write_bytes(b"")
    (state / "journal.sqlite").symlink_to(elsewhere)
    session = copy_old(SAMPLE, tmp_path)
    before = session.read_bytes()
    for args in (["journal", "list"], ["pin", str(session), "7060d0dd", "--force"]):
        line = one_line(cli(*args, state=state))
        assert "is a symbolic link" in line and "ds4tui journal reset" in line, line
    assert session.read_bytes() == before and elsewhere.read_bytes() == b""
    assert cli("journal", "reset", state=state).returncode == 0
    assert cli("pin", str(session), "7060d0dd", "--force", state=state).returncode == 0


def test_retrieve_on_an_unreadable_special_file_names_it(tmp_path: Path) -> None:
    if not Path("/proc/self/mem").exists():
        pytest.skip("no /proc/self/mem here (a regular-looking file whose read fails with EIO)")
    line = one_line(cli("retrieve", "/proc/self/mem", state=tmp_path / "state"))
    assert line == "ds4tui: /proc/self/mem: cannot read: Input/output error", line
