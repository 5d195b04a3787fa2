"""The overview over a home directory made of the Pi, Claude Code and Codex samples in tests/fixtures, with
their ids and timestamps moved to now: the list, the countdowns (injected clock), the roll-ups
(real numbers, checked against sums computed here from the raw files), the index."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from pathlib import Path

import pytest

from ds4sessions.agents.registry import all_agents
from ds4sessions.overview.index import OverviewIndex
from ds4sessions.overview.notice import ExpiryNotifier
from ds4sessions.overview.scanner import Overview
from ds4sessions.overview.summary import OverviewSettings, SessionSummary
from ds4sessions.overview.usage import rollup
from tests.overview_home import env_for, place_claude, place_codex, place_pi

AGENTS = {a.name for a in all_agents()}
NEEDS_CLAUDE = pytest.mark.skipif("claude-code" not in AGENTS, reason="the Claude Code plug-in (w11) is not merged here")
NEEDS_CODEX = pytest.mark.skipif("codex" not in AGENTS, reason="the Codex plug-in (w12) is not merged here")


class Home:
    """The placed sessions and the real `now` they were moved to."""

    def __init__(self, root: Path, now: float, placed: dict[str, Path]) -> None:
        self.root = root
        self.now = now
        self.placed = placed

    def overview(self, **settings: object) -> Overview:
        options = {"retention": {"codex": 300}, **settings}
        return Overview(settings=OverviewSettings(**options), now=lambda: self.now)  # type: ignore[arg-type]


@pytest.fixture
def home(tmp_path: Path, samples: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    now = time.time()
    for key, value in env_for(tmp_path).items():
        monkeypatch.setenv(key, value)
    placed = {
        "pi-warm": place_pi(samples, tmp_path, "01-tools-and-image", latest_at=now - 100, mtime=now - 100).path,
        "pi-idle": place_pi(samples, tmp_path, "03-compaction", latest_at=now - 250, mtime=now - 250).path,
        "pi-old": place_pi(samples, tmp_path, "05-extensions-models", latest_at=now - 3 * 86400, mtime=now - 3 * 86400).path,
    }
    if "claude-code" in AGENTS:
        main, *subs = place_claude(samples, tmp_path, latest_at=now - 60, mtime=now - 60)
        placed["claude"] = main.path
        placed["claude-sub"] = subs[0].path
    if "codex" in AGENTS:
        placed["codex"] = place_codex(samples, tmp_path, "rollout-*-7ef9-*.jsonl", latest_at=now - 30, mtime=now - 30).path
    return Home(tmp_path, now, placed)


def _by_path(summaries: list[SessionSummary]) -> dict[str, SessionSummary]:
    return {s.path: s for s in summaries}


def _pi_last_refresh(path: Path) -> float:
    """The request start (ms `timestamp`) of the last assistant reply that read or wrote the
    cache, from the raw file (Pi session format §6)."""
    last = None
    for raw in path.read_bytes().splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        msg = obj.get("message") or {}
        usage = msg.get("usage") or {}
        if msg.get("role") == "assistant" and msg.get("stopReason") not in ("aborted", "error") \
                and (usage.get("cacheRead", 0) + usage.get("cacheWrite", 0)) > 0:
            last = msg["timestamp"] / 1000
    assert last is not None
    return last


def _pi_costs(path: Path) -> tuple[int, float]:
    """(replies with usage, Σ recorded cost in USD) from the raw file."""
    count, total = 0, 0.0
    for raw in path.read_bytes().splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        msg = obj.get("message") or {}
        usage = msg.get("usage") or {}
        if msg.get("role") == "assistant" and (usage.get("input", 0) + usage.get("output", 0)
                                               + usage.get("cacheRead", 0) + usage.get("cacheWrite", 0)):
            count += 1
            total += usage["cost"]["total"]
    return count, total


def test_the_list_covers_every_agent_with_context_and_liveness(home: Home) -> None:
    overview = home.overview()
    summaries = _by_path(overview.load_all())
    assert overview.problems == []
    assert set(summaries) == {str(p) for p in home.placed.values()}
    warm = summaries[str(home.placed["pi-warm"])]
    assert (warm.agent, warm.name, warm.project) == ("pi", "Fix 404 for unknown widget ids", "/home/dev/projects/widget-service")
    assert warm.live is True and summaries[str(home.placed["pi-idle"])].live is False
    # Pi's last reply of 01-tools-and-image: input 6 + cacheRead 5,000 + cacheWrite 65 + output 18
    # (its totalTokens, 5,089) in claude-sonnet-4-5's 200k window
    assert (warm.context_tokens, warm.context_window) == (5089, 200000)
    assert warm.context_percent == pytest.approx(2.5445)
    if "claude" in home.placed:
        claude = summaries[str(home.placed["claude"])]
        assert claude.agent == "claude-code" and claude.live is True
        assert claude.project == "/home/dev/proj-claude" and claude.model == "claude-opus-4-8"
        sub = summaries[str(home.placed["claude-sub"])]
        assert sub.name == "[general-purpose] Count lines in notes.txt"
    if "codex" in home.placed:
        codex = summaries[str(home.placed["codex"])]
        assert (codex.agent, codex.project, codex.context_window) == ("codex", "/home/dev/proj-codex", 190000)


def test_the_scan_reads_each_file_one_slice_of_lines_at_a_time(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    """The overview reads a file in polls of at most `POLL_LINES` lines (`Tailer.polls`: a file
    of millions of tiny lines no longer lands in memory as one list), with the same summaries."""
    from ds4sessions.ingest import tailer

    import shutil

    whole = _by_path(home.overview().load_all())
    shutil.rmtree(home.root / "state")  # (no index: every file is read again)
    monkeypatch.setattr(tailer, "POLL_LINES", 3)
    sizes: list[int] = []
    poll = tailer.Tailer.poll
    monkeypatch.setattr(tailer.Tailer, "poll", lambda self, *a: sizes.append(len((b := poll(self, *a)).lines)) or b)
    sliced = _by_path(home.overview().load_all())
    assert max(sizes) == 3 and sum(sizes) == sum(Path(p).read_bytes().count(b"\n") for p in whole)
    assert {k: (s.context_tokens, s.model, s.name) for k, s in sliced.items()} == \
        {k: (s.context_tokens, s.model, s.name) for k, s in whole.items()}


def test_pi_countdown_follows_the_last_refresh_and_the_model_lifetime(home: Home) -> None:
    summaries = _by_path(home.overview().load_all())
    warm = summaries[str(home.placed["pi-warm"])]
    expires = _pi_last_refresh(home.placed["pi-warm"]) + 300  # claude-sonnet-4-5 promptCache.short
    assert warm.cache.rule == "model-table" and warm.cache.tier == "short"
    assert warm.cache.expires_at_s == pytest.approx(expires, abs=1e-3)
    assert warm.cache_at(expires - 200).words == "warm · 3:20 left"
    assert warm.cache_at(expires - 42).words == "expiring · 0:42 left"
    assert warm.cache_at(expires - 0.2).countdown == "0:01"
    assert warm.cache_at(expires + 1).status == "cold"
    # a last refresh dated more than 300 s after now (a wrong timestamp or clock): no countdown
    assert warm.cache_at(expires - 300 - 300).words == "warm · 10:00 left"
    ahead = warm.cache_at(expires - 300 - 301)
    assert (ahead.status, ahead.words) == ("unknown", "no countdown")
    assert ahead.label == "the last refresh is dated 5 min 1 s in the future (a wrong timestamp or clock), so no countdown"
    old = summaries[str(home.placed["pi-old"])]
    # 05's last reply is deepseek-v4-pro, which declares no promptCache: no countdown, said so
    assert old.cache_at(home.now).status == "unknown"
    assert "declares no prompt-cache lifetime" in (old.cache.reason or "")


@NEEDS_CLAUDE
def test_claude_countdown_uses_the_recorded_write_tier(home: Home) -> None:
    from ds4sessions.agents.claude.agent import ClaudeCodeAgent

    summary = _by_path(home.overview().load_all())[str(home.placed["claude"])]
    rows = [json.loads(r) for r in home.placed["claude"].read_bytes().splitlines() if r.strip()]
    writes = [r["message"]["usage"] for r in rows if r.get("type") == "assistant" and not r.get("isSidechain")
              and (r["message"].get("usage") or {}).get("cache_creation_input_tokens")]
    assert writes[-1]["cache_creation"]["ephemeral_1h_input_tokens"] == 0  # the last write is a 5m write
    assert any(w["cache_creation"]["ephemeral_1h_input_tokens"] > 0 for w in writes)  # the Read's 1h write
    conversation = ClaudeCodeAgent().reader(home.placed["claude"])
    from ds4sessions.ingest.tailer import Tailer

    conversation.feed(Tailer(home.placed["claude"]).poll().lines)
    requests = [r for r in conversation.conversation().requests if not r.synthetic and not r.sidechain]
    last_refresh = [r for r in requests if r.usage.cache_read + r.usage.cache_write > 0][-1].timestamp
    assert summary.cache.rule == "recorded" and summary.cache.tier == "5m" and summary.cache.lifetime_s == 300
    assert summary.cache.expires_at_s == pytest.approx(last_refresh + 300)
    assert summary.cache_at(last_refresh + 250).status == "expiring"


@NEEDS_CODEX
def test_codex_countdown_only_with_a_configured_retention(home: Home) -> None:
    configured = _by_path(home.overview().load_all())[str(home.placed["codex"])]
    assert configured.cache.label == "300 s, typical, not recorded"
    assert configured.cache_at(configured.cache.expires_at_s - 100).words == "warm · 1:40 left"
    # the same index, other settings: the row made with a retention does not answer (re-read)
    plain = _by_path(Overview(settings=OverviewSettings(), now=lambda: home.now).load_all())[str(home.placed["codex"])]
    assert plain.cache_at(home.now).status == "unknown"
    assert "records no cache TTL" in (plain.cache.reason or "")


def test_rollups_count_each_request_once_with_real_numbers(home: Home) -> None:
    summaries = home.overview().load_all()
    pi_files = [home.placed[k] for k in ("pi-warm", "pi-idle", "pi-old")]
    expected = [_pi_costs(p) for p in pi_files]
    by_agent = {r.key: r for r in rollup(summaries, by="agent").rows}
    assert by_agent["pi"].requests == sum(n for n, _ in expected) == 8 + 15 + 9  # 01 has an aborted reply with usage: paid, so counted
    assert by_agent["pi"].cost_usd == pytest.approx(sum(c for _, c in expected), abs=1e-9)
    assert by_agent["pi"].price_sources == {"recorded"}
    by_day = rollup(summaries, by="day")
    today = time.strftime("%Y-%m-%d", time.localtime(home.now))
    assert by_day.rows[-1].key == today
    # `since` keeps the days from `today` on. (Not "all but 05's 9": a placed session's requests
    # keep their spacing before its last one, so after local midnight some fall on yesterday.)
    since_today = rollup(summaries, by="day", since=today).total.requests
    assert since_today == sum(r.requests for r in by_day.rows if r.key >= today) > 0
    assert by_day.total.requests - since_today >= 9  # 05 is 3 days old: none of its 9 is today's
    by_model = {r.key: r for r in rollup(summaries, by="model").rows}
    assert {"claude-sonnet-4-5", "deepseek-v4-pro", "gpt-5.1"} <= set(by_model)
    if "claude-code" in by_agent:
        rows = [json.loads(r) for p in (home.placed["claude"], home.placed["claude-sub"])
                for r in p.read_bytes().splitlines() if r.strip()]
        last_row: dict[str, dict] = {}
        for r in rows:  # streamed rows share message.id: the last one has the final counts
            if r.get("type") == "assistant" and r["message"].get("model") != "<synthetic>":
                last_row[r["message"]["id"]] = r["message"]["usage"]
        claude = by_agent["claude-code"]
        assert claude.requests == len(last_row) == 10
        assert claude.input == sum(u["input_tokens"] for u in last_row.values())
        assert claude.cache_read == sum(u["cache_read_input_tokens"] for u in last_row.values())
        assert claude.cache_write == sum(u["cache_creation_input_tokens"] for u in last_row.values())
        assert claude.output == sum(u["output_tokens"] for u in last_row.values())
        # claude-opus-4-8: input 5, 5m write 6.25, 1h write 10, read 0.5, output 25 USD per million
        usd = sum(u["input_tokens"] * 5 + u["cache_creation"]["ephemeral_5m_input_tokens"] * 6.25
                  + u["cache_creation"]["ephemeral_1h_input_tokens"] * 10 + u["cache_read_input_tokens"] * 0.5
                  + u["output_tokens"] * 25 for u in last_row.values()) / 1e6
        assert claude.cost_usd == pytest.approx(usd)
        from ds4core.claude_prices import price_table  # the table's date (regenerated by scripts/make_agent_models.py)

        assert claude.price_sources == {f"Anthropic pricing page, checked {price_table()['checked']}"}
    if "codex" in by_agent:
        codex = by_agent["codex"]
        assert codex.unpriced == codex.requests > 0 and codex.unpriced_models == {"gpt-5-codex"}
        assert codex.to_json()["costUSD"] is None


def test_the_index_answers_unchanged_files_and_rereads_only_what_grew(home: Home) -> None:
    first = home.overview()
    first.load_all()
    db = home.root / "state" / "overview.sqlite3"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600 and stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    second = home.overview()
    result = second.scan()
    assert result.pending == () and len(result.summaries) == len(home.placed)
    assert second.open_readers == 0  # nothing was read
    # a live file grows: only the appended bytes are read
    path = home.placed["pi-warm"]
    second.update(path)  # one full read; the reader is kept while the file is live
    lines = path.read_bytes().splitlines()
    last = json.loads(lines[-1])
    extra = {**last, "id": "feedbeef", "parentId": last["id"], "type": "session_info", "name": "renamed"}
    size_before = path.stat().st_size
    with path.open("ab") as f:
        f.write(b"\n" + json.dumps(extra).encode() + b"\n")
    os.utime(path, (home.now - 5, home.now - 5))
    reader = second._open[str(path)]
    changed = second.poll()
    assert [s.path for s in changed] == [str(path)] and changed[0].name == "renamed"
    assert reader is second._open[str(path)] and changed[0].offset == path.stat().st_size > size_before
    # the stored row follows
    third = home.overview()
    assert {s.path: s.name for s in third.scan().summaries}[str(path)] == "renamed"


def test_a_deleted_or_foreign_index_is_rebuilt(home: Home) -> None:
    home.overview().load_all()
    db = home.root / "state" / "overview.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version=7")
    index = OverviewIndex(db)
    assert index.rebuilt and "schema version 7" in (index.problem or "")
    assert list(index.paths()) == []
    index.close()
    db.unlink()
    again = home.overview()
    assert len(again.scan().pending) == len(home.placed)
    again.index.close()
    db.write_bytes(b"not a database at all" * 100)
    broken = OverviewIndex(db)
    assert broken.rebuilt and "unreadable" in (broken.problem or "")


def test_the_expiry_notice_fires_once_per_expiry_for_live_sessions(home: Home) -> None:
    summaries = home.overview().load_all()
    warm = next(s for s in summaries if s.path == str(home.placed["pi-warm"]))
    expires = warm.cache.expires_at_s
    assert expires is not None
    notifier = ExpiryNotifier(lead_s=60)
    assert notifier.due(summaries, expires - 61) == []
    due = notifier.due(summaries, expires - 59)
    assert [n.summary.path for n in due if n.summary.agent == "pi"] == [warm.path]
    assert "prompt cache expires in 0:59" in due[0].text if due[0].summary.path == warm.path else True
    assert [n for n in notifier.due(summaries, expires - 30) if n.summary.path == warm.path] == []
    assert notifier.due([warm], expires + 1) == []
    # a new request moves the expiry: announced again
    moved = SessionSummary.from_json({**warm.to_json(), "cache": {**warm.to_json()["cache"], "last_refresh_s": expires}})
    assert [n.summary.path for n in notifier.due([moved], expires + 250)] == [warm.path]
    # idle sessions are off by default
    idle = moved.with_live(False)
    assert ExpiryNotifier(lead_s=60).due([idle], expires + 250) == []
    assert len(ExpiryNotifier(lead_s=60, idle=True).due([idle], expires + 250)) == 1


@NEEDS_CODEX
def test_codex_costs_come_from_the_openai_price_table(home: Home) -> None:
    """A Codex rollout of a model in `openai-prices.json` is priced from that table (the one the
    Codex view uses, with its source and date); one of a model it lacks says "no price"."""
    from ds4sessions.agents.codex import read_rollout
    from ds4sessions.agents.codex.view import price_for, request_cost
    from ds4tui.screens.home import cost_cell
    from tests.overview_home import shifted_copy

    plain = home.placed["codex"]
    priced = plain.with_name(plain.name.replace(plain.stem[-36:], "0" * 8 + plain.stem[-28:]))
    shifted_copy(plain, priced, latest_at=home.now - 40, ids={"gpt-5-codex": "gpt-6.2-sol", plain.stem[-36:]: priced.stem[-36:]})
    os.utime(priced, (home.now - 40, home.now - 40))
    summaries = {s.path: s for s in home.overview().load_all()}
    conversation = read_rollout(priced).conversation()
    expected = [request_cost(r, price_for("gpt-6.2-sol")) for r in conversation.requests]
    assert expected and None not in expected
    summary = summaries[str(priced)]
    by_agent = {r.key: r for r in rollup(list(summaries.values()), by="agent").rows}
    by_model = {r.key: r for r in rollup(list(summaries.values()), by="model").rows}
    assert by_model["gpt-6.2-sol"].cost_usd == pytest.approx(sum(expected), abs=1e-12) and sum(expected) > 0
    assert by_model["gpt-6.2-sol"].unpriced == 0
    (source,) = by_model["gpt-6.2-sol"].price_sources
    assert source.startswith("openai-prices.json, OpenAI list prices 2026-11-29")
    assert by_model["gpt-5-codex"].to_json()["costUSD"] is None and by_model["gpt-5-codex"].unpriced_models == {"gpt-5-codex"}
    assert by_agent["codex"].unpriced_models == {"gpt-5-codex"} and by_agent["codex"].cost_usd == pytest.approx(sum(expected))
    today = time.strftime("%Y-%m-%d", time.localtime(home.now))
    assert cost_cell(summary, today).plain == f"${sum(expected):.4f}"
    assert cost_cell(summaries[str(plain)], today).plain == "no price"


def test_the_light_summary_module_repeats_the_engine_constants_exactly() -> None:
    """`overview.summary` spells out two constants so the first paint loads neither
    `ds4core.cache_state` nor the agent plug-ins; they must stay equal to the originals."""
    from ds4core.cache_state import DEFAULT_EXPIRING_SECONDS
    from ds4sessions.agents.base import CLAUDE_CODE, CODEX, PI
    from ds4sessions.overview import summary

    assert summary.DEFAULT_EXPIRING_SECONDS == DEFAULT_EXPIRING_SECONDS
    from ds4sessions.agents.registry import agent_named

    rules = {name: summary.cache_rule(agent_named(name).capabilities) for name in (PI, CLAUDE_CODE, CODEX)}
    assert rules == {PI: "model-table", CLAUDE_CODE: "recorded", CODEX: "configured"}  # (by capabilities, not names)


def test_the_first_paint_imports_neither_the_agents_nor_the_engine() -> None:
    """A fresh process importing the home screen and loading the index (what the first paint
    needs) does not import the agent plug-ins, the tailer, the cache engine or watchdog."""
    import subprocess
    import sys

    code = ("import sys; from ds4tui.screens.home import HomeScreen; "
            "from ds4sessions.overview.scanner import Overview; "
            "heavy = [m for m in ('ds4core.cache_state', 'ds4sessions.agents.base', 'ds4sessions.agents.registry', "
            "'ds4sessions.ingest.tailer', 'watchdog', 'ds4core.models') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_index_rows_round_trip_and_a_malformed_row_is_reread(home: Home) -> None:
    """Schema 2 stores each summary as a JSON array (`to_row`); every summary survives the
    round trip, and a row of another shape is dropped (then re-read), never a crash."""
    overview = home.overview()
    summaries = overview.load_all()
    assert summaries and all(SessionSummary.from_row(json.loads(json.dumps(s.to_row()))) == s for s in summaries)
    index = overview.index
    victim = summaries[0].path
    with index._lock:
        index._db.execute("UPDATE files SET summary = ? WHERE path = ?", (json.dumps(summaries[0].to_json()), victim))
    loaded = index.load(overview.settings.index_key())
    assert victim not in loaded and len(loaded) == len(summaries) - 1
    again = home.overview().scan()
    assert [str(i.path) for i in again.pending] == [victim]
