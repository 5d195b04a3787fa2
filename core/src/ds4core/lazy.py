"""A value made on first use and kept: `Lazy(make)()`.

For views that cost O(items) and are read only sometimes (a plan's manifest items and group
lists, the manifest's rows): a re-plan or an append builds the `Lazy`, and only the reader that
needs the value (a tab on screen, `plan --json`) pays for it. Pure: no I/O.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Lazy(Generic[T]):
    """`make()` (never None) called on the first `()` and its result kept (`make` is then dropped, with what
    it held). Two threads calling it first may both call `make`; the value is the same and one is
    kept (the value is set before `make` is cleared, and read after it, so no reader finds
    neither)."""

    __slots__ = ("_make", "_value")

    def __init__(self, make: Callable[[], T]) -> None:
        self._make: Callable[[], T] | None = make
        self._value: T | None = None

    def __call__(self) -> T:
        make = self._make  # read before the value (see the class)
        value = self._value
        if value is None:
            assert make is not None
            value = make()
            self._value, self._make = value, None
        return value

    @property
    def made(self) -> bool:
        """True once the value was made."""
        return self._value is not None
