"""DS4's managed context planner (spec §3): release 0.3.7 selection with the 0.3.6
immediate-predecessor rescue, as in `context-planner.ts` / `atomic-groups.ts` @0607238 (0.3.10,
which selects exactly what 0.3.7 does with the default `chars-v1` estimator).

The planner is pure and deterministic. It splices supplements (pins, memory, retrieval results,
project snippets) in before the last native user message, cuts the planned array into atomic
groups (a turn with all its tool calls and results), then selects: mandatory current and pinned
groups, a contiguous recent tail (with the rescue), memory/retrieval/project supplements and
finally Pi summaries. Anything inconsistent falls back, fail-open, to Pi's native messages.

Where DS4's documentation and code differ, this follows the code (spec §10):
- memory is fitted after the recent tail, together with retrieval and project (§10.1);
- the 100/90/85/80/75 scores only order items within a category; selection is procedural
  (§10.2);
- `config.recent_tail_tokens` is re-capped by the automatic tail ceiling even when it came from a
  model-awareness override; only `cache_aware_tail_tokens` bypasses that ceiling (§10.4).

Cost: one pass to estimate tokens (skippable with `native_tokens`), linear grouping (union-find),
and sorts of the candidate groups: O(n log n) in the number of messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Literal, NamedTuple

from ds4core.budgets import (
    DEFAULT_CONTEXT_CONFIG,
    ContextBudget,
    ContextConfig,
    adaptive_recent_tail_limit,
    message_budget,
)
from ds4core.estimate import CHARS_V1, Estimator
from ds4core.jsjson import round6
from ds4core.indices import index_range
from ds4core.pause import pause_point, pausing

__all__ = [
    "AtomicGroup",
    "AtomicGrouper",
    "ManagedContextPlan",
    "PIN_LABEL",
    "PlanItem",
    "Planning",
    "SupplementalMessage",
    "ToolRelations",
    "build_atomic_groups",
    "is_pin_label",
    "plan_managed_context",
    "tool_relations",
    "validate_atomic_selection",
]

SupplementKind = Literal["pin", "memory", "retrieval", "project"]
GroupKind = Literal["turn", "summary", "prefix"]
_MAX_SAFE_INTEGER = 2**53 - 1

PIN_LABEL = re.compile(r"^ds4:pin(\s|$)", re.IGNORECASE)
"""DS4's labelled-pin rule (spec §5.1): a Pi label is a pin when, trimmed, it matches this."""


def is_pin_label(label: str | None) -> bool:
    """True for a DS4 labelled pin: the trimmed label matches `/^ds4:pin(\\s|$)/i` (spec §5.1:
    `ds4:pin`, `ds4:pin note`, any case; `ds4:pinned` is not a pin)."""
    return isinstance(label, str) and PIN_LABEL.match(label.strip()) is not None


# Priorities (spec §3.3).
PRIORITY_CURRENT = 1000
PRIORITY_LABELLED_PIN = 900
PRIORITY_RECENT = 100
PRIORITY_SUMMARY = 75
PRIORITY_HISTORY = 40

_GROUP_REASONS = {
    "turn": "Conversation turn boundary",
    "summary": "Active Pi summary message",
    "prefix": "Messages preceding the first user turn",
}
_TOOL_EXCHANGE_REASON = "Atomic conversation turn containing a complete tool call/result batch"
_SUPPLEMENT_EXCLUSION_REASONS = {
    "pin": "Excluded because mandatory pinned context exceeded its safety budget",
    "memory": "Excluded by durable-memory or active input budget",
    "retrieval": "Excluded by retrieved-history or active input budget",
    "project": "Excluded by project-snippet or active input budget",
}
_CATEGORY_ORDER = {"memory": 0, "retrieval": 1, "project": 2}


def _role(message: Any) -> str | None:
    if isinstance(message, dict):
        role = message.get("role")
        return role if isinstance(role, str) else None
    return None


# ---------------------------------------------------------------------------------------------
# Atomic groups (spec §3.2)


@dataclass(frozen=True)
class ToolRelations:
    """Tool-call links of a message array (spec §3.2 step 2).

    `calls` maps a toolCall block id to the index of the last assistant message (with array
    content) carrying it; its iteration order is the id's first occurrence, as with a JS `Map`.
    `results` maps a `toolResult`'s `toolCallId` to the indices of its results, in order.
    """

    calls: dict[str, int]
    results: dict[str, list[int]]


_SUMMARY_ROLES = ("compactionSummary", "branchSummary")
_NO_CALLS: tuple[str, ...] = ()


def _links(message: Any) -> tuple[str | None, Sequence[str], str | None]:
    """A message's role and tool links (spec §3.2): the toolCall block ids of an assistant
    message with array content, and the `toolCallId` of a `toolResult`."""
    if not isinstance(message, dict):
        return None, _NO_CALLS, None
    role = message.get("role")
    if not isinstance(role, str):
        return None, _NO_CALLS, None
    if role == "assistant":
        content = message.get("content")
        if isinstance(content, list):
            return role, [
                block["id"]
                for block in content
                if isinstance(block, dict)
                and block.get("type") == "toolCall"
                and isinstance(block.get("id"), str)
            ], None
    elif role == "toolResult":
        call_id = message.get("toolCallId")
        if isinstance(call_id, str):
            return role, _NO_CALLS, call_id
    return role, _NO_CALLS, None


def tool_relations(messages: Sequence[Any]) -> ToolRelations:
    """Collect `ToolRelations` (0.3.x semantics: the last call with an id wins, spec §3.2)."""
    calls: dict[str, int] = {}
    results: dict[str, list[int]] = {}
    for index, message in enumerate(messages):
        _, call_ids, result_id = _links(message)
        for call_id in call_ids:
            calls[call_id] = index
        if result_id is not None:
            results.setdefault(result_id, []).append(index)
    return ToolRelations(calls, results)


@dataclass(frozen=True, slots=True)  # (one per group / map cell: issue 32)
class AtomicGroup:
    """DS4's `AtomicMessageGroup`: messages that are selected or excluded together.

    `message_indices` ascend and need not be contiguous (a tool exchange unions drafts);
    `id` is `"group:<start>-<end>"`; `estimated_tokens` sums the message estimates.
    """

    id: str
    kind: GroupKind
    message_indices: tuple[int, ...]
    start_index: int
    end_index: int
    estimated_tokens: int
    contains_tool_exchange: bool
    reason: str

    def to_json(self) -> dict[str, Any]:
        """DS4's JSON field names."""
        return {
            "id": self.id,
            "kind": self.kind,
            "messageIndices": list(self.message_indices),
            "startIndex": self.start_index,
            "endIndex": self.end_index,
            "estimatedTokens": self.estimated_tokens,
            "containsToolExchange": self.contains_tool_exchange,
            "reason": self.reason,
        }


class _Component:
    """One union-find set of drafts: its messages (ascending), token sum, kinds and the group
    built from it (None until rebuilt after a change)."""

    __slots__ = ("members", "tokens", "has_turn", "all_summary", "exchange", "group")

    def __init__(self, kind: str) -> None:
        self.members: list[int] = []
        self.tokens = 0
        self.has_turn = kind == "turn"
        self.all_summary = kind == "summary"
        self.exchange = False
        self.group: AtomicGroup | None = None

    def build(self) -> AtomicGroup:
        kind: GroupKind = "turn" if self.has_turn else "summary" if self.all_summary else "prefix"
        first, last = self.members[0], self.members[-1]
        return AtomicGroup(
            id=f"group:{first}-{last}",
            kind=kind,
            message_indices=tuple(self.members),
            start_index=first,
            end_index=last,
            estimated_tokens=self.tokens,
            contains_tool_exchange=self.exchange,
            reason=_TOOL_EXCHANGE_REASON if self.exchange else _GROUP_REASONS[kind],
        )


class AtomicGrouper:
    """DS4's `buildAtomicGroups` (0.3.x semantics, spec §3.2), incremental over a growing array.

    `update(messages, tokens)` returns the atomic groups of `messages` (sorted by start index)
    and their `ToolRelations`. When the previous call's messages and tokens are a prefix of these
    (compared by equality, identity first: the append of a live session), only the new messages
    are drafted and their tool links unioned in; the groups they do not touch are the same
    `AtomicGroup` objects as before. Anything else (a compaction, a branch switch, supplements
    spliced in the middle, a later call re-using the id of an earlier call that already has
    results) regroups from scratch. The result equals a cold build in every case.

    Method (as DS4): messages are cut into drafts (a turn from each user message, each summary
    alone, a prefix for messages before any turn), then the draft of each tool call is unioned
    with the drafts of its results. A union-find root is its set's smallest draft, so the sets
    in root order are the groups in start-index order. Cost per update: O(new messages + touched
    groups), plus an O(n) prefix comparison in C and an O(groups) list of the result.
    Not thread-safe.
    """

    def __init__(self) -> None:
        """An empty grouper (the first `update` is a cold build)."""
        self._reset()

    def _reset(self) -> None:
        self._messages: list[Any] = []
        self._tokens: list[int] = []
        self._draft_of: list[int] = []  # per message: its draft
        self._parent: list[int] = []  # per draft: union-find parent
        self._turn: int | None = None  # the open turn draft
        self._prefix: int | None = None  # the open prefix draft
        self._components: dict[int, _Component] = {}  # root draft -> set, in root order
        self._calls: dict[str, int] = {}
        self._results: dict[str, list[int]] = {}

    def update(
        self, messages: Sequence[Any], tokens: Sequence[int]
    ) -> tuple[list[AtomicGroup], ToolRelations]:
        """Groups and tool relations of `messages` with per-message estimates `tokens` (same
        length). The relations' dicts belong to the grouper: read them before the next update."""
        start = len(self._messages)
        if (
            len(messages) < start
            or self._tokens != list(tokens[:start])
            or self._messages != list(messages[:start])
        ):
            self._reset()
            start = 0
        if not self._extend(messages, tokens, start):
            self._reset()
            self._extend(messages, tokens, 0)
        groups = [c.group for c in self._components.values() if c.group is not None]
        return groups, ToolRelations(self._calls, self._results)

    def _find(self, draft: int) -> int:
        parent = self._parent
        root = draft
        while parent[root] != root:
            root = parent[root]
        while parent[draft] != root:
            parent[draft], draft = root, parent[draft]
        return root

    def _union(self, a: int, b: int) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra == rb:
            return
        low, high = min(ra, rb), max(ra, rb)
        self._parent[high] = low
        keep, gone = self._components[low], self._components.pop(high)
        keep.members.extend(gone.members)
        keep.members.sort()
        keep.tokens += gone.tokens
        keep.has_turn = keep.has_turn or gone.has_turn
        keep.all_summary = keep.all_summary and gone.all_summary
        keep.exchange = keep.exchange or gone.exchange
        keep.group = None

    def _extend(self, messages: Sequence[Any], tokens: Sequence[int], start: int) -> bool:
        """Add `messages[start:]`; False when a re-used call id needs a cold build instead."""
        touched: dict[str, None] = {}
        components, parent, draft_of = self._components, self._parent, self._draft_of
        calls, results = self._calls, self._results
        for index in pausing(index_range(start, len(messages))):  # (shared ints: `ds4core.indices`)
            role, call_ids, result_id = _links(messages[index])
            if role == "user" or role in _SUMMARY_ROLES or (self._turn is None and self._prefix is None):
                # A user message opens a turn, a summary stands alone, anything else before the
                # first turn (or after a summary) opens a prefix (spec §3.2 step 1).
                draft = len(parent)
                parent.append(draft)
                kind = "turn" if role == "user" else "summary" if role in _SUMMARY_ROLES else "prefix"
                components[draft] = _Component(kind)
                self._turn = draft if kind == "turn" else None
                self._prefix = draft if kind == "prefix" else None
            else:
                draft = self._turn if self._turn is not None else self._prefix  # type: ignore[assignment]
            draft_of.append(draft)
            component = components[draft if parent[draft] == draft else self._find(draft)]
            component.members.append(index)
            component.tokens += tokens[index]
            component.group = None

            for call_id in call_ids:
                previous = calls.get(call_id)
                if previous is not None and previous < start and results.get(call_id):
                    return False  # the earlier call's unions would have to be undone
                calls[call_id] = index
                touched[call_id] = None
            if result_id is not None:
                results.setdefault(result_id, []).append(index)
                touched[result_id] = None

        # A call and all its results end up in one group, so a group "contains a tool exchange"
        # exactly when it holds a call that has at least one result.
        for call_id in touched:
            call_index = calls.get(call_id)
            result_indices = results.get(call_id)
            if call_index is None or not result_indices:
                continue
            for result_index in result_indices:
                self._union(draft_of[call_index], draft_of[result_index])
            components[self._find(draft_of[call_index])].exchange = True

        for component in pausing(components.values()):
            if component.group is None:
                component.group = component.build()
        self._messages.extend(messages[start:])
        self._tokens.extend(tokens[start:])
        return True


def build_atomic_groups(
    messages: Sequence[Any],
    estimator: Estimator = CHARS_V1,
    message_tokens: Sequence[int] | None = None,
) -> list[AtomicGroup]:
    """DS4's `buildAtomicGroups` (0.3.x semantics, spec §3.2), sorted by start index.

    `message_tokens` may carry precomputed per-message estimates (same length as `messages`),
    e.g. cached per session entry by a live re-planner, so that grouping costs O(n) without
    re-estimating; otherwise `estimator` is applied. Raises ValueError on a length mismatch.
    Plans of a growing session reuse groups through one `AtomicGrouper` instead.
    """
    return AtomicGrouper().update(messages, _tokens_for(messages, estimator, message_tokens))[0]


def validate_atomic_selection(relations: ToolRelations, selected: set[int] | frozenset[int]) -> list[str]:
    """DS4's `validateAtomicSelection` (spec §3.8): errors for a selected call without (all) its
    results and for a selected result without its selected call; duplicates removed."""
    errors: dict[str, None] = {}
    for call_id, call_index in relations.calls.items():
        if call_index not in selected:
            continue
        result_indices = relations.results.get(call_id, [])
        if not result_indices:
            errors[f"selected tool call {call_id} has no result"] = None
        elif not selected.issuperset(result_indices):
            errors[f"selected tool call {call_id} is missing one or more results"] = None
    for call_id, result_indices in relations.results.items():
        if selected.isdisjoint(result_indices):
            continue
        call_index = relations.calls.get(call_id)
        if call_index is None or call_index not in selected:
            errors[f"selected tool result {call_id} has no selected call"] = None
    return list(errors)


def _tokens_for(
    messages: Sequence[Any], estimator: Estimator, message_tokens: Sequence[int] | None
) -> Sequence[int]:
    if message_tokens is None:
        return [estimator.message_tokens(m) for m in messages]
    if len(message_tokens) != len(messages):
        raise ValueError(
            f"message_tokens has {len(message_tokens)} entries for {len(messages)} messages"
        )
    return message_tokens


# ---------------------------------------------------------------------------------------------
# Inputs and results


@dataclass(frozen=True)
class SupplementalMessage:
    """DS4's `SupplementalContextMessage`: a synthetic user message DS4 injects.

    `id` is e.g. `"memory:<id>"`; `source_ids` are the session entries / pins / snippets it
    derives from (a supplement without any is dropped); `score` orders it within its category
    (pin 950, memory 90+, retrieval 85+, project 80+); `reason` becomes its manifest reason.
    """

    id: str
    message: Any
    kind: SupplementKind
    source_ids: tuple[str, ...]
    score: float
    reason: str
    project_snippet: Mapping[str, Any] | None = None
    classification: str | None = None
    privacy_reason: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SupplementalMessage:
        """Build from DS4's JSON names (`sourceIds`, `projectSnippet`, `privacyReason`, ...);
        `rankingFeatures` (metadata for the learned ranker) is ignored."""
        return cls(
            id=data["id"],
            message=data["message"],
            kind=data["kind"],
            source_ids=tuple(data["sourceIds"]),
            score=data["score"],
            reason=data["reason"],
            project_snippet=data.get("projectSnippet"),
            classification=data.get("classification"),
            privacy_reason=data.get("privacyReason"),
        )


class PlanItem(NamedTuple):
    """DS4's `PlannedMessageMetadata` (spec §3.10): one message of a selected or excluded group.

    `original_index` indexes the planned array (the native array in fallback mode); `tokens` is
    that message's own estimate; `reason` is `"<selection or exclusion reason>; <group reason>"`.
    An immutable named tuple: a plan builds one per message, and tuples are the cheapest to build
    (a frozen dataclass costs several times more).
    """

    original_index: int
    group_id: str
    kind: str
    tokens: int
    score: float
    reason: str
    source_id: str | None = None
    retrieved_event_ids: tuple[str, ...] | None = None
    project_snippet: Mapping[str, Any] | None = None
    classification: str | None = None
    privacy_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """DS4's JSON; optional fields present only when set (and truthy, as DS4 spreads them)."""
        out: dict[str, Any] = {
            "originalIndex": self.original_index,
            "groupId": self.group_id,
            "kind": self.kind,
            "tokens": self.tokens,
            "score": self.score,
            "reason": self.reason,
        }
        if self.source_id:
            out["sourceId"] = self.source_id
        if self.retrieved_event_ids is not None:
            out["retrievedEventIds"] = list(self.retrieved_event_ids)
        if self.project_snippet is not None:
            out["projectSnippet"] = dict(self.project_snippet)
        if self.classification:
            out["classification"] = self.classification
        if self.privacy_reason:
            out["privacyReason"] = self.privacy_reason
        return out


@dataclass(frozen=True)
class Planning:
    """The planner's part of DS4's manifest `planning` block (spec §3.12; tokens are estimator
    tokens). The runtime adds `durationMs` and `cacheAware`. Optional fields:
    `rescued_immediate_predecessor` (only when True), `oversized_turn_exclusions` (only when > 0)
    and `fallback_reason` (fallback mode only)."""

    mode: Literal["managed", "fallback"]
    original_message_tokens: int
    original_message_count: int
    fixed_tokens: int
    message_target_tokens: int
    message_hard_limit_tokens: int
    recent_tail_token_limit: int
    selected_group_count: int
    excluded_group_count: int
    rescued_immediate_predecessor: bool = False
    oversized_turn_exclusions: int = 0
    fallback_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """DS4's JSON field names and order."""
        out: dict[str, Any] = {
            "mode": self.mode,
            "originalMessageTokens": self.original_message_tokens,
            "originalMessageCount": self.original_message_count,
            "fixedTokens": self.fixed_tokens,
            "messageTargetTokens": self.message_target_tokens,
            "messageHardLimitTokens": self.message_hard_limit_tokens,
            "recentTailTokenLimit": self.recent_tail_token_limit,
            "selectedGroupCount": self.selected_group_count,
            "excludedGroupCount": self.excluded_group_count,
        }
        if self.rescued_immediate_predecessor:
            out["rescuedImmediatePredecessor"] = True
        if self.oversized_turn_exclusions > 0:
            out["oversizedTurnExclusions"] = self.oversized_turn_exclusions
        if self.fallback_reason is not None:
            out["fallbackReason"] = self.fallback_reason
        return out


@dataclass(frozen=True)
class ManagedContextPlan:
    """DS4's `ManagedContextPlan` plus the groups it was built on.

    `original_messages` is the array `PlanItem.original_index` refers to: the planned array
    (native + spliced supplements) in managed mode, the native messages in fallback mode.
    `planned_sources` is parallel to it: an int is a native message index, a str a supplement id.
    `messages` is what is sent: the selected messages in planned order (all native messages in
    fallback). `groups` are the atomic groups of `original_messages`.
    """

    mode: Literal["managed", "fallback"]
    original_messages: tuple[Any, ...]
    planned_sources: tuple[int | str, ...]
    messages: tuple[Any, ...]
    selected: tuple[PlanItem, ...]
    excluded: tuple[PlanItem, ...]
    planning: Planning
    groups: tuple[AtomicGroup, ...] = field(default=())

    @property
    def sent_sources(self) -> tuple[int | str, ...]:
        """`planned_sources` of the sent messages, in sent order."""
        return tuple(self.planned_sources[item.original_index] for item in self.selected)

    def to_json(self) -> dict[str, Any]:
        """DS4's JSON field names (`originalMessages`, `messages`, `selected`, `excluded`,
        `planning`) plus `groups`."""
        return {
            "mode": self.mode,
            "originalMessages": list(self.original_messages),
            "messages": list(self.messages),
            "selected": [item.to_json() for item in self.selected],
            "excluded": [item.to_json() for item in self.excluded],
            "planning": self.planning.to_json(),
            "groups": [group.to_json() for group in self.groups],
        }


# ---------------------------------------------------------------------------------------------
# Planner


class _Choice(NamedTuple):
    """How one group is classified: kind, score, reason and provenance."""

    group: AtomicGroup
    kind: str
    score: float
    reason: str
    source_id: str | None = None
    retrieved_event_ids: tuple[str, ...] | None = None
    project_snippet: Mapping[str, Any] | None = None


_ORIGINAL_INDEX = attrgetter("original_index")
_new_tuple = tuple.__new__


_EXCLUDED_RECENT_REASON = "Excluded outside the contiguous recent-tail or input budget"


def _score(group: AtomicGroup, priority: float, message_count: int) -> float:
    """`round6(priority + (end + 1) / max(1, N + 1))` (spec §3.3); N >= 0, so the max is N + 1."""
    return round6(priority + (group.end_index + 1) / (message_count + 1))


def _items(
    choices: Iterable[_Choice],
    tokens: Sequence[int],
    classifications: Sequence[str | None] | None,
    privacy_reasons: Sequence[str | None] | None,
) -> list[PlanItem]:
    """The `PlanItem`s of classified groups, one per message, sorted by original index."""
    per_group = [  # a `_Choice` unpacked as the tuple it is (no attribute lookups)
        (
            group.id,
            kind,
            score,
            f"{reason}; {group.reason}",
            source_id,
            event_ids,
            dict(snippet) if snippet is not None else None,
            group.message_indices,
        )
        for group, kind, score, reason, source_id, event_ids, snippet in pausing(choices)
    ]
    if classifications is None and privacy_reasons is None:
        # The hot loop (one item per message): `tuple.__new__` builds the named tuple in C,
        # skipping its Python-level `__new__`.
        items = [
            _new_tuple(
                PlanItem,
                (index, group_id, kind, tokens[index], score, reason, source_id, event_ids, snippet, None, None),
            )
            for group_id, kind, score, reason, source_id, event_ids, snippet, indices in pausing(per_group)
            for index in indices
        ]
    else:
        items = [
            PlanItem(
                index,
                group_id,
                kind,
                tokens[index],
                score,
                reason,
                source_id,
                event_ids,
                snippet,
                _at(classifications, index),
                _at(privacy_reasons, index),
            )
            for group_id, kind, score, reason, source_id, event_ids, snippet, indices in pausing(per_group)
            for index in indices
        ]
    pause_point()
    items.sort(key=_ORIGINAL_INDEX)
    pause_point()
    return items


def _at(values: Sequence[str | None] | None, index: int) -> str | None:
    # `values?.[index]` in JavaScript: missing entries are undefined.
    return values[index] if values is not None and index < len(values) else None


def _valid_index(value: Any, length: int) -> int | None:
    # Number.isInteger(value) && 0 <= value < length
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value) if 0 <= value < length else None


def _last_user_index(messages: Sequence[Any]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if _role(messages[index]) == "user":
            return index
    return -1


def _current_and_pinned(
    groups: Sequence[AtomicGroup], last_user: int, pinned: set[int]
) -> tuple[set[int], set[int]]:
    """Positions (in `groups`) of the current groups and of the labelled-pin groups (spec §3.4)."""
    if last_user >= 0:
        current = {pos for pos, g in enumerate(groups) if g.end_index >= last_user}
    else:
        current = {len(groups) - 1} if groups else set()
    pinned_groups = (
        {pos for pos, g in enumerate(groups) if not pinned.isdisjoint(g.message_indices)}
        if pinned
        else set()
    )
    return current, pinned_groups


def _fallback_plan(
    messages: Sequence[Any],
    tokens: Sequence[int],
    groups: Sequence[AtomicGroup],
    *,
    fixed_tokens: int,
    budget: ContextBudget,
    recent_tail_token_limit: int,
    pinned_message_indices: Sequence[Any],
    classifications: Sequence[str | None] | None,
    privacy_reasons: Sequence[str | None] | None,
    reason: str,
) -> ManagedContextPlan:
    """Fail-open plan over the native messages, no supplements (spec §3.11); `groups` are the
    atomic groups of `messages`."""
    pinned = {
        i for i in (_valid_index(v, len(messages)) for v in pinned_message_indices) if i is not None
    }
    current, pinned_groups = _current_and_pinned(groups, _last_user_index(messages), pinned)
    choices: list[_Choice] = []
    for pos, group in enumerate(pausing(groups)):
        if pos in current:
            kind, priority = "current", PRIORITY_CURRENT
        elif pos in pinned_groups:
            kind, priority = "pin", PRIORITY_LABELLED_PIN
        elif group.kind == "summary":
            kind, priority = "summary", PRIORITY_SUMMARY
        elif group.kind == "turn":
            kind, priority = "recent", PRIORITY_RECENT
        else:
            kind, priority = "history", PRIORITY_HISTORY
        choices.append(
            _Choice(
                group, kind, _score(group, priority, len(messages)), f"Pi context retained by fail-open: {reason}"
            )
        )
    selected = _items(choices, tokens, classifications, privacy_reasons)
    budget_for_messages = message_budget(budget, fixed_tokens)
    return ManagedContextPlan(
        mode="fallback",
        original_messages=tuple(messages),
        planned_sources=tuple(range(len(messages))),
        messages=tuple(messages),
        selected=tuple(selected),
        excluded=(),
        planning=Planning(
            mode="fallback",
            original_message_tokens=sum(tokens),
            original_message_count=len(messages),
            fixed_tokens=fixed_tokens,
            message_target_tokens=budget_for_messages.target_tokens,
            message_hard_limit_tokens=budget_for_messages.hard_limit_tokens,
            recent_tail_token_limit=recent_tail_token_limit,
            selected_group_count=len(groups),
            excluded_group_count=0,
            fallback_reason=reason,
        ),
        groups=tuple(groups),
    )


def plan_managed_context(
    messages: Sequence[Any],
    *,
    fixed_tokens: int,
    budget: ContextBudget,
    config: ContextConfig = DEFAULT_CONTEXT_CONFIG,
    pinned_message_indices: Sequence[Any] = (),
    supplemental_messages: Sequence[SupplementalMessage] = (),
    supplemental_selection_order: Sequence[str] = (),
    message_classifications: Sequence[str | None] | None = None,
    message_privacy_reasons: Sequence[str | None] | None = None,
    cache_aware_tail_tokens: int | None = None,
    estimator: Estimator = CHARS_V1,
    native_tokens: Sequence[int] | None = None,
    grouper: AtomicGrouper | None = None,
) -> ManagedContextPlan:
    """DS4's `planManagedContext` (spec §3): choose which messages to send.

    Args:
        messages: Pi's native agent messages (dicts).
        fixed_tokens: system prompt + tool definition tokens (see `ds4core.estimate.fixed_tokens`).
        budget: the context budget (estimator tokens); `context_window`, `active_input_budget` and
            `hard_input_limit` are used.
        config: DS4 `context` settings; with model awareness, pass
            `ResolvedModelAwareness.context_config` (calibrated category ceilings).
        pinned_message_indices: native indices of labelled `ds4:pin` messages; invalid ones are
            ignored.
        supplemental_messages: pins, memories, retrieval results and project snippets, in that
            order (the runtime's order); spliced before the last native user message.
        supplemental_selection_order: optional learned order of supplement ids.
        message_classifications / message_privacy_reasons: per native message.
        cache_aware_tail_tokens: a recent-tail limit chosen by the cache-aware policy (spec §4);
            when > 0 it replaces `min(config.recent_tail_tokens, automatic ceiling)`, bypassing
            the automatic ceiling (still bounded by the target and hard budgets).
        estimator: message estimator (default `chars-v1`).
        native_tokens: optional precomputed estimates of `messages` (same length), e.g. cached
            per session entry by a live re-planner.
        grouper: an `AtomicGrouper` kept between plans of one growing session, so that an
            append regroups only the new messages (same plan as without it).

    Cost: O(n) in the messages (one `PlanItem` each) plus sorts of the groups, and the grouping
    of the new messages only when `grouper` saw the previous array.

    Returns a managed plan, or a fallback plan (all native messages, `planning.fallback_reason`
    set) when the mandatory set does not fit or the selection fails validation. Raises
    ValueError when `native_tokens` has the wrong length. The cyclic GC is the caller's
    (`ds4sessions.runtime.paused_gc` around a plan: one row per message outlives it).
    """
    native = list(messages)
    pause_point()
    native_token_list = list(_tokens_for(native, estimator, native_tokens))
    pause_point()
    native_last_user = _last_user_index(native)
    supplements = (
        [s for s in supplemental_messages if len(s.source_ids) > 0] if native_last_user >= 0 else []
    )
    insertion = native_last_user if native_last_user >= 0 else len(native)
    n_supp = len(supplements)
    planned, tokens = native, native_token_list
    sources: tuple[int | str, ...] = tuple(range(len(native)))
    if supplements:
        planned = native[:insertion] + [s.message for s in supplements] + native[insertion:]
        tokens = (
            native_token_list[:insertion]
            + [estimator.message_tokens(s.message) for s in supplements]
            + native_token_list[insertion:]
        )
        sources = (*range(insertion), *(s.id for s in supplements), *range(insertion, len(native)))
    supplement_at = {insertion + offset: s for offset, s in enumerate(supplements)}

    def spliced(per_native: Sequence[str | None], per_supplement: list[str | None]) -> list[str | None]:
        return [*per_native[:insertion], *per_supplement, *per_native[insertion:]]

    classifications: list[str | None] | None = None
    if message_classifications is not None or any(s.classification is not None for s in supplements):
        native_classes = [_at(message_classifications, i) or "normal" for i in range(len(native))]
        classifications = spliced(native_classes, [s.classification or "normal" for s in supplements])
    privacy_reasons: list[str | None] | None = None
    if message_privacy_reasons is not None or any(s.privacy_reason is not None for s in supplements):
        native_reasons = [_at(message_privacy_reasons, i) for i in range(len(native))]
        planned_reasons = spliced(native_reasons, [s.privacy_reason for s in supplements])
        if any(r is not None for r in planned_reasons):
            privacy_reasons = planned_reasons

    recent_tail_limit = (
        cache_aware_tail_tokens
        if cache_aware_tail_tokens is not None and cache_aware_tail_tokens > 0
        else adaptive_recent_tail_limit(budget.context_window, config.recent_tail_tokens)
    )
    msg_budget = message_budget(budget, fixed_tokens)
    target, hard = msg_budget.target_tokens, msg_budget.hard_limit_tokens

    def fallback(reason: str) -> ManagedContextPlan:
        native_classes = list(message_classifications) if message_classifications is not None else None
        native_privacy = list(message_privacy_reasons) if message_privacy_reasons is not None else None
        native_groups = AtomicGrouper().update(native, native_token_list)[0] if supplements else groups
        return _fallback_plan(
            native,
            native_token_list,
            native_groups,
            fixed_tokens=fixed_tokens,
            budget=budget,
            recent_tail_token_limit=recent_tail_limit,
            pinned_message_indices=pinned_message_indices,
            classifications=native_classes,
            privacy_reasons=native_privacy,
            reason=reason,
        )

    pause_point()
    groups, relations = (grouper or AtomicGrouper()).update(planned, tokens)
    pause_point()
    count = len(planned)
    shifted = [
        v + n_supp if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= insertion else v
        for v in pinned_message_indices
    ]
    pinned = {i for i in (_valid_index(v, count) for v in shifted) if i is not None}
    last_user = _last_user_index(planned)
    current, pinned_groups = _current_and_pinned(groups, last_user, pinned)
    pause_point()

    def supplement_of(group: AtomicGroup) -> SupplementalMessage | None:
        for index in group.message_indices:
            if index in supplement_at:
                return supplement_at[index]
        return None

    group_supplement: list[SupplementalMessage | None] = (
        [supplement_of(g) for g in groups] if supplements else [None] * len(groups)
    )

    if fixed_tokens > budget.hard_input_limit:
        return fallback("mandatory system prompt and tool definitions exceed the hard input limit")

    # Mandatory: current and pinned groups (spec §3.4).
    chosen: dict[int, _Choice] = {}
    for pos, group in enumerate(pausing(groups)):
        is_current = pos in current
        supplement = group_supplement[pos]
        persistent_pin = supplement is not None and supplement.kind == "pin"
        if not (is_current or pos in pinned_groups or persistent_pin):
            continue
        if persistent_pin:
            assert supplement is not None
            score = supplement.score
        else:
            score = _score(group, PRIORITY_CURRENT if is_current else PRIORITY_LABELLED_PIN, count)
        chosen[pos] = _Choice(
            group,
            "current" if is_current else "pin",
            score,
            "Mandatory current request turn"
            if is_current
            else supplement.reason
            if persistent_pin and supplement is not None
            else "Mandatory explicit ds4:pin group",
            source_id=supplement.source_ids[0] if persistent_pin and supplement is not None else None,
        )

    pin_tokens = sum(c.group.estimated_tokens for c in chosen.values() if c.kind == "pin")
    if pin_tokens > config.max_pinned_tokens:
        return fallback("mandatory pinned context exceeds context.maxPinnedTokens")
    selected_tokens = sum(c.group.estimated_tokens for c in chosen.values())
    if selected_tokens > hard:
        return fallback("mandatory current and pinned groups exceed the hard message budget")

    # Recent tail with the immediate-predecessor rescue (spec §3.5).
    recent_tokens = sum(groups[pos].estimated_tokens for pos in current)
    end_of = [g.end_index for g in groups]  # newest first: descending end index (all distinct)
    candidates = sorted(
        (
            pos
            for pos, g in enumerate(groups)
            if g.kind == "turn" and pos not in chosen and group_supplement[pos] is None
        ),
        key=end_of.__getitem__,
        reverse=True,
    )
    rescued = False
    for rank, pos in enumerate(pausing(candidates)):
        group = groups[pos]
        t = group.estimated_tokens
        fits_tail = recent_tokens + t <= recent_tail_limit
        fits_target = selected_tokens + t <= target
        fits_hard = selected_tokens + t <= hard
        if fits_tail and fits_target and fits_hard:
            reason = "Selected by deterministic recent-turn ranking"
        elif (
            rank == 0
            and recent_tail_limit > 0
            and config.rescue_immediate_predecessor
            and not fits_tail
            and fits_target
            and fits_hard
        ):
            rescued = True
            reason = (
                "Immediate-predecessor turn rescued beyond the recent-tail cap because it fits "
                "the active input budget"
            )
        else:
            break
        chosen[pos] = _Choice(group, "recent", _score(group, PRIORITY_RECENT, count), reason)
        selected_tokens += t
        recent_tokens += t
        if rescued:
            break  # the tail closes after a rescue

    # Memory, retrieval and project in one merged pass after the tail (spec §3.6, §10.1).
    learned: dict[str, int] = {}
    for supplement_id in supplemental_selection_order:
        learned.setdefault(supplement_id, len(learned))
    caps = {
        "memory": config.max_memory_tokens,
        "retrieval": config.max_retrieved_history_tokens,
        "project": config.max_project_tokens,
    }
    used = {"memory": 0, "retrieval": 0, "project": 0}

    def supplement_rank(pos: int) -> tuple[float, ...]:
        s = group_supplement[pos]
        assert s is not None
        # Ties on end index cannot happen (each message is in one group), so DS4's final
        # `id.localeCompare` key never decides and is left out.
        return (
            learned.get(s.id, _MAX_SAFE_INTEGER) if learned else 0,
            _CATEGORY_ORDER[s.kind],
            -s.score,
            -groups[pos].end_index,
        )

    supplement_candidates = sorted(
        (
            pos
            for pos, s in enumerate(group_supplement)
            if s is not None and s.kind != "pin" and pos not in chosen
        ),
        key=supplement_rank,
    )
    for pos in supplement_candidates:
        s = group_supplement[pos]
        assert s is not None
        t = groups[pos].estimated_tokens
        if (
            used[s.kind] + t > caps[s.kind]
            or selected_tokens + t > target
            or selected_tokens + t > hard
        ):
            continue
        chosen[pos] = _Choice(
            groups[pos],
            s.kind,
            s.score,
            s.reason,
            source_id=s.source_ids[0],
            retrieved_event_ids=tuple(s.source_ids) if s.kind == "retrieval" else None,
            project_snippet=s.project_snippet if s.kind == "project" else None,
        )
        selected_tokens += t
        used[s.kind] += t

    # Pi summaries, newest first (spec §3.7).
    summary_tokens = 0
    summaries = sorted(
        (pos for pos, g in enumerate(groups) if g.kind == "summary" and pos not in chosen),
        key=end_of.__getitem__,
        reverse=True,
    )
    for pos in summaries:
        t = groups[pos].estimated_tokens
        if (
            summary_tokens + t > config.max_summary_tokens
            or selected_tokens + t > target
            or selected_tokens + t > hard
        ):
            continue
        chosen[pos] = _Choice(
            groups[pos],
            "summary",
            _score(groups[pos], PRIORITY_SUMMARY, count),
            "Selected active Pi summary within the summary and input budgets",
        )
        selected_tokens += t
        summary_tokens += t

    # Output order and validation (spec §3.8).
    selected = _items(chosen.values(), tokens, classifications, privacy_reasons)
    selected_indices = set(map(_ORIGINAL_INDEX, selected))
    errors = validate_atomic_selection(relations, selected_indices)
    if errors:
        return fallback("; ".join(errors))
    if last_user >= 0 and last_user not in selected_indices:
        return fallback("current user message was not selected")
    if fixed_tokens + selected_tokens > budget.hard_input_limit:
        return fallback("final estimated input exceeds the hard input limit")

    # Excluded metadata (spec §3.9).
    excluded_choices: list[_Choice] = []
    for pos, group in enumerate(pausing(groups)):
        if pos in chosen:
            continue
        s = group_supplement[pos]
        if s is not None:
            choice = _Choice(
                group,
                s.kind,
                s.score,
                _SUPPLEMENT_EXCLUSION_REASONS[s.kind],
                source_id=s.source_ids[0],
                retrieved_event_ids=tuple(s.source_ids) if s.kind == "retrieval" else None,
                project_snippet=s.project_snippet,
            )
        elif group.kind == "turn":
            # the common case (one per excluded turn): `tuple.__new__` is what the named
            # tuple's Python-level `__new__` runs, without its call
            choice = _new_tuple(_Choice, (
                group, "recent", _score(group, PRIORITY_RECENT, count), _EXCLUDED_RECENT_REASON, None, None, None,
            ))
        elif group.kind == "summary":
            choice = _Choice(
                group, "summary", _score(group, PRIORITY_SUMMARY, count), "Excluded by summary or input budget"
            )
        else:
            choice = _Choice(
                group,
                "history",
                _score(group, PRIORITY_HISTORY, count),
                "Excluded because managed planner does not select older background without "
                "retrieval evidence",
            )
        excluded_choices.append(choice)
    excluded = _items(excluded_choices, tokens, classifications, privacy_reasons)

    oversized = (
        sum(
            1
            for pos, g in enumerate(groups)
            if g.kind == "turn"
            and pos not in chosen
            and group_supplement[pos] is None
            and g.estimated_tokens >= recent_tail_limit
        )
        if recent_tail_limit > 0
        else 0
    )
    pause_point()
    return ManagedContextPlan(
        mode="managed",
        original_messages=tuple(planned),
        planned_sources=sources,
        messages=tuple(map(planned.__getitem__, map(_ORIGINAL_INDEX, selected))),
        selected=tuple(selected),
        excluded=tuple(excluded),
        planning=Planning(
            mode="managed",
            original_message_tokens=sum(native_token_list),
            original_message_count=len(native),
            fixed_tokens=fixed_tokens,
            message_target_tokens=target,
            message_hard_limit_tokens=hard,
            recent_tail_token_limit=recent_tail_limit,
            selected_group_count=len(chosen),
            excluded_group_count=len(groups) - len(chosen),
            rescued_immediate_predecessor=rescued,
            oversized_turn_exclusions=oversized,
        ),
        groups=tuple(groups),
    )
