"""When to warn that a session's prompt cache is about to expire (pure; the clock is passed in).

`ExpiryNotifier.due(summaries, now)` returns the sessions whose cache expires within `lead_s`
seconds (default 60) and that were not announced for that same expiry yet: once per expiry (a new
request moves `expiresAt`, which re-arms the notice). Only live sessions by default
(`idle=False`); a cache that has already expired is never announced. The UI turns each into a
Textual notification plus the terminal bell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from ds4sessions.overview.summary import SessionSummary

DEFAULT_LEAD_S = 60.0


@dataclass(frozen=True)
class Notice:
    """One notice: the session, its expiry (epoch seconds) and the seconds left when raised."""

    summary: SessionSummary
    expires_at_s: float
    remaining_s: float

    @property
    def text(self) -> str:
        """One line: "<agent> · <project or name>: prompt cache expires in 0:58 (at 14:03:10)"."""
        import datetime as dt

        left = max(0, int(self.remaining_s + 0.999))
        label = self.summary.name or self.summary.project or self.summary.path
        at = dt.datetime.fromtimestamp(self.expires_at_s).strftime("%H:%M:%S")
        return f"{self.summary.agent} · {label}: prompt cache expires in {left // 60}:{left % 60:02d} (at {at})"


@dataclass
class ExpiryNotifier:
    """Remembers which expiries were announced (`lead_s` seconds ahead; `idle` also watches idle
    sessions)."""

    lead_s: float = DEFAULT_LEAD_S
    idle: bool = False
    enabled: bool = True
    _announced: dict[str, float] = field(default_factory=dict)

    def due(self, summaries: Iterable[SessionSummary], now: float) -> list[Notice]:
        """The notices to raise at `now` (epoch seconds), each session at most once per expiry."""
        out: list[Notice] = []
        if not self.enabled:
            return out
        for summary in summaries:
            if not summary.live and not self.idle:
                continue
            expires = summary.cache.expires_at_s
            if expires is None or summary.cache.lifetime_s is None:
                continue
            remaining = expires - now
            if remaining <= 0 or remaining > self.lead_s:
                continue
            if self._announced.get(summary.path) == expires:
                continue
            self._announced[summary.path] = expires
            out.append(Notice(summary, expires, remaining))
        return out
