"""Re-running DS4's managed planner on a live session and building its manifest (issue 3).

`LivePlanner.plan(snapshot, supplements=(), inputs=None)` runs `ds4core.planner.plan_managed_context`
on the snapshot's `PlannerInputs` (`ds4sessions.derive.inputs`: the one definition of native
messages, fixed tokens, pins, task and calibrated budget) and turns the result into a `PlanView`
(`ds4sessions.derive.manifest`). `LivePlanner.inputs(snapshot)` builds those inputs; the pipeline
(`ds4sessions.derive.pipeline`) builds them once per snapshot and hands them to every plan.

**Supplements** (spec §3.1, §3.6): `plan(snapshot, supplements)` splices the given
`SupplementalMessage`s (DS4's runtime order: pins, memories, retrieval results, project
snippets) before the current request, as DS4 sends them; the manifest then lists each one as an
item of its supplement kind (`retrieval`, ...) whose `entry_id` is its first source entry, with
the planner's score and reason, included or excluded for budget. The session itself only yields
historical retrieval (`ds4sessions.derive.retrieval`); persistent pins, memory and project snippets live
in DS4's database and the cache-aware policy needs DS4's previous-request state: neither is
reconstructed here.

Incremental (issue 3: one appended entry must not re-tokenize or re-group the whole session):
the inputs builder extends its per-message facts when the next snapshot only appends to the
context (the Pi reader hands out the same dict for an entry on every rebuild; rebuilt summary
dicts compare equal). The planner's `AtomicGrouper` then regroups only the new messages, and
unchanged groups keep their explain-panel references. What remains O(n) per plan is one
`PlanItem` and one manifest row per message (their scores depend on the message count, so they
change with every append) and C-level prefix comparisons. Anything else (a compaction, a branch
switch) re-indexes the context, still reusing the per-message estimates of messages seen in the
previous plan (`PlanView.estimated_messages` counts the misses). A plan with supplements groups
the spliced array with its own `AtomicGrouper` (kept between supplemented plans: it extends when
the previous spliced array, supplements included, is a prefix of the new one, else regroups from
scratch), so alternating nominal and supplemented plans of one snapshot never cost the nominal
plan its incremental grouping. Timings are in docs/performance.md.

The manifest shapes (`PlanView`, `ManifestItem`, ...) and the slash-command text
(`tokens_lines`, `explain_lines`) are re-exported here for existing imports.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ds4core.lazy import Lazy
from ds4core.pause import pausing
from ds4core.budgets import ContextConfig
from ds4core.config import Ds4Config
from ds4core.planner import (
    AtomicGroup,
    AtomicGrouper,
    ManagedContextPlan,
    SupplementalMessage,
    is_pin_label,
    plan_managed_context,
)

from ds4sessions.agents.pi.entries import CONTEXT_TYPES
from ds4sessions.ingest.diagnostics import Problem
from ds4sessions.runtime import paused_gc
from ds4sessions.derive.ds4config import LoadedDs4Config
from ds4sessions.derive.explain import explain_lines, tokens_lines
from ds4sessions.derive.inputs import InputsBuilder, PlannerInputs
from ds4sessions.derive.manifest import (
    LazyItems,
    _GROUP_AND_KIND,
    PI_EXCLUDED_REASON,
    SUPPLEMENT_KINDS,
    SYSTEM_SOURCE,
    DiffChange,
    GroupRef,
    ManifestItem,
    PlanDiff,
    PlanTotals,
    PlanView,
    _group_ref,
    _message_items,
    _native_columns,
    _spliced_columns,
)

__all__ = [
    "PI_EXCLUDED_REASON",
    "SUPPLEMENT_KINDS",
    "DiffChange",
    "GroupRef",
    "LivePlanner",
    "ManifestItem",
    "PlanDiff",
    "PlanTotals",
    "PlanView",
    "PlannerInputs",
    "explain_lines",
    "is_pin_label",
    "tokens_lines",
]


class _PiExcludedRows:
    """Manifest rows of the session entries Pi's context leaves out, kept between plans.

    While the reader is the same (`PiSession.identity`: a frozen copy counts as its reader), the pins are the same and the new context's entry ids extend
    the previous ones, an update scans only the entries read since (and drops the rows of
    entries that joined the context); anything else rescans the whole file's entries."""

    def __init__(self) -> None:
        self._reset(None, frozenset())

    def _reset(self, reader: Any, pinned: frozenset[str]) -> None:
        self._reader, self._pinned = getattr(reader, "identity", id(reader)), pinned
        self._scanned = 0  # reader entries looked at
        self._context_ids: list[str] = []
        # Every context entry id, kept only once the session has a duplicate id (issue 32: a set
        # of every context id was ~50 bytes a message). Without one, an entry read since the
        # last update is in the context exactly when its id is among the new context ids: the
        # earlier ones are ids of entries read before it.
        self._in_context: set[str] | None = None
        self._ids: set[str] = set()  # entry ids of `rows`
        self.rows: list[ManifestItem] = []

    def update(self, reader: Any, context_ids: Sequence[str], pinned: frozenset[str]) -> list[ManifestItem]:
        """The rows for `reader`'s entries (file order) given the context's entry ids and the
        pinned entry ids."""
        known = len(self._context_ids)
        if not (
            getattr(reader, "identity", id(reader)) == self._reader
            and pinned == self._pinned
            and len(reader.entries) >= self._scanned
            and list(context_ids[:known]) == self._context_ids
        ):
            self._reset(reader, pinned)
            known = 0
        joined = set(context_ids[known:])
        if self._in_context is None and _has_duplicate_ids(reader):
            self._in_context = set(context_ids[:known])
        if self._in_context is not None:
            self._in_context |= joined
        in_context = self._in_context if self._in_context is not None else joined
        self._context_ids.extend(context_ids[known:])
        if not joined.isdisjoint(self._ids):
            self.rows = [row for row in self.rows if row.entry_id not in joined]
            self._ids -= joined
        entries = list(reader.entries[self._scanned :])
        self._scanned += len(entries)
        for entry in entries:
            if entry.type in CONTEXT_TYPES and entry.id is not None and entry.id not in in_context:
                role = entry.role if entry.type == "message" else entry.type
                self.rows.append(
                    ManifestItem(f"{entry.id}#0", False, "pi-excluded", entry.id, role, None, None, 0, None, PI_EXCLUDED_REASON, entry.id in pinned)
                )
                self._ids.add(entry.id)
        return self.rows


def _has_duplicate_ids(reader: Any) -> bool:
    """True unless `reader`'s diagnostics say no entry id was read twice (a reader without
    Pi's diagnostics counts as having one)."""
    diagnostics = getattr(reader, "diagnostics", None)
    count = getattr(diagnostics, "count", None)
    return count is None or count(Problem.DUPLICATE_ID) != 0


class LivePlanner:
    """Re-plans a live session with DS4's planner, reusing work between consecutive plans.

    Kept between calls, for the latest plan's context only: the inputs builder (per-message
    estimates, roles, manifest keys, running estimates for calibration, system replay), the
    planner's `AtomicGrouper` and the explain panel's group references (one grouper and one set
    of references for nominal plans, another for plans with supplements). When a snapshot only
    appends to the previous one, a re-plan handles the new messages and what they touch, plus
    one O(n) pass building the plan's and the manifest's rows (their scores move with every
    append).

    `config` is the user's DS4 configuration (default: DS4's defaults, no warnings). One
    instance per session (or reuse it: the caches only keep the latest plan's context). Not
    thread-safe; call it from the worker that owns the snapshots.
    """

    def __init__(self, config: LoadedDs4Config | None = None, *, context: ContextConfig | None = None) -> None:
        """Plan with `config` (see `ds4sessions.derive.ds4config.load_ds4_config`); `context`
        replaces its `context` section (DS4's `ContextConfig`, e.g. a retrieval budget)."""
        self.config = config or LoadedDs4Config(Ds4Config())
        self._builder = InputsBuilder(self.config, context=context)
        self._context = self._builder.context
        # Per plan kind (False: nominal, True: with supplements): the grouper and the explain
        # panel's group references by id(group).
        self._groupers = {False: AtomicGrouper(), True: AtomicGrouper()}
        self._refs: dict[bool, dict[int, tuple[AtomicGroup, GroupRef]]] = {False: {}, True: {}}
        self._pi_excluded = _PiExcludedRows()

    @property
    def nominal_grouper(self) -> AtomicGrouper:
        """The kept grouping of the plans without supplements (issue 32: the cache monitor's
        candidate plans of such a plan group the same messages with the same estimates, so they
        share it instead of holding a second grouping of every message; `AtomicGrouper.update`
        is then a prefix comparison)."""
        return self._groupers[False]

    @property
    def estimates(self) -> int:
        """Messages estimated so far (cache misses), over all plans."""
        return self._builder.estimates

    def inputs(self, snapshot: Any) -> PlannerInputs:
        """The planner inputs of `snapshot` (`ds4sessions.derive.inputs.InputsBuilder.build`)."""
        inputs = self._builder.build(snapshot)
        if not inputs.extended:
            self._refs = {False: {}, True: {}}  # group references name entry ids of the previous context
        return inputs

    def plan(
        self, snapshot: Any, supplements: Sequence[SupplementalMessage] = (), inputs: PlannerInputs | None = None,
        checkpoint: Callable[[], None] | None = None,
    ) -> PlanView:
        """Plan the next request of `snapshot` (a `ds4sessions.agents.pi.live.Snapshot`) with
        `supplements` spliced in before the current request (spec §3.1; DS4's runtime order:
        pins, memories, retrieval results, project snippets), e.g.
        `ds4sessions.derive.retrieval.RetrievalView.supplements`. The supplement pass (spec §3.6)
        fits them under their category caps (`maxRetrievedHistoryTokens`, ...) and the input
        budget; the manifest lists each one, included or excluded.

        `inputs` are the snapshot's planner inputs (`self.inputs(snapshot)`, built here when
        None). Returns a managed plan or the planner's explicit fallback
        (`PlanView.fallback_reason`; a fallback sends the native messages only, spec §3.11).
        Never raises for session content; configuration problems are in `warnings`.
        `checkpoint`, when given, is called between DS4's plan and the manifest's rows (the
        derive worker waits there while a newer snapshot paints: `SessionPipeline.derive`).
        """
        with paused_gc():  # the manifest adds a row per message to the planner's items
            started = time.perf_counter()
            if inputs is None:
                inputs = self.inputs(snapshot)
            return self._plan(snapshot, tuple(supplements), inputs, started, checkpoint)

    def _plan(
        self, snapshot: Any, supplements: tuple[SupplementalMessage, ...], inputs: PlannerInputs, started: float,
        checkpoint: Callable[[], None] | None = None,
    ) -> PlanView:
        ctx = snapshot.context
        planner_started = time.perf_counter()
        plan = plan_managed_context(
            inputs.planner_messages(),
            fixed_tokens=inputs.fixed_tokens,
            budget=inputs.budget,
            config=inputs.config,
            pinned_message_indices=list(inputs.pins),
            supplemental_messages=supplements,
            native_tokens=inputs.planner_tokens(),
            grouper=self._groupers[bool(supplements)],
        )
        planner_ms = (time.perf_counter() - planner_started) * 1000
        if checkpoint is not None:
            checkpoint()

        manifest, groups = self._items(snapshot, plan, inputs, supplements)
        provider = snapshot.provider
        awareness = inputs.awareness
        return PlanView(
            plan=plan,
            manifest=manifest,
            config_mode=self._context.mode,
            config_enabled=self.config.config.enabled,
            session_id=snapshot.session.session_id,
            leaf_id=ctx.leaf_id,
            model_key=snapshot.model_key,
            model_assumed=inputs.model_assumed,
            profile=awareness.profile,
            budget=inputs.budget,
            awareness=awareness,
            fixed_tokens=inputs.fixed_tokens,
            fixed_source=inputs.fixed_source,
            calibration_samples=inputs.calibration_samples,
            group_refs=groups,
            pinned_entry_ids=inputs.pinned_entry_ids,
            unmapped_pins=inputs.unmapped_pins,
            provider_usage=inputs.provider_usage,
            pi_context_tokens=provider.context_tokens if provider is not None else None,
            duration_ms=(time.perf_counter() - started) * 1000,
            planner_ms=planner_ms,
            estimated_messages=inputs.estimated_messages,
            warnings=inputs.warnings,
            version=snapshot.version,
            supplements=supplements,
            agent=snapshot.agent,
            what_if=not snapshot.capabilities.ds4_exact,
            inputs=inputs,
        )

    def _items(
        self,
        snapshot: Any,
        plan: ManagedContextPlan,
        inputs: PlannerInputs,
        supplements: tuple[SupplementalMessage, ...],
    ) -> tuple[LazyItems, Lazy[dict[str, tuple[GroupRef, ...]]]]:
        """The manifest items (the included ones in sent order, then the excluded ones: the
        planner's, then Pi's) and the group references for the explain panel, both made when
        first read (`LazyItems`, `Lazy`: one `ManifestItem` per message and one `GroupRef`
        per group, ~2.5 ms of every re-plan at 1,000 groups, read only by the manifest tab, the
        explain panel and `plan --json`; the map's marks read `excluded_entry_ids`, answered
        without them)."""
        ctx = snapshot.context
        pinned = set(inputs.pinned_entry_ids)
        included: list[ManifestItem] = []
        fixed_source = inputs.fixed_source
        if fixed_source == "system":
            # (DS4's own words for Pi; another agent's what-if names that agent)
            who = _label(snapshot.agent)
            included.append(
                ManifestItem(SYSTEM_SOURCE, True, "system", None, "system", None, None, inputs.system_tokens, None,
                             f"{who} effective system prompt")
            )
            for name, tokens in inputs.tools:
                included.append(
                    ManifestItem(f"tool:{name}", True, "tool", None, None, None, None, tokens, None,
                                 f"Active {who} tool from the session's system messages")
                )
        elif fixed_source == "inferred":
            included.append(
                ManifestItem(
                    SYSTEM_SOURCE, True, "system", None, "system", None, None, inputs.fixed_tokens, None,
                    "Pi system prompt and tools, inferred from the first reply's usage (no system message in the session)",
                )
            )

        sources = plan.planned_sources
        spliced = len(sources) != len(inputs.messages)  # supplements kept (managed mode)
        native = inputs.columns
        columns = _spliced_columns(native, sources, supplements) if spliced else _native_columns(native)
        pi_rows = tuple(self._pi_excluded.update(snapshot.session, ctx.context_entry_ids, frozenset(pinned)))
        head = tuple(included)

        def make_items() -> tuple[ManifestItem, ...]:
            return (*head, *_message_items(plan.selected, True, columns, pinned),
                    *_message_items(plan.excluded, False, columns, pinned), *pi_rows)

        manifest = LazyItems(
            make_items, selected=plan.selected, excluded=plan.excluded,
            entry_ids=columns.entry_ids, ctx_index=columns.ctx_index, pi_rows=pi_rows,
        )
        previous_refs = self._refs[bool(supplements)]
        memo = self._refs
        key = bool(supplements)

        def make_groups() -> dict[str, tuple[GroupRef, ...]]:
            refs, groups = _group_refs(plan, columns, sources, spliced, previous_refs)
            if memo is self._refs:  # not reset meanwhile (a new context)
                memo[key] = refs
            return {kind: tuple(refs_of_kind) for kind, refs_of_kind in groups.items()}

        return manifest, Lazy(make_groups)


def _group_refs(
    plan: ManagedContextPlan,
    columns: Any,
    sources: Sequence[Any],
    spliced: bool,
    previous_refs: dict[int, tuple[AtomicGroup, GroupRef]],
) -> tuple[dict[int, tuple[AtomicGroup, GroupRef]], dict[str, list[GroupRef]]]:
    """(the refs memo by group identity, the explain panel's group lists: selected, excluded,
    rescued, oversized) of `plan`; a group whose object and kind are unchanged since the
    previous plan keeps its `GroupRef` (`previous_refs`)."""
    selected_kinds = dict(map(_GROUP_AND_KIND, plan.selected))
    kind_of = {**dict(map(_GROUP_AND_KIND, plan.excluded)), **selected_kinds}
    groups: dict[str, list[GroupRef]] = {"selected": [], "excluded": [], "rescued": [], "oversized": []}
    tail_limit = plan.planning.recent_tail_token_limit
    rescue_reason = "Immediate-predecessor turn rescued"
    rescued_group = (
        next((e.group_id for e in plan.selected if e.reason.startswith(rescue_reason)), None)
        if plan.planning.rescued_immediate_predecessor
        else None
    )
    refs: dict[int, tuple[AtomicGroup, GroupRef]] = {}
    for group in pausing(plan.groups):
        plan_kind = kind_of.get(group.id, group.kind)
        cached = previous_refs.get(id(group))
        if cached is None or cached[0] is not group:
            ref = _group_ref(group, plan_kind, columns.entry_ids)
        else:
            ref = cached[1] if cached[1].plan_kind == plan_kind else cached[1]._replace(plan_kind=plan_kind)
        refs[id(group)] = (group, ref)
        if group.id in selected_kinds:
            groups["selected"].append(ref)
        else:
            groups["excluded"].append(ref)
            if (
                tail_limit > 0
                and group.kind == "turn"
                and group.estimated_tokens >= tail_limit
                and plan.mode == "managed"
                and not (spliced and isinstance(sources[group.start_index], str))  # spec §3.12
            ):
                groups["oversized"].append(ref)
        if group.id == rescued_group:
            groups["rescued"].append(ref)
    return refs, groups


def _label(agent: str) -> str:
    """The label of the agent `agent` (its id when the registry does not know it)."""
    from ds4sessions.agents.registry import agent_named

    found = agent_named(agent)
    return getattr(found, "label", agent) if found is not None else agent
