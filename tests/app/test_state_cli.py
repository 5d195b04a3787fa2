"""`ds4tui state`: the state directory per session, and --prune (real indexes, real CLI)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from typer.testing import CliRunner

from ds4sessions.derive.retrieval_index import session_db_path, state_dir
from ds4tui.cli import app
from tests.conftest import FIXTURES

runner = CliRunner()


def _retrieve(tmp_path: Path, name: str) -> Path:
    session = tmp_path / name
    shutil.copyfile(FIXTURES / "pi" / "01-tools-and-image.jsonl", session)
    assert runner.invoke(app, ["retrieve", "--json", str(session)]).exit_code == 0
    return session


def test_state_json_lists_indexes_and_prune_removes_old_ones(tmp_path: Path) -> None:
    old = _retrieve(tmp_path, "old.jsonl")
    new = _retrieve(tmp_path, "new.jsonl")
    stamp = time.time() - 40 * 86400
    os.utime(session_db_path(old), (stamp, stamp))
    out = json.loads(runner.invoke(app, ["state", "--json"]).output)
    assert out["stateDir"] == str(state_dir())
    assert sorted(i["session"] for i in out["indexes"]) == sorted([str(old.resolve()), str(new.resolve())])
    assert out["indexBytes"] == sum(i["bytes"] for i in out["indexes"]) > 0
    assert out["indexCapBytes"] == 1024 << 20
    pruned = json.loads(runner.invoke(app, ["state", "--json", "--prune"]).output)
    assert [i["session"] for i in pruned["pruned"]] == [str(old.resolve())]
    assert [i["session"] for i in pruned["indexes"]] == [str(new.resolve())]


def test_state_text_names_what_is_kept() -> None:
    result = runner.invoke(app, ["state"])
    assert result.exit_code == 0
    assert result.output.splitlines()[0] == f"State directory: {state_dir()}"
    assert "journal        (none: nothing written yet)" in result.output
    assert "retrieval indexes: 0, 0 B of a 1.0 GiB cap" in result.output


def test_state_rejects_negative_days() -> None:
    result = runner.invoke(app, ["state", "--prune", "--days", "-1"])
    assert result.exit_code == 2 and "--days must be >= 0" in result.output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith("ds4tui 0.1.0 (ds4core 0.1.0, ds4sessions 0.1.0)")
