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
