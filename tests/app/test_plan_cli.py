"""`ds4tui plan`: a plan (managed or an explicit fallback) for every shared sample and bad input,
metadata only, with the user's or an explicit DS4 configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ds4sessions.agents.pi.discovery import agent_dir
from ds4tui.cli import app
from tests.conftest import SHARED, shared_params

runner = CliRunner()
FILES = (
    sorted(str(p.relative_to(SHARED)) for p in [*(SHARED / "sessions-pi").glob("*.jsonl"), *(SHARED / "bad-inputs").glob("*.jsonl")])
    if SHARED
    else []
)


@pytest.mark.parametrize("name", shared_params(FILES))
def test_plan_json_exits_0_with_a_plan(name: str, shared_dir: Path) -> None:
    result = runner.invoke(app, ["plan", "--json", str(shared_dir / name)])
    assert result.exit_code == 0, result.output
    manifest = json.loads(result.stdout)
    planning = manifest["planning"]
    assert planning["mode"] in ("managed", "fallback")
    if planning["mode"] == "fallback":
        assert planning["fallbackReason"]
    included = sum(i["tokens"] for i in manifest["included"])
    assert manifest["estimatedInputTokens"] == included == manifest["composition"]["estimatedInputTokens"]
    for item in manifest["included"] + manifest["excluded"]:
        assert set(item) <= {"kind", "included", "sourceId", "role", "messageIndex", "groupId", "tokens", "score", "pinned", "reason"}


def test_plan_fallback_is_explicit(shared_dir: Path) -> None:
    # A context_edit omits a tool result: DS4's validation rejects the selection, fail-open.
    result = runner.invoke(app, ["plan", "--json", str(shared_dir / "sessions-pi" / "05-extensions-models.jsonl")])
    manifest = json.loads(result.stdout)
    assert manifest["planning"]["mode"] == "fallback"
    assert manifest["planning"]["fallbackReason"] == "selected tool call toolu_01IADidkfJSk4p2HNOWmFfkh has no result"
    assert manifest["excluded"] == []


def test_plan_text_lists_items_without_content(sample01: Path) -> None:
    result = runner.invoke(app, ["plan", str(sample01)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "DS4 Context Plan"
    assert "Included (23)" in lines
    assert "001. system 719 tok source=pi:system-prompt" in lines
    assert "     Pi effective system prompt" in lines
    assert "Excluded (0)" in lines
    text = sample01.read_text(encoding="utf-8")
    first_prompt = json.loads(text.splitlines()[4])["message"]["content"]
    assert isinstance(first_prompt, (str, list))
    prompt_text = first_prompt if isinstance(first_prompt, str) else first_prompt[0]["text"]
    assert prompt_text not in result.stdout


def test_plan_config_option_and_warnings(sample01: Path, tmp_path: Path) -> None:
    config = tmp_path / "ds4.json"
    config.write_text(json.dumps({"context": {"recentTailTokens": 100, "rescueImmediatePredecessor": False, "odd": 1}}))
    result = runner.invoke(app, ["plan", "--json", "--config", str(config), str(sample01)])
    assert result.exit_code == 0, result.output
    manifest = json.loads(result.stdout)
    assert manifest["planning"]["recentTailTokenLimit"] == 100
    assert manifest["excluded"] != []
    assert manifest["warnings"] == [f"{config}: Unknown configuration key ignored: context.odd"]
    assert f"ds4tui: {config}: Unknown configuration key ignored: context.odd" in result.stderr


def test_plan_reads_the_global_config(sample01: Path) -> None:
    (agent_dir() / "ds4-context.json").write_text(json.dumps({"context": {"recentTailTokens": 200}}))
    manifest = json.loads(runner.invoke(app, ["plan", "--json", str(sample01)]).stdout)
    assert manifest["planning"]["recentTailTokenLimit"] == 200


def test_plan_missing_file_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert "no such file" in result.stderr
