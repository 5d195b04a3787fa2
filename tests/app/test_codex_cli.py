"""`ds4tui map|cache|context --json` and the steering commands on real Codex 0.171.0 rollouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ds4tui.cli import app

runner = CliRunner()

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
MAIN = FIX / "sample/sessions/2026/12/02/rollout-2026-12-02T01-10-23-01a2344d-7ef9-7e61-a841-8556539ac489.jsonl"
PARENT = FIX / "home/sessions/2026/12/02/rollout-2026-12-02T01-48-04-01a2346f-feba-7773-bb08-ef2cfc95dbfe.jsonl"


def run_json(*args: str) -> dict:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_map_json_on_a_rollout() -> None:
    data = run_json("map", "--json", str(MAIN))
    assert data["agent"] == "codex" and data["model"] == "gpt-5-codex"
    assert (data["contextTokens"], data["contextWindow"], data["percentLeft"]) == (10_613, 190_000, 100)
    assert (data["recordedWindow"], data["configuredWindow"]) == (190_000, 200_000)  # sample config.toml
    assert "95% of the configured 200,000" in data["windowNote"]
    assert data["provider"]["anchorEntryId"] == "resp_e2bfbf916cfef9a7f35ed139b101f825"
    ids = [row["id"] for row in data["categories"]]
    assert ids[0] == "system_prompt" and "compaction" in ids and ids[-1] == "free"
    # free space is the window minus Codex's own count; the estimate + unattributed equal that count
    assert data["free"] == 190_000 - 10_613
    assert data["estimate"] + data["unattributed"] == 10_613
    assert data["compactions"][0]["tokensBefore"] == 10_948
    assert data["opaque"]["inContext"] == {"items": 2, "encryptedBytes": 54}
    assert data["diagnostics"] == 0
    # config.toml: model_auto_compact_token_limit = 1,000,000 (set back after the forced compaction); 90 % of 200,000 wins
    assert data["autoCompact"]["limit"] == 180_000 and data["autoCompact"]["setting"] == 1_000_000


def test_window_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4TUI_CODEX_CONTEXT_WINDOW", "20000")
    data = run_json("map", "--json", str(MAIN))
    # 10,613 < BASELINE_TOKENS: still 100 % left; free = 20,000 − 10,613
    assert (data["contextWindow"], data["recordedWindow"], data["free"], data["percentLeft"]) == (20_000, 190_000, 9_387, 100)


def test_cache_json_totals_count_each_request_once() -> None:
    data = run_json("cache", "--json", "--last", str(MAIN))
    assert data["agent"] == "codex"
    assert data["totals"] == {"requests": 11, "inputTokens": 11_232, "cacheReadTokens": 99_008,
                              "cacheWriteTokens": 0, "outputTokens": 986}
    records = data["history"]["records"]
    assert records[1]["share"] == pytest.approx(9920 / 10117)
    assert [r["number"] for r in records if r["compactionCall"]] == [8]
    assert data["state"]["ttlRecorded"] is False and data["state"]["status"] == "unknown"
    assert data["priceNote"] == "no price for gpt-5-codex in the OpenAI price table" and data["costUsd"] is None
    assert data["at"] == records[-1]["time"] and data["asOf"] == "last-request"  # --last: the last request (MAIN:104)


def test_cache_countdown_only_with_a_configured_retention(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4TUI_CACHE_RETENTION", "codex=300")
    state = run_json("cache", "--json", "--last", str(MAIN))["state"]
    assert state["label"] == "typical, not recorded" and state["status"] == "warm"
    assert state["remainingSeconds"] == 300  # as of the last request


def test_cache_prices_a_known_model(tmp_path: Path) -> None:
    text = MAIN.read_text().replace('"model":"gpt-5-codex"', '"model":"gpt-5.4"')
    path = tmp_path / "rollout-2026-12-02T01-10-23-x.jsonl"
    path.write_text(text)
    data = run_json("cache", "--json", str(path))
    first = data["history"]["records"][0]
    # no config.toml next to it: the catalog window (272,000) is the configured one; 190,000 recorded is not 95 % of it
    mapped = run_json("map", "--json", str(path))
    assert (mapped["configuredWindow"], mapped["windowNote"]) == (None, None)
    # gpt-5.4: $2.50 / M input, $0.25 / M cached, $15 / M output (openai-prices.json)
    assert first["catalogUsd"] == pytest.approx((9939 * 2.5 + 131 * 15) / 1e6)
    assert data["priceNote"] is None and data["costUsd"] == pytest.approx(sum(r["catalogUsd"] for r in data["history"]["records"]))


def test_window_note_from_the_catalog(tmp_path: Path) -> None:
    # gpt-5.4 lists 272,000 tokens; Codex records 258,400 (openai/codex #40095)
    text = MAIN.read_text().replace('"model":"gpt-5-codex"', '"model":"gpt-5.4"').replace(
        '"model_context_window":190000', '"model_context_window":258400')
    path = tmp_path / "rollout-2026-12-02T01-10-23-x.jsonl"
    path.write_text(text)
    data = run_json("map", "--json", str(path))
    assert (data["contextWindow"], data["configuredWindow"], data["configuredWindowSource"]) == (258_400, 272_000, "openai-prices.json")
    assert "95% of the configured 272,000" in data["windowNote"]
    assert data["percentLeft"] == 100


def test_context_json_messages() -> None:
    data = run_json("context", "--json", str(MAIN))
    assert data["agent"] == "codex" and data["messageCount"] == len(data["messages"]) == len(data["meta"]) == 15
    assert data["messages"][0]["role"] == "system"
    assert data["meta"][0]["source"] == "session_meta.base_instructions"


def test_rate_limits_in_map_json() -> None:
    data = run_json("map", "--json", str(PARENT))
    assert data["rateLimits"]["limits"]["primary"]["used_percent"] == 19.0


def test_steering_refuses_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / MAIN.name
    path.write_bytes(MAIN.read_bytes())
    before = path.read_bytes()
    for args in (["pin", str(path), "msg_x"], ["collapse", str(path), "--turns", "1"], ["compact", str(path)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, (args, result.output)
        assert f"refused, nothing written: {args[0]}: Codex rollouts are Codex's own append-only record" in result.stderr
    assert path.read_bytes() == before


def test_not_a_rollout_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "rollout-2026-12-02T00-00-00-x.jsonl"
    path.write_text('{"hello": "world"}\n')
    for command in ("map", "cache", "context"):
        result = runner.invoke(app, [command, "--json", str(path)])
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [f"ds4tui: {path}: not a session file of Pi, Claude Code, Codex or OpenCode"]
