"""The dashboard's view model: everything the widgets show, computed once per snapshot and plan.

Pure functions and frozen dataclasses (no Textual, no Rich): `build(snapshot, derived,
previous=...)` turns a `Snapshot` (`ds4sessions.ingest.live`) and its `Derived` views
(`ds4sessions.derive.pipeline`) into a `ViewModel` the widgets render without computing anything.

**One number per item.** Every token figure of a context item (a category, a turn, a message
in the manifest, a map segment) is a `Tokens`: the count of the snapshot's best estimator
(`cl100k` once the exact counts are in, `chars-v1` for the first paint: `Snapshot.best`), plus
the same count calibrated to the provider's count when the session has one
(`ProviderView.context_tokens`, Pi's own context size: the anchor reply's usage plus the
estimate of later messages). The calibration is one factor for the whole snapshot,
`context_tokens / estimate`, so calibrated items sum to the provider's count. `Tokens.shown` is
the figure a widget prints (the raw estimate here; see `SHOW_CALIBRATED`), and it is the same
wherever the item appears: header, legend, turns, manifest. Manifest items that are not context
messages (system prompt, tool definitions, DS4 supplements) keep the planner's chars-v1 count and
say so; the planner's own chars-v1 count of every item stays available as `ManifestRow.planner_tokens`
(the budget arithmetic of DS4's explain panel is in those units, spec §4).

**Incremental.** `build(..., previous=vm)` reuses the rows of `previous` whose inputs are the
same objects (a snapshot keeps the `Turn` objects an append did not change), so a long session
costs O(changed rows) per append, not O(turns), apart from identity checks.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Sequence

from ds4core.categories import Calibrated, Segment, calibrated
from ds4tui.header import first_prompt_of, session_display_name

Estimator = Literal["chars-v1", "cl100k"]
SHOW_CALIBRATED = True
"""Whether `Tokens.shown` is the calibrated figure when there is one (issue 17: the screen shows
the calibrated figure, as the header, legend and map do; the raw estimate stays in `Tokens.raw`
for the inspector). One switch for every widget."""


@dataclass(frozen=True)
class Tokens:
    """One item's token figure: `raw` tokens by `estimator`; `factor` the calibration to the
    provider's count (None: not calibrated: no provider count, an item the calibration does not
    cover, or a turn row, whose calibration is the view model's: `ViewModel.calibrated`)."""

    raw: int
    estimator: str
    factor: float | None = None

    @property
    def is_calibrated(self) -> bool:
        """True when a calibrated figure exists."""
        return self.factor is not None

    @property
    def calibrated(self) -> int | None:
        """`raw` scaled to the provider's count (None when not calibrated)."""
        return None if self.factor is None else round(self.raw * self.factor)

    @property
    def shown(self) -> int:
        """The figure every widget prints for this item (see `SHOW_CALIBRATED`)."""
        if SHOW_CALIBRATED and self.factor is not None:
            return round(self.raw * self.factor)
        return self.raw


@dataclass(frozen=True)
class Calibration:
    """Scale from the snapshot's estimate to the provider's count: `factor` =
    `provider.context_tokens / estimate` (None without a provider count or an estimate);
    `estimator` is the snapshot's best counter; `calibrated` the snapshot's best breakdown
    calibrated to the provider's count (`ds4core.categories.calibrated`, issue 17: what the
    header, legend and map show; None only in `EMPTY`)."""

    estimator: str
    factor: float | None
    calibrated: Calibrated | None = field(default=None, compare=False, repr=False)

    def tokens(self, raw: int) -> Tokens:
        """`raw` estimator tokens as a `Tokens` carrying this calibration."""
        return Tokens(raw, self.estimator, self.factor)


def calibration(snap: Any) -> Calibration:
    """The snapshot's calibration (see `Calibration`)."""
    best = snap.best
    provider = snap.provider
    cal = calibrated(best, provider.context_tokens if provider is not None else None)
    factor = cal.factor if cal.source == "provider" and cal.estimate > 0 else None
    return Calibration(best.counter, factor, cal)


@dataclass(frozen=True)
class HeaderModel:
    """The header's facts. `state`: `loading` (no snapshot yet), `empty` (a file with no entry
    yet), `ready`. `used` tokens: the calibrated total (`Calibrated.used`: the provider's count
    when `measured`, else the estimate; never above the window), the legend's total;
    `window` the model's context window (None: unknown model); `fill` = used / window (0–1+)."""

    state: Literal["loading", "empty", "ready"]
    file_size: int = 0
    used: int = 0
    measured: bool = False
    estimator: str = ""
    window: int | None = None
    fill: float | None = None
    model_key: str | None = None
    model_known: bool = False
    name: str = ""
    cwd_name: str = ""
    session_id: str | None = None
    deleted: bool = False
    not_a_session: bool = False
    problems: int = 0


@dataclass(frozen=True)
class CategoryModel:
    """One legend row: category `id`, `label`, tokens, children `(name, Tokens)` by weight,
    and whether the category is inferred (system tokens deduced from the provider's count)."""

    id: str
    label: str
    tokens: Tokens
    children: tuple[tuple[str, Tokens], ...] = ()
    inferred: bool = False


@dataclass(frozen=True)
class LegendModel:
    """The legend: category rows, then the summary facts (estimate by estimator, provider
    prompt tokens and ratio, overshoot, messages since the anchor, an unknown window)."""

    rows: tuple[CategoryModel, ...]
    estimate: Tokens
    provider: Any  # ProviderView | None
    unknown_window: str | None = None
    calibrated: Calibrated | None = field(default=None, compare=False, repr=False)
    """The rows as the screen shows them (issue 17: calibrated to the provider's count)."""


@dataclass(frozen=True)
class Overlays:
    """Marks on the map by context message index: excluded by the DS4 plan, pinned, the cached
    prefix end of the last request (None: unknown) and whether the cache is cold."""

    excluded: frozenset[int] = frozenset()
    pinned: frozenset[int] = frozenset()
    cached_end: int | None = None
    cold: bool = False


@dataclass(frozen=True)
class MapModel:
    """The map's data: `segments` in context order, calibrated to the provider's count
    (`Calibrated.segments`: the provider's count is the truth, never above the window), the
    `window` in tokens, and the overlays."""

    segments: tuple[Segment, ...]
    window: int
    overlays: Overlays = Overlays()


PlanState = Literal["", "kept", "partial", "excluded"]


@dataclass(frozen=True)
class TurnRow:
    """One turn list row. `key` is stable across appends (the turn's first message index);
    `tokens` the turn's raw estimate (its calibrated figure: `ViewModel.calibrated(row.tokens)`,
    kept out of the row so an append does not rebuild every row when the factor moves)."""

    key: str
    index: int
    time: str
    prompt: str
    tool_calls: int
    tokens: Tokens
    first_message: int
    last_message: int
    plan: PlanState = ""
    pinned: bool = False


@dataclass(frozen=True)
class ManifestRow:
    """One manifest row: the plan's `item` (`ds4sessions.derive.planning.ManifestItem`), its
    figure `tokens` (a context message: the snapshot's estimate, as everywhere else; otherwise
    the planner's chars-v1 count) and the planner's chars-v1 count `planner_tokens`."""

    item: Any
    tokens: Tokens
    planner_tokens: int

    @property
    def key(self) -> str:
        """The item's identity across plans."""
        return self.item.key


@dataclass(frozen=True)
class ViewModel:
    """Everything the dashboard shows for one snapshot `version` (and the plan of the same
    version when `plan` is set)."""

    version: int
    header: HeaderModel
    legend: LegendModel | None
    map: MapModel
    turns: tuple[TurnRow, ...]
    manifest: tuple[ManifestRow, ...] = ()
    plan: Any = None  # PlanView | None
    excluded_entry_ids: frozenset[str] = frozenset()
    pinned_entry_ids: frozenset[str] = frozenset()
    calibration: Calibration = Calibration("chars-v1", None)
    _turn_inputs: tuple[Any, ...] = field(default=(), repr=False, compare=False)


    def calibrated(self, tokens: Tokens) -> Tokens:
        """`tokens` (a turn row's raw figure) with this view model's calibration."""
        if tokens.estimator != self.calibration.estimator:
            return tokens
        return Tokens(tokens.raw, tokens.estimator, self.calibration.factor)


EMPTY = ViewModel(0, HeaderModel("loading"), None, MapModel((), 1), ())


# --- builders -------------------------------------------------------------------------------


def header(snap: Any | None, cal: Calibration | None = None) -> HeaderModel:
    """The header facts of `snap` (None: nothing read yet)."""
    if snap is None:
        return HeaderModel("loading")
    reader = snap.reader
    if reader.status == "empty" and not reader.entries:
        return HeaderModel("empty", file_size=snap.file_size)
    cal = cal or calibration(snap)
    assert cal.calibrated is not None
    measured = cal.calibrated.source == "provider"
    used = cal.calibrated.used
    window = snap.context_window
    cwd = (reader.cwd or "").rstrip("/").rsplit("/", 1)[-1]
    return HeaderModel(
        "ready",
        file_size=snap.file_size,
        used=used,
        measured=measured,
        estimator=snap.best.counter,
        window=window,
        fill=used / window if window else None,
        model_key=snap.model_key,
        model_known=snap.model is not None,
        name=session_display_name(reader.session_name, snap.path, first_prompt_of(snap.context.messages)),
        cwd_name=cwd,
        session_id=reader.session_id,
        deleted=snap.deleted,
        not_a_session=reader.status == "not_a_session",
        problems=reader.diagnostics.total + len(snap.context.warnings),
    )


def legend(snap: Any, cal: Calibration | None = None) -> LegendModel:
    """The legend of `snap`: its best breakdown's rows as `CategoryModel`s."""
    cal = cal or calibration(snap)
    best = snap.best
    rows = tuple(
        CategoryModel(
            row.id,
            row.label,
            cal.tokens(row.tokens) if row.id not in ("free", "unattributed") else Tokens(row.tokens, best.counter),
            tuple((name, cal.tokens(t)) for name, t in row.children),
            row.inferred,
        )
        for row in best.rows
    )
    unknown = None if snap.model is not None else f"window unknown for {snap.model_key or 'this session'}"
    return LegendModel(rows, cal.tokens(best.estimate), snap.provider, unknown, cal.calibrated)


def map_model(snap: Any, overlays: Overlays = Overlays(), cal: Calibration | None = None) -> MapModel:
    """The map of `snap` (see `MapModel`): the calibrated segments (issue 17), whose sum is the
    header's and legend's total."""
    cal = cal or calibration(snap)
    assert cal.calibrated is not None
    segments: Sequence[Segment] = cal.calibrated.segments
    window = snap.context_window or max(cal.calibrated.used, 1)
    return MapModel(tuple(segments), window, overlays)


def overlays(snap: Any, plan: Any, cache: Any, *, excluded_ids: frozenset[str] = frozenset()) -> Overlays:
    """The map's marks for `snap` from `plan` (a PlanView or None; `excluded_ids` its
    `excluded_entry_ids`, computed once by the caller) and `cache` (a CacheView or None)."""
    excluded: frozenset[int] = frozenset()
    pinned: frozenset[int] = frozenset()
    if plan is not None:
        pins = set(plan.pinned_entry_ids)
        ids = snap.context.message_entry_ids
        excluded = frozenset(i for i, eid in enumerate(ids) if eid in excluded_ids)
        pinned = frozenset(i for i, eid in enumerate(ids) if eid in pins)
    cached_end = cache.cached_prefix_end if cache is not None else None
    cold = cache is not None and cache.state is not None and cache.state.status == "cold"
    return Overlays(excluded, pinned, cached_end, cold)


def turn_times(turns: Any, today: Any = None) -> list[str]:
    """The time column of the turn list: "HH:MM" when every turn is from today (local time),
    else "MM-DD HH:MM" for all, so times never seem to run backwards across days. The row before
    the first prompt (a compaction summary written after the turns it keeps) shows no time when
    it is later than the next turn. `today` is a `datetime.date` (default: today)."""
    local = [t.time.astimezone() if isinstance(t.time, dt.datetime) else None for t in turns]
    today = today or dt.date.today()
    dated = any(when is not None and when.date() != today for when in local)
    out = [when.strftime("%m-%d %H:%M" if dated else "%H:%M") if when is not None else "" for when in local]
    if len(turns) > 1 and not turns[0].index and local[0] is not None and local[1] is not None and local[0] > local[1]:
        out[0] = ""
    return out


def _turn_row(turn: Any, cal: Calibration, time: str) -> TurnRow:
    return TurnRow(
        key=str(turn.first_message),
        index=turn.index,
        time=time,
        prompt=turn.prompt,
        tool_calls=turn.tool_calls,
        tokens=Tokens(turn.tokens, cal.estimator),
        first_message=turn.first_message,
        last_message=turn.last_message,
    )


def _plan_state(turn: Any, excluded: frozenset[str], pins: frozenset[str]) -> tuple[PlanState, bool]:
    ids = set(turn.entry_ids)
    out = ids & excluded
    pinned = not ids.isdisjoint(pins)
    if out and out == ids:
        return "excluded", pinned
    return ("partial" if out else "kept"), pinned


def turn_rows(
    snap: Any,
    cal: Calibration,
    plan: Any = None,
    excluded_ids: frozenset[str] = frozenset(),
    previous: ViewModel | None = None,
) -> tuple[TurnRow, ...]:
    """One `TurnRow` per turn of `snap`; with `plan`, each row's plan state (`kept`,
    `partial`, `excluded`; `pinned`). Rows of `previous` whose turn object, calibration and plan
    are unchanged are reused."""
    pins = frozenset(plan.pinned_entry_ids) if plan is not None else frozenset()
    reuse = previous is not None and previous.plan is plan and previous.calibration.estimator == cal.estimator
    old_turns = previous._turn_inputs if reuse and previous is not None else ()
    rows: list[TurnRow] = []
    times = turn_times(snap.turns)
    for i, turn in enumerate(snap.turns):
        if i < len(old_turns) and old_turns[i] is turn and previous is not None and previous.turns[i].time == times[i]:
            rows.append(previous.turns[i])
            continue
        row = _turn_row(turn, cal, times[i])
        if plan is not None:
            state, pinned = _plan_state(turn, excluded_ids, pins)
            row = replace(row, plan=state, pinned=pinned)
        rows.append(row)
    return tuple(rows)


def manifest_rows(snap: Any, plan: Any, cal: Calibration) -> tuple[ManifestRow, ...]:
    """The manifest rows of `plan` (a PlanView of `snap`) with one figure each (see
    `ManifestRow`): a context message takes the snapshot's count of that message, the system
    prompt the legend's system prompt row, a tool definition the legend's row of that tool;
    anything else (supplements, Pi's exclusions) the planner's chars-v1 count."""
    best = snap.best
    per_message = best.message_tokens
    system = next((r.tokens for r in best.rows if r.id == "system_prompt" and not r.inferred), None)
    tools = next((dict(r.children) for r in best.rows if r.id == "tools"), {})
    rows = []
    for item in plan.items:
        index = item.message_index
        if index is not None and 0 <= index < len(per_message):
            tokens = cal.tokens(per_message[index])
        elif item.key == "pi:system-prompt" and system is not None:
            tokens = cal.tokens(system)
        elif item.key.startswith("tool:") and item.key[5:] in tools:
            tokens = cal.tokens(tools[item.key[5:]])
        else:
            tokens = Tokens(item.tokens, "chars-v1")
        rows.append(ManifestRow(item, tokens, item.tokens))
    return tuple(rows)


def build(snap: Any | None, derived: Any | None = None, previous: ViewModel | None = None) -> ViewModel:
    """The view model of `snap` and `derived` (ignored unless its `version` is the snapshot's).

    `previous`: the last view model built (rows whose inputs are unchanged are reused; the
    manifest rows are reused when the plan and calibration are the same objects)."""
    if snap is None:
        return EMPTY
    if derived is not None and derived.version != snap.version:
        derived = None
    cal = calibration(snap)
    plan = derived.plan if derived is not None else None
    cache = derived.cache if derived is not None else None
    excluded_ids = plan.excluded_entry_ids if plan is not None else frozenset()
    if previous is not None and plan is not None and previous.plan is plan:
        excluded_ids = previous.excluded_entry_ids
    turns = turn_rows(snap, cal, plan, excluded_ids, previous)
    if plan is None:
        manifest: tuple[ManifestRow, ...] = ()
    elif previous is not None and previous.plan is plan and previous.calibration == cal:
        manifest = previous.manifest
    else:
        manifest = manifest_rows(snap, plan, cal)
    return ViewModel(
        version=snap.version,
        header=header(snap, cal),
        legend=legend(snap, cal),
        map=map_model(snap, overlays(snap, plan, cache, excluded_ids=excluded_ids), cal),
        turns=turns,
        manifest=manifest,
        plan=plan,
        excluded_entry_ids=excluded_ids,
        pinned_entry_ids=frozenset(plan.pinned_entry_ids) if plan is not None else frozenset(),
        calibration=cal,
        _turn_inputs=snap.turns,
    )
