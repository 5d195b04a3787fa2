"""The deterministic collapse summary and its price (ds4core.collapse)."""

from __future__ import annotations

import json

import pytest
from ds4core.collapse import (
    LIST_CAP,
    CommandRun,
    collapse_cost,
    render_summary,
    summarize_span,
)
from ds4core.models import Pricing

from tests.conftest import FIXTURES


def call(cid: str, name: str, **args: object) -> dict:
    return {"type": "toolCall", "id": cid, "name": name, "arguments": args}


def result(cid: str, text: str, error: bool = False) -> dict:
    return {"role": "toolResult", "toolCallId": cid, "toolName": "x", "content": [{"type": "text", "text": text}], "isError": error}


def assistant(*blocks: dict, usage: dict | None = None) -> dict:
    message = {"role": "assistant", "content": list(blocks), "stopReason": "toolUse"}
    if usage is not None:
        message["usage"] = usage
    return message


SPAN = [
    {"role": "user", "content": "Fix the\n  failing   test."},
    assistant(
        call("c1", "read", path="src/a.py"), call("c2", "read", path="src/b.py"), call("c3", "bash", command="pytest -q"),
        usage={"input": 10, "output": 5, "cacheRead": 100, "cacheWrite": 20, "totalTokens": 135,
               "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0.01, "cacheWrite": 0.02, "total": 0.33}},
    ),
    result("c1", "a"), result("c2", "b"),
    result("c3", "FAILED test_x\nassert 1 == 2\n\nCommand exited with code 1", error=True),
    assistant(call("c4", "edit", path="src/a.py"), call("c5", "write", path="tests/test_new.py"),
              usage={"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4, "totalTokens": 10,
                     "cost": {"input": 1, "output": 1, "cacheRead": 1, "cacheWrite": 1, "total": 4}}),
    result("c4", "ok"), result("c5", "ok"),
    assistant(call("c6", "bash", command="ls"), call("c7", "bash", command="npm run lint")),
    result("c6", "a b"), result("c7", "clean"),
    {"role": "bashExecution", "command": "cargo test", "output": "boom", "exitCode": 101, "cancelled": False, "truncated": False},
    {"role": "user", "content": [{"type": "text", "text": "Thanks."}, {"type": "image", "data": "AA==", "mimeType": "image/png"}]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "All green now."}], "stopReason": "stop"},
]


def test_summary_fields() -> None:
    s = summarize_span(SPAN)
    assert s.turns == 2 and s.messages == len(SPAN)
    assert s.prompts == ("Fix the failing test.", "Thanks.")
    assert s.modified_files == ("src/a.py", "tests/test_new.py")
    assert s.read_files == ("src/b.py",)  # src/a.py was read and then edited: modified only
    assert [c.command for c in s.commands] == ["pytest -q", "ls", "npm run lint", "cargo test"]
    assert s.validation_runs == (
        CommandRun("pytest -q", False, "Command exited with code 1"),
        CommandRun("npm run lint", True),
        CommandRun("cargo test", False, "exit code 101"),
    )
    assert s.failures == (CommandRun("pytest -q", False, "Command exited with code 1"), CommandRun("cargo test", False, "exit code 101"))
    assert s.outcome == "All green now."
    assert s.usage == {
        "input": 11, "output": 7, "cacheRead": 103, "cacheWrite": 24, "totalTokens": 145,
        "cost": {"input": 1.1, "output": 1.2, "cacheRead": 1.01, "cacheWrite": 1.02, "total": 4.33},
    }


def test_summary_text_exact() -> None:
    assert summarize_span(SPAN).text == "\n".join([
        "Collapsed by ds4tui (built from the session entries, no model call): 2 turns, 14 messages.",
        "",
        "## Objective",
        "- Fix the failing test.",
        "- Thanks.",
        "",
        "## Files Modified (2)",
        "- `src/a.py`",
        "- `tests/test_new.py`",
        "",
        "## Files Read (1)",
        "- `src/b.py`",
        "",
        "## Commands / Tests",
        "- 4 commands run, 3 validation runs",
        "- `pytest -q` (failed: Command exited with code 1)",
        "- `npm run lint` (ok)",
        "- `cargo test` (failed: exit code 101)",
        "",
        "## Errors / Risks (2)",
        "- `pytest -q` (failed: Command exited with code 1)",
        "- `cargo test` (failed: exit code 101)",
        "",
        "## Current State",
        "All green now.",
    ])
    assert summarize_span(SPAN).text == summarize_span(json.loads(json.dumps(SPAN))).text  # deterministic


def test_failed_non_bash_tool_names_tool_and_path() -> None:
    span = [{"role": "user", "content": "x"}, assistant(call("e", "edit", path="a.txt")), result("e", "Could not find the text\nmore", error=True)]
    assert summarize_span(span).failures == (CommandRun("edit a.txt", False, "Could not find the text"),)


def test_lists_capped_at_twelve() -> None:
    calls = [call(f"w{i}", "write", path=f"f{i:02d}.py") for i in range(LIST_CAP + 5)]
    span = [{"role": "user", "content": "many"}, assistant(*calls)]
    s = summarize_span(span)
    assert len(s.modified_files) == 17
    section = s.text.split("## Files Modified (17)\n")[1].split("\n\n")[0].splitlines()
    assert section[:2] == ["- `f00.py`", "- `f01.py`"]
    assert len(section) == 13 and section[-1] == "- … and 5 more"
    assert "## Files Read (0)\n- None" in s.text
    assert "## Errors / Risks (0)\n- None" in s.text
    assert s.text.endswith("## Current State\n- None")


def test_empty_span_and_render_is_pure() -> None:
    s = summarize_span([])
    assert s.turns == 0 and s.usage == {} and render_summary(s) == s.text


def test_real_pi_span_from_sample_01() -> None:
    """The first turn of a Pi-written session: reads, an edit, a test run that failed, then passed."""
    from ds4sessions.agents.pi import build_context, read_session

    ctx = build_context(read_session(FIXTURES / "pi" / "01-tools-and-image.jsonl"))
    first = [i for i, m in enumerate(ctx.messages) if m["role"] == "user"]
    s = summarize_span(ctx.messages[first[0] : first[1]])
    assert s.turns == 1
    assert s.modified_files == ("src/routes/widgets.js",)
    assert s.read_files == ("src/lib/store.js",)  # as Pi's own file lists for this span
    assert [c.command for c in s.commands] == ['grep -rn "store.get\\|\\.get(id)" src test', "npm test 2>&1", "npm test 2>&1 | tail -25"]
    assert s.validation_runs == (
        CommandRun("npm test 2>&1", False, "Command exited with code 1"),
        CommandRun("npm test 2>&1 | tail -25", True),
    )
    assert s.failures == (CommandRun("npm test 2>&1", False, "Command exited with code 1"),)
    assert s.outcome.startswith("Fixed.\n\n**Cause:** `routes.get` in `src/routes/widgets.js`")


def test_collapse_cost() -> None:
    pricing = Pricing(input=3, output=15, cache_read=0.3, cache_write=3.75)
    c = collapse_cost(prefix_tokens=10_000, span_tokens=5_000, summary_tokens=500, pricing=pricing)
    assert c.saved_tokens == 4_500
    assert c.next_without_usd == pytest.approx(15_000 * 0.3 / 1e6)
    assert c.next_with_usd == pytest.approx((10_000 * 0.3 + 500 * 3.75) / 1e6)
    assert c.cache_loss_usd == pytest.approx((10_000 * 0.3 + 500 * 3.75 - 15_000 * 0.3) / 1e6)  # 0.000375
    assert c.saving_per_request_usd == pytest.approx(4_500 * 0.3 / 1e6)
    assert c.break_even_requests == 1
    # no cache-write price (OpenAI): the summary is paid at the input price
    c2 = collapse_cost(1_000, 50_000, 1_000, Pricing(input=1.25, output=10, cache_read=0.125, cache_write=0))
    assert c2.next_with_usd == pytest.approx((1_000 * 0.125 + 1_000 * 1.25) / 1e6)
    assert c2.break_even_requests == 0  # cheaper at once
    c3 = collapse_cost(1_000, 2_000, 100, None)
    assert c3.saved_tokens == 1_900 and c3.next_with_usd is None and c3.break_even_requests is None


def test_a_summary_longer_than_the_turn_is_called_a_cost() -> None:
    from ds4core.collapse import CollapseCost

    cost = CollapseCost(100, 34, 111, -77, 0.01, 0.02, 0.01, -0.000008, None)
    assert cost.token_effect() == "costs ~77 more tokens (34 → 111 summary): the summary is longer than what it replaces"
    assert cost.per_request_effect(lambda v: f"${v:.6f}") == "then $0.000008 more per request"
    saving = CollapseCost(100, 1400, 148, 1252, 0.01, 0.02, 0.01, 0.0004, 2)
    assert saving.token_effect() == "saves ~1.3k tokens (1.4k → 148 summary)"
