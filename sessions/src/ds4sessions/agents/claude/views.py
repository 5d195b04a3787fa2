"""What ds4tui shows for a Claude Code transcript: the `/context` map, the cache, the context.

Glue between a `Conversation` (the reader's) and the pure arithmetic of `ds4core.claude_context`
and `ds4core.claude_prices`. Every function here is pure on its inputs (the environment is passed
in), returns JSON-safe dicts, and raises nothing for odd conversations.

Token estimate of a message: ceil(chars / 4) of the JSON Claude Code sends for it (the common
Anthropic rule of thumb; exact for the agent-oracle fake, whose counts are chars/4 of the request
JSON). The estimate only splits the context: the total is always the provider's number when
there is one (format doc §6.2), plus Claude Code's own rough estimate of the messages after that
reply (`ds4core.claude_context.rough_tokens`), and the map's rows add up to that total exactly.
"""

from __future__ import annotations

import functools
import itertools
import json
import operator
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ds4core.categories import calibrate
from ds4core.agent_models import claude_deferred_tool_chars
from ds4core.claude_context import (
    COUNT_TOOLS_OVERHEAD,
    MESSAGE_CHILDREN,
    Autocompact,
    autocompact,
    cache_ttl,
    chars_tokens,
    context_terms,
    count_tokens_estimate,
    fixed_part,
    infer_miss_cause,
    model_window,
    predicted_after_compaction,
    recorded_context_terms,
    rough_chars_per_token,
    rough_tokens,
    skill_listing_tokens,
)
from ds4core.claude_prices import claude_price, price_table
from ds4sessions.agents.base import Compaction, Conversation, MessageMeta, Request

_ROLE_CHILD = {"user": "user", "compactionSummary": "compaction", "toolResult": "tool_results"}


def shown_category(term: Mapping[str, Any]) -> bool:
    """Whether a Claude Code `/context` category row is listed: as `/context` lists them, a
    category with no tokens is left out (MCP tools, custom agents, memory files, the autocompact
    buffer when no window override sets one), Free space never. (The JSON keeps every row.)"""
    return bool(term["tokens"]) or term["id"] == "free_space"


def message_children(message: Mapping[str, Any], meta: MessageMeta | None,
                     tokens: int | None = None) -> list[tuple[str, str | None, int]]:
    """(child id, tool name or None, tokens) parts of one Pi-shaped message. The message's tokens
    are `tokens` when given, else ceil(JSON chars / 4), split over its blocks in proportion to
    their characters. A skill listing is an attachment here: `/context` takes Skills out of the
    tool definitions, not out of the messages (module doc of `ds4core.claude_context`)."""
    total = chars_tokens(json.dumps(_sent_form(message), ensure_ascii=False)) if tokens is None else tokens
    role = message.get("role")
    if role == "assistant":
        parts: list[tuple[str, str | None, int]] = []
        for block in message.get("content") or ():
            btype = block.get("type")
            if btype == "thinking":
                parts.append(("thinking", None, len(str(block.get("thinking", "")))))
            elif btype == "toolCall":
                parts.append(("tool_calls", str(block.get("name")), len(json.dumps(block.get("arguments"))) + len(str(block.get("name")))))
            else:
                parts.append(("assistant_text", None, len(str(block.get("text", "")))))
        weight = sum(p[2] for p in parts) or 1
        out, given = [], 0
        for i, (cid, tool, chars) in enumerate(parts):
            tokens = total - given if i == len(parts) - 1 else round(total * chars / weight)
            given += tokens
            out.append((cid, tool, tokens))
        return out or [("assistant_text", None, total)]
    if meta is not None and meta.category == "skills":
        return [("skill_listing", None, total)]
    if meta is not None and meta.category in ("custom_agents", "memory_files"):
        return [(meta.category, None, total)]
    if meta is not None and meta.category == "attachments":
        return [("attachments", (meta.source or "attachment:?").split(":", 1)[1], total)]
    child = _ROLE_CHILD.get(str(role), "user")
    return [(child, meta.tool if meta is not None and child == "tool_results" else None, total)]


def _sent_form(message: Mapping[str, Any]) -> Any:
    """The message as the Messages API carries it (role + content), for counting."""
    role = message.get("role")
    if role == "compactionSummary":
        return {"role": "user", "content": [{"type": "text", "text": message.get("summary", "")}]}
    if role == "toolResult":
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": message.get("toolCallId"),
                                             "content": message.get("content"), "is_error": message.get("isError", False)}]}
    content = []
    for block in message.get("content") or ():
        if block.get("type") == "toolCall":
            content.append({"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": block.get("arguments")})
        else:
            content.append({k: v for k, v in block.items() if k != "redacted"})
    return {"role": "user" if role == "user" else "assistant", "content": content}


def rough_message_tokens(message: Mapping[str, Any], chars_per_token: int, joins: int = 0) -> int:
    """Claude Code's rough estimate of one Pi-shaped message (tokens), as 2.1.197's
    `roughTokenCountEstimationForMessages` counts a message after the last reply: rough(text) per
    text block, rough(thinking), rough(name + compact JSON of the input) per tool call, a tool
    result's text, 2,000 per image; rough = `ds4core.claude_context.rough_tokens`. `joins`: how
    many "\n" Claude Code's merge of user messages appends to the message's last text block
    (`later_rough_tokens`)."""
    role = message.get("role")
    if role == "compactionSummary":
        return rough_tokens(str(message.get("summary", "")) + "\n" * joins, chars_per_token)
    blocks = [b for b in message.get("content") or () if isinstance(b, Mapping)]
    last_text = max((i for i, b in enumerate(blocks) if b.get("type") == "text"), default=None)
    total = 0
    for i, block in enumerate(blocks):
        btype = block.get("type")
        if btype == "text":
            total += rough_tokens(str(block.get("text", "")) + ("\n" * joins if i == last_text else ""), chars_per_token)
        elif btype == "thinking":
            total += rough_tokens(str(block.get("thinking", "")), chars_per_token)
        elif btype == "toolCall":
            args = json.dumps(block.get("arguments") or {}, ensure_ascii=False, separators=(",", ":"))
            total += rough_tokens(str(block.get("name", "")) + args, chars_per_token)
        elif btype == "image":
            total += 2000
        else:
            total += rough_tokens(json.dumps(dict(block), ensure_ascii=False, separators=(",", ":")), chars_per_token)
    return total


def later_rough_tokens(messages: Sequence[Mapping[str, Any]], metas: Sequence[MessageMeta | None],
                       chars_per_token: int) -> list[int]:
    """Claude Code's rough estimate (tokens) of each Pi-shaped message after the last reply, as
    2.1.197's `/context` takes it: `roughTokenCountEstimationForMessages(normalizeMessagesForAPI(
    messages after the reply))` (bundled cli.js, minified `Cua` → `Zv(Ak(…))`). Every message
    counts, `isMeta` ones (the `<local-command-caveat>`) and `system/local_command` output
    included: `Ak` drops only `isVirtual` rows and synthetic API-error replies. Its merging of
    consecutive user-side messages is kept where it changes a count: a user row (or local-command
    output, compaction summary) whose first block is text, joined after a message whose last block
    is text, appends "\n" to that block (`mergeUserMessages` → minified `tum`); attachments join
    without one (minified `num`); tool results move first (minified `jfc`). Rough is per block, so
    the merge changes nothing else."""
    joins = [0] * len(messages)
    tail: int | None = None  # the message holding the merged user message's last block, when text
    for i, (message, meta) in enumerate(zip(messages, metas)):
        role = message.get("role")
        if role == "assistant":
            tail = None
            continue
        attachment = meta is not None and str(meta.source or "").startswith("attachment:")
        if role == "toolResult":
            continue  # its tool_result block goes first: the merged message's last block is unchanged
        blocks = [b for b in message.get("content") or () if isinstance(b, Mapping)]
        first_text = role == "compactionSummary" or (bool(blocks) and blocks[0].get("type") == "text")
        if tail is not None and first_text and not attachment:
            joins[tail] += 1
        last_text = role == "compactionSummary" or (bool(blocks) and blocks[-1].get("type") == "text")
        tail = i if last_text else None
    return [rough_message_tokens(m, chars_per_token, j) for m, j in zip(messages, joins)]


SKILL_LISTING_HEADER = "The following skills are available for use with the Skill tool:\n\n"


def messages_tokens(conv: Conversation, end: int | None = None) -> int:
    """Estimated tokens of `conv.messages[:end]`."""
    return messages_tokens_of(conv.messages if end is None else conv.messages[:end])


def messages_tokens_of(messages: Sequence[Mapping[str, Any]]) -> int:
    """Estimated tokens of Pi-shaped messages (ceil(JSON chars / 4) each)."""
    return sum(chars_tokens(json.dumps(_sent_form(m), ensure_ascii=False)) for m in messages)


def context_now(conv: Conversation) -> tuple[Request | None, int | None]:
    """The last real main-chain request on the current context (after the last compaction) and
    its `input + cache_creation + cache_read` (format doc §6.1–2); (None, None) when none."""
    for request in reversed(conv.requests):
        if request.synthetic or request.sidechain:
            continue
        if request.message_index is None:
            return None, None  # the last real reply is before the compaction
        return request, request.usage.prompt_tokens
    return None, None


def anchor_request(conv: Conversation) -> Request | None:
    """The first real main-chain request of the current context (after the start or the last
    compaction): its prompt infers the system prompt + tools."""
    for request in conv.requests:
        if not request.synthetic and not request.sidechain and request.message_index is not None:
            return request
    return None


PLACEHOLDER_TOOL = "DeferredToolPlaceholder"
"""The stand-in tool Claude Code 2.1.337 sends in place of its deferred tools (api-request-shape);
`/context` does not count it among the System tools."""


def recorded_rows(conv: Conversation, skills: int) -> dict[str, Any] | None:
    """The `/context` rows Claude Code 2.1.337 measures with `count_tokens`, from what its transcript
    records (tokens, ds4tui's `count_tokens_estimate`); None for a transcript without those records
    (Claude Code ≤ 2.1.197: the fixed part is then inferred, `context_terms`).

    - System prompt: Σ over the latest `prompt_snapshot` attachment's sections (cli.js `MKs`);
    - tools: the latest `api-request-shape` tools but the placeholder and MCP tools, counted
      together (`DKs` → `uz`); System tools = tools − Skills (`recorded_context_terms`);
    - MCP tools: loaded MCP tools (in the shape, or in a `deferred_tools_record`), their share of
      max(0, count(all MCP tools known) − 500); the rest is "MCP tools (deferred)" (`FKs`); an MCP
      tool announced but never loaded has no recorded definition (counted as 0, noted);
    - System tools (deferred): Σ max(0, count(tool) − 500) over the deferred built-ins named by
      `deferred_tools_delta`, each definition's size from data/agent-tools.json for this Claude Code
      version (else the newest measured one, noted) (`xKs`);
    - Custom agents: count("type whenToUse") per non-built-in agent of `agent_listing_delta`
      (`BKs`); Memory files: count(content) per file of the `instructions` attachment (`IKs`).
    `counted` is what Messages leaves out: System prompt + tools + MCP tools + agents + memory."""
    extra = conv.extra
    snapshot, shape = extra.get("promptSnapshot"), extra.get("requestTools")
    if snapshot is None and shape is None:
        return None
    notes: dict[str, str] = {}
    system_prompt = sum(count_tokens_estimate(text) for text in snapshot or () if text)
    if snapshot is None:
        notes["system_prompt"] = "no prompt_snapshot recorded: 0"
    shape = shape or []
    builtin = [t["jsonChars"] for t in shape if t["name"] != PLACEHOLDER_TOOL and not t["name"].startswith("mcp__")]
    tools = count_tokens_estimate(tool_chars=builtin) if builtin else 0
    version = extra.get("version")
    sent = {t["name"] for t in shape}
    mcp_chars: dict[str, int] = {t["name"]: t["jsonChars"] for t in shape if t["name"].startswith("mcp__")}
    for name, chars in (extra.get("loadedToolRecords") or {}).items():
        if name.startswith("mcp__"):
            mcp_chars.setdefault(name, chars)
    loaded = set(mcp_chars) & (sent | set(extra.get("loadedToolRecords") or {}))
    mcp_all = max(count_tokens_estimate(tool_chars=list(mcp_chars.values())) - COUNT_TOOLS_OVERHEAD, 0) if mcp_chars else 0
    weight = sum(mcp_chars.values()) or 1
    mcp_tools = round(mcp_all * sum(mcp_chars[n] for n in loaded) / weight)
    unrecorded_mcp = [n for n in extra.get("deferredTools") or () if n.startswith("mcp__") and n not in mcp_chars]
    if unrecorded_mcp:
        notes["mcp_tools_deferred"] = f"{len(unrecorded_mcp)} MCP tool(s) never loaded: definitions not recorded"
    system_deferred, unknown, measured_on = 0, [], set()
    for name in extra.get("deferredTools") or ():
        if name.startswith("mcp__") or name in sent:
            continue
        chars, on = claude_deferred_tool_chars(version, name)
        if chars is None:
            unknown.append(name)
            continue
        measured_on.add(on)
        system_deferred += max(count_tokens_estimate(tool_chars=[chars]) - COUNT_TOOLS_OVERHEAD, 0)
    note = f"definitions measured on Claude Code {', '.join(sorted(measured_on))} (data/agent-tools.json)" if measured_on else ""
    if unknown:
        note += f"; {len(unknown)} unknown: {', '.join(unknown)}"
    notes["system_tools_deferred"] = note.lstrip("; ")
    agents = sum(count_tokens_estimate(f"{a['agentType']} {a['whenToUse']}") for a in extra.get("customAgents") or ())
    memory = sum(count_tokens_estimate(f["content"]) for f in extra.get("memoryFiles") or ())
    return {"system_prompt": system_prompt, "tools": tools, "mcp_tools": mcp_tools, "mcp_deferred": mcp_all - mcp_tools,
            "system_deferred": system_deferred, "custom_agents": agents, "memory_files": memory,
            "counted": system_prompt + tools + mcp_tools + agents + memory, "notes": notes}


def autocompact_for(conv: Conversation, env: Mapping[str, str], window: int | None = None) -> Autocompact:
    """Claude Code's autocompact point for this session's model (or `window`) and `env`."""
    return autocompact(window or conv.context_window or model_window(conv.model), env)


class MessageTally:
    """The chars/4 parts of a growing conversation's messages (`message_children` of each, made
    once per message object), with their running sums: what `context_map` needs of the messages
    before the last reply, kept between the snapshots of one live session so an append costs
    O(new messages) (issue 28). `sync(conv)` keeps the first `conv.stable` messages (the same
    objects as before: `Conversation.stable`) and counts the rest.

    - `parts[i]`: message i's `(child, tool, tokens)`; `cum[i]`: the sum of the tokens of
      messages `[:i]` (what `messages_tokens(conv, i)` gives);
    - `sums`: `(child, tool)` → tokens over every message; `first`: `(child, tool)` → where it
      first appears `(message, part)`, so `sums_through` lists keys in the order a pass over the
      messages meets them (the order `calibrate` breaks ties by); `skills`: the indexes of the
      skill listings; `kept`: how many messages the last `sync` kept."""

    def __init__(self) -> None:
        self.objects: list[Any] = []
        self.parts: list[list[tuple[str, str | None, int]]] = []
        self.cum: list[int] = [0]
        self.sums: dict[tuple[str, str | None], int] = {}
        self.first: dict[tuple[str, str | None], tuple[int, int]] = {}
        self.skills: list[int] = []
        self.kept = 0
        self._requests: Sequence[Request] = ()
        self._synthetic = [0]  # synthetic requests among the first i of `_requests`
        self._anchor_memo: tuple[Sequence[Request], int | None] = ((), None)
        self._compactions_memo: tuple[Sequence[Compaction], list[dict[str, Any]] | None] = ((), None)

    def sync(self, conv: Conversation) -> None:
        """Count `conv`'s messages: the first `min(conv.stable, counted)` are kept when they are
        the same objects (checked at both ends), the others dropped and counted again."""
        keep = min(conv.stable, len(self.objects))
        if keep and (conv.messages[0] is not self.objects[0] or conv.messages[keep - 1] is not self.objects[keep - 1]):
            keep = 0  # (another reader, or a claim that does not hold: count again)
        if len(self.objects) > keep:
            for parts in self.parts[keep:]:
                for cid, tool, tokens in parts:
                    self.sums[(cid, tool)] -= tokens
            del self.objects[keep:], self.parts[keep:], self.cum[keep + 1:]
            for key in [k for k, (i, _) in self.first.items() if i >= keep]:
                del self.first[key], self.sums[key]
        while self.skills and self.skills[-1] >= keep:
            self.skills.pop()
        self.kept = keep
        sums, first = self.sums, self.first
        for i in range(keep, len(conv.messages)):
            message, meta = conv.messages[i], conv.meta[i]
            parts = message_children(message, meta)
            self.objects.append(message)
            self.parts.append(parts)
            total = 0
            for j, (cid, tool, tokens) in enumerate(parts):
                key = (cid, tool)
                if key in sums:
                    sums[key] += tokens
                else:
                    sums[key], first[key] = tokens, (i, j)
                total += tokens
            self.cum.append(self.cum[-1] + total)
            if meta is not None and meta.category == "skills":
                self.skills.append(i)

    def anchor_request(self, requests: Sequence[Request]) -> Request | None:
        """`anchor_request` of a conversation with these `requests`, kept from the last call
        while the requests up to the anchor are the very objects of last time (compared in C:
        a long session's requests before its last compaction are not scanned at each append)."""
        seen, at = self._anchor_memo
        if at is not None and at < len(requests) and requests[at] is seen[at] and list(requests[:at]) == list(seen[:at]):
            self._anchor_memo = (requests, at)
            return requests[at]
        if at is None and seen:  # (none among the previous requests: look only at those changed or new)
            k = min(len(seen), len(requests))
            start = k if list(requests[:k]) == list(seen[:k]) else 0
        else:
            start = 0
        found = next((i for i in range(start, len(requests)) if not requests[i].synthetic
                      and not requests[i].sidechain and requests[i].message_index is not None), None)
        self._anchor_memo = (requests, found)
        return requests[found] if found is not None else None

    def compactions_json(self, compactions: Sequence[Compaction]) -> list[dict[str, Any]]:
        """`compactions_json(compactions)`, its rows kept while the compactions are those of
        last time (a session compacted 2,000 times: 2,000 dicts at every append otherwise)."""
        seen, rows = self._compactions_memo
        if rows is None or len(seen) != len(compactions) or list(seen) != list(compactions):
            rows = compactions_json(compactions)
            self._compactions_memo = (compactions, rows)
        return list(rows)

    def request_count(self, requests: Sequence[Request]) -> int:
        """`request_count` of a conversation with these `requests`, counting only the requests
        that are not the very objects counted last time (compared in C)."""
        seen = self._requests
        k = min(len(seen), len(requests))
        if k and _prefix_differs(seen, requests, k):
            k = next(i for i in range(k) if seen[i] is not requests[i] and seen[i] != requests[i])
        del self._synthetic[k + 1:]
        for request in requests[k:]:
            self._synthetic.append(self._synthetic[-1] + bool(request.synthetic))
        self._requests = requests
        return len(requests) - self._synthetic[-1]

    def sums_through(self, cut: int) -> dict[tuple[str, str | None], int]:
        """`(child, tool)` → tokens over messages `[0, cut]`, in the order a pass over them meets
        each key (zeros kept, as such a pass keeps them); O(keys log keys + messages after cut)."""
        keys = sorted((k for k, (i, _) in self.first.items() if i <= cut), key=self.first.__getitem__)
        out = {k: self.sums[k] for k in keys}
        for parts in self.parts[cut + 1:]:
            for cid, tool, tokens in parts:
                if (cid, tool) in out:
                    out[(cid, tool)] -= tokens
        return out


def _prefix_differs(a: Sequence[Any], b: Sequence[Any], k: int) -> bool:
    """Whether the first `k` items of `a` and `b` differ, compared in C (by identity first) with
    as few copies as the lengths allow (an append: `b` is `a` plus one request)."""
    if type(a) is list and type(b) is list:
        if len(a) == k:
            return a != (b if len(b) == k else b[:k])
        return a[:k] != (b if len(b) == k else b[:k])
    return list(a[:k]) != list(b[:k])


def context_map(conv: Conversation, env: Mapping[str, str], window: int | None = None,
                tally: MessageTally | None = None) -> dict[str, Any]:
    """The `/context` map of a Claude Code conversation as JSON: Claude Code's categories (ids of
    `ds4core.claude_context.CLAUDE_CATEGORIES`, messages split into our children), the total, the
    autocompact point, "tokens until autocompact" and the predicted size after a compaction.

    Rules (Claude Code 2.1.197's `/context`, module doc of `ds4core.claude_context`), tokens:
    - `provider.contextTokens` = input + cache write + cache read of the last real reply (exact);
    - the fixed part (system prompt + tool definitions) = the first request after the start or the
      compaction minus our chars/4 estimate of its messages (inferred); Skills (rough estimate of
      the latest skill listing's items) come out of it, the rest is split by `SYSTEM_PROMPT_SHARE`;
    - Messages = provider count − fixed part (the messages before the last reply, as the provider
      counted them) + Claude Code's rough estimate of the messages after that reply
      (`later_rough_tokens`: every one, `isMeta` caveats and local-command output included, as
      2.1.197's `/context` counts `normalizeMessagesForAPI` of them); children split the
      provider's part in proportion to their chars/4 estimates;
    - `total` = provider count + that later estimate = the sum of the rows (`laterEstimate` says
      how much of it is estimated); Free space = window − total − the buffer row.
    Tolerance against `/context` (shared sample, its two `/context` runs, each read on the file as
    the CLI call before it left it): total exact; Skills exact; the later estimate exact up to the
    resume sentinel (a `<synthetic>` "No response requested." that `--continue` inserts after a
    trailing user row and only writes afterwards: 7 tokens at the second run), so Free space prints
    the same; Messages and System tools within ±100 tokens beyond `/context`'s 0.1k rounding (our
    fixed part absorbs what the transcript does not log, such as the leading `<system-reminder>`);
    System prompt by a fixed share, within ±100 on the sample only (its sections are not logged).

    `tally`: a `MessageTally` kept by a live session: the same numbers, with the messages before
    the last reply counted once each (O(new messages + those after the reply) per update).
    """
    if tally is not None:
        tally.sync(conv)

    def tokens_before(end: int) -> int:
        return tally.cum[end] if tally is not None else messages_tokens(conv, end)

    ac = autocompact_for(conv, env, window)
    cpt = rough_chars_per_token(conv.model)
    last, total = context_now(conv)
    anchor = anchor_request(conv) if tally is None else tally.anchor_request(conv.requests)
    fixed = None
    fixed_from = anchor.entry_id if anchor is not None else None
    if anchor is not None and anchor.message_index is not None:
        fixed = fixed_part(anchor.usage.prompt_tokens, tokens_before(anchor.message_index))
    elif isinstance(conv.extra.get("startAnchor"), Mapping):
        # no request since the compaction: the session's first request (format doc §6.3)
        start = conv.extra["startAnchor"]
        fixed = fixed_part(int(start["promptTokens"]), int(start["messageTokens"]))
        fixed_from = start.get("entryId")
    cut = last.message_index if last is not None and last.message_index is not None and total is not None else None
    before: dict[tuple[str, str | None], int] = {}
    after: dict[tuple[str, str | None], int] = {}
    skill_items: list[tuple[str, int]] = []
    rough_after = later_rough_tokens(conv.messages[cut + 1:], conv.meta[cut + 1:], cpt) if cut is not None else []
    if tally is not None:
        before = tally.sums_through(cut if cut is not None else len(conv.messages))
        if cut is not None:
            for j, (message, meta) in enumerate(zip(conv.messages[cut + 1:], conv.meta[cut + 1:])):
                for cid, tool, tokens in message_children(message, meta, rough_after[j]):
                    after[(cid, tool)] = after.get((cid, tool), 0) + tokens
        if tally.skills:
            message = conv.messages[tally.skills[-1]]
            text = "".join(str(b.get("text", "")) for b in message.get("content") or () if isinstance(b, Mapping))
            skill_items = skill_listing_tokens(text.removeprefix(SKILL_LISTING_HEADER), cpt)
    last_skill = None  # (only the latest skill listing counts: each one lists every skill)
    for i, (message, meta) in enumerate(zip(conv.messages, conv.meta) if tally is None else ()):
        if meta is not None and meta.category == "skills":
            last_skill = message
        later = cut is not None and i > cut
        part = after if later else before
        for cid, tool, tokens in message_children(message, meta, rough_after[i - cut - 1] if later else None):
            part[(cid, tool)] = part.get((cid, tool), 0) + tokens
    if last_skill is not None:
        text = "".join(str(b.get("text", "")) for b in last_skill.get("content") or () if isinstance(b, Mapping))
        skill_items = skill_listing_tokens(text.removeprefix(SKILL_LISTING_HEADER), cpt)
    skills = sum(tok for _, tok in skill_items)
    rec = recorded_rows(conv, skills)
    if rec is not None:
        fixed, fixed_from = rec["counted"], "recorded: prompt_snapshot + api-request-shape"
        # the rows that stand for these messages: Claude Code takes them out of Messages
        before = {key: v for key, v in before.items() if key[0] not in ("custom_agents", "memory_files", "skill_listing")}
    measured = None
    if cut is not None and total is not None and fixed is not None:
        measured = max(total - fixed, 0)
        # the provider's part split in the estimates' proportions (largest remainder: exact sum)
        before = calibrate(before, measured) if sum(before.values()) > 0 else {("user", None): measured}
    children: dict[str, int] = {}
    tools: dict[str, dict[str, int]] = {}
    listed = {"custom_agents": 0, "memory_files": 0}
    summary_tokens = 0
    for part in (before, after):
        for (cid, tool), tokens in part.items():
            if cid == "skill_listing":
                cid, tool = "attachments", "skill_listing"
            if cid in listed:
                listed[cid] += tokens
                continue
            children[cid] = children.get(cid, 0) + tokens
            if cid == "compaction":
                summary_tokens += tokens
            if tool:
                tools.setdefault(cid, {})
                tools[cid][tool] = tools[cid].get(tool, 0) + tokens
    later_estimate = sum(after.values())
    child_tools = {k: sorted(v.items(), key=lambda kv: -kv[1]) for k, v in tools.items()}
    messages_note = ("provider count − the other rows, + rough estimate after the last reply" if measured is not None
                     else "estimate: chars/4 of each message")
    if rec is not None:
        # Claude Code 2.1.337 shows the buffer for the model's own window too (its /context: 33k at 1m)
        buffer = ac.buffer if ac.enabled else 0
        terms = recorded_context_terms(
            total=total, window=ac.window, system_prompt=rec["system_prompt"], tools=rec["tools"], skills=skills,
            mcp_tools=rec["mcp_tools"], mcp_deferred=rec["mcp_deferred"], system_deferred=rec["system_deferred"],
            custom_agents=rec["custom_agents"], memory_files=rec["memory_files"], message_children=children,
            child_tools=child_tools, buffer=buffer, skill_items=skill_items,
            notes={**rec["notes"], "messages": messages_note})
    else:
        # `/context` (2.1.197) shows the buffer row only for a window set by CLAUDE_CODE_AUTO_COMPACT_WINDOW
        buffer = ac.buffer if ac.enabled and "CLAUDE_CODE_AUTO_COMPACT_WINDOW" in ac.overrides else 0
        terms = context_terms(
            total=total, window=ac.window, fixed=fixed, message_children=children,
            skills=skills, custom_agents=listed["custom_agents"], memory_files=listed["memory_files"],
            child_tools=child_tools, buffer=buffer, skill_items=skill_items, messages_note=messages_note)
    used = terms.estimated_total
    later = len(conv.messages) - (last.message_index + 1) if last is not None and last.message_index is not None else None
    return {
        "agent": conv.agent,
        "path": str(conv.path),
        "sessionId": conv.session_id,
        "title": conv.title,
        "cwd": conv.cwd,
        "model": conv.model,
        "version": conv.extra.get("version"),
        "contextWindow": ac.window,
        **window_facts(conv, ac),
        "requests": request_count(conv) if tally is None else tally.request_count(conv.requests),
        "unknownFormats": conv.extra.get("unknownFormats") or {},
        "estimator": "chars/4",
        "estimate": terms.estimated_total,
        "unattributed": 0,
        "free": terms.term("free_space").tokens,
        "total": used,
        "totalSource": "provider" if total is not None else "estimate",
        "laterEstimate": later_estimate,
        "provider": None if last is None else {
            "anchorEntryId": last.entry_id, "promptTokens": last.usage.prompt_tokens, "contextTokens": total,
            "estimateAtAnchor": (fixed or 0) + tokens_before(last.message_index or 0),
            "laterMessages": later, "laterEstimate": later_estimate, "roughCharsPerToken": cpt,
        },
        "systemInferred": fixed is not None,
        "fixedInferredFrom": fixed_from,
        "categories": [t.to_json() for t in terms.terms],
        "autocompact": {**ac.to_json(), "tokensUntil": ac.tokens_until(used),
                        "predictedAfterCompaction": predicted_after_compaction(fixed, summary_tokens)},
        "compactions": compactions_json(conv.compactions) if tally is None else tally.compactions_json(conv.compactions),
        "messages": len(conv.messages),
        "diagnostics": len(conv.diagnostics),
        "problems": [str(d) for d in conv.diagnostics],
    }


def window_facts(conv: Conversation, ac: Autocompact) -> dict[str, Any]:
    """`{windowSource, windowKnown, windowNote}` of the window `context_map` uses: the environment's
    `CLAUDE_CODE_AUTO_COMPACT_WINDOW` when it set it, else the reader's `extra["window"]`
    (`ds4core.agent_models.claude_window`: "[1m]", the model table with its source and date, or
    "window unknown: assumed 200k")."""
    if "CLAUDE_CODE_AUTO_COMPACT_WINDOW" in ac.overrides:
        return {"windowSource": f"CLAUDE_CODE_AUTO_COMPACT_WINDOW={ac.overrides['CLAUDE_CODE_AUTO_COMPACT_WINDOW']}",
                "windowKnown": True, "windowNote": None}
    window = conv.extra.get("window") or {}
    known = window.get("windowKnown", conv.model is not None)
    return {"windowSource": window.get("windowSource", "assumed"), "windowKnown": known,
            "windowNote": window.get("windowNote") or (None if known else "window unknown: assumed 200k")}


def compactions_json(compactions: Sequence[Compaction]) -> list[dict[str, Any]]:
    """`context_map`'s `compactions`: `{entryId, kind, tokensBefore, time}` per compaction."""
    return [{"entryId": c.entry_id, "kind": c.kind, "tokensBefore": c.tokens_before, "time": c.timestamp}
            for c in compactions]


def request_count(conv: Conversation) -> int:
    """Model requests of the file, each once (streamed rows folded), synthetic rows (`<synthetic>`,
    API errors) excluded, side chains included: the one count `context_map` and `cache_report` give."""
    return len(conv.requests) - sum(map(_SYNTHETIC, conv.requests))


_SYNTHETIC = operator.attrgetter("synthetic")


def cache_report(conv: Conversation, at: float | None = None, memo: dict[str, Any] | None = None) -> dict[str, Any]:
    """The prompt cache of a Claude Code conversation as JSON.

    - `history`: every request once (side chains and synthetic rows flagged, not counted in
      `totals`), with its cache-read share, buckets, cost (None when the model has no price)
      and, for a miss (nothing read after an earlier write), its cause: Claude Code's recorded
      `cache_miss_reason` ("recorded") or an inferred one ("inferred").
    - `state`: TTL tier from the latest main-chain write, countdown anchored at the last request
      (`remainingSeconds` at `at`, default the last request's time).
    - `totals`: {requests, inputTokens, cacheReadTokens, cacheWriteTokens, outputTokens} over the
      real requests (main chain and side chains; synthetic ones excluded), each request once.

    `memo`: a dict kept between the snapshots of one live session: the records of the requests
    that are the same objects as last time (and the running state after each) are kept, so an
    append costs O(new requests); the report equals the one made without it.
    """
    price_src = price_table()
    memo = {} if memo is None else memo
    requests = conv.requests
    seen: list[Request] = memo.get("requests") or []
    keep = min(len(seen), len(requests))
    if keep and (seen[0] is not requests[0] or memo.get("compactions") != conv.compactions):
        keep = 0
    elif keep:
        keep = next(itertools.compress(itertools.count(), map(operator.is_not, requests[:keep], seen[:keep])), keep)
    records: list[dict[str, Any]] = memo.get("records") or []
    states: list[_CacheRun] = memo.get("states") or []
    misses: list[dict[str, Any]] = memo.get("misses") or []  # the records that are misses, in order
    shares: list[Any] = memo.get("shares") or []  # the main-chain read shares, in order
    del records[keep:], states[keep:]
    run = states[-1] if states else _CacheRun()
    del misses[run.misses:], shares[run.shares:]
    compactions = conv.compactions
    for request in requests[keep:]:
        run, record = _cache_step(run, request, compactions)
        if run.misses > len(misses):
            misses.append(record)
        if run.shares > len(shares):
            shares.append(record["share"])
        records.append(record)
        states.append(run)
    # (the lists kept whole between appends, each copied once at the end: O(new requests) in
    # Python, the copies in C; a 95 MiB session has 20,000 requests, issue 36)
    memo.update(requests=list(requests), records=records, states=states, misses=misses, shares=shares,
                compactions=conv.compactions)
    last_write = next((r for r in reversed(requests) if not r.synthetic and not r.sidechain and r.usage.cache_write > 0), None)
    last_main, tier = run.last_main, run.tier
    anchor = last_main.timestamp if last_main is not None else None
    if last_write is not None and last_main is not None and last_write is last_main:
        ttl = cache_ttl(anchor, last_write.usage.cache_write_5m or (last_write.usage.cache_write if not last_write.usage.cache_write_1h else 0),
                        last_write.usage.cache_write_1h)
    else:
        ttl = cache_ttl(anchor, 0, 0, tier_before=tier)
    now = at if at is not None else anchor
    unpriced = run.unpriced
    return {
        "agent": conv.agent,
        "path": str(conv.path),
        "at": now,
        "model": conv.model,
        "state": {"tier": ttl.tier, "anchor": ttl.anchor, "expiresAt": ttl.expires_at, "expires1hAt": ttl.expires_1h_at,
                  "remainingSeconds": ttl.remaining(now) if now is not None else None,
                  "warm": bool(ttl.expires_at is not None and now is not None and now < ttl.expires_at),
                  "tierSource": "recorded (usage.cache_creation.ephemeral_5m/1h)"},
        "history": {"records": list(records), "misses": list(misses),
                    "overallShare": run.main_read / run.main_prompt if run.main_prompt else None,
                    "requestShares": list(shares)},
        "totals": dict(run.totals),
        **recorded_cost(conv, run.cost_total if not unpriced else None),
        "pricedCostUsd": run.cost_total,
        "unpricedModels": sorted(unpriced),
        "pricingSource": f"{price_src['source']} (checked {price_src['checked']})",
        "decision": None,
        "note": "DS4's cache-aware policy applies to Pi only; Claude Code decides its own caching",
    }


@dataclass(frozen=True)
class _CacheRun:
    """`cache_report`'s running state after one request (what the next request's record needs):
    totals over the real requests, the priced cost, unpriced models, the previous main-chain
    request and its TTL tier, whether anything was written yet, how many misses and main-chain
    read shares the records so far hold, and the main chain's prompt and read tokens."""

    totals: tuple[tuple[str, int], ...] = (("requests", 0), ("inputTokens", 0), ("cacheReadTokens", 0),
                                           ("cacheWriteTokens", 0), ("outputTokens", 0))
    cost_total: float = 0.0
    unpriced: frozenset[str] = frozenset()
    prev: Request | None = None
    prev_tier: str | None = None
    tier: str | None = None
    wrote: bool = False
    last_main: Request | None = None
    misses: int = 0
    shares: int = 0
    main_prompt: int = 0
    main_read: int = 0


def _cache_step(run: _CacheRun, request: Request, compactions: Sequence[Compaction]) -> tuple[_CacheRun, dict[str, Any]]:
    """One request of `cache_report`: its record and the state after it."""
    u = request.usage
    price = _price_of(request.model)
    cost = None
    totals, cost_total, unpriced = run.totals, run.cost_total, run.unpriced
    if not request.synthetic:
        add = (1, u.input, u.cache_read, u.cache_write, u.output)
        totals = tuple((k, v + d) for (k, v), d in zip(totals, add))
        if price is not None:
            cost = price.cost(input=u.input, cache_write_5m=u.cache_write_5m, cache_write_1h=u.cache_write_1h,
                              cache_read=u.cache_read, output=u.output,
                              cache_write_unsplit=max(u.cache_write - u.cache_write_5m - u.cache_write_1h, 0))
            cost_total += cost
        elif request.model:
            unpriced = unpriced | {request.model}
    miss = None
    prev, prev_tier, tier, wrote, last_main = run.prev, run.prev_tier, run.tier, run.wrote, run.last_main
    main_prompt, main_read = run.main_prompt, run.main_read
    if not request.synthetic and not request.sidechain:
        if wrote and u.cache_read == 0 and u.cache_write > 0:
            if request.miss_reason:
                miss = {"cause": request.miss_reason, "source": "recorded"}
            else:
                gap = (request.timestamp - prev.timestamp) if prev and prev.timestamp and request.timestamp else None
                ttl = 3600.0 if prev_tier == "1h" else 300.0 if prev_tier == "5m" else None
                between = any(c.kind in ("manual", "auto") and c.timestamp is not None and prev is not None
                              and prev.timestamp is not None and request.timestamp is not None
                              and prev.timestamp <= c.timestamp <= request.timestamp for c in compactions)
                cause = infer_miss_cause(gap_seconds=gap, ttl_seconds=ttl, compaction_between=between,
                                         model_changed=prev is not None and prev.model != request.model)
                miss = {"cause": cause, "source": "inferred", "gapSeconds": gap}
        elif request.miss_reason:
            miss = {"cause": request.miss_reason, "source": "recorded"}
        if u.cache_write > 0:
            wrote = True
            tier = "5m" if u.cache_write_5m > 0 or u.cache_write_1h == 0 else "1h"
        prev, prev_tier, last_main = request, tier, request
        main_prompt += u.prompt_tokens
        main_read += u.cache_read
    share = u.cache_read_share
    record = {
        "index": request.index, "entryId": request.entry_id, "time": request.timestamp, "model": request.model,
        "sidechain": request.sidechain, "synthetic": request.synthetic,
        "share": share, "input": u.input, "cacheRead": u.cache_read, "cacheWrite": u.cache_write,
        "cacheWrite5m": u.cache_write_5m, "cacheWrite1h": u.cache_write_1h, "output": u.output,
        "costUsd": cost, "missReason": request.miss_reason, "miss": miss,
    }
    misses = run.misses + (miss is not None and not (u.cache_read > 0))
    shares = run.shares + (share is not None and not request.synthetic and not request.sidechain)
    return _CacheRun(totals, cost_total, unpriced, prev, prev_tier, tier, wrote, last_main, misses, shares,
                     main_prompt, main_read), record


@functools.lru_cache(maxsize=256)
def _price_of(model: str | None) -> Any:
    """`claude_price(model)`, once per model name (the table is bundled, read once)."""
    return claude_price(model)


def recorded_cost(conv: Conversation, computed: float | None) -> dict[str, Any]:
    """`{costUsd, costSource, recordedModelUsage}`: Claude Code's own cost when the transcript
    records it (2.1.337's `cost-state` rows: the session's `totalCostUSD` and per-model
    `modelUsage`, what its `--output-format json` result reports as `total_cost_usd` / `modelUsage`,
    subagents, compaction calls and the streamed part of an interrupted reply included), else
    `computed` from the requests at claude-prices.json's prices (None when a model has no price)."""
    state = conv.extra.get("costState")
    if isinstance(state, Mapping) and isinstance(state.get("totalCostUSD"), (int, float)):
        return {"costUsd": float(state["totalCostUSD"]), "costSource": "recorded by Claude Code (cost-state)",
                "recordedModelUsage": state.get("modelUsage")}
    return {"costUsd": computed, "costSource": "computed: requests × claude-prices.json", "recordedModelUsage": None}


def context_messages(conv: Conversation) -> dict[str, Any]:
    """`context --json`: the message list the model saw (Pi-shaped, with each message's meta)."""
    return {
        "agent": conv.agent,
        "path": str(conv.path),
        "sessionId": conv.session_id,
        "leafId": conv.leaf_id,
        "messageCount": len(conv.messages),
        "messages": [dict(m) for m in conv.messages],
        "meta": [{"entryId": m.entry_id, "category": m.category, "tool": m.tool, "source": m.source} for m in conv.meta],
        "note": "Claude Code also sends a system prompt, tool definitions and a leading <system-reminder> that the transcript does not record",
    }


def steering_refusal(conv_or_reason: Conversation | str) -> str:
    """The one-line reason steering is refused for a Claude Code session."""
    if isinstance(conv_or_reason, str):
        return conv_or_reason
    return conv_or_reason.capabilities.read_only_reason


__all__ = ["MESSAGE_CHILDREN", "compactions_json", "context_map", "recorded_rows", "window_facts", "request_count", "recorded_cost", "shown_category", "cache_report", "context_messages", "context_now",
           "anchor_request", "message_children", "messages_tokens", "rough_message_tokens", "later_rough_tokens",
           "autocompact_for", "steering_refusal"]


