"""The dashboard's GC pacing (`ds4sessions.runtime`): thresholds raised while it runs and restored after,
collections scheduled after derive passes."""

from __future__ import annotations

import gc
from pathlib import Path

from ds4sessions import runtime as gcpace
from ds4tui.app import Ds4App
from tests.app.test_dashboard import settle
from tests.app.test_incremental_screen import copy_of


def test_the_schedule_collects_young_middle_and_full() -> None:
    pacer = gcpace.GcPacer()
    gens = [pacer.generation_for(n) for n in range(1, gcpace.FULL_EVERY + 1)]
    assert gens.count(2) == 1 and gens[-1] == 2
    assert gens.count(1) == gcpace.FULL_EVERY // gcpace.MIDDLE_EVERY - 1
    assert gens[gcpace.MIDDLE_EVERY - 1] == 1 and gens[0] == 0


def test_after_pass_frees_a_reference_cycle() -> None:
    class Node:
        pass

    pacer = gcpace.GcPacer()
    pacer.start()
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a
        del a, b
        assert pacer.after_pass() >= 2  # the young collection found the cycle
    finally:
        pacer.stop()


def test_a_checkpoint_collects_the_young_generation_only_past_its_bound() -> None:
    """`at_checkpoint` leaves a small young generation alone and collects a large one (then
    the pending allocations start again from about zero)."""
    class Node:
        pass

    pacer = gcpace.GcPacer()
    pacer.start()
    try:
        gc.collect(0)
        a, b = Node(), Node()
        a.other, b.other = b, a
        del a, b
        assert gc.get_count()[0] < gcpace.CHECKPOINT_YOUNG
        assert pacer.at_checkpoint() == 0 and gc.get_count()[0] > 0  # nothing ran: the cycle waits
        keep = [[] for _ in range(gcpace.CHECKPOINT_YOUNG + 1_000)]  # tracked allocations past the bound
        assert gc.get_count()[0] > gcpace.CHECKPOINT_YOUNG
        assert pacer.at_checkpoint() >= 2  # the young collection ran and found the cycle
        assert gc.get_count()[0] < 100
        del keep
    finally:
        pacer.stop()


async def test_the_app_raises_the_thresholds_and_restores_them(sample01: Path, tmp_path: Path) -> None:
    before = gc.get_threshold()
    app = Ds4App(copy_of(sample01, tmp_path), watch=False, retrieval=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        assert gc.get_threshold() == gcpace.THRESHOLD
        assert app.dashboard.feed._pacer._passes >= 1  # the derive worker collected after its pass
    assert gc.get_threshold() == before
