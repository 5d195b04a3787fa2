"""The bundled demo session (`ds4tui/data/demo-session.jsonl`) and its generator
(`scripts/make_demo_session.py`): the committed file is exactly what the generator writes, it is a
well-formed Pi session (format §3-§10) that our reader accepts without problems, and its usage is
priced like pi-ai prices claude-sonnet-4-5 (USD per million tokens)."""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ds4sessions.agents.pi.context import build_context
from ds4sessions.agents.pi.reader import read_session

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "make_demo_session.py"
DEMO = ROOT / "ds4tui" / "data" / "demo-session.jsonl"
PRICES = {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}  # claude-sonnet-4-5
SYSTEM_AND_TOOLS_TOKENS = 2379  # the demo's system prompt + 4 tool definitions, ceil(chars/4)


def load_generator() -> ModuleType:
    """Import the generator script as a module (registered in sys.modules for its dataclasses)."""
    spec = importlib.util.spec_from_file_location("make_demo_session", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def entries() -> list[dict[str, Any]]:
    """The demo file's lines, parsed (each must be one JSON object)."""
    lines = DEMO.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""  # ends with a newline
    return [json.loads(line) for line in lines[:-1]]


def messages(entries: list[dict[str, Any]], role: str) -> list[dict[str, Any]]:
    return [e["message"] for e in entries if e["type"] == "message" and e["message"]["role"] == role]


def test_generator_reproduces_the_committed_file(tmp_path: Path) -> None:
    out = tmp_path / "demo.jsonl"
    assert load_generator().main(["--output", str(out)]) == 0
    assert out.read_bytes() == DEMO.read_bytes()


def test_shape_of_the_session(entries: list[dict[str, Any]]) -> None:
    header, body = entries[0], entries[1:]
    assert header["type"] == "session" and header["version"] == 3
    assert header["cwd"] == "/home/dev/projects/mdlinks"
    assert 60_000 <= DEMO.stat().st_size <= 200_000
    assert len(body) == 95
    assert len(messages(entries, "user")) == 12
    assert [e["type"] for e in body[:2]] == ["model_change", "thinking_level_change"]
    assert body[2]["message"]["role"] == "system"
    assert [t["name"] for t in body[2]["message"]["toolsAdded"]] == ["read", "bash", "edit", "write"]
    assert {e["type"] for e in body} == {
        "model_change",
        "thinking_level_change",
        "message",
        "session_info",
        "label",
        "compaction",
    }
    assert [e["label"] for e in body if e["type"] == "label"] == ["ds4:pin Windows CI failure (path separators)"]
    assert [e["name"] for e in body if e["type"] == "session_info"] == ["mdlinks: GitHub anchors and JSON output"]
    assert [m["command"] for m in messages(entries, "bashExecution")] == ["python -m mdlinks docs"]
    aborted = [m for m in messages(entries, "assistant") if m["stopReason"] == "aborted"]
    assert len(aborted) == 1
    assert aborted[0]["errorMessage"] == "Request was aborted."
    assert aborted[0]["usage"]["totalTokens"] == 0


def test_ids_form_one_linear_branch(entries: list[dict[str, Any]]) -> None:
    body = entries[1:]
    ids = [e["id"] for e in body]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 8 and int(i, 16) >= 0 and i == i.lower() for i in ids)
    assert [e["parentId"] for e in body] == [None, *ids[:-1]]
    stamps = [datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")) for e in entries]
    assert stamps == sorted(stamps)


def test_one_compaction_keeping_a_user_turn(entries: list[dict[str, Any]]) -> None:
    compactions = [(i, e) for i, e in enumerate(entries) if e["type"] == "compaction"]
    assert len(compactions) == 1
    index, compaction = compactions[0]
    kept = [i for i, e in enumerate(entries[:index]) if e.get("id") == compaction["firstKeptEntryId"]]
    assert len(kept) == 1
    assert entries[kept[0]]["message"]["role"] == "user"
    assert compaction["tokensBefore"] == entries[index - 1]["message"]["usage"]["totalTokens"]
    assert compaction["details"]["readFiles"] == ["tests/test_scanner.py", "tests/test_slugs.py"]
    assert compaction["summary"].startswith("## Goal\n")
    assert compaction["summary"].endswith("tests/test_report.py\n</modified-files>")


def usages(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = [m["usage"] for m in messages(entries, "assistant") if m["usage"]["totalTokens"]]
    return found + [e["usage"] for e in entries if e["type"] == "compaction"]


def test_costs_are_catalog_prices(entries: list[dict[str, Any]]) -> None:
    checked = usages(entries)
    assert len(checked) == 37
    for usage in checked:
        expected = {k: usage[k] * PRICES[k] / 1e6 for k in PRICES}
        for key, value in expected.items():
            assert usage["cost"][key] == pytest.approx(value, abs=1e-12), key
        assert usage["cost"]["total"] == pytest.approx(sum(expected.values()), abs=1e-12)
        assert usage["totalTokens"] == usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]


def test_prompt_cache_follows_the_requests(entries: list[dict[str, Any]]) -> None:
    """A warm reply reads exactly the previous request's prompt; after the compaction only the
    system prompt and tools are cached; after the 7-minute pause nothing is."""
    replies = [m for m in messages(entries, "assistant") if m["usage"]["totalTokens"]]
    compaction_ms = next(
        datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp() * 1000
        for e in entries
        if e["type"] == "compaction"
    )
    cold = []
    for before, reply in zip(replies, replies[1:]):
        prompt = before["usage"]["input"] + before["usage"]["cacheRead"] + before["usage"]["cacheWrite"]
        if reply["timestamp"] - before["timestamp"] > 300_000:
            cold.append(reply)
            assert reply["usage"]["cacheRead"] == 0
        elif before["timestamp"] < compaction_ms < reply["timestamp"]:
            assert reply["usage"]["cacheRead"] == SYSTEM_AND_TOOLS_TOKENS
        else:
            assert reply["usage"]["cacheRead"] == prompt
        assert 1 <= reply["usage"]["input"] <= 10
    assert len(cold) == 1
    assert cold[0]["usage"]["cacheWrite"] > 5_000


def test_reader_and_context_builder_accept_it() -> None:
    session = read_session(DEMO)
    assert session.diagnostics.total == 0
    assert session.session_name == "mdlinks: GitHub anchors and JSON output"
    context = build_context(session)
    assert [m["role"] for m in context.messages[:3]] == ["system", "compactionSummary", "user"]
    assert context.warnings == []
    assert context.model == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}
    assert context.thinking_level == "medium"
