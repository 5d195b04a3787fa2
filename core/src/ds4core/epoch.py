"""Epoch times (seconds) read from session files: as datetimes for display (a time `datetime`
cannot hold is an unknown time, never an error), as gaps in words, and whether a refresh is
dated too far ahead to start a prompt-cache countdown. Pure, and light to import (the overview's
first paint loads it)."""

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


FUTURE_TOLERANCE_SECONDS = 300.0
"""How far in the future (seconds) the last refresh may be dated and still start a countdown:
clocks of two machines disagree by seconds, not by more than a lifetime. Beyond it the time is
wrong (a bad timestamp, or a clock set far ahead), and the state is "unknown"."""


def fmt_gap(seconds: float) -> str:
    """A human gap: `"45 s"`, `"9 min 30 s"`, `"2 h 5 min"`, `"260 d 8 h"`."""
    total = int(round(seconds))
    if total < 60:
        return f"{total} s"
    if total < 3600:
        minutes, secs = divmod(total, 60)
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    if total >= 2 * 86400:
        days, rest = divmod(total, 86400)
        return f"{days} d {rest // 3600} h" if rest // 3600 else f"{days} d"
    hours, rest = divmod(total, 3600)
    return f"{hours} h {rest // 60} min" if rest // 60 else f"{hours} h"


def dated_ahead(last_refresh_s: float | None, now: float) -> str | None:
    """Why no countdown can start from a last refresh dated more than
    `FUTURE_TOLERANCE_SECONDS` after `now` (epoch seconds), else None: every agent's countdown
    (the dashboard's clock, the overview, the Claude Code view) asks this first, so a reply
    dated year 9999 is never "warm" for millennia."""
    if last_refresh_s is None or last_refresh_s - now <= FUTURE_TOLERANCE_SECONDS:
        return None
    return f"the last refresh is dated {fmt_gap(last_refresh_s - now)} in the future (a wrong timestamp or clock), so no countdown"
