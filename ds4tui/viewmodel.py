"""The dashboard's view model: everything the widgets show, computed once per snapshot and plan.

Pure functions and frozen dataclasses (no Textual, no Rich): `build(snapshot, derived,
previous=...)` turns a `Snapshot` (`ds4sessions.agents.pi.live`) and its `Derived` views
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
import itertools
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, NamedTuple, Sequence

from ds4core.categories import Calibrated, Cell, MapIndex, Segment, calibrated
from ds4core.lazy import Lazy
from ds4tui.header import first_prompt_of, session_display_name

Estimator = Literal["chars-v1", "cl100k"]
SHOW_CALIBRATED = True
"""Whether `Tokens.shown` is the calibrated figure when there is one (issue 17: the screen shows
the calibrated figure, as the header, legend and map do; the raw estimate stays in `Tokens.raw`
for the inspector). One switch for every widget."""


class Tokens(NamedTuple):
    """One item's token figure: `raw` tokens by `estimator`; `factor` the calibration to the
    provider's count (None: not calibrated: no provider count, an item the calibration does not
    cover, or a turn row, whose calibration is the view model's: `ViewModel.calibrated`).
    A named tuple: one is built per manifest row, so it must be cheap."""

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
    reading: tuple[int, int] | None = None
    agent: str = ""
    note: str = ""
    """`agent`: the agent's label when it is not the default one (Pi); `note`: the agent's own
    header item (`AgentExtras.header_note`)."""
    as_of: str = ""
    """The scrubbed request ("as of request 57 · 14:02": the Timeline tab's cursor); "" live."""


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
    notes: tuple[str, ...] = ()
    """The agent's own lines under the rows (`AgentExtras.legend_lines`: autocompact, % left)."""
    roles: Any = field(default_factory=dict, compare=False)
    """Category id → colour role (the agent's `CategoryTable.roles`)."""


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
    """The map's data: `index` (`ds4core.categories.MapIndex`: the best breakdown's segments in
    context order, extended per append), `totals` (category → calibrated tokens, the legend's
    rows: the provider's count is the truth, never above the window), the `window` in tokens,
    and the overlays. `cells(n, per_cell)` lays out `n` cells in O(n log segments); the cells
    of two layouts of the same index are the same objects (the widget repaints changed rows
    only). `segments`: the calibrated segments (`Calibrated.segments`, computed on first use)."""

    index: MapIndex
    totals: tuple[tuple[str, int], ...]
    window: int
    overlays: Overlays = Overlays()
    calibrated: Calibrated | None = field(default=None, compare=False, repr=False)
    reserved: tuple[tuple[str, int], ...] = ()
    """Reserved space (category, tokens), e.g. Claude Code's autocompact buffer: drawn as the
    last cells of the map, after the free space (where the window ends for the agent)."""
    roles: Any = field(default_factory=dict, compare=False)
    """Category id → colour role (the agent's `CategoryTable.roles`)."""
    agent: str = "Pi"
    """The agent's label: the map's title says "What <agent> sends"."""
    what_if: bool = False
    """DS4's plan is a what-if for this agent: the DS4 view's title says "What DS4 would send"."""

    def cells(self, total_cells: int, tokens_per_cell: int) -> list[Cell]:
        """`total_cells` cells of `tokens_per_cell` tokens (`MapIndex.layout`), the reserved
        space's cells last."""
        cells = self.index.layout(dict(self.totals), total_cells, tokens_per_cell)
        if self.reserved and tokens_per_cell > 0:
            n = sum(-(-tokens // tokens_per_cell) for _, tokens in self.reserved)
            free_at_end = 0
            while free_at_end < len(cells) and cells[-1 - free_at_end].category == "free":
                free_at_end += 1
            n = min(n, free_at_end)
            tail = [_reserved_cell(category) for category, tokens in self.reserved
                    for _ in range(-(-tokens // tokens_per_cell))][:n]
            cells[len(cells) - len(tail):] = tail
        return cells

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The calibrated segments (each category's share of its row, by largest remainder)."""
        return tuple(self.calibrated.segments) if self.calibrated is not None else ()

    def same_data(self, other: "MapModel") -> bool:
        """True when `other` lays out the same cells (same index object, totals and window)."""
        return (self.index is other.index and self.totals == other.totals and self.window == other.window
                and self.reserved == other.reserved)


_RESERVED_CELLS: dict[str, Cell] = {}


def _reserved_cell(category: str) -> Cell:
    """The one cell object of reserved space `category` (layouts compare cells by identity)."""
    cell = _RESERVED_CELLS.get(category)
    if cell is None:
        cell = _RESERVED_CELLS[category] = Cell(category, None, None)
    return cell


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


LazyRows = Lazy
"""Rows made on the first call and kept (`ds4core.lazy.Lazy`); `build` hands the same object on
while its inputs are unchanged."""


@dataclass(frozen=True)
class ViewModel:
    """Everything the dashboard shows for one snapshot `version` (and the plan of the same
    version when `plan` is set)."""

    version: int
    header: HeaderModel
    legend: LegendModel | None
    map: MapModel
    turns: tuple[TurnRow, ...]
    manifest_rows: "LazyRows | None" = None
    """The manifest rows, built on first use (`manifest`): only the manifest tab reads them."""
    plan: Any = None  # PlanView | None
    excluded_entry_ids: frozenset[str] = frozenset()
    pinned_entry_ids: frozenset[str] = frozenset()
    calibration: Calibration = Calibration("chars-v1", None)
    plan_sends: int | None = None
    """What `plan` sends: its fixed tokens plus its selected items' (DS4's estimator tokens),
    for the DS4 view's title; None without a plan."""
    plan_version: int | None = None
    """The snapshot version `plan` was made for: below `version` while the plan of this
    snapshot is being computed (the previous plan is shown; rows of new turns say nothing)."""
    _turn_inputs: tuple[Any, ...] = field(default=(), repr=False, compare=False)
    _message_ids: Any = field(default=(), repr=False, compare=False)
    _times: tuple[tuple[str, ...], bool, Any] = field(default=((), False, None), repr=False, compare=False)
    _lineage: tuple[int, str] | None = field(default=None, repr=False, compare=False)
    """`Snapshot.lineage` of the snapshot this was built from (what the next build may extend)."""


    @property
    def time_width(self) -> int:
        """Cells of the turn list's time column: 11 ("MM-DD HH:MM") when the times carry a date,
        else 5 ("HH:MM"); O(1) when the times were made by `build`."""
        times, dated, _ = self._times
        if len(times) == len(self.turns):
            return 11 if dated else 5
        return max((len(r.time) for r in self.turns), default=5) or 5

    @property
    def manifest(self) -> tuple[ManifestRow, ...]:
        """The manifest rows of `plan` (`manifest_rows`; () without a plan)."""
        return self.manifest_rows() if self.manifest_rows is not None else ()

    def calibrated(self, tokens: Tokens) -> Tokens:
        """`tokens` (a turn row's raw figure) with this view model's calibration."""
        if tokens.estimator != self.calibration.estimator:
            return tokens
        return Tokens(tokens.raw, tokens.estimator, self.calibration.factor)


EMPTY = ViewModel(0, HeaderModel("loading"), None, MapModel(MapIndex(), (), 1), ())


# --- builders -------------------------------------------------------------------------------


def header(snap: Any | None, cal: Calibration | None = None) -> HeaderModel:
    """The header facts of `snap` (None: nothing read yet)."""
    if snap is None:
        return HeaderModel("loading")
    reader = snap.reader
    if reader.status == "empty" and not reader.entry_count:
        return HeaderModel("empty", file_size=snap.file_size, problems=reader.diagnostics.total)
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
        problems=reader.diagnostics.total + len(snap.context.warnings) + len(_extra_problems(snap)),
        reading=(snap.file_size, snap.file_size + snap.unread_bytes) if snap.unread_bytes else None,
        agent=_agent_label(snap),
        note=(snap.extras.header_note() or "") if snap.extras is not None else "",
    )


def agent_label(snap: Any) -> str:
    """The label of `snap`'s agent ("Pi", "Claude Code", "Codex"; its id for an unknown one)."""
    from ds4sessions.agents.registry import all_agents

    return next((getattr(a, "label", a.name) for a in all_agents() if a.name == snap.agent), snap.agent)


def _agent_label(snap: Any) -> str:
    """The agent's label for the header, "" for the default agent (Pi: the tool's own)."""
    from ds4sessions.agents.registry import default_agent

    return "" if snap.agent == default_agent().name else agent_label(snap)


def _extra_problems(snap: Any) -> list[str]:
    return list(snap.extras.problems()) if snap.extras is not None else []


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
    notes = tuple(snap.extras.legend_lines()) if snap.extras is not None else ()
    return LegendModel(rows, cal.tokens(best.estimate), snap.provider, unknown, cal.calibrated, notes,
                       dict(best.table.roles))


def map_model(
    snap: Any,
    overlays: Overlays = Overlays(),
    cal: Calibration | None = None,
    previous: MapModel | None = None,
    *,
    extends: bool = False,
) -> MapModel:
    """The map of `snap` (see `MapModel`): the best breakdown's segments indexed (extending
    `previous`'s index after an append) and drawn at the calibrated totals (issue 17), whose sum
    is the header's and legend's total. `extends`: the caller knows the segments start with
    those `previous` indexed (`MapIndex.of`)."""
    cal = cal or calibration(snap)
    assert cal.calibrated is not None
    index = MapIndex.of(snap.best.segments, previous.index if previous is not None else None, extends=extends)
    held, aside = snap.best.table.reserved, snap.best.table.aside
    totals = tuple((r.id, r.tokens) for r in cal.calibrated.rows if r.id != "free" and r.id not in held and r.id not in aside)
    reserved = tuple((r.id, r.tokens) for r in cal.calibrated.rows if r.id in held and r.tokens > 0)
    window = snap.context_window or max(cal.calibrated.used, 1)
    return MapModel(index, totals, window, overlays, cal.calibrated, reserved, dict(snap.best.table.roles),
                     agent_label(snap), not snap.capabilities.ds4_exact)


def overlays(snap: Any, plan: Any, cache: Any, *, excluded_ids: frozenset[str] = frozenset()) -> Overlays:
    """The map's marks for `snap` from `plan` (a PlanView or None; `excluded_ids` its
    `excluded_entry_ids`, computed once by the caller) and `cache` (a CacheView or None).
    O(messages); `build` updates the previous marks instead when it can."""
    excluded: frozenset[int] = frozenset()
    pinned: frozenset[int] = frozenset()
    if plan is not None:
        pins = set(plan.pinned_entry_ids)
        ids = snap.context.message_entry_ids
        excluded = frozenset(i for i, eid in enumerate(ids) if eid in excluded_ids)
        pinned = frozenset(i for i, eid in enumerate(ids) if eid in pins)
    cached_end, cold = _cache_marks(cache)
    return Overlays(excluded, pinned, cached_end, cold)


def _cache_marks(cache: Any) -> tuple[int | None, bool]:
    cached_end = cache.cached_prefix_end if cache is not None else None
    cold = cache is not None and cache.state is not None and cache.state.status == "cold"
    return cached_end, cold


def _moved_marks(
    before: frozenset[int], changed: set[str], now: frozenset[str], positions: dict[str, int], limit: int
) -> frozenset[int]:
    """`before` (message indices marked) with the marks of the `changed` entry ids set as in
    `now` (the new marked ids); `positions`: entry id → message index, of which only indices
    below `limit` (the messages of the snapshot) count. O(changed)."""
    out = set(before)
    for eid in changed:
        index = positions.get(eid)
        if index is None or index >= limit:
            continue
        if eid in now:
            out.add(index)
        else:
            out.discard(index)
    return frozenset(out)


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


def _turn_times(
    turns: Sequence[Any], previous: "ViewModel | None", same: int | None = None, today: Any = None
) -> tuple[tuple[tuple[str, ...], bool, Any], int]:
    """`(turn_times(turns), dated, today)` and how many leading times are `previous`'s (0: none
    reused), reusing `previous`'s times for the leading turns that are the same objects (an
    append changes the last turn and may add one): O(new turns) unless the date format flips (a
    turn not from today, or midnight passed), plus one copy of the references. `same`: that
    run's length when the caller knows it (`Snapshot.lineage`), else it is found. `today`: the
    local date of the app's clock (default: the system's)."""
    today = today or dt.date.today()
    if previous is not None:
        old_times, old_dated, old_today = previous._times
        old_turns = previous._turn_inputs
        if old_today == today and len(old_times) == len(old_turns):
            k = _same_prefix(old_turns, turns) if same is None else same
            if k >= 2:
                fresh = [t.time.astimezone() if isinstance(t.time, dt.datetime) else None for t in turns[k:]]
                if old_dated or not any(when is not None and when.date() != today for when in fresh):
                    form = "%m-%d %H:%M" if old_dated else "%H:%M"
                    tail = (when.strftime(form) if when is not None else "" for when in fresh)
                    return (tuple(itertools.chain(itertools.islice(old_times, k), tail)), old_dated, today), k
    times = tuple(turn_times(turns, today))
    local_dates = [t.time.astimezone().date() for t in turns if isinstance(t.time, dt.datetime)]
    return (times, any(d != today for d in local_dates), today), 0


def _turn_row(turn: Any, cal: Calibration, time: str, plan: PlanState = "", pinned: bool = False) -> TurnRow:
    return TurnRow(
        str(turn.first_message), turn.index, time, turn.prompt, turn.tool_calls,
        Tokens(turn.tokens, cal.estimator), turn.first_message, turn.last_message, plan, pinned,
    )


def _plan_state(turn: Any, excluded: frozenset[str], pins: frozenset[str]) -> tuple[PlanState, bool]:
    """(kept / partial / excluded, pinned) of `turn`'s entries under a plan excluding `excluded`
    and pinning `pins` (entry ids). The kept turn, the common one, builds no set (a new plan
    recomputes every turn: 10,000 sets were ~40 % of a derived view's build)."""
    ids = turn.entry_ids
    pinned = bool(pins) and not pins.isdisjoint(ids)
    if not excluded or excluded.isdisjoint(ids):
        return "kept", pinned
    if excluded.issuperset(ids):
        return "excluded", pinned
    return "partial", pinned


def turn_rows(
    snap: Any,
    cal: Calibration,
    plan: Any = None,
    excluded_ids: frozenset[str] = frozenset(),
    previous: ViewModel | None = None,
    *,
    times: Sequence[str] | None = None,
    changed: set[str] | None = None,
    same: int | None = None,
) -> tuple[TurnRow, ...]:
    """One `TurnRow` per turn of `snap`; with `plan`, each row's plan state (`kept`,
    `partial`, `excluded`; `pinned`). `times`: the time column (default `turn_times`).

    Rows of `previous` are reused when their turn is the same object with the same estimator
    and time, and either the plan is the same object or (`changed`: the entry ids whose
    exclusion or pin differs between the two plans) none of the turn's entries changed and the
    row was planned before. A new plan that moves a few entries touches only their rows.
    `same`: how many leading turns of `snap` are `previous`'s turn objects with `previous`'s
    times, when the caller knows (`build`: from `_turn_times`)."""
    pins = frozenset(plan.pinned_entry_ids) if plan is not None else frozenset()
    same_estimator = previous is not None and previous.calibration.estimator == cal.estimator
    old_turns = previous._turn_inputs if same_estimator and previous is not None else ()
    old_rows = previous.turns if previous is not None else ()
    same_plan = previous is not None and previous.plan is plan
    rows: list[TurnRow] = []
    times = turn_times(snap.turns) if times is None else times
    start = 0
    if same_plan and old_turns and len(old_rows) == len(old_turns):
        # the usual append: a run of the same turn objects with the same times, then a changed
        # tail; the run is found in C and its rows are taken as they are
        if same is not None:
            start = same  # the caller's run: same turns and same times
        else:
            start = _same_prefix(old_turns, snap.turns)
            old_times = previous._times[0] if previous is not None else ()
            if len(old_times) < start or tuple(old_times[:start]) != tuple(times[:start]):
                start = 0  # the time column changed (a date appeared, or midnight passed)
    for i in range(start, len(snap.turns)):
        turn = snap.turns[i]
        if i < len(old_turns) and old_turns[i] is turn and old_rows[i].time == times[i]:
            old = old_rows[i]
            if same_plan or (plan is not None and changed is not None and old.plan and changed.isdisjoint(turn.entry_ids)):
                rows.append(old)
                continue
        if plan is not None:
            rows.append(_turn_row(turn, cal, times[i], *_plan_state(turn, excluded_ids, pins)))
        else:
            rows.append(_turn_row(turn, cal, times[i]))
    if start:
        return tuple(itertools.chain(itertools.islice(old_rows, start), rows))  # one copy of the references
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


def _same_prefix(old: Sequence[Any], new: Sequence[Any], known: int = 0) -> int:
    """How many leading items of `new` are the same objects as `old`'s (an append keeps all but
    the last few): the tail is walked back in Python, the rest checked in C. `known`: a length
    the caller knows to be shared (`Snapshot.lineage`): then only its last item is checked and
    the run is walked on from there (O(1) for an append)."""
    n = min(len(old), len(new))
    if 0 < known <= n and old[known - 1] is new[known - 1]:
        k = known
        while k < n and old[k] is new[k]:
            k += 1
        return k
    k = n
    while k and old[k - 1] is not new[k - 1]:
        k -= 1
        if n - k > 8:
            break
    if k and all(map(operator.is_, old[:k], new[:k])):
        return k
    k = 0
    while k < n and old[k] is new[k]:
        k += 1
    return k


def _extends(old: Sequence[Any], new: Sequence[Any], known: bool = False) -> bool:
    """True when `new` starts with `old` (C-level comparison: identical items compare at once).
    `known`: the caller knows it does (`Snapshot.lineage`); then only the last item of `old` is
    checked (O(1))."""
    n = len(old)
    if len(new) < n:
        return False
    if n == 0:
        return True
    if new[n - 1] is not old[-1] and new[n - 1] != old[-1]:
        return False
    return known or list(new[:n]) == list(old)


def build(
    snap: Any | None, derived: Any | None = None, previous: ViewModel | None = None, today: Any = None
) -> ViewModel:
    """The view model of `snap` and `derived` (ignored unless its `version` is the snapshot's).

    `previous`: the last view model built. When `snap`'s context messages extend those of
    `previous` (an append), its rows, map index and marks are reused or updated for what
    changed, and without a `derived` of this version the previous plan and cache marks stay
    on screen (`plan_version` says which snapshot they belong to; new turns show no plan state)
    until the new plan arrives. Otherwise everything is built afresh. `today`: the local
    `datetime.date` of the app's clock, which decides the turn times' form (default: the
    system's date)."""
    if snap is None:
        return EMPTY
    if derived is not None and derived.version != snap.version:
        derived = None
    cal = calibration(snap)
    ids = snap.context.message_entry_ids
    old_ids, positions = previous._message_ids if previous is not None and previous._message_ids else ((), None)
    # Snapshots of one lineage extend one another (`Snapshot.lineage`): the prefixes need not
    # be compared item by item (40,000 messages: ~1 ms each, on every append).
    lineage = getattr(snap, "lineage", None)
    old_lineage = previous._lineage if previous is not None else None
    same_epoch = lineage is not None and old_lineage is not None and lineage[0] == old_lineage[0]
    same_counter = same_epoch and lineage == old_lineage
    extends = previous is not None and previous.version > 0 and bool(old_ids) and _extends(old_ids, ids, same_epoch)
    base = previous if extends else None
    if derived is not None:
        plan, cache, plan_version = derived.plan, derived.cache, snap.version
    elif base is not None:
        plan, cache, plan_version = base.plan, None, base.plan_version
    else:
        plan, cache, plan_version = None, None, None
    pins = frozenset(plan.pinned_entry_ids) if plan is not None else frozenset()
    if plan is None:
        excluded_ids: frozenset[str] = frozenset()
    elif base is not None and base.plan is plan:
        excluded_ids = base.excluded_entry_ids
    else:
        excluded_ids = frozenset(plan.excluded_entry_ids)
    changed: set[str] | None = None
    if base is not None and base.plan is not None and plan is not None and base.plan is not plan:
        changed = set(excluded_ids.symmetric_difference(base.excluded_entry_ids))
        changed |= pins.symmetric_difference(base.pinned_entry_ids)
    # entry id → message index, kept up to date while the messages extend (O(new ids) per append)
    positions = _positions(ids, old_ids, positions) if base is not None and positions is not None else None
    n_ids = len(ids)
    # the map's marks
    if base is not None and base.plan is plan:
        marks = base.map.overlays
        if derived is not None:
            cached_end, cold = _cache_marks(cache)
            marks = Overlays(marks.excluded, marks.pinned, cached_end, cold)
    elif changed is not None and base is not None and len(changed) <= max(64, len(ids) // 16) \
            and (positions is not None or (positions := _positions(ids, (), None)) is not None):
        cached_end, cold = _cache_marks(cache)
        marks = Overlays(
            _moved_marks(base.map.overlays.excluded, changed, excluded_ids, positions, n_ids),
            _moved_marks(base.map.overlays.pinned, changed, pins, positions, n_ids),
            cached_end, cold,
        )
    else:
        marks = overlays(snap, plan, cache, excluded_ids=excluded_ids)
    same_turns = None
    if base is not None and same_counter:
        same_turns = _same_prefix(base._turn_inputs, snap.turns, max(len(base._turn_inputs) - 1, 0))
    times, same_times = _turn_times(snap.turns, base, same_turns, today)
    turns = turn_rows(snap, cal, plan, excluded_ids, base, times=times[0], changed=changed,
                      same=min(same_turns, same_times) if same_turns is not None else None)
    if plan is None:
        manifest: LazyRows | None = None
    elif base is not None and base.plan is plan and (derived is None or base.calibration == cal):
        manifest = base.manifest_rows
    else:
        manifest = LazyRows(lambda: manifest_rows(snap, plan, cal))
    return ViewModel(
        version=snap.version,
        header=header(snap, cal),
        legend=legend(snap, cal),
        map=map_model(snap, marks, cal, previous.map if previous is not None else None, extends=same_counter and base is not None),
        turns=turns,
        manifest_rows=manifest,
        plan=plan,
        excluded_entry_ids=excluded_ids,
        pinned_entry_ids=pins,
        calibration=cal,
        plan_version=plan_version,
        plan_sends=None if plan is None else base.plan_sends if base is not None and base.plan is plan else _sends(plan),
        _turn_inputs=snap.turns,
        _message_ids=(ids, positions),
        _times=times,
        _lineage=lineage,
    )


def _sends(plan: Any) -> int | None:
    """Tokens `plan` (a PlanView) would send: fixed + the selected items' (O(selected))."""
    core = getattr(plan, "plan", None)
    if core is None:
        return None
    return int(plan.fixed_tokens or 0) + sum(item.tokens for item in core.selected)


class _Positions(dict):  # type: ignore[type-arg]
    """Entry id → context message index, shared by the view models of a growing context: `n`
    is how many leading ids it covers (-1: no longer extended). A view model of `k` messages
    reads only indices below `k` (`_moved_marks`' `limit`), so growing it in place for the
    next append leaves what the older view models see unchanged."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        super().__init__()
        self.n = 0


def _positions(
    ids: Sequence[str | None], old_ids: Sequence[str | None], old: "_Positions | None"
) -> "_Positions | None":
    """Entry id → context message index for `ids` (see `_Positions`), extending `old` (the
    positions of `old_ids`, a prefix of `ids`; None: build from scratch) in place when it is
    the newest (O(new ids)), else from scratch. None when an entry id occurs twice (then the
    marks are computed in full)."""
    if old is not None and len(old_ids) == len(ids):
        return old
    if old is not None and old.n == len(old_ids) and isinstance(old, _Positions):
        out, start = old, len(old_ids)
    else:
        out, start = _Positions(), 0
    for i in range(start, len(ids)):
        eid = ids[i]
        if eid is not None:
            if eid in out:
                out.n = -1  # a partial extension: older readers keep their prefix, nobody extends it
                return None
            out[eid] = i
    out.n = len(ids)
    return out
