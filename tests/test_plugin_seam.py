"""A fourth agent is one package (issue 28): the toy plug-in in tests/plugins/toyagent, its own
file format, registered under the `ds4tui.agents` entry-point group the way a third-party
package installed beside ds4tui registers (a real `*.dist-info/entry_points.txt` on `sys.path`,
read by `importlib.metadata`), gets the whole cockpit without a line of ds4tui or the CLI
changed: `map`/`cache`/`context`/`plan`/`usage`/`sessions --json`, the dashboard, `home`, and
one-line refusals for steering and retrieval. The real CLI runs in fresh processes; the real app
via `run_test`."""

from __future__ import annotations

import json
import os
import subprocess
import time
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "tests" / "plugins"

LINES = [
    {"toychat": 1, "id": "toy-1", "model": "toy-large", "window": 8000, "cwd": "/work/toy", "title": "fix the toy bug"},
    {"role": "user", "text": "find the failing test", "t": 1767225600},
    {"role": "assistant", "text": "searching", "call": {"name": "grep", "args": {"q": "FAIL"}},
     "usage": {"in": 900, "cached": 0, "out": 40}, "t": 1767225601},
    {"role": "tool", "name": "grep", "text": "tests/test_x.py:12: FAIL " * 20, "t": 1767225602},
    {"role": "assistant", "text": "found it in test_x.py", "usage": {"in": 60, "cached": 900, "out": 30}, "t": 1767225603},
    {"role": "user", "text": "now fix it", "t": 1767225700},
    {"role": "assistant", "text": "fixed", "usage": {"in": 50, "cached": 1000, "out": 20}, "t": 1767225701},
]


@pytest.fixture
def toy(tmp_path: Path) -> dict[str, Path]:
    home = tmp_path / "toyhome"
    home.mkdir()
    session = home / "one.toychat.jsonl"
    session.write_text("".join(json.dumps(row) + "\n" for row in LINES), encoding="utf-8")
    return {"session": session, "home": home, "tmp": tmp_path}


def run(toy: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    tmp = toy["tmp"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")]),
           "TOYCHAT_HOME": str(toy["home"]), "HOME": str(tmp / "home"), "DS4TUI_STATE_DIR": str(tmp / "state"),
           "DS4TUI_CACHE_DIR": str(tmp / "cache"), "PI_CODING_AGENT_DIR": str(tmp / "pi"), "CODEX_HOME": str(tmp / "codex"),
           "CLAUDE_CONFIG_DIR": str(tmp / "claude")}
    return subprocess.run([sys.executable, "-m", "ds4tui.cli", *args], capture_output=True, text=True, env=env, timeout=120)


def test_the_cli_serves_a_plugin_it_has_never_heard_of(toy: dict[str, Path]) -> None:
    path = str(toy["session"])
    before = toy["session"].read_bytes()
    data = json.loads(run(toy, "map", "--json", path).stdout)
    assert data["agent"] == "toychat" and data["contextWindow"] == 8000
    # the provider's count: the last reply's prompt (50 + 1000) + its output (20); nothing after it
    assert data["provider"]["contextTokens"] == 1070 and data["calibrated"]["used"] == 1070
    assert {c["id"] for c in data["categories"]} >= {"user", "assistant_text", "tool_calls", "tool_results", "free"}
    assert [t["prompt"] for t in data["turns"]] == ["find the failing test", "now fix it"]

    cache = json.loads(run(toy, "cache", "--json", path).stdout)
    assert cache["agent"] == "toychat" and cache["history"]["requests"] == 3
    assert [r["cacheRead"] for r in cache["history"]["records"]] == [0, 900, 1000]

    context = json.loads(run(toy, "context", "--json", path).stdout)
    assert context["agent"] == "toychat" and context["messageCount"] == 6

    plan = run(toy, "plan", "--json", path)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["agent"] == "toychat" and json.loads(plan.stdout)["whatIf"] is True

    retrieve = run(toy, "retrieve", "--json", path)
    assert retrieve.returncode == 2 and retrieve.stdout == ""
    assert retrieve.stderr.strip().splitlines() == [
        "ds4tui: retrieve: DS4's historical retrieval is not available for Toy Chat sessions: "
        "Toy Chat's reader keeps the context only, and DS4 retrieves what is outside it"]

    pin = run(toy, "pin", path, "L3")
    assert pin.returncode == 1 and pin.stderr.strip().splitlines() == [
        "ds4tui: refused, nothing written: pin: Toy Chat sessions are read-only (a test plug-in)"]
    assert toy["session"].read_bytes() == before


def test_sessions_and_usage_list_the_plugins_sessions(toy: dict[str, Path]) -> None:
    sessions = json.loads(run(toy, "sessions", "--json").stdout)
    mine = [s for s in sessions if s["agent"] == "toychat"]
    assert len(mine) == 1 and mine[0]["path"] == str(toy["session"])
    usage = run(toy, "usage", "--json", "--by", "agent")
    assert usage.returncode == 0, usage.stderr
    rows = json.loads(usage.stdout)["rows"]
    toy_row = next(r for r in rows if r["key"] == "toychat")
    assert toy_row["requests"] == 3


async def test_the_dashboard_shows_a_plugins_session(toy: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The one dashboard, in process: the plug-in found by its entry point (the registry's cache
    cleared around the test), its categories on the map, its turns, the Cache and Diagnostics
    tabs, and `p` refused in one line."""
    from ds4sessions.agents import registry
    from ds4tui.app import Ds4App
    from ds4tui.widgets.panels import StatusLine
    from ds4tui.widgets.pixel_map import PixelMap
    from tests.app.test_dashboard import settle

    monkeypatch.syspath_prepend(str(PLUGINS))
    registry.all_agents.cache_clear()
    try:
        app = Ds4App(toy["session"], watch=False, retrieval=False)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, app)
            snap = app.snapshot
            assert snap.agent == "toychat" and app.view.header.agent == "Toy Chat"
            assert len(snap.turns) == 2 and snap.provider.context_tokens == 1070
            categories = {c.category for c in app.query_one(PixelMap).cells if c.category != "free"}
            assert categories >= {"user", "tool_results"}
            assert app.derived.cache is not None and len(app.derived.cache.history.records) == 3
            assert app.derived.plan is not None and app.derived.plan.what_if
            await pilot.press("p")
            await pilot.pause()
            assert "refused, nothing written: Toy Chat sessions are read-only" in str(app.query_one(StatusLine).render())
    finally:
        registry.all_agents.cache_clear()


# --- a session that is not a file: a handle (issue 35) ---------------------------------------

BOX = {"sessions": {"s1": LINES, "s2": LINES[:3]}}


def test_a_session_that_is_not_a_file_is_served_through_its_handle(toy: dict[str, Path]) -> None:
    """The toy box plug-in keeps several sessions in one file, named `BOX.toybox#ID`: every
    command takes the handle (the registry asks `claims_handle`), `sessions` lists one entry per
    session, a handle whose session or box is missing is one line and exit 2, steering is
    refused and the box is never written."""
    box = toy["home"] / "two.toybox"
    box.write_text(json.dumps(BOX), encoding="utf-8")
    before = box.read_bytes()
    handle = f"{box}#s1"
    data = json.loads(run(toy, "map", "--json", handle).stdout)
    assert data["agent"] == "toybox" and data["path"] == handle
    assert data["provider"]["contextTokens"] == 1070 and len(data["turns"]) == 2
    cache = json.loads(run(toy, "cache", "--json", handle).stdout)
    assert cache["agent"] == "toybox" and cache["history"]["requests"] == 3
    listed = sorted(s["path"] for s in json.loads(run(toy, "sessions", "--json").stdout) if s["agent"] == "toybox")
    assert listed == [f"{box}#s1", f"{box}#s2"]
    for bad, why in ((f"{box}#nope", "no session nope in this box"), (f"{toy['home']}/none.toybox#s1", "No such file")):
        result = run(toy, "map", "--json", bad)
        assert result.returncode == 2 and result.stdout == "", result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and why in result.stderr
    opened = run(toy, f"{box}#nope")  # `ds4tui HANDLE`: checked (`handle_stat`) before the dashboard starts
    assert opened.returncode == 2 and opened.stderr.strip().splitlines() == [f"ds4tui: {box}: no session nope in this box"]
    unknown = run(toy, "map", "--json", f"{toy['home']}/one.toychat.jsonl#s1")  # claimed by no plug-in
    assert unknown.returncode == 2 and unknown.stderr.strip().endswith("no such file")
    pin = run(toy, "pin", handle, "L3")
    assert pin.returncode == 1 and "Toy Box sessions are read-only" in pin.stderr
    assert box.read_bytes() == before


def test_a_handle_is_watched_through_its_files_and_followed(toy: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """In process: the registry gives a handle to its plug-in and names the files to watch; the
    session watcher wakes when the box changes; the live session reads the new row in one
    refresh (through the plug-in's tailer); the overview lists, polls and updates it."""
    import threading

    from ds4sessions.agents import registry
    from ds4sessions.ingest.watch import SessionWatcher
    from ds4sessions.overview.index import OverviewIndex
    from ds4sessions.overview.scanner import Overview

    box = toy["home"] / "two.toybox"
    box.write_text(json.dumps(BOX), encoding="utf-8")
    handle = Path(f"{box}#s1")
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("TOYCHAT_HOME", str(toy["home"]))
    registry.all_agents.cache_clear()
    try:
        agent = registry.agent_for_path(handle)
        assert agent is not None and agent.name == "toybox"
        assert registry.agent_for_handle(box) is None  # an existing file is read by its head, never claimed
        assert registry.watched_files(handle) == (box,)
        assert registry.watched_files(toy["session"]) == (toy["session"],)
        assert registry.session_stat(handle).st_size == sum(len(json.dumps(row)) for row in LINES)
        with pytest.raises(FileNotFoundError):
            registry.session_stat(Path(f"{box}#gone"))

        live = agent.live(handle)
        assert len(live.refresh().turns) == 2
        overview = Overview(index=OverviewIndex(toy["tmp"] / "overview.sqlite3"))
        summaries = {s.path: s for s in overview.load_all() if s.agent == "toybox"}
        assert set(summaries) == {str(handle), f"{box}#s2"} and summaries[str(handle)].requests == 3

        woke = threading.Event()
        grown = {"sessions": {**BOX["sessions"], "s1": [*LINES, {"role": "user", "text": "and the docs", "t": 1767225800}]}}
        with SessionWatcher(handle, woke.set, poll_interval=0.05):
            time.sleep(0.2)
            box.write_text(json.dumps(grown), encoding="utf-8")
            assert woke.wait(5), "no wake-up for the handle's file"
        snap = live.refresh()  # one poll catches up
        assert snap is not None and [t.prompt for t in snap.turns][-1] == "and the docs"
        changed = {s.path for s in overview.poll([str(handle)])}
        assert changed == {str(handle)}

        from ds4tui.screens.home import typed_file  # a handle typed into the home screen's box

        assert typed_file(str(handle)) == (handle, None)
        assert typed_file(f"{box}#nope") == (None, f"cannot open {box}#nope: no session nope in this box")
        assert typed_file(f"{box}.jsonl#s1") == (None, f"no such file: {box}.jsonl#s1")
    finally:
        registry.all_agents.cache_clear()
