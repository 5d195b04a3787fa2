"""`ds4core.lazy.Lazy`: made on the first call only, then kept, and what made it is dropped."""

from __future__ import annotations

import gc
import weakref

from ds4core.lazy import Lazy


def test_made_once_and_the_maker_dropped() -> None:
    calls: list[int] = []

    class Held:  # what the maker holds (e.g. a snapshot): freed once the value is made
        pass

    held = Held()
    ref = weakref.ref(held)

    def make(h: Held = held) -> tuple[int, ...]:
        calls.append(1)
        return (1, 2, 3)

    lazy = Lazy(make)
    del held, make
    assert not lazy.made and calls == []
    assert lazy() == (1, 2, 3) and lazy() is lazy() and calls == [1] and lazy.made
    gc.collect()
    assert ref() is None
