"""The one derivation pipeline: the only place that orders the stages after the snapshot.

`SessionPipeline.updates()` runs one step of the hot path and yields, as each is ready:

1. the `Snapshot` with fast chars-v1 counts (first paint),
2. the same snapshot with exact cl100k counts,
3. a `Derived` with the nominal DS4 plan (`PlanView.retrieval_pending` set when retrieval
   follows) and the prompt-cache view: the quick first paint,
4. the same `Derived` with DS4's historical retrieval (it may build the index) and the final
   plan: what DS4 sends, the native messages with the retrieval evidence spliced in (spec §3.1,
   §3.6).

The stages after the snapshot, in order, each run once per step:

    snapshot → PlannerInputs (LivePlanner.inputs: native messages, fixed tokens, pins, task,
    calibrated budget) → nominal plan (LivePlanner.plan, planner run 1) → cache view
    (CacheMonitor.view with that plan: the extended-tail candidate, and once per new request the
    previous request's plan) → timeline (TimelineBuilder.update: the new requests' rows) → retrieval (LiveRetrieval.retrieve with the same inputs, committed =
    the nominal plan's entries, no plan of its own) → final plan with the supplements (planner
    run 2, only when retrieval supplies evidence) → Derived

so every number of one step comes from one set of inputs. DS4 planning and the cache decision
run only when the agent's `capabilities.ds4_plan` allows, retrieval only with
`capabilities.retrieval` and a nominal plan. A failure in a derived stage never stops the others: it is recorded in
`Derived.errors` (the stage name and the exception text) and shown by the app.

Threads: `updates()` is safe to call from an exclusive worker. One step runs at a time: a call
made while another step runs yields nothing and makes the running step poll once more before it
returns (a burst of appends coalesces into one more step instead of blocked threads).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ds4core.models import ModelTable

from ds4sessions.ingest.snapshot import Snapshot

if TYPE_CHECKING:  # the derived stages are imported when a session is first derived (`_setup`):
    # DS4's configuration (pydantic), planner, cache and retrieval cost ~0.4 s of imports that the
    # first paint of a session does not need
    from ds4sessions.agents.base import Capabilities
    from ds4sessions.derive.cache import CacheMonitor, CacheView, RequestCacheMonitor
    from ds4sessions.derive.ds4config import LoadedDs4Config
    from ds4sessions.derive.inputs import PlannerInputs
    from ds4sessions.derive.planning import LivePlanner, PlanView
    from ds4sessions.derive.retrieval import LiveRetrieval, RetrievalView


def agent_of(path: Path) -> Any:
    """The plug-in that reads `path` (`agents.registry.agent_for_path`); the default agent (Pi)
    for a file that does not exist yet, cannot be read, or that no agent recognizes (its reader
    then reports what it found)."""
    from ds4sessions.agents.registry import agent_for_path, default_agent

    try:
        agent = agent_for_path(path)
    except OSError:
        agent = None
    return agent if agent is not None else default_agent()


@dataclass(frozen=True)
class Derived:
    """Views derived from snapshot `version` (immutable).

    - `plan`: the DS4 plan (the nominal one on the first paint, then the final one, supplements
      included, once `retrieval` is set); None when the agent has no DS4 planning or it failed;
    - `cache`: the prompt-cache view; `retrieval`: DS4's historical retrieval (None while not
      computed, failed, or not offered);
    - `inputs`: the `PlannerInputs` every plan of this step used (None without DS4 planning);
    - `errors`: `(stage, message)` pairs; `config`: the DS4 configuration in force;
    - `capabilities`: what the agent supports (`agents.base.Capabilities`); `final`: False on
      the first paint of a step whose retrieval stage follows.
    """

    version: int
    plan: PlanView | None = None
    cache: CacheView | None = None
    retrieval: RetrievalView | None = None
    errors: tuple[tuple[str, str], ...] = ()
    config: LoadedDs4Config | None = None
    inputs: PlannerInputs | None = None
    capabilities: Capabilities | None = None
    final: bool = True
    timeline: Any = None
    """The context over time (`derive.timeline.Timeline`, one row per request of `cache`'s
    history), None when the cache stage failed."""


class SessionPipeline:
    """Owns the live session and the per-session state of its derived views.

    `agent` is the plug-in that reads `path` (default: `agent_of(path)`, the registry's one
    lookup); its `live(path, models)` makes the snapshots and its `cache_monitor(...)` the cache
    views, so this pipeline serves every agent. `config_file` replaces the user's DS4
    configuration files (`--config`); `retention` is the prompt-cache tier override (default:
    `$PI_CACHE_RETENTION`); `retrieval=False` skips the retrieval stage (no index is written).
    """

    def __init__(
        self,
        path: Path,
        models: ModelTable | None = None,
        *,
        config_file: Path | None = None,
        retention: str | None = None,
        retrieval: bool = True,
        agent: Any = None,
    ) -> None:
        self.path = Path(path)
        self.models = models or ModelTable.bundled()
        self.agent = agent if agent is not None else agent_of(self.path)
        self.live = self.agent.live(self.path, self.models)
        self._config_file = config_file
        self._retention = retention if retention is not None else os.environ.get("PI_CACHE_RETENTION")
        self._with_retrieval = retrieval
        self._config: LoadedDs4Config | None = None
        self._planner: LivePlanner | None = None
        self._cache: CacheMonitor | RequestCacheMonitor | None = None
        self._retrieval: LiveRetrieval | None = None
        self._timeline: Any = None  # derive.timeline.TimelineBuilder, made with the first timeline
        self._step_lock = threading.Lock()
        self._again = False

    @property
    def config(self) -> LoadedDs4Config | None:
        """The DS4 configuration in force (loaded with the first snapshot)."""
        return self._config

    def _setup(self, snapshot: Snapshot) -> None:
        if self._config is not None:
            return
        from ds4sessions.derive.cache import cache_monitor_for
        from ds4sessions.derive.ds4config import load_ds4_config
        from ds4sessions.derive.planning import LivePlanner
        from ds4sessions.derive.retrieval import LiveRetrieval

        self._config = load_ds4_config(snapshot.session.cwd, config_file=self._config_file)
        self._planner = LivePlanner(self._config)
        self._cache = cache_monitor_for(self.agent, self.models, retention=self._retention, config=self._config,
                                        planner=self._planner)
        if self._with_retrieval and snapshot.capabilities.retrieval:
            self._retrieval = LiveRetrieval(config=self._config.context)

    def updates(self, force: bool = False, now: float | None = None) -> Iterator[Snapshot | Derived]:
        """One step: poll the file and yield the new snapshot and its derived views, in order
        (nothing when the file did not change and `force` is False). `now` is the clock for the
        cache state (epoch seconds; default: the current time). Equals `snapshots(force)`
        followed by `derive(<the last snapshot>, now)`.

        While another step runs (another worker), yields nothing and has that step poll again."""
        if not self._step_lock.acquire(blocking=False):
            self._again = True
            return
        try:
            while True:
                self._again = False
                yield from self._step(force, now)
                force = False
                if not self._again:
                    break
        finally:
            self._step_lock.release()

    def _step(self, force: bool, now: float | None) -> Iterator[Snapshot | Derived]:
        snap = None
        for snap in self.snapshots(force=force):
            yield snap
        if snap is not None:
            yield from self.derive(snap, now=now)

    def snapshots(self, force: bool = False, limit: int | None = None) -> Iterator[Snapshot]:
        """The ingest half of `updates`: poll the file and yield the new snapshot (chars-v1
        counts), then the same with exact cl100k counts; nothing when the file did not change.
        A small append to a session whose exact counts are in yields only the exact snapshot
        (`LiveSession.refines_quickly`: a few milliseconds), so one estimator stays on screen.
        Drive it from one thread at a time (the app's ingest worker); `updates` is the
        coalescing form for callers that run whole steps from several workers. `limit`: read
        about that many bytes at most (`LiveSession.refresh`): a snapshot with `unread_bytes`
        (no exact counts yet) and the rest at the next call."""
        snap = self.live.refresh(force=force, limit=limit)
        if snap is None:
            return
        if snap.unread_bytes:  # `limit`: a slice of a first read; the exact counts come at its end
            yield snap
            return
        if not self.live.refines_quickly(snap):
            yield snap  # the fast counts first: the exact ones take a while
        yield self.live.refine(snap)

    def prepare(self) -> None:
        """Copy, while nothing waits, what the next append extends (`LiveSession.prepare`);
        from the thread that drives `snapshots`."""
        self.live.prepare()

    def derive(self, snap: Snapshot, now: float | None = None, checkpoint: Callable[[], None] | None = None) -> Iterator[Derived]:
        """The derive half of `updates` for snapshot `snap` (an exact one from `snapshots`): a
        `Derived` with the nominal plan and the cache view, then (with retrieval) the same with
        retrieval and the final plan. Drive it from one thread at a time; it may run on another
        thread than `snapshots` (a snapshot is a value; this touches only the derived stages'
        own state). `checkpoint`, when given, is called before each stage (inputs, plan, cache,
        retrieval, final plan) and before each planner run inside the cache view, on this thread: the app's derive worker waits there while the
        screen paints a newer snapshot, so a pass of tens of milliseconds per stage does not share
        the GIL with the paint of an appended line."""
        self._setup(snap)
        planner, monitor = self._planner, self._cache
        assert planner is not None and monitor is not None
        capabilities = snap.capabilities
        errors: list[tuple[str, str]] = []

        def stage(name: str, errors: list[tuple[str, str]], run: Any) -> Any:
            if checkpoint is not None:
                checkpoint()
            return self._stage(name, errors, run)

        inputs = plan = None
        if capabilities.ds4_plan:
            inputs = stage("inputs", errors, lambda: planner.inputs(snap))
            if inputs is not None:
                plan = stage("plan", errors, lambda: planner.plan(snap, inputs=inputs, checkpoint=checkpoint))
        at = time.time() if now is None else now
        cache = stage("cache", errors, lambda: monitor.view(snap, at, plan, decide=plan is not None, checkpoint=checkpoint))
        timeline = stage("timeline", errors, lambda: self._timeline_of(snap, cache, plan)) if cache is not None else None
        retrieval_follows = self._retrieval is not None and capabilities.retrieval and plan is not None
        first = plan if plan is None or not retrieval_follows else replace(plan, retrieval_pending=True)
        derived = Derived(
            snap.version, first, cache, None, tuple(errors), self._config, inputs, capabilities, final=not retrieval_follows,
            timeline=timeline,
        )
        yield derived
        if not retrieval_follows:
            return
        assert inputs is not None and plan is not None
        retrieval = stage("retrieval", errors, lambda: self._retrieve(snap, inputs, plan, checkpoint))
        final = plan
        if retrieval is not None and retrieval.supplements:
            supplements = retrieval.supplements
            final = stage("final plan", errors, lambda: planner.plan(snap, supplements, inputs=inputs, checkpoint=checkpoint))
            if final is None:
                final = plan  # the nominal plan, with the error shown
        if retrieval is not None and final is not None:
            retrieval = with_final_plan(retrieval, final)
        yield replace(derived, plan=final, retrieval=retrieval, errors=tuple(errors), final=True)

    def _timeline_of(self, snap: Snapshot, cache: CacheView, plan: PlanView | None) -> Any:
        """The timeline stage: the session's `TimelineBuilder` extended by the requests `cache`'s
        history gained (O(new requests + new messages))."""
        from ds4sessions.derive.timeline import TimelineBuilder, timeline_threshold

        if self._timeline is None:
            self._timeline = TimelineBuilder()
        return self._timeline.update(snap, cache.history, threshold=timeline_threshold(snap, plan),
                                     ttl_s=cache.clock.lifetime_s)

    def _retrieve(
        self, snap: Snapshot, inputs: PlannerInputs, plan: PlanView, checkpoint: Callable[[], None] | None
    ) -> RetrievalView:
        assert self._retrieval is not None
        from ds4core.retrieval import committed_entry_ids

        committed = committed_entry_ids(plan.plan, inputs.entry_ids)
        return self._retrieval.retrieve(
            snap, committed=committed, timestamp=_request_timestamp(snap), inputs=inputs, final=False, checkpoint=checkpoint
        )

    @staticmethod
    def _stage(name: str, errors: list[tuple[str, str]], run: Any) -> Any:
        try:
            return run()
        except Exception as exc:  # a derived view must never take the dashboard down
            errors.append((name, f"{type(exc).__name__}: {exc}"))
            return None


def _request_timestamp(snap: Snapshot) -> int | None:
    """The current request's `timestamp` (ms since the epoch; None without one), stamped on the
    evidence messages instead of the wall clock: DS4 stamps them when it sends the request,
    which has not happened yet, and a stable stamp keeps the supplements of one turn identical
    from one tail update to the next, so the live planner extends its grouping of the spliced
    messages instead of regrouping them (the stamp is not counted by chars-v1)."""
    for message in reversed(snap.context.messages):
        if message.get("role") == "user":
            ts = message.get("timestamp")
            return ts if isinstance(ts, int) and not isinstance(ts, bool) and ts >= 0 else None
    return None


def with_final_plan(view: RetrievalView, final: PlanView) -> RetrievalView:
    """`view` with each candidate's outcome, the injected evidence and the plan taken from
    `final` (a `LivePlanner` plan with `view.supplements`), so that the Retrieval tab says
    "selected" exactly for the evidence the manifest includes.

    Same rules as `LiveRetrieval.retrieve` with its final plan: a candidate retrieval fitted is
    selected when the planner sends its supplement
    (`retrieval:<entry id>`); otherwise its `why` is the planner's exclusion reason, or the
    fallback reason when the plan fell back (a fallback sends no supplement, spec §3.11)."""
    from ds4core.retrieval import planner_outcomes

    plan = final.plan
    outcomes = planner_outcomes(plan)
    rows = []
    injected: list[tuple[str, str]] = []
    for row in view.rows:
        candidate = row.candidate
        if candidate.status != "selected":
            rows.append(row)
            continue
        sent, planner_reason = outcomes.get(f"retrieval:{candidate.entry_id}", (False, ""))
        if plan.mode == "fallback":
            why = f"planner fell back to Pi's context: {plan.planning.fallback_reason}"
        elif not sent:
            why = f"planner: {planner_reason}"
        else:
            why = candidate.why
        selected = sent and plan.mode == "managed"
        if selected and candidate.evidence is not None:
            injected.append((candidate.entry_id, candidate.evidence.text))
        rows.append(replace(row, selected=selected, why=why))
    return replace(
        view,
        rows=tuple(rows),
        evidence_text="\n\n".join(text for _, text in injected),
        source_entry_ids=tuple(entry_id for entry_id, _ in injected),
        plan=plan,
    )
