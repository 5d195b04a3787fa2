"""`ds4core.spare.Spares`: a prepared copy is handed out once, only for the list it copies."""

from __future__ import annotations

from ds4core.spare import Spares


def test_prepared_copy_is_used_once_and_only_for_its_list() -> None:
    a, b = list(range(1000)), list(range(1000))
    spares = Spares()
    spares.prepare([a, None, a])
    copy = spares.copy(a)
    assert copy == a and copy is not a and (spares.taken, spares.made) == (1, 0)
    again = spares.copy(a)  # handed out once: now a copy made on the spot
    assert again == a and again is not copy and (spares.taken, spares.made) == (1, 1)
    assert spares.copy(b) == b and spares.made == 2  # an equal list, another object: not prepared
    copy.append(-1)  # the caller owns it
    assert len(a) == 1000


def test_prepare_keeps_unused_copies_and_drops_the_rest() -> None:
    a, b = [1, 2, 3], [4, 5]
    spares = Spares()
    spares.prepare([a, b])
    kept = spares._copies[id(a)][1]
    spares.prepare([a])  # a's copy is still good; b's is dropped
    assert spares._copies[id(a)][1] is kept and id(b) not in spares._copies
    spares.clear()
    assert spares.copy(a) == a and spares.made == 1
