"""Our context equals the one Pi built (`<name>.context.json` in shared/sessions-pi), field by field.

Every sample is compared on `messages`, `leafId`, `branchEntryIds`, `contextEntryIds`, `labels`,
`model`, `thinkingLevel`, `sessionName` and (through `convert_to_llm`) `llmMessages`.

Exceptions, and why:
- `08-legacy-v1` is a version-1 file; Pi gives its entries random ids on every load, so ids can
  only be compared through the positional mapping of Pi's ids onto ours (a v1 file is one linear
  branch in file order: Pi's `branchEntryIds` are its entries in file order).
- Label order: Pi 1.6.0 lists a label that was cleared and set again at its first position;
  ds4tui lists it at its last. The mapping is equal; only the dict order differs (04).
- `*.context-0.73.1.json` were built by the old package (@mariozechner/pi-coding-agent 0.73.1):
  it has no `contextEntryIds` field, and knows no system messages, `usage` or `context_edit`
  entries. The two samples it loaded (07, written by 0.73.1, and the v1 file 08) contain none of
  those, so its messages, leaf, branch, labels, model, thinking level and name equal ours too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ds4sessions.agents.pi import build_context, convert_to_llm, read_session
from ds4sessions.agents.pi.context import iso_to_ms
from tests.conftest import FIXTURES, SHARED, shared_params

SAMPLES = sorted(p.name[: -len(".jsonl")] for p in (SHARED / "sessions-pi").glob("*.jsonl")) if SHARED else []
LEGACY_V1 = "08-legacy-v1"
ID_FIELDS = ("leafId", "branchEntryIds", "contextEntryIds")
PLAIN_FIELDS = ("messages", "model", "thinkingLevel", "sessionName")


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _compare(jsonl: Path, expected: dict[str, Any], ids_comparable: bool = True) -> None:
    session = read_session(jsonl)
    context = build_context(session)
    got = context.to_json()
    for key in PLAIN_FIELDS:
        assert got[key] == expected[key], key
    assert convert_to_llm(context.messages) == expected["llmMessages"]
    assert len(context.messages) == expected["messageCount"]
    if ids_comparable:
        for key in ID_FIELDS:
            if key in expected:  # 0.73.1 has no contextEntryIds
                assert got[key] == expected[key], key
        assert got["labels"] == expected["labels"]
    else:
        # v1: map Pi's random ids onto ours by file position (one linear branch).
        ours = [entry.id for entry in session.entries]
        assert len(expected["branchEntryIds"]) == len(ours)
        to_ours = dict(zip(expected["branchEntryIds"], ours))
        assert got["branchEntryIds"] == ours
        assert got["leafId"] == to_ours[expected["leafId"]]
        if "contextEntryIds" in expected:
            assert got["contextEntryIds"] == [to_ours[i] for i in expected["contextEntryIds"]]
        assert got["labels"] == {to_ours[k]: v for k, v in expected["labels"].items()}


def test_fixture_01_equals_pi() -> None:
    """Always runs: the copied sample 01 (tools, parallel results, image, session name)."""
    expected = _load(FIXTURES / "pi" / "01-tools-and-image.context.json")
    _compare(FIXTURES / "pi" / "01-tools-and-image.jsonl", expected)
    assert expected["leafId"] == "7060d0dd"
    assert expected["sessionName"] == "Fix 404 for unknown widget ids"


@pytest.mark.parametrize("name", shared_params(SAMPLES))
def test_sample_equals_pi(shared_dir: Path, name: str) -> None:
    """Every sample against the context Pi 1.6.0 built."""
    folder = shared_dir / "sessions-pi"
    _compare(folder / f"{name}.jsonl", _load(folder / f"{name}.context.json"), ids_comparable=name != LEGACY_V1)


@pytest.mark.parametrize("name", ["07-old-scope-0.73", LEGACY_V1])
def test_sample_equals_pi_0_73_1(shared_dir: Path, name: str) -> None:
    """The same files as loaded by the old package 0.73.1 (see module docstring)."""
    folder = shared_dir / "sessions-pi"
    expected = _load(folder / f"{name}.context-0.73.1.json")
    assert "contextEntryIds" not in expected
    _compare(folder / f"{name}.jsonl", expected, ids_comparable=name != LEGACY_V1)


def test_labels_order_differs_only_for_relabel_after_clear(shared_dir: Path) -> None:
    """04: 2a340972 is labelled, cleared, then labelled again after e63932ef got its label."""
    folder = shared_dir / "sessions-pi"
    expected = _load(folder / "04-tree-branches-labels.context.json")["labels"]
    labels = read_session(folder / "04-tree-branches-labels.jsonl").labels
    assert labels == expected
    assert list(expected)[-2:] == ["2a340972", "e63932ef"]
    assert list(labels)[-2:] == ["e63932ef", "2a340972"]
    assert labels["2a340972"] == "token-bucket variant"


def test_compaction_yields_system_message_then_summary(shared_dir: Path) -> None:
    """03: the last compaction (107b9405) gives its systemMessage, then the summary; older gone."""
    session = read_session(shared_dir / "sessions-pi" / "03-compaction.jsonl")
    context = build_context(session)
    assert [m["role"] for m in context.messages[:3]] == ["system", "compactionSummary", "assistant"]
    assert context.message_entry_ids[:3] == ["107b9405", "107b9405", "7a4c593b"]
    assert context.messages[1]["tokensBefore"] == 3336
    assert context.messages[1]["timestamp"] == 1772544694046
    assert context.context_entry_ids[0] == "107b9405"
    assert len(context.message_entry_ids) == len(context.messages) == 12


def test_context_edits(shared_dir: Path) -> None:
    """05: bb4bc47b omitted from messages (still a selected entry), 05c95ce3's content replaced."""
    session = read_session(shared_dir / "sessions-pi" / "05-extensions-models.jsonl")
    context = build_context(session)
    assert "bb4bc47b" not in context.message_entry_ids
    assert "bb4bc47b" in context.context_entry_ids
    replaced = context.messages[context.message_entry_ids.index("05c95ce3")]
    assert replaced["content"] == [
        {"type": "text", "text": "[src/server.js was edited after this read; read it again if needed]"}
    ]
    assert replaced["role"] == "toolResult"
    # the stored entry is untouched
    assert session.by_id["05c95ce3"].message["content"] != replaced["content"]


def test_build_for_other_leaf(shared_dir: Path) -> None:
    """04: building from an abandoned branch tip follows that branch, labels stay whole-file."""
    session = read_session(shared_dir / "sessions-pi" / "04-tree-branches-labels.jsonl")
    main = build_context(session)
    other = build_context(session, "ce5cf05c")
    assert other.leaf_id == "ce5cf05c"
    assert other.branch_entry_ids[-1] == "ce5cf05c"
    assert "ce5cf05c" not in main.branch_entry_ids
    assert other.labels == main.labels
    assert other.warnings == []


def test_iso_to_ms() -> None:
    assert iso_to_ms("2026-03-02T08:41:13.726Z") == 1772440873726
    assert iso_to_ms("1970-01-01T00:00:00.000Z") == 0
    assert iso_to_ms("not a date") is None


def test_convert_to_llm_roles() -> None:
    """Pi's convertToLlm (messages module): wrappers, bash text, drops."""
    messages = [
        {"role": "bashExecution", "command": "ls", "output": "", "exitCode": 2, "cancelled": False,
         "truncated": True, "fullOutputPath": "/tmp/x", "timestamp": 5},
        {"role": "bashExecution", "command": "ls", "output": "a", "exitCode": 0, "cancelled": False,
         "truncated": False, "excludeFromContext": True, "timestamp": 6},
        {"role": "custom", "customType": "t", "content": "hi", "display": False, "details": {"x": 1}, "timestamp": 7},
        {"role": "branchSummary", "summary": "S", "fromId": "root", "timestamp": 8},
        {"role": "compactionSummary", "summary": "C", "tokensBefore": 9, "timestamp": 9},
        {"role": "somethingElse", "timestamp": 10},
    ]
    assert convert_to_llm(messages) == [
        {"role": "user", "content": [{"type": "text", "text": "Ran `ls`\n(no output)\n\nCommand exited with code 2"
                                      "\n\n[Output truncated. Full output: /tmp/x]"}], "timestamp": 5},
        {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 7},
        {"role": "user", "content": [{"type": "text", "text": "The following is a summary of a branch that this "
                                      "conversation came back from:\n\n<summary>\nS</summary>"}], "timestamp": 8},
        {"role": "user", "content": [{"type": "text", "text": "The conversation history before this point was "
                                      "compacted into the following summary:\n\n<summary>\nC\n</summary>"}], "timestamp": 9},
    ]


@pytest.mark.slow
def test_large_sample_is_fast(shared_dir: Path) -> None:
    """99-large (30 MB, 2,501 lines): read well under 1 s; the build is O(path)."""
    path = shared_dir / "sessions-pi" / "99-large.jsonl"
    start = time.perf_counter()
    session = read_session(path)
    read_seconds = time.perf_counter() - start
    start = time.perf_counter()
    context = build_context(session)
    build_seconds = time.perf_counter() - start
    assert len(session.entries) == 2500
    assert len(context.messages) == 115
    assert read_seconds < 1.0, read_seconds
    assert build_seconds < 0.1, build_seconds


def _careful_branch(session: Any, leaf: Any) -> list[Any]:
    """The reference walk: follow parents from `leaf`, stop at a missing parent or a repeat."""
    path: list[Any] = []
    seen: set[int] = set()
    while leaf is not None and id(leaf) not in seen:
        seen.add(id(leaf))
        path.append(leaf)
        leaf = session.by_id.get(leaf.parent_id) if leaf.parent_id is not None else None
    return path[::-1]


def test_branch_path_bounded_walk_equals_the_careful_walk_on_random_trees_with_cycles() -> None:
    """`branch_path` walks without a set of the entries seen (bounded by the ids known); on
    random parent links (missing parents, cycles, duplicate ids, entries without ids) it
    returns what the walk that remembers every entry returns, from every possible leaf."""
    import random

    from ds4sessions.agents.pi.context import branch_path
    from ds4sessions.agents.pi.reader import PiSessionReader

    rng = random.Random(14)
    cycles = 0
    for _ in range(300):
        n = rng.randint(1, 12)
        ids = [rng.choice([f"e{k}", f"e{rng.randint(0, n)}", None]) for k in range(n)]
        lines = [json.dumps({"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00Z"})]
        for k, eid in enumerate(ids):
            parent = rng.choice([None, f"e{rng.randint(0, n)}", ids[k - 1] if k else None])
            entry: dict[str, Any] = {"type": "message", "parentId": parent, "timestamp": "2026-01-01T00:00:00Z",
                                     "message": {"role": "user", "content": f"m{k}"}}
            if eid is not None:
                entry["id"] = eid
            lines.append(json.dumps(entry))
        reader = PiSessionReader(None)
        offset = 0
        for no, line in enumerate(lines, 1):
            raw = line.encode()
            reader.feed([(no, offset, raw)])
            offset += len(raw) + 1
        for leaf_id in [None, *{e for e in ids if e}, "nowhere"]:
            leaf = reader.by_id.get(leaf_id) if leaf_id is not None else None
            expected = _careful_branch(reader, leaf if leaf is not None else reader.leaf)
            got = branch_path(reader, leaf_id)
            assert [id(e) for e in got] == [id(e) for e in expected]
            root = expected[0] if expected else None
            cycles += root is not None and root.parent_id is not None and root.parent_id in reader.by_id
    assert cycles > 50  # the cases where the bound is what stops the walk were tried
