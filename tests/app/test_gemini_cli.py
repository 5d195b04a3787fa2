"""The CLI on real Gemini CLI sessions (issue 34, "Done when"), in fresh processes as a user runs
it, with nothing in ds4tui/ knowing Gemini: `map --json` says `"agent": "gemini-cli"` and the
provider's count is the last request's `tokens.input`; `cache --json` counts each request once
(the distinct `gemini` records with `tokens`), across resumes and the compression; `sessions
--json` with `HOME` holding a `.gemini` folder lists its sessions; `plan` is DS4's what-if,
`retrieve` and the steering commands refuse in one line and write nothing; `usage` and
`context --json` serve it too. Fixtures: tests/fixtures/gemini (the real CLI 0.61.0)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sessions.test_gemini import EXTRA, EXTRA_HOME, MAIN, MAIN_HOME, REWIND, SUBAGENT, _distinct_replies_with_tokens

pytestmark = pytest.mark.slow


def run(tmp: Path, *args: str, home: Path = EXTRA_HOME) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k != "GEMINI_CLI_HOME"},
           "HOME": str(home), "DS4TUI_STATE_DIR": str(tmp / "state"), "DS4TUI_CACHE_DIR": str(tmp / "cache"),
           "PI_CODING_AGENT_DIR": str(tmp / "pi"), "CODEX_HOME": str(tmp / "codex"), "CLAUDE_CONFIG_DIR": str(tmp / "claude")}
    return subprocess.run([sys.executable, "-m", "ds4tui.cli", *args], capture_output=True, text=True, env=env, timeout=120)


def last_input(path: Path) -> int:
    """`tokens.input` of the last `gemini` record with tokens in `path` (read with json, not the reader)."""
    last = None
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("type") == "gemini" and isinstance(row.get("tokens"), dict):
            last = row["tokens"]["input"]
    assert last is not None
    return last


@pytest.mark.parametrize("path", [MAIN, EXTRA, SUBAGENT, REWIND], ids=["main", "extra", "subagent", "rewind"])
def test_map_and_cache_json(tmp_path: Path, path: Path) -> None:
    data = json.loads(run(tmp_path, "map", "--json", str(path)).stdout)
    assert data["agent"] == "gemini-cli" and data["model"] == "google/gemini-2.5-flash"
    assert data["contextWindow"] == 1_048_576
    assert data["provider"]["contextTokens"] == last_input(path) == data["calibrated"]["used"]
    ids = {c["id"] for c in data["categories"]}
    assert {"system_instruction", "tool_declarations", "user", "compression_reserve", "free"} <= ids
    assert all(c["inferred"] for c in data["categories"] if c["id"] in ("system_instruction", "tool_declarations"))
    assert data["extras"]["contextTokens"] == last_input(path)
    cache = json.loads(run(tmp_path, "cache", "--json", "--last", str(path)).stdout)
    assert cache["agent"] == "gemini-cli"
    assert cache["history"]["requests"] == len(_distinct_replies_with_tokens(path)) == len(cache["history"]["records"])
    assert "gemini-models.json" in cache["pricingSource"] and cache["state"]["lifetimeSeconds"] is None


def test_map_json_of_the_compressed_session(tmp_path: Path) -> None:
    """The shared scenario after three resumes and a compression: 12,109 (the last request's
    `tokens.input`), 8 requests (the wire's count), the compression threshold from settings.json."""
    data = json.loads(run(tmp_path, "map", "--json", str(MAIN), home=MAIN_HOME).stdout)
    assert data["provider"]["contextTokens"] == 12_109
    assert {c["id"]: c["tokens"] for c in data["categories"]}["state_snapshot"] > 0
    assert data["extras"]["compression"]["threshold"] == 5_242 and data["extras"]["compressions"] == 1
    assert [t["prompt"] for t in data["turns"]] == ["(before the first prompt)", "THINK-ONLY: what is 17*3?",
                                                  "LIST-FILES: list the files again", "AFTER-COMPACT: what do you remember?"]
    cache = json.loads(run(tmp_path, "cache", "--json", "--last", str(MAIN), home=MAIN_HOME).stdout)
    assert cache["history"]["requests"] == 8
    miss = cache["history"]["records"][6]["miss"]
    assert miss["cause"] == "prefix changed" and "<state_snapshot>" in miss["detail"]


def test_sessions_json_with_a_gemini_home(tmp_path: Path) -> None:
    result = run(tmp_path, "sessions", "--json")
    assert result.returncode == 0, result.stderr
    mine = {Path(s["path"]).name: s for s in json.loads(result.stdout) if s["agent"] == "gemini-cli"}
    assert set(mine) == {EXTRA.name, SUBAGENT.name, REWIND.name}  # (not the resume's header-only file)
    assert mine[EXTRA.name]["requests"] == 5 and mine[REWIND.name]["requests"] == 4


def test_plan_retrieve_steering_usage_context(tmp_path: Path) -> None:
    path = str(EXTRA)
    before = EXTRA.read_bytes()
    plan = run(tmp_path, "plan", "--json", path)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["agent"] == "gemini-cli" and json.loads(plan.stdout)["whatIf"] is True
    retrieve = run(tmp_path, "retrieve", "--json", path)
    assert retrieve.returncode == 2 and retrieve.stdout == "" and len(retrieve.stderr.strip().splitlines()) == 1
    assert "Gemini CLI" in retrieve.stderr
    for command in (["pin", path, "0b21ead8-670c-470a-8caf-d586a1a9c36e"], ["compact", path]):
        refused = run(tmp_path, *command)
        assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [
            f"ds4tui: refused, nothing written: {command[0]}: Gemini CLI sessions are Gemini CLI's own append-only record; "
            "ds4tui only reads them (only Pi sessions can be steered)"]
    assert EXTRA.read_bytes() == before
    usage = run(tmp_path, "usage", "--json", "--by", "agent")
    assert usage.returncode == 0, usage.stderr
    row = next(r for r in json.loads(usage.stdout)["rows"] if r["key"] == "gemini-cli")
    assert row["requests"] == 5 + 2 + 4
    context = json.loads(run(tmp_path, "context", "--json", path).stdout)
    assert context["agent"] == "gemini-cli" and context["messageCount"] == len(context["meta"]) > 0
