"""The dashboard and `ds4tui map --json` show one split of one session, for Codex and Claude Code.

The dashboard reads a Codex rollout or a Claude Code transcript through the agent's plug-in
(`ConversationLive` → `Agent.account`), and `map --json` through the same plug-in's functions, so
the categories on screen are the JSON's (Codex: the same cl100k counts, calibrated to Codex's
own count; Claude Code: its `/context` rows). Checked on every rollout and transcript of the
shared samples (skipped with a reason when absent) and on the copies in tests/fixtures (always),
with the real app (`App.run_test()`) and the real command.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ds4tui.app import Ds4App
from ds4tui.cli import app as cli_app
from ds4tui.render import calibrated_of
from ds4tui.text import fmt_tokens
from tests.app.test_dashboard import settle
from tests.conftest import SHARED

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SKIP_SHARED = "the shared Codex sample (sessions-codex/) is absent; set DS4TUI_SHARED to run"


def rollouts() -> list[Path]:
    found = sorted((FIX / "codex" / "sample" / "sessions").rglob("rollout-*.jsonl"))
    if SHARED is not None:
        found += sorted((SHARED / "sessions-codex" / "sessions").rglob("rollout-*.jsonl"))
    return found


def transcripts() -> list[Path]:
    found = sorted((FIX / "claude").glob("*.jsonl"))
    if SHARED is not None:
        found += sorted((SHARED / "sessions-claude" / "projects").glob("*/*.jsonl"))
    return found


def map_json_of(path: Path) -> dict:
    result = CliRunner().invoke(cli_app, ["map", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_shared_sample_is_checked_when_present() -> None:
    if SHARED is None or not (SHARED / "sessions-codex").is_dir():
        pytest.skip(SKIP_SHARED)
    assert len([p for p in rollouts() if SHARED in p.parents]) == 2


@pytest.mark.parametrize("path", rollouts(), ids=lambda p: ("shared/" if SHARED and SHARED in p.parents else "fixture/") + p.name[-14:])
@pytest.mark.parametrize("poll_lines", [1 << 18, 2])
async def test_dashboard_shows_what_map_json_prints_codex(path: Path, poll_lines: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """(`poll_lines` 2: the dashboard reads the rollout in many slices, `Tailer.polls`, the same.)"""
    from ds4sessions.ingest import tailer

    expected = map_json_of(path)
    monkeypatch.setattr(tailer, "POLL_LINES", poll_lines)
    sizes: list[int] = []
    poll = tailer.Tailer.poll
    monkeypatch.setattr(tailer.Tailer, "poll", lambda self, *a: sizes.append(len((b := poll(self, *a)).lines)) or b)
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot, app)
        snap = app.snapshot
        assert snap.agent == expected["agent"] == "codex"
        best = snap.best
        assert (best.counter, best.estimate, best.unattributed, best.free) == (
            expected["estimator"], expected["estimate"], expected["unattributed"], expected["free"])
        assert snap.context_window == expected["contextWindow"]
        assert [(r.id, r.tokens) for r in best.rows] == [(r["id"], r["tokens"]) for r in expected["categories"]]
        provider = snap.provider
        assert (provider.context_tokens if provider else None) == expected["contextTokens"]
        assert snap.extras.header_note() == f"{expected['percentLeft']}% left"
        cal = calibrated_of(snap)
        assert cal.used == (expected["contextTokens"] or expected["estimate"])
        await pilot.press("q")
    assert max(sizes) <= poll_lines and sum(sizes) == path.read_bytes().count(b"\n"), sizes  # (lines in memory at once)
    if path.name.endswith("7ef9-7e61-a841-8556539ac489.jsonl"):  # the main rollout: a real gap to attribute
        # Codex's own count 10,613; cl100k estimate 10,348 with Codex 0.171.0's tool definitions and
        # the first request's remainder under Tools (issue 29), so 265 unattributed (was 5,335 / 5,278)
        assert expected["estimator"] == "cl100k" and expected["contextTokens"] == 10_613
        assert (expected["estimate"], expected["unattributed"]) == (10_348, 265)


@pytest.mark.parametrize("path", transcripts(), ids=lambda p: ("shared/" if SHARED and SHARED in p.parents else "fixture/") + p.name[-20:])
async def test_dashboard_shows_what_map_json_prints_claude(path: Path) -> None:
    """Claude Code: the legend's rows are `/context`'s (Messages split into our kinds, whose sum
    is `/context`'s Messages row), and the header's total is `map --json`'s."""
    expected = map_json_of(path)
    app = Ds4App(path, watch=False, retrieval=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot, app)
        snap = app.snapshot
        assert snap.agent == expected["agent"] == "claude-code"
        terms = {t["id"]: t for t in expected["categories"]}
        rows = {r.id: r.tokens for r in snap.best.rows}
        for tid in ("system_prompt", "system_tools", "mcp_tools", "custom_agents", "memory_files", "skills"):
            assert rows.get(tid, 0) == terms[tid]["tokens"], tid
        kids = {c["id"]: c["tokens"] for c in terms["messages"]["children"]}
        assert sum(rows.get(k, 0) for k in kids) == terms["messages"]["tokens"]
        assert rows["free"] == terms["free_space"]["tokens"]
        assert snap.context_window == expected["contextWindow"]
        cal = calibrated_of(snap)
        assert cal.used == expected["total"]
        assert app.view.header.used == expected["total"]
        await pilot.press("q")


def test_fmt_tokens_is_the_one_formatter() -> None:
    """The sessions layer words numbers with the app's formatter (`ds4core.tokens.fmt_tokens`)."""
    from ds4core.tokens import fmt_tokens as core_fmt

    assert fmt_tokens is core_fmt and fmt_tokens(14_776) == "14.8k"
