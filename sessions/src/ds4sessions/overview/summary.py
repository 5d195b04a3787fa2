"""One session's overview row, from an agent-neutral `Conversation` (pure; "now" is passed in).

`summarize(conversation, info, prices, settings)` → `SessionSummary`: the agent, project, name,
liveness, the context the next request carries, the prompt-cache clock and the session's usage by
(day, model). The summary is JSON-safe (`to_json` / `from_json`) so the overview index can keep it
for idle files; the cache status is *not* stored but computed from the stored clock at any
instant (`SessionSummary.cache_at(now)`).

Prompt-cache rules (which one applies is a property of the agent's capabilities, see `cache_rule`):

- **recorded** (agents whose `Capabilities.cache_ttl_recorded` is True, e.g. Claude Code): the
  transcript records Anthropic's 5-minute / 1-hour cache writes (`Usage.cache_write_5m/1h`). The
  tier is that of the latest request that wrote to the cache (1 h when it wrote any 1-hour
  tokens), and the cache lives `lifetime` seconds from the latest request that read or wrote it
  (Anthropic prompt caching docs: "the cache is refreshed for no additional cost each time the
  cached content is used"; claude-hud PR #702 detects the tier the same way).
- **model-table** (Pi): `ds4core.cache_state.cache_clock` over the main-chain requests, with the
  model's `promptCache` lifetimes from the model table and `PI_CACHE_RETENTION` (Pi session format
  §6, §10).
- **configured** (Codex, or any agent that records no TTL): no countdown unless the user
  configured a retention for that agent (`OverviewSettings.retention`, from
  `DS4TUI_CACHE_RETENTION="codex=300"`: `ds4sessions.retention`); such a countdown is labelled "typical, not recorded"
  (peers-and-features.md §2.11: Codex records no cache TTL or expiry).

Units: tokens; times in Unix epoch seconds; costs in USD; days as local `YYYY-MM-DD`.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Mapping

from ds4core.epoch import dated_ahead, to_datetime

if TYPE_CHECKING:  # imported where used: the first paint from the index needs only the dataclasses
    from ds4core.models import ModelTable

    from ds4sessions.agents.base import Conversation, Request, SessionInfo
    from ds4sessions.overview.prices import PriceBook

CacheRule = Literal["recorded", "model-table", "configured"]
Status = Literal["warm", "expiring", "cold", "unknown"]

DEFAULT_EXPIRING_SECONDS = 60.0
"""`ds4core.cache_state.DEFAULT_EXPIRING_SECONDS`, repeated so this module loads without
`ds4core.cache_state` (tests/sessions/test_overview.py checks they are equal)."""

def cache_rule(capabilities: Any) -> CacheRule:
    """Which prompt-cache rule an agent follows, by its capabilities (`agents.base.Capabilities`):
    "recorded" when its files record the TTL (Claude Code's 5m/1h writes), "model-table" when DS4
    runs inside it (Pi: the model table's `promptCache` lifetimes and `PI_CACHE_RETENTION`), else
    "configured" (a typical lifetime only when the user sets one)."""
    if capabilities.cache_ttl_recorded:
        return "recorded"
    return "model-table" if capabilities.ds4_exact else "configured"

#: Anthropic's cache lifetimes by write tier, seconds (Anthropic prompt caching docs).
ANTHROPIC_TTL_S = {"5m": 300, "1h": 3600}

TYPICAL_LABEL = "typical, not recorded"


@dataclass(frozen=True)
class OverviewSettings:
    """Knobs of the overview.

    - `retention`: agent → assumed prompt-cache lifetime in seconds for agents that record none
      (shown as "typical, not recorded");
    - `expiring_s`: a warm cache with less than this left is "expiring" (seconds);
    - `live_s`: a file modified this recently counts as live even when its agent says idle
      (seconds);
    - `pi_retention`: Pi's `PI_CACHE_RETENTION` (short / long / none);
    - `notes`: lines about the settings themselves (a deprecated name in use).
    """

    retention: Mapping[str, int] = field(default_factory=dict)
    expiring_s: float = DEFAULT_EXPIRING_SECONDS
    live_s: float = 120.0
    pi_retention: str | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def from_env(cls) -> "OverviewSettings":
        """Settings from `DS4TUI_CACHE_RETENTION` (`ds4sessions.retention`, with its deprecated
        per-agent names) and `PI_CACHE_RETENTION`."""
        from ds4sessions.retention import retention_from_env

        retention = retention_from_env()
        return cls(retention=dict(retention.seconds), pi_retention=os.environ.get("PI_CACHE_RETENTION"),
                   notes=retention.notes)

    def index_key(self) -> str:
        """What of these settings shapes a stored summary (the cache clock's lifetime and tier:
        `retention`, `pi_retention`), as a string: the overview index answers only from rows
        stored under the same key, so a changed setting re-reads the files instead of answering
        with the old countdown. (`expiring_s` and `live_s` are applied when a summary is shown.)"""
        import json

        return json.dumps({"retention": sorted(self.retention.items()),
                           "piCacheRetention": (self.pi_retention or "").strip().lower()},
                          separators=(",", ":"))


@dataclass(frozen=True)
class CacheClockInfo:
    """What the countdown needs, fixed for one session state (JSON-safe).

    `rule` (see module doc); `tier` ("5m", "1h", "short", "long", "typical" or "none");
    `lifetime_s` (None: no countdown possible); `last_refresh_s` (None: nothing cached yet);
    `label` says where the lifetime comes from ("recorded 1h write", "typical, not recorded", …);
    `reason` is set when there is no countdown.
    """

    rule: str
    tier: str | None
    lifetime_s: int | None
    last_refresh_s: float | None
    label: str
    reason: str | None = None

    @property
    def expires_at_s(self) -> float | None:
        """Last refresh + lifetime (epoch seconds), None when either is unknown."""
        if self.lifetime_s is None or self.last_refresh_s is None:
            return None
        return self.last_refresh_s + self.lifetime_s


@dataclass(frozen=True)
class CacheNow:
    """The prompt cache at one instant: `status`, seconds `remaining` (negative once expired;
    None without a countdown), `expires_at_s`, and `words` ("warm · 4:12 left", "expiring · 0:42
    left", "cold", "no countdown")."""

    status: Status
    remaining_s: float | None
    expires_at_s: float | None
    label: str

    @property
    def countdown(self) -> str | None:
        """"m:ss" (or "h:mm:ss") left while warm or expiring; None otherwise."""
        if self.status in ("warm", "expiring") and self.remaining_s is not None:
            total = max(0, math.ceil(self.remaining_s))
            hours, rest = divmod(total, 3600)
            minutes, secs = divmod(rest, 60)
            return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
        return None

    @property
    def words(self) -> str:
        if self.countdown is not None:
            return f"{self.status} · {self.countdown} left"
        return "no countdown" if self.status == "unknown" else "cold"


@dataclass(frozen=True)
class UsageRow:
    """Tokens and cost of one session for one (day, model): `requests` counted once each,
    token buckets as `Usage` (disjoint), `cost_usd` over priced requests, `unpriced` requests
    whose model has no price and no recorded cost, `price_source` the table used (or
    "recorded" when the agent recorded the cost)."""

    day: str
    model: str
    requests: int = 0
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    price_source: str | None = None


@dataclass(frozen=True)
class SessionSummary:
    """One session's overview row (see module doc). Sizes in bytes; `offset` is where the
    summarised bytes end (the next read starts there); `context_tokens` is the last main-chain
    request's prompt + output (what the next request carries at least), None when unknown."""

    agent: str
    path: str
    session_id: str | None
    project: str | None
    name: str | None
    live: bool
    modified: float
    size: int
    offset: int
    model: str | None
    provider: str | None
    context_tokens: int | None
    context_window: int | None
    cache: CacheClockInfo
    usage: tuple[UsageRow, ...] = ()
    requests: int = 0
    diagnostics: int = 0
    last_activity_s: float | None = None
    entries: int = 0

    @property
    def model_key(self) -> str | None:
        """`provider/model` when the provider is known, else the model (None when unknown)."""
        if self.provider and self.model:
            return f"{self.provider}/{self.model}"
        return self.model

    @property
    def context_percent(self) -> float | None:
        """context_tokens / context_window × 100, None when either is unknown."""
        if not self.context_tokens or not self.context_window:
            return None
        return 100.0 * self.context_tokens / self.context_window

    def cache_at(self, now: float, expiring_s: float = DEFAULT_EXPIRING_SECONDS) -> CacheNow:
        """The cache status at `now` (epoch seconds)."""
        clock = self.cache
        if clock.lifetime_s is None:
            return CacheNow("unknown", None, None, clock.reason or clock.label)
        ahead = dated_ahead(clock.last_refresh_s, now)
        if ahead is not None:
            return CacheNow("unknown", None, None, ahead)
        expires = clock.expires_at_s
        if expires is None:
            return CacheNow("cold", None, None, clock.label)
        remaining = expires - now
        if remaining <= 0:
            return CacheNow("cold", remaining, expires, clock.label)
        return CacheNow("expiring" if remaining < expiring_s else "warm", remaining, expires, clock.label)

    def cost_on(self, day: str) -> float | None:
        """USD spent on `day` (local YYYY-MM-DD); None when nothing on that day was priced."""
        rows = [r for r in self.usage if r.day == day]
        if not rows or all(r.requests == r.unpriced for r in rows):
            return None
        return sum(r.cost_usd for r in rows)

    def with_live(self, live: bool) -> "SessionSummary":
        """The same summary with another liveness (itself when unchanged)."""
        if live == self.live:
            return self
        from dataclasses import replace

        return replace(self, live=live)

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (the index stores it); `from_json` reverses it."""
        data = asdict(self)
        data["usage"] = [asdict(r) for r in self.usage]
        return data

    def to_row(self) -> list[Any]:
        """The field values in declaration order, `cache` and each usage row as lists of their
        own fields (JSON-safe; the index stores this: ~40% smaller and faster to load than
        `to_json`'s dicts). `from_row` reverses it."""
        values = [getattr(self, name) for name in _SUMMARY_FIELDS]
        values[_CACHE_AT] = [getattr(self.cache, name) for name in _CACHE_FIELDS]
        values[_USAGE_AT] = [[getattr(r, name) for name in _USAGE_FIELDS] for r in self.usage]
        return values

    @classmethod
    def from_row(cls, values: list[Any]) -> "SessionSummary":
        """Rebuild from `to_row`'s list; raises TypeError/IndexError/ValueError on another
        shape."""
        if not isinstance(values, list) or len(values) != len(_SUMMARY_FIELDS):
            raise ValueError("not a summary row")
        values = list(values)
        values[_CACHE_AT] = CacheClockInfo(*values[_CACHE_AT])
        values[_USAGE_AT] = tuple([UsageRow(*r) for r in values[_USAGE_AT]])
        return cls(*values)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SessionSummary":
        """Rebuild from `to_json`'s dict; raises KeyError/TypeError on a foreign shape."""
        values = dict(data)
        values["cache"] = CacheClockInfo(**values["cache"])
        values["usage"] = tuple(UsageRow(**r) for r in values.get("usage") or ())
        return cls(**values)


from dataclasses import fields as _fields  # noqa: E402

_SUMMARY_FIELDS = tuple(f.name for f in _fields(SessionSummary))
_CACHE_FIELDS = tuple(f.name for f in _fields(CacheClockInfo))
_USAGE_FIELDS = tuple(f.name for f in _fields(UsageRow))
_CACHE_AT = _SUMMARY_FIELDS.index("cache")
_USAGE_AT = _SUMMARY_FIELDS.index("usage")


def placeholder(info: SessionInfo) -> SessionSummary:
    """A row for a discovered file not read yet (its cache rule is "pending"; never stored)."""
    return SessionSummary(
        agent=info.agent, path=str(info.path), session_id=info.session_id, project=info.project,
        name=info.title, live=info.live, modified=info.modified, size=info.size, offset=0,
        model=info.model, provider=None, context_tokens=None, context_window=None,
        cache=CacheClockInfo("pending", None, None, None, "reading…", "reading…"),
    )


def local_day(seconds: float | None) -> str:
    """Local calendar day of an epoch time, "unknown" for None or a time out of range
    (`ds4core.epoch.to_datetime`)."""
    when = to_datetime(seconds) if seconds is not None else None
    return when.strftime("%Y-%m-%d") if when is not None else "unknown"


def _main_requests(conversation: Conversation) -> list[Request]:
    return [r for r in conversation.requests if not r.synthetic and not r.sidechain]


def _recorded_clock(conversation: Conversation) -> CacheClockInfo:
    requests = [r for r in _main_requests(conversation) if r.timestamp is not None]
    refresh = next((r for r in reversed(requests) if r.usage.cache_read + r.usage.cache_write > 0), None)
    writer = next((r for r in reversed(requests) if r.usage.cache_write > 0), None)
    if writer is None:
        tier, how = "5m", "no cache write recorded; 5m assumed"
    elif writer.usage.cache_write_1h > 0:
        tier, how = "1h", "recorded 1h write"
    elif writer.usage.cache_write_5m > 0:
        tier, how = "5m", "recorded 5m write"
    else:
        tier, how = "5m", "write tier not split; 5m assumed"
    return CacheClockInfo("recorded", tier, ANTHROPIC_TTL_S[tier], refresh.timestamp if refresh else None, how)


def _model_table_clock(conversation: Conversation, models: ModelTable, settings: OverviewSettings) -> CacheClockInfo:
    from ds4core.cache_state import CacheEvent, cache_clock
    from ds4core.usage import Usage as CoreUsage

    events = []
    for r in _main_requests(conversation):
        if r.timestamp is None:
            continue
        u = r.usage
        usage = CoreUsage(input=u.input, output=u.output, cache_read=u.cache_read, cache_write=u.cache_write,
                          cache_write_1h=u.cache_write_1h)
        if usage.is_zero:
            continue
        key = f"{r.provider}/{r.model}" if r.provider and r.model else None
        events.append(CacheEvent(r.timestamp, usage, "reply", r.entry_id, key))
    last = conversation.last_request
    provider = (last.provider if last else None) or conversation.provider
    model = (last.model if last else None) or conversation.model
    key = f"{provider}/{model}" if provider and model else None
    info = models.get(provider, model) if key else None
    clock = cache_clock(events, model_key=key, prompt_cache=info.prompt_cache if info else None,
                        retention=settings.pi_retention)
    last_refresh = clock.refresh.time_s if clock.refresh else None
    label = f"{clock.tier.tier} retention ({clock.tier.source})"
    return CacheClockInfo("model-table", clock.tier.tier, clock.lifetime_s, last_refresh, label, clock.no_countdown)


def _configured_clock(conversation: Conversation, settings: OverviewSettings) -> CacheClockInfo:
    lifetime = settings.retention.get(conversation.agent)
    requests = [r for r in _main_requests(conversation) if r.timestamp is not None and r.usage.prompt_tokens > 0]
    last = requests[-1].timestamp if requests else None
    if lifetime is None:
        return CacheClockInfo("configured", None, None, last, TYPICAL_LABEL,
                              f"{conversation.agent} records no cache TTL; no retention configured "
                              f"(DS4TUI_CACHE_RETENTION={conversation.agent}=SECONDS)")
    return CacheClockInfo("configured", "typical", lifetime, last, f"{lifetime} s, {TYPICAL_LABEL}")


def cache_clock_of(conversation: Conversation, models: ModelTable, settings: OverviewSettings) -> CacheClockInfo:
    """The prompt-cache clock of a conversation under its agent's rule (module doc)."""
    rule = cache_rule(conversation.capabilities)
    if rule == "recorded":
        return _recorded_clock(conversation)
    if rule == "model-table":
        return _model_table_clock(conversation, models, settings)
    return _configured_clock(conversation, settings)


def usage_rows(conversation: Conversation, prices: PriceBook) -> tuple[UsageRow, ...]:
    """The session's usage by (local day, model), every request once (side chains and
    subagent requests included: they were paid for; aborted or failed replies with usage too;
    synthetic rows without any usage excluded: no provider call).
    A request's recorded cost wins over the price table."""
    acc: dict[tuple[str, str], dict[str, Any]] = {}
    for r in conversation.requests:
        if r.synthetic and r.usage.prompt_tokens + r.usage.output == 0 and not r.cost_usd:
            continue  # no provider call (Claude Code `<synthetic>` rows, empty error replies)
        model = r.model or conversation.model or "unknown"
        row = acc.setdefault((local_day(r.timestamp), model), {
            "requests": 0, "input": 0, "cache_read": 0, "cache_write": 0, "output": 0,
            "cost_usd": 0.0, "unpriced": 0, "price_source": None,
        })
        u = r.usage
        row["requests"] += 1
        row["input"] += u.input
        row["cache_read"] += u.cache_read
        row["cache_write"] += u.cache_write
        row["output"] += u.output
        if r.cost_usd is not None:
            row["cost_usd"] += r.cost_usd
            row["price_source"] = row["price_source"] or "recorded"
            continue
        usd, source = prices.cost(conversation.agent, r.provider or conversation.provider, model, u)
        if usd is None:
            row["unpriced"] += 1
        else:
            row["cost_usd"] += usd
            row["price_source"] = row["price_source"] or source
    return tuple(UsageRow(day, model, **values) for (day, model), values in sorted(acc.items()))


def _name(conversation: Conversation, info: SessionInfo | None) -> str | None:
    """The session's title as recorded now; a subagent's listing title (its task description)
    first, since its transcript's own title is only its first prompt."""
    if info is not None and info.parent and info.title:
        return info.title
    return conversation.title or (info.title if info else None) or first_prompt(conversation)


def first_prompt(conversation: Conversation, limit: int = 80) -> str | None:
    """The first line of the conversation's first user message, at most `limit` characters
    (`ds4sessions.agents.common.first_prompt`); None when there is none."""
    from ds4sessions.agents.common import first_prompt as first_prompt_of

    return first_prompt_of(conversation.messages, limit)


def summarize(
    conversation: Conversation,
    info: SessionInfo | None,
    *,
    models: ModelTable,
    prices: PriceBook,
    settings: OverviewSettings,
    size: int,
    modified: float,
    offset: int,
) -> SessionSummary:
    """The overview row of `conversation` (the file's state after `offset` bytes of `size`).

    `info` is the agent's cheap listing of the file (project, title, liveness), None when the file
    was opened directly. Context window: the conversation's, else the model table's.
    """
    last = conversation.last_request
    context_tokens = None
    if last is not None and not (conversation.compactions and last.message_index is None):
        context_tokens = last.usage.prompt_tokens + last.usage.output
    provider = (last.provider if last else None) or conversation.provider
    model = (last.model if last else None) or conversation.model
    window = conversation.context_window
    if window is None and model:
        for prov in dict.fromkeys((provider, conversation.provider)):
            found = models.get(prov, model)
            if found is not None:
                window = found.context_window
                break
    stamps = [r.timestamp for r in conversation.requests if r.timestamp is not None]
    rows = usage_rows(conversation, prices)
    project = (info.project if info else None) or conversation.cwd
    return SessionSummary(
        agent=conversation.agent,
        path=str(conversation.path),
        session_id=conversation.session_id or (info.session_id if info else None),
        project=project,
        name=_name(conversation, info),
        live=bool(info.live) if info else False,
        modified=modified,
        size=size,
        offset=offset,
        model=model,
        provider=provider,
        context_tokens=context_tokens,
        context_window=window,
        cache=cache_clock_of(conversation, models, settings),
        usage=rows,
        requests=sum(r.requests for r in rows),
        diagnostics=len(conversation.diagnostics),
        last_activity_s=max(stamps) if stamps else None,
        entries=conversation.entries,
    )
