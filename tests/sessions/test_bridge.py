"""ds4sessions.bridge.channel without Node: install/uninstall, status states, the inbox/outbox protocol,
private side files, request metadata (a `requests.jsonl` the real bridge wrote in
test_bridge_e2e, kept in tests/fixtures/bridge), and the `ds4tui bridge` CLI."""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from ds4sessions.bridge import channel as bridge
from ds4sessions.agents.pi import read_session
from ds4sessions.steering.writer import WriteRefused
from typer.testing import CliRunner

from tests.conftest import FIXTURES, ROOT

SESSION = "01a2298b-7440-7087-a742-b3c429074251"


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    return tmp_path / "agent"


_FAKE_PI: subprocess.Popen | None = None


def fake_pi_pid() -> int:
    """A live process whose command line says `node` (the bridge trusts a heartbeat only from a
    Pi/Node process, issue 13): Python started under the name `node`."""
    global _FAKE_PI
    if _FAKE_PI is None or _FAKE_PI.poll() is not None:
        _FAKE_PI = subprocess.Popen(["node", "-c", "import time; time.sleep(900)"], executable=sys.executable)
        atexit.register(_FAKE_PI.kill)
    return _FAKE_PI.pid


def beat(agent: Path, session_id: str = SESSION, *, pid: int | None = None, age: float = 0.0) -> None:
    folder = bridge.channel_dir(session_id, agent)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "heartbeat.json").write_text(json.dumps({
        "v": 1, "pid": fake_pi_pid() if pid is None else pid, "sessionId": session_id, "sessionFile": "/x.jsonl",
        "leafId": "abcd1234", "idle": True, "mode": "rpc", "processed": 2, "pending": 0,
        "timeMs": int((time.time() - age) * 1000),
    }))


def test_install_uninstall(agent: Path) -> None:
    source = ROOT / "sessions" / "src" / "ds4sessions" / "bridge" / "ds4tui-bridge.ts"
    assert bridge.extension_source() == source
    first = bridge.install(agent)
    assert first.path == agent / "extensions" / "ds4tui-bridge.ts" and first.previous == "none"
    assert first.path.read_bytes() == source.read_bytes()
    assert bridge.install(agent).previous == "same"
    first.path.write_text("// old version\n")
    assert bridge.install(agent).previous == "replaced" and first.path.read_bytes() == source.read_bytes()
    assert bridge.uninstall(agent) == first.path and not first.path.exists()
    assert bridge.uninstall(agent) is None


def test_extension_source_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4TUI_BRIDGE_SOURCE", str(tmp_path / "missing.ts"))
    with pytest.raises(FileNotFoundError, match="missing.ts"):
        bridge.install(tmp_path / "agent")


def test_status_states(agent: Path) -> None:
    state = bridge.status(SESSION, agent)
    assert (state.state, state.installed, state.header) == ("not installed", False, "bridge: not installed")
    bridge.install(agent)
    assert bridge.status(SESSION, agent).state == "not running"
    assert bridge.status(None, agent).state == "not running"
    beat(agent)
    live = bridge.status(SESSION, agent)
    assert live.live and live.header == "bridge: live" and live.heartbeat is not None
    assert (live.heartbeat.leaf_id, live.heartbeat.processed, live.heartbeat.mode) == ("abcd1234", 2, "rpc")
    beat(agent, age=bridge.STALE_SECONDS + 1)
    old = bridge.status(SESSION, agent)
    assert old.state == "stale" and old.reason.startswith("last heartbeat 6 s ago")


def test_status_dead_pid_is_stale(agent: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    beat(agent, pid=child.pid)
    state = bridge.status(SESSION, agent)
    assert state.state == "stale" and state.reason == f"Pi (pid {child.pid}) is no longer running"
    assert not state.installed  # a heartbeat without the installed file: loaded with `pi -e`


def test_channel_dir_rejects_foreign_ids(agent: Path) -> None:
    assert bridge.channel_dir("a.b-c_d", agent) == agent / "ds4tui" / "a.b-c_d"
    for bad in ("", "..", "../x", "a/b", ".hidden", "x-"):
        with pytest.raises(ValueError):
            bridge.channel_dir(bad, agent)


def test_submit_and_results(agent: Path) -> None:
    command = bridge.submit(SESSION, "collapse", {"anchorId": "a1"}, "leaf0001", private={"summary": "secret text"},
                            agent=agent, deadline_seconds=5)
    folder = bridge.channel_dir(SESSION, agent)
    (line,) = (folder / "inbox.jsonl").read_text().splitlines()
    sent = json.loads(line)
    side = folder / f"{command.id}.private.json"
    assert sent == {"v": 1, "id": command.id, "kind": "collapse", "leafId": "leaf0001", "time": command.time,
                    "deadline": command.time + 5000,
                    "args": {"anchorId": "a1", "privateFile": side.name,
                             "privateSha256": hashlib.sha256(side.read_bytes()).hexdigest()}}
    assert "secret" not in line and json.loads(side.read_text()) == {"summary": "secret text"}
    assert stat.S_IMODE(side.stat().st_mode) == 0o600
    with pytest.raises(ValueError, match="unknown bridge command kind"):
        bridge.submit(SESSION, "delete", {}, None, agent=agent)

    # no answer: timeout, and the private file goes
    with pytest.raises(bridge.BridgeTimeout):
        bridge.wait_result(SESSION, command.id, agent=agent, timeout=0.2, poll=0.05)
    assert not side.exists()

    outbox = folder / "outbox.jsonl"
    outbox.write_text(
        json.dumps({"v": 1, "id": command.id, "kind": "collapse", "status": "applied", "reason": "branch summary at a1",
                    "entryIds": ["e1"], "leafBefore": "leaf0001", "leafAfter": "e1", "time": "t"}) + "\n"
        + '{"id": "torn'
    )
    result = bridge.wait_result(SESSION, command.id, agent=agent, timeout=1)
    assert result.applied and result.entry_ids == ("e1",) and (result.leaf_before, result.leaf_after) == ("leaf0001", "e1")
    assert result.describe() == "via Pi bridge: collapse applied (branch summary at a1); Pi appended e1"
    assert list(bridge.read_results(SESSION, agent)) == [command.id]


def test_send_command_needs_a_live_bridge(agent: Path) -> None:
    bridge.install(agent)
    with pytest.raises(bridge.BridgeUnavailable, match="bridge: not running"):
        bridge.send_command(SESSION, "pin", {"targetId": "x", "label": "ds4:pin"}, "leaf", agent=agent)
    assert not (bridge.channel_dir(SESSION, agent) / "inbox.jsonl").exists()


def test_pin_label_rules(sample01: Path) -> None:
    session = read_session(sample01)
    entry = next(e for e in session.entries if e.role == "assistant").id
    assert bridge.pin_label(session, entry) == "ds4:pin"
    assert bridge.pin_label(session, entry, note=" keep ") == "ds4:pin keep"
    with pytest.raises(WriteRefused) as refused:
        bridge.pin_label(session, entry, clear=True)
    assert refused.value.code == "nothing_to_do"
    with pytest.raises(WriteRefused) as refused:
        bridge.pin_label(session, "nope0000")
    assert refused.value.code == "unknown_entry"


def test_request_metadata(agent: Path) -> None:
    folder = bridge.channel_dir(SESSION, agent)
    folder.mkdir(parents=True)
    data = (FIXTURES / "bridge" / "requests.jsonl").read_bytes()
    (folder / "requests.jsonl").write_bytes(data + b'{"seq": 5, "torn')
    metas = bridge.read_requests(SESSION, agent)
    assert [m.seq for m in metas] == [1, 2, 3, 4]
    first = metas[0]
    assert (first.provider, first.model, first.api, first.cache_retention) == ("fake", "fake-model", "openai-completions", "short")
    assert (first.system_tokens, first.tool_tokens, first.fixed_tokens) == (584, 727, 1311)
    assert first.tool_names == ("read", "bash", "edit", "write")
    assert [m.role for m in metas[3].messages] == ["system", "compactionSummary", "branchSummary", "user", "assistant", "user"]
    assert bridge.prefix_change(metas[0], metas[1]) is None  # the second turn extends the first
    assert bridge.prefix_change(metas[1], metas[2]) == 3  # the collapse replaced message 3
    assert bridge.prefix_change(metas[2], metas[3]) == 0  # the compaction replaced the system message
    assert b"question" not in data and b"answer" not in data  # no content in the metadata


def test_cli(agent: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ds4tui.commands.bridge import register

    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    app = typer.Typer()
    assert register(app) == {"bridge"}
    runner = CliRunner()
    session = tmp_path / "s.jsonl"
    session.write_text(json.dumps({"type": "session", "version": 3, "id": SESSION, "timestamp": "t", "cwd": "/"}) + "\n")

    out = runner.invoke(app, ["bridge", "status", str(session)])
    assert out.exit_code == 3 and "bridge: not installed" in out.output
    out = runner.invoke(app, ["bridge", "install"])
    assert out.exit_code == 0 and out.output.startswith(f"installed: {agent / 'extensions' / 'ds4tui-bridge.ts'}")
    beat(agent)
    out = runner.invoke(app, ["bridge", "status", str(session), "--json"])
    report = json.loads(out.output)
    assert out.exit_code == 0 and (report["state"], report["installed"], report["sessionId"], report["pid"]) == (
        "live", True, SESSION, fake_pi_pid())
    out = runner.invoke(app, ["bridge", "uninstall", "--purge"])
    assert out.exit_code == 0 and out.output.splitlines() == [
        f"removed {agent / 'extensions' / 'ds4tui-bridge.ts'}", f"removed {agent / 'ds4tui'}"]


def test_read_requests_skips_hostile_lines(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from ds4sessions.bridge import channel as bridge

    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    folder = bridge.channel_dir("019cadb5-6afd-7157-b0b4-7bc363b502d2", tmp_path)
    folder.mkdir(parents=True)
    good = (Path(__file__).parents[1] / "fixtures" / "bridge" / "requests.jsonl").read_bytes().splitlines()[0]
    hostile = [b"[1, 2]", b'"text"', b'{"seq": 1e400}', b"[" * 100_000 + b"]" * 100_000, b"{not json"]
    (folder / "requests.jsonl").write_bytes(b"\n".join([*hostile, good]) + b"\n")
    metas = bridge.read_requests("019cadb5-6afd-7157-b0b4-7bc363b502d2", tmp_path)
    assert len(metas) == 1


def test_a_zombie_process_is_not_alive() -> None:
    from ds4sessions.bridge.channel import _pid_alive

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    for _ in range(200):  # exited but not reaped: a zombie
        time.sleep(0.01)
        with open(f"/proc/{child.pid}/stat", "rb") as f:
            if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                break
    assert _pid_alive(os.getpid())
    assert not _pid_alive(child.pid)
    child.wait()


HOSTILE_BEATS = [
    ("pid", 99999999999999999999999), ("pid", -5), ("pid", 1.5), ("pid", "123"), ("pid", True), ("pid", None),
    ("pid", 2**22 + 1), ("sessionId", {"x": 1}), ("sessionId", "../../etc"), ("timeMs", "now"), ("timeMs", 1e300),
    ("timeMs", [1]), ("processed", 10**30), ("pending", -1), ("idle", "yes"), ("mode", {"a": 1}),
    ("leafId", 12), ("sessionFile", ["/x"]),
]


@pytest.mark.parametrize(("field", "value"), HOSTILE_BEATS, ids=[f"{k}={str(v)[:12]}" for k, v in HOSTILE_BEATS])
def test_a_hostile_heartbeat_is_not_trusted_and_never_raises(agent: Path, field: str, value: object) -> None:
    """Issue 30: `"pid": 99999999999999999999999` made `_pid_alive` raise OverflowError (a
    traceback screen in `ds4tui open`, "internal error" in `bridge status`). Every field is type-
    and range-checked where the heartbeat is read: the status is `stale` with the field named."""
    beat(agent)
    path = bridge.channel_dir(SESSION, agent) / "heartbeat.json"
    data = json.loads(path.read_text())
    data[field] = value
    path.write_text(json.dumps(data))
    state = bridge.status(SESSION, agent)
    assert state.state == "stale" and not state.live and state.heartbeat is None
    assert state.reason.startswith("heartbeat.json is malformed (") and field in state.reason
    assert bridge.read_heartbeat(SESSION, agent) is None


def test_pid_alive_takes_any_int() -> None:
    from ds4sessions.bridge.status import _pid_alive

    for pid in (99999999999999999999999, -1, 0, 2**31, 2**63):
        assert _pid_alive(pid) is False


def test_bridge_status_cli_with_a_huge_pid_heartbeat(agent: Path, tmp_path: Path) -> None:
    """The issue's repro as a process: `ds4tui bridge status` says why (exit 3), no "internal error"."""
    beat(agent, pid=99999999999999999999999)
    session = tmp_path / "s.jsonl"
    session.write_text(json.dumps({"type": "session", "version": 3, "id": SESSION, "timestamp": "t", "cwd": "/"}) + "\n")
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent)}
    out = subprocess.run([sys.executable, "-m", "ds4tui.cli", "bridge", "status", str(session)], capture_output=True,
                         text=True, env=env, timeout=60)
    assert out.returncode == 3, out.stderr
    assert "internal error" not in out.stdout + out.stderr and "Traceback" not in out.stderr
    assert "bridge: stale" in out.stdout and "pid: 99999999999999999999999 is not an integer" in out.stdout


async def test_the_tui_shows_a_huge_pid_heartbeat_as_stale(sample01: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """`ds4tui open` on a session whose heartbeat has a huge pid: the header says `bridge: stale`
    (was a traceback screen and exit 1)."""
    from ds4tui.app import Ds4App
    from ds4tui.widgets.panels import SessionHeader
    from tests.app.test_dashboard import settle

    agent = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    session_id = read_session(sample01).session_id
    beat(agent, session_id, pid=99999999999999999999999)
    app = Ds4App(sample01, watch=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        app.dashboard._poll_bridge()
        await pilot.pause()
        assert app.dashboard.query_one(SessionHeader)._bridge == "bridge: stale"
