"""The session pipeline: snapshot, exact counts, then plan + cache, then retrieval."""

from __future__ import annotations

from pathlib import Path

from ds4sessions.agents.pi.live import Snapshot
from ds4sessions.derive.pipeline import Derived, SessionPipeline


def test_updates_arrive_in_screen_order(sample01: Path) -> None:
    pipe = SessionPipeline(sample01)
    updates = list(pipe.updates(now=1772441024.433 + 60))
    kinds = [type(u).__name__ for u in updates]
    assert kinds == ["Snapshot", "Snapshot", "Derived", "Derived"]
    fast, exact, derived, full = updates
    assert isinstance(fast, Snapshot) and fast.exact is None
    assert isinstance(exact, Snapshot) and exact.exact is not None and exact.version == fast.version
    assert isinstance(derived, Derived) and derived.version == fast.version and derived.errors == ()
    assert derived.plan is not None and derived.plan.mode == "managed"
    assert derived.cache is not None and derived.cache.state_at(1772441024.433 + 60).status == "warm"
    assert derived.retrieval is None and full.retrieval is not None
    assert list(pipe.updates()) == []  # nothing changed


def test_a_failing_stage_is_reported_not_raised(sample01: Path) -> None:
    pipe = SessionPipeline(sample01, retrieval=False)
    list(pipe.updates())
    pipe._planner.plan = None  # type: ignore[assignment,union-attr]  # a broken planner
    updates = list(pipe.updates(force=True))
    derived = updates[-1]
    assert isinstance(derived, Derived) and derived.plan is None
    assert [stage for stage, _ in derived.errors] == ["plan"]
    assert "TypeError" in derived.errors[0][1]
    assert derived.cache is not None


def test_a_concurrent_step_coalesces(sample01: Path, tmp_path: Path) -> None:
    """While one step runs (an exclusive worker being replaced), another call yields nothing and
    the running step polls once more, so the appended line is not lost and no thread blocks."""
    import json

    path = tmp_path / "s.jsonl"
    path.write_bytes(sample01.read_bytes())
    pipe = SessionPipeline(path, retrieval=False)
    running = pipe.updates(now=1772441024.433 + 60)
    first = next(running)
    assert isinstance(first, Snapshot)
    last = json.loads(path.read_bytes().splitlines()[-1])
    line = {"type": "message", "id": "later1", "parentId": last["id"], "timestamp": last["timestamp"],
            "message": {"role": "user", "content": "one more", "timestamp": 1772441024433}}
    with path.open("ab") as f:
        f.write((json.dumps(line) + "\n").encode())
    assert list(pipe.updates()) == []  # the other worker's call: nothing, no waiting
    rest = list(running)
    snaps = [u for u in rest if isinstance(u, Snapshot)]
    assert snaps[-1].version > first.version
    assert snaps[-1].context.message_entry_ids[-1] == "later1"
    assert isinstance(rest[-1], Derived) and rest[-1].version == snaps[-1].version
