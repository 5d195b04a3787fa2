"""scripts/format_drift.py on agent-oracle output folders made from our fixtures: nothing unknown on
the newest releases' files, and each kind of novelty listed (exit 1) when a row of it is added."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"


def out_dir(tmp: Path) -> Path:
    """An oracle-shaped `out/` folder holding the 2.1.337 and 0.171.0 fixtures."""
    out = tmp / "out"
    shutil.copytree(FIX / "claude-2.1.337" / "projects", out / "claude" / "projects")
    shutil.copytree(FIX / "claude-2.1.337" / "cli-output", out / "claude" / "cli-output")
    shutil.copytree(FIX / "codex-0.171.0" / "sessions", out / "codex" / "sessions")
    return out


def drift(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "format_drift.py"), "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_nothing_unknown_on_the_newest_fixtures(tmp_path: Path) -> None:
    result = drift(out_dir(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Claude Code 2.1.337: 5 transcripts" in result.stdout and "Codex 0.171.0: 2 rollouts" in result.stdout
    assert "System tools (deferred)" in result.stdout and result.stdout.strip().endswith("nothing unknown")


def test_each_kind_of_novelty_is_listed(tmp_path: Path) -> None:
    out = out_dir(tmp_path)
    session = next((out / "claude" / "projects").rglob("584f3aea-*.jsonl"))
    rows = [json.loads(line) for line in session.read_text().splitlines()]
    base = {k: rows[3][k] for k in ("sessionId", "cwd", "version")}
    extra = [
        {**base, "type": "warp-state", "x": 1},
        {**base, "type": "attachment", "uuid": "new-a", "parentUuid": None, "isSidechain": False,
         "attachment": {"type": "hologram"}},
        {**base, "type": "user", "uuid": "new-u", "parentUuid": None, "isSidechain": False, "brandNewField": 1,
         "message": {"role": "user", "content": "hi"}},
        {**base, "type": "system", "subtype": "local_command", "uuid": "new-s", "parentUuid": None,
         "content": "<local-command-stdout>## Context Usage\n\n| Plugin tools | 1.2k | 0.1% |\n</local-command-stdout>"},
    ]
    session.write_text(session.read_text() + "".join(json.dumps(r) + "\n" for r in extra))
    rollout = next((out / "codex" / "sessions").rglob("rollout-*.jsonl"))
    rollout.write_text(rollout.read_text() + json.dumps({"timestamp": "2026-12-07T17:52:00Z", "type": "response_item",
                                                         "payload": {"type": "teleport_call", "id": "t"}}) + "\n")
    result = drift(out)
    assert result.returncode == 1, result.stdout + result.stderr
    text = result.stdout
    assert "unknown entryType 'warp-state'" in text and "unknown attachmentType 'hologram'" in text
    assert "user: fields not in the fixtures: brandNewField" in text
    assert "unknown /context row 'Plugin tools'" in text
    assert "item type not known: 'teleport_call'" in text
