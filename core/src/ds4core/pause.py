"""Pause points: where a long pure computation lets the application that runs it pause it.

The engine's long stages (a DS4 plan, the cache view's candidate plans, retrieval's ranking)
run for tens to hundreds of milliseconds at 10,000 turns. An application that runs them on a
worker thread beside latency-bound work on other threads (ds4tui: an appended line read and
painted while the derived views of the previous one are still computed) shares one GIL with
them: CPython hands the GIL over only every `sys.getswitchinterval()` (5 ms), so the urgent work
runs at half speed for as long as the stage runs.

`pause_point()` is called inside those stages' loops, every few hundred items. It costs one
attribute read while no pause is requested; once `request()` was called, it calls the hook the
running thread installed with `hooked(hook)` (nothing on a thread without one), and the hook
blocks until the urgent work is done (releasing the GIL). Pure: no I/O, no clock; what a pause
waits for is the hook's business. Thread-safe: the request flag is one attribute, the hook is
per thread.
"""

from __future__ import annotations

import itertools
import threading
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

T = TypeVar("T")

EVERY = 256
"""Loops call `pause_point()` once per this many items (a few hundred microseconds of work)."""


class _State:
    __slots__ = ("requested",)

    def __init__(self) -> None:
        self.requested = False


_state = _State()
_local = threading.local()


def request(flag: bool = True) -> None:
    """Ask running stages to pause at their next pause point (`flag=False`: withdraw it; the
    hook also withdraws it before it checks whether to wait, see `take_request`)."""
    _state.requested = flag


def take_request() -> bool:
    """Withdraw a pending request and say whether there was one (the hook calls it first, then
    checks its own condition: a request made after that is seen at the next pause point)."""
    was = _state.requested
    _state.requested = False
    return was


def pause_point() -> None:
    """Pause here when asked (`request`) and the running thread installed a hook (`hooked`)."""
    if _state.requested:
        hook = getattr(_local, "hook", None)
        if hook is not None:
            hook()


@contextmanager
def hooked(hook: Callable[[], None] | None) -> Iterator[None]:
    """Install `hook` as this thread's pause hook for the block (None: leave it as it is)."""
    if hook is None:
        yield
        return
    previous = getattr(_local, "hook", None)
    _local.hook = hook
    try:
        yield
    finally:
        _local.hook = previous


def pausing(items: Iterable[T]) -> Iterator[T]:
    """The items of `items`, with a pause point before every `EVERY` of them: C-speed within a
    chunk (slices of a list or tuple, `islice` of anything else), one check per chunk."""
    if isinstance(items, (list, tuple)):
        if len(items) <= EVERY:
            return iter(items)
        return itertools.chain.from_iterable(_slices(items))
    return itertools.chain.from_iterable(_chunks(iter(items)))


def _slices(items: Sequence[T]) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), EVERY):
        pause_point()
        yield items[start : start + EVERY]


def _chunks(it: Iterator[T]) -> Iterator[list[T]]:
    while True:
        pause_point()
        chunk = list(itertools.islice(it, EVERY))
        if not chunk:
            return
        yield chunk
