"""The cache view extends its per-request history after an append (O(new requests)) and gives
exactly the history a fresh monitor computes from scratch."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ds4sessions.derive.cache import CacheMonitor
from ds4sessions.derive.pipeline import SessionPipeline

SAMPLES = ["01-tools-and-image.jsonl", "03-compaction.jsonl", "04-tree-branches-labels.jsonl"]


@pytest.mark.parametrize("name", SAMPLES)
def test_resumed_cache_history_equals_a_fresh_one(name: str, shared_dir: Path, tmp_path: Path) -> None:
    src = shared_dir / "sessions-pi" / name
    lines = src.read_bytes().splitlines(keepends=True)
    path = tmp_path / name
    path.write_bytes(b"")
    pipeline = SessionPipeline(path, retrieval=False)
    now = time.time()
    compared = 0
    for line in lines:
        with path.open("ab") as f:
            f.write(line)
        snap = list(pipeline.snapshots())[-1]
        live = [d for d in pipeline.derive(snap, now=now)][-1].cache
        fresh = CacheMonitor(pipeline.models).view(snap, now, decide=False)
        assert live is not None and fresh is not None
        assert live.history.records == fresh.history.records
        compared += len(fresh.history.records)
    assert compared > 0


def test_previous_request_plans_stay_bounded(tmp_path: Path) -> None:
    """Issue 32: the monitor keeps the newest `PREVIOUS_PLANS_KEPT` previous-request plans (one
    hash per sent message each), not one more per reply of a session it follows."""
    import sys

    from ds4sessions.derive.cache import PREVIOUS_PLANS_KEPT
    from tests.conftest import ROOT

    sys.path.insert(0, str(ROOT / "bench"))
    from bench_planner import synthetic_session

    src = tmp_path / "synthetic.jsonl"
    synthetic_session(src, 12)
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"")
    pipeline = SessionPipeline(path, retrieval=False)
    now = time.time()
    asked = set()
    for line in src.read_bytes().splitlines(keepends=True):
        with path.open("ab") as f:
            f.write(line)
        snap = list(pipeline.snapshots())[-1]
        derived = list(pipeline.derive(snap, now=now))[-1]
        kept = pipeline._cache._previous_plans  # type: ignore[union-attr]
        assert derived.cache is not None and len(kept) <= PREVIOUS_PLANS_KEPT
        asked |= set(kept)
    assert len(asked) > PREVIOUS_PLANS_KEPT  # (more requests than it keeps were planned)
