"""Live retrieval: DS4's historical retrieval run against a session snapshot, explained.

`LiveRetrieval.retrieve(snapshot)` does what DS4's runtime does on a context event (spec §4.4
steps 1, 4, 5 and §5.4), without pins, memory or project snippets:

1. sync the derived index (`RetrievalIndex`) with the session's new entries;
2. plan the native messages without supplements (the *nominal* plan) and take the entries it
   sends as the exclusion set (0.3.6: a turn the tail walk dropped may come back as evidence);
3. retrieve for the current request (the inputs' task descriptor, spec §5.3) over entries on
   the active branch before it, within the model-aware `maxRetrievedHistoryTokens`;
4. plan again with the retrieval supplements: the planner's supplement pass (§3.6) decides which
   evidence is finally sent.

The planner inputs are the snapshot's `PlannerInputs` (`ds4sessions.derive.inputs`, the one
definition: native messages, fixed tokens, pins, task, calibrated budget), and both plans are
`LivePlanner` plans. Inside the live pipeline (`ds4sessions.derive.pipeline`) the pipeline passes
its inputs and nominal plan and makes the final plan itself (`retrieve(..., final=False)`), so
retrieval adds no planner run of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ds4core.budgets import DEFAULT_CONTEXT_CONFIG, ContextConfig
from ds4core.planner import ManagedContextPlan, SupplementalMessage
from ds4core.retrieval import (
    Candidate,
    RetrievalResult,
    committed_entry_ids,
    planner_outcomes,
    retrieve_history,
)

from ds4sessions.derive.inputs import PlannerInputs
from ds4sessions.derive.planning import LivePlanner
from ds4sessions.derive.retrieval_index import RetrievalIndex, SyncResult, session_db_path
from ds4sessions.ingest.snapshot import Snapshot

__all__ = ["LiveRetrieval", "PlannerInputs", "RetrievalRow", "RetrievalView", "planning_inputs"]


def planning_inputs(snapshot: Snapshot, config: ContextConfig = DEFAULT_CONTEXT_CONFIG) -> PlannerInputs:
    """The planner inputs of `snapshot` with DS4's `context` configuration `config` (one-shot:
    `LivePlanner(context=config).inputs(snapshot)`)."""
    return LivePlanner(context=config).inputs(snapshot)


@dataclass(frozen=True)
class RetrievalRow:
    """One candidate as the Retrieval tab shows it.

    `selected` is True only when the evidence is in the final plan. `why` is "" when selected,
    else the reason: not eligible (already sent, alternate branch, not a message), `maxResults`,
    duplicate content, the retrieval budget (`maxRetrievedHistoryTokens`), or the planner's own
    exclusion (`planner: ...`). `tokens` is the evidence block's estimate when one was rendered,
    else the entry's own estimate.
    """

    entry_id: str
    role: str | None
    entry_type: str
    score: float | None
    reason: str
    selected: bool
    why: str
    tokens: int
    candidate: Candidate

    def to_json(self) -> dict[str, Any]:
        """The core candidate's JSON plus `selected` (final) and `why`."""
        return self.candidate.to_json() | {"selected": self.selected, "why": self.why, "tokens": self.tokens}


@dataclass(frozen=True)
class RetrievalView:
    """Everything the Retrieval tab and `ds4tui retrieve` show for one snapshot.

    - `query_terms`, `descriptor` (via `result`): what the current request asks for;
    - `rows`: every candidate with score, match reason and outcome;
    - `evidence_text`: the evidence blocks the final plan sends, exactly as injected (each is one
      user message; here joined with a blank line), `source_entry_ids` their source entries;
    - `supplements`: what was passed to the planner; `plan`: the final plan (None until the
      pipeline applies it, see `LiveRetrieval.retrieve(final=False)`);
    - `committed_count`: entries the nominal plan sends (excluded from retrieval);
    - `max_tokens` (`maxRetrievedHistoryTokens`) and `selected_tokens` in estimator tokens;
    - `sync`: what the index update did, `index_path` the database; timings in seconds;
    - `agent`: the agent whose session this is (`agents.base.AGENTS`).
    """

    path: str
    session_id: str | None
    request_text: str
    request_entry_id: str | None
    result: RetrievalResult
    rows: tuple[RetrievalRow, ...]
    evidence_text: str
    source_entry_ids: tuple[str, ...]
    supplements: tuple[SupplementalMessage, ...]
    plan: ManagedContextPlan | None
    committed_count: int
    max_tokens: int
    selected_tokens: int
    sync: SyncResult
    index_path: str
    retrieve_seconds: float
    plan_seconds: float
    agent: str = "pi"

    @property
    def status(self) -> str:
        """`disabled`, `no-query`, `complete` or `failed` (DS4's retrieval status)."""
        return self.result.status

    @property
    def query_terms(self) -> tuple[str, ...]:
        """The request's query terms (spec §5.3)."""
        return self.result.descriptor.query_terms if self.result.descriptor else ()

    def to_json(self) -> dict[str, Any]:
        """JSON for `ds4tui retrieve --json`: DS4's retrieval diagnostics (`result`), the rows,
        the injected evidence and the plan's outcome."""
        return {
            "agent": self.agent,
            "path": self.path,
            "sessionId": self.session_id,
            "requestEntryId": self.request_entry_id,
            "requestText": self.request_text,
            "descriptor": self.result.descriptor.to_json() if self.result.descriptor else None,
            "retrieval": self.result.to_json(),
            "rows": [r.to_json() for r in self.rows],
            "evidenceText": self.evidence_text,
            "sourceEntryIds": list(self.source_entry_ids),
            "committedEntryCount": self.committed_count,
            "maxRetrievedHistoryTokens": self.max_tokens,
            "selectedTokens": self.selected_tokens,
            "planning": self.plan.planning.to_json() if self.plan is not None else None,
            "index": {
                "path": self.index_path,
                "added": self.sync.added,
                "rebuilt": self.sync.rebuilt,
                "indexedEntries": self.sync.indexed_entries,
                "syncSeconds": self.sync.seconds,
            },
            "retrieveSeconds": self.retrieve_seconds,
            "planSeconds": self.plan_seconds,
        }


class LiveRetrieval:
    """Runs DS4's retrieval for snapshots of sessions, keeping the derived index up to date.

    Not tied to one session: the index is keyed by session file and id. Call `retrieve` off
    the UI thread (it writes the index and, standalone, plans twice). The index opens on first
    use.
    """

    def __init__(
        self,
        index: RetrievalIndex | None = None,
        *,
        config: ContextConfig = DEFAULT_CONTEXT_CONFIG,
        max_results: int = 12,
        exact: bool = True,
        fts: bool = True,
    ) -> None:
        """`index`: one index for every session (tests, benchmarks); by default each session
        file gets its own (`retrieval_index.session_db_path`). `config` is DS4's `context`
        configuration; `max_results`, `exact`, `fts` are DS4's `retrieval.*` settings."""
        self._index = index
        self._per_session: dict[str, RetrievalIndex] = {}
        self._planners: dict[str, LivePlanner] = {}
        self.config = config
        self.max_results = max_results
        self.exact = exact
        self.fts = fts

    def index_for(self, session_path: str | Path) -> RetrievalIndex:
        """The index of one session file (the shared one when given; opened on first use)."""
        if self._index is not None:
            return self._index
        key = str(session_path)
        if key not in self._per_session:
            self._per_session[key] = open_session_index(session_path)
        return self._per_session[key]

    def planner_for(self, session_path: str | Path) -> LivePlanner:
        """The live planner of one session file for standalone `retrieve` calls (kept, so repeated
        calls on a growing session plan incrementally)."""
        key = str(session_path)
        if key not in self._planners:
            self._planners[key] = LivePlanner(context=self.config)
        return self._planners[key]

    def retrieve(
        self,
        snapshot: Snapshot,
        *,
        committed: Iterable[str] | None = None,
        timestamp: int | None = None,
        inputs: PlannerInputs | None = None,
        final: bool = True,
        checkpoint: Callable[[], None] | None = None,
    ) -> RetrievalView:
        """Retrieve evidence for the snapshot's current request and plan with it.

        `inputs` are the snapshot's planner inputs (default: built by `planner_for(path)`).
        `committed` overrides the exclusion set (entry ids a plan sends, e.g. the pipeline's
        nominal plan); by default it comes from a nominal plan of `inputs`. The current request
        and the entries after it on the branch are always added to it. `timestamp` (ms since the
        epoch) stamps the evidence messages (default: now). `final=False` skips the final plan:
        rows then say what retrieval selected, `plan` is None, and the caller plans with
        `supplements` and applies `ds4sessions.derive.pipeline.with_final_plan`. `checkpoint`,
        when given, is called after the index sync and after the ranking (see
        `ds4sessions.derive.pipeline.SessionPipeline.derive`).
        Raises ValueError when the snapshot's session has no file path.
        """
        session = snapshot.session
        if session.path is None:
            raise ValueError("the snapshot's session has no file path")
        index = self.index_for(session.path)
        sync = index.sync(session)
        if checkpoint is not None:
            checkpoint()
        planner = self.planner_for(session.path) if inputs is None or committed is None or final else None
        if inputs is None:
            assert planner is not None
            inputs = planner.inputs(snapshot)
        started = time.perf_counter()
        if committed is None:
            assert planner is not None
            committed_ids = committed_entry_ids(planner.plan(snapshot, inputs=inputs).plan, inputs.entry_ids)
        else:
            committed_ids = frozenset(committed)
        plan_seconds = time.perf_counter() - started

        request_entry = inputs.request_entry_id
        branch = snapshot.context.branch_entry_ids
        if request_entry in branch:
            # the current turn is mandatory: always sent, never evidence
            committed_ids |= frozenset(branch[branch.index(request_entry) :])
        request_text = inputs.request_text

        started = time.perf_counter()
        result = retrieve_history(
            index.search(sync.session_key),
            request_text,
            active_branch_ids=branch,
            committed_entry_ids=committed_ids,
            max_tokens=inputs.max_retrieved_history_tokens,
            max_results=self.max_results,
            exact=self.exact,
            fts=self.fts,
            timestamp=timestamp if timestamp is not None else int(time.time() * 1000),
        )
        retrieve_seconds = time.perf_counter() - started
        if checkpoint is not None:
            checkpoint()

        supplements = result.supplements()
        final_plan: ManagedContextPlan | None = None
        if final:
            assert planner is not None
            started = time.perf_counter()
            final_plan = planner.plan(snapshot, supplements, inputs=inputs).plan
            plan_seconds += time.perf_counter() - started
        rows, injected = _rows(result, final_plan)
        return RetrievalView(
            path=str(snapshot.path),
            session_id=session.session_id,
            request_text=request_text,
            request_entry_id=request_entry,
            result=result,
            rows=rows,
            evidence_text="\n\n".join(text for _, text in injected),
            source_entry_ids=tuple(entry_id for entry_id, _ in injected),
            supplements=supplements,
            plan=final_plan,
            committed_count=len(committed_ids),
            max_tokens=inputs.max_retrieved_history_tokens,
            selected_tokens=result.selected_tokens,
            sync=sync,
            index_path=str(index.path),
            retrieve_seconds=retrieve_seconds,
            plan_seconds=plan_seconds,
            agent=snapshot.agent,
        )


def _rows(
    result: RetrievalResult, final: ManagedContextPlan | None
) -> tuple[tuple[RetrievalRow, ...], list[tuple[str, str]]]:
    """The rows of `result` and the evidence `(entry id, text)` sent. With the final plan, a
    candidate retrieval selected is selected only when the planner sends its supplement
    (`retrieval:<entry id>`); otherwise its `why` is the planner's exclusion reason, or the
    fallback reason when the plan fell back (a fallback sends no supplement, spec §3.11).
    Without it (`final` None) the rows say what retrieval selected."""
    outcomes = planner_outcomes(final) if final is not None else {}
    rows = []
    injected: list[tuple[str, str]] = []
    for candidate in result.candidates:
        selected = candidate.status == "selected"
        why = candidate.why
        if selected and final is not None:
            sent, planner_reason = outcomes.get(f"retrieval:{candidate.entry_id}", (False, ""))
            if final.mode == "fallback":
                why = f"planner fell back to Pi's context: {final.planning.fallback_reason}"
            elif not sent:
                why = f"planner: {planner_reason}"
            selected = sent and final.mode == "managed"
        if selected and candidate.evidence is not None:
            injected.append((candidate.entry_id, candidate.evidence.text))
        tokens = candidate.evidence.estimated_tokens if candidate.evidence else candidate.token_estimate
        rows.append(
            RetrievalRow(
                candidate.entry_id, candidate.role, candidate.entry_type, candidate.score,
                candidate.reason, selected, why, tokens, candidate,
            )
        )
    return tuple(rows), injected


def open_session_index(session_path: str | Path) -> RetrievalIndex:
    """Open (creating) the derived index of one session file, then keep the indexes under their
    total size cap (`ds4sessions.state.enforce_cap`: least recently opened evicted first, never
    this one). A malformed `$DS4TUI_INDEX_CAP_MB` falls back to the default cap."""
    from ds4sessions import state

    index = RetrievalIndex(session_db_path(session_path))
    try:
        cap = state.index_cap_bytes()
    except ValueError:
        cap = state.DEFAULT_INDEX_CAP_MB << 20
    state.enforce_cap(cap, keep=index.path)
    return index
