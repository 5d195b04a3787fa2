"""The command line, run in-process with Typer's runner on real files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ds4tui.cli import app
from tests.conftest import SHARED, shared_params

runner = CliRunner()
SAMPLES = sorted(p.name[: -len(".context.json")] for p in (SHARED / "sessions-pi").glob("*.context.json")) if SHARED else []


@pytest.mark.parametrize("name", shared_params(SAMPLES))
def test_context_json_equals_pis_own(name: str, shared_dir: Path) -> None:
    src = shared_dir / "sessions-pi" / f"{name}.jsonl"
    expected = json.loads((shared_dir / "sessions-pi" / f"{name}.context.json").read_text(encoding="utf-8"))
    result = runner.invoke(app, ["context", "--json", str(src)])
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    keys = ["model", "thinkingLevel", "messages", "sessionName"]
    header = json.loads(src.read_bytes().split(b"\n", 1)[0])
    if header.get("version") == 3:  # older files get random ids from Pi's migration
        keys += ["leafId", "branchEntryIds", "contextEntryIds"]
        assert got["labels"] == expected["labels"]
    for key in keys:
        assert got[key] == expected[key], key


def test_context_json_on_the_bundled_fixture(sample01: Path) -> None:
    result = runner.invoke(app, ["context", "--json", str(sample01)])
    expected = json.loads(sample01.with_name("01-tools-and-image.context.json").read_text(encoding="utf-8"))
    assert json.loads(result.stdout)["messages"] == expected["messages"]


def test_map_json_numbers(sample01: Path) -> None:
    result = runner.invoke(app, ["map", "--json", str(sample01)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["model"] == "anthropic/claude-sonnet-4-5" and data["contextWindow"] == 200_000
    assert data["estimator"] == "cl100k"
    used = sum(c["tokens"] for c in data["categories"] if c["id"] != "free")
    assert used == data["estimate"] + data["unattributed"]
    assert data["free"] == 200_000 - data["provider"]["contextTokens"]
    assert data["provider"]["promptTokens"] > 0 and data["diagnostics"] == 0
    assert [t["index"] for t in data["turns"]] == [0, 1, 2, 3]


def test_map_panel_prints_categories(sample01: Path) -> None:
    result = runner.invoke(app, ["map", str(sample01)])
    assert result.exit_code == 0
    assert "Tool results" in result.stdout and "Free space" in result.stdout and "/ 200k" in result.stdout


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["map", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert "no such file" in result.stderr


def test_sessions_lists_the_agent_dir(tmp_path: Path, sample01: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = tmp_path / "agent"
    folder = agent / "sessions" / "--home-dev-projects-widget-service--"
    folder.mkdir(parents=True)
    shutil.copy(sample01, folder / "2026-03-02T08-41-13-726Z_x.jsonl")
    (folder / "notes.jsonl").write_text('{"type":"note"}\n')
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    result = runner.invoke(app, ["sessions", "--json"])
    data = json.loads(result.stdout)
    assert len(data) == 1
    assert data[0]["cwd"] == "/home/dev/projects/widget-service"
    assert data[0]["model"] == "anthropic/claude-sonnet-4-5"
    assert data[0]["entries"] == 22 and data[0]["size"] == sample01.stat().st_size


def test_markup_in_names_is_shown_literally(tmp_path: Path, sample01: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = tmp_path / "agent"
    folder = agent / "sessions" / "--y--"
    folder.mkdir(parents=True)
    text = sample01.read_text(encoding="utf-8").replace("Fix 404 for unknown widget ids", "[red]Fix[/] [link=https://x.example]404[/link] [/]")
    target = folder / "[red]x[-].jsonl"
    target.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["map", str(target)])
    assert result.exit_code == 0, result.output
    assert "[red]Fix[/] [link=https://x.example]404[/link] [/]" in result.stdout.replace("\n", "")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    listing = runner.invoke(app, ["sessions"], terminal_width=300)
    assert listing.exit_code == 0, listing.output
    assert "[red]Fix[/]" in listing.stdout and "[red]x[-].jsonl" in listing.stdout


@pytest.mark.parametrize(
    ("name", "problem"),
    [("B01-torn-tail", "partial_last_line: 1 (line 4)"), ("B03-metadata-leaf", "metadata_leaf: leaf is a metadata entry")],
)
def test_map_reports_problems(name: str, problem: str, shared_dir: Path) -> None:
    result = runner.invoke(app, ["map", "--json", str(shared_dir / "bad-inputs" / f"{name}.jsonl")])
    problems = json.loads(result.stdout)["problems"]
    assert any(p.startswith(problem) for p in problems), problems


def test_sessions_listing_reads_spaced_json(tmp_path: Path, sample01: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = tmp_path / "agent"
    folder = agent / "sessions" / "--p--"
    folder.mkdir(parents=True)
    lines = [json.loads(line) for line in sample01.read_text(encoding="utf-8").splitlines()]
    (folder / "s.jsonl").write_text("".join(json.dumps(o) + "\n" for o in lines), encoding="utf-8")  # ", " and ": "
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    data = json.loads(runner.invoke(app, ["sessions", "--json"]).stdout)
    assert data[0]["name"] == "Fix 404 for unknown widget ids" and data[0]["model"] == "anthropic/claude-sonnet-4-5"


def test_map_calibrates_an_estimate_above_the_provider(shared_dir: Path) -> None:
    """Issue 17: the legend said Tool results 201.1k + Free space 17k in a 200k window. The
    categories are now the provider's 183k split in the estimate's proportions."""
    result = runner.invoke(app, ["map", str(shared_dir / "sessions-pi" / "99-large.jsonl")], terminal_width=200)
    text = " ".join(result.stdout.split()).replace("│ ", "").replace(" │", "")
    assert "183k / 200k (91%)" in text
    assert "provider 183k · estimate 205.8k (cl100k) ×0.89" in text
    assert "Tool results ...................... 178.8k 89.4%" in text.replace(". .", "..") or "178.8k 89.4%" in text
    assert "Free space" in text and "17k 8.5%" in text
    data = json.loads(runner.invoke(app, ["map", "--json", str(shared_dir / "sessions-pi" / "99-large.jsonl")]).stdout)
    cal = data["calibrated"]
    assert sum(c["tokens"] for c in cal["categories"]) == data["contextWindow"] == 200_000
    assert cal["used"] == data["provider"]["contextTokens"] and cal["source"] == "provider"


def test_sessions_shows_the_name_the_header_shows(tmp_path: Path, sample01: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 17: `sessions` said "(no name)" where the header showed the file's name."""
    from ds4sessions.agents.pi.live import open_snapshot
    from ds4tui.header import first_prompt_of
    from ds4tui.widgets.panels import header_facts

    agent = tmp_path / "agent"
    folder = agent / "sessions" / "--z--"
    folder.mkdir(parents=True)
    unnamed = folder / "2026-03-02T08-41-13-726Z_unnamed.jsonl"
    unnamed.write_bytes(b"".join(line for line in sample01.read_bytes().splitlines(keepends=True) if b'"session_info"' not in line))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    listing = runner.invoke(app, ["sessions"], terminal_width=300)
    header = header_facts(open_snapshot(unnamed), demo=False, following=True)
    first = first_prompt_of(open_snapshot(unnamed).context.messages)
    assert first and header.name == first  # no session_info name: its first prompt, as Pi's list shows
    assert f"  {header.name[:60]}" in listing.stdout and "(no name)" not in listing.stdout


def test_no_argument_opens_the_newest_session_of_any_agent(tmp_path: Path, sample01: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 11: `ds4tui` with no argument opens the newest session of any agent."""
    import os
    import shutil

    from ds4tui.cli import newest_any_agent
    from tests.conftest import FIXTURES

    agent = tmp_path / "pi"
    (agent / "sessions" / "--p--").mkdir(parents=True)
    pi = agent / "sessions" / "--p--" / "s.jsonl"
    shutil.copyfile(sample01, pi)
    claude_home = tmp_path / "claude"
    project = claude_home / "projects" / "-home-dev-proj"
    project.mkdir(parents=True)
    claude = project / "11111111-2222-3333-4444-555555555555.jsonl"
    shutil.copyfile(FIXTURES / "claude" / "manual-compact-diagnostics.jsonl", claude)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_home))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "no-codex"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    os.utime(pi, (1_000_000_000, 1_000_000_000))
    assert newest_any_agent() == claude
    os.utime(claude, (900_000_000, 900_000_000))
    assert newest_any_agent() == pi
