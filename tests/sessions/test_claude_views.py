"""Claude Code's `/context` terms, autocompact and cache, checked against Claude Code's own
`/context` output (shared sample and our agent-oracle fixtures, Claude Code 2.1.197)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ds4core.claude_context import autocompact, cache_ttl, context_terms, infer_miss_cause
from ds4core.claude_prices import claude_price, price_table
from ds4sessions.agents.claude.reader import read_transcript
from ds4sessions.agents.claude.views import cache_report, context_map, context_messages
from tests.conftest import SHARED, SKIP_NO_SHARED

FIX = Path(__file__).parents[1] / "fixtures" / "claude"
SAMPLE = "sessions-claude/projects/-home-dev-proj-claude/af1a7763-5fb1-49c2-9069-d33ceb06acd6.jsonl"
SAMPLE_CTX = "sessions-claude/af1a7763-5fb1-49c2-9069-d33ceb06acd6.claude-context.md"
B_ENV = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "30"}


def k(text: str) -> float:
    """'1.5k' / '33k' / '200' → tokens."""
    return float(text[:-1]) * 1000 if text.endswith("k") else float(text)


def parse_ctx(md: str) -> tuple[str, str, dict[str, float]]:
    """(tokens used text, window text, {category label: tokens}) of a `/context` markdown."""
    m = re.search(r"\*\*Tokens:\*\* ([\d.]+k?) / ([\d.]+k?)", md)
    assert m, md[:200]
    cats = {row[0]: k(row[1]) for row in re.findall(r"^\| ([A-Z][\w ]+) \| ([\d.]+k?) \| [\d.]+% \|$", md, re.M)}
    return m.group(1), m.group(2), cats


def fmt_k(tokens: int) -> str:
    """Claude Code's `/context` rounding: one decimal in thousands, trailing .0 dropped."""
    text = f"{tokens / 1000:.1f}"
    return (text[:-2] if text.endswith(".0") else text) + "k"


def cases() -> list[tuple[Path, str, dict[str, str]]]:
    out = [(FIX / "manual-compact-diagnostics.jsonl", (FIX / "manual-compact-diagnostics.claude-context.md").read_text(), {}),
           (FIX / "autocompact-diagnostics.jsonl", (FIX / "autocompact-diagnostics.claude-context.md").read_text(), B_ENV)]
    if SHARED is not None:
        out.append((SHARED / SAMPLE, (SHARED / SAMPLE_CTX).read_text(), {}))
    return out


@pytest.mark.parametrize("path,md,env", cases(), ids=lambda v: v.name if isinstance(v, Path) else "")
def test_agrees_with_claude_codes_own_context(path: Path, md: str, env: dict[str, str]) -> None:
    used, window, cats = parse_ctx(md)
    data = context_map(read_transcript(path), env)
    assert fmt_k(data["provider"]["contextTokens"]) == used  # the reported total is equal (Claude Code's rounding)
    assert fmt_k(data["contextWindow"]) == window
    ours = {c["id"]: c["tokens"] for c in data["categories"]}
    theirs = cats["System prompt"] + cats["System tools"] + cats.get("Skills", 0)
    mine = ours["system_prompt"] + ours["system_tools"] + ours["skills"]
    assert abs(mine - theirs) / theirs < 0.10, (mine, theirs)
    if "Autocompact buffer" in cats:
        assert ours["autocompact_buffer"] == cats["Autocompact buffer"]
    assert data["systemInferred"] and data["categories"][0]["inferred"]


def test_sample_total_and_categories_shape() -> None:
    if SHARED is None:
        pytest.skip(SKIP_NO_SHARED)
    data = context_map(read_transcript(SHARED / SAMPLE), {})
    assert data["agent"] == "claude-code" and data["provider"]["contextTokens"] == 19875 and data["totalSource"] == "provider"
    assert data["total"] == 19875 + data["laterEstimate"]
    assert [c["id"] for c in data["categories"]] == ["system_prompt", "system_tools", "mcp_tools", "mcp_tools_deferred",
                                                      "system_tools_deferred", "custom_agents", "memory_files", "skills",
                                                      "messages", "free_space", "autocompact_buffer"]
    messages = next(c for c in data["categories"] if c["id"] == "messages")
    assert {c["id"] for c in messages["children"]} == {"user", "assistant_text", "thinking", "tool_calls", "tool_results",
                                                      "attachments", "compaction"}
    assert next(c for c in messages["children"] if c["id"] == "compaction")["tokens"] > 0
    # the fixed part is inferred from the first request after the compaction (MAIN:52)
    assert data["fixedInferredFrom"] == "83e1df42-7ca3-49a0-824f-1269eb82584a"
    assert data["autocompact"]["threshold"] == 167_000 and data["autocompact"]["tokensUntil"] == 167_000 - data["total"]


def test_autocompact_rules_and_env_overrides() -> None:
    a = autocompact(200_000, {})
    assert (a.window, a.effective, a.threshold, a.buffer) == (200_000, 180_000, 167_000, 33_000)
    b = autocompact(200_000, B_ENV)  # the generator's session B
    assert (b.window, b.threshold, b.buffer) == (100_000, 24_000, 33_000)
    assert set(b.overrides) == {"CLAUDE_CODE_AUTO_COMPACT_WINDOW", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"}
    # the override only lowers (anthropics/claude-code #31806)
    assert autocompact(200_000, {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "95"}).threshold == 167_000
    assert autocompact(200_000, {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "5000"}).window == 100_000  # clamp
    assert autocompact(200_000, {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "junk"}).window == 200_000
    off = autocompact(200_000, {"DISABLE_AUTO_COMPACT": "1"})
    assert not off.enabled and off.tokens_until(10) is None
    # session B's auto compactions fired above 24,000 (preTokens 25,343 and 25,634)
    conv = read_transcript(FIX / "autocompact-diagnostics.jsonl")
    assert all(c.tokens_before >= b.threshold for c in conv.compactions if c.kind == "auto")


def test_free_space_is_window_minus_categories() -> None:
    t = context_terms(total=1000, window=10_000, fixed=800, message_children={"user": 100}, skills=50, buffer=3000)
    assert t.term("free_space").tokens == 10_000 - 800 - 100 - 3000  # skills are inside the fixed 800
    # Skills come out of the tool definitions, as in `/context` (System tools = tools − Skills)
    assert t.term("system_prompt").tokens + t.term("system_tools").tokens + t.term("skills").tokens == 800


def test_cache_ttl_tiers() -> None:
    assert cache_ttl(100.0, 10, 0).expires_at == 400.0
    one_h = cache_ttl(100.0, 0, 45)
    assert one_h.tier == "1h" and one_h.expires_at == 3700.0
    both = cache_ttl(100.0, 5, 45)  # the 5 min part expires first
    assert both.tier == "5m" and both.expires_at == 400.0 and both.expires_1h_at == 3700.0
    assert cache_ttl(100.0, 0, 0, tier_before="1h").expires_at == 3700.0  # a read refreshes the tier
    assert both.remaining(1000.0) == 0.0 and both.remaining(160.0) == 240.0


def test_inferred_miss_causes() -> None:
    assert infer_miss_cause(gap_seconds=10, ttl_seconds=300, compaction_between=True, model_changed=False) == "compaction"
    assert infer_miss_cause(gap_seconds=301, ttl_seconds=300, compaction_between=False, model_changed=False) == "ttl_lapse"
    assert infer_miss_cause(gap_seconds=10, ttl_seconds=300, compaction_between=False, model_changed=True) == "model_changed"
    assert infer_miss_cause(gap_seconds=10, ttl_seconds=300, compaction_between=False, model_changed=False) == "prefix_changed"


def test_cache_report_on_sample() -> None:
    if SHARED is None:
        pytest.skip(SKIP_NO_SHARED)
    conv = read_transcript(SHARED / SAMPLE)
    report = cache_report(conv)
    # 8 real requests once each; MAIN:6 + 10 + 15 + 18 + 24 + 27 + 32 + 52
    assert report["totals"] == {"requests": 8, "inputTokens": 36, "cacheReadTokens": 117417,
                                "cacheWriteTokens": 39769, "outputTokens": 331}
    misses = report["history"]["misses"]
    assert len(misses) == 1 and misses[0]["miss"] == {"cause": "compaction", "source": "inferred", "gapSeconds": pytest.approx(2.931, abs=0.01)}
    assert misses[0]["cacheWrite"] == 19872  # MAIN:52
    state = report["state"]
    assert state["tier"] == "5m" and state["remainingSeconds"] == 300.0  # anchored at the last request
    # MAIN:15's 1h write: that request's row carries the 1h split
    assert report["history"]["records"][2]["cacheWrite1h"] == 45
    later = cache_report(conv, at=state["anchor"] + 100)
    assert later["state"]["remainingSeconds"] == pytest.approx(200.0)
    assert report["costUsd"] == pytest.approx(sum(r["costUsd"] for r in report["history"]["records"] if r["costUsd"]))


def test_cache_report_recorded_reasons() -> None:
    report = cache_report(read_transcript(FIX / "manual-compact-diagnostics.jsonl"))
    misses = report["history"]["misses"]
    assert [m["miss"]["source"] for m in misses] == ["recorded"]
    assert misses[0]["miss"]["cause"] == "messages_changed"


def test_price_table_is_data_with_source() -> None:
    table = price_table()
    assert "litellm" in table["source"] and "make_agent_models.py" in table["source"] and table["checked"]
    p = claude_price("claude-opus-4-8")
    assert p is not None and p.cost(input=1_000_000, cache_write_5m=0, cache_write_1h=0, cache_read=0, output=0) == 5
    assert claude_price("claude-sonnet-4-5-20250929[1m]").input == 3
    assert claude_price("claude-unknown-9") is None
    conv = read_transcript(FIX / "manual-compact-diagnostics.jsonl")
    assert cache_report(conv)["unpricedModels"] == []


def test_context_messages_is_what_the_model_saw() -> None:
    data = context_messages(read_transcript(FIX / "manual-compact-diagnostics.jsonl"))
    assert data["agent"] == "claude-code"
    assert data["messages"][0]["role"] == "compactionSummary"
    assert len(data["messages"]) == len(data["meta"]) == data["messageCount"]
    json.dumps(data)


def test_right_after_a_compaction_the_fixed_part_comes_from_the_first_request() -> None:
    if SHARED is None:
        pytest.skip(SKIP_NO_SHARED)
    lines = (SHARED / SAMPLE).read_bytes().splitlines(keepends=True)[:48]  # through MAIN:48, before MAIN:52
    from ds4sessions.agents.claude.reader import ClaudeReader

    reader = ClaudeReader(SHARED / SAMPLE)
    reader.feed([(i + 1, 0, raw) for i, raw in enumerate(lines)])
    conv = reader.conversation()
    data = context_map(conv, {})
    assert data["totalSource"] == "estimate" and data["provider"] is None  # no reply since /compact
    assert data["fixedInferredFrom"] == "eb6f51c9-eb3d-4c92-976b-a2522fd5128c"  # MAIN:6
    full = context_map(read_transcript(SHARED / SAMPLE), {})
    # the fixed part is system prompt + tools + skills (skills come out of the tools, as in /context)
    fixed_now = sum(c["tokens"] for c in data["categories"] if c["id"] in ("system_prompt", "system_tools", "skills"))
    fixed_full = sum(c["tokens"] for c in full["categories"] if c["id"] in ("system_prompt", "system_tools", "skills"))
    assert abs(fixed_now - fixed_full) / fixed_full < 0.02  # 19,341 − messages vs 19,875 − messages
    # the estimate + what MAIN:49–51 then added (reply, prompt, skill listing) ≈ MAIN:52's 19,875
    from ds4sessions.agents.claude.views import messages_tokens_of

    whole = read_transcript(SHARED / SAMPLE)
    added = messages_tokens_of(whole.messages[len(conv.messages):whole.last_request.message_index])
    assert abs(data["total"] + added - 19875) / 19875 < 0.02
