"""Re-running DS4's managed planner on a live session, and its manifest (issue 3).

`LivePlanner.plan(snapshot)` feeds `ds4core.planner.plan_managed_context` with what DS4's runtime
would have at the next request of the session on screen:

- **messages**: the Pi context builder's messages (`snapshot.context.messages`) minus the `system`
  messages, which Pi 1.x stores in the session but DS4 counts as fixed tokens;
- **fixed tokens** (spec §1.3): `text(system prompt) + 8` plus `text(stableStringify(tool)) + 12`
  per active tool, from the in-order replay of the `system` messages (`content`, then `sections`
  in order, joined by blank lines; `toolsAdded` / `toolsRemoved`). Without any system message
  (Pi 0.x sessions) they are inferred from the first reply after the latest compaction:
  its prompt tokens minus the estimate of the messages before it (provider tokens, an
  approximation), else 0;
- **pins** (spec §5.1): Pi labels whose trimmed text matches `/^ds4:pin(\\s|$)/i` (labels resolve
  over the whole file, the last one per target wins); the labelled entry's messages in the
  context are pinned. Labels on entries outside the context (another branch, compacted away)
  are reported in `PlanView.unmapped_pins`;
- **calibration samples** (spec §1.4 step 9): the newest `calibrationWindow` replies after the
  latest compaction that are not errors or aborts and have non-zero prompt tokens: `actualInputTokens = input + cacheRead +
  cacheWrite`, `estimatedTokens` = fixed tokens at that point + the `chars-v1` estimate of the
  messages before it (what an observing DS4 would have estimated), newest first;
- **budget**: the session's model (`snapshot.model`) through `resolve_model_awareness` and
  `calculate_context_budget`, with the user's DS4 configuration (`ds4sessions.derive.ds4config`). An
  unknown model is planned with Pi's default limits (128,000-token window, 16,384 output) and a
  warning.

**Supplements** (spec §3.1, §3.6): `plan(snapshot, supplements)` splices the given
`SupplementalMessage`s (DS4's runtime order: pins, memories, retrieval results, project
snippets) before the current request, as DS4 sends them; the manifest then lists each one as an
item of its supplement kind (`retrieval`, ...) whose `entry_id` is its first source entry, with
the planner's score and reason, included or excluded for budget. The session itself only yields
historical retrieval (`ds4sessions.derive.retrieval`); persistent pins, memory and project snippets live
in DS4's database and the cache-aware policy needs DS4's previous-request state: neither is
reconstructed here.

Incremental (issue 3: one appended entry must not re-tokenize or re-group the whole session):
`LivePlanner` keeps the latest context's per-message facts (estimates, roles, manifest keys,
running estimates for calibration, the system-message replay) and extends them when the next
snapshot only appends to that context (the Pi reader hands out the same dict for an entry on
every rebuild; rebuilt summary dicts compare equal). The planner's `AtomicGrouper` then regroups
only the new messages, and unchanged groups keep their explain-panel references. What remains
O(n) per plan is one `PlanItem` and one manifest row per message (their scores depend on the
message count, so they change with every append) and C-level prefix comparisons. Anything
else (a compaction, a branch switch) re-indexes the context, still reusing the per-message
estimates of messages seen in the previous plan (`PlanView.estimated_messages` counts the
misses). A plan with supplements groups the spliced array with its own `AtomicGrouper` (kept
between supplemented plans: it extends when the previous spliced array, supplements included, is
a prefix of the new one, else regroups from scratch), so alternating nominal and supplemented
plans of one snapshot never cost the nominal plan its incremental grouping. Timings are in
docs/performance.md.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from functools import partial
from itertools import islice, repeat
from operator import attrgetter
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from ds4core.budgets import (
    ContextBudget,
    ModelCost,
    ModelDescriptor,
    ModelProfile,
    ResolvedModelAwareness,
    calculate_context_budget,
    resolve_model_awareness,
)
from ds4core.config import Ds4Config
from ds4core.estimate import message_tokens, system_prompt_tokens, tool_tokens
from ds4core.models import DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_TOKENS, ModelInfo
from ds4core.planner import (
    AtomicGroup,
    AtomicGrouper,
    ManagedContextPlan,
    SupplementalMessage,
    paused_gc,
    plan_managed_context,
)
from ds4core.usage import Usage, is_valid_measurement, usage_of

from ds4sessions.derive.ds4config import LoadedDs4Config
from ds4sessions.agents.pi.entries import CONTEXT_TYPES

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
    "explain_lines",
    "is_pin_label",
    "tokens_lines",
]

PIN_LABEL = re.compile(r"^ds4:pin(\s|$)", re.IGNORECASE)
PI_EXCLUDED_REASON = "Excluded by Pi branch/compaction context reconstruction"
"""DS4's manifest reason for session entries Pi's context builder leaves out (spec §7.1)."""
SYSTEM_SOURCE = "pi:system-prompt"
SUPPLEMENT_KINDS = frozenset({"memory", "retrieval", "project"})
"""Kinds of the budget-fitted supplements (spec §3.6); a persistent pin supplement is a `pin`."""
_SUPPLEMENT_PREFIXES = ("pin:", "memory:", "retrieval:", "project:")

ItemState = Literal["included", "excluded", "absent"]


def is_pin_label(label: str | None) -> bool:
    """True for a DS4 labelled pin: the trimmed label matches `/^ds4:pin(\\s|$)/i` (spec §5.1)."""
    return isinstance(label, str) and PIN_LABEL.match(label.strip()) is not None


# ---------------------------------------------------------------------------------------------
# Manifest shapes


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
    items: tuple[ManifestItem, ...]
    totals: PlanTotals
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
    rescued_predecessor: GroupRef | None
    oversized_exclusions: tuple[GroupRef, ...]
    selected_groups: tuple[GroupRef, ...]
    excluded_groups: tuple[GroupRef, ...]
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

    @property
    def excluded_entry_ids(self) -> frozenset[str]:
        """Entry ids none of whose messages is sent (for dimming on the map). An entry quoted by
        sent retrieval evidence stays here (its message is not sent; see
        `retrieved_entry_ids`)."""
        sent = {i.entry_id for i in self.items if i.included and i.entry_id and i.message_index is not None}
        return frozenset(i.entry_id for i in self.items if not i.included and i.entry_id and i.entry_id not in sent)

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
        """What entered or left the sent context since `previous` (None: a first plan)."""
        now = {i.key: i for i in self.items}
        pending = self.retrieval_pending
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


# ---------------------------------------------------------------------------------------------
# Inputs


def _value_key(message: Mapping[str, Any]) -> tuple[Any, ...]:
    # Scalars by value, containers and strings by identity: a rebuilt summary dict whose fields
    # are the same objects (and timestamp) gets the same key.
    return tuple(
        (k, v if v is None or isinstance(v, (bool, int, float)) else id(v)) for k, v in message.items()
    )


class _TokenCache:
    """chars-v1 estimates per message, kept for the messages of the latest plan only."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[int, Any]] = {}
        self._by_value: dict[tuple[Any, ...], tuple[int, Any]] = {}
        self.misses = 0

    def estimate(self, messages: Sequence[Any]) -> list[int]:
        """Estimates of `messages`; the cache then holds these messages only."""
        by_id: dict[int, tuple[int, Any]] = {}
        by_value: dict[tuple[Any, ...], tuple[int, Any]] = {}
        out = self._estimate(messages, by_id, by_value)
        self._by_id, self._by_value = by_id, by_value
        return out

    def extend(self, messages: Sequence[Any]) -> list[int]:
        """Estimates of messages appended to the latest ones; the cache holds both."""
        return self._estimate(messages, self._by_id, self._by_value)

    def _estimate(
        self,
        messages: Sequence[Any],
        by_id: dict[int, tuple[int, Any]],
        by_value: dict[tuple[Any, ...], tuple[int, Any]],
    ) -> list[int]:
        out: list[int] = []
        for message in messages:
            hit = self._by_id.get(id(message))
            if hit is None or hit[1] is not message:
                key = _value_key(message) if isinstance(message, dict) else None
                hit = self._by_value.get(key) if key is not None else None
                if hit is None:
                    self.misses += 1
                    hit = (message_tokens(message), message)
                if key is not None:
                    by_value[key] = hit
            by_id[id(message)] = (hit[0], message)
            out.append(hit[0])
        return out


@dataclass
class _SystemReplay:
    """In-order replay of Pi 1.x `system` messages: prompt parts and active tools."""

    content: str = ""
    sections: dict[str, str] = field(default_factory=dict)
    tools: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    seen: bool = False

    def apply(self, message: Mapping[str, Any]) -> None:
        self.seen = True
        content = message.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            text = "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
        else:
            text = ""
        if text:
            self.content = text
        sections = message.get("sections")
        if isinstance(sections, Mapping):
            for name, value in sections.items():
                if value is None:
                    self.sections.pop(name, None)
                elif isinstance(value, str):
                    self.sections[name] = value
        for tool in message.get("toolsRemoved") or ():
            if isinstance(tool, Mapping):
                self.tools.pop(str(tool.get("name")), None)
        for tool in message.get("toolsAdded") or ():
            if isinstance(tool, Mapping):
                self.tools[str(tool.get("name"))] = tool

    @property
    def prompt(self) -> str:
        return "\n\n".join(part for part in (self.content, *self.sections.values()) if part)

    def fixed(self) -> int:
        return system_prompt_tokens(self.prompt) + sum(tool_tokens(t) for t in self.tools.values())


class _ContextIndex:
    """Per-message facts of the latest planned context, kept by a `LivePlanner` between plans.

    `update(ctx, reader)` extends the index in place when the new context only appends to the
    indexed one (the indexed messages, entry ids and branch are a prefix of the new ones, same
    first context entry): a live session's tail update then costs O(new messages). Anything else
    (a compaction, a branch switch, an edit) re-indexes from scratch.
    """

    def __init__(self, cache: _TokenCache) -> None:
        self._cache = cache
        self.reset()

    def reset(self) -> None:
        """Forget the indexed context."""
        self.messages: list[dict[str, Any]] = []  # the context messages
        self.entry_ids: list[str | None] = []
        self.branch: list[str] = []
        self.first_entry: str | None = None
        self.native: list[dict[str, Any]] = []  # the non-system messages: what DS4 plans
        self.tokens: list[int] = []  # chars-v1 estimate per native message
        # Per native message: manifest key, entry id, role and context index.
        self.keys: list[str] = []
        self.native_entry_ids: list[str | None] = []
        self.roles: list[Any] = []
        self.native_to_ctx: list[int] = []
        self.before: list[int] = []  # per context message: estimate of the native messages before it
        self.replay = _SystemReplay()  # system messages replayed so far
        self.system_at: list[tuple[int, int]] = []  # (context index, fixed tokens after that message)
        self.first_fresh = 0
        self._occurrence: dict[str | None, int] = {}
        self._running = 0
        self._measurements: dict[int, Usage | None] = {}  # context index -> usage, filled on demand

    def update(self, ctx: Any, reader: Any) -> bool:
        """Index `ctx` (a `SessionContext` of `reader`'s session); True when the previous index
        was extended rather than rebuilt."""
        messages, entry_ids, branch = ctx.messages, ctx.message_entry_ids, ctx.branch_entry_ids
        first = ctx.context_entry_ids[0] if ctx.context_entry_ids else None
        start = len(self.messages)
        extended = (
            start > 0
            and len(messages) >= start
            and first == self.first_entry
            and self.entry_ids == entry_ids[:start]
            and self.branch == branch[: len(self.branch)]
            and self.messages == messages[:start]
        )
        if not extended:
            self.reset()
            start = 0
        new_native = [m for m in messages[start:] if m.get("role") != "system"]
        tokens = iter((self._cache.extend if extended else self._cache.estimate)(new_native))
        for index in range(start, len(messages)):
            message, entry_id = messages[index], entry_ids[index]
            n = self._occurrence.get(entry_id, 0)
            self._occurrence[entry_id] = n + 1
            self.before.append(self._running)
            role = message.get("role")
            if role == "system":
                self.replay.apply(message)
                self.system_at.append((index, self.replay.fixed()))
                continue
            estimate = next(tokens)
            self._running += estimate
            self.native.append(message)
            self.tokens.append(estimate)
            self.keys.append(f"{entry_id}#{n}" if entry_id is not None else f"@{index}")
            self.native_entry_ids.append(entry_id)
            self.roles.append(role)
            self.native_to_ctx.append(index)
        self.messages.extend(messages[start:])
        self.entry_ids.extend(entry_ids[start:])
        self.branch, self.first_entry = list(branch), first
        if not extended or self.first_fresh >= start:
            self.first_fresh = _first_fresh(ctx, reader)
        return extended

    def measurement(self, index: int) -> Usage | None:
        """The usage of context message `index` when it is a valid measurement (an assistant
        reply with non-zero usage, not aborted or an error), else None; parsed once per index."""
        if index not in self._measurements:
            message = self.messages[index]
            self._measurements[index] = usage_of(message) if is_valid_measurement(message) else None
        return self._measurements[index]


class _PiExcludedRows:
    """Manifest rows of the session entries Pi's context leaves out, kept between plans.

    While the reader is the same, the pins are the same and the new context's entry ids extend
    the previous ones, an update scans only the entries read since (and drops the rows of
    entries that joined the context); anything else rescans the whole file's entries."""

    def __init__(self) -> None:
        self._reset(None, frozenset())

    def _reset(self, reader: Any, pinned: frozenset[str]) -> None:
        self._reader, self._pinned = reader, pinned
        self._scanned = 0  # reader entries looked at
        self._context_ids: list[str] = []
        self._in_context: set[str] = set()
        self._ids: set[str] = set()  # entry ids of `rows`
        self.rows: list[ManifestItem] = []

    def update(self, reader: Any, context_ids: Sequence[str], pinned: frozenset[str]) -> list[ManifestItem]:
        """The rows for `reader`'s entries (file order) given the context's entry ids and the
        pinned entry ids."""
        known = len(self._context_ids)
        if not (
            reader is self._reader
            and pinned == self._pinned
            and len(reader.entries) >= self._scanned
            and list(context_ids[:known]) == self._context_ids
        ):
            self._reset(reader, pinned)
            known = 0
        joined = set(context_ids[known:])
        self._context_ids.extend(context_ids[known:])
        self._in_context |= joined
        if not joined.isdisjoint(self._ids):
            self.rows = [row for row in self.rows if row.entry_id not in joined]
            self._ids -= joined
        entries = list(reader.entries[self._scanned :])
        self._scanned += len(entries)
        for entry in entries:
            if entry.type in CONTEXT_TYPES and entry.id is not None and entry.id not in self._in_context:
                role = entry.role if entry.type == "message" else entry.type
                self.rows.append(
                    ManifestItem(f"{entry.id}#0", False, "pi-excluded", entry.id, role, None, None, 0, None, PI_EXCLUDED_REASON, entry.id in pinned)
                )
                self._ids.add(entry.id)
        return self.rows


def _first_fresh(ctx: Any, reader: Any) -> int:
    """Index of the first context message recorded after the latest compaction (0 if none)."""
    if not ctx.context_entry_ids:
        return 0
    first = reader.by_id.get(ctx.context_entry_ids[0])
    if first is None or first.type != "compaction":
        return 0
    position = {eid: i for i, eid in enumerate(ctx.branch_entry_ids)}
    cut = position.get(first.id, -1)
    for i, eid in enumerate(ctx.message_entry_ids):
        if eid is not None and position.get(eid, -1) > cut:
            return i
    return len(ctx.messages)


def _descriptor(model: ModelInfo | None, key: str | None) -> tuple[ModelDescriptor, bool]:
    if model is not None and model.context_window > 0:
        pricing = model.pricing
        return (
            ModelDescriptor(
                provider=model.provider,
                id=model.id,
                context_window=model.context_window,
                max_tokens=model.max_tokens,
                reasoning=model.reasoning,
                input=tuple(model.inputs),
                cost=ModelCost(pricing.input, pricing.output, pricing.cache_read, pricing.cache_write)
                if pricing is not None
                else None,
            ),
            False,
        )
    provider, _, model_id = (key or "unknown/unknown").partition("/")
    return ModelDescriptor(provider, model_id or "unknown", DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_TOKENS), True


def _group_ref(group: AtomicGroup, plan_kind: str, entry_ids: Sequence[str | None]) -> GroupRef:
    """The `GroupRef` of `group`; `entry_ids` are the planned messages' entry ids."""
    ids = tuple(dict.fromkeys(e for e in map(entry_ids.__getitem__, group.message_indices) if e))
    return GroupRef(group.id, group.kind, plan_kind, group.estimated_tokens, len(group.message_indices), ids)


# ---------------------------------------------------------------------------------------------
# The live planner


class LivePlanner:
    """Re-plans a live session with DS4's planner, reusing work between consecutive plans.

    Kept between calls, for the latest plan's context only: per-message estimates, the context
    index (roles, manifest keys, running estimates for calibration, system replay), the planner's
    `AtomicGrouper` and the explain panel's group references (one grouper and one set of
    references for nominal plans, another for plans with supplements). When a snapshot only
    appends to the previous one, a re-plan handles the new messages and what they touch, plus
    one O(n) pass building the plan's and the manifest's rows (their scores move with every
    append).

    `config` is the user's DS4 configuration (default: DS4's defaults, no warnings). One
    instance per session (or reuse it: the caches only keep the latest plan's context). Not
    thread-safe; call `plan` from the worker that owns the snapshots.
    """

    def __init__(self, config: LoadedDs4Config | None = None) -> None:
        """Plan with `config` (see `ds4sessions.derive.ds4config.load_ds4_config`)."""
        self.config = config or LoadedDs4Config(Ds4Config())
        self._context = self.config.context
        self._awareness = self.config.awareness
        self._cache = _TokenCache()
        self._index = _ContextIndex(self._cache)
        # Per plan kind (False: nominal, True: with supplements): the grouper and the explain
        # panel's group references by id(group).
        self._groupers = {False: AtomicGrouper(), True: AtomicGrouper()}
        self._refs: dict[bool, dict[int, tuple[AtomicGroup, GroupRef]]] = {False: {}, True: {}}
        self._pi_excluded = _PiExcludedRows()

    @property
    def estimates(self) -> int:
        """Messages estimated so far (cache misses), over all plans."""
        return self._cache.misses

    def plan(self, snapshot: Any, supplements: Sequence[SupplementalMessage] = ()) -> PlanView:
        """Plan the next request of `snapshot` (a `ds4sessions.ingest.live.Snapshot`) with
        `supplements` spliced in before the current request (spec §3.1; DS4's runtime order:
        pins, memories, retrieval results, project snippets), e.g.
        `ds4sessions.derive.retrieval.RetrievalView.supplements`. The supplement pass (spec §3.6)
        fits them under their category caps (`maxRetrievedHistoryTokens`, ...) and the input
        budget; the manifest lists each one, included or excluded.

        Returns a managed plan or the planner's explicit fallback (`PlanView.fallback_reason`;
        a fallback sends the native messages only, spec §3.11). Never raises for session
        content; configuration problems are in `warnings`.
        """
        with paused_gc():  # the manifest adds a row per message to the planner's items
            return self._plan(snapshot, tuple(supplements))

    def _plan(self, snapshot: Any, supplements: tuple[SupplementalMessage, ...]) -> PlanView:
        started = time.perf_counter()
        misses_before = self._cache.misses
        ctx = snapshot.context
        messages: list[dict[str, Any]] = ctx.messages
        warnings = list(self.config.warnings)
        if not self.config.config.enabled:
            warnings.append("DS4 is disabled in the configuration (enabled: false); showing the plan it would make")
        if self._context.cache_aware.mode == "auto":
            warnings.append("context.cacheAware.mode is auto: the cache-aware tail needs DS4's request history; the nominal plan is shown")

        index = self._index
        if not index.update(ctx, snapshot.reader):
            self._refs = {False: {}, True: {}}  # group references name entry ids of the previous context
        fixed, fixed_source, samples = self._fixed_and_samples(messages, index)
        pins, pinned_ids, unmapped = self._pins(ctx.labels, index.entry_ids, index.native_to_ctx)

        descriptor, assumed = _descriptor(snapshot.model, snapshot.model_key)
        if assumed:
            what = f"model {snapshot.model_key} is not in the model table" if snapshot.model_key else "the session names no model"
            warnings.append(
                f"{what}: planned with Pi's default limits ({DEFAULT_CONTEXT_WINDOW:,}-token window, "
                f"{DEFAULT_MAX_TOKENS:,} output)"
            )
        try:
            awareness = resolve_model_awareness(descriptor, self._context, self._awareness, samples)
        except ValueError as exc:
            warnings.append(f"model overrides rejected ({exc}); planned with DS4's defaults")
            awareness = resolve_model_awareness(descriptor, self._context, type(self._awareness)(), samples)
        budget = calculate_context_budget(awareness.profile, self._context, awareness.calibration)

        planner_started = time.perf_counter()
        plan = plan_managed_context(
            index.native,
            fixed_tokens=fixed,
            budget=budget,
            config=awareness.context_config,
            pinned_message_indices=pins,
            supplemental_messages=supplements,
            native_tokens=index.tokens,
            grouper=self._groupers[bool(supplements)],
        )
        planner_ms = (time.perf_counter() - planner_started) * 1000

        included, excluded, groups = self._items(snapshot, plan, index, fixed, fixed_source, pinned_ids, supplements)
        items = (*included, *excluded)
        totals = _totals(included, excluded)
        anchor_usage = next(
            (u for u in map(index.measurement, range(len(messages) - 1, -1, -1)) if u is not None), None
        )
        provider = snapshot.provider
        return PlanView(
            plan=plan,
            items=items,
            totals=totals,
            config_mode=self._context.mode,
            config_enabled=self.config.config.enabled,
            session_id=snapshot.reader.session_id,
            leaf_id=ctx.leaf_id,
            model_key=snapshot.model_key,
            model_assumed=assumed,
            profile=awareness.profile,
            budget=budget,
            awareness=awareness,
            fixed_tokens=fixed,
            fixed_source=fixed_source,
            calibration_samples=len(samples),
            rescued_predecessor=groups["rescued"][0] if groups["rescued"] else None,
            oversized_exclusions=tuple(groups["oversized"]),
            selected_groups=tuple(groups["selected"]),
            excluded_groups=tuple(groups["excluded"]),
            pinned_entry_ids=pinned_ids,
            unmapped_pins=unmapped,
            provider_usage=anchor_usage,
            pi_context_tokens=provider.context_tokens if provider is not None else None,
            duration_ms=(time.perf_counter() - started) * 1000,
            planner_ms=planner_ms,
            estimated_messages=self._cache.misses - misses_before,
            warnings=tuple(warnings),
            version=snapshot.version,
            supplements=supplements,
        )

    def _fixed_and_samples(
        self, messages: Sequence[Mapping[str, Any]], indexed: _ContextIndex
    ) -> tuple[int, Literal["system", "inferred", "none"], list[dict[str, Any]]]:
        """Fixed tokens (replayed system messages, else inferred) and the newest
        `calibration_window` calibration samples, newest first (see the module docstring).

        Cost: the replies actually sampled (the running estimates come from `indexed`)."""
        before, system_at, fresh_from = indexed.before, indexed.system_at, indexed.first_fresh
        inferred: int | None = None
        if not system_at:
            for index in range(fresh_from, len(messages)):
                usage = indexed.measurement(index)
                if usage is not None:
                    inferred = max(0, usage.prompt_tokens - before[index])
                    break

        def fixed_at(index: int) -> int:
            position = bisect_right(system_at, (index, -1)) - 1
            return system_at[position][1] if position >= 0 else inferred or 0

        samples: list[dict[str, Any]] = []
        for index in range(len(messages) - 1, fresh_from - 1, -1):
            if len(samples) >= self._awareness.calibration_window:
                break
            usage = indexed.measurement(index)
            if usage is None:
                continue
            ts = messages[index].get("timestamp")
            samples.append(
                {
                    "estimatedTokens": fixed_at(index) + before[index],
                    "actualInputTokens": usage.prompt_tokens,
                    "inputTokens": usage.input,
                    "cacheReadTokens": usage.cache_read,
                    "cacheWriteTokens": usage.cache_write,
                    "createdAt": int(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) and ts >= 0 else 0,
                }
            )
        if system_at:
            return system_at[-1][1], "system", samples
        if inferred is not None:
            return inferred, "inferred", samples
        return 0, "none", samples

    @staticmethod
    def _pins(
        labels: Mapping[str, str], entry_ids: Sequence[str | None], native_to_ctx: Sequence[int]
    ) -> tuple[list[int], tuple[str, ...], tuple[str, ...]]:
        """Native indices of labelled-pin messages, the pinned entry ids in the context, and the
        pin labels whose entries are not in it."""
        pinned = {target for target, label in labels.items() if is_pin_label(label)}
        if not pinned:
            return [], (), ()
        indices = [n for n, i in enumerate(native_to_ctx) if entry_ids[i] in pinned]
        mapped = tuple(dict.fromkeys(entry_ids[native_to_ctx[n]] or "" for n in indices))
        unmapped = tuple(sorted(pinned - set(mapped)))
        return indices, mapped, unmapped

    def _items(
        self,
        snapshot: Any,
        plan: ManagedContextPlan,
        indexed: _ContextIndex,
        fixed: int,
        fixed_source: str,
        pinned_ids: Sequence[str],
        supplements: tuple[SupplementalMessage, ...],
    ) -> tuple[list[ManifestItem], list[ManifestItem], dict[str, list[GroupRef]]]:
        """The included items in sent order, the excluded ones (the planner's, then Pi's) and the
        group references for the explain panel."""
        ctx = snapshot.context
        pinned = set(pinned_ids)
        included: list[ManifestItem] = []
        replay = indexed.replay
        if fixed_source == "system":
            system_tokens = system_prompt_tokens(replay.prompt)
            included.append(
                ManifestItem(SYSTEM_SOURCE, True, "system", None, "system", None, None, system_tokens, None, "Pi effective system prompt")
            )
            for name, tool in replay.tools.items():
                included.append(
                    ManifestItem(f"tool:{name}", True, "tool", None, None, None, None, tool_tokens(tool), None, "Active Pi tool from the session's system messages")
                )
        elif fixed_source == "inferred":
            included.append(
                ManifestItem(
                    SYSTEM_SOURCE, True, "system", None, "system", None, None, fixed, None,
                    "Pi system prompt and tools, inferred from the first reply's usage (no system message in the session)",
                )
            )

        sources = plan.planned_sources
        spliced = len(sources) != len(indexed.native)  # supplements kept (managed mode)
        columns = _spliced_columns(indexed, sources, supplements) if spliced else _native_columns(indexed)
        included += _message_items(plan.selected, True, columns, pinned)
        excluded = _message_items(plan.excluded, False, columns, pinned)
        excluded += self._pi_excluded.update(snapshot.reader, ctx.context_entry_ids, frozenset(pinned))

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
        previous_refs = self._refs[bool(supplements)]
        for group in plan.groups:
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
        self._refs[bool(supplements)] = refs
        return included, excluded, groups


_GROUP_AND_KIND = attrgetter("group_id", "kind")
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


def _native_columns(indexed: _ContextIndex) -> _Columns:
    """The columns of a plan without supplements: a planned index is a native index."""
    return _Columns(indexed.keys, indexed.native_entry_ids, indexed.roles, indexed.native_to_ctx)


def _spliced_columns(
    indexed: _ContextIndex, sources: Sequence[int | str], supplements: Sequence[SupplementalMessage]
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
            entry_ids.append(indexed.native_entry_ids[source])
            roles.append(indexed.roles[source])
            ctx_index.append(indexed.native_to_ctx[source])
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
    index, group_id, kind, tokens, score, reason = islice(zip(*entries), 6)
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

# ---------------------------------------------------------------------------------------------
# Slash-command text (spec §7.2)


def _n(value: int | float | None) -> str:
    """en-US integer, or `n/a` when missing (DS4's slash-command format)."""
    return "n/a" if value is None else f"{round(value):,}"


def _rows(pairs: Sequence[tuple[str, str]], indent: str = "") -> list[str]:
    width = max((len(label) for label, _ in pairs), default=0)
    return [f"{indent}{label.ljust(width)}  {value}" for label, value in pairs]


def _group_list(groups: Sequence[GroupRef], limit: int = 4) -> str:
    names = ", ".join(g.id for g in groups[:limit])
    return names + (f", … {len(groups) - limit} more" if len(groups) > limit else "")


def tokens_lines(view: PlanView) -> list[str]:
    """What DS4's `/context tokens` prints for this plan (0.3.7 layout, spec §7.2), as lines.
    Per-kind rows sum the included items, supplements included (`Historical retrieval` is the
    sent evidence; `pending` on a first paint planned before retrieval ran). The cache-aware
    block is absent (the nominal plan is shown); artifactized results are not reconstructed
    from the session."""
    mode = view.mode if view.config_mode == "managed" else "observer"
    kinds = view.totals.by_kind
    budget = view.budget
    usage = view.provider_usage
    cal = view.awareness.calibration
    out = [f"DS4 Context Tokens ({mode} mode)"]
    out += _rows(
        [
            ("System prompt", _n(view.totals.system_tokens)),
            ("Tool definitions", _n(view.totals.tool_tokens)),
            ("AgentMessage[]", _n(view.totals.message_tokens)),
        ]
    )
    out += _rows(
        [
            ("Recent verbatim", _n(kinds.get("recent", 0))),
            ("Pinned context", _n(kinds.get("pin", 0))),
            ("Durable memory", _n(kinds.get("memory", 0))),
            ("Historical retrieval", "pending" if view.retrieval_pending else _n(kinds.get("retrieval", 0))),
            ("Project snippets", _n(kinds.get("project", 0))),
            ("Artifactized results*", "n/a"),
            ("Active summaries", _n(kinds.get("summary", 0))),
            ("Current request", _n(kinds.get("current", 0))),
        ],
        indent="  ",
    )
    out += _rows(
        [
            ("Estimated provider input", _n(view.totals.estimated_input_tokens)),
            ("Actual provider input", _n(usage.prompt_tokens if usage else None)),
            ("Uncached input", _n(usage.input if usage else None)),
            ("Cache read / write", f"{_n(usage.cache_read)} / {_n(usage.cache_write)}" if usage else "n/a"),
            ("Pi reported context", _n(view.pi_context_tokens)),
            ("Model context window", _n(budget.context_window)),
            ("Output reserve", _n(budget.output_reserve)),
            ("Safety margin", _n(budget.safety_margin)),
            ("Estimator calibration", f"x{cal.applied_ratio:.3f} ({cal.accepted_samples} samples)"),
            ("Nominal soft / hard", f"{_n(budget.nominal_soft_input_limit)} / {_n(budget.nominal_hard_input_limit)}"),
            ("Soft input limit", _n(budget.soft_input_limit)),
            ("Hard input limit", _n(budget.hard_input_limit)),
            ("Preferred input target", _n(budget.preferred_input_target)),
            ("Active input budget", _n(budget.active_input_budget)),
        ]
    )
    out.append("Estimates are chars-v1 tokens; actual numbers are the latest reply's provider usage.")
    out.append("* Artifactized tool results live in DS4's store and are not reconstructed here.")
    return out


_SUPPLEMENT_TITLES = {"pin": "Persistent pins", "memory": "Durable memory", "retrieval": "Retrieval evidence", "project": "Project snippets"}


def _supplement_rows(view: PlanView) -> list[tuple[str, str]]:
    """Per supplement kind handed to the planner: items selected (their tokens) and excluded."""
    if view.retrieval_pending:
        return [("Retrieval evidence", "pending")]
    counts: dict[str, list[int]] = {}  # kind -> [selected, selected tokens, excluded]
    for item in view.items:
        if item.is_supplement:
            row = counts.setdefault(item.kind, [0, 0, 0])
            if item.included:
                row[0] += 1
                row[1] += item.tokens
            else:
                row[2] += 1
    if view.supplements and view.mode == "fallback":
        return [("Supplements", f"{len(view.supplements)} dropped by the fallback")]
    return [
        (_SUPPLEMENT_TITLES.get(kind, kind), f"{_n(n)} selected ({_n(tokens)} tokens), {_n(excluded)} excluded")
        for kind, (n, tokens, excluded) in counts.items()
    ]


def explain_lines(view: PlanView) -> list[str]:
    """What DS4's `/context explain` prints for this plan (0.3.7 layout, spec §7.2), as lines.
    The group counts include the supplement groups (DS4's `selectedGroupCount` /
    `excludedGroupCount`); ds4tui adds, after them, one row per supplement kind that was
    planned (`Retrieval evidence: N selected (T tokens), M excluded`) and a `pending` row on a
    first paint planned before retrieval ran."""
    out: list[str] = []
    if view.config_mode != "managed":
        out.append("Latest context used observer mode; no managed-context selection was applied.")
        out.append("The plan DS4 would make in managed mode follows.")
    planning = view.plan.planning
    out.append("DS4 Context Plan")
    rows = [
        ("Mode", view.mode),
        ("Original messages", _n(planning.original_message_count)),
        ("Original tokens", _n(planning.original_message_tokens)),
        ("Fixed system/tools", f"{_n(planning.fixed_tokens)} ({view.fixed_source})"),
        ("Message target", _n(planning.message_target_tokens)),
        ("Message hard limit", _n(planning.message_hard_limit_tokens)),
        ("Recent-tail limit", _n(planning.recent_tail_token_limit)),
    ]
    if view.rescued_predecessor is not None:
        g = view.rescued_predecessor
        rows.append(("Rescued predecessor", f"yes ({g.id}, {_n(g.tokens)} tokens)"))
    if view.oversized_exclusions:
        rows.append(("Oversized turn excl", f"{len(view.oversized_exclusions)} ({_group_list(view.oversized_exclusions)})"))
    rows += [
        ("Selected groups", _n(planning.selected_group_count)),
        ("Excluded groups", _n(planning.excluded_group_count)),
    ]
    rows += _supplement_rows(view)
    rows.append(("Duration", f"{view.duration_ms:.1f} ms (planner {view.planner_ms:.1f} ms)"))
    if planning.fallback_reason is not None:
        rows.append(("Fallback reason", planning.fallback_reason))
    out += _rows(rows)
    out.append("Each manifest row carries the rule that selected or excluded it.")
    out.append("Pin a turn with a Pi label starting with ds4:pin.")
    return out
