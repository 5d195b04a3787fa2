"""The manifest of a DS4 plan: its rows, totals, group references, diff and JSON (spec §7.1).

`PlanView` is one plan of the live session ready to show; `ManifestItem` one row of it. The
helpers at the end build the rows from the planner's `PlanItem`s column by column (a plan has one
row per message: this is the manifest's hot loop). No planning and no I/O here: the planner runs in
`ds4sessions.derive.planning`, its inputs come from `ds4sessions.derive.inputs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from itertools import islice, repeat
from operator import attrgetter, itemgetter
from typing import Any, Callable, Literal, NamedTuple

from ds4core.lazy import Lazy
from ds4core.pause import pause_point
from ds4core.budgets import ContextBudget, ModelProfile, ResolvedModelAwareness
from ds4core.planner import AtomicGroup, ManagedContextPlan, SupplementalMessage
from ds4core.usage import Usage

__all__ = [
    "PI_EXCLUDED_REASON",
    "SUPPLEMENT_KINDS",
    "SYSTEM_SOURCE",
    "DiffChange",
    "GroupRef",
    "ManifestItem",
    "PlanDiff",
    "PlanTotals",
    "PlanView",
]

PI_EXCLUDED_REASON = "Excluded by Pi branch/compaction context reconstruction"
"""DS4's manifest reason for session entries Pi's context builder leaves out (spec §7.1)."""
SYSTEM_SOURCE = "pi:system-prompt"
SUPPLEMENT_KINDS = frozenset({"memory", "retrieval", "project"})
"""Kinds of the budget-fitted supplements (spec §3.6); a persistent pin supplement is a `pin`."""
_SUPPLEMENT_PREFIXES = ("pin:", "memory:", "retrieval:", "project:")

ItemState = Literal["included", "excluded", "absent"]


class ManifestItem(NamedTuple):
    """One manifest row (spec §7.1): the system prompt, a tool definition, a context message the
    planner included or excluded, or a session entry Pi's context leaves out.

    - `key`: identity across plans (`pi:system-prompt`, `tool:<name>`, `<entry id>#<n>` for the
      n-th message of an entry, `@<index>` for a message without entry id, the supplement id
      such as `retrieval:<entry id>` for a supplement);
    - `kind`: the planner's kind (`current`, `pin`, `recent`, `summary`, `history`, `retrieval`,
      `memory`, `project`), `system`, `tool`, or `pi-excluded`;
    - `entry_id`: the source session entry (a supplement's first source id: for retrieval, the
      entry the evidence quotes); `message_index`: index in `snapshot.context.messages` (None for
      a supplement, which is not in Pi's context);
    - `tokens`: chars-v1 estimator tokens of this message (0 for `pi-excluded`; a supplement's
      whole evidence message);
    - `score`: the planner's score (None for system, tools and Pi exclusions);
    - `reason`: the planner's `"<selection reason>; <group reason>"` or the fixed reason.
    An immutable named tuple (thousands are built per plan; tuples are the cheapest).
    """

    key: str
    included: bool
    kind: str
    entry_id: str | None
    role: str | None
    message_index: int | None
    group_id: str | None
    tokens: int
    score: float | None
    reason: str
    pinned: bool = False

    @property
    def is_supplement(self) -> bool:
        """True for a supplement DS4 splices in (retrieval evidence, memory, ...), not a session
        message."""
        return self.message_index is None and self.key.startswith(_SUPPLEMENT_PREFIXES)

    def to_json(self) -> dict[str, Any]:
        """DS4's manifest item names (`sourceId`, `groupId`, ...) plus `included`, `messageIndex`,
        `supplementId` (supplements) and `pinned`; metadata only, never message content."""
        out: dict[str, Any] = {"kind": self.kind, "included": self.included}
        if self.entry_id is not None:
            out["sourceId"] = self.entry_id
        elif self.key.startswith(("pi:", "tool:")):
            out["sourceId"] = self.key
        if self.is_supplement:
            out["supplementId"] = self.key
        if self.role is not None:
            out["role"] = self.role
        if self.message_index is not None:
            out["messageIndex"] = self.message_index
        if self.group_id is not None:
            out["groupId"] = self.group_id
        out["tokens"] = self.tokens
        if self.score is not None:
            out["score"] = self.score
        if self.pinned:
            out["pinned"] = True
        out["reason"] = self.reason
        return out


class GroupRef(NamedTuple):
    """An atomic group as the explain panel names it: id, group kind (`turn`, `summary`,
    `prefix`), the kind the plan gave it, tokens (estimator), and its session entry ids."""

    id: str
    group_kind: str
    plan_kind: str
    tokens: int
    message_count: int
    entry_ids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """JSON with DS4-style names."""
        return {
            "groupId": self.id,
            "groupKind": self.group_kind,
            "kind": self.plan_kind,
            "tokens": self.tokens,
            "messageCount": self.message_count,
            "entryIds": list(self.entry_ids),
        }


@dataclass(frozen=True)
class PlanTotals:
    """Token totals of a manifest (estimator tokens), DS4's `composition` plus exclusions.

    `estimated_input_tokens = system_tokens + tool_tokens + message_tokens` equals the sum of the
    included items; `excluded_tokens` the sum of the excluded ones. `by_kind` sums included
    message tokens per planner kind."""

    system_tokens: int
    tool_tokens: int
    tool_count: int
    message_tokens: int
    message_count: int
    estimated_input_tokens: int
    excluded_tokens: int
    excluded_count: int
    by_kind: Mapping[str, int]

    def to_json(self) -> dict[str, Any]:
        """DS4's `composition` names plus the exclusion totals."""
        return {
            "systemTokens": self.system_tokens,
            "toolTokens": self.tool_tokens,
            "messageTokens": self.message_tokens,
            "messageCount": self.message_count,
            "toolCount": self.tool_count,
            "estimatedInputTokens": self.estimated_input_tokens,
            "excludedTokens": self.excluded_tokens,
            "excludedCount": self.excluded_count,
            "byKind": dict(self.by_kind),
        }


@dataclass(frozen=True)
class DiffChange:
    """One item whose state changed between two plans: `before`/`after` are `included`,
    `excluded` or `absent`; `reason` is the item's reason in the newer plan (for an item that
    disappeared, the older one's, prefixed "no longer in the context", or for a supplement "no
    longer retrieved" / "no longer supplied")."""

    key: str
    entry_id: str | None
    kind: str
    tokens: int
    before: ItemState
    after: ItemState
    reason: str


@dataclass(frozen=True)
class PlanDiff:
    """What entered or left the sent context between two plans, and why.

    `entered`: included now, excluded or absent before; `left`: included before, excluded or
    absent now. Estimated input tokens before (None without a previous plan) and after.
    `retrieval_pending`: the newer plan is a first paint whose supplements are not planned yet
    (`PlanView.retrieval_pending`); the older plan's supplements are then not listed as left."""

    entered: tuple[DiffChange, ...]
    left: tuple[DiffChange, ...]
    estimated_before: int | None
    estimated_after: int
    mode_before: str | None
    mode_after: str
    retrieval_pending: bool = False

    @property
    def empty(self) -> bool:
        """True when nothing entered or left."""
        return not self.entered and not self.left

    def lines(self, limit: int = 8) -> list[str]:
        """Plain-text summary: per direction, the changes grouped by reason (count, tokens, then
        at most `limit` entry ids)."""
        if self.estimated_before is None:
            return ["First plan: nothing to compare yet."]
        delta = self.estimated_after - self.estimated_before
        out = [f"Estimated input: {self.estimated_before:,} → {self.estimated_after:,} ({delta:+,})"]
        if self.mode_before != self.mode_after:
            out.append(f"Mode: {self.mode_before} → {self.mode_after}")
        if self.retrieval_pending:
            out.append("Historical retrieval pending: its evidence is not planned yet.")
        if self.empty:
            out.append("No item entered or left the plan.")
        for title, changes in (("Entered", self.entered), ("Left", self.left)):
            if not changes:
                continue
            out.append(f"{title}: {len(changes)} item(s), {sum(c.tokens for c in changes):,} tok")
            by_reason: dict[str, list[DiffChange]] = {}
            for change in changes:
                by_reason.setdefault(change.reason, []).append(change)
            for reason, group in by_reason.items():
                names = [c.key if c.key.startswith(_SUPPLEMENT_PREFIXES) else c.entry_id or c.key for c in group]
                shown = ", ".join(names[:limit]) + (f", … {len(names) - limit} more" if len(names) > limit else "")
                out.append(f"  {len(group)} × {group[0].before} → {group[0].after}, {sum(c.tokens for c in group):,} tok: {shown}")
                out.append(f"    why: {reason}")
        return out


class LazyItems:
    """A plan's manifest items (`PlanView.items`: one `ManifestItem` per message, ~1 ms of every
    re-plan at 1,000 groups) and their totals, made by `make()` on first read (`Lazy`), which
    only the manifest tab, the explain panel and `plan --json` do. What the map's marks need
    (`PlanView.excluded_entry_ids`) is answered from the plan's items (`PlanItem`s: `selected`,
    `excluded`), the planned messages' entry ids and context indices and Pi's excluded rows,
    without making them. Compares by its items."""

    __slots__ = ("items", "totals", "_selected", "_excluded", "_entry_ids", "_ctx_index", "_pi_rows")

    def __init__(
        self,
        make: Callable[[], tuple[ManifestItem, ...]],
        *,
        selected: Sequence[Any],
        excluded: Sequence[Any],
        entry_ids: Sequence[str | None],
        ctx_index: Sequence[int | None],
        pi_rows: Sequence[ManifestItem],
    ) -> None:
        items: Lazy[tuple[ManifestItem, ...]] = Lazy(make)
        self.items = items
        # (the totals' function holds `items`, not `self`: a closure over `self` made a reference
        # cycle, so every replaced plan, its PlanItems included, waited for an older generation's
        # collection: 40,000-90,000 objects a derive pass at 10,000 turns, issue 32)
        self.totals: Lazy[PlanTotals] = Lazy(lambda: _totals(
            [i for i in items() if i.included], [i for i in items() if not i.included]
        ))
        self._selected, self._excluded = selected, excluded
        self._entry_ids, self._ctx_index, self._pi_rows = entry_ids, ctx_index, pi_rows

    def excluded_entry_ids(self) -> frozenset[str]:
        """`PlanView.excluded_entry_ids` from the plan's items. O(planned messages) in C."""
        ids, ctx = self._entry_ids, self._ctx_index
        first = _FIRST
        sent = {e for i in map(first, self._selected) if (e := ids[i]) and ctx[i] is not None}
        out = set(filter(None, map(ids.__getitem__, map(first, self._excluded))))
        out.update(r.entry_id for r in self._pi_rows if r.entry_id)
        out.difference_update(sent)
        return frozenset(out)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LazyItems) and (other is self or self.items() == other.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"LazyItems({'made' if self.items.made else 'not made'})"


@dataclass(frozen=True)
class PlanView:
    """One plan of the live session, ready to show (immutable).

    Budget numbers: `profile` and `budget` follow `ds4core.budgets` units (provider tokens for
    the window, reserve and margin; estimator tokens for the input limits). `items` lists the
    included items in sent order (system prompt, tools, messages), then the planner's
    exclusions by message index, then the session entries Pi's context leaves out.
    `duration_ms` is the whole `LivePlanner.plan` call, `planner_ms` the planner alone
    (milliseconds). `estimated_messages` counts messages estimated for this plan (cache misses);
    `calibration_samples` the samples handed to calibration (at most `calibrationWindow`).
    `supplements` are the supplements handed to the planner (spec §3.1; the planner drops them
    all when the context has no user message). `retrieval_pending` marks a first paint planned
    before retrieval ran (set by `ds4sessions.derive.pipeline`; the final plan of the same snapshot
    follows): `/context tokens` shows its retrieval as pending and its diff does not count the
    previous plan's supplements as left.
    """

    plan: ManagedContextPlan
    manifest: LazyItems
    """The manifest items (`items`) and their `totals`, made on first read."""
    config_mode: str
    config_enabled: bool
    session_id: str | None
    leaf_id: str | None
    model_key: str | None
    model_assumed: bool
    profile: ModelProfile
    budget: ContextBudget
    awareness: ResolvedModelAwareness
    fixed_tokens: int
    fixed_source: Literal["system", "inferred", "none"]
    calibration_samples: int
    pinned_entry_ids: tuple[str, ...]
    unmapped_pins: tuple[str, ...]
    provider_usage: Usage | None
    pi_context_tokens: int | None
    duration_ms: float
    planner_ms: float
    estimated_messages: int
    warnings: tuple[str, ...] = ()
    version: int = 0
    supplements: tuple[SupplementalMessage, ...] = ()
    retrieval_pending: bool = False
    agent: str = "pi"
    """The agent whose session was planned (`agents.base.AGENTS`; from the snapshot)."""
    what_if: bool = False
    """A what-if: what DS4 would send for an agent that builds its own context (Claude Code,
    Codex: `Capabilities.ds4_exact` False); False for Pi, where DS4's plan is the decision."""
    inputs: Any = field(default=None, repr=False, compare=False)
    """The `ds4sessions.derive.inputs.PlannerInputs` this plan was made from (None when built
    elsewhere): the cache-aware candidates and retrieval read the same inputs."""
    group_refs: "Lazy[dict[str, tuple[GroupRef, ...]]] | None" = field(default=None, repr=False, compare=False)
    """The explain panel's group lists (`selected_groups`, `excluded_groups`,
    `oversized_exclusions`, `rescued_predecessor`), made when first read: they follow from
    `plan` (compared), and a re-plan need not build one `GroupRef` per group."""

    @property
    def items(self) -> tuple[ManifestItem, ...]:
        """The manifest: included items in sent order, then the planner's exclusions by message
        index, then the session entries Pi's context leaves out (made on first read)."""
        return self.manifest.items()

    @property
    def totals(self) -> PlanTotals:
        """Token totals of the manifest (`PlanTotals`)."""
        return self.manifest.totals()

    @property
    def rescued_predecessor(self) -> GroupRef | None:
        """The group the planner rescued beyond the recent-tail cap (spec §3.5), if any."""
        rescued = self._groups("rescued")
        return rescued[0] if rescued else None

    @property
    def oversized_exclusions(self) -> tuple[GroupRef, ...]:
        """Excluded turns at least as large as the recent-tail limit (spec §3.12)."""
        return self._groups("oversized")

    @property
    def selected_groups(self) -> tuple[GroupRef, ...]:
        """The selected groups, in plan order."""
        return self._groups("selected")

    @property
    def excluded_groups(self) -> tuple[GroupRef, ...]:
        """The excluded groups, in plan order."""
        return self._groups("excluded")

    def _groups(self, kind: str) -> tuple[GroupRef, ...]:
        return self.group_refs().get(kind, ()) if self.group_refs is not None else ()

    @property
    def mode(self) -> str:
        """`managed` or `fallback` (the planner's mode)."""
        return self.plan.mode

    @property
    def fallback_reason(self) -> str | None:
        """The planner's fallback reason, None for a managed plan."""
        return self.plan.planning.fallback_reason

    @property
    def included(self) -> tuple[ManifestItem, ...]:
        """The included items, in sent order."""
        return tuple(i for i in self.items if i.included)

    @property
    def excluded(self) -> tuple[ManifestItem, ...]:
        """The excluded items (planner exclusions, then Pi's)."""
        return tuple(i for i in self.items if not i.included)

    @cached_property
    def excluded_entry_ids(self) -> frozenset[str]:
        """Entry ids none of whose messages is sent (for dimming on the map). An entry quoted by
        sent retrieval evidence stays here (its message is not sent; see
        `retrieved_entry_ids`). Computed once per plan (O(items)), without making the manifest
        items (`LazyItems.excluded_entry_ids`; tests compare it with the definition on the
        items: included message items' entries are sent, excluded ones' not)."""
        return self.manifest.excluded_entry_ids()

    @property
    def retrieved_entry_ids(self) -> tuple[str, ...]:
        """DS4's `retrievedEventIds` (spec §7.1): the source entries of the retrieval evidence
        the plan sends, unique, in sent order."""
        return tuple(
            dict.fromkeys(
                event
                for item in self.plan.selected
                if item.retrieved_event_ids is not None
                for event in item.retrieved_event_ids
            )
        )

    def diff(self, previous: PlanView | None) -> PlanDiff:
        """What entered or left the sent context since `previous` (None, or a plan of another
        session or agent: a first plan; a diff across sessions would compare unrelated entries)."""
        now = {i.key: i for i in self.items}
        pending = self.retrieval_pending
        if previous is not None and (previous.session_id != self.session_id or previous.agent != self.agent):
            previous = None
        if previous is None:
            return PlanDiff((), (), None, self.totals.estimated_input_tokens, None, self.mode, pending)
        before = {i.key: i for i in previous.items}

        def state(item: ManifestItem | None) -> ItemState:
            return "absent" if item is None else "included" if item.included else "excluded"

        entered: list[DiffChange] = []
        left: list[DiffChange] = []
        for key, item in now.items():
            old = before.get(key)
            if item.included and (old is None or not old.included):
                entered.append(DiffChange(key, item.entry_id, item.kind, item.tokens, state(old), "included", item.reason))
            elif not item.included and old is not None and old.included:
                left.append(DiffChange(key, item.entry_id, item.kind, old.tokens, "included", "excluded", item.reason))
        for key, old in before.items():
            if old.included and key not in now and not (pending and old.is_supplement):
                gone = (
                    ("no longer retrieved" if old.kind == "retrieval" else "no longer supplied")
                    if old.is_supplement
                    else "no longer in the context"
                )
                left.append(DiffChange(key, old.entry_id, old.kind, old.tokens, "included", "absent", f"{gone} (was: {old.reason})"))
        return PlanDiff(
            tuple(entered),
            tuple(left),
            previous.totals.estimated_input_tokens,
            self.totals.estimated_input_tokens,
            previous.mode,
            self.mode,
            pending,
        )

    def to_json(self) -> dict[str, Any]:
        """The manifest as JSON, metadata only (DS4's manifest rule: no message content)."""
        cal = self.awareness.calibration
        planning = self.plan.planning.to_json()
        planning["durationMs"] = round(self.duration_ms, 3)
        out: dict[str, Any] = {
            "agent": self.agent,
            "whatIf": self.what_if,
            "sessionId": self.session_id,
            "branchLeafId": self.leaf_id,
            "provider": self.profile.provider,
            "model": self.profile.model_id,
            "modelAssumed": self.model_assumed,
            "contextMode": self.config_mode,
            "contextWindow": self.budget.context_window,
            "outputReserve": self.budget.output_reserve,
            "hardInputLimit": self.budget.hard_input_limit,
            "targetInputTokens": self.budget.active_input_budget,
            "estimatedInputTokens": self.totals.estimated_input_tokens,
        }
        if self.provider_usage is not None:
            out["actualInputTokens"] = self.provider_usage.prompt_tokens
        if self.pi_context_tokens is not None:
            out["piReportedContextTokens"] = self.pi_context_tokens
        out["fixedTokensSource"] = self.fixed_source
        out["composition"] = self.totals.to_json()
        out["planning"] = planning
        out["budget"] = self.budget.to_json()
        out["modelAwareness"] = {
            "profileKey": self.awareness.profile_key,
            "overrideKeys": list(self.awareness.override_keys),
            "calibration": cal.to_json(),
            "adaptive": self.awareness.limits.to_json(),
        }
        out["rescuedPredecessor"] = self.rescued_predecessor.to_json() if self.rescued_predecessor else None
        out["oversizedTurnExclusions"] = [g.to_json() for g in self.oversized_exclusions]
        out["selectedGroups"] = [g.to_json() for g in self.selected_groups]
        out["excludedGroups"] = [g.to_json() for g in self.excluded_groups]
        out["retrievedEventIds"] = list(self.retrieved_entry_ids)
        out["pins"] = list(self.pinned_entry_ids)
        out["unmappedPins"] = list(self.unmapped_pins)
        out["included"] = [i.to_json() for i in self.items if i.included]
        out["excluded"] = [i.to_json() for i in self.items if not i.included]
        out["warnings"] = list(self.warnings)
        return out

def _group_ref(group: AtomicGroup, plan_kind: str, entry_ids: Sequence[str | None]) -> GroupRef:
    """The `GroupRef` of `group`; `entry_ids` are the planned messages' entry ids."""
    ids = tuple(dict.fromkeys(e for e in map(entry_ids.__getitem__, group.message_indices) if e))
    return GroupRef(group.id, group.kind, plan_kind, group.estimated_tokens, len(group.message_indices), ids)



_GROUP_AND_KIND = attrgetter("group_id", "kind")
_FIRST = itemgetter(0)  # a `PlanItem`'s `original_index` (its first field)
_TOKENS = attrgetter("tokens")
_new_manifest_item = partial(tuple.__new__, ManifestItem)
"""`ManifestItem` from one tuple of its fields, in C (as `ManifestItem._make` without its check)."""


class _Columns(NamedTuple):
    """Per planned message: manifest key, source entry id, role and context index (None for a
    supplement)."""

    keys: Sequence[str]
    entry_ids: Sequence[str | None]
    roles: Sequence[Any]
    ctx_index: Sequence[int | None]


def _native_columns(native: _Columns) -> _Columns:
    """The columns of a plan without supplements: a planned index is a native index."""
    return native


def _spliced_columns(
    indexed: _Columns, sources: Sequence[int | str], supplements: Sequence[SupplementalMessage]
) -> _Columns:
    """The columns of a plan with supplements spliced in (`ManagedContextPlan.planned_sources`:
    an int is a native index, a str a supplement id). A supplement's key is its id, its entry
    its first source id (spec §3.6 `sourceId`), its role its message's."""
    by_id = {s.id: s for s in supplements}
    keys: list[str] = []
    entry_ids: list[str | None] = []
    roles: list[Any] = []
    ctx_index: list[int | None] = []
    for source in sources:
        if isinstance(source, int):
            keys.append(indexed.keys[source])
            entry_ids.append(indexed.entry_ids[source])
            roles.append(indexed.roles[source])
            ctx_index.append(indexed.ctx_index[source])
        else:
            supplement = by_id[source]
            message = supplement.message
            keys.append(source)
            entry_ids.append(supplement.source_ids[0])
            roles.append(message.get("role") if isinstance(message, Mapping) else None)
            ctx_index.append(None)
    return _Columns(keys, entry_ids, roles, ctx_index)


def _message_items(
    entries: Sequence[Any], included: bool, columns: _Columns, pinned: set[str]
) -> list[ManifestItem]:
    """Manifest rows of the planner's `PlanItem`s (`entries`), in their order; `columns` are
    indexed by planned index.

    Built column by column with C-level zips and maps: a plan has one row per message, so this
    is the manifest's hot loop."""
    if not entries:
        return []
    pause_point()
    index, group_id, kind, tokens, score, reason = islice(zip(*entries), 6)
    pause_point()
    entry_id = list(map(columns.entry_ids.__getitem__, index))
    fields = zip(
        map(columns.keys.__getitem__, index),
        repeat(included),
        kind,
        entry_id,
        map(columns.roles.__getitem__, index),
        map(columns.ctx_index.__getitem__, index),
        group_id,
        tokens,
        score,
        reason,
        map(pinned.__contains__, entry_id),
    )
    return list(map(_new_manifest_item, fields))


def _totals(included: Sequence[ManifestItem], excluded: Sequence[ManifestItem]) -> PlanTotals:
    """Totals of a manifest's included and excluded items (a loop over the included ones only:
    the excluded ones, most of a long session, are summed in C)."""
    system = tool_tokens_ = tool_count = message_tokens_ = message_count = 0
    by_kind: dict[str, int] = {}
    for item in included:
        if item.kind == "system":
            system += item.tokens
        elif item.kind == "tool":
            tool_tokens_ += item.tokens
            tool_count += 1
        else:
            message_tokens_ += item.tokens
            message_count += 1
            by_kind[item.kind] = by_kind.get(item.kind, 0) + item.tokens
    return PlanTotals(
        system_tokens=system,
        tool_tokens=tool_tokens_,
        tool_count=tool_count,
        message_tokens=message_tokens_,
        message_count=message_count,
        estimated_input_tokens=system + tool_tokens_ + message_tokens_,
        excluded_tokens=sum(map(_TOKENS, excluded)),
        excluded_count=len(excluded),
        by_kind=by_kind,
    )
