"""Compaction: preview Pi's cut point and cost, then summarise through a cache-reusing request.

Preview (`preview_compaction`) ports Pi 1.6.0's `prepareCompaction` (`dist/core/compaction/
compaction.js`; Pi session format §9): the projected context of the current branch, the previous
compaction's kept tail as the start, Pi's chars/4 `estimateTokens`, `findProjectedCutPoint`
(walk back from the newest entry until `keepRecentTokens` is reached, cut at the nearest valid
cut point at or after it — never a tool result — and pull adjacent metadata into the kept part),
split turns, `tokensBefore` (`estimateProjectedContextTokens`) and the file lists (read / edit /
write tool calls plus the previous compaction's `details`). Settings: `compaction.reserveTokens`
(16384) and `compaction.keepRecentTokens` (20000) from Pi's `settings.json` (global, then the
project's `.pi/settings.json`, then `compaction.modelOverrides["provider/model"]`).

Trigger (`compact`): unlike Pi (which serialises the history into one cold request with caching
disabled), ds4tui replays the previous request's messages as the prefix of the summary request,
so a warm prompt cache serves it, then asks for Pi's summary format (Goal … Critical Context)
in a final user message. The request goes through `ds4sessions.steering.summary_client` (httpx,
an OpenAI-compatible `/v1/chat/completions` or an Anthropic `/v1/messages` endpoint,
`Endpoint.from_env`; the key is sent in a header only, never logged, stored or put in an error
message). A timeout, an HTTP
error, a reply above 8 MiB (refused while it streams), a truncated, invalid or malformed reply
(`summary_client.parse_reply`), a summary cut by the token cap, or a compaction line that would
pass the reader's line cap (`check_line_size`) raises `CompactionFailed` and leaves the session
untouched. On success a `compaction` entry is
appended (`summary` + Pi's `<read-files>`/`<modified-files>` lists, `firstKeptEntryId`,
`tokensBefore`, `details`, `usage`, and the replayed `systemMessage` as Pi 1.x writes it).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ds4core.jsjson import stringify, utf16_len
from ds4core.models import ModelInfo
from ds4core.usage import is_valid_measurement, usage_of

from ds4sessions.agents.pi.discovery import agent_dir
from ds4sessions.agents.pi.context import (
    SessionContext,
    branch_path,
    build_context,
    convert_to_llm,
    iso_to_ms,
)
from ds4sessions.agents.pi.entries import COMPACTION, CONTEXT_EDIT, Entry
from ds4sessions.agents.pi.reader import PiSession
from ds4sessions.agents.pi.system import content_text as _content_text
from ds4sessions.agents.pi.system import current_system_message
from ds4sessions.steering.summary_client import (
    DEFAULT_RESERVE_TOKENS,
    CompactionFailed,
    Endpoint,
    SummaryReply,
    provider_request,
    request_summary,
)
from ds4sessions.steering.writer import (
    QUIET_SECONDS,
    Draft,
    Expected,
    FileState,
    Journal,
    WriteRefused,
    WriteResult,
    append_entries,
    check_writable,
    iso_now,
    read_state,
)

__all__ = [
    "CompactionFailed",
    "CompactionOutcome",
    "CompactionPreview",
    "CompactionSettings",
    "Endpoint",
    "SummaryCost",
    "SummaryReply",
    "compact",
    "format_file_operations",
    "load_compaction_settings",
    "pi_estimate_tokens",
    "preview_compaction",
    "provider_request",
    "request_summary",
    "serialize_conversation",
    "summary_instruction",
    "summary_request",
]
"""`CompactionFailed`, `Endpoint`, `SummaryReply`, `provider_request` and `request_summary` live in
`ds4sessions.steering.summary_client` and are re-exported here."""

DEFAULT_KEEP_RECENT_TOKENS = 20000
SUMMARY_OUTPUT_TOKENS = 1000
"""Output tokens assumed for a summary when pricing a request before it is made."""

SUMMARIZATION_PROMPT = """The messages above are a conversation to summarize. Create a structured context checkpoint summary that another LLM will use to continue the work.

Use this EXACT format:

## Goal
[What is the user trying to accomplish? Can be multiple items if the session covers different tasks.]

## Constraints & Preferences
- [Any constraints, preferences, or requirements mentioned by user]
- [Or "(none)" if none were mentioned]

## Progress
### Done
- [x] [Completed tasks/changes]

### In Progress
- [ ] [Current work]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [Ordered list of what should happen next]

## Critical Context
- [Any data, examples, or references needed to continue]
- [Or "(none)" if not applicable]

Keep each section concise. Preserve exact file paths, function names, and error messages."""
"""Pi 1.6.0's `SUMMARIZATION_PROMPT` (compaction.js), verbatim."""

NO_CONTINUE = (
    "Do NOT continue the conversation. Do NOT respond to any questions in the conversation. "
    "ONLY output the structured summary."
)
"""From Pi's `SUMMARIZATION_SYSTEM_PROMPT` (the system prompt is replayed, so it goes here)."""


# --------------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True)
class CompactionSettings:
    """Pi's compaction settings (tokens): `reserve_tokens`, `keep_recent_tokens`, `enabled`."""

    reserve_tokens: int = DEFAULT_RESERVE_TOKENS
    keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS
    enabled: bool = True


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_compaction_settings(cwd: str | None = None, model_key: str | None = None, agent: Path | None = None) -> CompactionSettings:
    """Compaction settings as Pi resolves them (Pi session format §9): defaults, then
    `<agentDir>/settings.json`, then `<cwd>/.pi/settings.json`, then
    `compaction.modelOverrides[model_key]` (`"provider/modelId"`). Unreadable files are ignored."""
    values: dict[str, Any] = {"reserveTokens": DEFAULT_RESERVE_TOKENS, "keepRecentTokens": DEFAULT_KEEP_RECENT_TOKENS, "enabled": True}
    overrides: dict[str, Any] = {}
    files = [(agent or agent_dir()) / "settings.json"]
    if cwd:
        files.append(Path(cwd) / ".pi" / "settings.json")
    for file in files:
        section = _read_json(file).get("compaction")
        if isinstance(section, dict):
            values.update({k: v for k, v in section.items() if k in values})
            if isinstance(section.get("modelOverrides"), dict):
                overrides.update(section["modelOverrides"])
    if model_key and isinstance(overrides.get(model_key), dict):
        values.update({k: v for k, v in overrides[model_key].items() if k in ("reserveTokens", "keepRecentTokens")})

    def number(key: str, default: int) -> int:
        v = values[key]
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else default

    return CompactionSettings(
        number("reserveTokens", DEFAULT_RESERVE_TOKENS), number("keepRecentTokens", DEFAULT_KEEP_RECENT_TOKENS),
        values["enabled"] is not False,
    )


# --------------------------------------------------------------------------------------------
# Pi's estimates and cut point


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return utf16_len(content)
    chars = 0
    for block in content or ():
        if isinstance(block, Mapping):
            if block.get("type") == "text" and block.get("text"):
                chars += utf16_len(block["text"])
            elif block.get("type") == "image":
                chars += 4800
    return chars


def pi_estimate_tokens(message: Mapping[str, Any]) -> int:
    """Pi's `estimateTokens(message)` (compaction.js): ceil(chars / 4), chars in UTF-16 units,
    images 4800 chars, tool calls name + JSON arguments, system sections and tools included."""
    role = message.get("role")
    chars = 0
    if role == "system":
        chars = _content_chars(message.get("content"))
        for section in (message.get("sections") or {}).values():
            if isinstance(section, str):
                chars += utf16_len(section)
        if message.get("toolsAdded"):
            chars += utf16_len(stringify(message["toolsAdded"]) or "")
    elif role in ("user", "custom", "toolResult"):
        chars = _content_chars(message.get("content"))
    elif role == "assistant":
        for block in message.get("content") or ():
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "text":
                chars += utf16_len(block.get("text") or "")
            elif kind == "thinking":
                chars += utf16_len(block.get("thinking") or "")
            elif kind == "toolCall":
                chars += utf16_len(block.get("name") or "") + utf16_len(stringify(block.get("arguments")) or "")
    elif role == "bashExecution":
        chars = utf16_len(str(message.get("command") or "")) + utf16_len(str(message.get("output") or ""))
    elif role in ("branchSummary", "compactionSummary"):
        chars = utf16_len(str(message.get("summary") or ""))
    else:
        return 0
    return math.ceil(chars / 4)


_CUT_ROLES = frozenset({"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"})
_TURN_START_ROLES = _CUT_ROLES - {"assistant"}


@dataclass(frozen=True)
class _Projected:
    entry: Entry
    messages: list[dict[str, Any]]

    @property
    def is_compaction(self) -> bool:
        return self.entry.type == COMPACTION

    def has_role(self, roles: frozenset[str]) -> bool:
        return any(m.get("role") in roles for m in self.messages)


def _projection(session: PiSession, ctx: SessionContext) -> list[_Projected]:
    """Pi's `buildSessionProjection` entries: each selected entry with the messages it yields."""
    by_position = {e.id: e for e in branch_path(session)}
    result: list[_Projected] = []
    index = 0
    for eid in ctx.context_entry_ids:
        messages = []
        while index < len(ctx.messages) and ctx.message_entry_ids[index] == eid:
            messages.append(ctx.messages[index])
            index += 1
        result.append(_Projected(by_position[eid], messages))
    return result


def _intrinsic_messages(entry: Entry) -> bool:
    """True when the entry yields a context message before context edits (Pi's
    `sessionEntryToContextMessages(entry).length > 0`)."""
    if entry.type == "message":
        return entry.message is not None
    if entry.type == "branch_summary":
        return bool(entry.raw.get("summary"))
    return entry.type in ("custom_message", COMPACTION)


def _find_cut_point(entries: list[_Projected], start: int, end: int, keep_recent: int) -> tuple[int, int, bool]:
    """Pi's `findProjectedCutPoint`: (firstKeptEntryIndex, turnStartIndex, isSplitTurn)."""
    cut_points = [i for i in range(start, end) if not entries[i].is_compaction and entries[i].has_role(_CUT_ROLES)]
    if not cut_points:
        return start, -1, False
    accumulated = 0
    exceeded = False
    cut = cut_points[0]
    for i in range(end - 1, start - 1, -1):
        tokens = sum(pi_estimate_tokens(m) for m in entries[i].messages)
        if tokens == 0:
            continue
        accumulated += tokens
        if accumulated >= keep_recent:
            exceeded = True
            cut = next((c for c in cut_points if c >= i), cut_points[-1])
            break
    suffix = entries[cut + 1 : end]

    def visible(p: _Projected) -> bool:
        return p.entry.type != CONTEXT_EDIT and _intrinsic_messages(p.entry)

    def omitted(p: _Projected) -> bool:
        return visible(p) and not p.messages

    omitted_ids = {p.entry.id for p in suffix if omitted(p)}
    external_replacement = any(
        p.entry.type == CONTEXT_EDIT and p.entry.raw.get("replacement") is not None
        and p.entry.raw.get("targetId") not in omitted_ids
        for p in suffix
    )
    if (
        exceeded
        and not external_replacement
        and any(p.entry.role == "assistant" and omitted(p) for p in suffix)
        and all(not p.is_compaction and (not visible(p) or omitted(p)) for p in suffix)
    ):
        cut += 1
    while cut > start:
        previous = entries[cut - 1]
        if previous.is_compaction or previous.messages:
            break
        cut -= 1

    def turn_start(p: _Projected) -> bool:
        return not p.is_compaction and p.has_role(_TURN_START_ROLES)

    if turn_start(entries[cut]):
        return cut, -1, False
    turn = next((i for i in range(cut, start - 1, -1) if turn_start(entries[i])), -1)
    return cut, turn, turn != -1


def _file_ops(messages: Sequence[Mapping[str, Any]], read: set[str], edited: set[str]) -> None:
    """Pi's `extractFileOpsFromMessage` over `messages` (read / write / edit `path` arguments)."""
    for message in messages:
        calls: list[tuple[Any, Any]] = []
        if message.get("role") == "toolResult":
            nested = message.get("nestedCalls")
            calls = [(c.get("name"), c.get("arguments")) for c in (nested.get("calls") if isinstance(nested, Mapping) and isinstance(nested.get("calls"), list) else ())
                     if isinstance(c, Mapping)]
        elif message.get("role") == "assistant" and isinstance(message.get("content"), list):
            calls = [(b.get("name"), b.get("arguments")) for b in message["content"] if isinstance(b, Mapping) and b.get("type") == "toolCall"]
        for name, args in calls:
            path = args.get("path") if isinstance(args, Mapping) else None
            if isinstance(path, str) and path:
                if name == "read":
                    read.add(path)
                elif name in ("write", "edit"):
                    edited.add(path)


def format_file_operations(read_files: Sequence[str], modified_files: Sequence[str]) -> str:
    """Pi's `formatFileOperations`: the `<read-files>` / `<modified-files>` blocks appended to a summary."""
    sections = []
    if read_files:
        sections.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        sections.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(sections) if sections else ""


def _projected_context_tokens(projection: list[_Projected], ctx: SessionContext, path: list[Entry]) -> int:
    """Pi's `estimateProjectedContextTokens`: last valid usage + later estimates, unless a context
    edit or compaction on the branch is newer than that usage (then everything is estimated)."""
    messages = ctx.messages
    last = next((i for i in range(len(messages) - 1, -1, -1) if _pi_valid_usage(messages[i])), None)
    if last is not None:
        usage_entry = ctx.message_entry_ids[last]
        usage_index = next((i for i, e in enumerate(path) if e.id == usage_entry), -1)
        invalidating = max((i for i, e in enumerate(path) if e.type in (CONTEXT_EDIT, COMPACTION)), default=-1)
        if usage_index > invalidating:
            u = usage_of(messages[last])
            total = u.total_tokens or (u.input + u.output + u.cache_read + u.cache_write)
            return total + sum(pi_estimate_tokens(m) for m in messages[last + 1 :])
    system = current_system_message(messages)
    tokens = pi_estimate_tokens(system) if system else 0
    return tokens + sum(pi_estimate_tokens(m) for m in messages if m.get("role") != "system")


def _pi_valid_usage(message: Mapping[str, Any]) -> bool:
    """Pi's `getAssistantUsage` test: assistant, not aborted/error, usage total > 0."""
    if message.get("role") != "assistant" or message.get("stopReason") in ("aborted", "error"):
        return False
    if not isinstance(message.get("usage"), Mapping):
        return False
    u = usage_of(message)
    return (u.total_tokens or (u.input + u.output + u.cache_read + u.cache_write)) > 0


@dataclass(frozen=True)
class CompactionPreview:
    """What Pi's compaction would do now (nothing written). Tokens are Pi's estimates.

    - `first_kept_entry_id`, `is_split_turn`, `tokens_before` (Pi's `tokensBefore`);
    - `messages_to_summarize`, `turn_prefix_messages` (split turn), `kept_messages` (stay verbatim);
    - `previous_summary` (from the previous compaction, if any);
    - `read_files`, `modified_files`: Pi's `details` lists;
    - `kept_tokens`: Pi's estimate of the kept messages; `tokens_after` estimates the context
      after compacting (system prompt + assumed summary + kept), `summary_tokens` the assumption;
    - `settings`, `context_window` (None when unknown), `over_threshold`: Pi would compact on its
      own (`tokens_before > context_window − reserve_tokens`);
    - `cost`: cached vs cold summary request (see `SummaryCost`), None without prices.
    """

    first_kept_entry_id: str
    is_split_turn: bool
    tokens_before: int
    messages_to_summarize: list[dict[str, Any]]
    turn_prefix_messages: list[dict[str, Any]]
    kept_messages: list[dict[str, Any]]
    previous_summary: str | None
    read_files: list[str]
    modified_files: list[str]
    kept_tokens: int
    summary_tokens: int
    tokens_after: int
    settings: CompactionSettings
    context_window: int | None
    over_threshold: bool
    cost: SummaryCost | None
    expected: Expected


@dataclass(frozen=True)
class SummaryCost:
    """Price of the summary request (USD; tokens), assuming `output_tokens` of summary.

    - cached: the previous request's prompt (`prefix_tokens`, the provider-measured prompt of the
      last valid reply) read from the prompt cache, plus `fresh_tokens` (that reply, later
      messages and the instruction, estimated) at the input price → `cached_usd`;
    - cold: Pi's own request (the serialised history, caching disabled, `cold_tokens`) at the
      input price → `cold_usd`;
    - `cache_age_seconds`: since the previous request; `cache_ttl_seconds`: the model's short
      cache lifetime (None if unknown); `cache_probably_cold`: the age exceeds it (then the
      cached request pays the cache-write price for the prefix instead: `cached_usd` says so).
    """

    prefix_tokens: int
    fresh_tokens: int
    cold_tokens: int
    output_tokens: int
    cached_usd: float
    cold_usd: float
    cache_age_seconds: float | None
    cache_ttl_seconds: int | None
    cache_probably_cold: bool


def preview_compaction(
    state: FileState,
    settings: CompactionSettings | None = None,
    model: ModelInfo | None = None,
    now: float | None = None,
) -> CompactionPreview:
    """Pi's `prepareCompaction` on the current branch, with tokens and cost (nothing written).

    `settings` default to `load_compaction_settings(cwd, model)`. Raises `WriteRefused`
    (`cannot_compact`): the last entry already is a compaction, or "Nothing to compact".
    """
    session = state.session
    ctx = build_context(session)
    path = branch_path(session)
    if settings is None:
        key = f"{ctx.model.get('provider')}/{ctx.model.get('modelId')}" if ctx.model else None
        settings = load_compaction_settings(session.cwd, key)
    if path and path[-1].type == COMPACTION:
        raise WriteRefused("cannot_compact", "the last entry already is a compaction")
    projection = _projection(session, ctx)
    previous = next((i for i, p in enumerate(projection) if p.is_compaction and p.messages), -1)
    start = previous + 1 if previous >= 0 else 0
    previous_summary = projection[previous].entry.raw.get("summary") if previous >= 0 else None
    tokens_before = _projected_context_tokens(projection, ctx, path)
    cut, turn_start, split = _find_cut_point(projection, start, len(projection), settings.keep_recent_tokens)
    first_kept = projection[cut].entry.id if cut < len(projection) else None
    if not first_kept:
        raise WriteRefused("cannot_compact", "Nothing to compact")

    def conversation(lo: int, hi: int) -> list[dict[str, Any]]:
        return [m for p in projection[lo:hi] if not p.is_compaction for m in p.messages if m.get("role") != "system"]

    to_summarize = conversation(start, turn_start if split else cut)
    prefix = conversation(turn_start, cut) if split else []
    if not to_summarize and not prefix:
        raise WriteRefused("cannot_compact", "Nothing to compact")
    read: set[str] = set()
    edited: set[str] = set()
    if previous >= 0:
        raw = projection[previous].entry.raw
        details = raw.get("details")
        if not raw.get("fromHook") and isinstance(details, Mapping):
            read.update(f for f in details.get("readFiles") or () if isinstance(f, str))
            edited.update(f for f in details.get("modifiedFiles") or () if isinstance(f, str))
    _file_ops(to_summarize + prefix, read, edited)
    kept = conversation(cut, len(projection))
    kept_tokens = sum(pi_estimate_tokens(m) for m in kept)
    system = current_system_message(ctx.messages)
    summary_tokens = SUMMARY_OUTPUT_TOKENS
    window = model.context_window if model else None
    return CompactionPreview(
        first_kept_entry_id=first_kept, is_split_turn=split, tokens_before=tokens_before,
        messages_to_summarize=to_summarize, turn_prefix_messages=prefix, kept_messages=kept,
        previous_summary=previous_summary if isinstance(previous_summary, str) else None,
        read_files=sorted(read - edited), modified_files=sorted(edited), kept_tokens=kept_tokens,
        summary_tokens=summary_tokens,
        tokens_after=(pi_estimate_tokens(system) if system else 0) + summary_tokens + kept_tokens,
        settings=settings, context_window=window,
        over_threshold=window is not None and tokens_before > window - settings.reserve_tokens,
        cost=_summary_cost(ctx, to_summarize + prefix, model, now), expected=Expected(state.size, state.leaf_id),
    )


def serialize_conversation(messages: Sequence[Mapping[str, Any]]) -> str:
    """Pi's `serializeConversation` (compaction/utils.js) of LLM messages: `[User]:`,
    `[Assistant]:`, `[Assistant tool calls]:`, `[Tool result]:` (cut to 2000 chars); no thinking."""
    parts = []
    for msg in messages:
        role = msg.get("role")
        if role == "user":
            text = _content_text(msg.get("content"), "")
            if text:
                parts.append(f"[User]: {text}")
        elif role == "assistant":
            content = msg.get("content") or []
            calls = [
                f"{b.get('name')}(" + ", ".join(f"{k}={stringify(v)}" for k, v in (b.get("arguments") or {}).items()) + ")"
                for b in content if isinstance(b, Mapping) and b.get("type") == "toolCall"
            ]
            if any(isinstance(b, Mapping) and b.get("type") == "text" for b in content):
                parts.append(f"[Assistant]: {_content_text(content)}")
            if calls:
                parts.append(f"[Assistant tool calls]: {'; '.join(calls)}")
        elif role == "toolResult":
            text = _content_text(msg.get("content"), "")
            if text:
                if len(text) > 2000:
                    text = f"{text[:2000]}\n\n[... {len(text) - 2000} more characters truncated]"
                parts.append(f"[Tool result]: {text}")
    return "\n\n".join(parts)


def _anchor_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    return next((i for i in range(len(messages) - 1, -1, -1) if is_valid_measurement(messages[i])), None)


def _summary_cost(
    ctx: SessionContext, summarized: list[dict[str, Any]], model: ModelInfo | None, now: float | None
) -> SummaryCost | None:
    if model is None or model.pricing is None:
        return None
    messages = ctx.messages
    anchor = _anchor_index(messages)
    instruction = math.ceil(utf16_len(SUMMARIZATION_PROMPT + NO_CONTINUE) / 4)
    if anchor is None:
        prefix, fresh, age = 0, sum(pi_estimate_tokens(m) for m in messages) + instruction, None
    else:
        usage = usage_of(messages[anchor])
        prefix = usage.prompt_tokens
        fresh = usage.output + sum(pi_estimate_tokens(m) for m in messages[anchor + 1 :]) + instruction
        started = messages[anchor].get("timestamp")
        age = (now if now is not None else time.time()) - started / 1000 if isinstance(started, (int, float)) else None
    serialized = serialize_conversation(convert_to_llm(summarized))
    cold = math.ceil((utf16_len(serialized) + utf16_len(SUMMARIZATION_PROMPT) + 40) / 4)
    ttl = model.prompt_cache.get("short")
    probably_cold = ttl is not None and age is not None and age > ttl
    out = SUMMARY_OUTPUT_TOKENS
    pricing = model.pricing
    if probably_cold:
        cached = pricing.cost(input=fresh, output=out, cache_read=0, cache_write=prefix) if pricing.cache_write else pricing.cost(
            input=fresh + prefix, output=out, cache_read=0, cache_write=0)
    else:
        cached = pricing.cost(input=fresh, output=out, cache_read=prefix, cache_write=0)
    cold_usd = pricing.cost(input=cold, output=out, cache_read=0, cache_write=0)
    return SummaryCost(prefix, fresh, cold, out, cached, cold_usd, age, ttl, probably_cold)


def summary_instruction(preview: CompactionPreview) -> str:
    """The final user message of the summary request: which part to summarise (everything before
    the kept tail), Pi's summary format, and the previous summary to update, if any."""
    kept = len(preview.kept_messages)
    scope = (
        f"Summarize the conversation above except its last {kept} message{'s' if kept != 1 else ''}, "
        "which stay in the context verbatim after this summary."
        if kept else "Summarize the whole conversation above."
    )
    if preview.is_split_turn:
        scope += " The last kept messages continue a turn that started earlier: say what that turn asked for."
    previous = f"\n\nUpdate this previous summary with the new information:\n<previous-summary>\n{preview.previous_summary}\n</previous-summary>" if preview.previous_summary else ""
    return f"{NO_CONTINUE}\n\n{scope}{previous}\n\n{SUMMARIZATION_PROMPT}"


def summary_request(state: FileState, preview: CompactionPreview, endpoint: Endpoint) -> tuple[dict[str, Any], int]:
    """The summary request body, and how many of its messages are the previous request's prefix.

    The prefix is the context up to (not including) the last valid assistant reply, rendered
    exactly as `provider_request` renders that previous request; then that reply, later
    messages and the instruction follow.
    """
    messages = build_context(state.session).messages
    anchor = _anchor_index(messages)
    cut = anchor if anchor is not None else len(messages)
    previous = provider_request(endpoint.api, endpoint.model, messages[:cut], max_tokens=preview.settings.reserve_tokens)
    body = provider_request(
        endpoint.api, endpoint.model, messages, extra_user_text=summary_instruction(preview),
        max_tokens=preview.settings.reserve_tokens,
    )
    n = len(previous["messages"])
    if endpoint.api == "anthropic":  # the cache breakpoint belongs where the previous request ended
        for message in body["messages"]:
            for block in message["content"]:
                block.pop("cache_control", None)
        if n:
            last = len(previous["messages"][n - 1]["content"]) - 1
            body["messages"][n - 1]["content"][last]["cache_control"] = {"type": "ephemeral"}
    return body, n


def _with_cost(usage: dict[str, Any] | None, model: ModelInfo | None) -> dict[str, Any] | None:
    if usage is None or model is None or model.pricing is None:
        return usage
    p = model.pricing.for_prompt(usage["input"] + usage["cacheRead"] + usage["cacheWrite"])
    cost = {
        "input": usage["input"] * p.input / 1e6, "output": usage["output"] * p.output / 1e6,
        "cacheRead": usage["cacheRead"] * p.cache_read / 1e6, "cacheWrite": usage["cacheWrite"] * p.cache_write / 1e6,
    }
    cost["total"] = sum(cost.values())
    return {**usage, "cost": cost}


LINE_MARGIN = 4096
"""Bytes kept free under the reader's line cap for the entry's id, parent id and timestamp."""


def check_line_size(draft: Draft, now: float) -> None:
    """Refuse (`CompactionFailed`, nothing written) a compaction entry whose line would not stay
    `LINE_MARGIN` bytes under the reader's line cap (`ds4sessions.ingest.limits.MAX_LINE_BYTES`,
    32 MiB, `$DS4TUI_MAX_LINE_BYTES`): ds4tui's own reader would skip it as oversized while the
    journal says it was written (issue 30: a 35.6 MB summary line)."""
    from ds4sessions.ingest import limits
    from ds4sessions.steering.journal import serialize_entry

    probe = {"type": draft["type"], "id": "00000000", "parentId": "00000000", "timestamp": iso_now(now),
             **{k: v for k, v in draft.items() if k != "type"}}
    size = len(serialize_entry(probe))
    cap = limits.MAX_LINE_BYTES - LINE_MARGIN
    if size > cap:
        summary = len(str(draft.get("summary", "")).encode("utf-8", "surrogatepass"))
        raise CompactionFailed(
            f"the summary is {summary:,} bytes: its compaction line ({size:,} bytes) would pass the {cap:,}-byte "
            "limit under the reader's line cap (DS4TUI_MAX_LINE_BYTES); nothing written"
        )


@dataclass(frozen=True)
class CompactionOutcome:
    """`preview`, the request `body` sent (None for a dry run), the `reply`, and the `write`."""

    preview: CompactionPreview
    body: dict[str, Any] | None
    prefix_messages: int
    reply: SummaryReply | None
    write: WriteResult | None


def compact(
    path: str | Path,
    *,
    endpoint: Endpoint | None = None,
    model: ModelInfo | None = None,
    settings: CompactionSettings | None = None,
    expected: Expected | None = None,
    journal: Journal | None = None,
    dry_run: bool = False,
    force: bool = False,
    timeout: float = 120.0,
    now: float | None = None,
) -> CompactionOutcome:
    """Preview, and unless `dry_run`, request the summary and append the `compaction` entry.

    The file must pass the writer's checks before the request (refused while another process
    holds it open, unless `force`) and must be unchanged when the reply arrives. `endpoint`
    defaults to `Endpoint.from_env(<session model>)`. Raises `WriteRefused` or
    `CompactionFailed`; on either, nothing was written.
    """
    state = read_state(path)
    if not dry_run:
        ours = journal is not None and journal.ends_with_our_write(path, state.size)
        check_writable(state, expected, refuse_when_open=True, force=force, quiet_seconds=0.0 if ours else QUIET_SECONDS, now=now)
    preview = preview_compaction(state, settings, model, now)
    if dry_run:
        return CompactionOutcome(preview, None, 0, None, None)
    endpoint = endpoint or Endpoint.from_env(build_context(state.session).model)
    body, prefix = summary_request(state, preview, endpoint)
    reply = request_summary(endpoint, body, timeout)
    summary = reply.text + format_file_operations(preview.read_files, preview.modified_files)
    stamp = now if now is not None else time.time()
    system = current_system_message(build_context(state.session).messages)

    def build(st: FileState) -> list[Draft]:
        draft: Draft = {
            "type": COMPACTION, "summary": summary, "firstKeptEntryId": preview.first_kept_entry_id,
            "tokensBefore": preview.tokens_before,
            "details": {"readFiles": preview.read_files, "modifiedFiles": preview.modified_files},
        }
        usage = _with_cost(reply.usage, model)
        if usage is not None:
            draft["usage"] = usage
        if system is not None:
            draft["systemMessage"] = {**system, "timestamp": iso_to_ms(iso_now(stamp))}
        return [draft]

    check_line_size(build(state)[0], stamp)
    write = append_entries(
        path, build, action="compaction", expected=Expected(state.size, state.leaf_id), refuse_when_open=True,
        force=force, journal=journal, undo=lambda st, entries: {"kind": "leaf", "leafId": st.leaf_id},
        quiet_seconds=0.0, now=stamp,
    )
    return CompactionOutcome(preview, body, prefix, reply, write)
