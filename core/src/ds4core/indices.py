"""Shared int objects for the indices of a session's messages (issue 32).

CPython makes a new int object (28-32 bytes) for every integer above 256 it computes, so each
structure that keeps a message's index (a grouping's members and groups, the planner inputs'
context indices, the timeline's positions) kept its own copy of the same numbers: ~32 bytes a
message for each. `index_range(start, stop)` is `list(range(start, stop))` made of one shared
int object per number, so they all keep the same ones. Values are ints as before; pure; safe
from any thread (the table is replaced, never changed, when it grows).
"""

from __future__ import annotations

_table: list[int] = list(range(1024))


def index_range(start: int, stop: int) -> list[int]:
    """The ints `start, start + 1, ..., stop - 1` (a new list), each the one shared object of
    its number (0 <= start)."""
    table = _table
    if stop > len(table):
        table = _grow(stop)
    return table[start:stop]


def _grow(stop: int) -> list[int]:
    global _table
    table = _table
    size = max(stop, len(table) + len(table) // 4)
    table = table + list(range(len(table), size))  # (a new list: a reader keeps a whole one)
    _table = table
    return table
