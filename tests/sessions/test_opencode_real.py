"""The real OpenCode CLI writing while ds4tui follows (issue 35): `opencode run` against the
agent-oracle's fake model (`../shared/tools/agent-oracle/more-agents/fake_chat.py`, loopback
only), in a scratch HOME, while a live session polls the database; at the end one refresh
equals a full read, and every step is a request once.

Runs when the OpenCode binary is given (`$OPENCODE_BIN`, e.g. `…/node_modules/opencode-linux-x64/
bin/opencode` after `npm install opencode-ai@1.18.33`, or `opencode` on PATH) and `../shared`
has the fake; skipped with the reason otherwise. The committed fixture and the replay tests
(`test_opencode.py`) cover the same reader without it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SHARED

FAKE = SHARED / "tools" / "agent-oracle" / "more-agents" / "fake_chat.py" if SHARED is not None else None


def _binary() -> str | None:
    return os.environ.get("OPENCODE_BIN") or shutil.which("opencode")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_real_cli_is_followed_while_it_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = _binary()
    if binary is None:
        pytest.skip("the OpenCode CLI is not installed (set OPENCODE_BIN to its binary: npm install opencode-ai@1.18.33)")
    if FAKE is None or not FAKE.is_file():
        pytest.skip("the agent-oracle's fake model (../shared/tools/agent-oracle/more-agents/fake_chat.py) is absent")
    from ds4sessions.agents.opencode import agent as agent_module
    from ds4sessions.agents.opencode.agent import OpenCodeAgent
    from ds4sessions.agents.opencode.handle import make_handle

    home, project, port = tmp_path / "home", tmp_path / "proj", _free_port()
    project.mkdir()
    (project / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    config = home / ".config" / "opencode"
    config.mkdir(parents=True)
    (config / "opencode.json").write_text(json.dumps({
        "autoupdate": False, "share": "disabled", "model": "fake/fake-model", "small_model": "fake/fake-model",
        "permission": {"bash": "allow", "edit": "allow", "read": "allow", "external_directory": "allow"},
        "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                              "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": "sk-fake"},
                              "models": {"fake-model": {"name": "Fake Model", "reasoning": True, "tool_call": True,
                                                        "limit": {"context": 200000, "output": 4096}}}}}}))
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local/share"), "XDG_CACHE_HOME": str(home / ".cache"),
           "XDG_STATE_HOME": str(home / ".local/state"), "OPENCODE_DISABLE_MODELS_FETCH": "1",
           "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
           "NO_COLOR": "1", "FAKE_PROJ": str(project)}
    for key in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "HOME"):
        monkeypatch.setenv(key, env[key])
    agent_module._limits.cache_clear()
    fake = subprocess.Popen([sys.executable, str(FAKE), str(port), str(tmp_path / "fake.jsonl")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        run = subprocess.Popen([binary, "run", "LIST-FILES: list the files here"], cwd=project, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        db = home / ".local/share/opencode/opencode.db"
        agent = OpenCodeAgent()
        live = None
        seen = 0
        deadline = time.monotonic() + 120
        while run.poll() is None and time.monotonic() < deadline:
            if live is None and db.exists():
                infos = agent.discover()
                if infos:
                    live = agent.live(make_handle(db, infos[0].session_id))
            if live is not None and live.refresh() is not None:
                seen += 1
            time.sleep(0.02)
        assert run.wait(5) == 0, run.stderr.read() if run.stderr else ""
        assert live is not None and seen >= 2  # states seen while OpenCode wrote
        live.refresh()
        full = agent.live(live.path).refresh()
        assert live.last.conversation.messages == full.conversation.messages
        assert live.last.conversation.requests == full.conversation.requests
        extra = full.conversation.extra
        assert extra["steps"] == 2 and extra["stepTotals"]["input"] == extra["sessionTotals"]["input"]
    finally:
        fake.terminate()
        fake.wait(10)
        agent_module._limits.cache_clear()
