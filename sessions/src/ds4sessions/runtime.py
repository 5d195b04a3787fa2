"""Process-wide knobs, set from one place (issue 28): Python's cyclic garbage collector and the
thread switch interval.

ds4tui's work builds millions of long-lived objects (a session read, a plan's rows) and runs a
latency-bound UI beside worker threads; both knobs matter for what the user waits on
(docs/performance.md, "GC between paints", issue 14). The pure engine (`ds4core`) changes
neither: it only calls pause points (`ds4core.pause`), and the app's `SessionFeed` decides what a
pause waits for. What sets a knob:

- `bulk_gc()`: a bulk read (a session's first read, `map --json`): the collector paused, what
  the read built frozen afterwards (`gc.freeze`);
- `paused_gc()`: a plan (one row per message that outlives it): the collector paused;
- `GcPacer`: while the dashboard runs, collections happen between paints (raised thresholds,
  a young collection at the derive checkpoints and after each pass);
- `switch_interval(seconds)`: the thread switch interval while the dashboard runs (the UI
  thread gets the GIL back from a worker within a millisecond).
"""

from __future__ import annotations

import gc
import sys
from contextlib import contextmanager
from typing import Iterator

__all__ = ["BULK_LINES", "GcPacer", "bulk_gc", "paused_gc", "switch_interval"]

BULK_LINES = 2_000
"""A batch of at least this many lines is read with the cyclic GC paused (`bulk_gc`)."""


@contextmanager
def bulk_gc(active: bool = True) -> Iterator[None]:
    """Pause Python's cyclic GC for a bulk read, then `gc.freeze()` what it built.

    A cold open builds millions of objects (parsed entries, messages, counts) that all survive:
    with the collector running, every 700 allocations start a young collection and the
    survivors set off full collections that rescan the whole heap again and again (27-38 % of
    a cold open at 10,000 turns, and super-linear: issue 14). Nothing the read builds forms a
    reference cycle, so the collector has nothing to find there; after the block, the objects
    are moved to the permanent generation, which later collections skip (they are still freed
    by reference counting when dropped). Only the outermost block re-enables the collector.
    Measured in docs/performance.md (bench/bench_cold.py).
    """
    if not active:
        yield
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.enable()


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block (restored on exit, even on error).

    A plan builds one small tuple per message (`PlanItem`) that outlives the call. With the
    collector running, every 700 of them trigger a young collection, and because they survive,
    they reach the old generation and set off full collections that rescan the caller's whole
    heap (a 10,000-group session: the collections cost more than the plan). Nothing a plan builds
    forms reference cycles; paused, the block's objects get one young collection when it ends
    instead of one per 700, and reach the old generation far less often. Nesting is fine (only
    the outermost block re-enables). Measured in docs/performance.md.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def switch_interval(seconds: float) -> Iterator[None]:
    """`sys.setswitchinterval(min(current, seconds))` for the block, restored afterwards."""
    saved = sys.getswitchinterval()
    sys.setswitchinterval(min(saved, seconds))
    try:
        yield
    finally:
        sys.setswitchinterval(saved)


THRESHOLD = (50_000, 1_000, 1_000)
"""`gc.set_threshold` while the dashboard runs (generation 0, 1, 2)."""
MIDDLE_EVERY = 25
"""A collection of generations 0-1 every this many derive passes (else generation 0 only)."""
FULL_EVERY = 500
"""A full collection every this many derive passes."""
CHECKPOINT_YOUNG = 10_000
"""At a derive checkpoint, a young collection when more allocations than this are pending: a
pass that allocates past `THRESHOLD` would otherwise trigger one by itself (a 50,000-object
young collection held the GIL ~25 ms, inside an append's paint, at 1,000 turns)."""


class GcPacer:
    """Python's cyclic garbage collector, run between paints instead of inside them.

    Measured at 1,000 turns with the default thresholds (700, 10, 10): each derive pass (plans,
    candidate plans, manifest and view rows) leaves ~18,000 tracked objects alive until the next
    pass, and Textual's strips form reference cycles, so young and middle collections ran ~20 ms
    per appended line in all, at whatever moment an allocation crossed the threshold: often
    inside a paint (a middle collection held the GIL for 30-150 ms). With the pacer:

    - the automatic thresholds are raised to `THRESHOLD` (50,000 allocations before a young
      collection; the middle and old generations practically never collect by themselves), so
      short-lived objects die by reference counting before any collection sees them;
    - the derive worker calls `after_pass()` after each pass, once the screen has painted the
      newest snapshot: a young collection, a middle one every `MIDDLE_EVERY` passes and a full
      one every `FULL_EVERY` passes, so cyclic garbage is still freed (memory stays bounded) but
      at a moment nothing waits on the GIL; and `at_checkpoint()` between the stages of a pass
      (after the checkpoint's wait for the paint): a young collection once `CHECKPOINT_YOUNG`
      allocations are pending, so a pass rarely reaches the raised threshold inside a paint.

    The session loaded at start is frozen by the bulk read (`bulk_gc`), so a full collection
    traverses only what was built since. `stop()` restores the thresholds. `start`/`stop` run
    on the UI thread (mount, unmount), `after_pass` on the derive worker, one pass at a time.
    Numbers: docs/performance.md ("GC between paints").
    """

    def __init__(self) -> None:
        self._saved: tuple[int, ...] | None = None
        self._passes = 0

    def start(self) -> None:
        """Raise the automatic thresholds (remembering the current ones)."""
        if self._saved is None:
            self._saved = gc.get_threshold()
            gc.set_threshold(*THRESHOLD)

    def stop(self) -> None:
        """Restore the thresholds `start` found."""
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None

    def generation_for(self, passes: int) -> int:
        """The generation collected after pass number `passes` (1-based): 2 every `FULL_EVERY`,
        1 every `MIDDLE_EVERY`, else 0."""
        if passes % FULL_EVERY == 0:
            return 2
        if passes % MIDDLE_EVERY == 0:
            return 1
        return 0

    def at_checkpoint(self) -> int:
        """Between two stages of a derive pass (the screen has painted; nothing waits): a young
        collection when more than `CHECKPOINT_YOUNG` allocations are pending; returns the
        number of unreachable objects found (0 when none ran)."""
        if gc.get_count()[0] > CHECKPOINT_YOUNG:
            return gc.collect(0)
        return 0

    def after_pass(self) -> int:
        """Collect after one derive pass; returns the number of unreachable objects found."""
        self._passes += 1
        return gc.collect(self.generation_for(self._passes))

    @staticmethod
    def end_of_process() -> None:
        """The process ends next (`ds4tui.launch.leave`): no full collections of a large heap
        meanwhile (they ran ~0.7 s of the time `q` took at 50,000 turns)."""
        gc.disable()
