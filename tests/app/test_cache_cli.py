"""`ds4tui cache PATH [--json]` on Pi's own sessions."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ds4tui.cli import app
from ds4tui.commands import cache as cache_command

runner = CliRunner()


def test_cache_json_sample01(sample01: Path) -> None:
    result = runner.invoke(app, ["cache", "--json", "--last", str(sample01)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    # State at the last entry (7060d0dd saved 08:43:45.367; its request started 08:43:44.433).
    assert data["at"] == 1772441025.367 and data["asOf"] == "last-entry"
    assert data["state"]["status"] == "warm"
    assert data["state"]["remainingSeconds"] == 1772441024.433 + 300 - 1772441025.367
    assert data["state"]["refreshEntryId"] == "7060d0dd"
    history = data["history"]
    assert (history["requests"], history["misses"], history["costDisagreements"]) == (8, 1, 0)
    assert history["records"][0]["cost"] == {
        "catalogUsd": 0.006963, "recordedUsd": 0.0069630000000000004, "agrees": True,
        "differenceUsd": 0.0069630000000000004 - 0.006963,
        "pricingSource": "@earendil-works/pi-ai 1.6.0 (generated 2026-11-29)"}
    assert data["decision"]["mode"] == "off" and data["whatIf"]["mode"] == "auto"
    assert [g["name"] for g in data["whatIf"]["decision"]["gates"]] == ["mode", "missHitRatio", "cacheReadShare", "sampleCount"]


def test_cache_text_02_names_ttl_lapse(shared_dir: Path) -> None:
    result = runner.invoke(app, ["cache", str(shared_dir / "sessions-pi" / "02-abort-error-bash.jsonl")])
    assert result.exit_code == 0, result.output
    assert "#7    TTL lapse: idle 9 min 30 s since the last refresh; the cache lives 300 s" in result.stdout
    assert "#7    beb6eca3   0.0%  read      0  write   4.1k  $0.029826  [MISS: TTL lapse]" in result.stdout


def test_cache_text_03_names_the_compactions(shared_dir: Path) -> None:
    result = runner.invoke(app, ["cache", str(shared_dir / "sessions-pi" / "03-compaction.jsonl")])
    assert result.exit_code == 0, result.output
    assert "prefix changed: compaction d632457b at 13:27:43 changed context message 0" in result.stdout
    assert "prefix changed: compaction 107b9405 at 13:31:34 changed context message 0" in result.stdout


@pytest.mark.parametrize("flags", [(), ("--now",)])
def test_cache_is_as_of_now_by_default(sample01: Path, flags: tuple[str, ...]) -> None:
    """Without a flag (or with the old `--now`) the state is taken now, as the TUI counts: a
    session from March is cold (a new user read "warm · 5:00 left — refreshed 1 s ago" as live)."""
    before = time.time()
    result = runner.invoke(app, ["cache", "--json", *flags, str(sample01)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert before <= data["at"] <= time.time() and data["asOf"] == "now"
    assert data["state"]["remainingSeconds"] == 1772441024.433 + 300 - data["at"]
    assert data["state"]["status"] == "cold"


def test_cache_text_says_the_instant_of_its_countdown(sample01: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second line names the instant the state is taken at, and the other choice."""
    monkeypatch.setattr(cache_command, "clock", lambda: 1772441024.433 + 100)  # 100 s after the last request
    lines = runner.invoke(app, ["cache", str(sample01)]).stdout.splitlines()
    assert lines[1] == "as of: now, 2026-03-02 08:45:24 UTC; the last entry was 2026-03-02 08:43:45 UTC (--last: as of then)"
    assert lines[2].startswith("cache: warm · 3:20 left — refreshed 1 min 40 s ago by a reply;")
    lines = runner.invoke(app, ["cache", "--last", str(sample01)]).stdout.splitlines()
    assert lines[1] == "as of: the last entry, 2026-03-02 08:43:45 UTC (without --last: now)"
    assert lines[2].startswith("cache: warm · 5:00 left — refreshed 1 s ago by a reply;")
    both = runner.invoke(app, ["cache", "--last", "--now", str(sample01)])
    assert both.exit_code == 2 and "--last and --now exclude each other" in both.output


async def test_cache_agrees_with_the_dashboard_at_the_same_instant(sample01: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ds4tui cache PATH` and the dashboard's countdown, at one instant, say the same."""
    from ds4tui.app import Ds4App
    from ds4tui.widgets.cache import CacheCountdown
    from tests.app.test_dashboard import settle

    for after in (100.0, 280.0, 4000.0):  # warm, expiring, cold
        instant = 1772441024.433 + after
        monkeypatch.setattr(cache_command, "clock", lambda: instant)
        cli = json.loads(runner.invoke(app, ["cache", "--json", str(sample01)]).stdout)["state"]
        dashboard = Ds4App(sample01, watch=False, retrieval=False, now=lambda: instant)
        async with dashboard.run_test(size=(120, 36)) as pilot:
            await settle(pilot, dashboard)
            state = dashboard.query_one(CacheCountdown).state
        assert state is not None
        assert (cli["status"], cli["words"], cli["remainingSeconds"]) == (state.status, state.words, state.remaining_s)


def test_cache_missing_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["cache", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert "no such file" in result.output


def _with_usage(sample: Path, tmp_path: Path, name: str, edit) -> Path:  # type: ignore[no-untyped-def]
    lines = []
    for line in sample.read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        message = obj.get("message")
        if isinstance(message, dict) and message.get("role") == "assistant" and isinstance(message.get("usage"), dict):
            edit(message["usage"])
        lines.append(json.dumps(obj))
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


HOSTILE_1H = {"1e308": 1e308, "1e300": 1e300, "10**30": 10**30, "string": "12", "list": [1], "negative": -5}


def test_cache_on_hostile_usage_counts_a_diagnostic(sample01: Path, tmp_path: Path) -> None:
    """Issue 30 item 4: `cacheWrite1h: 1e308` on an assistant message made `ds4tui cache` an
    "internal error (OverflowError)". The Pi reader conforms the field where usage enters
    (`bad_field`, one per entry) and the report is the one of a session without it."""
    from ds4sessions.agents.pi import read_session

    clean = _with_usage(sample01, tmp_path, "clean", lambda u: u.update(cacheWrite1h=0))
    expected = runner.invoke(app, ["cache", "--json", str(clean)])
    assert expected.exit_code == 0, expected.output
    for name, value in HOSTILE_1H.items():
        path = _with_usage(sample01, tmp_path, name, lambda u: u.update(cacheWrite1h=value))
        assistants = sum(1 for e in read_session(clean).entries if e.role == "assistant")
        assert read_session(path).diagnostics.count("bad_field") == assistants, name
        result = runner.invoke(app, ["cache", "--json", str(path)])
        assert result.exit_code == 0 and result.exception is None, (name, result.output[-400:])
        assert json.loads(result.stdout)["history"] == json.loads(expected.stdout)["history"], name
        text = runner.invoke(app, ["cache", str(path)])
        assert text.exit_code == 0 and "internal error" not in text.output, name
