"""Claude Code's newest release (2.1.337, tests/fixtures/claude-2.1.337) and 2.1.197 against Claude
Code's own `/context` and cost: every `/context` row within max(10 %, 50 tokens) (plus `/context`'s
own print rounding: "1.9k" is any value in [1850, 1950)), the window exactly, the total within 2 %;
the cost and the request count equal to Claude Code's `--output-format json` result within 1 %;
nothing unknown passes silently."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ds4core.agent_models import claude_window, model_facts, models_table
from ds4core.claude_prices import claude_price
from ds4sessions.agents.claude.reader import ClaudeReader, read_transcript
from ds4sessions.agents.claude.views import cache_report, context_map, context_messages, shown_category
from tests.conftest import SHARED

NEW = Path(__file__).parents[1] / "fixtures" / "claude-2.1.337"
OLD = Path(__file__).parents[1] / "fixtures" / "claude"
SAMPLE = "sessions-claude/projects/-home-dev-proj-claude/af1a7763-5fb1-49c2-9069-d33ceb06acd6.jsonl"
B_ENV = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "30"}
LABELS = {"System prompt": "system_prompt", "System tools": "system_tools", "System tools (deferred)": "system_tools_deferred",
          "MCP tools": "mcp_tools", "MCP tools (deferred)": "mcp_tools_deferred", "Custom agents": "custom_agents",
          "Memory files": "memory_files", "Skills": "skills", "Messages": "messages", "Free space": "free_space",
          "Autocompact buffer": "autocompact_buffer"}
"""Claude Code's `/context` labels → its category ids (2.1.337 cli.js, minified `w6r`)."""
SESSION_C = NEW / "projects" / "-home-dev-proj-claude-new" / "584f3aea-4307-4530-a48d-d9ea3df16caf.jsonl"
SESSION_D = NEW / "projects" / "-home-dev-proj-claude-new" / "d6a0e751-9a63-47ce-8b6e-b9427b63267b.jsonl"
SESSION_A = NEW / "projects" / "-home-dev-proj-claude" / "791935e2-22ea-41e0-b1bc-e46c7131f234.jsonl"
SESSION_B = NEW / "projects" / "-home-dev-proj-claude" / "5b20d964-48a1-4512-b6fe-c3216ea49ec0.jsonl"


def printed(text: str) -> tuple[float, float]:
    """(value, print rounding) of a `/context` number: "1.9k" → (1900, 50), "45" → (45, 0), "1m" → (1e6, 0)."""
    if text.endswith("m"):
        return float(text[:-1]) * 1e6, 0.0
    if text.endswith("k"):
        return float(text[:-1]) * 1000, 50.0
    return float(text), 0.0


def context_runs(path: Path) -> list[tuple[list[bytes], str]]:
    """Each `/context` run of a transcript: the lines as the run measured them (up to the last
    `last-prompt` before its output: test_claude_context_split.upto_context_run says why) and its output."""
    lines = path.read_bytes().splitlines(keepends=True)
    out = []
    for i, raw in enumerate(lines):
        row = json.loads(raw)
        if row.get("subtype") == "local_command" and "## Context Usage" in str(row.get("content")):
            left = max(j for j in range(i) if json.loads(lines[j]).get("type") == "last-prompt")
            out.append((lines[:left + 1], str(row["content"])))
    return out


def cases() -> list[tuple[Path, int, dict[str, str]]]:
    files = [(SESSION_A, {}), (SESSION_B, B_ENV), (SESSION_C, {}), (SESSION_D, {}),
             (OLD / "manual-compact-diagnostics.jsonl", {}), (OLD / "autocompact-diagnostics.jsonl", B_ENV)]
    if SHARED is not None and (SHARED / SAMPLE).exists():
        files.append((SHARED / SAMPLE, {}))
    return [(path, run, env) for path, env in files for run in range(len(context_runs(path)))]


@pytest.mark.parametrize("path,run,env", cases(), ids=lambda v: v.name[:8] if isinstance(v, Path) else str(v) if isinstance(v, int) else "")
def test_every_context_row_agrees_with_claude_codes_own(path: Path, run: int, env: dict[str, str]) -> None:
    lines, md = context_runs(path)[run]
    reader = ClaudeReader(path)
    reader.feed([(i + 1, 0, raw) for i, raw in enumerate(lines)])
    data = context_map(reader.conversation(), env)
    tokens = re.search(r"\*\*Tokens:\*\* ([\d.]+k?) / ([\d.]+[km]?)", md)
    assert tokens, md[:200]
    assert data["contextWindow"] == printed(tokens.group(2))[0]  # the window exactly
    total, rounding = printed(tokens.group(1))
    assert abs(data["total"] - total) <= 0.02 * total + rounding, (data["total"], tokens.group(1))
    rows = dict(re.findall(r"^\| ([A-Z][\w ()]+) \| ([\d.]+k?) \| [\d.]+% \|$", md, re.M))
    ours = {c["id"]: c for c in data["categories"]}
    for label, text in rows.items():
        value, rounding = printed(text)
        got = ours[LABELS[label]]["tokens"]
        assert abs(got - value) <= max(0.10 * value, 50) + rounding, (label, got, text)
    # and no row of ours that Claude Code did not print (a row is printed when it has tokens)
    shown = {c["label"] for c in data["categories"] if shown_category(c)}
    assert shown <= set(rows), shown - set(rows)


def test_newest_rows_come_from_what_the_transcript_records() -> None:
    lines, _ = context_runs(SESSION_C)[0]
    reader = ClaudeReader(SESSION_C)
    reader.feed([(i + 1, 0, raw) for i, raw in enumerate(lines)])
    conv = reader.conversation()
    data = context_map(conv, {})
    rows = {c["id"]: c for c in data["categories"]}
    assert conv.extra["version"] == "2.1.337" and data["fixedInferredFrom"].startswith("recorded")
    # /context: System prompt 1.9k (Σ of the prompt_snapshot's 10 sections), System tools 5.8k,
    # deferred 4.1k (not counted), Custom agents 32 (reviewer), Memory files 45 (CLAUDE.md)
    assert len(conv.extra["promptSnapshot"]) == 10 and rows["system_prompt"]["tokens"] == 1883
    assert rows["system_tools_deferred"]["deferred"] and rows["system_tools_deferred"]["tokens"] == 4064
    assert rows["custom_agents"]["tokens"] == 32 and conv.extra["customAgents"][0]["agentType"] == "reviewer"
    assert 40 <= rows["memory_files"]["tokens"] <= 50
    # Free space = window − the counted rows − the buffer; the deferred row is listed, not counted
    counted = sum(c["tokens"] for c in data["categories"] if not c.get("deferred") and c["id"] not in ("free_space", "autocompact_buffer"))
    assert counted == data["total"] and rows["free_space"]["tokens"] == 1_000_000 - counted - 33_000
    assert data["windowKnown"] and "litellm" in data["windowSource"] and data["windowNote"] is None


def test_prompt_snapshot_and_state_records_are_no_messages() -> None:
    conv = read_transcript(SESSION_C)
    data = context_messages(conv)
    texts = [b.get("text", "") for m in data["messages"] for b in m.get("content") or () if isinstance(b, dict)]
    assert not any('"systemPrompt"' in t or t.startswith("{") for t in texts)
    sources = {m["source"] for m in data["meta"] if m["source"]}
    assert "attachment:prompt_snapshot" not in sources and "attachment:session_context" not in sources
    # attachments carry the text Claude Code sent (`rendered`): CLAUDE.md inside a system-reminder
    memory = [m for m, meta in zip(data["messages"], data["meta"]) if meta["category"] == "memory_files"]
    assert len(memory) == 1 and "Contents of /home/dev/proj-claude-new/CLAUDE.md" in memory[0]["content"][0]["text"]
    assert conv.extra["unknownFormats"] == {} and not conv.diagnostics


@pytest.mark.parametrize("path,result", [
    (SESSION_A, "claude-7b-context-json.out"), (SESSION_C, "claude-c7x.out"), (SESSION_D, "claude-d4x.out")])
def test_cost_and_requests_equal_claude_codes_own(path: Path, result: str) -> None:
    """Claude Code's own `total_cost_usd` / `modelUsage` (its JSON result) within 1 %; one request
    count in the map and the cache report. Session D's interrupted streamed reply is written with
    output_tokens 1 (its `message_start`), so the requests alone undercount output (161 vs 187) while
    the recorded cost-state is Claude Code's own; session A's subagent and compaction calls are in
    Claude Code's cost, not in the main file's requests."""
    own = json.loads((NEW / "cli-output" / result).read_text())
    conv = read_transcript(path)
    report = cache_report(conv)
    assert report["costSource"].startswith("recorded")
    assert report["costUsd"] == pytest.approx(own["total_cost_usd"], rel=0.01)
    for model, usage in own["modelUsage"].items():
        assert report["recordedModelUsage"][model]["costUSD"] == pytest.approx(usage["costUSD"], rel=0.01)
    assert context_map(conv, {})["requests"] == report["totals"]["requests"]
    if path is SESSION_C:  # no subagent, no interruption: our prices give the same cost
        assert report["pricedCostUsd"] == pytest.approx(own["total_cost_usd"], rel=1e-6)


def test_unknown_formats_are_counted_and_shown_as_other(tmp_path: Path) -> None:
    base = {"sessionId": "s", "cwd": "/p", "version": "9.9.9", "isSidechain": False}
    rows = [
        {**base, "type": "user", "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": "hi"}},
        {**base, "type": "attachment", "uuid": "a1", "parentUuid": "u1", "attachment": {"type": "hologram", "x": "y" * 50}},
        {**base, "type": "assistant", "uuid": "r1", "parentUuid": "a1", "message": {
            "id": "m1", "model": "claude-opus-9", "content": [{"type": "text", "text": "ok"}, {"type": "sparkle", "n": 1}],
            "usage": {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 2}}},
        {"type": "telepathy-state", "sessionId": "s", "payload": "z" * 30},
        {"type": "telepathy-state", "sessionId": "s"},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    conv = read_transcript(path)
    unknown = conv.extra["unknownFormats"]
    assert unknown["entryTypes"]["telepathy-state"]["count"] == 2 and unknown["entryTypes"]["telepathy-state"]["bytes"] > 60
    assert unknown["attachmentTypes"]["hologram"]["count"] == 1
    assert unknown["contentBlocks"]["sparkle"]["count"] == 1
    lines = [str(d) for d in conv.diagnostics]
    assert any("unknown entry type 'telepathy-state': 2 ×" in line for line in lines)
    assert any('"other: hologram"' in line for line in lines) and len(lines) == 3
    data = context_map(conv, {})
    attachments = next(c for c in next(c for c in data["categories"] if c["id"] == "messages")["children"] if c["id"] == "attachments")
    assert [c["label"] for c in attachments.get("children", [])] == ["other: hologram"]
    texts = json.dumps(context_messages(conv)["messages"])
    assert "y" * 50 not in texts and "[other: hologram]" in texts and "[other: sparkle]" in texts
    # an unknown model: the window says so instead of a silent guess
    assert data["contextWindow"] == 200_000 and data["windowKnown"] is False
    assert data["windowNote"] == "window unknown: assumed 200k"


def test_model_facts_are_data_with_source_and_date() -> None:
    table = models_table()
    assert "litellm" in table["source"]["litellm"] and table["source"]["agents"]["claude-code"] == "2.1.337"
    for mid, row in table["models"].items():
        assert row["date"] and row["source"] and row["namedBy"], mid
        assert not row["known"] or row["contextWindow"], mid
    assert claude_window("claude-opus-5-5", "2.1.337").tokens == 1_000_000
    assert claude_window("claude-opus-4-8", "2.1.197").tokens == 200_000  # 2.1.197's /context: 200k
    assert claude_window("claude-sonnet-4-5[1m]", "2.1.337").tokens == 1_000_000
    assert claude_window("claude-sonnet-4-5", "2.1.337").tokens == 200_000
    unknown = claude_window("claude-fable-5-2", "2.1.337")  # named by Claude Code, not in LiteLLM 1.110.2
    assert not unknown.known and unknown.note == "window unknown: assumed 200k"
    assert model_facts("claude-fable-5-2").known is False
    # the price Claude Code itself used for claude-sonnet-5-5 (session D's modelUsage)
    p = claude_price("claude-sonnet-5-5")
    assert p is not None and (p.input, p.output, p.cache_write_5m, p.cache_read) == (2, 10, 2.5, 0.1)
