"""Copies made ahead of need: the O(n) half of extending an immutable list, moved off the path
a user waits on.

A live session's snapshot is a value: each append makes new lists (the context's messages and
ids, the per-message tokens, the map segments) equal to the previous snapshot's plus a few items,
while the previous snapshot, still on screen, keeps its own. Copying 40,000 references costs
0.1-0.4 ms (each item's reference count is touched, mostly outside the CPU's caches), and an
append at 10,000 turns made about a dozen such copies before its line could be painted.

`Spares` lets the owner of those lists copy them while nothing waits (after the screen has
painted) and hand the copies to the next append, which then only appends its few items. A copy
is used only for the very list object it was made from (the owner never mutates a list it has
handed out, so the same object means the same items); any other list is copied on the spot, as
before. Pure: no I/O, no threads (the owner calls it from one thread).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence


class Spares:
    """Private copies of lists, keyed by the list they copy (see the module).

    - `prepare(lists)`: copy each list (O(total items)); earlier copies not used are dropped;
    - `copy(source)`: a private list equal to `source`: the prepared copy when there is one for
      that very object, else `list(source)`; each prepared copy is handed out once.
    - `taken`/`made`: counters of copies handed out from `prepare` and made on the spot.
    """

    __slots__ = ("_copies", "taken", "made")

    def __init__(self) -> None:
        self._copies: dict[int, tuple[Sequence[Any], list[Any]]] = {}
        self.taken = 0
        self.made = 0

    def prepare(self, lists: Iterable[Sequence[Any] | None]) -> None:
        """Copy each of `lists` (None entries are skipped) for the next `copy` of it."""
        copies: dict[int, tuple[Sequence[Any], list[Any]]] = {}
        for source in lists:
            if source is None or id(source) in copies:
                continue
            kept = self._copies.get(id(source))
            if kept is not None and kept[0] is source and len(kept[1]) == len(source):
                copies[id(source)] = kept  # prepared earlier and not used yet
            else:
                copies[id(source)] = (source, list(source))
        self._copies = copies

    def copy(self, source: Sequence[Any]) -> list[Any]:
        """A list equal to `source` that the caller owns (it may extend it)."""
        entry = self._copies.pop(id(source), None)
        if entry is not None and entry[0] is source and len(entry[1]) == len(source):
            self.taken += 1
            return entry[1]
        self.made += 1
        return list(source)

    def clear(self) -> None:
        """Drop every prepared copy."""
        self._copies = {}
