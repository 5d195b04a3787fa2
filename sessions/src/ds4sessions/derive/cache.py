"""The prompt-cache monitor of a live session: state, history, miss causes and DS4's decision.

Glue between a `ds4sessions.agents.pi.live.Snapshot` and the pure engines:

- `ds4core.cache_state` (countdown, history, miss explainer, cached prefix), fed with the branch's
  `CacheEvent`s (assistant replies and `usage` entries of kind `cache_warm`, Pi session format
  §5-§6) and with the prefix comparison of consecutive requests (`prefix_change`);
- `ds4core.cache_policy` (DS4 0.3.7 cache-aware policy, ds4-planner-spec.md §4) around
  `ds4core.planner.plan_managed_context`, for the decision view and the mode-`auto` what-if.

When the ds4tui bridge (docs/bridge.md) logs request metadata for the session, the replies are
matched to their `requests.jsonl` lines, and the bridge's fingerprints take precedence over the
rebuilt prompts for the miss explainer and the cached prefix; its fixed tokens are shown too.

`CacheMonitor.view(snapshot, now)` returns a `CacheView`; it caches per-request results (prefix
comparisons, the previous plan) so it can run on every update of a 30 MB session. It also carries
DS4's hysteresis across requests, as DS4's runtime does. `cache_view(...)` is the one-shot form.
"""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ds4core.pause import pausing
from ds4core.budgets import ModelCost
from ds4core.cache_policy import (
    CacheAwareDecision,
    CachePricing,
    CandidateComparison,
    CandidateEpoch,
    CandidatePlan,
    CandidateSelection,
    HysteresisState,
    candidate_epoch,
    compare_epoch_costs,
    decide_cache_aware_tail,
    message_fingerprint,
    select_cache_aware_tail,
)
from ds4core.cache_state import (
    DEFAULT_EXPIRING_SECONDS,
    CacheClock,
    CacheEvent,
    CacheFacts,
    CacheHistory,
    CacheState,
    PrefixChange,
    cache_clock,
    cache_history,
    cached_prefix_end,
)
from ds4core.config import Ds4Config
from ds4core.models import ModelInfo, ModelTable, Pricing
from ds4core.planner import AtomicGrouper, ManagedContextPlan, plan_managed_context
from ds4core.usage import usage_of

from ds4sessions.bridge.channel import RequestMeta, channel_dir
from ds4sessions.bridge.channel import prefix_change as request_prefix_change
from ds4sessions.derive.ds4config import LoadedDs4Config
from ds4sessions.runtime import paused_gc
from ds4sessions.ingest.snapshot import Snapshot
from ds4sessions.agents.pi.context import SessionContext, build_context, iso_to_ms
from ds4sessions.agents.pi.entries import BRANCH_SUMMARY, COMPACTION, CONTEXT_EDIT, MODEL_CHANGE, USAGE, Entry
from ds4sessions.agents.pi.reader import PiSession
from ds4sessions.derive.planning import LivePlanner, PlanView

__all__ = [
    "CacheMonitor",
    "CacheView",
    "RequestCacheMonitor",
    "cache_monitor_for",
    "session_cache_json",
    "session_cache_view",
    "session_last_time",
    "DecisionView",
    "MATCH_WINDOW_S",
    "bridge_prefix_change",
    "cache_events",
    "cache_view",
    "prefix_change",
]


# --- Events from the branch ------------------------------------------------------------------


def _entry_seconds(entry: Entry) -> float | None:
    ms = iso_to_ms(entry.timestamp)
    return ms / 1000 if ms is not None else None


def cache_events(session: PiSession, branch_entry_ids: Sequence[str | None]) -> list[CacheEvent]:
    """The cache events on a branch (root → leaf order), Pi session format §5-§6.

    Assistant replies with a usage object that is not all zero (an error reply with zero usage
    touched no cache), timed by the message's `timestamp` (request start, ms); and `usage`
    entries (kind `cache_warm` and any other kind alike), timed by the entry timestamp. Entries
    without a usable time are skipped.
    """
    events: list[CacheEvent] = []
    for entry_id in branch_entry_ids:
        entry = session.by_id.get(entry_id) if entry_id is not None else None
        if entry is None:
            continue
        if entry.role == "assistant":
            message = entry.message or {}
            usage = usage_of(message)
            if usage.missing or usage.is_zero:
                continue
            stamp = message.get("timestamp")
            seconds = stamp / 1000 if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else _entry_seconds(entry)
            provider, model = message.get("provider"), message.get("model")
            key = f"{provider}/{model}" if provider and model else None
            if seconds is not None:
                events.append(CacheEvent(seconds, usage, "reply", entry.id, key))
        elif entry.type == USAGE and isinstance(entry.raw.get("usage"), Mapping):
            usage = usage_of({"usage": entry.raw["usage"]})
            seconds = _entry_seconds(entry)
            provider, model = entry.raw.get("provider"), entry.raw.get("model")
            key = f"{provider}/{model}" if provider and model else None
            if seconds is not None and not usage.is_zero:
                events.append(CacheEvent(seconds, usage, "cache_warm", entry.id, key))
    return events


# --- Prefix comparison of consecutive requests -----------------------------------------------


def _same(left: Any, right: Any) -> bool:
    return left is right or message_fingerprint(left) == message_fingerprint(right)


def _first_difference(previous: SessionContext, current: SessionContext) -> int | None:
    """Index of the first context message of `current` that differs from `previous` (by DS4's
    message fingerprint), the length of `current` when it is a strict prefix, else None."""
    for index, (left, right) in enumerate(zip(previous.messages, current.messages)):
        if not _same(left, right):
            return index
    if len(current.messages) < len(previous.messages):
        return len(current.messages)
    return None


def _model_key(entry: Entry) -> str | None:
    message = entry.message or {}
    provider, model = message.get("provider"), message.get("model")
    return f"{provider}/{model}" if provider and model else None


def _describe(session: PiSession, entry_id: str | None, prefix: str) -> str:
    entry = session.by_id.get(entry_id) if entry_id else None
    when = f" at {entry.timestamp[11:19]}" if entry is not None and len(entry.timestamp) >= 19 else ""
    return f"{prefix} {entry_id}{when}"


def _request_contexts(
    session: PiSession, previous_id: str, request_id: str
) -> tuple[Entry, Entry, SessionContext, SessionContext, list[Entry]] | None:
    """The two replies' entries, the prompts they answered (`build_context` at each reply's
    parent) and the branch entries from the earlier reply on; None when either id is unknown."""
    previous_entry, request_entry = session.by_id.get(previous_id), session.by_id.get(request_id)
    if previous_entry is None or request_entry is None:
        return None
    before = build_context(session, leaf_id=previous_entry.parent_id)
    now = build_context(session, leaf_id=request_entry.parent_id)
    branch = now.branch_entry_ids
    start = branch.index(previous_id) if previous_id in branch else 0
    between = [session.by_id[e] for e in branch[start:] if e is not None and e in session.by_id]
    return previous_entry, request_entry, before, now, between


def _classify(
    session: PiSession, before: SessionContext, now: SessionContext, between: Sequence[Entry], index: int
) -> tuple[str, str | None]:
    """(kind, responsible entry id) of a prompt change at context message `index` of `now`."""
    entry_id = now.message_entry_ids[index] if index < len(now.messages) else None
    old_id = before.message_entry_ids[index] if index < len(before.messages) else None
    edits = {e.raw.get("targetId"): e for e in between if e.type == CONTEXT_EDIT}
    entry = session.by_id.get(entry_id) if entry_id else None
    role = now.messages[index].get("role") if index < len(now.messages) else None
    if entry is not None and entry.type == COMPACTION:
        return "compaction", entry_id
    if entry is not None and entry.type == BRANCH_SUMMARY:
        return "branch summary", entry_id
    if old_id in edits:
        return "context edit", edits[old_id].id
    if role == "system":
        return "system prompt", entry_id
    if entry_id == old_id:
        return "edited context", entry_id
    return "branch switch", entry_id


def prefix_change(session: PiSession, previous_id: str, request_id: str) -> PrefixChange | None:
    """What changed between the prompt of the request `previous_id` and that of `request_id`
    (both assistant entry ids on one branch), or None when the earlier prompt is still a prefix.

    Model change first (the last `model_change` between them, or the replies' models differ);
    then the first differing context message of the two prompts (each rebuilt with
    `build_context(session, leaf_id=<the entry before the reply>)`), named by its entry: a
    `compaction`, a `branch summary`, a `context edit` (content replaced or message omitted), a
    `system prompt` patch, an `edited context` (same entry, other content) or a `branch switch`
    (another entry at that place); finally a `system` message added after the previous prompt.
    """
    found = _request_contexts(session, previous_id, request_id)
    if found is None:
        return None
    previous_entry, request_entry, before, now, between = found
    old_model, new_model = _model_key(previous_entry), _model_key(request_entry)
    if old_model != new_model:
        switches = [e for e in between if e.type == MODEL_CHANGE]
        target = switches[-1].id if switches else None
        text = f"{old_model} → {new_model}"
        described = f"{_describe(session, target, 'model change')}: {text}" if target else f"model change: {text}"
        return PrefixChange("model change", target, None, described)
    index = _first_difference(before, now)
    if index is not None:
        kind, responsible = _classify(session, before, now, between, index)
        return PrefixChange(kind, responsible, index, _describe(session, responsible, kind) + f" changed context message {index}")
    for index in range(len(before.messages), len(now.messages)):
        if now.messages[index].get("role") == "system":
            entry_id = now.message_entry_ids[index]
            return PrefixChange("system prompt", entry_id, index, _describe(session, entry_id, "system prompt") + " patched the prompt")
    return None


# --- Request metadata from the ds4tui bridge (docs/bridge.md) --------------------------------

#: How far (seconds) a request-metadata line may lie from its reply's request start. The bridge
#: writes the line from Pi's `before_provider_request` hook, milliseconds after pi-ai stamps the
#: reply's `timestamp` (pi-ai 1.6.0 `openai-completions.js`: `timestamp: Date.now()`, then
#: `onPayload`); the window only guards against lines of an unrelated run on the same leaf.
MATCH_WINDOW_S = 60.0


def bridge_prefix_change(
    session: PiSession, previous_id: str, request_id: str, previous: RequestMeta, current: RequestMeta
) -> PrefixChange | None:
    """What changed between two requests according to the bridge's request metadata: `previous`
    and `current` are the `requests.jsonl` lines of the replies `previous_id` and `request_id`.

    The index is the bridge's (`ds4sessions.bridge.prefix_change`: first differing message
    fingerprint, or 0 for a changed system prompt or tool schema); None when `current` extends
    `previous` unchanged. The entry at that index is named from the session (the prompts rebuilt
    as in `prefix_change`, classified the same way: an `edited context` there is a message Pi sent
    differently from the session file, e.g. changed by an extension's `context` hook).
    Descriptions read "prefix changed at message N (bridge): …".
    """
    index = request_prefix_change(previous, current)
    if index is None:
        return None
    head = f"prefix changed at message {index} (bridge)"
    if previous.system_hash != current.system_hash:
        return PrefixChange("system prompt", None, index, f"{head}: the system prompt changed")
    if previous.tools_hash != current.tools_hash:
        return PrefixChange("tool schema", None, index, f"{head}: the tool schemas changed")
    found = _request_contexts(session, previous_id, request_id)
    if found is None:
        return PrefixChange("edited context", None, index, head)
    _, _, before, now, between = found
    kind, responsible = _classify(session, before, now, between, index)
    return PrefixChange(kind, responsible, index, f"{head}: {_describe(session, responsible, kind)}")


class _RequestLog:
    """Incremental reader of one session's `requests.jsonl` (docs/bridge.md "Channel format").

    `poll()` reads only the bytes appended since the last call (complete lines only: a torn last
    line waits for its newline) and starts over when the file was replaced or truncated; a
    missing or unreadable file reads as no requests. Malformed lines are skipped.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.identity: tuple[int, int] | None = None
        self.requests: list[RequestMeta] = []
        self.by_leaf: dict[str, list[tuple[float, RequestMeta]]] = {}

    def _reset(self) -> None:
        self.offset, self.identity = 0, None
        self.requests, self.by_leaf = [], {}

    def poll(self) -> None:
        """Read the lines appended since the last poll. Never raises for the file's contents or
        its absence (OSError reads as no file)."""
        try:
            with self.path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                identity = (stat.st_dev, stat.st_ino)
                if identity != self.identity or stat.st_size < self.offset:
                    self._reset()
                    self.identity = identity
                if stat.st_size == self.offset:
                    return
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            self._reset()
            return
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            meta = _parse_request(line)
            if meta is None:
                continue
            self.requests.append(meta)
            ms = iso_to_ms(meta.time)
            if meta.leaf_id is not None and ms is not None:
                self.by_leaf.setdefault(meta.leaf_id, []).append((ms / 1000, meta))


def _parse_request(line: bytes) -> RequestMeta | None:
    """One `requests.jsonl` line, or None when it is not a well-formed request object."""
    try:
        data = json.loads(line)
        if not isinstance(data, dict) or not isinstance(data.get("leafId"), (str, type(None))):
            return None
        return RequestMeta.from_json(data)
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError):
        return None


def _match_requests(
    session: PiSession, events: Sequence[CacheEvent], by_leaf: Mapping[str, Sequence[tuple[float, RequestMeta]]]
) -> dict[str, RequestMeta]:
    """Reply entry id → its request-metadata line, for the `reply` events of `events`.

    The rule: a line belongs to a reply when its `leafId` is the reply's parent entry (Pi's leaf
    when the request was sent is the entry the reply follows, docs/bridge.md), its
    `provider`/`model` are the reply's (when the reply names them), and its `time` lies within
    `MATCH_WINDOW_S` of the reply's request start (`message.timestamp`); among several (a retry
    on the same leaf, a regenerated reply), the line nearest in time, each line used once, replies
    taken in time order. `by_leaf` holds (time in epoch seconds, line) per `leafId` in file order
    (lines without a `leafId` or a parsable `time` never match). `cache_warm` usage
    entries have no line. Unmatched replies are absent from the result.
    """
    matched: dict[str, RequestMeta] = {}
    used: set[int] = set()
    for event in sorted(events, key=lambda e: e.time_s):
        if event.kind != "reply" or event.entry_id is None:
            continue
        entry = session.by_id.get(event.entry_id)
        if entry is None or entry.parent_id is None:
            continue
        best: tuple[float, RequestMeta] | None = None
        for seconds, meta in by_leaf.get(entry.parent_id, ()):
            if id(meta) in used:
                continue
            if event.model_key is not None and f"{meta.provider}/{meta.model}" != event.model_key:
                continue
            distance = abs(seconds - event.time_s)
            if distance <= MATCH_WINDOW_S and (best is None or distance < best[0]):
                best = (distance, meta)
        if best is not None:
            used.add(id(best[1]))
            matched[event.entry_id] = best[1]
    return matched


# --- Decision view ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DecisionView:
    """DS4's cache-aware decision for the next request, nominal and extended side by side.

    - `mode`: the mode evaluated (`"auto"` in the what-if), `configured_mode` the user's;
    - `decision`: the tail decision with every gate and its value (always evaluated, also in
      mode off, for display);
    - `selection`: what DS4 itself computes (None when DS4 would not compare: mode off, no price
      or budget); `compared_by_ds4` tells whether DS4 compares the candidates now;
    - `nominal` / `extended`: both candidates' epochs (tail tokens, reusable prefix, cold and
      warm request cost, epoch cost), computed for display even when DS4 would not;
    - `comparison`: winner and margin; `hysteresis_before` / `hysteresis_after`: the stick
      state and loss streak; `candidate`: what DS4 would send (`nominal` or `cache-aware`);
    - `note`: why nothing could be computed (None when it could).
    """

    mode: str
    configured_mode: str
    decision: CacheAwareDecision | None
    selection: CandidateSelection | None
    nominal: CandidateEpoch | None
    extended: CandidateEpoch | None
    comparison: CandidateComparison | None
    hysteresis_before: HysteresisState
    hysteresis_after: HysteresisState
    candidate: str
    note: str | None = None

    @property
    def what_if(self) -> bool:
        """True when this evaluates a mode the user's configuration does not use."""
        return self.mode != self.configured_mode

    @property
    def compared_by_ds4(self) -> bool:
        """True when DS4 itself compares the two candidates for the next request."""
        return self.selection is not None and self.selection.comparison is not None

    def to_json(self) -> dict[str, Any]:
        """JSON for the CLI: modes, decision (with gates), candidates, comparison, hysteresis."""
        return {
            "mode": self.mode,
            "configuredMode": self.configured_mode,
            "whatIf": self.what_if,
            "comparedByDs4": self.compared_by_ds4,
            "decision": self.decision.to_detail_json() if self.decision is not None else None,
            "nominal": self.nominal.to_json() if self.nominal else None,
            "extended": self.extended.to_json() if self.extended else None,
            "comparison": self.comparison.to_json() if self.comparison else None,
            "hysteresisBefore": self.hysteresis_before.to_json(),
            "hysteresisAfter": self.hysteresis_after.to_json(),
            "candidate": self.candidate,
            "note": self.note,
        }


def _cache_pricing(model: ModelInfo) -> CachePricing | None:
    """DS4's `CachePricing` from the model table's prices (USD per million), None without."""
    if model.pricing is None:
        return None
    p = model.pricing
    return CachePricing.from_model_cost(ModelCost(p.input, p.output, p.cache_read, p.cache_write))


class Fingerprints:
    """`message_fingerprint` memoised by message identity: the reader hands out the same dict for
    an entry on every rebuild, so each message is hashed once, not on every update (hashing means
    DS4's stable JSON of the whole message, tool results included). `retain(messages)` drops the
    memo of messages no longer in the context. A message that is not JSON-shaped gets `""`."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[Any, str]] = {}

    def __call__(self, message: Any) -> str:
        cached = self._known.get(id(message))
        if cached is None or cached[0] is not message:
            try:
                cached = (message, message_fingerprint(message))
            except TypeError:
                cached = (message, "")
            self._known[id(message)] = cached
        return cached[1]

    def retain(self, messages: Sequence[Any]) -> None:
        """Forget every message but `messages` (call once per view)."""
        keep = {id(m) for m in messages}
        self._known = {k: v for k, v in self._known.items() if k in keep}


class Estimates:
    """DS4's chars-v1 estimate of one message (`ds4core.estimate.CHARS_V1.message_tokens`, DS4
    runtime `estimateMessagesTokens([message])`, tokens) memoised by message identity, as
    `Fingerprints` is: a fallback plan sends every native message, and re-estimating all of them
    for each candidate plan was O(messages) of Python per append. `retain(messages)` forgets the
    others."""

    def __init__(self) -> None:
        from ds4core.estimate import CHARS_V1

        self._estimator = CHARS_V1
        self._known: dict[int, tuple[Any, int]] = {}

    def message_tokens(self, message: Any) -> int:
        """The estimate of `message` (computed once per message object)."""
        cached = self._known.get(id(message))
        if cached is None or cached[0] is not message:
            cached = (message, self._estimator.message_tokens(message))
            self._known[id(message)] = cached
        return cached[1]

    def retain(self, messages: Sequence[Any]) -> None:
        """Forget every message but `messages`."""
        keep = {id(m) for m in messages}
        self._known = {k: v for k, v in self._known.items() if k in keep}


def _candidate(plan: ManagedContextPlan, fingerprint: Callable[[Any], str], estimates: Any = None,
               native: tuple[Sequence[Any], Sequence[int]] | None = None) -> CandidatePlan:
    """`CandidatePlan.from_plan(plan)` for a plan of `PlannerInputs` (chars-v1 estimates): a
    managed plan's sent messages are its selected items in order, whose `tokens` are already the
    chars-v1 estimate `from_plan` would compute, so they are reused instead of re-estimated; a
    fallback plan sends the native messages (spec §3.11), whose estimates are the inputs' own
    (`native`: the inputs' native messages and estimates), so they are reused too (issue 32:
    no memo of an estimate per message); any other plan is estimated through `estimates`."""
    if plan.mode != "managed" or len(plan.selected) != len(plan.messages):
        if native is not None and len(native[0]) == len(plan.messages) and all(map(operator.is_, plan.messages, native[0])):
            return CandidatePlan(
                managed=plan.mode == "managed",
                message_hashes=tuple(map(fingerprint, pausing(plan.messages))),
                message_tokens=tuple(native[1]),
                fixed_tokens=plan.planning.fixed_tokens,
                original_message_tokens=plan.planning.original_message_tokens,
                recent_tail_token_limit=plan.planning.recent_tail_token_limit,
                selected_tokens=sum(item.tokens for item in plan.selected),
            )
        if estimates is not None:
            return CandidatePlan.from_plan(plan, estimates, fingerprint=fingerprint)
        return CandidatePlan.from_plan(plan, fingerprint=fingerprint)
    selected_tokens = tuple(item.tokens for item in plan.selected)
    return CandidatePlan(
        managed=True,
        message_hashes=tuple(map(fingerprint, plan.messages)),
        message_tokens=selected_tokens,
        fixed_tokens=plan.planning.fixed_tokens,
        original_message_tokens=plan.planning.original_message_tokens,
        recent_tail_token_limit=plan.planning.recent_tail_token_limit,
        selected_tokens=sum(selected_tokens),
    )


PREVIOUS_PLANS_KEPT = 4
"""Previous requests' plans (their message hashes) a `CacheMonitor` keeps: the last request's
under each tail a view asks for (the configured decision and the `auto` what-if), newest last."""


def _candidates(
    view: PlanView, fingerprint: Callable[[Any], str] = message_fingerprint, grouper: AtomicGrouper | None = None,
    estimates: Estimates | None = None, checkpoint: Callable[[], None] | None = None,
) -> Callable[[int | None], CandidatePlan]:
    """`plan(tail)`: DS4's planner on the inputs of the `LivePlanner` plan `view`
    (`view.inputs`: native messages and their estimates, fixed tokens, pins, calibrated budget
    and ceilings) with `cacheAwareTailTokens = tail`; `plan(None)` is `view`'s own nominal plan.
    Each tail is planned once per call of `_candidates` (the configured decision and the `auto`
    what-if share it); `grouper` is an `AtomicGrouper` kept between calls for a growing session
    (same plans, regrouping only appended messages); `checkpoint` is called before each planner
    run (the app's derive worker yields to a paint there). Results are the numbers DS4's runtime
    reads."""
    inputs = view.inputs
    native = (inputs.planner_messages(), inputs.planner_tokens()) if inputs is not None else None
    nominal = _candidate(view.plan, fingerprint, estimates, native)
    planned: dict[int, CandidatePlan] = {}

    def plan(tail: int | None) -> CandidatePlan:
        if tail is None:
            return nominal
        if tail not in planned:
            if checkpoint is not None:
                checkpoint()
            with paused_gc():  # (one row per message outlives the plan: `ds4sessions.runtime`)
                planned[tail] = _candidate(
                    plan_managed_context(
                        inputs.planner_messages(), fixed_tokens=inputs.fixed_tokens, budget=inputs.budget,
                        config=inputs.config, pinned_message_indices=list(inputs.pins),
                        native_tokens=inputs.planner_tokens(), cache_aware_tail_tokens=tail, grouper=grouper,
                    ),
                    fingerprint, estimates, native,
                )
        return planned[tail]

    return plan


# --- The view --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheView:
    """Everything the cache widgets and `ds4tui cache` show for one snapshot.

    - `clock` / `state`: the countdown basis and the state at the `now` of the view
      (`state_at(now)` recomputes it each second without a new view);
    - `history`: per-request share, tokens, cost check and miss explanations;
    - `decision`: DS4 in the user's configured mode; `what_if`: DS4 in mode `auto` (None when the
      configuration already says `auto`);
    - `cached_prefix_end`: end (exclusive) of the context messages the cache holds after the last
      request (0 when none); grey them on the map when `state.status == "cold"`;
    - `pricing_source`: where the current model's prices come from (data, dated);
    - `bridge_fixed_tokens`: system prompt + tool schema tokens (chars-v1, DS4 `fixedTokens`) of
      the newest request in the bridge's request metadata (None without metadata);
      `bridge_requests`: metadata lines read; `bridge_matched`: history records matched to one;
    - `agent`: the agent whose session this is (`agents.base.AGENTS`).

    With request metadata (docs/bridge.md), a cold request whose reply and previous reply (same
    model) both have a line is explained from the fingerprints ("prefix changed at message N
    (bridge)", or no prefix change when they agree), and
    `cached_prefix_end` compares the last request's fingerprints with the current context's.
    """

    model_key: str | None
    clock: CacheClock
    state: CacheState
    history: CacheHistory
    decision: DecisionView | None
    what_if: DecisionView | None
    cached_prefix_end: int
    pricing_source: str | None
    expiring_s: float = DEFAULT_EXPIRING_SECONDS
    bridge_fixed_tokens: int | None = None
    bridge_requests: int = 0
    bridge_matched: int = 0
    agent: str = "pi"

    def state_at(self, now: float) -> CacheState:
        """The cache state at `now` (epoch seconds) with this view's expiring threshold."""
        return self.clock.state(now, self.expiring_s)

    @classmethod
    def of_facts(cls, facts: CacheFacts, now: float, agent: str) -> CacheView:
        """The view of an agent plug-in's `CacheFacts` at `now` (no DS4 decision: the agent
        decides its own caching)."""
        return cls(
            model_key=facts.model_key, clock=facts.clock, state=facts.clock.state(now, facts.expiring_s),
            history=facts.history, decision=None, what_if=None, cached_prefix_end=facts.cached_prefix_end,
            pricing_source=facts.pricing_source, expiring_s=facts.expiring_s, agent=agent,
        )

    def to_json(self) -> dict[str, Any]:
        """JSON for `ds4tui cache --json`."""
        refresh = self.clock.refresh
        return {
            "agent": self.agent,
            "model": self.model_key,
            "state": {
                **self.state.to_json(),
                "tierSource": self.clock.tier.source,
                "refreshEntryId": refresh.entry_id if refresh else None,
                "refreshKind": refresh.kind if refresh else None,
            },
            "cachedPrefixEnd": self.cached_prefix_end,
            "pricingSource": self.pricing_source,
            "bridgeFixedTokens": self.bridge_fixed_tokens,
            "bridgeRequests": self.bridge_requests,
            "bridgeMatched": self.bridge_matched,
            "history": self.history.to_json(),
            "decision": self.decision.to_json() if self.decision else None,
            "whatIf": self.what_if.to_json() if self.what_if else None,
        }


def _table_source(models: ModelTable) -> str:
    src = models.source
    return f"{src.get('package', 'model table')} {src.get('version', '')} (generated {src.get('generated', '?')})".replace("  ", " ")


class CacheMonitor:
    """Builds `CacheView`s for successive snapshots of one session, caching per-request work.

    `models` prices the requests of every model in the session (default: the bundled table; pass
    the live session's table so `models.json` overrides apply). `retention` is the
    `PI_CACHE_RETENTION` value; `config` the user's DS4 configuration
    (`ds4sessions.derive.ds4config.load_ds4_config`; default DS4's defaults, mode off);
    `expiring_s` the expiring threshold in seconds. The decision reads the nominal plan the
    caller passes to `view` (the pipeline's; its `PlanView.inputs`), and plans only the candidates
    it needs: the extended tail (once per view) and, once per new request, the plan DS4 would have
    sent for the previous request (its own `LivePlanner`, so the pipeline's planner keeps its
    incremental state). `planner` plans the nominal plan when `view` gets none (one-shot use).
    `agent` is Pi's agent dir holding the bridge's channel (default `discovery.agent_dir()`, read
    at each view): when `<agent>/ds4tui/<session-id>/requests.jsonl` exists, each view reads the
    lines appended since the previous view (one offset per session) and matches them to the
    replies (`_match_requests`: same parent leaf, same model, nearest in time). Without the file
    the views are exactly those without a bridge.
    Not thread-safe: call it from the worker that owns the snapshots.
    """

    def __init__(
        self,
        models: ModelTable | None = None,
        *,
        retention: str | None = None,
        config: LoadedDs4Config | None = None,
        expiring_s: float = DEFAULT_EXPIRING_SECONDS,
        agent: Path | None = None,
        planner: LivePlanner | None = None,
    ) -> None:
        self.models = models or ModelTable.bundled()
        self.agent = agent
        self.retention = retention
        self.config = config or LoadedDs4Config(Ds4Config())
        self.expiring_s = expiring_s
        self._planner = planner
        self._previous_planner = LivePlanner(self.config)
        self._changes: dict[tuple[int, str, str], PrefixChange | None] = {}
        self._previous_plans: dict[tuple[int, str, int | None], tuple[str, ...]] = {}
        self._hysteresis: dict[str, tuple[str | None, HysteresisState, HysteresisState]] = {}
        self._logs: dict[Path, _RequestLog] = {}
        self._bridge_changes: dict[tuple[Any, ...], PrefixChange | None] = {}
        self._fingerprints = Fingerprints()
        self._estimates = Estimates()
        self._contexts: dict[tuple[Any, str | None], SessionContext] = {}  # recent contexts by leaf
        # The kept grouping for the candidate plans of a plan that is not `planner`'s (the
        # candidates of `planner`'s plans, and of the previous request's, regroup the same
        # messages as the plan itself: they share its planner's grouping, `_grouper_of`).
        self._candidate_grouper = AtomicGrouper()
        self._checkpoint: Callable[[], None] | None = None  # the current view's (see `view`)
        self._branch_events: tuple[int, list[str | None], list[CacheEvent]] | None = None
        self._sent: tuple[tuple[int, str | None, str | None], SessionContext] | None = None
        # The last cache history and what it depends on besides the events (session, model,
        # price table): the next view extends it when the branch grew (O(new requests)).
        self._history: tuple[tuple[Any, ...], CacheHistory] | None = None

    @property
    def configured_mode(self) -> str:
        """The user's `context.cacheAware.mode` (`off` or `auto`)."""
        return self.config.context.cache_aware.mode

    def view(
        self, snapshot: Snapshot, now: float, plan: PlanView | None = None, *, decide: bool = True,
        checkpoint: Callable[[], None] | None = None,
    ) -> CacheView:
        """The cache view of `snapshot` at `now` (epoch seconds). `plan` is the snapshot's nominal
        `LivePlanner` plan (no supplements); planned here (one-shot use) when None. With
        `decide=False` DS4's cache-aware decision is left out (`decision`/`what_if` None: e.g.
        the nominal plan failed, or the agent does not support DS4 planning). `checkpoint` is
        called before each planner run of the decision (the candidate plans, the previous
        request's plan): see `ds4sessions.derive.pipeline.SessionPipeline.derive`."""
        self._checkpoint = checkpoint
        self._fingerprints.retain(snapshot.context.messages)
        self._estimates.retain(snapshot.context.messages)
        session = snapshot.session
        self._remember_context(snapshot)
        events = self._events(session, snapshot.context.branch_entry_ids)
        model = snapshot.model
        key = snapshot.model_key
        source = _table_source(self.models)

        def info_for(model_key: str | None) -> ModelInfo | None:
            return model if model is not None and model_key == key else self._lookup(model_key)

        def pricing_for(model_key: str | None) -> tuple[Pricing | None, str | None]:
            info = info_for(model_key)
            if info is None:
                return None, None
            return info.pricing, source if info.source == "bundled" else info.source

        def prompt_cache_for(model_key: str | None) -> Mapping[str, int] | None:
            info = info_for(model_key)
            return info.prompt_cache if info is not None else None

        log = self._request_log(session)
        requests = log.requests if log is not None else []
        matched = _match_requests(session, events, log.by_leaf) if log is not None and requests else {}

        def change(previous: CacheEvent, request: CacheEvent) -> PrefixChange | None:
            old, new = matched.get(previous.entry_id or ""), matched.get(request.entry_id or "")
            if old is not None and new is not None and previous.model_key == request.model_key:
                bridge_key = (session.identity, previous.entry_id, request.entry_id, old.seq, old.time, new.seq, new.time)
                if bridge_key not in self._bridge_changes:
                    self._bridge_changes[bridge_key] = bridge_prefix_change(
                        session, previous.entry_id or "", request.entry_id or "", old, new
                    )
                return self._bridge_changes[bridge_key]
            cache_key = (session.identity, previous.entry_id or "", request.entry_id or "")
            if cache_key not in self._changes:
                self._changes[cache_key] = prefix_change(session, previous.entry_id or "", request.entry_id or "")
            return self._changes[cache_key]

        depends = (session.identity, key, source, self.retention, len(requests))  # a new bridge line may explain old misses
        resume = self._history if self._history is not None and self._history[0] == depends else None
        history = cache_history(
            events, pricing_for=pricing_for, prompt_cache_for=prompt_cache_for,
            retention=self.retention, prefix_change=change, resume=resume[1] if resume else None,
        )
        self._history = (depends, history)
        clock = cache_clock(
            events, model_key=key, prompt_cache=model.prompt_cache if model else None, retention=self.retention
        )
        last = next((e for e in reversed(events) if e.counted), None)
        decision = what_if = None
        if decide and model is not None and key is not None:
            if plan is None or plan.inputs is None:
                if self._planner is None:
                    self._planner = LivePlanner(self.config)
                plan = self._planner.plan(snapshot)
            grouper = self._planner.nominal_grouper if self._planner is not None else self._candidate_grouper
            candidates = _candidates(plan, self._fingerprints, grouper, self._estimates, self._checkpoint)
            decision = self._decision(snapshot, plan, candidates, last, self.configured_mode)
            if self.configured_mode != "auto":
                what_if = self._decision(snapshot, plan, candidates, last, "auto")
        return CacheView(
            model_key=key,
            clock=clock,
            state=clock.state(now, self.expiring_s),
            history=history,
            decision=decision,
            what_if=what_if,
            cached_prefix_end=self._cached_prefix_end(snapshot, last, matched.get(last.entry_id or "") if last else None),
            pricing_source=pricing_for(key)[1] if model is not None and model.pricing is not None else None,
            expiring_s=self.expiring_s,
            bridge_fixed_tokens=requests[-1].fixed_tokens if requests else None,
            bridge_requests=len(requests),
            bridge_matched=sum(1 for r in history.records if r.event.entry_id in matched),
            agent=snapshot.agent,
        )

    def _events(self, session: PiSession, branch: Sequence[str | None]) -> list[CacheEvent]:
        """`cache_events(session, branch)`, extending the previous view's events when `branch`
        extends its branch (same reader): O(new entries) plus a C-level prefix comparison."""
        previous = self._branch_events
        if previous is not None:
            identity, old_branch, old_events = previous
            n = len(old_branch)
            if identity == session.identity and len(branch) >= n and branch[:n] == old_branch:
                events = old_events + cache_events(session, branch[n:])
                self._branch_events = (identity, list(branch), events)
                return events
        events = cache_events(session, branch)
        self._branch_events = (session.identity, list(branch), events)
        return events

    def _remember_context(self, snapshot: Snapshot) -> None:
        """Keep the context of `snapshot` by its leaf (the last few): the context a new reply
        answered is the context of the snapshot whose leaf was that reply's parent."""
        branch = snapshot.context.branch_entry_ids
        if not branch:
            return
        self._contexts[(snapshot.session.identity, branch[-1])] = snapshot.context
        while len(self._contexts) > 4:
            self._contexts.pop(next(iter(self._contexts)))

    def _sent_context(self, session: PiSession, entry: Entry) -> SessionContext:
        """The context a reply answered (`build_context` at its parent), memoised for the last
        request: it only changes when a new request appears. When a recent snapshot's leaf was
        that parent, its context is that context (a context at a leaf depends only on the path
        to it): no O(session) rebuild per reply."""
        key = (session.identity, entry.id, entry.parent_id)
        if self._sent is None or self._sent[0] != key:
            known = self._contexts.get((session.identity, entry.parent_id))
            self._sent = (key, known if known is not None else build_context(session, leaf_id=entry.parent_id))
        return self._sent[1]

    def _request_log(self, session: PiSession) -> _RequestLog | None:
        """The session's request-metadata log, polled for new lines; None when the session has
        no usable id or no agent dir can be named."""
        session_id = session.session_id
        if not isinstance(session_id, str):
            return None
        try:
            path = channel_dir(session_id, self.agent) / "requests.jsonl"
        except (ValueError, RuntimeError):
            return None
        log = self._logs.get(path)
        if log is None:
            log = self._logs[path] = _RequestLog(path)
        log.poll()
        return log

    def _lookup(self, model_key: str | None) -> ModelInfo | None:
        if not model_key or "/" not in model_key:
            return None
        provider, model_id = model_key.split("/", 1)
        return self.models.get(provider, model_id)

    def _cached_prefix_end(self, snapshot: Snapshot, last: CacheEvent | None, meta: RequestMeta | None) -> int:
        """Where the last request's cached prefix ends in the current context (see
        `ds4core.cache_state.cached_prefix_end`).

        With the last request's metadata line `meta`: the request sent `len(meta.messages)`
        messages after `meta.fixed_tokens`, and the unchanged prefix is the run of its message
        fingerprints equal to the current context's (`message_fingerprint`). Without: the request
        is the reply's place in the current context and its prompt is rebuilt from the session.
        """
        ctx = snapshot.context
        if last is None:
            return 0
        if meta is not None:
            request_index, fixed = len(meta.messages), meta.fixed_tokens
            unchanged = self._unchanged_prefix(meta, ctx.messages)
        else:
            if last.entry_id not in ctx.message_entry_ids:
                return 0
            request_index, fixed = ctx.message_entry_ids.index(last.entry_id), 0
            entry = snapshot.session.by_id.get(last.entry_id or "")
            unchanged = 0
            if entry is not None:
                sent = self._sent_context(snapshot.session, entry)
                for left, right in zip(sent.messages, ctx.messages):
                    if not _same(left, right):
                        break
                    unchanged += 1
        usage = last.usage
        return cached_prefix_end(
            snapshot.breakdown.message_tokens,
            request_index=request_index,
            unchanged_prefix=unchanged,
            cached_tokens=usage.cache_read + usage.cache_write,
            prompt_tokens=usage.prompt_tokens,
            fixed_tokens=fixed,
        )

    def _unchanged_prefix(self, meta: RequestMeta, messages: Sequence[Any]) -> int:
        """How many leading messages of `messages` have the fingerprints `meta` sent (the memo
        hashes each message once per session)."""
        count = 0
        for sent, message in zip(meta.messages, pausing(messages)):
            if self._fingerprints(message) != sent.fp:
                break
            count += 1
        return count

    def _previous_hashes(self, snapshot: Snapshot, last: CacheEvent | None, tail: int | None) -> tuple[str, ...]:
        """Hashes of the plan DS4 would have sent for the last request (the context as of it,
        with the tail then in force); `()` after a model switch, as in DS4's runtime."""
        if last is None or last.model_key != snapshot.model_key:
            return ()
        entry = snapshot.session.by_id.get(last.entry_id or "")
        if entry is None:
            return ()
        cache_key = (snapshot.session.identity, entry.id or "", tail)
        if cache_key not in self._previous_plans:
            if self._checkpoint is not None:
                self._checkpoint()
            sent = replace(snapshot, context=self._sent_context(snapshot.session, entry))
            self._previous_plans[cache_key] = _candidates(
                self._previous_planner.plan(sent, checkpoint=self._checkpoint), self._fingerprints,
                self._previous_planner.nominal_grouper, self._estimates, self._checkpoint
            )(tail).message_hashes
            # the newest few only (issue 32): one hash per sent message each, and a live session
            # asks for a new request's at each reply (kept all, they grew by O(messages) a reply)
            while len(self._previous_plans) > PREVIOUS_PLANS_KEPT:
                self._previous_plans.pop(next(iter(self._previous_plans)))
        return self._previous_plans[cache_key]

    def _decision(
        self,
        snapshot: Snapshot,
        view: PlanView,
        plan: Callable[[int | None], CandidatePlan],
        last: CacheEvent | None,
        mode: str,
    ) -> DecisionView:
        """DS4 runtime steps 1-3 for the next request in `mode` (spec §4.4), with display extras.

        The hysteresis advances once per new request: the state after the previous view's
        comparison is committed when a newer request appears.
        """
        model = snapshot.model
        assert model is not None
        cache_config = replace(self.config.context.cache_aware, mode=mode)
        last_id = last.entry_id if last else None
        seen, committed, pending = self._hysteresis.get(mode, (last_id, HysteresisState(), HysteresisState()))
        if seen != last_id:
            committed = pending
        before = committed
        pricing = _cache_pricing(model)
        cache = view.awareness.calibration.cache
        nominal_tail = view.awareness.limits.recent_tail_tokens
        active = view.budget.active_input_budget
        decision = decide_cache_aware_tail(
            config=cache_config, pricing=pricing,
            observed_cache_read_share=cache.cache_read_share if cache.sample_count > 0 else None,
            sample_count=cache.sample_count, nominal_recent_tail_tokens=nominal_tail, active_input_budget=active,
        )
        previous = self._previous_hashes(
            snapshot, last, decision.candidate_tail_tokens if before.stick_extended else None
        )
        nominal_plan = plan(None)
        extended_plan = plan(decision.candidate_tail_tokens)
        selection = select_cache_aware_tail(
            before, config=cache_config, pricing=pricing,
            calibration_sample_count=cache.sample_count, calibration_cache_read_share=cache.cache_read_share,
            nominal_recent_tail_tokens=nominal_tail, active_input_budget=active,
            # DS4 plans the extended candidate with decision.recent_tail_tokens, which equals
            # candidate_tail_tokens whenever it asks (eligible and extended): reuse that plan.
            nominal_plan=nominal_plan, plan_extended=lambda tail: extended_plan,
            previous_hashes=previous,
        )
        after = selection.hysteresis_after
        self._hysteresis[mode] = (last_id, committed, after)
        note = None
        if pricing is None:
            note = f"{snapshot.model_key} has no price in the model table: DS4 does not compare"
        elif not nominal_plan.managed:
            note = f"the planner fell back to the whole context ({view.fallback_reason}): DS4 computes no epoch cost"
        if selection.comparison is not None:
            nominal, extended, comparison = selection.nominal_epoch, selection.extended_epoch, selection.comparison
        else:
            def epoch(candidate: CandidatePlan) -> CandidateEpoch | None:
                return candidate_epoch(
                    candidate, previous_hashes=previous, pricing=pricing,
                    requests_per_turn=cache_config.expected_requests_per_turn,
                    turns_per_epoch=cache_config.expected_turns_per_epoch,
                )
            nominal, extended = epoch(nominal_plan), epoch(extended_plan)
            comparison = compare_epoch_costs(
                nominal.epoch_cost if nominal else None, extended.epoch_cost if extended else None,
                cache_config.minimum_improvement_ratio,
            )
        return DecisionView(
            mode=mode,
            configured_mode=self.configured_mode,
            decision=decision,
            selection=selection if selection.decision is not None else None,
            nominal=nominal,
            extended=extended,
            comparison=comparison,
            hysteresis_before=before,
            hysteresis_after=after,
            candidate="cache-aware" if selection.cache_aware_tail_tokens is not None else "nominal",
            note=note,
        )


def cache_view(
    snapshot: Snapshot,
    now: float,
    retention: str | None = None,
    *,
    models: ModelTable | None = None,
    config: LoadedDs4Config | None = None,
    expiring_s: float = DEFAULT_EXPIRING_SECONDS,
) -> CacheView:
    """One-shot `CacheMonitor(models, retention=..., config=..., expiring_s=...).view(snapshot, now)`
    (fresh hysteresis; keep a `CacheMonitor` for a live session)."""
    return CacheMonitor(models, retention=retention, config=config, expiring_s=expiring_s).view(snapshot, now)


# --- Every agent -----------------------------------------------------------------------------


class RequestCacheMonitor:
    """The derive pipeline's cache stage for an agent whose DS4 plan is a what-if (Claude Code,
    Codex, ...): each update, the agent's own `cache_facts(snapshot, now, models)` as a
    `CacheView` (its requests, TTL rules, prices and miss causes; no DS4 decision)."""

    def __init__(self, agent: Any, models: ModelTable | None = None) -> None:
        import inspect

        self.agent = agent
        self.models = models
        try:
            takes_memo = "memo" in inspect.signature(agent.cache_facts).parameters
        except (TypeError, ValueError):
            takes_memo = False
        # what the agent keeps between the snapshots of this session (an optional `memo` keyword)
        self._memo: dict[str, Any] | None = {} if takes_memo else None

    def view(self, snapshot: Snapshot, now: float, plan: PlanView | None = None, *, decide: bool = True,
             checkpoint: Callable[[], None] | None = None) -> CacheView:
        """The cache view of `snapshot` at `now` (epoch seconds); the other arguments as
        `CacheMonitor.view` takes them (unused: no DS4 decision here). An agent whose
        `cache_facts` takes a `memo` keyword gets the same dict at every view of this session
        (for an O(new requests) update)."""
        if self._memo is None:
            facts = self.agent.cache_facts(snapshot, now, self.models)
        else:
            facts = self.agent.cache_facts(snapshot, now, self.models, memo=self._memo)
        return CacheView.of_facts(facts, now, snapshot.agent)


def cache_monitor_for(agent: Any, models: ModelTable | None = None, *, retention: str | None = None,
                      config: LoadedDs4Config | None = None, planner: LivePlanner | None = None,
                      ) -> CacheMonitor | RequestCacheMonitor:
    """The cache stage for `agent`'s sessions: DS4's own monitor (`CacheMonitor`: misses from the
    rebuilt prompts or the bridge's metadata, DS4's cache-aware decision) where DS4's plan is the
    agent's own (`Capabilities.ds4_exact`: DS4 runs inside Pi), else the agent's facts
    (`RequestCacheMonitor`). `planner`: the `LivePlanner` whose nominal plans the views get
    (their candidate plans then share its grouping of the messages: `CacheMonitor`)."""
    if agent.capabilities.ds4_exact:
        return CacheMonitor(models, retention=retention, config=config, planner=planner)
    return RequestCacheMonitor(agent, models)


def session_cache_view(agent: Any, snapshot: Snapshot, now: float, models: ModelTable | None = None) -> CacheView:
    """The cache view of `snapshot` (of `agent`'s session) at `now`, as the dashboard's Cache tab
    shows it: `cache_monitor_for(agent, ...)` with `$PI_CACHE_RETENTION` and DS4's configuration
    for the session's cwd."""
    from ds4sessions.derive.ds4config import load_ds4_config

    config = load_ds4_config(snapshot.session.cwd) if agent.capabilities.ds4_exact else None
    monitor = cache_monitor_for(agent, models, retention=os.environ.get("PI_CACHE_RETENTION"), config=config)
    return monitor.view(snapshot, now)


def session_cache_json(agent: Any, path: Path, at: float | None = None, models: ModelTable | None = None,
                       *, snapshot: Snapshot | None = None) -> dict[str, Any]:
    """`ds4tui cache --json` for `agent`'s session `path` at `at` (epoch seconds; None: the
    session's last entry or request, `session_last_time`): where DS4 runs inside the agent
    (`Capabilities.ds4_exact`), `{"at", ...CacheView.to_json()}` of DS4's monitor (plus
    `warnings` of the configuration); else the agent's own JSON (`Agent.cache_json`, its
    documented shape). `snapshot`: the session already read (else read here)."""
    if not agent.capabilities.ds4_exact:
        return agent.cache_json(path, at=at, models=models)
    import time

    from ds4sessions.agents.plugin import read_snapshot
    from ds4sessions.derive.ds4config import load_ds4_config

    if snapshot is None:
        snapshot = read_snapshot(agent, path, models, exact=False)
    loaded = load_ds4_config(snapshot.session.cwd)
    when = at if at is not None else (session_last_time(snapshot)[0] or time.time())
    view = cache_view(snapshot, when, os.environ.get("PI_CACHE_RETENTION"), models=models, config=loaded)
    return {"at": when, **view.to_json(), **({"warnings": list(loaded.warnings)} if loaded.warnings else {})}


def session_last_time(snapshot: Snapshot) -> tuple[float | None, str]:
    """When the session was last written to, as `ds4tui cache --last` takes it: (Unix seconds or
    None, "entry" | "request"): the last entry with a readable time where the reader keeps the
    entries (Pi), else the last request's time."""
    entries = snapshot.session.entries
    if entries:
        return _last_entry_seconds(entries), "entry"
    last = snapshot.conversation.last_request  # (the main chain's: a side chain's reply refreshes no countdown)
    return (last.timestamp if last is not None else None), "request"


def _last_entry_seconds(entries: Sequence[Any]) -> float | None:
    """Unix seconds of the last entry with a readable timestamp (None without one)."""
    for entry in reversed(entries):
        seconds = _entry_seconds(entry)
        if seconds is not None:
            return seconds
    return None
