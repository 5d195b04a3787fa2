"""ds4sessions.derive.cache on Pi's own sessions: miss causes, shares, cost cross-check, decision view."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ds4core.config import Ds4Config, apply_source
from ds4core.models import ModelTable
from ds4sessions.derive.cache import CacheMonitor, cache_events, cache_view
from ds4sessions.derive.ds4config import LoadedDs4Config
from ds4sessions.agents.pi.live import LiveSession, open_snapshot


def ds4_config(cache_aware: dict) -> LoadedDs4Config:
    config, warnings, applied = apply_source(Ds4Config(), {"context": {"cacheAware": cache_aware}}, "test")
    assert applied and not warnings
    return LoadedDs4Config(config)


def sample(shared_dir: Path, name: str) -> Path:
    return shared_dir / "sessions-pi" / f"{name}.jsonl"


def test_sample01_costs_equal_catalog(sample01: Path) -> None:
    view = cache_view(open_snapshot(sample01), now=1_772_441_024.433 + 30)
    records = view.history.records
    assert len(records) == 8
    assert all(r.price.agrees is True for r in records)
    assert view.history.disagreements == ()
    assert view.history.catalog_usd == pytest.approx(0.0352749, abs=1e-9)
    assert view.history.recorded_usd == pytest.approx(0.0352749, abs=1e-9)
    first = records[0]
    assert (first.event.usage.cache_write, first.price.catalog_usd) == (1488, pytest.approx(0.006963))
    assert first.price.pricing_source == "@earendil-works/pi-ai 1.6.0 (generated 2026-11-29)"
    # Only the first request missed.
    assert [(r.number, r.miss.cause) for r in view.history.misses] == [(1, "first request")]
    assert view.state.status == "warm" and view.state.countdown == "4:30"
    # The last request (context message 18) had 5065 of its 5071 prompt tokens cached.
    assert view.cached_prefix_end == 18


def test_models_json_price_override_flags_disagreement(sample01: Path) -> None:
    table = ModelTable.bundled().with_user_models(
        {"providers": {"anthropic": {"modelOverrides": {"claude-sonnet-4-5": {"cost": {"cacheRead": 0.5}}}}}}
    )
    snapshot = LiveSession(sample01, table).refresh(force=True)
    assert snapshot is not None
    view = CacheMonitor(table).view(snapshot, now=0)
    # The first request read nothing from the cache, so only the other seven disagree.
    assert [r.number for r in view.history.disagreements] == [2, 3, 4, 5, 6, 7, 8]
    second = view.history.records[1]
    assert second.price.recorded_usd == pytest.approx(0.00480795)
    assert second.price.catalog_usd == pytest.approx(0.00480795 + 1494 * 0.2 / 1e6)
    assert second.price.pricing_source == "models.json"


def test_02_idle_gap_is_ttl_lapse(shared_dir: Path) -> None:
    view = cache_view(open_snapshot(sample(shared_dir, "02-abort-error-bash")), now=0)
    misses = [(r.event.entry_id, r.miss.cause) for r in view.history.misses]
    assert misses == [("9a5cf35b", "first request"), ("beb6eca3", "TTL lapse")]
    lapse = view.history.misses[1].miss
    # Last refresh: f2ff485a, request start 10:07:33.508 (the error reply at 10:08:01 does not
    # count); the miss was sent at 10:17:03.302.
    assert lapse.gap_s == pytest.approx(1772446623.302 - 1772446053.508)
    assert lapse.lifetime_s == 300
    assert lapse.detail == "idle 9 min 30 s since the last refresh; the cache lives 300 s"
    # The aborted reply is shown but not judged; the zero-usage error reply is not a request.
    ids = [r.event.entry_id for r in view.history.records]
    assert "b2ab9905" in ids and "8b185c03" not in ids
    aborted = view.history.records[ids.index("b2ab9905")]
    assert aborted.event.counted is False and aborted.miss is None


def test_03_compaction_changed_the_prefix(shared_dir: Path) -> None:
    view = cache_view(open_snapshot(sample(shared_dir, "03-compaction")), now=0)
    misses = view.history.misses
    assert [(r.event.entry_id, r.miss.cause) for r in misses] == [
        ("48a612bd", "first request"), ("9a9f182d", "prefix changed"), ("4ccd2e4f", "prefix changed")]
    for record, compaction in zip(misses[1:], ("d632457b", "107b9405")):
        change = record.miss.change
        assert (change.kind, change.entry_id) == ("compaction", compaction)
        assert record.miss.gap_s < 300  # not a TTL lapse
    assert misses[1].miss.detail == "compaction d632457b at 13:27:43 changed context message 0"
    # 9a9f182d read 1455 of the 4867 tokens the previous request sent.
    assert misses[1].share == pytest.approx(1455 / 2078)


def test_05_model_changes_cache_warm_and_no_lifetime(shared_dir: Path) -> None:
    snapshot = open_snapshot(sample(shared_dir, "05-extensions-models"))
    events = cache_events(snapshot.reader, snapshot.context.branch_entry_ids)
    warm = [e for e in events if e.kind == "cache_warm"]
    assert [(e.entry_id, e.usage.cache_read) for e in warm] == [("4d0bb153", 1956)]
    view = cache_view(snapshot, now=0)
    changes = [(r.event.entry_id, r.miss.change.entry_id) for r in view.history.misses if r.miss.change]
    assert changes == [("85c73e1a", "5a20d4c4"), ("33c85cd0", "5a4fdfa7"), ("a3293320", "f536edfd")]
    assert view.state.status == "unknown"
    assert view.state.reason == "deepseek/deepseek-v4-pro declares no prompt-cache lifetime (promptCache unset), so no countdown"
    # The context_edit left a tool call without its result: DS4's planner falls back.
    assert view.decision is not None and view.decision.note == (
        "the planner fell back to the whole context (selected tool call toolu_01IADidkfJSk4p2HNOWmFfkh "
        "has no result): DS4 computes no epoch cost")


def test_05_cache_warm_refreshes_the_haiku_clock(shared_dir: Path, tmp_path: Path) -> None:
    # Cut 05 just after the cache_warm usage entry: the clock runs from the warm, not the reply.
    lines = sample(shared_dir, "05-extensions-models").read_text(encoding="utf-8").splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if '"id":"4d0bb153"' in line.replace(" ", ""))
    path = tmp_path / "05-cut.jsonl"
    path.write_text("".join(lines[: cut + 1]), encoding="utf-8")
    warm_at = 1772723202.470  # 2026-03-05T15:06:42.470Z
    view = cache_view(open_snapshot(path), now=warm_at + 250)
    assert view.clock.refresh is not None and view.clock.refresh.entry_id == "4d0bb153"
    assert (view.state.status, view.state.countdown) == ("expiring", "0:50")


def test_b09_share(shared_dir: Path) -> None:
    view = cache_view(open_snapshot(shared_dir / "bad-inputs" / "B09-cacheread-in-context.jsonl"), now=0)
    (record,) = view.history.records
    assert record.share == pytest.approx(51200 / 51320)
    assert f"{record.share:.1%}" == "99.8%"
    assert record.price.catalog_usd == pytest.approx(0.01668) and record.price.agrees is True


def test_decision_off_with_auto_what_if(sample01: Path) -> None:
    view = cache_view(open_snapshot(sample01), now=0)
    decision, what_if = view.decision, view.what_if
    assert decision is not None and what_if is not None
    assert (decision.mode, decision.configured_mode, decision.what_if) == ("off", "off", False)
    assert (what_if.mode, what_if.what_if) == ("auto", True)
    assert decision.selection is None  # mode off: DS4 computes nothing
    gates = {g.name: (g.passed, g.value) for g in what_if.decision.gates}
    # Sonnet 4.5 prices: 3 / 0.3 = 10 < 20; share 0.815526 over 8 samples.
    assert gates == {"mode": (True, "auto"), "missHitRatio": (False, 10.0),
                     "cacheReadShare": (True, 0.815526), "sampleCount": (True, 8)}
    assert what_if.decision.reasons == ("miss-hit-ratio-below-threshold:10.00",)
    assert what_if.candidate == "nominal" and not what_if.compared_by_ds4
    assert what_if.nominal is not None and what_if.extended is not None
    assert what_if.nominal.tail_tokens == 32000 and what_if.extended.tail_tokens == 70000
    # Both candidates send everything here, so they cost the same and the nominal one wins.
    assert what_if.nominal.epoch_cost == what_if.extended.epoch_cost
    assert what_if.comparison.winner == "nominal"
    assert cache_view(open_snapshot(sample01), now=0,
                      config=ds4_config({"mode": "auto"})).what_if is None


def test_decision_eligible_when_gates_pass(sample01: Path) -> None:
    config = ds4_config({"mode": "auto", "minimumMissHitRatio": 5})
    view = cache_view(open_snapshot(sample01), now=0, config=config)
    decision = view.decision
    assert decision is not None and decision.decision.eligible
    assert decision.compared_by_ds4 and decision.selection is not None
    assert decision.decision.reasons == ("cache-aware-tail:70000",)
    assert decision.hysteresis_after.stick_extended is False  # equal costs: extended did not win


def test_monitor_on_99_large_is_fast_enough(shared_dir: Path) -> None:
    snapshot = open_snapshot(sample(shared_dir, "99-large"))
    monitor = CacheMonitor()
    monitor.view(snapshot, now=0)
    started = time.perf_counter()
    view = monitor.view(snapshot, now=0)
    assert time.perf_counter() - started < 1.0
    assert len(view.history.records) == 1110
    causes: dict[str, int] = {}
    for record in view.history.misses:
        causes[record.miss.cause] = causes.get(record.miss.cause, 0) + 1
    assert causes == {"first request": 1, "TTL lapse": 25, "prefix changed": 23, "unexplained": 5}
    kinds = [r.miss.change.kind for r in view.history.misses if r.miss.change]
    assert (kinds.count("compaction"), kinds.count("model change")) == (18, 5)
    # The unexplained ones are gpt-5.1 requests after long idle gaps: no declared lifetime.
    assert {r.event.model_key for r in view.history.misses if r.miss.cause == "unexplained"} == {"openai/gpt-5.1"}
    assert view.history.disagreements == ()
    json.dumps(view.to_json())


def test_fingerprints_are_hashed_once_per_message_object() -> None:
    from ds4core.cache_policy import message_fingerprint
    from ds4sessions.derive.cache import Fingerprints

    a = {"role": "user", "content": "hello"}
    b = {"role": "user", "content": "hello"}  # equal content, another object
    memo = Fingerprints()
    assert memo(a) == memo(b) == message_fingerprint(a)
    a["content"] = "changed in place"  # the memo trusts identity: messages are not mutated
    assert memo(a) == message_fingerprint(b)
    memo.retain([b])
    assert memo(a) == message_fingerprint(a)  # forgotten, hashed anew
    assert memo({"bad": {1, 2}}) == ""  # not JSON-shaped


@pytest.mark.parametrize("context", [None, {"targetFillRatio": 0.01, "softLimitRatio": 0.015, "hardLimitRatio": 0.02}])
def test_candidates_reuse_the_inputs_estimates(context: dict | None) -> None:
    """Issue 32: a candidate plan's estimates come from the plan (managed) or from the planner
    inputs' own column (a fallback sends the native messages) instead of a memo of an estimate
    per message: the same `CandidatePlan` as `from_plan` estimating every sent message."""
    from ds4core.cache_policy import CandidatePlan, message_fingerprint
    from ds4sessions.derive.cache import _candidate
    from ds4sessions.derive.planning import LivePlanner
    from tests.sessions.test_planning_supplements import DEMO, _config

    snapshot = LiveSession(DEMO).refresh()
    assert snapshot is not None
    planner = LivePlanner(_config(context)) if context else LivePlanner()
    view = planner.plan(snapshot)
    assert view.mode == ("fallback" if context else "managed")
    inputs = view.inputs
    native = (inputs.planner_messages(), inputs.planner_tokens())
    expected = CandidatePlan.from_plan(view.plan, fingerprint=message_fingerprint)
    assert _candidate(view.plan, message_fingerprint, None, native) == expected
    assert _candidate(view.plan, message_fingerprint) == expected
