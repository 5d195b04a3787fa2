"""Epoch times (seconds) as datetimes, for display: a time read from a session file may be any
number, and one `datetime` cannot hold is an unknown time, never an error."""

from __future__ import annotations

import datetime as dt


def to_datetime(seconds: float, utc: bool = False) -> dt.datetime | None:
    """The aware datetime of `seconds` since the Unix epoch, in the local zone (`utc`: in UTC),
    or None when `datetime` cannot hold it in that zone: before year 1 or after 9999, or beyond
    the platform's `time_t` (`fromtimestamp` raises ValueError, OverflowError or OSError)."""
    try:
        when = dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc)
        return when if utc else when.astimezone()
    except (ValueError, OverflowError, OSError):
        return None
