"""`ds4core.indices.index_range` (issue 32): `list(range(start, stop))` of shared int objects."""

from __future__ import annotations

from ds4core import indices
from ds4core.indices import index_range


def test_index_range_is_range_of_shared_objects() -> None:
    for start, stop in [(0, 0), (0, 5), (300, 310), (1000, 5000), (4999, 5000), (7, 3)]:
        assert index_range(start, stop) == list(range(start, stop))
    big = index_range(2000, 3000)
    assert all(a is b for a, b in zip(big, index_range(2000, 3000)))
    grown = index_range(0, len(indices._table) + 10)  # grows the table; earlier objects stay
    assert grown == list(range(len(grown))) and grown[2000] is big[0]
