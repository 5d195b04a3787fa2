"""`ds4tui sessions --json` and `ds4tui usage` over a home of the samples in tests/fixtures moved to now, and
`ds4tui home` starting on the home screen."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ds4sessions.agents.registry import all_agents
from ds4tui.cli import app
from ds4tui.app import home_app
from ds4tui.screens.home import HomeScreen
from tests.overview_home import env_for, place_claude, place_codex, place_pi

runner = CliRunner()


@pytest.fixture
def home(tmp_path: Path, samples: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    now = time.time()
    for key, value in env_for(tmp_path).items():
        monkeypatch.setenv(key, value)
    placed = {"pi": place_pi(samples, tmp_path, "01-tools-and-image", latest_at=now - 100, mtime=now - 100).path}
    try:
        placed["claude"] = place_claude(samples, tmp_path, latest_at=now - 60, mtime=now - 60, subagents=False)[0].path
        placed["codex"] = place_codex(samples, tmp_path, "rollout-*-7ef9-*.jsonl", latest_at=now - 30, mtime=now - 30).path
    except StopIteration:  # pragma: no cover - shared samples incomplete
        pass
    return placed


def test_sessions_json_has_every_agent_with_live_context_and_cache(home: dict[str, Path]) -> None:
    result = runner.invoke(app, ["sessions", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["path"]: r for r in json.loads(result.stdout)}
    pi = rows[str(home["pi"])]
    assert pi["agent"] == "pi" and pi["live"] is True
    assert (pi["contextTokens"], pi["contextWindow"]) == (5089, 200000)
    assert pi["cache"]["status"] == "warm" and pi["cache"]["expiresAt"] > time.time()
    assert set(pi["cache"]) >= {"status", "expiresAt"}
    agents = {r["agent"] for r in rows.values()}
    from ds4sessions.agents.registry import all_agents

    assert agents == {a.name for a in all_agents()} & {"pi", "claude-code", "codex"}
    if "codex" in agents:
        codex = rows[str(home["codex"])]
        assert codex["cache"]["status"] == "unknown" and codex["cache"]["expiresAt"] is None  # no retention configured
    text = runner.invoke(app, ["sessions"], terminal_width=250)
    assert "pi" in text.stdout and "live" in text.stdout and "Fix 404 for unknown widget ids" in text.stdout
    for name in agents:  # the agent and the state are two words (`claude-code` ran into `idle`)
        assert f"{name}live" not in text.stdout and f"{name}idle" not in text.stdout


@pytest.mark.skipif("codex" not in {a.name for a in all_agents()}, reason="the Codex plug-in is not installed here")
def test_sessions_json_follows_the_retention_setting(home: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The overview index answers from rows made under the same settings: setting, changing or
    removing DS4TUI_CACHE_RETENTION changes the next `sessions --json` at once (it kept answering
    "unknown" from overview.sqlite3). The older DS4TUI_CODEX_CACHE_RETENTION still works, with a
    deprecation note on stderr."""

    def codex_cache() -> dict:  # type: ignore[type-arg]
        result = runner.invoke(app, ["sessions", "--json"])
        assert result.exit_code == 0, result.output
        return next(r for r in json.loads(result.stdout) if r["path"] == str(home["codex"]))["cache"]

    assert codex_cache()["status"] == "unknown"  # the index now holds every file
    monkeypatch.setenv("DS4TUI_CACHE_RETENTION", "codex=300")
    configured = codex_cache()
    assert configured["status"] == "warm" and configured["label"] == "300 s, typical, not recorded"
    monkeypatch.setenv("DS4TUI_CACHE_RETENTION", "codex=3600")
    assert codex_cache()["label"] == "3600 s, typical, not recorded"
    monkeypatch.delenv("DS4TUI_CACHE_RETENTION")
    assert codex_cache()["status"] == "unknown"
    monkeypatch.setenv("DS4TUI_CODEX_CACHE_RETENTION", "300")
    result = runner.invoke(app, ["sessions", "--json"])
    assert next(r for r in json.loads(result.stdout) if r["path"] == str(home["codex"]))["cache"]["status"] == "warm"
    assert "DS4TUI_CODEX_CACHE_RETENTION is deprecated: use DS4TUI_CACHE_RETENTION=codex=300" in result.stderr


def test_usage_by_agent_json_and_table(home: dict[str, Path]) -> None:
    result = runner.invoke(app, ["usage", "--json", "--by", "agent"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rows = {r["key"]: r for r in data["rows"]}
    assert rows["pi"]["requests"] == 8 and rows["pi"]["costUSD"] == pytest.approx(0.0352749, abs=1e-6)
    assert data["total"]["requests"] == sum(r["requests"] for r in data["rows"])
    table = runner.invoke(app, ["usage", "--by", "model"], terminal_width=200)
    assert "claude-sonnet-4-5" in table.stdout and "$0.0353" in table.stdout
    if "codex" in rows:
        assert "no price for: gpt-5-codex" in table.stdout
    assert runner.invoke(app, ["usage", "--by", "week"]).exit_code == 2
    bad = runner.invoke(app, ["usage", "--since", "yesterday"])
    assert bad.exit_code == 2 and "is not a date" in bad.stderr
    future = json.loads(runner.invoke(app, ["usage", "--json", "--since", "2099-01-01"]).stdout)
    assert future["rows"] == [] and future["total"]["costUSD"] is None


async def test_home_command_starts_on_the_home_screen(home: dict[str, Path]) -> None:
    app_ = home_app(home["pi"], watch=False, retrieval=False)
    async with app_.run_test(size=(140, 30)) as pilot:
        await pilot.pause()
        await app_.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app_.screen, HomeScreen)
        assert str(home["pi"]) in app_.screen.summaries
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app_.screen, HomeScreen)


def test_usage_by_session_keeps_the_file_names_apart(home: dict[str, Path]) -> None:
    """`usage --by session` at 80 columns: long paths fold instead of being cut from the right
    (every row read "/…/sessions-cla…", a new-user trial); `--by agent` has no second agent column."""
    table = runner.invoke(app, ["usage", "--by", "session"], terminal_width=80)
    assert table.exit_code == 0, table.output
    flat = "".join(line.strip("│ ").split("│")[0].strip() for line in table.stdout.splitlines())
    for path in home.values():
        if path.suffix == ".jsonl" and path.is_file():
            assert path.name[-20:] in flat
    by_agent = runner.invoke(app, ["usage", "--by", "agent"], terminal_width=120)
    assert "agents" not in by_agent.stdout and "agent" in by_agent.stdout
