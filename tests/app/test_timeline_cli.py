"""`ds4tui timeline --json` and `ds4tui map --at N --json` on every Pi, Claude Code and Codex
sample (issue 33's done-when): one row per request `cache --json` counts, the last row's context
is `map --json`'s, each compaction's row shows the sizes the session recorded, and the map at
request N is the map of the file cut after request N."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ds4tui.cli import app
from ds4tui.commands.timeline import cut_after_request, map_at, read_timeline
from tests.conftest import FIXTURES, SHARED as _SHARED

SHARED = _SHARED if _SHARED is not None else Path("/nonexistent-shared")  # ($DS4TUI_SHARED or ../shared)
PI = sorted(p for p in (SHARED / "sessions-pi").glob("*.jsonl") if p.name != "99-large.jsonl")
CLAUDE = sorted((SHARED / "sessions-claude" / "projects").glob("*/*.jsonl")) + sorted(
    (SHARED / "sessions-claude" / "projects").glob("*/*/subagents/*.jsonl")) + sorted((FIXTURES / "claude").glob("*.jsonl"))
CODEX = sorted((SHARED / "sessions-codex" / "sessions").glob("*/*/*/*.jsonl"))
SAMPLES = [p for p in PI + CLAUDE + CODEX if p.exists()]
if not SAMPLES:  # (without the shared samples: the repository's fixtures)
    SAMPLES = sorted((FIXTURES / "pi").glob("*.jsonl")) + sorted((FIXTURES / "claude").glob("*.jsonl"))


def _cache_count(path: Path) -> int:
    out = CliRunner().invoke(app, ["cache", str(path), "--json", "--last"])
    assert out.exit_code == 0, out.output
    history = json.loads(out.stdout)["history"]
    # (Codex's remote compaction call, `compactionCall`, is a billed request: a row too; Claude
    # Code's `<synthetic>` rows are no provider requests)
    return sum(1 for r in history["records"] if not r.get("synthetic") and not r.get("sidechain"))


def _context_of_map(data: dict) -> int:
    """The context now in `map --json`: Claude Code's `total` (its /context total: the provider's
    count plus the estimate of later messages), else `provider.contextTokens`, else the
    calibrated estimate."""
    if isinstance(data.get("total"), int):
        return int(data["total"])
    provider = data.get("provider")
    if provider is not None and provider.get("contextTokens") is not None:
        return int(provider["contextTokens"])
    return int(data["calibrated"]["used"] if "calibrated" in data else data["total"])


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name[:40] for p in SAMPLES])
def test_timeline_rows_match_cache_and_map(path: Path) -> None:
    agent, snapshot, tl = read_timeline(path)
    data = tl.to_json()
    rows = data["requests"]
    assert len(rows) == _cache_count(path)
    assert [r["n"] for r in rows] == list(range(1, len(rows) + 1))
    if rows:
        assert rows[-1]["contextTokens"] == _context_of_map(agent.map_json(path))
    recorded = [c.tokens_before for c in snapshot.conversation.compactions]
    marked = [(i, m) for i, r in enumerate(rows) for m in r["markers"] if m["type"] == "compaction"]
    assert [m["tokensBefore"] for _, m in marked] == recorded
    for i, m in marked:
        row = rows[i]
        if m["tokensAfter"] is None:  # a compaction after the last request
            assert i == len(rows) - 1
            continue
        assert m["tokensAfter"] == row["inputTokens"] + row["cacheReadTokens"] + row["cacheWriteTokens"]
        # the row before: the last request of the conversation before it (a billed compaction
        # call, Codex's, is a row of its own between them)
        before = next((r for r in reversed(rows[:i]) if r["kind"] != "compaction_call"), None)
        if before is not None and agent.name != "claude-code":
            # Pi and Codex record the provider's count of the last request (Claude Code its own /context count)
            assert before["contextTokens"] == m["tokensBefore"]
    for r in rows:
        if r["categories"] is not None and r is not rows[-1]:
            assert sum(r["categories"].values()) == r["contextTokens"]
    json.dumps(data)


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name[:40] for p in SAMPLES])
def test_map_at_every_request_is_the_map_of_the_cut_file(path: Path, tmp_path: Path) -> None:
    agent, _, tl = read_timeline(path)
    data = path.read_bytes()
    for row in tl.rows:
        at = map_at(path, row.n)
        end = cut_after_request(agent, path, row.entry_id)
        assert data[end - 1:end] == b"\n" or end == len(data)
        cut = tmp_path / path.name
        cut.write_bytes(data[:end])
        expected = agent.map_json(cut)
        expected["path"] = str(path)
        assert {k: v for k, v in at.items() if k != "asOfRequest"} == expected
        assert at["asOfRequest"] == row.n
        # the cut holds request N and is its own: its timeline ends with that request
        _, _, cut_tl = read_timeline(cut)
        assert cut_tl.rows[-1].entry_id == row.entry_id
        assert len(cut_tl.rows) == row.n


def test_cli_timeline_and_map_at(tmp_path: Path) -> None:
    path = SAMPLES[0]
    out = CliRunner().invoke(app, ["timeline", str(path), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert set(data) >= {"agent", "requests"}
    out = CliRunner().invoke(app, ["map", str(path), "--at", "1", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["asOfRequest"] == 1
    out = CliRunner().invoke(app, ["map", str(path), "--at", "9999", "--json"])
    assert out.exit_code == 2


@pytest.mark.skipif(not (SHARED / "sessions-pi" / "99-large.jsonl").exists(),
                    reason="the shared Pi sample 99-large.jsonl is absent; set DS4TUI_SHARED to run")
def test_map_at_on_the_large_sample_at_its_compactions_and_ends(tmp_path: Path) -> None:
    """99-large (30 MiB, 1,110 requests, 19 compactions) is too large to cut at every request in
    the suite: its first and last requests, the request before and the one after each of five
    compactions, and two in between. The cut holds exactly requests 1..N (its own timeline ends
    with request N), and `map --at N` is `map --json` of that cut."""
    path = SHARED / "sessions-pi" / "99-large.jsonl"
    agent, _, tl = read_timeline(path)
    data = path.read_bytes()
    marked = [i for i, r in enumerate(tl.rows) if any(m.kind == "compaction" for m in r.markers)]
    picks = {0, len(tl.rows) - 1, len(tl.rows) // 3, 2 * len(tl.rows) // 3}
    for i in marked[:: max(len(marked) // 5, 1)][:5]:
        picks.update({i - 1, i})
    for k, i in enumerate(sorted(p for p in picks if p >= 0)):
        row = tl.rows[i]
        end = cut_after_request(agent, path, row.entry_id)
        cut = tmp_path / f"{k}-{path.name}"
        cut.write_bytes(data[:end])
        _, _, cut_tl = read_timeline(cut)
        assert len(cut_tl.rows) == row.n and cut_tl.rows[-1].entry_id == row.entry_id
        if k < 2:  # (the command itself, twice: it reads the whole file again each time)
            at = map_at(path, row.n)
            expected = agent.map_json(cut)
            expected["path"] = str(path)
            assert {key: v for key, v in at.items() if key != "asOfRequest"} == expected
