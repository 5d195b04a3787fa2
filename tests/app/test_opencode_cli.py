"""OpenCode through the one seam: every command and the dashboard on the real CLI's database
(`tests/fixtures/opencode-1.18.33`), the session handle `DB#ses_…`; bad databases as one line
and exit 2 (locked, corrupt, not OpenCode's, a read-only file system); the database's bytes the
same after every command (hashed); and the dashboard following a database as OpenCode writes it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ds4tui.cli import app as cli_app
from tests.opencode_fixture import (DB, MAIN, SECOND, SESSIONS, Replayer, digest, empty_copy, env, handle,
                                    session_row, steps)

runner = CliRunner()


@pytest.fixture
def oc_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    values = env(tmp_path)
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    for key in ("OPENCODE_DB", "OPENCODE_CONFIG", "OPENCODE_CONFIG_CONTENT", "OPENCODE_MODELS_PATH"):
        monkeypatch.delenv(key, raising=False)
    from ds4sessions.agents.opencode import agent

    agent._limits.cache_clear()
    return values


def invoke(*args: str) -> dict[str, Any]:
    before = digest(DB)
    result = runner.invoke(cli_app, list(args))
    assert result.exit_code == 0, result.output
    assert digest(DB) == before
    return json.loads(result.stdout)


def cli(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """The real command in a fresh process (its exit code and stderr as a user sees them)."""
    return subprocess.run([sys.executable, "-m", "ds4tui.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env(tmp_path), **extra})


@pytest.mark.parametrize("session", SESSIONS)
def test_map_json_is_opencodes_context(oc_env: dict[str, str], session: str) -> None:
    """`map --json` says "opencode", and its context is the last step's input + cache.read +
    cache.write (what OpenCode reports as the context used), every row calibrated to it."""
    data = invoke("map", "--json", handle(session))
    assert data["agent"] == "opencode" and data["path"] == handle(session) and data["model"] == "fake/fake-model"
    last = [s for s in steps(session) if not s["summary"]][-1]
    prompt = last["input"] + last["cache"]["read"] + last["cache"]["write"]
    assert data["provider"]["contextTokens"] == data["calibrated"]["used"] == prompt
    assert data["extras"]["lastStep"]["prompt"] == prompt
    assert data["contextWindow"] == 200_000  # opencode.json's limit.context
    rows = {row["id"]: row["tokens"] for row in data["calibrated"]["categories"]}
    assert rows["output_reserve"] == 4_096 and rows["free"] == 200_000 - prompt - 4_096
    assert data["systemInferred"] and data["diagnostics"] == 0 and data["problems"] == []
    sidebar = data["extras"]["sidebar"]
    assert sidebar["tokens"] == last["input"] + last["output"] + last["reasoning"] + last["cache"]["read"]
    assert sidebar["percent"] == round(sidebar["tokens"] / 2_000)


def test_map_json_of_the_compacted_session(oc_env: dict[str, str]) -> None:
    data = invoke("map", "--json", handle(MAIN))
    ids = [row["id"] for row in data["categories"]]
    assert ids[:2] == ["system_prompt", "user"] and "compaction" in ids and "thinking" in ids
    assert [t["prompt"] for t in data["turns"]] == ["(before the first prompt)", '"AFTER-COMPACT: what do you remember?"',
                                                    '"THINK-ONLY: what does the attached file say?"']
    (compaction,) = data["extras"]["compactions"]
    assert compaction["auto"] and compaction["tokensBefore"] > 195_904 and compaction["tokensAfter"] < 10_000
    assert data["extras"]["autocompact"]["usable"] == 195_904
    assert data["extras"]["titleGeneration"]["calls"] == 1


@pytest.mark.parametrize("session", SESSIONS)
def test_cache_json_counts_each_step_once(oc_env: dict[str, str], session: str) -> None:
    """One record per step (`step-finish`), and the records add up to the `session` row's sums
    (output includes reasoning in the neutral buckets; OpenCode's own buckets under `opencode`)."""
    data = invoke("cache", "--json", "--last", handle(session))
    records = data["history"]["records"]
    assert data["agent"] == "opencode" and data["history"]["requests"] == len(records) == len(steps(session))
    row = session_row(session)
    assert sum(r["input"] for r in records) == row["tokens_input"]
    assert sum(r["cacheRead"] for r in records) == row["tokens_cache_read"]
    assert sum(r["cacheWrite"] for r in records) == row["tokens_cache_write"]
    assert sum(r["output"] for r in records) == row["tokens_output"] + row["tokens_reasoning"]
    opencode = data["opencode"]
    assert opencode["agrees"] is True and opencode["steps"] == len(records)
    assert opencode["sessionTotals"] == {"input": row["tokens_input"], "output": row["tokens_output"],
                                         "reasoning": row["tokens_reasoning"], "cacheRead": row["tokens_cache_read"],
                                         "cacheWrite": row["tokens_cache_write"], "cost": row["cost"]}
    assert data["state"]["status"] == "unknown"  # OpenCode records no cache lifetime; the fake model has none


def test_the_compaction_is_the_cause_of_its_misses(oc_env: dict[str, str]) -> None:
    records = invoke("cache", "--json", "--last", handle(MAIN))["history"]["records"]
    misses = {r["number"]: r["miss"]["cause"] for r in records if r["miss"]}
    summary = next(i for i, s in enumerate(steps(MAIN)) if s["summary"]) + 1
    assert misses == {1: "first request", summary: "prefix changed", summary + 1: "prefix changed"}


def test_context_plan_usage_and_sessions(oc_env: dict[str, str]) -> None:
    context = invoke("context", "--json", handle(MAIN))
    assert context["agent"] == "opencode" and context["sessionId"] == MAIN and context["contextWindow"] == 200_000
    assert context["messages"][0]["content"][0]["text"] == "What did we do so far?"
    plan = invoke("plan", "--json", handle(MAIN))
    assert plan["agent"] == "opencode" and plan["whatIf"] is True
    listed = invoke("sessions", "--json")
    mine = {s["path"]: s for s in listed if s["agent"] == "opencode"}
    assert set(mine) == {handle(s) for s in SESSIONS}
    assert mine[handle(MAIN)]["requests"] == len(steps(MAIN)) and mine[handle(MAIN)]["contextWindow"] == 200_000
    usage = invoke("usage", "--json", "--by", "agent")
    row = next(r for r in usage["rows"] if r["key"] == "opencode")
    assert row["requests"] == sum(len(steps(s)) for s in SESSIONS)


def test_retrieval_and_steering_are_refused_in_one_line(tmp_path: Path) -> None:
    before = digest(DB)
    retrieve = cli(tmp_path, "retrieve", "--json", handle(MAIN))
    assert retrieve.returncode == 2 and retrieve.stdout == ""
    assert retrieve.stderr.strip().splitlines() == [
        "ds4tui: retrieve: DS4's historical retrieval is not available for OpenCode sessions: "
        "OpenCode's reader keeps the context only, and DS4 retrieves what is outside it"]
    for command in (["pin", handle(MAIN), "msg_x"], ["collapse", handle(MAIN), "--turns", "1", "--yes"]):
        result = cli(tmp_path, *command)
        assert result.returncode == 1, result.stderr
        assert result.stderr.strip().splitlines()[-1].endswith(
            "OpenCode sessions are read-only: ds4tui never writes to OpenCode's database")
    assert digest(DB) == before


# --- bad databases: one line, exit 2, not a byte changed -------------------------------------------


def _running_copy(tmp_path: Path, name: str = "live") -> Path:
    """A copy of the fixture as OpenCode leaves it while it runs: WAL, with a `-wal` holding a
    transaction not yet checkpointed (the writer ends without closing)."""
    folder = tmp_path / name
    folder.mkdir()
    db = folder / "opencode.db"
    db.write_bytes(DB.read_bytes())
    code = ("import sqlite3, os, sys\n"
            "c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA journal_mode=WAL'); c.execute('PRAGMA wal_autocheckpoint=0')\n"
            "c.execute(\"UPDATE session SET title = title || ' (running)'\"); c.commit(); os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code, str(db)], check=True)
    assert Path(f"{db}-wal").stat().st_size > 0
    return db


def test_bad_databases_are_one_line_and_exit_2(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(DB.read_bytes()[:100] + b"\xff" * 8192)
    text = tmp_path / "notes.db"
    text.write_text("hello\n" * 100)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    fifo = tmp_path / "fifo.db"
    os.mkfifo(fifo)
    cases = [
        (handle(MAIN, corrupt), "corrupt or not an SQLite database"),
        (handle(MAIN, text), "not an SQLite database"),
        (handle(MAIN, other), "an SQLite database, but not OpenCode's (no session, message, part table)"),
        (handle(MAIN, fifo), "a FIFO (named pipe), not an OpenCode database; refused"),
        (handle(MAIN, tmp_path / "missing.db"), "No such file or directory"),
        (handle("ses_nothere"), "no session ses_nothere in this database"),
        (str(DB), "an OpenCode database holds 3 sessions: give one as PATH#ses_…"),
    ]
    files = [corrupt, text, other, DB]
    before = {f: digest(f) for f in files}
    for path, why in cases:
        opens = [[path]] if "#" in path else []  # (`ds4tui HANDLE`: checked before the dashboard starts)
        for command in (["map", "--json", path], ["cache", "--json", path], ["context", "--json", path], *opens):
            result = cli(tmp_path, *command)
            assert result.returncode == 2, (command, result.stdout, result.stderr)
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("ds4tui: ") and why in lines[0], (command, lines)
            assert "Traceback" not in result.stderr
    assert {f: digest(f) for f in files} == before


def test_a_locked_database_is_one_line_and_exit_2(tmp_path: Path) -> None:
    db = _running_copy(tmp_path)
    before = digest(db)
    ready, release = threading.Event(), threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        ready.set()
        release.wait(60)
        conn.execute("ROLLBACK")
        conn.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert ready.wait(10)
        result = cli(tmp_path, "map", "--json", handle(MAIN, db))
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.strip().splitlines() == [
            f"ds4tui: {db}: database is locked by another process (database is locked); try again when it is released"]
        assert digest(db) == before  # (checked while the lock holds: its own close checkpoints the -wal away)
    finally:
        release.set()
        holder.join()


def _can_mount() -> str | None:
    if shutil.which("unshare") is None:
        return "no unshare(1) here"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind / / 2>/dev/null || mount -t tmpfs none /mnt"],
                           capture_output=True, text=True)
    return None if probe.returncode == 0 else f"cannot make a mount namespace here ({probe.stderr.strip() or probe.returncode})"


def test_a_read_only_file_system_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """A database OpenCode is writing (a `-wal`) on a read-only mount: SQLite cannot read it
    without writing its `-shm` index, so one line and exit 2; the same database checkpointed
    (no `-wal`) reads there (`immutable`: nothing to write). Needs a mount namespace (root or
    user namespaces): skipped with the reason otherwise."""
    reason = _can_mount()
    if reason is not None:
        pytest.skip(reason)
    db = _running_copy(tmp_path)
    Path(f"{db}-shm").unlink()  # (as after a reboot, or on a copy: the index must be rebuilt)
    clean = tmp_path / "clean"
    clean.mkdir()
    shutil.copy(DB, clean / "opencode.db")
    before = {p: digest(p) for p in (db, clean / "opencode.db")}
    mounts = " && ".join(f"mount --bind {d} {d} && mount -o remount,bind,ro {d}" for d in (db.parent, clean))
    script = (f"{mounts} && touch {db.parent}/x 2>/dev/null && echo WRITABLE; "
              f"{sys.executable} -m ds4tui.cli map --json '{handle(MAIN, db)}'; echo rc=$?; "
              f"{sys.executable} -m ds4tui.cli cache --json '{handle(MAIN, clean / 'opencode.db')}' >/dev/null; echo rc=$?")
    result = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, **env(tmp_path)})
    assert "WRITABLE" not in result.stdout
    assert result.stdout.strip().splitlines()[-2:] == ["rc=2", "rc=0"], result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"ds4tui: {db}: on a read-only file system: SQLite cannot read a WAL database there")
    assert {p: digest(p) for p in before} == before


def test_every_command_leaves_a_running_database_unchanged(tmp_path: Path) -> None:
    """A database in use (WAL, a `-wal` not checkpointed): every command reads it, and neither the
    database nor its `-wal` changes by a byte; the `-wal` is left in place."""
    db = _running_copy(tmp_path)
    before = digest(db)
    assert set(before) == {"opencode.db", "opencode.db-wal"}
    for command in (["map", "--json"], ["map"], ["cache", "--json"], ["context", "--json"], ["plan", "--json"]):
        result = cli(tmp_path, *command, handle(SECOND, db))
        assert result.returncode == 0, result.stderr
        assert digest(db) == before, command
    data = json.loads(cli(tmp_path, "sessions", "--json", OPENCODE_DB=str(db)).stdout)
    assert {s["name"] for s in data if s["agent"] == "opencode"} == {
        "Listing files in the project (running)", "Listing files in the project (fork #1) (running)"}
    assert digest(db) == before


# --- the dashboard ---------------------------------------------------------------------------------


async def test_the_dashboard_shows_an_opencode_session(oc_env: dict[str, str]) -> None:
    from ds4tui.app import Ds4App
    from ds4tui.widgets.panels import EntryInspector, StatusLine, TurnList
    from ds4tui.widgets.pixel_map import PixelMap
    from tests.app.test_dashboard import settle

    expected = invoke("map", "--json", handle(MAIN))
    app = Ds4App(Path(handle(MAIN)), watch=False, retrieval=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        snap = app.snapshot
        assert snap.agent == "opencode" and app.view.header.agent == "OpenCode"
        assert snap.provider.context_tokens == expected["provider"]["contextTokens"]
        assert [(r.id, r.tokens) for r in snap.best.rows] == [(r["id"], r["tokens"]) for r in expected["categories"]]
        assert app.query_one(TurnList).row_count == len(snap.turns) == 3
        pixel_map = app.query_one(PixelMap)
        assert {c.category for c in pixel_map.cells} >= {"system_prompt", "compaction", "output_reserve", "free"}
        pixel_map.focus()  # the inspector follows a cell: the last reply's, with its step's usage
        reply = snap.turns[-1].last_message
        pixel_map.cursor = next(i for i, c in enumerate(pixel_map.cells) if c.message_index == reply)
        await pilot.pause()
        assert app.dashboard._selected == reply
        inspector = app.query_one(EntryInspector)
        shown = "\n".join(str(inspector.render_line(y).text) for y in range(4))
        last = steps(MAIN)[-1]
        assert f"entry {snap.context.message_entry_ids[reply]} · assistant" in shown
        assert f"input {last['input']:,} · cache read {last['cache']['read']:,}" in shown
        assert app.derived.cache is not None and len(app.derived.cache.history.records) == len(steps(MAIN))
        assert app.derived.plan is not None and app.derived.plan.what_if
        for key in ("M", "K", "d", "t"):
            await asyncio.wait_for(pilot.press(key), 30)
            await pilot.pause()
        await pilot.press("p")
        await pilot.pause()
        assert "OpenCode sessions are read-only" in str(app.query_one(StatusLine).render())


async def test_the_dashboard_follows_opencodes_writes(oc_env: dict[str, str], tmp_path: Path) -> None:
    """The real watcher on a database OpenCode's writes are replayed into (one transaction per
    event, at OpenCode's pace): the screen reaches the session's final state."""
    from ds4tui.app import Ds4App
    from tests.app.test_dashboard import settle

    db = tmp_path / "opencode.db"
    empty_copy(db)
    replayer = Replayer(db, SECOND)
    events = iter(replayer)
    for _ in range(4):  # the session and its first prompt
        next(events)
    app = Ds4App(Path(handle(SECOND, db)), retrieval=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app, exact=False, derived=False)
        assert len(app.snapshot.conversation.requests) == 0

        def write() -> None:
            for _ in events:
                time.sleep(0.01)

        writer = threading.Thread(target=write)
        writer.start()
        for _ in range(500):
            await pilot.pause(0.02)
            if not writer.is_alive() and app.snapshot is not None and len(app.snapshot.conversation.requests) == 2:
                break
        writer.join()
        replayer.close()
        assert len(app.snapshot.conversation.requests) == 2
        assert app.snapshot.provider.context_tokens == [s for s in steps(SECOND)][-1]["input"] + \
            [s for s in steps(SECOND)][-1]["cache"]["read"]


def test_a_handle_typed_on_the_home_screen(oc_env: dict[str, str], tmp_path: Path) -> None:
    from ds4tui.screens.home import typed_file

    assert typed_file(handle(MAIN)) == (Path(handle(MAIN)), None)
    path, why = typed_file(handle("ses_nothere"))
    assert path is None and why == f"cannot open {handle('ses_nothere')}: no session ses_nothere in this database (`ds4tui sessions` lists them)"
    assert typed_file(str(tmp_path / "x.db#ses_abc"))[1] == f"cannot open {tmp_path}/x.db#ses_abc: No such file or directory"


async def test_home_switches_to_an_opencode_session(oc_env: dict[str, str], sample01: Path) -> None:
    """From a Pi session to an OpenCode one in the same dashboard (the home screen's Enter)."""
    from ds4tui.app import Ds4App
    from tests.app.test_dashboard import settle

    app = Ds4App(sample01, retrieval=False)  # (with its watcher: the handle's files are watched after the switch)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        app.open_choice(Path(handle(SECOND)))
        for _ in range(300):
            await pilot.pause(0.02)
            if app.snapshot is not None and app.snapshot.agent == "opencode":
                break
        assert app.is_running and app.snapshot.agent == "opencode" and app.view.header.agent == "OpenCode"
        assert len(app.snapshot.conversation.requests) == len(steps(SECOND))


def test_the_dashboard_on_a_database_of_several_sessions_is_one_line(tmp_path: Path) -> None:
    """`ds4tui DB` (the console script's own route, `mapjson.main`, and `ds4tui open DB`) on a
    database holding several sessions: one line naming the newest `DB#ses_…`, exit 2, before
    Textual starts (it showed a traceback screen)."""
    for command in ([sys.executable, "-c", "import sys; from ds4tui.mapjson import main; sys.argv[0] = 'ds4tui'; main()", str(DB)],
                    [sys.executable, "-m", "ds4tui.cli", "open", str(DB)]):
        out = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, **env(tmp_path)})
        assert out.returncode == 2, out.stderr[-800:]
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "holds 3 sessions" in lines[0] and "#ses_" in lines[0], out.stderr[-800:]
        assert "Traceback" not in out.stdout + out.stderr
