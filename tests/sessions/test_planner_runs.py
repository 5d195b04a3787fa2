"""How often DS4's planner runs per appended line (issue 10: one derivation pipeline).

`SessionPipeline.updates()` after one appended line may run `ds4core.planner.plan_managed_context`
at most twice for the plan (the nominal plan, the final plan with retrieval supplements) plus the
candidate plans the cache-aware decision needs: the extended-tail candidate (once, shared by the
configured decision and the `auto` what-if) and, when a new request appeared, the plan DS4 would
have sent for it (the previous request's hashes). Counted by wrapping the real planner entry
point in every module that imported it, on a real Pi session copy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import ds4core.planner
from ds4sessions.derive.pipeline import Derived, SessionPipeline

NOW = 1772441024.433 + 60


class _Counter:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = ds4core.planner.plan_managed_context
        self.calls: list[int | None] = []

        def counted(*args, **kwargs):
            self.calls.append(kwargs.get("cache_aware_tail_tokens"))
            return original(*args, **kwargs)

        for module in list(sys.modules.values()):
            if getattr(module, "plan_managed_context", None) is original:
                monkeypatch.setattr(module, "plan_managed_context", counted)


def _append(path: Path, obj: dict) -> None:
    with path.open("ab") as f:
        f.write((json.dumps(obj) + "\n").encode())


def _last(path: Path) -> dict:
    return json.loads(path.read_bytes().splitlines()[-1])


def _read_then_append(sample: Path, tmp_path: Path, role: str, entry_id: str) -> SessionPipeline:
    """A pipeline that has read a copy of `sample` (full plans, index build), with one line of
    `role` appended since (a new user prompt, or a repeat of the last reply: a new request)."""
    path = tmp_path / sample.name
    path.write_bytes(sample.read_bytes())
    pipe = SessionPipeline(path)
    assert list(pipe.updates(now=NOW))
    last = _last(path)
    if role == "user":
        message = {"role": "user", "content": [{"type": "text", "text": "and now the README please"}], "timestamp": last["message"]["timestamp"] + 1000}
    else:
        message = dict(last["message"], timestamp=last["message"]["timestamp"] + 1000)
    _append(path, {"type": "message", "id": entry_id, "parentId": last["id"], "timestamp": last["timestamp"], "message": message})
    return pipe


@pytest.mark.parametrize("role", ["user", "assistant"])
def test_planner_runs_per_append(sample01: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: str) -> None:
    pipe = _read_then_append(sample01, tmp_path, role, "appended1")

    counter = _Counter(monkeypatch)
    updates = list(pipe.updates(now=NOW))
    derived = [u for u in updates if isinstance(u, Derived)]
    assert derived and derived[-1].errors == ()
    final = derived[-1]
    assert final.plan is not None and final.cache is not None and final.cache.decision is not None
    plans = [tail for tail in counter.calls if tail is None]
    candidates = [tail for tail in counter.calls if tail is not None]
    # the nominal plan, the final plan (only when retrieval supplied evidence), and for a new
    # request, the plan DS4 would have sent for it
    supplemented = 1 if final.retrieval is not None and final.retrieval.supplements else 0
    new_request = 1 if role == "assistant" else 0
    print(f"{role}: {len(counter.calls)} planner runs ({len(plans)} plans, {len(candidates)} candidates)")
    assert len(plans) <= 1 + supplemented + new_request
    assert len(candidates) <= 1 + new_request


@pytest.mark.parametrize("role", ["user", "assistant"])
def test_every_planner_run_of_a_derive_pass_follows_a_checkpoint(
    sample01: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: str
) -> None:
    """`SessionPipeline.derive(checkpoint=…)` calls the checkpoint before each stage and before
    each planner run inside the cache view, so the app's derive worker can let a paint go first
    at least once per planner run (a planner run is the largest step: 25 ms at 1,000 turns)."""
    pipe = _read_then_append(sample01, tmp_path, role, "appended2")
    snap = None
    for snap in pipe.snapshots():
        pass
    assert snap is not None
    events: list[str] = []
    original = ds4core.planner.plan_managed_context

    def counted(*args, **kwargs):
        events.append("plan")
        return original(*args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "plan_managed_context", None) is original:
            monkeypatch.setattr(module, "plan_managed_context", counted)
    derived = list(pipe.derive(snap, now=NOW, checkpoint=lambda: events.append("checkpoint")))
    assert derived and derived[-1].errors == ()
    runs = [i for i, e in enumerate(events) if e == "plan"]
    assert len(runs) >= 2  # the nominal plan and at least one candidate
    # each run has a checkpoint of its own since the previous run
    for a, b in zip([-1] + runs, runs):
        assert "checkpoint" in events[a + 1 : b], events


def test_a_derive_pass_checkpoints_inside_its_longest_stages(
    sample01: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond the stage boundaries, the derive pass offers a checkpoint between each DS4 plan
    and its manifest rows, and in retrieval after the index sync and after the ranking: so no
    step between two checkpoints is longer than one of those parts (at 1,000 turns a plan
    stage was ~50 ms, retrieval ~50 ms; an append landing in one waited for half of it)."""
    import ds4sessions.derive.planning as planning
    import ds4sessions.derive.retrieval as retrieval
    from ds4sessions.derive.retrieval_index import RetrievalIndex

    pipe = _read_then_append(sample01, tmp_path, "user", "appended3")
    snap = None
    for snap in pipe.snapshots():
        pass
    assert snap is not None
    events: list[str] = []

    def traced(name: str, function):  # type: ignore[no-untyped-def]
        def run(*args, **kwargs):  # type: ignore[no-untyped-def]
            events.append(name + " start")
            try:
                return function(*args, **kwargs)
            finally:
                events.append(name + " end")
        return run

    monkeypatch.setattr(planning.LivePlanner, "_items", traced("rows", planning.LivePlanner._items))
    monkeypatch.setattr(RetrievalIndex, "sync", traced("sync", RetrievalIndex.sync))
    monkeypatch.setattr(retrieval, "retrieve_history", traced("rank", retrieval.retrieve_history))
    original = ds4core.planner.plan_managed_context
    for module in list(sys.modules.values()):
        if getattr(module, "plan_managed_context", None) is original:
            monkeypatch.setattr(module, "plan_managed_context", traced("plan", original))
    derived = list(pipe.derive(snap, now=NOW, checkpoint=lambda: events.append("checkpoint")))
    assert derived and derived[-1].errors == () and derived[-1].retrieval is not None
    steps = [e for e in events if e != "checkpoint" and e.endswith("start")]
    assert {"plan start", "rows start", "sync start", "rank start"} <= set(steps)
    # between the end of a plan, sync or ranking and the next step's start: a checkpoint
    for k, event in enumerate(events):
        if event in ("plan end", "sync end", "rank end"):
            nxt = next((i for i in range(k + 1, len(events)) if events[i].endswith("start")), len(events))
            assert "checkpoint" in events[k + 1 : nxt], (event, events[k : nxt + 1])
