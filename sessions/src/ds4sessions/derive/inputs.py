"""The planner inputs of a snapshot: ONE definition of what DS4's planner gets (issue 10).

`InputsBuilder.build(snapshot) -> PlannerInputs` computes, for the next request of the session on
screen, what DS4's runtime would hand `ds4core.planner.plan_managed_context`. The nominal plan, the
final plan with retrieval supplements, the cache-aware candidate plans and retrieval all read the
same `PlannerInputs`, so a message has one estimate and a plan one budget everywhere:

- **native messages**: the Pi context builder's messages (`snapshot.context.messages`) minus the
  `system` messages, which Pi 1.x stores in the session but DS4 counts as fixed tokens; each with
  its chars-v1 estimate, source entry id, role, manifest key and context index;
- **fixed tokens** (spec §1.3): `text(system prompt) + 8` plus `text(stableStringify(tool)) + 12`
  per active tool, from the in-order replay of the `system` messages (`content`, then `sections`
  in order, joined by blank lines; `toolsAdded` / `toolsRemoved`). Without any system message
  (Pi 0.x sessions) they are inferred from the first reply after the latest compaction:
  its prompt tokens minus the estimate of the messages before it (provider tokens, an
  approximation), else 0;
- **pins** (spec §5.1, `ds4core.planner.is_pin_label`): Pi labels whose trimmed text matches
  `/^ds4:pin(\\s|$)/i` (labels resolve over the whole file, the last one per target wins); the
  labelled entry's messages in the context are pinned. Labels on entries outside the context
  (another branch, compacted away) are `unmapped_pins`;
- **task descriptor** (spec §5.3): the current request (the last native user message), its entry
  and text; `PlannerInputs.task` is DS4's `TaskDescriptor` of it (what retrieval searches for);
- **calibrated budget**: calibration samples (spec §1.4 step 9: the newest `calibrationWindow`
  replies after the latest compaction that are not errors or aborts and have non-zero prompt
  tokens: `actualInputTokens = input + cacheRead + cacheWrite`, `estimatedTokens` = fixed tokens
  at that point + the `chars-v1` estimate of the messages before it, newest first), then the
  session's model through `resolve_model_awareness` and `calculate_context_budget` with the
  user's DS4 configuration (`ds4sessions.derive.ds4config`). An unknown model is planned with Pi's
  default limits (128,000-token window, 16,384 output) and a warning.

Incremental: the builder keeps the latest context's per-message facts (`_ContextIndex`) and
extends them when the next snapshot only appends to that context, so a build after one append
costs O(new messages) plus the calibration samples. `PlannerInputs` is a value: its columns are
prefixes of the builder's append-only lists (`EntryPrefix`), never changed by a later build.
"""

from __future__ import annotations

import operator
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from ds4core.budgets import (
    ContextBudget,
    ContextConfig,
    ModelCost,
    ModelDescriptor,
    ResolvedModelAwareness,
    calculate_context_budget,
    resolve_model_awareness,
)
from ds4core.config import Ds4Config
from ds4core.indices import index_range
from ds4core.estimate import message_tokens, system_prompt_tokens, tool_tokens
from ds4core.models import DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_TOKENS, ModelInfo
from ds4core.planner import is_pin_label
from ds4core.retrieval import TaskDescriptor, current_request_text, describe_task
from ds4core.usage import Usage, is_valid_measurement, usage_of

from ds4sessions.agents.pi.reader import EntryPrefix
from ds4sessions.agents.pi.system import SystemReplay
from ds4sessions.derive.ds4config import LoadedDs4Config
from ds4sessions.derive.manifest import _Columns

__all__ = ["InputsBuilder", "PlannerInputs", "is_pin_label"]


@dataclass(frozen=True)
class PlannerInputs:
    """What DS4's planner gets for the next request of one snapshot (see the module doc). A value.

    Native messages (same length, native order): `messages` (agent-message dicts), `entry_ids`,
    `tokens` (chars-v1 estimator tokens), `roles`, `keys` (manifest keys: `<entry id>#<n>`,
    `@<context index>`), `native_to_ctx` (index in `snapshot.context.messages`).
    Fixed: `fixed_tokens` (estimator tokens) from `fixed_source` ("system": replayed system
    messages, with `system_tokens` and `tools` = ((name, tokens), ...); "inferred": from the first
    reply's usage; "none"). Pins: `pins` (native indices), `pinned_entry_ids` (in context),
    `unmapped_pins`. Task: `request_index` (native index of the current request, None without a
    user message), `request_entry_id`, `request_text`, `task` (`TaskDescriptor`). Budget:
    `descriptor` (the model), `model_assumed` (unknown model: Pi's defaults), `awareness`
    (calibrated, spec §1.4), `budget` (`ContextBudget`), `calibration_samples` (count).
    `warnings`: configuration and model warnings (one sentence each). `version`: the snapshot's.
    `extended`: the builder extended its previous index (False: rebuilt); `estimated_messages`:
    messages estimated for this build (cache misses); `provider_usage`: the usage of the newest
    valid measurement in the context (the provider's last count, None without one).
    """

    version: int
    messages: Sequence[Mapping[str, Any]]
    entry_ids: Sequence[str | None]
    tokens: Sequence[int]
    roles: Sequence[Any]
    keys: Sequence[str]
    native_to_ctx: Sequence[int]
    fixed_tokens: int
    fixed_source: Literal["system", "inferred", "none"]
    system_tokens: int
    tools: tuple[tuple[str, int], ...]
    pins: tuple[int, ...]
    pinned_entry_ids: tuple[str, ...]
    unmapped_pins: tuple[str, ...]
    request_index: int | None
    request_entry_id: str | None
    request_text: str
    descriptor: ModelDescriptor
    model_assumed: bool
    awareness: ResolvedModelAwareness
    budget: ContextBudget
    calibration_samples: int
    warnings: tuple[str, ...] = ()
    extended: bool = False
    estimated_messages: int = 0
    provider_usage: Usage | None = None

    @property
    def config(self) -> ContextConfig:
        """The model-aware `ContextConfig` the planner uses (`awareness.context_config`)."""
        return self.awareness.context_config

    @property
    def max_retrieved_history_tokens(self) -> int:
        """DS4's model-aware retrieval budget (estimator tokens, spec §5.4)."""
        return self.awareness.limits.max_retrieved_history_tokens

    @cached_property
    def task(self) -> TaskDescriptor:
        """DS4's task descriptor of the current request (spec §5.3; made on first use)."""
        return describe_task(self.request_text)

    @property
    def columns(self) -> _Columns:
        """The manifest columns per native message (keys, entry ids, roles, context indices),
        as the builder's lists (index only below `len(messages)`)."""
        return _Columns(_base(self.keys), _base(self.entry_ids), _base(self.roles), _base(self.native_to_ctx))

    def planner_messages(self) -> list[Mapping[str, Any]]:
        """The native messages as the list the planner takes (the builder's own list when it is
        still exactly this prefix, so the planner's grouper can extend its previous grouping)."""
        return _materialize(self.messages)

    def planner_tokens(self) -> list[int]:
        """The native estimates as the list the planner takes (see `planner_messages`)."""
        return _materialize(self.tokens)


def _base(column: Sequence[Any]) -> Sequence[Any]:
    return column.base if isinstance(column, EntryPrefix) else column


def _materialize(column: Sequence[Any]) -> list[Any]:
    if isinstance(column, EntryPrefix):
        base = column.base
        return base if len(base) == len(column) else base[: len(column)]
    return list(column)



def _value_key(message: Mapping[str, Any]) -> tuple[Any, ...]:
    # Scalars by value, containers and strings by identity: a rebuilt summary dict whose fields
    # are the same objects (and timestamp) gets the same key.
    return tuple(
        (k, v if v is None or isinstance(v, (bool, int, float)) else id(v)) for k, v in message.items()
    )


_STABLE_ROLES = frozenset({"assistant", "toolResult", "system"})
"""Roles whose messages are the reader's own dicts in every context built (`build_context`
rebuilds only summaries and custom messages, Pi's `convertToLlm` turns those and bash
executions into user messages): found by identity, so no value key is kept for them (at 50,000
turns the keys of every message held ~180 MiB). A message of these roles rebuilt anyway would
only be estimated again: the same number."""


class _TokenCache:
    """chars-v1 estimates per message, reused at a rebuild from the previous index.

    It keeps nothing of its own between builds (issue 32: an identity memo and a value key per
    message held 14 MiB at 10,000 turns): the messages and estimates of the latest planned
    context are the index's own lists (`_ContextIndex.native`, `.tokens`), and a rebuild (a
    compaction, a branch switch, an edit) looks the new context's messages up in those, by
    identity, or by value for the roles `build_context` may rebuild (`_STABLE_ROLES`), through
    dicts made for that rebuild only. An append estimates its new messages (new objects)."""

    def __init__(self) -> None:
        self.misses = 0

    def estimate(self, messages: Sequence[Any], known: Sequence[Any] = (), known_tokens: Sequence[int] = ()) -> list[int]:
        """Estimates of `messages`, reusing those of `known` (the previous index's messages,
        `known_tokens` their estimates) for the same objects, or equal rebuilt ones."""
        by_id: dict[int, int] = {}
        by_value: dict[tuple[Any, ...], int] = {}
        for i, message in enumerate(known):
            by_id[id(message)] = i
            if isinstance(message, dict) and message.get("role") not in _STABLE_ROLES:
                by_value.setdefault(_value_key(message), i)
        out: list[int] = []
        for message in messages:
            i = by_id.get(id(message))
            if i is None or known[i] is not message:
                i = (by_value.get(_value_key(message))
                     if by_value and isinstance(message, dict) and message.get("role") not in _STABLE_ROLES else None)
            if i is None:
                self.misses += 1
                out.append(message_tokens(message))
            else:
                out.append(known_tokens[i])
        return out

    def extend(self, messages: Sequence[Any]) -> list[int]:
        """Estimates of messages appended to the latest ones (new objects: each estimated)."""
        self.misses += len(messages)
        return [message_tokens(message) for message in messages]


class _SystemReplay(SystemReplay):
    """Pi's system-message replay (`ds4sessions.agents.pi.system.SystemReplay`) plus the fixed
    tokens of the result."""

    def rows(self) -> tuple[int, tuple[tuple[str, int], ...]]:
        """(system prompt tokens, ((tool name, tool tokens), ...)) after the messages replayed so
        far (spec §1.3: `text(prompt) + 8`, `text(stableStringify(tool)) + 12` each)."""
        return system_prompt_tokens(self.prompt), tuple((name, tool_tokens(t)) for name, t in self.tools.items())


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
        # per context message: estimate of the native messages before it (an array: one
        # machine int each, not an int object; read only here)
        self.before: array[int] = array("q")
        self.replay = _SystemReplay()  # system messages replayed so far
        self.system_rows: tuple[int, tuple[tuple[str, int], ...]] = (0, ())  # `replay.rows()`, kept current
        self.system_at: list[tuple[int, int]] = []  # (context index, fixed tokens after that message)
        self.first_fresh = 0
        self._occurrence: dict[str | None, int] = {}
        self._running = 0
        self.measured: array[int] = array("q")  # context indexes of the valid measurements, ascending

    def update(self, ctx: Any, reader: Any) -> bool:
        """Index `ctx` (a `SessionContext` of `reader`'s session); True when the previous index
        was extended rather than rebuilt (or cut back to a shared prefix: `_cut`)."""
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
        if not extended and start > 0 and first == self.first_entry and branch is entry_ids:
            kept = self._cut(messages, entry_ids)
            if kept is not None:
                extended, start = True, kept
        known: tuple[Sequence[Any], Sequence[int]] = ((), ())
        if not extended:
            known = (self.native, self.tokens)  # (reused by the rebuild's estimates, then dropped)
            self.reset()
            start = 0
        new_native = [m for m in messages[start:] if m.get("role") != "system"]
        tokens = iter(self._cache.extend(new_native) if extended else self._cache.estimate(new_native, *known))
        del known
        for index in index_range(start, len(messages)):  # (shared ints: `ds4core.indices`)
            message, entry_id = messages[index], entry_ids[index]
            n = self._occurrence.get(entry_id, 0)
            self._occurrence[entry_id] = n + 1
            self.before.append(self._running)
            role = message.get("role")
            if role == "system":
                self.replay.apply(message)
                self.system_rows = self.replay.rows()
                self.system_at.append((index, self.system_rows[0] + sum(t for _, t in self.system_rows[1])))
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
        for index in range(start, len(messages)):
            if messages[index].get("role") == "assistant" and is_valid_measurement(messages[index]):
                self.measured.append(index)
        self.branch, self.first_entry = list(branch), first
        if not extended or self.first_fresh >= start:
            self.first_fresh = _first_fresh(ctx, reader)
        return extended

    def _cut(self, messages: Sequence[Any], entry_ids: Sequence[str | None]) -> int | None:
        """Cut the index back to the messages it shares with `messages` (a conversation whose
        last message was replaced: Claude Code's next row of a streamed reply) when that is at
        least half of them and no system message is cut; returns how many it kept, or None.

        The lists the planner inputs share (`EntryPrefix` views of earlier inputs) are copied
        (C slices), never shortened in place; O(messages) in C plus O(messages cut) in Python."""
        from itertools import compress, count
        from operator import is_not

        n = min(len(self.messages), len(messages))
        p = next(compress(count(), map(is_not, self.messages[:n], messages[:n])), n)
        while p < n and self.messages[p] == messages[p]:
            p = next(compress(count(p + 1), map(is_not, self.messages[p + 1:n], messages[p + 1:n])), n)
        p = min(p, next(compress(count(), map(operator.ne, self.entry_ids[:p], entry_ids[:p])), p))
        if p < len(self.messages) // 2 or p == 0 or (self.system_at and self.system_at[-1][0] >= p):
            return None
        native = bisect_left(self.native_to_ctx, p)
        self._running -= sum(self.tokens[native:])
        for eid in self.entry_ids[p:]:
            left = self._occurrence.get(eid, 0) - 1
            if left > 0:
                self._occurrence[eid] = left
            else:
                self._occurrence.pop(eid, None)
        self.messages, self.entry_ids, self.before = self.messages[:p], self.entry_ids[:p], self.before[:p]
        self.native, self.tokens, self.keys = self.native[:native], self.tokens[:native], self.keys[:native]
        self.native_entry_ids, self.roles = self.native_entry_ids[:native], self.roles[:native]
        self.native_to_ctx = self.native_to_ctx[:native]
        self.measured = self.measured[:bisect_left(self.measured, p)]
        return p

    def anchor_usage(self) -> Usage | None:
        """The usage of the newest valid measurement in the context (None without one)."""
        return self.measurement(self.measured[-1]) if self.measured else None

    def measurement(self, index: int) -> Usage | None:
        """The usage of context message `index` when it is a valid measurement (an assistant
        reply with non-zero usage, not aborted or an error), else None. Parsed at each call
        (issue 32: a build asks for the calibration window's few replies; keeping one `Usage`
        per reply of the context held ~100 bytes a reply)."""
        message = self.messages[index]
        return usage_of(message) if is_valid_measurement(message) else None



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



class InputsBuilder:
    """Builds `PlannerInputs` for successive snapshots of one session, reusing the previous
    context's per-message facts when the next one only appends to it.

    `config` is the user's DS4 configuration (default: DS4's defaults, no warnings). Not
    thread-safe: one worker builds (the pipeline's).
    """

    def __init__(self, config: LoadedDs4Config | None = None, *, context: ContextConfig | None = None) -> None:
        """`context` replaces `config`'s `context` section (DS4's `ContextConfig`)."""
        self.config = config or LoadedDs4Config(Ds4Config())
        self._context = context if context is not None else self.config.context
        self._awareness = self.config.awareness
        self._cache = _TokenCache()
        self._index = _ContextIndex(self._cache)

    @property
    def context(self) -> ContextConfig:
        """DS4's `context` configuration the inputs are built with."""
        return self._context

    @property
    def estimates(self) -> int:
        """Messages estimated so far (cache misses), over all builds."""
        return self._cache.misses

    def build(self, snapshot: Any) -> PlannerInputs:
        """The planner inputs of `snapshot` (a `ds4sessions.agents.pi.live.Snapshot`). Never raises
        for session content; configuration problems are in `warnings`."""
        misses_before = self._cache.misses
        ctx = snapshot.context
        messages = ctx.messages
        warnings = list(self.config.warnings)
        if not self.config.config.enabled:
            warnings.append("DS4 is disabled in the configuration (enabled: false); showing the plan it would make")
        if self._context.cache_aware.mode == "auto":
            warnings.append("context.cacheAware.mode is auto: the cache-aware tail needs DS4's request history; the nominal plan is shown")
        index = self._index
        extended = index.update(ctx, snapshot.session)
        fixed, fixed_source, samples = self._fixed_and_samples(messages, index)
        pins, pinned_ids, unmapped = _pins(ctx.labels, index.entry_ids, index.native_to_ctx)

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

        n = len(index.native)
        roles = index.roles
        request = next((i for i in range(n - 1, -1, -1) if roles[i] == "user"), None)
        system_tokens, tools = index.system_rows if fixed_source == "system" else (0, ())
        return PlannerInputs(
            version=snapshot.version,
            messages=EntryPrefix(index.native, n),
            entry_ids=EntryPrefix(index.native_entry_ids, n),
            tokens=EntryPrefix(index.tokens, n),
            roles=EntryPrefix(index.roles, n),
            keys=EntryPrefix(index.keys, n),
            native_to_ctx=EntryPrefix(index.native_to_ctx, n),
            fixed_tokens=fixed,
            fixed_source=fixed_source,
            system_tokens=system_tokens,
            tools=tools,
            pins=tuple(pins),
            pinned_entry_ids=pinned_ids,
            unmapped_pins=unmapped,
            request_index=request,
            request_entry_id=index.native_entry_ids[request] if request is not None else None,
            request_text=current_request_text(index.native[request : request + 1]) if request is not None else "",
            descriptor=descriptor,
            model_assumed=assumed,
            awareness=awareness,
            budget=budget,
            calibration_samples=len(samples),
            warnings=tuple(warnings),
            extended=extended,
            estimated_messages=self._cache.misses - misses_before,
            provider_usage=index.anchor_usage(),
        )

    def _fixed_and_samples(
        self, messages: Sequence[Mapping[str, Any]], indexed: _ContextIndex
    ) -> tuple[int, Literal["system", "inferred", "none"], list[dict[str, Any]]]:
        """Fixed tokens (replayed system messages, else inferred) and the newest
        `calibration_window` calibration samples, newest first (see the module docstring).

        Cost: the replies actually sampled (the running estimates come from `indexed`)."""
        before, system_at, fresh_from = indexed.before, indexed.system_at, indexed.first_fresh
        inferred: int | None = None
        measured = indexed.measured
        if not system_at:
            at = bisect_left(measured, fresh_from)
            if at < len(measured):
                usage = indexed.measurement(measured[at])
                assert usage is not None
                inferred = max(0, usage.prompt_tokens - before[measured[at]])

        def fixed_at(index: int) -> int:
            position = bisect_right(system_at, (index, -1)) - 1
            return system_at[position][1] if position >= 0 else inferred or 0

        samples: list[dict[str, Any]] = []
        for index in reversed(measured):
            if len(samples) >= self._awareness.calibration_window or index < fresh_from:
                break
            usage = indexed.measurement(index)
            assert usage is not None
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
