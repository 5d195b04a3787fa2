"""Claude Code on the one dashboard (issue 28): its `/context` categories as the map's, its own
autocompact point and prompt-cache rules.

Every number comes from the same functions as `ds4tui map|cache --json` on the transcript
(`ds4sessions.agents.claude.views.context_map` and `cache_report`), so the dashboard and the JSON
agree by construction:

- the rows are Claude Code's `/context` categories (System prompt, System tools, MCP tools,
  Custom agents, Memory files, Skills), with its Messages row split into our finer kinds (user,
  assistant text, thinking, tool calls, tool results, attachments, compaction summary: their sum
  is `/context`'s Messages), then the Autocompact buffer (reserved space) and Free space;
- the map's message cells: each message's share of its kinds by its own chars/4 estimate
  (`views.message_children`), in context order; the inferred system prompt and tool
  definitions (and Skills, carved out of them as `/context` does) come first, marked inferred;
- the provider's count: the last real reply's `input + cache_creation + cache_read`, plus
  Claude Code's rough estimate of the messages after it (`context_map`'s `total`);
- the cache: `cache_report`'s requests, TTL tier (5m / 1h writes, recorded) and miss causes
  (Claude Code's recorded `cache_miss_reason`, else inferred), priced by `claude_prices`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from ds4core.categories import Breakdown, CategoryRow, CategoryTable, Segment
from ds4core.models import ModelTable
from ds4core.spare import Spares

from ds4sessions.agents.base import Conversation

#: Claude Code's `/context` categories (its ids and labels), Messages split into our kinds.
CLAUDE_TABLE = CategoryTable(
    labels={
        "system_prompt": "System prompt",
        "system_tools": "System tools",
        "mcp_tools": "MCP tools",
        "custom_agents": "Custom agents",
        "memory_files": "Memory files",
        "skills": "Skills",
        "user": "User messages",
        "assistant_text": "Assistant text",
        "thinking": "Thinking",
        "tool_calls": "Tool calls",
        "tool_results": "Tool results",
        "images": "Images",
        "attachments": "Attachments",
        "compaction": "Compaction summary",
        "system_tools_deferred": "System tools (deferred, not in context)",
        "mcp_tools_deferred": "MCP tools (deferred, not in context)",
        "autocompact_buffer": "Autocompact buffer",
        "free": "Free space",
    },
    roles={
        "system_tools": "tools", "system_tools_deferred": "tools_deferred", "mcp_tools": "mcp",
        "custom_agents": "agents", "memory_files": "memory", "skills": "skills", "attachments": "attachments",
        "mcp_tools_deferred": "tools_deferred", "autocompact_buffer": "reserved",
    },
    reserved=("autocompact_buffer",),
    aside=("system_tools_deferred", "mcp_tools_deferred"),
)

_FIXED = ("system_prompt", "system_tools", "mcp_tools", "skills")
"""`/context` rows that are no message of the transcript (the system prompt Claude Code
snapshotted, or inferred from a request's usage)."""
_RESERVED = ("autocompact_buffer",)
_NOT_ROWS = ("messages", "free_space", *_RESERVED)


@dataclass(frozen=True)
class ClaudeExtras:
    """Claude Code's own facts for the screen (`ingest.snapshot.AgentExtras`): the autocompact
    point (`threshold`, tokens until it; None when disabled), `/context`'s Messages row, the
    predicted size after a compaction, and the whole `context_map` JSON (`data`)."""

    data: Mapping[str, Any] = field(repr=False)

    def header_note(self) -> str | None:
        """"autocompact in 143.2k" (or "autocompact off")."""
        from ds4core.tokens import fmt_tokens

        ac = self.data["autocompact"]
        if not ac.get("enabled"):
            return "autocompact off"
        until = ac.get("tokensUntil")
        return None if until is None else f"autocompact in {fmt_tokens(until)}"

    def legend_lines(self) -> list[str]:
        """The `/context` Messages row, the autocompact point and the predicted size after it."""
        from ds4core.tokens import fmt_tokens

        messages = next((t["tokens"] for t in self.data["categories"] if t["id"] == "messages"), 0)
        lines = [f"Messages (as /context counts them) {fmt_tokens(messages)}"]
        ac = self.data["autocompact"]
        if ac.get("enabled"):
            lines.append(f"autocompact at {fmt_tokens(ac['threshold'])}: {fmt_tokens(ac.get('tokensUntil') or 0)} to go")
            if ac.get("predictedAfterCompaction") is not None:
                lines.append(f"after a compaction ≈ {fmt_tokens(ac['predictedAfterCompaction'])}")
        else:
            lines.append("autocompact disabled")
        return lines

    def problems(self) -> list[str]:
        """What the reader's diagnostics do not say: a window ds4tui had to assume (an unknown
        model: "window unknown: assumed 200k") and entry types or attachment kinds this reader
        does not know (`unknownFormats`)."""
        lines = []
        if self.data.get("windowKnown") is False and self.data.get("windowNote"):
            lines.append(str(self.data["windowNote"]))
        unknown = self.data.get("unknownFormats")
        for group, names in unknown.items() if isinstance(unknown, dict) else ():
            # {group: {name: {"count", "bytes"}}} (the reader's `unknownFormats`)
            items = [(str(name), seen.get("count", 0) if isinstance(seen, dict) else seen)
                     for name, seen in (names.items() if isinstance(names, dict) else ())]
            shown = ", ".join(f"{name} ×{count}" for name, count in items[:6])
            more = f", +{len(items) - 6} more" if len(items) > 6 else ""
            lines.append(f"unknown to this reader: {group} {shown}{more}")
        return lines

    def threshold(self) -> int | None:
        """The autocompact threshold in tokens (None when disabled)."""
        ac = self.data["autocompact"]
        return int(ac["threshold"]) if ac.get("enabled") and ac.get("threshold") is not None else None

    def to_json(self) -> dict[str, Any]:
        """`autocompact`, `laterEstimate`, `totalSource`, `fixedInferredFrom`."""
        return {k: self.data.get(k) for k in ("autocompact", "laterEstimate", "totalSource", "fixedInferredFrom")}


class _MapLists:
    """The map's segments (the fixed rows' first, then each message's parts, in context order)
    and the per-message tokens handed to the last snapshot, extended for the next one past the
    messages the tally kept: O(new messages) when `prepare` copied them after the last paint
    (`ds4core.spare`); the lists handed out are never changed."""

    def __init__(self) -> None:
        self.segments: list[Segment] | None = None
        self.tokens: list[int] | None = None
        self.starts: list[int] = []  # per message: where its segments start (after the fixed ones)
        self.n_fixed = 0
        self.kept = 0  # how many leading message tokens the last `update` kept from the list before
        self.spares = Spares()

    def prepare(self) -> None:
        """Copy the handed lists now, for the next `update` (`ConversationLive.prepare`)."""
        if self.segments is not None and self.tokens is not None:
            self.spares.prepare([self.segments, self.tokens])

    def update(self, conv: Conversation, tally: Any, fixed: list[Segment]) -> tuple[list[Segment], list[int]]:
        """(segments, message tokens) of `conv` (`tally` synced to it: `views.MessageTally`)."""
        keep = min(tally.kept, len(self.starts))
        if self.segments is None or self.tokens is None:
            segments, tokens, keep = list(fixed), [], 0
            self.starts = []
        else:
            segments, tokens = self.spares.copy(self.segments), self.spares.copy(self.tokens)
            cut = self.starts[keep] if keep < len(self.starts) else len(segments) - self.n_fixed
            del segments[self.n_fixed + cut:], self.starts[keep:], tokens[keep:]
            segments[:self.n_fixed] = fixed
        self.n_fixed = len(fixed)
        self.kept = keep
        cum, parts, metas = tally.cum, tally.parts, conv.meta
        for i in range(keep, len(conv.messages)):
            entry_id = metas[i].entry_id
            self.starts.append(len(segments) - self.n_fixed)
            tokens.append(cum[i + 1] - cum[i])
            segments.extend(Segment(cid, n, i, entry_id) for cid, _tool, n in parts[i] if n > 0)
        self.segments, self.tokens = segments, tokens
        return segments, tokens


def account(conv: Conversation, memo: dict[str, Any], models: ModelTable | None = None,
            env: Mapping[str, str] | None = None) -> Any:
    """The dashboard's accounting of a Claude Code conversation (module doc): an
    `ingest.conversation.Accounting` whose rows are `context_map`'s `/context` rows exactly."""
    from ds4sessions.agents.claude.views import MessageTally, context_map
    from ds4sessions.ingest.conversation import Accounting, model_info
    from ds4sessions.ingest.snapshot import ProviderView

    tally: MessageTally = memo.setdefault("tally", MessageTally())
    data = context_map(conv, os.environ if env is None else env, tally=tally)
    terms = {t["id"]: t for t in data["categories"]}
    rows: list[CategoryRow] = []
    fixed: list[Segment] = []
    totals: dict[str, int] = {}
    children: dict[str, list[tuple[str, int]]] = {}
    for term in data["categories"]:
        tid = term["id"]
        if tid in _NOT_ROWS:
            continue
        totals[tid] = int(term["tokens"])
        children[tid] = [(c["label"], int(c["tokens"])) for c in term.get("children", ()) if c["tokens"]]
        if tid in _FIXED and term["tokens"] > 0 and not term.get("deferred"):
            fixed.append(Segment(tid, int(term["tokens"]), None, None))
    for child in terms.get("messages", {}).get("children", ()):
        totals[child["id"]] = totals.get(child["id"], 0) + int(child["tokens"])
        children[child["id"]] = [(g["label"], int(g["tokens"])) for g in child.get("children", ()) if g["tokens"]]
    inferred = {t["id"] for t in data["categories"] if t.get("inferred") and t["tokens"]}
    for cid, label in CLAUDE_TABLE.labels.items():
        if cid in _RESERVED or cid == "free":
            continue
        if cid in CLAUDE_TABLE.aside and totals.get(cid, 0) > 0:  # listed, never in the context's total
            rows.append(CategoryRow(cid, label, totals[cid], [], cid in inferred))
            continue
        if totals.get(cid, 0) > 0:
            rows.append(CategoryRow(cid, label, totals[cid], sorted(children.get(cid, []), key=lambda kv: (-kv[1], kv[0])),
                                    cid in inferred))
    for cid, tokens in totals.items():  # a kind `context_map` gives that the table does not name
        if cid not in CLAUDE_TABLE.labels and tokens > 0:
            rows.append(CategoryRow(cid, CLAUDE_TABLE.label(cid), tokens, children.get(cid, [])))
    buffer = int(terms.get("autocompact_buffer", {}).get("tokens", 0))
    if buffer:
        rows.append(CategoryRow("autocompact_buffer", CLAUDE_TABLE.labels["autocompact_buffer"], buffer))
    window = int(data["contextWindow"])
    free = int(terms.get("free_space", {}).get("tokens", 0))
    rows.append(CategoryRow("free", CLAUDE_TABLE.labels["free"], free))
    estimate = int(data["total"])
    lists: _MapLists = memo.setdefault("mapLists", _MapLists())
    segments, message_tokens = lists.update(conv, tally, fixed)
    bd = Breakdown("chars/4", rows, segments, message_tokens, estimate, window, 0, free, CLAUDE_TABLE, buffer)
    provider = None
    p = data.get("provider")
    last = conv.last_request
    if p is not None and p.get("contextTokens") is not None and last is not None and last.message_index is not None:
        index = min(last.message_index, max(len(message_tokens) - 1, 0))
        before = int(p.get("estimateAtAnchor") or 0)
        provider = ProviderView(
            anchor_index=index, anchor_entry_id=p.get("anchorEntryId"), prompt_tokens=int(p["promptTokens"]),
            context_tokens=estimate, estimate_at_anchor=before,
            ratio=(int(p["promptTokens"]) / before) if before else None,
            later_messages=int(p.get("laterMessages") or 0), cache_read=last.usage.cache_read,
            cache_write=last.usage.cache_write,
        )
    model = model_info(conv.provider or "anthropic", conv.model, window, models=models, source="Claude Code")
    key = f"{conv.provider or 'anthropic'}/{conv.model}" if conv.model else None
    return Accounting(bd, provider, model, key, system_inferred=bool(data.get("systemInferred")),
                      extras=ClaudeExtras(data), tokens_kept=lists.kept)


def cache_facts(snapshot: Any, now: float, memo: dict[str, Any] | None = None) -> Any:
    """The prompt cache of a Claude Code snapshot (`ds4core.cache_state.CacheFacts`), made of
    `views.cache_report` at `now`: the same
    requests (real ones: main chain and side chains, synthetic rows left out), cost and miss
    causes as `ds4tui cache --json`; the countdown from the last main-chain request and the TTL
    tier of the latest write (5 min or 1 h, recorded). `memo`: kept between the snapshots of one
    live session (the report's and the records' work is then O(new requests))."""
    import itertools
    import operator

    from ds4core.cache_state import (
        CacheClock, CacheEvent, CacheFacts, CacheHistory, MissExplanation, PriceCheck, RequestRecord, TierChoice,
    )
    from ds4core.usage import Usage

    from ds4sessions.agents.claude.views import cache_report

    conv = snapshot.conversation
    memo = {} if memo is None else memo
    report = cache_report(conv, now, memo.setdefault("report", {}))
    raw = report["history"]["records"]
    seen: list[Any] = memo.get("raw") or []
    made: list[Any] = memo.get("made") or []  # per raw record: (RequestRecord or None, last main event so far,
    # how many RequestRecords up to it)
    keep = min(len(seen), len(raw), len(made))
    if keep and memo.get("pricing") != report["pricingSource"]:
        keep = 0
    if keep:
        keep = next(itertools.compress(itertools.count(), map(operator.is_not, raw[:keep], seen[:keep])), keep)
    del made[keep:]
    records: list[Any] = memo.get("records") or []  # the RequestRecords of `made`, in order
    del records[made[-1][2] if made else 0:]
    count = records[-1].number if records else 0
    last_event = made[-1][1] if made else None
    for r in raw[keep:]:
        if r["synthetic"]:
            made.append((None, last_event, len(records)))
            continue
        usage = Usage(input=r["input"], output=r["output"], cache_read=r["cacheRead"], cache_write=r["cacheWrite"],
                      cache_write_1h=r["cacheWrite1h"])
        key = f"anthropic/{r['model']}" if r["model"] else None
        event = CacheEvent(r["time"] or 0.0, usage, "reply", r["entryId"], key)
        miss = r["miss"]
        explained = None
        if miss is not None:
            detail = f"{miss['cause']} ({miss['source']})"
            gap = miss.get("gapSeconds")
            explained = MissExplanation(_cause(miss["cause"]), detail, gap, None)
        price = PriceCheck(r["costUsd"], None, None, report["pricingSource"] if r["costUsd"] is not None else None)
        count += 1
        if not r["sidechain"]:
            last_event = event
        record = RequestRecord(count, event, r["share"], price, miss is not None, explained)
        records.append(record)
        made.append((record, last_event, len(records)))
    memo.update(raw=raw, made=made, records=records, pricing=report["pricingSource"])
    state = report["state"]
    tier = state["tier"]
    lifetime = 3600 if tier == "1h" else 300 if tier == "5m" else None
    refresh = last_event if state["anchor"] is not None else None
    clock = CacheClock(snapshot.model_key, refresh, TierChoice("long" if tier == "1h" else "short",
                       "recorded: Claude Code's cache writes (ephemeral 5m / 1h)"), lifetime,
                       None if lifetime is not None else "no cache write recorded yet: no countdown")
    end = 0
    last = conv.last_request
    if last is not None and last.message_index is not None and last.usage.cache_read + last.usage.cache_write > 0:
        from ds4core.cache_state import cached_prefix_end

        end = cached_prefix_end(snapshot.best.message_tokens, request_index=last.message_index,
                                unchanged_prefix=last.message_index,
                                cached_tokens=last.usage.cache_read + last.usage.cache_write,
                                prompt_tokens=last.usage.prompt_tokens)
    return CacheFacts(snapshot.model_key, clock, CacheHistory(tuple(records)), end, report["pricingSource"])


def _cause(cause: str) -> Any:
    """Claude Code's and our inferred miss causes in `ds4core.cache_state`'s words."""
    return {"ttl_expired": "TTL lapse", "ttl lapse": "TTL lapse", "first request": "first request"}.get(
        str(cause).lower(), "prefix changed" if "changed" in str(cause) or "compaction" in str(cause) else "unexplained")
