"""`GcPacer`: Python's cyclic garbage collector, run between paints instead of inside them.

Measured at 1,000 turns with the default thresholds (700, 10, 10): each derive pass (plans,
candidate plans, manifest and view rows) leaves ~18,000 tracked objects alive until the next
pass, and Textual's strips form reference cycles, so young and middle collections ran ~20 ms per
appended line in all, at whatever moment an allocation crossed the threshold: often inside a
paint (a middle collection held the GIL for 30-150 ms). With the pacer:

- the automatic thresholds are raised to `THRESHOLD` (50,000 allocations before a young
  collection; the middle and old generations practically never collect by themselves), so
  short-lived objects die by reference counting before any collection sees them;
- the derive worker calls `after_pass()` after each pass, once the screen has painted the newest
  snapshot: a young collection, a middle one every `MIDDLE_EVERY` passes and a full one every
  `FULL_EVERY` passes, so cyclic garbage is still freed (memory stays bounded) but at a moment
  nothing waits on the GIL; and `at_checkpoint()` between the stages of a pass (after the
  checkpoint's wait for the paint): a young collection once `CHECKPOINT_YOUNG` allocations are
  pending, so a pass rarely reaches the raised threshold in the middle of a paint.

The session loaded at start is frozen by the bulk read (`ds4sessions.ingest.live.bulk_gc`), so a
full collection traverses only what was built since. `stop()` restores the thresholds.
Numbers: docs/performance.md ("GC between paints").
"""

from __future__ import annotations

import gc

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
    """Paces the cyclic GC for a long-running dashboard (see the module doc). `start`/`stop` run
    on the UI thread (mount, unmount), `after_pass` on the derive worker, one pass at a time."""

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
