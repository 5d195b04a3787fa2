"""OpenCode on the one dashboard: its context by category, OpenCode's own numbers, the cache.

- **Categories**: DS4's message kinds (counted with cl100k) for the messages OpenCode sends
  (`reader`), the compaction summary as "Compaction summary", the system prompt and tool
  definitions (not in the database) inferred from the first request as for Pi, and the space
  OpenCode keeps free for the reply ("Reserved for output": context − the overflow point, so the
  map shows where OpenCode compacts).
- **The provider's count** (the number every row is calibrated to): the last step's prompt,
  `input + cache.read + cache.write`, as OpenCode itself reports the context used (its ACP
  `usage_update` `used`, 1.18.33), plus the estimate of the messages after that step's reply
  (tool results and prompts the next request will add). OpenCode's TUI sidebar adds the reply
  (`input + output + reasoning + cache.read + cache.write` of the last reply with output): shown
  beside it, in OpenCode's words.
- **Cache**: every step once (`Conversation.requests`), the cost OpenCode recorded per step,
  the model table's prices and lifetimes when it knows the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ds4core.categories import CATEGORIES, CategoryTable, message_parts
from ds4core.models import ModelTable

from ds4sessions.agents.base import Conversation

RESERVED = "output_reserve"
"""The category of the space OpenCode keeps for the reply (window − overflow point)."""

OPENCODE_TABLE = CategoryTable(
    labels={
        "system_prompt": "System prompt",
        **{k: v for k, v in CATEGORIES.items() if k not in ("system_prompt", "tools", "bash", "branch_summary", "custom",
                                                             "unattributed", "free")},
        "unattributed": CATEGORIES["unattributed"],
        RESERVED: "Reserved for output",
        "free": CATEGORIES["free"],
    },
    roles={RESERVED: "reserved"},
    reserved=(RESERVED,),
)
"""OpenCode's categories: DS4's message kinds, the inferred system prompt and tools, and the
reserved space before OpenCode's overflow point."""


def opencode_parts(message: Mapping[str, Any]) -> list[tuple[str, str | None, Any]]:
    """`ds4core.categories.message_parts`, with the reader's `ds4Category` override (the
    compaction summary, sent as an assistant message, counts as "compaction")."""
    parts = message_parts(message)
    override = message.get("ds4Category") if isinstance(message, Mapping) else None
    if isinstance(override, str):
        return [(override, None, payload) for _, _, payload in parts]
    return parts


def _short(path: Any) -> str:
    """A path with the home folder as `~` (a legend line, not a place to act on)."""
    import os

    text, home = str(path), os.path.expanduser("~")
    return "~" + text[len(home):] if home not in ("", "/") and text.startswith(home + os.sep) else text


def _tokens(n: int | None) -> str:
    return f"{n:,}" if isinstance(n, int) else "?"


@dataclass(frozen=True)
class OpenCodeExtras:
    """OpenCode's own facts for the screen (`ingest.snapshot.AgentExtras`), from the reader's
    `Conversation.extra`."""

    extra: Mapping[str, Any] = field(repr=False)

    def header_note(self) -> str | None:
        """"compacts at 195.9k" (OpenCode's overflow point), or the database's problem."""
        from ds4core.tokens import fmt_tokens

        if self.extra.get("problem"):
            return "database unreadable: last state shown"
        auto = self.extra.get("autocompact") or {}
        if auto.get("enabled") and isinstance(auto.get("usable"), int):
            return f"compacts at {fmt_tokens(auto['usable'])}"
        return None

    def legend_lines(self) -> list[str]:
        """OpenCode's own count, the overflow rule, compactions, title generation, the window."""
        lines = []
        sidebar = self.extra.get("sidebar")
        if sidebar:
            pct = f", {sidebar['percent']}% used" if sidebar.get("percent") is not None else ""
            lines.append(f"OpenCode's sidebar: {_tokens(sidebar['tokens'])} tokens{pct} (last reply: input + output + "
                         "reasoning + cache)")
        auto = self.extra.get("autocompact") or {}
        window = self.extra.get("window") or {}
        if auto.get("enabled") and isinstance(auto.get("usable"), int):
            lines.append(f"auto-compaction when a step reaches {_tokens(auto['usable'])} tokens (OpenCode's overflow rule)")
        elif window.get("context"):
            lines.append("auto-compaction is off (compaction.auto: false)")
        for c in self.extra.get("compactions") or ():
            kind = "auto" if c.get("auto") else "manual"
            state = "" if c.get("completed") else " (not completed)"
            lines.append(f"compaction ({kind}){state}: {_tokens(c.get('tokensBefore'))} → summary "
                         f"{_tokens(c.get('summaryTokens'))} → next request {_tokens(c.get('tokensAfter'))}")
        titles = self.extra.get("titleGeneration") or {}
        if titles.get("calls"):
            lines.append(f"title generation: {titles['calls']} call{'s' if titles['calls'] != 1 else ''}, apart from the "
                         "conversation (OpenCode records no usage for it)")
        if window.get("context"):
            lines.append(f"window {_tokens(window['context'])} from {_short(window.get('source'))}")
        return lines

    def problems(self) -> list[str]:
        """The database's current problem (locked, corrupt, gone), an unfinished compaction,
        a window OpenCode's configuration does not give."""
        out = []
        if self.extra.get("problem"):
            out.append(f"{self.extra['problem']} (showing the last state read)")
        for c in self.extra.get("compactions") or ():
            if not c.get("completed"):
                out.append(f"compaction {c.get('messageId')} has no completed summary (OpenCode still sends the "
                           "messages before it)")
        return out

    def to_json(self) -> dict[str, Any]:
        """The reader's facts: `version`, `steps`, `stepTotals`, `sessionTotals`, `lastStep`,
        `sidebar`, `window`, `autocompact`, `compactions`, `titleGeneration`, `problem`."""
        keys = ("version", "steps", "stepTotals", "sessionTotals", "lastStep", "sidebar", "window", "autocompact",
                "compactions", "titleGeneration", "problem")
        return {k: self.extra.get(k) for k in keys}


def account(conv: Conversation, memo: dict[str, Any], models: ModelTable | None = None) -> Any:
    """The dashboard's accounting of an OpenCode conversation (module doc): an
    `ingest.conversation.Accounting`. The token ledger is kept in `memo` (a message whose rows
    did not change is not counted again)."""
    from ds4core.categories import attribute, compose_breakdown
    from ds4core.tokens import Cl100kCounter, TokenLedger

    from ds4sessions.agents.plugin import inferred_fixed, provider_view
    from ds4sessions.ingest.conversation import Accounting, model_info

    ledger = memo.get("ledger")
    if ledger is None:
        ledger = memo["ledger"] = TokenLedger(Cl100kCounter(), opencode_parts)
    attribution = _attribute(conv, memo, ledger, attribute)
    tokens = attribution.message_tokens
    fixed = inferred_fixed(conv, tokens)
    anchor = conv.last_request
    provider = None
    if anchor is not None and anchor.message_index is not None:
        later = sum(tokens[anchor.message_index + 1:])
        provider = provider_view(conv, tokens, fixed=fixed or 0, context_tokens=anchor.usage.prompt_tokens + later)
    model = model_info(conv.provider, conv.model, conv.context_window, models=models, source="OpenCode")
    window = model.context_window if model is not None else conv.context_window
    auto = conv.extra.get("autocompact") or {}
    reserved = None
    if window and auto.get("enabled") and isinstance(auto.get("usable"), int) and auto["usable"] < window:
        reserved = {RESERVED: window - auto["usable"]}
    bd = compose_breakdown(attribution, context_window=window, provider_tokens=provider.context_tokens if provider else None,
                           inferred_fixed_tokens=fixed, table=OPENCODE_TABLE, reserved=reserved)
    key = f"{conv.provider}/{conv.model}" if conv.model else None
    return Accounting(bd, provider, model, key, system_inferred=fixed is not None, extras=OpenCodeExtras(conv.extra))


OPEN_TAIL = 24
"""Context messages at the end that a write may still change (the step being streamed, its tool
results, the prompt being typed): the attribution before them is kept and extended."""


def _attribute(conv: Conversation, memo: dict[str, Any], ledger: Any, attribute: Any) -> Any:
    """`ds4core.categories.attribute` of `conv`'s messages, extending the kept attribution of
    the messages before the last `OPEN_TAIL` when they are the same objects as then (the reader
    keeps the dicts of unchanged messages): O(new messages) per write instead of O(messages);
    equal to a full attribution (`attribute` with `previous`). A compaction, a removed or an
    edited earlier message: counted from the start again."""
    messages = conv.messages
    ids = [m.entry_id for m in conv.meta]
    base = None
    kept = memo.get("kept")
    if kept is not None:
        count, objects, kept_ids, attribution = kept
        if len(messages) >= count and ids[:count] == kept_ids and all(a is b for a, b in zip(messages, objects)):
            base = attribution
    stable = max(0, len(messages) - OPEN_TAIL)
    if base is None or stable > len(base.message_tokens):
        base = attribute(messages[:stable], ids[:stable], ledger, previous=base)
        memo["kept"] = (stable, messages[:stable], ids[:stable], base)
    return attribute(messages, ids, ledger, previous=base)


def cache_facts(snapshot: Any, now: float, models: ModelTable | None = None) -> Any:
    """The prompt cache of an OpenCode snapshot (`agents.plugin.request_cache_facts`): every
    step once, OpenCode's recorded cost per step; a countdown only when the model table knows
    the model's prompt-cache lifetime (OpenCode records none)."""
    from ds4sessions.agents.plugin import request_cache_facts

    return request_cache_facts(
        snapshot, now, models, miss_causes=compaction_misses(snapshot.conversation),
        no_countdown="OpenCode records no prompt-cache lifetime, and the model table has none for this model")


def compaction_misses(conv: Conversation) -> dict[int, tuple[str, str]]:
    """Request index → (cause, detail) for the requests a compaction changed the prefix of: the
    summarisation call (its own system prompt, no tools: `SessionCompaction.process`) and the
    first request on the summary after it."""
    out: dict[int, tuple[str, str]] = {}
    requests = conv.requests
    for fact in conv.extra.get("compactions") or ():
        summary = fact.get("summaryMessageId")
        index = next((r.index for r in requests if summary is not None and r.entry_id == summary), None)
        if index is None:
            continue
        out[index] = ("prefix changed", "OpenCode's compaction call: its own system prompt, no tools, the whole "
                                        "conversation as one message")
        after = next((r.index for r in requests[index + 1:] if not r.sidechain), None)
        if after is not None:
            out[after] = ("prefix changed", "the first request on the compaction summary: a new context")
    return out
