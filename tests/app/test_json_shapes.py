"""`map`, `plan`, `cache` and `retrieve --json` keep their shapes and say which agent (docs/json.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ds4tui.cli import app

runner = CliRunner()

SHAPES = {
    "map": {
        "agent", "path", "model", "contextWindow", "estimator", "estimate", "unattributed", "free", "provider",
        "systemInferred", "categories", "calibrated", "turns", "diagnostics", "problems",
    },
    "plan": {
        "agent", "whatIf", "sessionId", "branchLeafId", "provider", "model", "modelAssumed", "contextMode", "contextWindow",
        "outputReserve", "hardInputLimit", "targetInputTokens", "estimatedInputTokens", "actualInputTokens",
        "piReportedContextTokens", "fixedTokensSource", "composition", "planning", "budget", "modelAwareness",
        "rescuedPredecessor", "oversizedTurnExclusions", "selectedGroups", "excludedGroups", "retrievedEventIds",
        "pins", "unmappedPins", "included", "excluded", "warnings",
    },
    "cache": {
        "at", "asOf", "agent", "model", "state", "cachedPrefixEnd", "pricingSource", "bridgeFixedTokens", "bridgeRequests",
        "bridgeMatched", "history", "decision", "whatIf",
    },
    "retrieve": {
        "agent", "path", "sessionId", "requestEntryId", "requestText", "descriptor", "retrieval", "rows",
        "evidenceText", "sourceEntryIds", "committedEntryCount", "maxRetrievedHistoryTokens", "selectedTokens",
        "planning", "index", "retrieveSeconds", "planSeconds",
    },
}


@pytest.mark.parametrize("command", sorted(SHAPES))
def test_json_shape_and_agent(command: str, sample01: Path, tmp_path: Path) -> None:
    path = tmp_path / sample01.name
    path.write_bytes(sample01.read_bytes())
    result = runner.invoke(app, [command, "--json", str(path)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["agent"] == "pi"
    assert set(data) == SHAPES[command]


def test_nested_shapes(sample01: Path, tmp_path: Path) -> None:
    """The nested objects scripts read most (docs/json.md), with their units' types."""
    path = tmp_path / sample01.name
    path.write_bytes(sample01.read_bytes())
    out = {c: json.loads(runner.invoke(app, [c, "--json", str(path)]).stdout) for c in SHAPES}
    assert set(out["map"]["provider"]) == {"anchorEntryId", "promptTokens", "contextTokens", "estimateAtAnchor", "ratio", "laterMessages"}
    assert set(out["map"]["turns"][0]) == {"index", "time", "prompt", "toolCalls", "tokens", "entryIds"}
    assert set(out["plan"]["composition"]) == {
        "systemTokens", "toolTokens", "messageTokens", "messageCount", "toolCount", "estimatedInputTokens",
        "excludedTokens", "excludedCount", "byKind",
    }
    assert out["plan"]["estimatedInputTokens"] == out["plan"]["composition"]["estimatedInputTokens"] == sum(
        i["tokens"] for i in out["plan"]["included"]
    )
    record = out["cache"]["history"]["records"][0]
    assert {"number", "entryId", "kind", "time", "input", "cacheRead", "cacheWrite", "output", "cost"} <= set(record)
    assert isinstance(record["time"], float) and isinstance(record["cacheRead"], int)
    assert set(out["retrieve"]["index"]) == {"path", "added", "rebuilt", "indexedEntries", "syncSeconds"}
