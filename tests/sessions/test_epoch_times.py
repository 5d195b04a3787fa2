"""`ds4core.epoch.to_datetime` and the overview's day: any number read from a session is a time or an
unknown time, never an error."""

from __future__ import annotations

import datetime as dt

import pytest

from ds4core.epoch import to_datetime
from ds4sessions.overview.summary import local_day


def test_times_in_range_are_datetimes() -> None:
    assert to_datetime(0, utc=True) == dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    assert to_datetime(253402300799, utc=True) == dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc)
    assert to_datetime(-62135596800, utc=True) == dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc)
    local = to_datetime(1_772_446_053.508)
    assert local is not None and local.utcoffset() is not None and local.timestamp() == 1_772_446_053.508


@pytest.mark.parametrize("seconds", [253402300800, -62135596801, 1e300, -1e300, float("nan"), float("inf")])
def test_times_out_of_range_are_unknown(seconds: float) -> None:
    assert to_datetime(seconds, utc=True) is None and to_datetime(seconds) is None
    assert local_day(seconds) == "unknown"
