"""A derive pass pauses at its pause points when asked (`ds4core.pause`): the app asks when a
line is appended, so the pass stops sharing the GIL with that line's read and paint (issue 10:
10,000 turns, append → screen p95 42-50 → ~20 ms). Here a real pass on a real thread: it stops
within its stage, waits while paused, and its plan equals an unpaused pass's."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from ds4core import pause
from ds4sessions.derive.pipeline import SessionPipeline


def _session(path: Path, turns: int) -> None:
    lines = [{"type": "session", "version": 3, "id": "p", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp/p"},
             {"type": "model_change", "id": "m0", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
              "provider": "anthropic", "modelId": "claude-sonnet-4-5"}]
    parent = "m0"
    for g in range(turns):
        usage = {"input": 3, "output": 40, "cacheRead": 1000 + 60 * g, "cacheWrite": 60, "totalTokens": 1103 + 60 * g}
        for k, message in enumerate([
            {"role": "user", "content": [{"type": "text", "text": f"step {g}"}], "timestamp": 1_767_225_600_000 + g},
            {"role": "assistant", "content": [{"type": "toolCall", "id": f"c{g}", "name": "read", "arguments": {"p": g}}],
             "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "toolUse"},
            {"role": "toolResult", "toolCallId": f"c{g}", "toolName": "read", "content": [{"type": "text", "text": "x\n" * (10 + g % 60)}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"done {g}"}], "provider": "anthropic",
             "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "stop"},
        ]):
            entry_id = f"e{g}-{k}"
            lines.append({"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z", "message": message})
            parent = entry_id
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def _plan_of(pipeline: SessionPipeline) -> tuple[object, ...]:
    snap = list(pipeline.snapshots(force=True))[-1]
    derived = list(pipeline.derive(snap, now=0))[-1]
    assert derived.plan is not None and derived.cache is not None
    return derived.plan.plan, tuple(derived.plan.items), derived.cache.decision


def test_a_pass_pauses_inside_its_stages_and_plans_the_same(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _session(path, 3_000)
    reference = _plan_of(SessionPipeline(path, retrieval=False))

    paused, release = threading.Event(), threading.Event()
    pauses: list[float] = []
    result: list[tuple[object, ...]] = []

    def hook() -> None:
        if pause.take_request():
            pauses.append(time.perf_counter())
            paused.set()
            release.wait(10)

    def run() -> None:
        with pause.hooked(hook):
            result.append(_plan_of(SessionPipeline(path, retrieval=False)))

    pause.request(False)
    worker = threading.Thread(target=run)
    worker.start()
    try:
        # ask while the pass runs (the read of 12,000 messages comes first: no pause points there)
        deadline = time.monotonic() + 30
        while not paused.is_set() and worker.is_alive() and time.monotonic() < deadline:
            pause.request()
            time.sleep(0.002)
        assert paused.is_set(), "the pass never reached a pause point"
        time.sleep(0.2)
        assert worker.is_alive() and not result  # it waits while paused: no progress
    finally:
        release.set()
        pause.request(False)
        worker.join(30)
    assert result == [reference]
    assert len(pauses) >= 1
