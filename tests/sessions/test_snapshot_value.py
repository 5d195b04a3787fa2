"""Snapshots are values: a snapshot taken, then more lines fed, stays exactly as it was.

The ingest thread keeps feeding `LiveSession`'s reader while the UI reads a snapshot: the
snapshot's frozen session (`entries`, `by_id`, labels, diagnostics), its context and its neutral
`Conversation` must not see anything read after it (issue 10, "Snapshots are values").
"""

from __future__ import annotations

import json
from pathlib import Path

from ds4sessions.agents.pi.live import LiveSession


def _state(snap) -> dict:
    session = snap.session
    return {
        "entries": [e.id for e in session.entries],
        "by_id": {k: session.by_id[k].line_no for k in session.by_id},
        "len_by_id": len(session.by_id),
        "labels": dict(session.labels),
        "leaf": (session.leaf_id, session.leaf.id if session.leaf else None),
        "diagnostics": (session.diagnostics.total, session.diagnostics.summary(), len(session.diagnostics.items)),
        "messages": list(snap.context.messages),
        "conversation": (len(snap.conversation.messages), snap.conversation.requests, snap.conversation.diagnostics),
        "name": session.session_name,
        "end": (session.end_offset, session.last_line_no),
    }


def test_old_snapshot_unchanged_after_more_lines(sample01: Path, tmp_path: Path) -> None:
    lines = sample01.read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[:half]))
    live = LiveSession(path)
    old = live.refresh()
    assert old is not None
    before = _state(old)
    first_id = old.session.entries[1].id
    assert first_id in old.session.by_id

    # The rest of the file, a malformed line, a duplicate id (replaces `first_id` in the reader),
    # a label and a session name: each would show in the old snapshot if it were shared.
    dup = json.loads(lines[half - 1])
    dup.update(id=first_id, parentId=dup.get("id"))
    extra = [
        b"{not json\n",
        (json.dumps(dup) + "\n").encode(),
        (json.dumps({"type": "label", "id": "lab1", "parentId": first_id, "timestamp": "2026-01-01T00:00:00Z",
                     "targetId": first_id, "label": "ds4:pin"}) + "\n").encode(),
        (json.dumps({"type": "session_info", "id": "nam1", "parentId": "lab1", "timestamp": "2026-01-01T00:00:00Z",
                     "name": "renamed"}) + "\n").encode(),
    ]
    with path.open("ab") as f:
        f.write(b"".join(lines[half:]) + b"".join(extra))
    new = live.refresh()
    assert new is not None and new.version > old.version

    assert _state(old) == before
    assert old.session.by_id[first_id].line_no < new.session.by_id[first_id].line_no  # the earlier entry
    assert len(new.session.entries) > len(old.session.entries)
    assert new.session.diagnostics.total > old.session.diagnostics.total
    assert new.session.labels.get(first_id) == "ds4:pin" and first_id not in old.session.labels
    assert new.session.session_name == "renamed" != old.session.session_name
    assert old.reader is old.session  # the older name reads the same frozen state


def test_conversation_of_snapshot_counts_each_reply_once(sample01: Path) -> None:
    from ds4sessions.agents.pi.live import open_snapshot

    snap = open_snapshot(sample01)
    conv = snap.conversation
    replies = [json.loads(l) for l in sample01.read_bytes().splitlines() if b'"role":"assistant"' in l]
    assert conv.agent == snap.agent == "pi"
    assert len(conv.requests) == len(replies)
    assert [dict(m) for m in conv.messages] == snap.context.messages
